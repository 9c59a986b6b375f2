/*
 * attention_avx512.c
 *		AVX-512 vector kernels of attention (see cpu/attention.h): 16 floats
 *		a step, f16 keys and values widened with vcvtph2ps, int8 ones with
 *		vpmovsxbd, the tail masked.
 */
#include "cpu/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,f16c,fma")
#endif

#include <immintrin.h>

/* 16 stored values from p + d (f32, f16 or int8), masked to the first n. */
static inline __m512
load16(const void *p, int d, int n, LlmKvType type)
{
	__mmask16	m = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);

	if (type == LLM_KV_F32)
		return _mm512_maskz_loadu_ps(m, (const float *) p + d);
	if (type == LLM_KV_F16)
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *) p + d));
	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, (const int8_t *) p + d)));
}

/* s_j = q . k_j. */
static void
avx512_scores(const float *q, const uint8_t *k, size_t stride, int nt, int hd, LlmKvType type, float *s)
{
	for (int j = 0; j < nt; j++)
	{
		const uint8_t *kj = k + (size_t) j * stride;
		__m512		sum = _mm512_setzero_ps();

		for (int d = 0; d < hd; d += 16)
		{
			int			n = hd - d;
			__mmask16	m = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);

			sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), load16(kj, d, n, type), sum);
		}
		s[j] = _mm512_reduce_add_ps(sum);
	}
}

/* acc *= c. */
static void
avx512_scale(float *acc, float c, int hd)
{
	__m512		vc = _mm512_set1_ps(c);

	for (int d = 0; d < hd; d += 16)
	{
		int			n = hd - d;
		__mmask16	m = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);

		_mm512_mask_storeu_ps(acc + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + d), vc));
	}
}

/* acc += sum_j w_j v_j, one 16-wide slice of acc at a time in a register. */
static void
avx512_accum(float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd, LlmKvType type)
{
	for (int d = 0; d < hd; d += 16)
	{
		int			n = hd - d;
		__mmask16	m = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);
		__m512		a = _mm512_maskz_loadu_ps(m, acc + d);

		for (int j = 0; j < nt; j++)
			a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), load16(v + (size_t) j * stride, d, n, type), a);
		_mm512_mask_storeu_ps(acc + d, m, a);
	}
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const LlmAttnKernels llm_attn_kernels_avx512 = {"avx512", avx512_scores, avx512_scale, avx512_accum};

#else

const LlmAttnKernels llm_attn_kernels_avx512 = {NULL, NULL, NULL, NULL};

#endif
