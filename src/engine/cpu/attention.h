/*
 * attention.h
 *		Fused attention over the paged KV cache for the CPU backend: one
 *		algorithm (tiled online softmax, cpu/attention.c) over small vector
 *		kernels chosen per SIMD level.
 */
#ifndef LLM_CPU_ATTENTION_H
#define LLM_CPU_ATTENTION_H

#include "backend.h"

/* The vector work of attention for one head; hd values, keys/values in the cache's type. */
typedef struct LlmAttnKernels
{
	const char *name;
	/* q (hd) . k (hd, stored) */
	float		(*dot) (const float *q, const void *k, int hd, LlmKvType type);
	/* acc (hd) *= c */
	void		(*scale) (float *acc, float c, int hd);
	/* acc (hd) += w * v (hd, stored) */
	void		(*axpy) (float *acc, float w, const void *v, int hd, LlmKvType type);
} LlmAttnKernels;

extern const LlmAttnKernels llm_attn_kernels_ref;
extern const LlmAttnKernels llm_attn_kernels_avx2;	/* name NULL when not compiled in */
extern const LlmAttnKernels llm_attn_kernels_avx512;

/* Attention of a batch (see LlmAttnArgs) with kernels k, spread over the backend's threads. */
void		llm_cpu_attention(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a,
							  const LlmAttnKernels *k);

#endif							/* LLM_CPU_ATTENTION_H */
