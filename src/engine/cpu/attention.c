/*
 * attention.c
 *		Fused attention over the paged KV cache, and its scalar kernels.
 *
 * For each query token and head: one pass over the token's visible keys in
 * tiles (the positions of one KV block, at most ATTN_TILE), keeping the running maximum m, the running sum l of
 * exp(s - m) and the accumulator acc of exp(s - m) * v (the online softmax
 * of FlashAttention, Dao et al. 2022; Milakov & Gimelshein 2018), so no
 * score row longer than a tile is ever stored.  Keys and values are read
 * through the sequence's block table where they lie; within a block they
 * are evenly spaced, so a kernel call covers a whole tile.  The dot
 * products and vector updates come from an LlmAttnKernels table: the
 * scalar ones below are the reference, cpu/attention_avx*.c the SIMD ones.
 */
#include "cpu/attention.h"

#include <math.h>
#include <string.h>

#define ATTN_TILE 64			/* keys scored per tile at most */

/* A stored KV value as a float. */
static inline float
kv_value(const void *p, int i, LlmKvType type)
{
	return type == LLM_KV_F32 ? ((const float *) p)[i] : llm_fp16_to_fp32(((const uint16_t *) p)[i]);
}

/* s_j = q . k_j, scalar. */
static void
ref_scores(const float *q, const uint8_t *k, size_t stride, int nt, int hd, LlmKvType type, float *s)
{
	for (int j = 0; j < nt; j++)
	{
		float		sum = 0.0f;

		for (int d = 0; d < hd; d++)
			sum += q[d] * kv_value(k + (size_t) j * stride, d, type);
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
			acc[d] += w[j] * kv_value(v + (size_t) j * stride, d, type);
}

const LlmAttnKernels llm_attn_kernels_ref = {"scalar", ref_scores, ref_scale, ref_accum};

typedef struct AttnTask
{
	const LlmKvCache *kv;
	int			layer;
	const LlmAttnArgs *a;
	const LlmAttnKernels *k;
} AttnTask;

/* Attention of one query token and head (task = token * n_heads + head). */
static void
attn_task(void *arg, int task)
{
	const AttnTask *t = arg;
	const LlmAttnArgs *a = t->a;
	const LlmKvCache *kv = t->kv;
	const LlmAttnKernels *k = t->k;
	int			i = task / a->n_heads;
	int			h = task % a->n_heads;
	int			hd = a->head_dim;
	size_t		head_off = (size_t) (h / (a->n_heads / a->n_kv_heads)) * hd * kv->elem_size;
	size_t		stride = (size_t) kv->kv_dim * kv->elem_size;
	int			bs = kv->block_size;
	const float *q = a->q + ((size_t) i * a->n_heads + h) * hd;
	float	   *out = a->out + ((size_t) i * a->n_heads + h) * hd;
	int			hi = a->pos[i];
	int			lo = a->window > 0 && hi - a->window + 1 > 0 ? hi - a->window + 1 : 0;
	float		m = -INFINITY;
	float		l = 0.0f;
	float		acc[hd];
	float		s[ATTN_TILE];

	memset(acc, 0, sizeof(acc));
	for (int p0 = lo; p0 <= hi;)
	{
		/* the tile: from p0 to the end of its block, the last position, or ATTN_TILE */
		int			end = (p0 / bs + 1) * bs - 1 < hi ? (p0 / bs + 1) * bs - 1 : hi;
		int			nt = end - p0 + 1 < ATTN_TILE ? end - p0 + 1 : ATTN_TILE;
		const uint8_t *kp = (const uint8_t *) llm_kv_k_at(kv, a->seq[i], t->layer, p0) + head_off;
		const uint8_t *vp = (const uint8_t *) llm_kv_v_at(kv, a->seq[i], t->layer, p0) + head_off;
		float		m_new = m;
		float		corr;

		/* scores of this tile */
		k->scores(q, kp, stride, nt, hd, kv->type, s);
		for (int j = 0; j < nt; j++)
		{
			s[j] *= a->scale;
			if (a->softcap > 0.0f)
				s[j] = a->softcap * tanhf(s[j] / a->softcap);
			if (s[j] > m_new)
				m_new = s[j];
		}
		/* rescale what was accumulated under the old maximum */
		corr = expf(m - m_new);
		l *= corr;
		k->scale(acc, corr, hd);
		m = m_new;
		/* accumulate this tile's values */
		for (int j = 0; j < nt; j++)
		{
			s[j] = expf(s[j] - m);
			l += s[j];
		}
		k->accum(acc, s, vp, stride, nt, hd, kv->type);
		p0 += nt;
	}
	for (int d = 0; d < hd; d++)
		out[d] = acc[d] / l;
}

/* Attention of a batch with kernels k, one task per (token, head). */
void
llm_cpu_attention(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a,
				  const LlmAttnKernels *k)
{
	AttnTask	t = {kv, layer, a, k};

	llm_pool_run(be->pool, a->n * a->n_heads, attn_task, &t);
}
