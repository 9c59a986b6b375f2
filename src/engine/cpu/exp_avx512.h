/*
 * exp_avx512.h
 *		exp of 16 floats for the AVX-512 kernels (attention's softmax, the
 *		GLU's sigmoid).  Include it inside a region compiled for avx512f.
 */
#ifndef LLM_CPU_EXP_AVX512_H
#define LLM_CPU_EXP_AVX512_H

#include <immintrin.h>

/*
 * exp(x) of 16 lanes: x = n ln 2 + r with n = round(x / ln 2) (ln 2 in two
 * parts, Cody and Waite), exp(r) by a degree-6 polynomial (Taylor;
 * |r| <= ln 2 / 2, relative error about 2e-7), times 2^n by vscalefps.
 * x below -104 (and -infinity) gives exactly 0, x above 88.7 infinity, NaN
 * stays NaN.
 */
static inline __attribute__((always_inline)) __m512
llm_exp16(__m512 x)
{
	const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
	const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
	const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
	__mmask16	tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_LT_OQ);
	/* clamped to [-104, 89] (2^128 and up: infinity); NaN stays NaN, the second operand */
	__m512		xc = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
	__m512		n = _mm512_roundscale_ps(_mm512_mul_ps(xc, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512		r = _mm512_fnmadd_ps(n, ln2_lo, _mm512_fnmadd_ps(n, ln2_hi, xc));
	__m512		p = _mm512_set1_ps(1.0f / 720.0f);

	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	return _mm512_maskz_mov_ps((__mmask16) ~tiny, _mm512_scalef_ps(p, n));
}

#endif							/* LLM_CPU_EXP_AVX512_H */
