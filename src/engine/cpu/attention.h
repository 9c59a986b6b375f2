/*
 * attention.h
 *		Fused attention over the paged KV cache for the CPU backend: one
 *		algorithm (tiled online softmax, cpu/attention.c) over small vector
 *		kernels chosen per SIMD level.
 */
#ifndef LLM_CPU_ATTENTION_H
#define LLM_CPU_ATTENTION_H

#include "backend.h"

/*
 * The vector work of attention for one head over a run of nt consecutive
 * positions of one KV block: key/value j (hd values in the cache's type)
 * starts stride bytes after key/value j - 1.
 */
typedef struct LlmAttnKernels
{
	const char *name;
	/* s (nt) = q (hd) . k_j */
	void		(*scores) (const float *q, const uint8_t *k, size_t stride, int nt, int hd,
						   LlmKvType type, float *s);
	/* acc (hd) *= c */
	void		(*scale) (float *acc, float c, int hd);
	/* acc (hd) += sum_j w_j * v_j */
	void		(*accum) (float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd,
						  LlmKvType type);
} LlmAttnKernels;

extern const LlmAttnKernels llm_attn_kernels_ref;
extern const LlmAttnKernels llm_attn_kernels_avx2;	/* name NULL when not compiled in */
extern const LlmAttnKernels llm_attn_kernels_avx512;

/* Attention of a batch (see LlmAttnArgs) with kernels k, spread over the backend's threads. */
void		llm_cpu_attention(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a,
							  const LlmAttnKernels *k);

#endif							/* LLM_CPU_ATTENTION_H */
