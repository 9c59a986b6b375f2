/*
 * attention_avx2.c
 *		AVX2 vector kernels of attention (see cpu/attention.h): 8 floats a
 *		step with FMA, f16 keys and values widened with F16C, int8 ones
 *		sign-extended, scalar tails.
 */
#include "cpu/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include <immintrin.h>

#include "cpu/avx2_util.h"

/* 8 stored values from p + d (f32, f16 or int8). */
static inline __m256
load8(const void *p, int d, LlmKvType type)
{
	if (type == LLM_KV_F32)
		return _mm256_loadu_ps((const float *) p + d);
	if (type == LLM_KV_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const uint16_t *) p + d)));
	return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *) ((const int8_t *) p + d))));
}

/* s_j = q . k_j. */
static void
avx2_scores(const float *q, const uint8_t *k, size_t stride, int nt, int hd, LlmKvType type, float *s)
{
	for (int j = 0; j < nt; j++)
	{
		const uint8_t *kj = k + (size_t) j * stride;
		__m256		sum = _mm256_setzero_ps();
		float		tail = 0.0f;
		int			d = 0;

		for (; d + 8 <= hd; d += 8)
			sum = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8(kj, d, type), sum);
		for (; d < hd; d++)
			tail += q[d] * llm_kv_value(kj, d, type);
		s[j] = llm_hsum8(sum) + tail;
	}
}

/* acc *= c. */
static void
avx2_scale(float *acc, float c, int hd)
{
	__m256		vc = _mm256_set1_ps(c);
	int			d = 0;

	for (; d + 8 <= hd; d += 8)
		_mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vc));
	for (; d < hd; d++)
		acc[d] *= c;
}

/* acc += sum_j w_j v_j, one 8-wide slice of acc at a time in a register. */
static void
avx2_accum(float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd, LlmKvType type)
{
	int			d = 0;

	for (; d + 8 <= hd; d += 8)
	{
		__m256		a = _mm256_loadu_ps(acc + d);

		for (int j = 0; j < nt; j++)
			a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), load8(v + (size_t) j * stride, d, type), a);
		_mm256_storeu_ps(acc + d, a);
	}
	for (; d < hd; d++)
		for (int j = 0; j < nt; j++)
			acc[d] += w[j] * llm_kv_value(v + (size_t) j * stride, d, type);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const LlmAttnKernels llm_attn_kernels_avx2 = {"avx2", avx2_scores, avx2_scale, avx2_accum, llm_attn_exp_sum_ref, NULL, NULL, NULL};

#else

const LlmAttnKernels llm_attn_kernels_avx2 = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

#endif
