/*
 * attention.c
 *		Fused attention over the paged KV cache, and its scalar kernels.
 *
 * For each query token and head: one pass over the token's visible keys in
 * tiles of ATTN_TILE, keeping the running maximum m, the running sum l of
 * exp(s - m) and the accumulator acc of exp(s - m) * v (the online softmax
 * of FlashAttention, Dao et al. 2022; Milakov & Gimelshein 2018), so no
 * score row longer than a tile is ever stored.  Keys and values are read
 * through the sequence's block table where they lie.  The dot products and
 * vector updates come from an LlmAttnKernels table: the scalar ones below
 * are the reference, cpu/attention_avx*.c the SIMD ones.
 */
#include "cpu/attention.h"

#include <math.h>
#include <string.h>

#define ATTN_TILE 32			/* keys scored per tile */

/* A stored KV value as a float. */
static inline float
kv_value(const void *p, int i, LlmKvType type)
{
	return type == LLM_KV_F32 ? ((const float *) p)[i] : llm_fp16_to_fp32(((const uint16_t *) p)[i]);
}

/* q . k, scalar. */
static float
ref_dot(const float *q, const void *k, int hd, LlmKvType type)
{
	float		sum = 0.0f;

	for (int d = 0; d < hd; d++)
		sum += q[d] * kv_value(k, d, type);
	return sum;
}

/* acc *= c, scalar. */
static void
ref_scale(float *acc, float c, int hd)
{
	for (int d = 0; d < hd; d++)
		acc[d] *= c;
}

/* acc += w * v, scalar. */
static void
ref_axpy(float *acc, float w, const void *v, int hd, LlmKvType type)
{
	for (int d = 0; d < hd; d++)
		acc[d] += w * kv_value(v, d, type);
}

const LlmAttnKernels llm_attn_kernels_ref = {"scalar", ref_dot, ref_scale, ref_axpy};

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
	const float *q = a->q + ((size_t) i * a->n_heads + h) * hd;
	float	   *out = a->out + ((size_t) i * a->n_heads + h) * hd;
	int			hi = a->pos[i];
	int			lo = a->window > 0 && hi - a->window + 1 > 0 ? hi - a->window + 1 : 0;
	float		m = -INFINITY;
	float		l = 0.0f;
	float		acc[hd];
	float		s[ATTN_TILE];

	memset(acc, 0, sizeof(acc));
	for (int p0 = lo; p0 <= hi; p0 += ATTN_TILE)
	{
		int			nt = hi - p0 + 1 < ATTN_TILE ? hi - p0 + 1 : ATTN_TILE;
		float		m_new = m;
		float		corr;

		/* scores of this tile */
		for (int j = 0; j < nt; j++)
		{
			const uint8_t *kp = llm_kv_k_at(kv, a->seq[i], t->layer, p0 + j);
			float		dot = k->dot(q, kp + head_off, hd, kv->type) * a->scale;

			if (a->softcap > 0.0f)
				dot = a->softcap * tanhf(dot / a->softcap);
			s[j] = dot;
			if (dot > m_new)
				m_new = dot;
		}
		/* rescale what was accumulated under the old maximum */
		corr = expf(m - m_new);
		l *= corr;
		k->scale(acc, corr, hd);
		m = m_new;
		/* accumulate this tile's values */
		for (int j = 0; j < nt; j++)
		{
			const uint8_t *vp = llm_kv_v_at(kv, a->seq[i], t->layer, p0 + j);
			float		w = expf(s[j] - m);

			l += w;
			k->axpy(acc, w, vp + head_off, hd, kv->type);
		}
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
