/*
 * attention.c
 *		Fused attention over the paged KV cache, and its scalar kernels.
 *
 * For each query token and head: one pass over the token's visible slots
 * in tiles (the slots of one KV block, at most LLM_ATTN_TILE), keeping the
 * running maximum m, the running sum l of exp(s - m) and the accumulator acc
 * of exp(s - m) * v (the online softmax of FlashAttention, Dao et al. 2022;
 * Milakov & Gimelshein 2018), so no score row longer than a tile is ever
 * stored.  Keys and values are read through the sequence's block table
 * where they lie; within a block they are evenly spaced, so a kernel call
 * covers a whole tile.  The dot products and vector updates come from an
 * LlmAttnKernels table: the scalar ones below are the reference,
 * cpu/attention_avx*.c the SIMD ones.
 *
 * H2O scores.  When sequences keep scores, the pass also keeps each scaled
 * score it computed (one float per visible slot) and, once m and l are
 * final, adds exp(s - m) / l -- the softmax probability -- to the key's
 * score.  The output is computed by exactly the same operations either way,
 * so tracking scores never changes a result.  Then one task owns a
 * (sequence, KV head): it runs the sequence's tokens and the query heads
 * of the group in turn and is the only writer of those scores.
 */
#include "cpu/attention.h"

#include <math.h>
#include <string.h>

#define ATTN_TASKS_PER_THREAD 4	/* tasks per thread at least, when the tokens are few */

/* s_j = q . k_j, scalar. */
static void
ref_scores(const float *q, const uint8_t *k, size_t stride, int nt, int hd, LlmKvType type, float *s)
{
	for (int j = 0; j < nt; j++)
	{
		float		sum = 0.0f;

		for (int d = 0; d < hd; d++)
			sum += q[d] * llm_kv_value(k + (size_t) j * stride, d, type);
		s[j] = sum;
	}
}

/* acc *= c, scalar. */
static void
ref_scale(float *acc, float c, int hd)
{
	for (int d = 0; d < hd; d++)
		acc[d] *= c;
}

/* acc += sum_j w_j v_j, scalar. */
static void
ref_accum(float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd, LlmKvType type)
{
	for (int j = 0; j < nt; j++)
		for (int d = 0; d < hd; d++)
			acc[d] += w[j] * llm_kv_value(v + (size_t) j * stride, d, type);
}

/* s_j = exp(s_j - m), scalar; their sum in order. */
float
llm_attn_exp_sum_ref(float *s, int nt, float m)
{
	float		l = 0.0f;

	for (int j = 0; j < nt; j++)
	{
		s[j] = expf(s[j] - m);
		l += s[j];
	}
	return l;
}

const LlmAttnKernels llm_attn_kernels_ref = {"scalar", ref_scores, ref_scale, ref_accum, llm_attn_exp_sum_ref, NULL, NULL, NULL};

typedef struct AttnTask
{
	const LlmKvCache *kv;
	int			layer;
	const LlmAttnArgs *a;
	const LlmAttnKernels *k;
	const int  *run_start;		/* (n_runs + 1) first token of each sequence's run (score tasks) */
	int			head_groups;	/* a token's query heads are cut into this many tasks */
} AttnTask;

/* The slots token i sees: [*lo, return value]; *mask when positions must be checked against the window. */
static int
visible_slots(const LlmAttnArgs *a, int i, int *lo, bool *mask)
{
	const LlmKvSeq *seq = a->seq[i];
	int			pos = a->pos[i];

	*lo = 0;
	*mask = false;
	if (a->window > 0 && pos - a->window + 1 > 0)
	{
		if (seq->n_evicted == 0)
			*lo = pos - a->window + 1;	/* slot == position */
		else
			*mask = true;
	}
	return pos - seq->n_evicted;
}

/*
 * Ask the caches for the keys and values of KV heads [g0, g1) in the nt
 * slots from p0 of token i's sequence, a tile before they are read: a
 * tile is one KV block's slots, a short run the hardware prefetchers only
 * pick up as it ends, so without this a batch's attention reads DRAM at
 * about half its speed.  No value changes.
 */
static void
prefetch_tile(const AttnTask *t, int i, int p0, int nt, int g0, int g1)
{
	const LlmKvCache *kv = t->kv;
	const LlmKvSeq *seq = t->a->seq[i];
	size_t		row = (size_t) kv->kv_dim * kv->elem_size;
	size_t		off = (size_t) g0 * t->a->head_dim * kv->elem_size;
	size_t		len = (size_t) (g1 - g0) * t->a->head_dim * kv->elem_size;
	const char *k = (const char *) llm_kv_k_at(kv, seq, t->layer, p0) + off;
	const char *v = (const char *) llm_kv_v_at(kv, seq, t->layer, p0) + off;

	for (int j = 0; j < nt; j++)
		for (size_t b = 0; b < len + 63; b += 64)
		{
			size_t		at = (size_t) j * row + (b < len ? b : len - 1);

			__builtin_prefetch(k + at);
			__builtin_prefetch(v + at);
		}
}

/*
 * The tile of nt slots from p0 for query token i and the nq query heads
 * from h (nq <= LLM_ATTN_MAX_HEADS, all of one KV head), into their states hs;
 * with probs (one head), the tile's scaled scores go to probs[p0 - lo ...].
 * The heads' keys and values are read once (scores_heads, accum_heads);
 * each head's operations are those it would have alone.
 */
static void
attend_tile(const AttnTask *t, int i, int h, int nq, int p0, int nt, bool mask, LlmAttnHead *hs, float *probs, int lo,
			int next_p0, int next_nt)
{
	const LlmAttnArgs *a = t->a;
	const LlmKvCache *kv = t->kv;
	const LlmAttnKernels *k = t->k;
	const LlmKvSeq *seq = a->seq[i];
	int			hd = a->head_dim;
	int			g = h / (a->n_heads / a->n_kv_heads);
	size_t		head_off = (size_t) g * hd * kv->elem_size;
	size_t		stride = (size_t) kv->kv_dim * kv->elem_size;
	bool		int8 = kv->type == LLM_KV_I8;
	const float *q = a->q + ((size_t) i * a->n_heads + h) * hd;
	const uint8_t *kp = (const uint8_t *) llm_kv_k_at(kv, seq, t->layer, p0) + head_off;
	const uint8_t *vp = (const uint8_t *) llm_kv_v_at(kv, seq, t->layer, p0) + head_off;
	int			win_lo = a->pos[i] - a->window + 1;
	float		s[LLM_ATTN_MAX_HEADS * LLM_ATTN_TILE];	/* (nq, nt) */
	bool		live[LLM_ATTN_MAX_HEADS];
	bool		all_live = true;

	if (k->tile != NULL && probs == NULL)
	{
		LlmAttnTile tile = {
			.q = q,.nq = nq,.hd = hd,.k = kp,.v = vp,.stride = stride,.nt = nt,.type = kv->type,
			.scale = a->scale,.softcap = a->softcap,
		};

		if (int8)
		{
			tile.k_scale = llm_kv_k_scale_at(kv, seq, t->layer, p0) + g;
			tile.v_scale = llm_kv_v_scale_at(kv, seq, t->layer, p0) + g;
			tile.scale_stride = (size_t) kv->n_kv_heads;
		}
		for (int j = 0; mask && j < nt; j++)
			if (seq->slot_pos[llm_kv_info_index(kv, p0 + j, t->layer, g)] < win_lo)
				tile.masked |= (uint64_t) 1 << j;
		if (next_nt > 0)
		{
			tile.next_k = (const uint8_t *) llm_kv_k_at(kv, seq, t->layer, next_p0) + head_off;
			tile.next_v = (const uint8_t *) llm_kv_v_at(kv, seq, t->layer, next_p0) + head_off;
			tile.next_nt = next_nt;
		}
		k->tile(&tile, hs);
		return;
	}
	if (next_nt > 0)
		prefetch_tile(t, i, next_p0, next_nt, g, g + 1);
	/* scores of this tile */
	if (nq > 1 && k->scores_heads != NULL)
		k->scores_heads(q, nq, kp, stride, nt, hd, kv->type, s);
	else
		for (int u = 0; u < nq; u++)
			k->scores(q + (size_t) u * hd, kp, stride, nt, hd, kv->type, s + u * nt);
	for (int u = 0; u < nq; u++)
	{
		float	   *su = s + u * nt;
		float		m_new = hs[u].m;
		float		corr;

		if (int8)
		{
			const float *ks = llm_kv_k_scale_at(kv, seq, t->layer, p0) + g;

			for (int j = 0; j < nt; j++)
				su[j] *= ks[(size_t) j * kv->n_kv_heads];
		}
		for (int j = 0; j < nt; j++)
		{
			su[j] *= a->scale;
			if (a->softcap > 0.0f)
				su[j] = a->softcap * tanhf(su[j] / a->softcap);
			if (mask && seq->slot_pos[llm_kv_info_index(kv, p0 + j, t->layer, g)] < win_lo)
				su[j] = -INFINITY;
			if (su[j] > m_new)
				m_new = su[j];
		}
		if (probs != NULL)
			memcpy(probs + (p0 - lo), su, (size_t) nt * sizeof(float));
		live[u] = m_new != -INFINITY;
		if (!live[u])
		{
			all_live = false;	/* every key so far is masked: nothing to add */
			continue;
		}
		/* rescale what was accumulated under the old maximum */
		corr = expf(hs[u].m - m_new);
		hs[u].l *= corr;
		k->scale(hs[u].acc, corr, hd);
		hs[u].m = m_new;
		/* this tile's weights */
		hs[u].l += k->exp_sum(su, nt, hs[u].m);
		if (int8)
		{
			const float *vs = llm_kv_v_scale_at(kv, seq, t->layer, p0) + g;

			for (int j = 0; j < nt; j++)
				su[j] *= vs[(size_t) j * kv->n_kv_heads];
		}
	}
	/* accumulate this tile's values (the heads' accumulators are consecutive rows) */
	if (nq > 1 && all_live && k->accum_heads != NULL)
		k->accum_heads(hs[0].acc, nq, s, vp, stride, nt, hd, kv->type);
	else
		for (int u = 0; u < nq; u++)
			if (live[u])
				k->accum(hs[u].acc, s + u * nt, vp, stride, nt, hd, kv->type);
}

/* The length of the tile from p0: to the end of its KV block, the last visible slot hi, or LLM_ATTN_TILE. */
static int
tile_length(const LlmKvCache *kv, int p0, int hi)
{
	int			bs = kv->block_size;
	int			end = (p0 / bs + 1) * bs - 1 < hi ? (p0 / bs + 1) * bs - 1 : hi;

	return end - p0 + 1 < LLM_ATTN_TILE ? end - p0 + 1 : LLM_ATTN_TILE;
}

/* Write query head h's output row of token i from its final state. */
static void
attend_finish(const AttnTask *t, int i, int h, const LlmAttnHead *hs)
{
	int			hd = t->a->head_dim;
	float	   *out = t->a->out + ((size_t) i * t->a->n_heads + h) * hd;

	for (int d = 0; d < hd; d++)
		out[d] = hs->acc[d] / hs->l;
}

/*
 * Attention of query token i for query heads [h0, h1): the tiles of its
 * visible slots in order, each taken by the heads in turn, so the keys and
 * values of a position (one row of kv_dim) are read together; every head
 * sees the same operations however the heads are grouped.  With probs (one
 * head only), the softmax probability of each visible slot j goes to
 * probs[j - lo].
 */
static void
attend_heads(const AttnTask *t, int i, int h0, int h1, float *probs)
{
	int			n_heads = h1 - h0;
	int			group = t->a->n_heads / t->a->n_kv_heads;	/* query heads per KV head */
	int			g0 = h0 / group;	/* the KV heads of [h0, h1): [g0, g1) */
	int			g1 = (h1 - 1) / group + 1;
	int			hd = t->a->head_dim;
	int			lo;
	bool		mask;
	int			hi = visible_slots(t->a, i, &lo, &mask);
	float		acc[n_heads * hd];
	LlmAttnHead	hs[n_heads];

	memset(acc, 0, sizeof(acc));
	for (int h = 0; h < n_heads; h++)
		hs[h] = (LlmAttnHead) {-INFINITY, 0.0f, acc + (size_t) h * hd};
	prefetch_tile(t, i, lo, tile_length(t->kv, lo, hi), g0, g1);
	for (int p0 = lo, nt; p0 <= hi; p0 += nt)
	{
		nt = tile_length(t->kv, p0, hi);
		/* runs of up to LLM_ATTN_MAX_HEADS heads of one KV head */
		for (int h = 0, nq; h < n_heads; h += nq)
		{
			int			left = group - (h0 + h) % group;

			nq = n_heads - h < left ? n_heads - h : left;
			if (nq > LLM_ATTN_MAX_HEADS)
				nq = LLM_ATTN_MAX_HEADS;
			/* the first run of a KV head fetches its next tile */
			attend_tile(t, i, h0 + h, nq, p0, nt, mask, &hs[h], probs, lo, p0 + nt,
						p0 + nt <= hi && (h == 0 || (h0 + h) % group == 0) ? tile_length(t->kv, p0 + nt, hi) : 0);
		}
	}
	for (int h = 0; h < n_heads; h++)
		attend_finish(t, i, h0 + h, &hs[h]);
	if (probs != NULL)
		for (int j = 0; j <= hi - lo; j++)
			probs[j] = expf(probs[j] - hs[0].m) / hs[0].l;
}

/* Attention of one query token for one group of heads (task = token * head_groups + group). */
static void
attn_task(void *arg, int task)
{
	const AttnTask *t = arg;
	int			i = task / t->head_groups;
	int			grp = task % t->head_groups;
	int			per = (t->a->n_heads + t->head_groups - 1) / t->head_groups;
	int			h0 = grp * per;
	int			h1 = h0 + per < t->a->n_heads ? h0 + per : t->a->n_heads;

	if (h0 < h1)
		attend_heads(t, i, h0, h1, NULL);
}

/* Attention of one sequence's tokens for the query heads of one KV head, adding H2O scores (task = run * n_kv_heads + head). */
static void
attn_score_task(void *arg, int task)
{
	const AttnTask *t = arg;
	const LlmAttnArgs *a = t->a;
	int			run = task / a->n_kv_heads;
	int			g = task % a->n_kv_heads;
	int			group = a->n_heads / a->n_kv_heads;
	int			first = t->run_start[run];
	int			last = t->run_start[run + 1] - 1;
	LlmKvSeq   *seq = a->seq[first];
	int			lo;
	bool		mask;
	float		probs[visible_slots(a, last, &lo, &mask) + 1];

	for (int i = first; i <= last; i++)
	{
		int			hi = visible_slots(a, i, &lo, &mask);

		for (int h = g * group; h < (g + 1) * group; h++)
		{
			attend_heads(t, i, h, h + 1, probs);
			for (int j = lo; j <= hi; j++)
				seq->score[llm_kv_info_index(t->kv, j, t->layer, g)] += probs[j - lo];
		}
	}
}

/* Attention of a batch with kernels k. */
void
llm_cpu_attention(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a,
				  const LlmAttnKernels *k)
{
	AttnTask	t = {kv, layer, a, k, NULL, 1};
	int			run_start[a->n + 1];
	int			n_runs = 0;

	if (a->seq[0]->score == NULL)
	{
		/* enough tasks to keep every thread busy when the tokens are few */
		t.head_groups = (ATTN_TASKS_PER_THREAD * llm_pool_size(be->pool) + a->n - 1) / a->n;
		if (t.head_groups > a->n_heads)
			t.head_groups = a->n_heads;
		llm_pool_run(be->pool, a->n * t.head_groups, attn_task, &t);
		return;
	}
	for (int i = 0; i < a->n; i++)
		if (i == 0 || a->seq[i] != a->seq[i - 1])
			run_start[n_runs++] = i;
	run_start[n_runs] = a->n;
	t.run_start = run_start;
	llm_pool_run(be->pool, n_runs * a->n_kv_heads, attn_score_task, &t);
}
