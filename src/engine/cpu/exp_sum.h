/*
 * exp_sum.h
 *		The sum of exp(x - max) over a row of logits, the costly half of a
 *		log-softmax (sampler.c's llm_logprob): one function per SIMD level.
 */
#ifndef LLM_CPU_EXP_SUM_H
#define LLM_CPU_EXP_SUM_H

/*
 * The sum over i < n of exp(x[i] - max), in double, a NaN x[i] adding 0;
 * max is the largest x[i] that is not NaN.  Each function sums in a fixed
 * order, so the same row gives the same bits every time.
 */
typedef double (*LlmExpSum) (const float *x, int n, float max);

/* The scalar reference: libm's exp in double, in index order. */
double		llm_exp_sum_ref(const float *x, int n, float max);

/*
 * AVX-512: llm_exp16 of 16 floats a step (relative error about 2e-7), each
 * lane's sum in double, the lanes added in order at the end; NULL when not
 * compiled in.
 */
extern const LlmExpSum llm_exp_sum_avx512;

/* The function for this process's SIMD level (cpu_features.h). */
LlmExpSum	llm_exp_sum_kernel(void);

#endif							/* LLM_CPU_EXP_SUM_H */
