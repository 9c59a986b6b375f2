/*
 * avx2_util.h
 *		Small AVX2 helpers shared by the AVX2 kernels (cpu/matmul_avx2.c,
 *		cpu/attention_avx2.c) and the AVX-512 ones (cpu/matmul_avx512.c).
 *		Include it after <immintrin.h>, inside the file's target region, so
 *		the helpers compile for that file's level.
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

/*
 * The eight 6-bit scales (bytes 0-7) and minimums (bytes 8-15) of a Q4_K or
 * Q5_K super-block from its 12 bytes at scales (the 4 after them are read
 * and unused): llm_k4_scales_mins' 32-bit masks on the words u0 u1 u2, in
 * one register -- words 0 and 2 are u0 and u1 masked to 6 bits, words 1
 * and 3 the low and high nibbles of u2 with the top two bits of u0 and u1.
 */
static inline __m128i
llm_q4k_scales_mins(const uint8_t *scales)
{
	const __m128i u = _mm_loadu_si128((const __m128i *) scales);
	const __m128i a = _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));	/* u0 u2 u1 u2 */
	const __m128i b = _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));	/* u0 u0 u1 u1 */
	__m128i		lo = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)), _mm_set1_epi8(0x0F));
	__m128i		hi = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(b, 6), _mm_set1_epi8(0x03)), 4);

	return _mm_blend_epi32(_mm_and_si128(a, _mm_set1_epi8(0x3F)), _mm_or_si128(lo, hi), 0x0A);
}

#endif							/* LLM_CPU_AVX2_UTIL_H */
