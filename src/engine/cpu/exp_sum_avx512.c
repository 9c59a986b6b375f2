/*
 * exp_sum_avx512.c
 *		exp_sum.h for AVX-512: 16 logits a step, the tail masked.
 *
 * Each step's 16 exps (llm_exp16, relative error about 2e-7; a NaN lane
 * masked to 0) are widened to double and added to 16 lane sums, which are
 * added in lane order at the end: a fixed order for any row, so the result
 * depends on the row alone.  Against the reference's libm exp in double
 * the sum differs by a few 1e-7 relative, a log-probability by as much.
 */
#include "cpu/exp_sum.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#endif

#include <immintrin.h>

#include "cpu/exp_avx512.h"

/* Add the exps of the lanes of x in mask (less max; NaN lanes add 0) to the lane sums lo and hi. */
static inline __attribute__((always_inline)) void
add_exps(__m512 x, __mmask16 mask, __m512 vmax, __m512d *lo, __m512d *hi)
{
	__mmask16	ordered = _mm512_mask_cmp_ps_mask(mask, x, x, _CMP_ORD_Q);
	__m512		e = _mm512_maskz_mov_ps(ordered, llm_exp16(_mm512_sub_ps(x, vmax)));

	*lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
	*hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_shuffle_f32x4(e, e, 0xEE))));
}

/* Sum of exp(x[i] - max) (see exp_sum.h). */
static double
exp_sum_avx512(const float *x, int n, float max)
{
	__m512		vmax = _mm512_set1_ps(max);
	__m512d		lo = _mm512_setzero_pd();
	__m512d		hi = _mm512_setzero_pd();
	double		lanes[16];
	double		sum = 0.0;
	int			i = 0;

	for (; i + 16 <= n; i += 16)
		add_exps(_mm512_loadu_ps(x + i), (__mmask16) 0xFFFF, vmax, &lo, &hi);
	if (i < n)
	{
		__mmask16	tail = (__mmask16) ((1u << (n - i)) - 1);

		add_exps(_mm512_maskz_loadu_ps(tail, x + i), tail, vmax, &lo, &hi);
	}
	_mm512_storeu_pd(lanes, lo);
	_mm512_storeu_pd(lanes + 8, hi);
	for (int j = 0; j < 16; j++)
		sum += lanes[j];
	return sum;
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const LlmExpSum llm_exp_sum_avx512 = exp_sum_avx512;

#else

const LlmExpSum llm_exp_sum_avx512 = NULL;

#endif
