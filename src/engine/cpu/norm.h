/*
 * norm.h
 *		RMSNorm for the CPU backend: the rows of one call cut into tasks on
 *		the pool by llm_cpu_rmsnorm, each task's rows run by a kernel of the
 *		SIMD level.  Every level gives the reference's bits: a row's sum of
 *		squares adds each square (a multiply, then an add) in order of the
 *		columns, then 1 / sqrt(ss / dim + eps) scales each element by (x *
 *		inv) * w, so a row's output never depends on the rows beside it.
 */
#ifndef LLM_CPU_NORM_H
#define LLM_CPU_NORM_H

#include "backend.h"

/* One call: y (n, dim) = x / rms(x) * w (or * (1 + w) with add_one); with r, x (n, dim) += r first. */
typedef struct LlmNormArgs
{
	float	   *x;				/* (n, dim) */
	const float *r;				/* (n, dim) the residual to add into x first, or NULL */
	const float *w;				/* (dim) */
	float	   *y;				/* (n, dim); may be x */
	int			n;
	int			dim;
	float		eps;
	bool		add_one;
} LlmNormArgs;

/* Rows [r0, r1) of a call. */
typedef void (*LlmNormRows) (const LlmNormArgs *a, int r0, int r1);

/* The scalar reference. */
void		llm_norm_rows_ref(const LlmNormArgs *a, int r0, int r1);

/* AVX-512: sixteen rows' sums side by side (cpu/norm_avx512.c); NULL when not compiled in. */
extern const LlmNormRows llm_norm_rows_avx512;

/* A call over the backend's threads (many rows), or on the caller (a few). */
void		llm_cpu_rmsnorm(LlmBackend *be, const LlmNormArgs *a, LlmNormRows rows);

#endif							/* LLM_CPU_NORM_H */
