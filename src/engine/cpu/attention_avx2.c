/*
 * attention_avx2.c
 *		AVX2 vector kernels of attention (see cpu/attention.h): 8 floats a
 *		step with FMA, f16 keys and values widened with F16C, scalar tails.
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

/* 8 stored values from p + d (f32 or f16). */
static inline __m256
load8(const void *p, int d, LlmKvType type)
{
	if (type == LLM_KV_F32)
		return _mm256_loadu_ps((const float *) p + d);
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const uint16_t *) p + d)));
}

/* One stored value as a float. */
static inline float
load1(const void *p, int d, LlmKvType type)
{
	return type == LLM_KV_F32 ? ((const float *) p)[d] : llm_fp16_to_fp32(((const uint16_t *) p)[d]);
}

/* Sum of the 8 lanes. */
static inline float
hsum8(__m256 v)
{
	__m128		s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* q . k. */
static float
avx2_dot(const float *q, const void *k, int hd, LlmKvType type)
{
	__m256		sum = _mm256_setzero_ps();
	int			d = 0;
	float		tail = 0.0f;

	for (; d + 8 <= hd; d += 8)
		sum = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8(k, d, type), sum);
	for (; d < hd; d++)
		tail += q[d] * load1(k, d, type);
	return hsum8(sum) + tail;
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

/* acc += w * v. */
static void
avx2_axpy(float *acc, float w, const void *v, int hd, LlmKvType type)
{
	__m256		vw = _mm256_set1_ps(w);
	int			d = 0;

	for (; d + 8 <= hd; d += 8)
		_mm256_storeu_ps(acc + d, _mm256_fmadd_ps(vw, load8(v, d, type), _mm256_loadu_ps(acc + d)));
	for (; d < hd; d++)
		acc[d] += w * load1(v, d, type);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const LlmAttnKernels llm_attn_kernels_avx2 = {"avx2", avx2_dot, avx2_scale, avx2_axpy};

#else

const LlmAttnKernels llm_attn_kernels_avx2 = {NULL, NULL, NULL, NULL};

#endif
