/*
 * matmul_avx2.c
 *		Matmul kernels for AVX2 + FMA + F16C (see matmul.h), compiled for that
 *		level whatever the build's -march, and run only after cpu_features.c
 *		has found it: the fast path of x86-64 processors without AVX-512.
 *		This file has the float types' kernels, the activation quantizers,
 *		the choice of the integer kernels' variant and the level's table;
 *		the integer kernels are in matmul_avx2_q.c (Q8_0, Q4_0, Q4_1, Q5_0,
 *		Q5_1) and matmul_avx2_k.c (the K-quants), see matmul_avx2.h.
 *
 * Float weights (F32, F16, BF16): a register tile of MR weight rows by NT
 * tokens, MR * NT dot products along k, each in the 8 lanes of a register
 * and summed across lanes at the end (hsum4: four rows at once); 8 weights
 * are widened to float (vcvtph2ps; BF16 by a 16-bit shift) and multiplied
 * with the float activations by FMA.  (These are not the AVX-512 level's
 * bits: its lanes are 16.)
 *
 * The integer kernels give the AVX-512 level's bits for every quantized
 * type, in either variant: AVX-VNNI's vpdpbusd where the processor has it,
 * else vpmaddubsw + vpmaddwd (llm_avx2_vnni decides once; the environment
 * variable LLM_CPU_AVXVNNI=0 forces the second, for tests and benchmarks).
 */
#include "cpu/matmul.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/avx2_util.h"
#include "cpu/matmul_avx2.h"
#include "quant_blocks.h"

/* Tile shape of the float kernels, rows by tokens. */
#define F_MR 4
#define F_NT 2

/* The sums of four vectors, as the four lanes of one. */
KERN __m128
hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
	/* per 128-bit lane: partial sums of a0, a1, a2, a3 */
	__m256		t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));

	return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* The sum of the int32 lanes of v. */
KERN int
hsum_i32(__m256i v)
{
	__m128i		s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));

	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
	return _mm_cvtsi128_si32(s);
}

/* Store the sums of the tile acc (MR rows, NT tokens) at y[t * ldy + r]. */
KERN void
store_tile(const LlmGemmArgs *a, int64_t r, int t, __m256 acc[4][4], const int MR, const int NT)
{
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		float	   *yq = a->y + (size_t) (t + q) * a->ldy + r;

		if (MR == 4)
			_mm_storeu_ps(yq, hsum4(acc[0][q], acc[1][q], acc[2][q], acc[3][q]));
		else
		{
#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
				yq[i] = llm_hsum8(acc[i][q]);
		}
	}
}

/*
 * A gemm function NAME over the rectangle: tiles of MRV rows by NTV tokens
 * through the macro NAME_full(t, NT), leftover rows through NAME_one.
 */
#define DEFINE_GEMM(NAME, MRV, NTV) \
static void \
NAME(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1) \
{ \
	int64_t		r = r0; \
	for (; r + (MRV) <= r1; r += (MRV)) \
		TOKEN_TILES(NAME##_full, NTV); \
	for (; r < r1; r++) \
		TOKEN_TILES(NAME##_one, NTV); \
}

/* ---- F32, F16, BF16 ---- */

/* 8 weights of a row of type from element j, as floats. */
KERN __m256
load_w8(LlmType type, const uint8_t *p, int64_t j)
{
	if (type == LLM_TYPE_F32)
		return _mm256_loadu_ps((const float *) p + j);
	if (type == LLM_TYPE_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (p + 2 * j)));
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) (p + 2 * j))), 16));
}

/* Tile of MR rows by NT tokens of a float-type weight against float activations. */
KERN void
tile_float(LlmType type, const LlmGemmArgs *a, int64_t r, int t, const int MR, const int NT)
{
	const int64_t k = a->k;
	const size_t esz = type == LLM_TYPE_F32 ? 4 : 2;
	const size_t pf = PF_GROUPS * MR * a->row_bytes;
	const uint8_t *w[4];
	const float *x[4];
	__m256		acc[4][4];
	int64_t		j = 0;

#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
		w[i] = a->w + (size_t) (r + i) * a->row_bytes;
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		x[q] = (const float *) (a->x + (size_t) (t + q) * a->x_stride);
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			acc[i][q] = _mm256_setzero_ps();
	}
	for (; j + 8 <= k; j += 8)
	{
		__m256		wv[4];

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			_mm_prefetch((const char *) (w[i] + pf + j * esz), _MM_HINT_T0);
			wv[i] = load_w8(type, w[i], j);
		}
#pragma GCC unroll 4
		for (int q = 0; q < NT; q++)
		{
			__m256		xv = _mm256_loadu_ps(x[q] + j);

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
				acc[i][q] = _mm256_fmadd_ps(wv[i], xv, acc[i][q]);
		}
	}
	if (j < k)
	{
		/* the last k - j (< 8) values, through zeroed buffers */
		const int	m = (int) (k - j);
		__m256		wv[4];

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			_Alignas(32) uint8_t tail[32] = {0};

			memcpy(tail, w[i] + j * esz, (size_t) m * esz);
			wv[i] = load_w8(type, tail, 0);
		}
#pragma GCC unroll 4
		for (int q = 0; q < NT; q++)
		{
			_Alignas(32) float xt[8] = {0};
			__m256		xv;

			memcpy(xt, x[q] + j, (size_t) m * sizeof(float));
			xv = _mm256_load_ps(xt);
#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
				acc[i][q] = _mm256_fmadd_ps(wv[i], xv, acc[i][q]);
		}
	}
	store_tile(a, r, t, acc, MR, NT);
}

#define gemm_f32_full(T, NT) tile_float(LLM_TYPE_F32, a, r, T, F_MR, NT)
#define gemm_f32_one(T, NT) tile_float(LLM_TYPE_F32, a, r, T, 1, NT)
#define gemm_f16_full(T, NT) tile_float(LLM_TYPE_F16, a, r, T, F_MR, NT)
#define gemm_f16_one(T, NT) tile_float(LLM_TYPE_F16, a, r, T, 1, NT)
#define gemm_bf16_full(T, NT) tile_float(LLM_TYPE_BF16, a, r, T, F_MR, NT)
#define gemm_bf16_one(T, NT) tile_float(LLM_TYPE_BF16, a, r, T, 1, NT)

/* The gemm of F32 weights. */
DEFINE_GEMM(gemm_f32, F_MR, F_NT)
/* The gemm of F16 weights. */
DEFINE_GEMM(gemm_f16, F_MR, F_NT)
/* The gemm of BF16 weights. */
DEFINE_GEMM(gemm_bf16, F_MR, F_NT)

/* ---- activation quantizers (bit-exact with quantize_act.c) ---- */

/*
 * Quantize the n * 8 values at x with one scale into q (int8) and their
 * int32 sum into *sum; returns the scale (NaN if any value is not finite).
 */
KERN float
quant_block8(const float *x, int n, int8_t *q, int *sum)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256		amax = _mm256_setzero_ps();
	int			bad = 0;
	__m256i		s = _mm256_setzero_si256();
	float		d;
	float		id;
	__m256		vid;
	__m128		m;

	for (int i = 0; i < n; i++)
	{
		__m256		v = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i));

		bad |= _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(INFINITY), _CMP_NLT_UQ));
		amax = _mm256_max_ps(amax, v);
	}
	if (bad)
	{
		memset(q, 0, (size_t) n * 8);
		*sum = 0;
		return NAN;
	}
	m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	d = _mm_cvtss_f32(m) / 127.0f;
	id = d != 0.0f ? 1.0f / d : 0.0f;
	vid = _mm256_set1_ps(id);
	for (int i = 0; i < n; i += 4)
	{
		/* four vectors of int32, packed to 32 bytes in order */
		__m256i		v0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vid));
		__m256i		v1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i + 8), vid));
		__m256i		v2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i + 16), vid));
		__m256i		v3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i + 24), vid));
		__m256i		p;

		s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(v0, v1), _mm256_add_epi32(v2, v3)));
		p = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
		/* the packs work within 128-bit lanes: restore the order of the 32-bit groups */
		p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
		_mm256_storeu_si256((__m256i *) (q + 8 * i), p);
	}
	*sum = hsum_i32(s);
	return d;
}

/* Quantize one token's k activations to LLM_ACT_Q8. */
static void
quant_q8(const float *x, int64_t k, uint8_t *out)
{
	int8_t	   *qs = (int8_t *) out;
	float	   *d = (float *) (out + llm_act_d_offset(k));
	int32_t    *sums = (int32_t *) (out + llm_act_sums_offset(k));

	for (int64_t b = 0; b < k / LLM_QK; b++)
	{
		int			s;

		d[b] = quant_block8(x + b * LLM_QK, LLM_QK / 8, qs + b * LLM_QK, &s);
		sums[b] = s;
	}
}

/* Quantize one token's k activations to LLM_ACT_Q8K (the first step of LLM_ACT_Q8KI). */
static void
quant_q8k(const float *x, int64_t k, uint8_t *out)
{
	int8_t	   *qs = (int8_t *) out;
	float	   *d = (float *) (out + llm_act_d_offset(k));
	int16_t    *bsums = (int16_t *) (out + llm_act_bsums_offset(k));

	for (int64_t b = 0; b < k / LLM_QK_K; b++)
	{
		const int8_t *q = qs + b * LLM_QK_K;
		int			s;

		d[b] = quant_block8(x + b * LLM_QK_K, LLM_QK_K / 8, qs + b * LLM_QK_K, &s);
		for (int j = 0; j < LLM_QK_K / 16; j++)
		{
			/* sum of 16 quants: vpmaddubsw by ones into pairs, vpmaddwd into fours */
			__m128i		p = _mm_madd_epi16(_mm_maddubs_epi16(_mm_set1_epi8(1), _mm_loadu_si128((const __m128i *) (q + 16 * j))),
										   _mm_set1_epi16(1));

			p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
			p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
			bsums[b * (LLM_QK_K / 16) + j] = (int16_t) _mm_cvtsi128_si32(p);
		}
	}
}

/*
 * Quantize one token's k activations to LLM_ACT_Q8KI: Q8K's, then each
 * block's quants dealt out to the K tiles' lanes (matmul_avx2_k.c's
 * transpose, on each 32-byte half of its four chunks of 64) and its sums
 * of 16 put in the same order.
 */
static void
quant_q8ki(const float *x, int64_t k, uint8_t *out)
{
	static const int order[16] = {LLM_Q8KI_ORDER};
	int8_t	   *qs = (int8_t *) out;
	int16_t    *bsums = (int16_t *) (out + llm_act_bsums_offset(k));

	quant_q8k(x, k, out);
	for (int64_t b = 0; b < k / LLM_QK_K; b++)
	{
		int8_t	   *q = qs + b * LLM_QK_K;
		int16_t		s[16];

		for (int h = 0; h < 2; h++)
		{
			__m256i		v[4];
			__m256i		t0,
						t1,
						t2,
						t3;

			for (int c = 0; c < 4; c++)
				v[c] = _mm256_loadu_si256((const __m256i *) (q + 64 * c + 32 * h));
			t0 = _mm256_unpacklo_epi32(v[0], v[1]);
			t1 = _mm256_unpackhi_epi32(v[0], v[1]);
			t2 = _mm256_unpacklo_epi32(v[2], v[3]);
			t3 = _mm256_unpackhi_epi32(v[2], v[3]);
			_mm256_storeu_si256((__m256i *) (q + 32 * h), _mm256_unpacklo_epi64(t0, t2));
			_mm256_storeu_si256((__m256i *) (q + 64 + 32 * h), _mm256_unpackhi_epi64(t0, t2));
			_mm256_storeu_si256((__m256i *) (q + 128 + 32 * h), _mm256_unpacklo_epi64(t1, t3));
			_mm256_storeu_si256((__m256i *) (q + 192 + 32 * h), _mm256_unpackhi_epi64(t1, t3));
		}
		memcpy(s, bsums + 16 * b, sizeof(s));
		for (int e = 0; e < 16; e++)
			bsums[16 * b + e] = s[order[e]];
	}
}

/* ---- the choice of the integer kernels' variant ---- */

static bool use_vnni;
static pthread_once_t vnni_once = PTHREAD_ONCE_INIT;

/*
 * Decide the variant: AVX-VNNI where CPUID leaf 7, sub-leaf 1 reports it
 * (EAX bit 4; the AVX state it needs is the AVX2 level's), unless the
 * environment variable LLM_CPU_AVXVNNI is 0 or off (so the tests and
 * benchmarks can run the other variant on such a processor).
 */
static void
choose_vnni(void)
{
	const char *env = getenv("LLM_CPU_AVXVNNI");
	unsigned int eax,
				ebx,
				ecx,
				edx;

	use_vnni = LLM_AVX2_HAVE_VNNI && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4)) != 0 &&
		!(env != NULL && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0));
}

/* Whether the integer kernels take AVX-VNNI; decided once. */
bool
llm_avx2_vnni(void)
{
	pthread_once(&vnni_once, choose_vnni);
	return use_vnni;
}

const LlmMatmulKernels llm_matmul_kernels_avx2 = {
	.name = "avx2",
	.gemm = {
		[LLM_TYPE_F32] = gemm_f32,
		[LLM_TYPE_F16] = gemm_f16,
		[LLM_TYPE_BF16] = gemm_bf16,
		[LLM_TYPE_Q8_0] = llm_avx2_gemm_q8_0,
		[LLM_TYPE_Q4_0] = llm_avx2_gemm_q4_0,
		[LLM_TYPE_Q4_1] = llm_avx2_gemm_q4_1,
		[LLM_TYPE_Q5_0] = llm_avx2_gemm_q5_0,
		[LLM_TYPE_Q5_1] = llm_avx2_gemm_q5_1,
		[LLM_TYPE_Q2_K] = llm_avx2_gemm_q2_k,
		[LLM_TYPE_Q3_K] = llm_avx2_gemm_q3_k,
		[LLM_TYPE_Q4_K] = llm_avx2_gemm_q4_k,
		[LLM_TYPE_Q5_K] = llm_avx2_gemm_q5_k,
		[LLM_TYPE_Q6_K] = llm_avx2_gemm_q6_k,
	},
	.act = {
		[LLM_TYPE_Q8_0] = LLM_ACT_Q8,
		[LLM_TYPE_Q4_0] = LLM_ACT_Q8,
		[LLM_TYPE_Q4_1] = LLM_ACT_Q8,
		[LLM_TYPE_Q5_0] = LLM_ACT_Q8,
		[LLM_TYPE_Q5_1] = LLM_ACT_Q8,
		[LLM_TYPE_Q2_K] = LLM_ACT_Q8KI,
		[LLM_TYPE_Q3_K] = LLM_ACT_Q8KI,
		[LLM_TYPE_Q4_K] = LLM_ACT_Q8KI,
		[LLM_TYPE_Q5_K] = LLM_ACT_Q8KI,
		[LLM_TYPE_Q6_K] = LLM_ACT_Q8KI,
	},
	.quant = {
		[LLM_ACT_Q8] = quant_q8,
		[LLM_ACT_Q8KI] = quant_q8ki,
	},
};

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else							/* not x86-64 with GCC or Clang */

const LlmMatmulKernels llm_matmul_kernels_avx2 = {0};

#endif
