/*
 * matmul_avx2.h
 *		Private to the AVX2 matmul kernels (matmul_avx2.c: float types, the
 *		activation quantizers and the level's table; matmul_avx2_q.c: Q8_0,
 *		Q4_0, Q4_1, Q5_0, Q5_1; matmul_avx2_k.c: the K-quants): the helpers
 *		they share and the gemms the table takes from the other two files.
 *		Include it after <immintrin.h>, inside the file's target region.
 *
 * The integer kernels follow matmul_avx512.c's order of operations lane for
 * lane: what AVX-512 keeps in the 16 lanes of one zmm register is kept here
 * in two ymm registers, lanes 0-7 ("lo", half 0) and 8-15 ("hi", half 1),
 * and every lane gets the same exact integer sums and the same float
 * operations in the same order, summed at the end by hsum4's tree.  So the
 * AVX2 level gives the AVX-512 level's bits for every quantized type.
 *
 * The integer dot products come in two variants, chosen once per process
 * (llm_avx2_vnni): AVX-VNNI's vpdpbusd where the processor has it (Alder
 * Lake, Sapphire Rapids, Zen 5 and later), else vpmaddubsw (pairs of
 * unsigned by signed bytes into int16) and vpmaddwd by ones into int32:
 * the same sums in the same lanes, since no kernel lets a pair reach
 * 32767.  Each kernel is one body instantiated for each variant.
 */
#ifndef LLM_CPU_MATMUL_AVX2_H
#define LLM_CPU_MATMUL_AVX2_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/matmul.h"

#define KERN static inline __attribute__((always_inline))

/*
 * Prefetch the weights this many row tiles ahead (rows are contiguous, so
 * this walks the chunk), and at least PF_MIN_BYTES: two short rows are too
 * near to hide DRAM's latency (one thread, Q2_K 2048 x 768 streamed from
 * 64 MB: 6.2-6.5 GB/s two rows ahead, 7.5-9.2 at 2 kB or more).
 */
#define PF_GROUPS 2
#define PF_MIN_BYTES 2048

/* How far ahead to prefetch a tile of MR rows of row_bytes. */
KERN size_t
prefetch_distance(size_t row_bytes, const int MR)
{
	size_t		d = PF_GROUPS * (size_t) MR * row_bytes;

	return d < PF_MIN_BYTES ? PF_MIN_BYTES : d;
}

/*
 * Whether the assembler takes AVX-VNNI's {vex} vpdpbusd (binutils 2.36,
 * which GCC 11 and Clang 12 expect): without, the madd variant only.
 */
#if (defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11)
#define LLM_AVX2_HAVE_VNNI 1
#else
#define LLM_AVX2_HAVE_VNNI 0
#endif

/* Whether the integer kernels take AVX-VNNI (the processor has it, LLM_CPU_AVXVNNI is not 0); decided once. */
bool		llm_avx2_vnni(void);

/*
 * acc plus, in each 32-bit lane, the dot product of that lane's four
 * unsigned bytes of u with its four signed bytes of s (vpdpbusd).  With
 * vnni by AVX-VNNI's instruction, written as an instruction rather than
 * _mm256_dpbusd_avx_epi32, whose target attribute every function it is
 * inlined through would need, so one kernel body serves both variants and
 * only functions given vnni = true, after llm_avx2_vnni, run it.  Else by
 * vpmaddubsw and vpmaddwd: exact while each pair u0 s0 + u1 s1 stays
 * within int16, which every caller ensures (u < 128, or the sign trick).
 */
KERN __m256i
dot_u8s8(__m256i acc, __m256i u, __m256i s, const bool vnni)
{
#if LLM_AVX2_HAVE_VNNI
	if (vnni)
	{
		__asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
		return acc;
	}
#endif
	return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

/* Prefetch the n bytes at p (n a constant: unrolled). */
KERN void
prefetch_bytes(const uint8_t *p, const size_t n)
{
	for (size_t o = 0; o < n; o += 64)
		_mm_prefetch((const char *) p + o, _MM_HINT_T0);
	_mm_prefetch((const char *) p + n - 1, _MM_HINT_T0);
}

/*
 * The sums of four rows' 16 lanes (a[i][0]: lanes 0-7, a[i][1]: 8-15) as
 * the four lanes of one, by matmul_avx512.c's hsum4 tree: per 128-bit lane
 * (x0 + x2) + (x1 + x3), then those of lanes 0 and 2 and of 1 and 3, then
 * the two.
 */
KERN __m128
hsum4x16(__m256 a0[2], __m256 a1[2], __m256 a2[2], __m256 a3[2])
{
	__m256		u[2];

#pragma GCC unroll 2
	for (int h = 0; h < 2; h++)
	{
		__m256		t0 = _mm256_add_ps(_mm256_unpacklo_ps(a0[h], a1[h]), _mm256_unpackhi_ps(a0[h], a1[h]));
		__m256		t1 = _mm256_add_ps(_mm256_unpacklo_ps(a2[h], a3[h]), _mm256_unpackhi_ps(a2[h], a3[h]));

		u[h] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t1))),
							 _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t1))));
	}
	u[0] = _mm256_add_ps(u[0], u[1]);
	return _mm_add_ps(_mm256_castps256_ps128(u[0]), _mm256_extractf128_ps(u[0], 1));
}

/* The sum of one row's 16 lanes (a[0]: lanes 0-7, a[1]: 8-15) by hsum4x16's tree. */
KERN float
hsum16(const __m256 a[2])
{
	__m256		u[2];

#pragma GCC unroll 2
	for (int h = 0; h < 2; h++)
	{
		/* per 128-bit lane: x0 + x2, x1 + x3, then their sum */
		__m256		t = _mm256_add_ps(a[h], _mm256_permute_ps(a[h], _MM_SHUFFLE(1, 0, 3, 2)));

		u[h] = _mm256_add_ps(t, _mm256_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
	}
	u[0] = _mm256_add_ps(u[0], u[1]);
	return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u[0]), _mm256_extractf128_ps(u[0], 1)));
}

/*
 * Store the sums of the 16-lane tile acc (MR rows, NT tokens) at y[t * ldy
 * + r]: every row by hsum4x16's tree whatever MR, so a row has the same
 * bits in a tile of 4, 2 or 1 rows (and as on the AVX-512 level).
 */
KERN void
store_tile16(const LlmGemmArgs *a, int64_t r, int t, __m256 acc[4][4][2], const int MR, const int NT)
{
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		float	   *yq = a->y + (size_t) (t + q) * a->ldy + r;
		__m128		v;

		if (MR == 1)
		{
			yq[0] = hsum16(acc[0][q]);
			continue;
		}
		v = hsum4x16(acc[0][q], acc[1][q], acc[MR > 2 ? 2 : 0][q], acc[MR > 3 ? 3 : 0][q]);
		if (MR == 4)
			_mm_storeu_ps(yq, v);
		else
		{
			_Alignas(16) float sums[4];

			_mm_store_ps(sums, v);
#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
				yq[i] = sums[i];
		}
	}
}

/*
 * 8 x 8 transpose of dwords: lane k of out[s] gets dword s of v[k]
 * (unpacks within 128-bit lanes, then the halves exchanged).
 */
KERN void
transpose8x32(const __m256i *v, __m256i *out)
{
	__m256i		t[8];
	__m256i		u[8];

#pragma GCC unroll 2
	for (int h = 0; h < 2; h++)	/* v[4h .. 4h + 3] */
	{
		t[4 * h] = _mm256_unpacklo_epi32(v[4 * h], v[4 * h + 1]);
		t[4 * h + 1] = _mm256_unpackhi_epi32(v[4 * h], v[4 * h + 1]);
		t[4 * h + 2] = _mm256_unpacklo_epi32(v[4 * h + 2], v[4 * h + 3]);
		t[4 * h + 3] = _mm256_unpackhi_epi32(v[4 * h + 2], v[4 * h + 3]);
		/* per 128-bit lane, dword d (0-3, or 4-7 in the high lane) of the four: u[4h + d] */
		u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
		u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
	}
#pragma GCC unroll 4
	for (int d = 0; d < 4; d++)
	{
		out[d] = _mm256_permute2x128_si256(u[d], u[4 + d], 0x20);
		out[d + 4] = _mm256_permute2x128_si256(u[d], u[4 + d], 0x31);
	}
}

/* The gemms of matmul_avx2_q.c. */
void		llm_avx2_gemm_q8_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);
void		llm_avx2_gemm_q4_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);
void		llm_avx2_gemm_q4_1(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);
void		llm_avx2_gemm_q5_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);
void		llm_avx2_gemm_q5_1(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);

/* The gemms of matmul_avx2_k.c. */
void		llm_avx2_gemm_q2_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);
void		llm_avx2_gemm_q3_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);
void		llm_avx2_gemm_q4_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);
void		llm_avx2_gemm_q5_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);
void		llm_avx2_gemm_q6_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);

#endif							/* LLM_CPU_MATMUL_AVX2_H */
