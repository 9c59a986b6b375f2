/*
 * transpose_avx512.h
 *		Private: a 16 x 16 transpose of dwords in zmm registers, for the
 *		AVX-512 files (included inside their target pragmas).
 */
#ifndef LLM_CPU_TRANSPOSE_AVX512_H
#define LLM_CPU_TRANSPOSE_AVX512_H

#include <immintrin.h>

/* Transpose the 16 x 16 dwords of r in place: dword j of r[i] becomes dword i of r[j] (64 shuffles). */
static inline __attribute__((always_inline)) void
llm_transpose16(__m512i r[16])
{
	__m512i		t[16];

#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
	{
		t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
	}
	/* r[4i + j], 128-bit lane L: dword 4L + j of the input rows 4i .. 4i + 3 */
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
	{
		r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	/* per j, a 4 x 4 transpose of 128-bit lanes: lane L of r[4i + j] to lane i of output 4L + j */
#pragma GCC unroll 4
	for (int j = 0; j < 4; j++)
	{
		__m512i		v0 = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
		__m512i		v1 = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
		__m512i		v2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
		__m512i		v3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(3, 2, 3, 2));

		t[j] = _mm512_shuffle_i32x4(v0, v2, _MM_SHUFFLE(2, 0, 2, 0));
		t[4 + j] = _mm512_shuffle_i32x4(v0, v2, _MM_SHUFFLE(3, 1, 3, 1));
		t[8 + j] = _mm512_shuffle_i32x4(v1, v3, _MM_SHUFFLE(2, 0, 2, 0));
		t[12 + j] = _mm512_shuffle_i32x4(v1, v3, _MM_SHUFFLE(3, 1, 3, 1));
	}
#pragma GCC unroll 16
	for (int i = 0; i < 16; i++)
		r[i] = t[i];
}

#endif							/* LLM_CPU_TRANSPOSE_AVX512_H */
