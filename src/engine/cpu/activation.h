/*
 * activation.h
 *		The GLU's element-wise kernels for the CPU backend: act(gate) * up
 *		over a range, one function per SIMD level, run on the pool by
 *		llm_cpu_glu.
 */
#ifndef LLM_CPU_ACTIVATION_H
#define LLM_CPU_ACTIVATION_H

#include "backend.h"

/* out[i] = act(gate[i]) * up[i] for i < n; every element by the same operations, whatever n. */
typedef void (*LlmGluRange) (const float *gate, const float *up, float *out, int64_t n, LlmActivation act);

/* The scalar reference: SiLU g / (1 + expf(-g)), GELU 0.5 g (1 + tanhf(...)) (libm). */
void		llm_glu_range_ref(const float *gate, const float *up, float *out, int64_t n, LlmActivation act);

/* AVX-512: both as g / (1 + exp(-z)) with llm_exp16; NULL when not compiled in. */
extern const LlmGluRange llm_glu_range_avx512;

/* out (n) = act(gate) * up by range over the backend's threads. */
void		llm_cpu_glu(LlmBackend *be, const float *gate, const float *up, float *out, int64_t n, LlmActivation act,
						LlmGluRange range);

#endif							/* LLM_CPU_ACTIVATION_H */
