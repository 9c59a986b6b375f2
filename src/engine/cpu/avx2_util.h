/*
 * avx2_util.h
 *		Small AVX2 helpers shared by the AVX2 kernels (cpu/matmul_avx2.c,
 *		cpu/attention_avx2.c).  Include it after <immintrin.h>, inside the
 *		file's avx2 target region, so the helpers compile for AVX2 too.
 */
#ifndef LLM_CPU_AVX2_UTIL_H
#define LLM_CPU_AVX2_UTIL_H

/* The sum of the 8 float lanes of v. */
static inline float
llm_hsum8(__m256 v)
{
	__m128		s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

#endif							/* LLM_CPU_AVX2_UTIL_H */
