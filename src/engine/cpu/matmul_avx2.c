/*
 * matmul_avx2.c
 *		Matmul kernels for AVX2 + FMA + F16C (see matmul.h), compiled for that
 *		level whatever the build's -march, and run only after cpu_features.c
 *		has found it: the fast path of x86-64 processors without AVX-512.
 *
 * The same plan as matmul_avx512.c with 8-lane ymm registers and no
 * unpacking into buffers: a register tile of MR weight rows by NT tokens,
 * MR * NT dot products along k, each in the 8 lanes of a register and
 * summed across lanes at the end (hsum4: four rows at once).
 *
 * Float weights: 8 weights are widened to float (vcvtph2ps; BF16 by a
 * 16-bit shift) and multiplied with the float activations by FMA.
 *
 * Q8_0 and Q4_0 against Q8 activations, one block (32 values) a step, with
 * vpmaddubsw (unsigned by signed bytes, pairs summed into int16) and
 * vpmaddwd by ones into int32.  Q8_0 takes ggml's sign trick: |w| is the
 * unsigned operand and a is given w's sign (vpsignb), so each pair is at
 * most 2 * 128 * 127 and cannot saturate.  Q4_0 multiplies the unsigned
 * nibble n = w + 8 by a and subtracts 8 * a in int16 (pairs of at most
 * 2 * 8 * 127), computed once per token.  Each block's int32 lanes are
 * converted and multiplied by d_w * d_a into the float accumulator.
 *
 * Q4_K and Q6_K against Q8K activations, 32 values a step: vpmaddubsw of
 * the unsigned quants by the activations, then vpmaddwd by the 16-bit
 * sub-block scales, accumulated in int32 over the super-block; Q6_K's
 * offset of 32 and Q4_K's minimums come from the activations' sums of 16.
 */
#include "cpu/matmul.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "cpu/avx2_util.h"
#include "quant_blocks.h"

#define KERN static inline __attribute__((always_inline))

/* Tile shapes, rows by tokens: float, Q8_0/Q4_0, K types. */
#define F_MR 4
#define F_NT 2
#define Q_MR 2
#define Q_NT 2
#define K_MR 2
#define K_NT 2

/* Prefetch the weights this many row tiles ahead (rows are contiguous, so this walks the chunk). */
#define PF_GROUPS 2

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

/* Run CALL(t, NT) over tokens [t0, t1) in tiles of NTV, the last one smaller. */
#define TOKEN_TILES(CALL, NTV) \
	do { \
		int			t_ = t0; \
		for (; t_ + (NTV) <= t1; t_ += (NTV)) \
			CALL(t_, NTV); \
		switch (t1 - t_) \
		{ \
			case 3: if ((NTV) > 3) CALL(t_, 3); break; \
			case 2: if ((NTV) > 2) CALL(t_, 2); break; \
			case 1: if ((NTV) > 1) CALL(t_, 1); break; \
			default: break; \
		} \
	} while (0)

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

/* ---- Q8_0, Q4_0 ---- */

/*
 * Block b of a Q8_0 or Q4_0 row: its 32 quants (Q8_0 as signed bytes,
 * Q4_0 as unsigned nibbles in value order) and its scale in all lanes.
 */
KERN void
load_q_block(LlmType type, const uint8_t *row, int64_t b, __m256i *q, __m256 *d)
{
	if (type == LLM_TYPE_Q8_0)
	{
		const LlmBlockQ8_0 *blk = (const LlmBlockQ8_0 *) (row + b * sizeof(LlmBlockQ8_0));

		*q = _mm256_loadu_si256((const __m256i *) blk->qs);
		*d = _mm256_set1_ps(_cvtsh_ss(blk->d));
	}
	else
	{
		const LlmBlockQ4_0 *blk = (const LlmBlockQ4_0 *) (row + b * sizeof(LlmBlockQ4_0));
		__m128i		v = _mm_loadu_si128((const __m128i *) blk->qs);

		/* low nibbles are values 0-15, high nibbles 16-31 */
		*q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
		*d = _mm256_set1_ps(_cvtsh_ss(blk->d));
	}
}

/* Tile of MR rows by NT tokens of a Q8_0 or Q4_0 weight against Q8 activations. */
KERN void
tile_q(LlmType type, const LlmGemmArgs *a, int64_t r, int t, const int MR, const int NT)
{
	const int64_t nb = a->k / LLM_QK;
	const size_t bsz = type == LLM_TYPE_Q8_0 ? sizeof(LlmBlockQ8_0) : sizeof(LlmBlockQ4_0);
	const size_t pf = PF_GROUPS * MR * a->row_bytes;
	const __m256i ones = _mm256_set1_epi16(1);
	const uint8_t *w[4];
	const int8_t *xq[4];
	const float *xd[4];
	__m256		acc[4][4];

#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
		w[i] = a->w + (size_t) (r + i) * a->row_bytes;
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		xq[q] = (const int8_t *) (a->x + (size_t) (t + q) * a->x_stride);
		xd[q] = (const float *) (a->x + (size_t) (t + q) * a->x_stride + llm_act_d_offset(a->k));
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			acc[i][q] = _mm256_setzero_ps();
	}
	for (int64_t b = 0; b < nb; b++)
	{
		__m256i		wq[4];
		__m256i		wabs[4];
		__m256		wd[4];

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			_mm_prefetch((const char *) (w[i] + pf + b * bsz), _MM_HINT_T0);
			load_q_block(type, w[i], b, &wq[i], &wd[i]);
			if (type == LLM_TYPE_Q8_0)
				wabs[i] = _mm256_sign_epi8(wq[i], wq[i]);
		}
#pragma GCC unroll 4
		for (int q = 0; q < NT; q++)
		{
			__m256i		av = _mm256_loadu_si256((const __m256i *) (xq[q] + b * LLM_QK));
			__m256		dv = _mm256_set1_ps(xd[q][b]);
			__m256i		off = _mm256_setzero_si256();

			if (type == LLM_TYPE_Q4_0)
				off = _mm256_maddubs_epi16(_mm256_set1_epi8(8), av);
#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
			{
				__m256i		p16;

				if (type == LLM_TYPE_Q8_0)
					p16 = _mm256_maddubs_epi16(wabs[i], _mm256_sign_epi8(av, wq[i]));
				else
					p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(wq[i], av), off);
				acc[i][q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones)),
											_mm256_mul_ps(wd[i], dv), acc[i][q]);
			}
		}
	}
	store_tile(a, r, t, acc, MR, NT);
}

#define gemm_q8_0_full(T, NT) tile_q(LLM_TYPE_Q8_0, a, r, T, Q_MR, NT)
#define gemm_q8_0_one(T, NT) tile_q(LLM_TYPE_Q8_0, a, r, T, 1, NT)
#define gemm_q4_0_full(T, NT) tile_q(LLM_TYPE_Q4_0, a, r, T, Q_MR, NT)
#define gemm_q4_0_one(T, NT) tile_q(LLM_TYPE_Q4_0, a, r, T, 1, NT)

/* The gemm of Q8_0 weights. */
DEFINE_GEMM(gemm_q8_0, Q_MR, Q_NT)
/* The gemm of Q4_0 weights. */
DEFINE_GEMM(gemm_q4_0, Q_MR, Q_NT)

/* ---- Q4_K, Q6_K ---- */

/* Tile of MR rows by NT tokens of a Q4_K weight against Q8K activations. */
KERN void
tile_q4_k(const LlmGemmArgs *a, int64_t r, int t, const int MR, const int NT)
{
	const int64_t nb = a->k / LLM_QK_K;
	const uint8_t *w[4];
	const int8_t *xq[4];
	const float *xd[4];
	const int16_t *xs[4];
	__m256		acc[4][4];

#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
		w[i] = a->w + (size_t) (r + i) * a->row_bytes;
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		const uint8_t *row = a->x + (size_t) (t + q) * a->x_stride;

		xq[q] = (const int8_t *) row;
		xd[q] = (const float *) (row + llm_act_d_offset(a->k));
		xs[q] = (const int16_t *) (row + llm_act_bsums_offset(a->k));
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			acc[i][q] = _mm256_setzero_ps();
	}
	for (int64_t b = 0; b < nb; b++)
	{
		__m256i		isum[4][4];
		uint8_t		sc[4][16];	/* 8 scales, then 8 minimums */
		__m256i		mins[4];	/* 8 minimums as int16, each twice */
		float		d[4];
		float		dmin[4];

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			const LlmBlockQ4_K *blk = (const LlmBlockQ4_K *) (w[i] + b * sizeof(LlmBlockQ4_K));
			__m128i		sm = llm_q4k_scales_mins(blk->scales);

			_mm_storeu_si128((__m128i *) sc[i], sm);
			mins[i] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
			d[i] = _cvtsh_ss(blk->d);
			dmin[i] = _cvtsh_ss(blk->dmin);
#pragma GCC unroll 4
			for (int q = 0; q < NT; q++)
				isum[i][q] = _mm256_setzero_si256();
		}
		for (int c = 0; c < 4; c++)
		{
			/* values 64c .. 64c + 31 (sub-block 2c, low nibbles) and 64c + 32 .. 64c + 63 (2c + 1, high) */
			__m256i		lo[4];
			__m256i		hi[4];
			__m256i		slo[4];
			__m256i		shi[4];

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
			{
				const LlmBlockQ4_K *blk = (const LlmBlockQ4_K *) (w[i] + b * sizeof(LlmBlockQ4_K));
				__m256i		v = _mm256_loadu_si256((const __m256i *) (blk->qs + 32 * c));

				_mm_prefetch((const char *) blk + PF_GROUPS * MR * a->row_bytes + 36 * c, _MM_HINT_T0);

				lo[i] = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
				hi[i] = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
				slo[i] = _mm256_set1_epi16(sc[i][2 * c]);
				shi[i] = _mm256_set1_epi16(sc[i][2 * c + 1]);
			}
#pragma GCC unroll 4
			for (int q = 0; q < NT; q++)
			{
				__m256i		alo = _mm256_loadu_si256((const __m256i *) (xq[q] + b * LLM_QK_K + 64 * c));
				__m256i		ahi = _mm256_loadu_si256((const __m256i *) (xq[q] + b * LLM_QK_K + 64 * c + 32));

#pragma GCC unroll 4
				for (int i = 0; i < MR; i++)
				{
					isum[i][q] = _mm256_add_epi32(isum[i][q], _mm256_madd_epi16(_mm256_maddubs_epi16(lo[i], alo), slo[i]));
					isum[i][q] = _mm256_add_epi32(isum[i][q], _mm256_madd_epi16(_mm256_maddubs_epi16(hi[i], ahi), shi[i]));
				}
			}
		}
#pragma GCC unroll 4
		for (int q = 0; q < NT; q++)
		{
			float		dq = xd[q][b];
			__m256i		bs = _mm256_loadu_si256((const __m256i *) (xs[q] + 16 * b));

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
			{
				acc[i][q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][q]), _mm256_set1_ps(d[i] * dq), acc[i][q]);
				acc[i][q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bs, mins[i])),
											_mm256_set1_ps(-dmin[i] * dq), acc[i][q]);
			}
		}
	}
	store_tile(a, r, t, acc, MR, NT);
}

/* Tile of MR rows by NT tokens of a Q6_K weight against Q8K activations. */
KERN void
tile_q6_k(const LlmGemmArgs *a, int64_t r, int t, const int MR, const int NT)
{
	const int64_t nb = a->k / LLM_QK_K;
	const uint8_t *w[4];
	const int8_t *xq[4];
	const float *xd[4];
	const int16_t *xs[4];
	__m256		acc[4][4];

#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
		w[i] = a->w + (size_t) (r + i) * a->row_bytes;
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		const uint8_t *row = a->x + (size_t) (t + q) * a->x_stride;

		xq[q] = (const int8_t *) row;
		xd[q] = (const float *) (row + llm_act_d_offset(a->k));
		xs[q] = (const int16_t *) (row + llm_act_bsums_offset(a->k));
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			acc[i][q] = _mm256_setzero_ps();
	}
	for (int64_t b = 0; b < nb; b++)
	{
		__m256i		isum[4][4];
		float		d[4];

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			const LlmBlockQ6_K *blk = (const LlmBlockQ6_K *) (w[i] + b * sizeof(LlmBlockQ6_K));

			d[i] = _cvtsh_ss(blk->d);
#pragma GCC unroll 4
			for (int q = 0; q < NT; q++)
				isum[i][q] = _mm256_setzero_si256();
		}
		for (int s = 0; s < 8; s++)
		{
			/* values 32s .. 32s + 31: h = s / 4, g = s % 4; sub-blocks 2s, 2s + 1 */
			const int	h = s / 4;
			const int	g = s % 4;
			__m256i		wq[4];
			__m256i		ws[4];

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
			{
				const LlmBlockQ6_K *blk = (const LlmBlockQ6_K *) (w[i] + b * sizeof(LlmBlockQ6_K));
				__m256i		ql;

				_mm_prefetch((const char *) blk + PF_GROUPS * MR * a->row_bytes + 27 * s, _MM_HINT_T0);
				ql = _mm256_loadu_si256((const __m256i *) (blk->ql + 64 * h + 32 * (g & 1)));
				__m256i		qh = _mm256_loadu_si256((const __m256i *) (blk->qh + 32 * h));
				__m256i		lo = _mm256_and_si256(g >= 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0F));
				__m256i		hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g)), _mm256_set1_epi8(0x03));

				wq[i] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
				ws[i] = _mm256_set_m128i(_mm_set1_epi16(blk->scales[2 * s + 1]), _mm_set1_epi16(blk->scales[2 * s]));
			}
#pragma GCC unroll 4
			for (int q = 0; q < NT; q++)
			{
				__m256i		av = _mm256_loadu_si256((const __m256i *) (xq[q] + b * LLM_QK_K + 32 * s));

#pragma GCC unroll 4
				for (int i = 0; i < MR; i++)
					isum[i][q] = _mm256_add_epi32(isum[i][q], _mm256_madd_epi16(_mm256_maddubs_epi16(wq[i], av), ws[i]));
			}
		}
#pragma GCC unroll 4
		for (int q = 0; q < NT; q++)
		{
			float		dq = xd[q][b];
			__m256i		bs = _mm256_loadu_si256((const __m256i *) (xs[q] + 16 * b));

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
			{
				const LlmBlockQ6_K *blk = (const LlmBlockQ6_K *) (w[i] + b * sizeof(LlmBlockQ6_K));
				/* the offset: 32 * sum over sub-blocks of scale * (sum of its activation quants) */
				__m256i		sc32 = _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) blk->scales)), 5);
				__m256i		off = _mm256_madd_epi16(bs, sc32);

				acc[i][q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum[i][q], off)),
											_mm256_set1_ps(d[i] * dq), acc[i][q]);
			}
		}
	}
	store_tile(a, r, t, acc, MR, NT);
}

#define gemm_q4_k_full(T, NT) tile_q4_k(a, r, T, K_MR, NT)
#define gemm_q4_k_one(T, NT) tile_q4_k(a, r, T, 1, NT)
#define gemm_q6_k_full(T, NT) tile_q6_k(a, r, T, K_MR, NT)
#define gemm_q6_k_one(T, NT) tile_q6_k(a, r, T, 1, NT)

/* The gemm of Q4_K weights. */
DEFINE_GEMM(gemm_q4_k, K_MR, K_NT)
/* The gemm of Q6_K weights. */
DEFINE_GEMM(gemm_q6_k, K_MR, K_NT)

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

/* Quantize one token's k activations to LLM_ACT_Q8K. */
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

const LlmMatmulKernels llm_matmul_kernels_avx2 = {
	.name = "avx2",
	.gemm = {
		[LLM_TYPE_F32] = gemm_f32,
		[LLM_TYPE_F16] = gemm_f16,
		[LLM_TYPE_BF16] = gemm_bf16,
		[LLM_TYPE_Q8_0] = gemm_q8_0,
		[LLM_TYPE_Q4_0] = gemm_q4_0,
		[LLM_TYPE_Q4_K] = gemm_q4_k,
		[LLM_TYPE_Q6_K] = gemm_q6_k,
	},
	.act = {
		[LLM_TYPE_Q8_0] = LLM_ACT_Q8,
		[LLM_TYPE_Q4_0] = LLM_ACT_Q8,
		[LLM_TYPE_Q4_K] = LLM_ACT_Q8K,
		[LLM_TYPE_Q6_K] = LLM_ACT_Q8K,
	},
	.quant = {
		[LLM_ACT_Q8] = quant_q8,
		[LLM_ACT_Q8K] = quant_q8k,
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
