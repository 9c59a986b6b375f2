/*
 * matmul_avx512.c
 *		Matmul kernels for AVX-512 F/BW/VL/DQ/VNNI (see matmul.h), compiled for
 *		that level whatever the build's -march, and run only after
 *		cpu_features.c has found it.
 *
 * Every kernel computes a register tile of MR weight rows by NT tokens as
 * MR * NT dot products along k, each accumulated in the 16 lanes of a zmm
 * register and summed across lanes at the end (hsum4: four rows at once).
 * A gemm function walks its rectangle one tile of rows at a time and, for
 * it, every token, so the rows' weights come from memory once and then
 * from L1.  Three shapes of work:
 *
 * - GEMV (one token, decode): straight from the weights, one row at a time
 *   (one stream of weights per thread reads DRAM at about 1.8x the rate
 *   of a tile's four), prefetching two rows ahead, since decode streams
 *   every weight once per token.  A row's bits are those of the tiles of
 *   several tokens: store_tile sums every row's lanes by one tree.
 * - Several tokens: each tile of rows is first unpacked into a buffer in
 *   the form the inner loop wants, then reused for all the tokens, so the
 *   unpacking is paid once per row, not per token.  Float weights from
 *   PACK_MIN_TOKENS tokens on (fewer take the GEMV's tiles with several
 *   tokens), a chunk of k at a time, F16/BF16 widened to float; Q8_0, Q4_0,
 *   Q4_1, Q5_0 and Q5_1 from 2 tokens on, all of k, interleaved by block
 *   with the tokens' activations (below); the K-quants with more than one
 *   token tile, into KBlocks.
 *
 * Float weights (F32, F16, BF16): 16 weights are widened to float (F16 by
 * vcvtph2ps, BF16 by a 16-bit shift, both exact) and multiplied with the
 * float activations by FMA; a tail of k % 16 uses masked loads.
 *
 * Q8_0, Q4_0 and Q5_0 against Q8 activations, two blocks (64 values) a
 * step: vpdpbusd multiplies unsigned by signed bytes, so the weight side is
 * made unsigned -- Q8_0's w + 128 (w xor 0x80), Q4_0's raw nibble n = w + 8,
 * Q5_0's nibble with its fifth bit, w + 16 -- and the offset is taken back
 * exactly in the integer accumulator, which starts at -C * (sum of the
 * activation quants of its lane) (C = 128, 8 or 16, itself one vpdpbusd
 * per token):  sum (w + C) a - C sum a = sum w a.  Q4_1 and Q5_1 are
 * unsigned already; their minimums m_w d_a (sum a) are added per block.
 * So a Q5_0 row gives exactly the bits of the same row rewritten as Q8_0.
 * Each lane's int32 then holds a partial dot of one block; it is converted
 * and multiplied by d_w * d_a of its block (lanes 0-7 the first block,
 * 8-15 the second) into the float accumulator.  The GEMV instead keeps 16
 * blocks in integers until each block's sum is complete (reduce_blocks),
 * then takes the offset off with the activations' block sums and applies
 * the 16 scales with one convert and one FMA: a third fewer instructions,
 * which matters because decode of Q4_0 is bound by instructions, not bytes.
 * Every tile of several tokens gives those bits with less work: the rows'
 * groups and the tokens' are first interleaved by block (lane e of step s
 * holds quants 4s .. 4s + 3 of block BLOCK_ORDER[e]), so 8 vpdpbusd leave
 * each block's whole dot product in its own lane with no reduction.
 *
 * The K-quants (Q2_K .. Q6_K) against Q8KI activations (Q8K's, each
 * super-block's 16 sub-blocks of 16 dealt out to the 16 lanes, matmul.h):
 * the weights' unsigned quants (Q2_K's two bits .. Q6_K's six) are dealt
 * out the same way (a 4x4 transpose of dwords by unpacks), so four
 * vpdpbusd leave each sub-block's whole integer dot product in its own
 * lane, exact.  Then per super-block one convert and one FMA by the lanes'
 * float scales (d times the sub-block's scale) times d_a; Q3_K's offset
 * of 4 and Q6_K's of 32 come off each lane's integer first, with the
 * activations' sums of 16, and the minimums of Q2_K, Q4_K and Q5_K are
 * one more FMA by those sums.  One vpdpbusd per 64 multiply-adds, where
 * vpmaddubsw + vpdpwssd (ggml's vec_dot_q4_K_q8_K) take two.
 */
#include "cpu/matmul.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#endif

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/avx2_util.h"
#include "cpu/matmul_amx.h"
#include "cpu/transpose_avx512.h"
#include "quant_blocks.h"

#define KERN static inline __attribute__((always_inline))

/* Tile shapes, rows by tokens (float, Q8_0/Q4_0 direct and packed, K types direct and packed). */
#define F_MR 4
#define F_NT 6
#define Q_MR 4
#define Q_NT 3					/* packed too: 12 integer and 12 float sums stay in registers (6 tokens: 19% slower) */
/*
 * Q-type calls of up to this many tokens run a row at a time straight from
 * the weights, each row's quants loaded once for all the tokens: unpacking
 * rows costs about a GEMV, which a few tokens do not repay (llm-cli bench,
 * Q8_0, 2 threads: decode of 2-4 sequences 1.1-1.5x the packed tiles'; of 5,
 * no faster, and Q4_1 slower).
 */
#define Q_DIRECT_TOKENS 4
#define K_MR 4
#define K_NT 3

/* Prefetch the weights this many row tiles ahead (rows are contiguous, so this walks the chunk). */
#ifndef PF_GROUPS
#define PF_GROUPS 2
#endif

/* Unpack rows for batches of this many tokens or more. */
#define PACK_MIN_TOKENS 8
#define F_CHUNK 1024			/* floats of k per packed float row (4 rows: 16 kB) */

/* The sums of four vectors, as the four lanes of one. */
KERN __m128
hsum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
	/* per 128-bit lane: [a0_0 + a0_2, a1_0 + a1_2, a0_1 + a0_3, a1_1 + a1_3] */
	__m512		t0 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
	__m512		t1 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));

	/* per 128-bit lane: partial sums of a0, a1, a2, a3 */
	__m512		u = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1))),
								  _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1))));
	__m256		v = _mm256_add_ps(_mm512_castps512_ps256(u),
								  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1)));

	return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
}

/*
 * Store (or, with add, add) the sums of the tile acc (MR rows, NT tokens)
 * at y[t * ldy + r].  Every row's 16 lanes are summed by hsum4's tree,
 * whatever MR (a row's lanes meet only its own), so a row has the same
 * bits in a tile of 4, 2 or 1 rows.
 */
KERN void
store_tile(const LlmGemmArgs *a, int64_t r, int t, __m512 acc[4][6], const int MR, const int NT, bool add)
{
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		float	   *yq = a->y + (size_t) (t + q) * a->ldy + r;
		__m128		v = hsum4(acc[0][q], acc[MR > 1 ? 1 : 0][q], acc[MR > 2 ? 2 : 0][q], acc[MR > 3 ? 3 : 0][q]);

		if (MR == 4)
			_mm_storeu_ps(yq, add ? _mm_add_ps(v, _mm_loadu_ps(yq)) : v);
		else
		{
			_Alignas(16) float	sums[4];

			_mm_store_ps(sums, v);
#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
				yq[i] = add ? yq[i] + sums[i] : sums[i];
		}
	}
}

/* ---- F32, F16, BF16 ---- */

/* 16 weights of a row of type from element j, as floats. */
KERN __m512
load_w16(LlmType type, const uint8_t *p, int64_t j)
{
	if (type == LLM_TYPE_F32)
		return _mm512_loadu_ps((const float *) p + j);
	if (type == LLM_TYPE_F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (p + 2 * j)));
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (p + 2 * j))), 16));
}

/* The weights of a row of type from element j selected by m (others zero), as floats. */
KERN __m512
load_w16_mask(LlmType type, const uint8_t *p, int64_t j, __mmask16 m)
{
	if (type == LLM_TYPE_F32)
		return _mm512_maskz_loadu_ps(m, (const float *) p + j);
	if (type == LLM_TYPE_F16)
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + 2 * j));
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p + 2 * j)), 16));
}

/*
 * Tile of MR rows by NT tokens of a float-type weight against float
 * activations, over kc elements: row i's are at w0 + i * wstride, the
 * tokens' from element j0 of their rows.  With prefetch, the weights two
 * row tiles ahead are prefetched (when they come from the model, not a
 * packed buffer).
 */
KERN void
tile_float(LlmType type, const LlmGemmArgs *a, const uint8_t *w0, size_t wstride, int64_t j0, int64_t kc,
		   int64_t r, int t, const int MR, const int NT, bool add, const bool prefetch)
{
	const size_t esz = type == LLM_TYPE_F32 ? 4 : 2;
	const size_t pf = PF_GROUPS * MR * wstride;
	const uint8_t *w[4];
	const float *x[6];
	__m512		acc[4][6];
	int64_t		j = 0;

#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
		w[i] = w0 + (size_t) i * wstride;
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		x[q] = (const float *) (a->x + (size_t) (t + q) * a->x_stride) + j0;
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			acc[i][q] = _mm512_setzero_ps();
	}
	for (; j + 16 <= kc; j += 16)
	{
		__m512		wv[4];

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			if (prefetch)
				_mm_prefetch((const char *) (w[i] + pf + j * esz), _MM_HINT_T0);
			wv[i] = load_w16(type, w[i], j);
		}
#pragma GCC unroll 6
		for (int q = 0; q < NT; q++)
		{
			__m512		xv = _mm512_loadu_ps(x[q] + j);

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
				acc[i][q] = _mm512_fmadd_ps(wv[i], xv, acc[i][q]);
		}
	}
	if (j < kc)
	{
		__mmask16	m = (__mmask16) ((1u << (kc - j)) - 1);
		__m512		wv[4];

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			wv[i] = load_w16_mask(type, w[i], j, m);
#pragma GCC unroll 6
		for (int q = 0; q < NT; q++)
		{
			__m512		xv = _mm512_maskz_loadu_ps(m, x[q] + j);

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
				acc[i][q] = _mm512_fmadd_ps(wv[i], xv, acc[i][q]);
		}
	}
	store_tile(a, r, t, acc, MR, NT, add);
}

/* Widen elements [j0, j0 + kc) of F_MR rows (from w0, stride wstride) of type to floats in buf (F_MR, F_CHUNK). */
KERN void
pack_float(LlmType type, const uint8_t *w0, size_t wstride, int64_t j0, int64_t kc, float *buf)
{
	for (int i = 0; i < F_MR; i++)
	{
		const uint8_t *w = w0 + (size_t) i * wstride;
		float	   *o = buf + (size_t) i * F_CHUNK;
		int64_t		j = 0;

		for (; j + 16 <= kc; j += 16)
			_mm512_store_ps(o + j, load_w16(type, w, j0 + j));
		if (j < kc)
			_mm512_mask_storeu_ps(o + j, (__mmask16) ((1u << (kc - j)) - 1),
								  load_w16_mask(type, w, j0 + j, (__mmask16) ((1u << (kc - j)) - 1)));
	}
}

/* The tile calls of gemm_float, for TOKEN_TILES (they use its locals). */
#define CALL_F_DIRECT(T, NT) tile_float(type, a, w0 + (size_t) j0 * esz, a->row_bytes, j0, kc, r, T, F_MR, NT, j0 > 0, true)
#define CALL_F_DIRECT1(T, NT) tile_float(type, a, w0 + (size_t) j0 * esz, a->row_bytes, j0, kc, r, T, 1, NT, j0 > 0, true)
#define CALL_F_CHUNK(T, NT) tile_float(type, a, w0 + (size_t) j0 * esz, a->row_bytes, j0, kc, r, T, F_MR, NT, j0 > 0, false)
#define CALL_F_PACKED(T, NT) tile_float(LLM_TYPE_F32, a, (const uint8_t *) buf, F_CHUNK * sizeof(float), j0, kc, r, T, F_MR, NT, j0 > 0, false)

/* Loop j0 over the chunks of F_CHUNK of k, kc the chunk's length, with w0 the row tile's weights. */
#define FOR_K_CHUNKS \
	for (int64_t j0 = 0, kc = a->k < F_CHUNK ? a->k : F_CHUNK; j0 < a->k; \
		 j0 += F_CHUNK, kc = a->k - j0 < F_CHUNK ? a->k - j0 : F_CHUNK)

/*
 * The gemm of a float type.  Every output is one canonical sum, whatever
 * the number of tokens (the batch-invariance rule): per chunk of F_CHUNK
 * of k, 16 lanes of FMAs in order of k, summed across lanes (hsum4's
 * order), and the chunks' sums added to y in order.  Direct tiles for one
 * to PACK_MIN_TOKENS - 1 tokens; for more, F16/BF16 rows are first widened
 * once per chunk into a buffer (exactly, so the sums do not change).
 */
KERN void
gemm_float(LlmType type, const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	const size_t esz = type == LLM_TYPE_F32 ? 4 : 2;
	int64_t		r = r0;

	if (t1 - t0 == 1)
		;						/* the GEMV a row at a time (below), as gemm_q's */
	else if (t1 - t0 < PACK_MIN_TOKENS)
	{
		for (; r + F_MR <= r1; r += F_MR)
		{
			const uint8_t *w0 = a->w + (size_t) r * a->row_bytes;

			FOR_K_CHUNKS
				TOKEN_TILES(CALL_F_DIRECT, F_NT);
		}
	}
	else
		for (; r + F_MR <= r1; r += F_MR)
		{
			_Alignas(64) float buf[F_MR * F_CHUNK];
			const uint8_t *w0 = a->w + (size_t) r * a->row_bytes;

			FOR_K_CHUNKS
			{
				if (type == LLM_TYPE_F32)
				{
					TOKEN_TILES(CALL_F_CHUNK, F_NT);
				}
				else
				{
					pack_float(type, w0, a->row_bytes, j0, kc, buf);
					TOKEN_TILES(CALL_F_PACKED, F_NT);
				}
			}
		}
	for (; r < r1; r++)
	{
		const uint8_t *w0 = a->w + (size_t) r * a->row_bytes;

		FOR_K_CHUNKS
			TOKEN_TILES(CALL_F_DIRECT1, F_NT);
	}
}

/* The gemm of F32 weights. */
static void
gemm_f32(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_float(LLM_TYPE_F32, a, r0, r1, t0, t1);
}

/* The gemm of F16 weights. */
static void
gemm_f16(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_float(LLM_TYPE_F16, a, r0, r1, t0, t1);
}

/* The gemm of BF16 weights. */
static void
gemm_bf16(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_float(LLM_TYPE_BF16, a, r0, r1, t0, t1);
}

/* ---- Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 ---- */

/* Whether type's blocks carry a minimum (w = d q + m): Q4_1, Q5_1. */
KERN bool
q_has_min(LlmType type)
{
	return type == LLM_TYPE_Q4_1 || type == LLM_TYPE_Q5_1;
}

/* Whether type's quants are nibbles alone (Q4_0, Q4_1), which the GEMV keeps in place. */
KERN bool
q_nibbles(LlmType type)
{
	return type == LLM_TYPE_Q4_0 || type == LLM_TYPE_Q4_1;
}

/* log2 of the offset C that makes type's quants unsigned (w + C): Q8_0 128, Q4_0 8, Q5_0 16. */
KERN int
q_offset_log2(LlmType type)
{
	return type == LLM_TYPE_Q8_0 ? 7 : type == LLM_TYPE_Q4_0 ? 3 : 4;
}

/* Bytes before a block's quants (Q5: before qh): the fp16 d, and for Q4_1 and Q5_1 the fp16 m. */
KERN size_t
q_quant_offset(LlmType type)
{
	return q_has_min(type) ? 4 : 2;
}

/*
 * The 32 five-bit quants (0-31, in value order) of the Q5_0 or Q5_1 block
 * at p: the nibbles as Q4_0's, plus 16 where the block's bit of qh is set.
 */
KERN __m256i
q5_block(LlmType type, const uint8_t *p)
{
	const size_t qho = q_quant_offset(type);
	uint32_t	qh;
	__m256i		v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) (p + qho + 4)));

	memcpy(&qh, p + qho, sizeof(qh));
	v = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
	return _mm256_mask_add_epi8(v, (__mmask32) qh, v, _mm256_set1_epi8(0x10));
}

/* q5_block of blocks b and b + 1 at p: the first in bytes 0-31, the second in 32-63. */
KERN __m512i
q5_pair(LlmType type, const uint8_t *p)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(q5_block(type, p)), q5_block(type, p + llm_block_bytes(type)), 1);
}

/*
 * The fp16 scales of the pair of blocks at p (at bytes 0 and the block
 * size; Q8_0's second lies past 32, so its pair, 68 bytes, is read 64 at a
 * time), lanes 0-7 the first block's and 8-15 the second's.
 */
KERN __m512
q_pair_scales(LlmType type, const uint8_t *p)
{
	const short h = (short) (llm_block_bytes(type) / 2);	/* the second scale's 16-bit index */
	const __m512i idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
										 h, h, h, h, h, h, h, h, 0, 0, 0, 0, 0, 0, 0, 0);
	__m512i		src = type == LLM_TYPE_Q8_0 ? _mm512_loadu_si512(p)
		: _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *) p));

	return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, src)));
}

/*
 * The quants of blocks b and b + 1 of a row as 64 unsigned bytes (Q8_0:
 * w + 128; the others the quants, in value order), and their scales (and
 * for Q4_1 and Q5_1 in *m their minimums), lanes 0-7 the first block's and
 * 8-15 the second's.
 */
KERN void
load_q_pair(LlmType type, const uint8_t *p, __m512i *q, __m512 *d, __m512 *m)
{
	*d = q_pair_scales(type, p);
	if (q_has_min(type))
		*m = q_pair_scales(type, p + 2);	/* the fp16 minimum follows d */
	if (type == LLM_TYPE_Q5_0 || type == LLM_TYPE_Q5_1)
		*q = q5_pair(type, p);
	else if (type == LLM_TYPE_Q8_0)
		*q = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) (p + 2))),
												 _mm256_loadu_si256((const __m256i *) (p + 34 + 2)), 1),
							  _mm512_set1_epi8((char) 0x80));
	else
	{
		const size_t qo = q_quant_offset(type);
		/* lanes of 128 bits: qs0, qs0, qs1, qs1 */
		__m512i		v = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) (p + qo))),
													0xFF00, _mm_loadu_si128((const __m128i *) (p + llm_block_bytes(type) + qo)));

		/* low nibbles are values 0-15, high nibbles 16-31 */
		*q = _mm512_and_si512(_mm512_srlv_epi16(v, _mm512_set_epi16(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0,
																	 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0)),
							  _mm512_set1_epi8(0x0F));
	}
}

/*
 * The quants of blocks b and b + 1 of a row as 64 unsigned bytes for the
 * GEMV: as load_q_pair's (Q4_1 and Q5_1 as Q4_0 and Q5_0), except that
 * Q4_0's and Q4_1's high nibbles
 * stay in place, worth 16 times their value (values 16-31 of each block,
 * 128-bit lanes 1 and 3), which saves a shift per step; reduce_blocks
 * divides those lanes' sums by 16, exactly, once per group.
 */
KERN __m512i
load_q_pair_gemv(LlmType type, const uint8_t *p)
{
	if (!q_nibbles(type) && type != LLM_TYPE_Q8_0)
		return q5_pair(type, p);
	if (type == LLM_TYPE_Q8_0)
		return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) (p + 2))),
												   _mm256_loadu_si256((const __m256i *) (p + 34 + 2)), 1),
								_mm512_set1_epi8((char) 0x80));
	else
	{
		/* Q4_0: d, then 16 bytes of nibbles (18 bytes); Q4_1: d, m, then the nibbles (20 bytes) */
		const size_t qo = q_quant_offset(type);
		const size_t bsz = llm_block_bytes(type);
		__m512i		v = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) (p + qo))),
													0xFF00, _mm_loadu_si128((const __m128i *) (p + bsz + qo)));

		return _mm512_and_si512(v, _mm512_set_epi64(0xF0F0F0F0F0F0F0F0LL, 0xF0F0F0F0F0F0F0F0LL, 0x0F0F0F0F0F0F0F0FLL, 0x0F0F0F0F0F0F0F0FLL,
													0xF0F0F0F0F0F0F0F0LL, 0xF0F0F0F0F0F0F0F0LL, 0x0F0F0F0F0F0F0F0FLL, 0x0F0F0F0F0F0F0F0FLL));
	}
}

/*
 * The quants of the single block at p in the low 32 bytes (high ones zero)
 * and its scale (Q4_1, Q5_1: and in *m its minimum) in lanes 0-7.
 */
KERN void
load_q_single(LlmType type, const uint8_t *p, __m512i *q, __m512 *d, __m512 *m)
{
	uint16_t	h;

	memcpy(&h, p, sizeof(h));
	*d = _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(_cvtsh_ss(h)));
	if (q_has_min(type))
	{
		memcpy(&h, p + 2, sizeof(h));
		*m = _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(_cvtsh_ss(h)));
	}
	if (type == LLM_TYPE_Q5_0 || type == LLM_TYPE_Q5_1)
		*q = _mm512_zextsi256_si512(q5_block(type, p));
	else if (type == LLM_TYPE_Q8_0)
		*q = _mm512_zextsi256_si512(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *) (p + 2)),
													 _mm256_set1_epi8((char) 0x80)));
	else
	{
		__m256i		v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) (p + q_quant_offset(type))));

		*q = _mm512_zextsi256_si512(_mm256_and_si256(_mm256_srlv_epi32(v, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0)),
													 _mm256_set1_epi8(0x0F)));
	}
}

/*
 * The quants of blocks b .. b + 3 at p for q_quad: q[0] holds in 128-bit
 * lane j the first 16 quants (load_q_pair's bytes, value order) of block
 * b + j, q[1] its last 16; the scales (Q4_1, Q5_1: and in *m the
 * minimums) of block b + j in lanes 4j .. 4j + 3.
 */
KERN void
load_q_quad(LlmType type, const uint8_t *p, __m512i *q, __m512 *d, __m512 *m)
{
	__m512i		v01;
	__m512i		v23;
	__m512		d01;
	__m512		d23;
	__m512		m01 = _mm512_setzero_ps();
	__m512		m23 = _mm512_setzero_ps();

	load_q_pair(type, p, &v01, &d01, &m01);
	load_q_pair(type, p + 2 * llm_block_bytes(type), &v23, &d23, &m23);
	q[0] = _mm512_shuffle_i32x4(v01, v23, _MM_SHUFFLE(2, 0, 2, 0));
	q[1] = _mm512_shuffle_i32x4(v01, v23, _MM_SHUFFLE(3, 1, 3, 1));
	*d = _mm512_shuffle_f32x4(d01, d23, _MM_SHUFFLE(2, 0, 2, 0));
	if (q_has_min(type))
		*m = _mm512_shuffle_f32x4(m01, m23, _MM_SHUFFLE(2, 0, 2, 0));
}

/*
 * -C * (the sum of each lane's four activation quants), C the weights'
 * offset (128 Q8_0, 8 Q4_0, 16 Q5_0; with minimums none: zero).
 */
KERN __m512i
q_offset(LlmType type, __m512i av)
{
	if (q_has_min(type))
		return _mm512_setzero_si512();
	return _mm512_sub_epi32(_mm512_setzero_si512(),
							_mm512_dpbusd_epi32(_mm512_setzero_si512(),
												_mm512_set1_epi8((char) (1 << q_offset_log2(type))), av));
}

/* The scales of blocks b and b + 1 of an activation row: lanes 0-7 and 8-15. */
KERN __m512
act_scales2(const float *xd, int64_t b)
{
	return _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
								 _mm512_castps128_ps512(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i *) (xd + b)))));
}

/* The quant sums of blocks b and b + 1 (one: b only) of an activation row as floats, in lanes 0 and 8 (others zero). */
KERN __m512
act_sums2(const int32_t *xs, int64_t b, const bool pair)
{
	__m512i		v = _mm512_castsi128_si512(pair ? _mm_loadl_epi64((const __m128i *) (xs + b)) : _mm_cvtsi32_si128(xs[b]));

	return _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi32(0x0101, _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0), v));
}

/* Lane e is lane e / 4 of a 128-bit value: one float or int per 128-bit lane. */
#define QUAD_SPREAD _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)

/* A token's quants of blocks b .. b + 3 laid out as load_q_quad's: a[0] the first 16 of each block by 128-bit lane, a[1] the last. */
KERN void
act_quad(const int8_t *xq, int64_t b, __m512i *a)
{
	__m512i		x01 = _mm512_loadu_si512(xq + b * LLM_QK);
	__m512i		x23 = _mm512_loadu_si512(xq + (b + 2) * LLM_QK);

	a[0] = _mm512_shuffle_i32x4(x01, x23, _MM_SHUFFLE(2, 0, 2, 0));
	a[1] = _mm512_shuffle_i32x4(x01, x23, _MM_SHUFFLE(3, 1, 3, 1));
}

/* One step of q_steps for Q_MR rows: two blocks (or the last single one, or half of a quad), unpacked as its loaders give them. */
typedef struct QStepPack
{
	uint8_t		q[64];
	float		d[16];
	float		m[16];			/* Q4_1's and Q5_1's minimums */
} QStepPack;

/*
 * Blocks b and b + 1 (pair) or block b alone of MR rows (w) by NT tokens
 * (xq, xd; xs their block sums) of a Q-type weight, added into acc: each
 * lane's integer dot product of four quants, converted, times d_w d_a;
 * with minimums, m_w d_a times the block's activation sum into lanes 0
 * and 8.  With pk the rows' blocks come unpacked from pk (row) instead,
 * giving the same bits.
 */
KERN void
q_step(LlmType type, const LlmGemmArgs *a, const uint8_t *const *w, const QStepPack *pk, const int8_t *const *xq,
	   const float *const *xd, const int32_t *const *xs, int64_t b, __m512 acc[4][6], const int MR, const int NT,
	   const bool pair)
{
	const size_t bsz = llm_block_bytes(type);
	const size_t pf = PF_GROUPS * MR * a->row_bytes;
	__m512i		wq[4];
	__m512		wd[4];
	__m512		wm[4];

#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
	{
		if (pk != NULL)
		{
			wq[i] = _mm512_load_si512(pk[i].q);
			wd[i] = _mm512_load_ps(pk[i].d);
			if (q_has_min(type))
				wm[i] = _mm512_load_ps(pk[i].m);
		}
		else if (!pair)
			load_q_single(type, w[i] + b * bsz, &wq[i], &wd[i], &wm[i]);
		else
		{
			_mm_prefetch((const char *) (w[i] + pf + b * bsz), _MM_HINT_T0);
			if (type == LLM_TYPE_Q8_0)
				_mm_prefetch((const char *) (w[i] + pf + b * bsz + 2 * bsz - 1), _MM_HINT_T0);
			load_q_pair(type, w[i] + b * bsz, &wq[i], &wd[i], &wm[i]);
		}
	}
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		__m512i		av = pair ? _mm512_loadu_si512(xq[q] + b * LLM_QK)
			: _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *) (xq[q] + b * LLM_QK)));
		__m512i		nc = q_offset(type, av);
		__m512		dv = pair ? act_scales2(xd[q], b) : _mm512_set1_ps(xd[q][b]);
		__m512		sv = q_has_min(type) ? act_sums2(xs[q], b, pair) : _mm512_setzero_ps();

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			__m512i		p = _mm512_dpbusd_epi32(nc, wq[i], av);

			acc[i][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd[i], dv), acc[i][q]);
			if (q_has_min(type))
				acc[i][q] = _mm512_mask3_fmadd_ps(sv, _mm512_mul_ps(wm[i], dv), acc[i][q], 0x0101);
		}
	}
}

/*
 * Blocks b .. b + 3 of MR rows (w) by NT tokens (xq, xd; xs their block
 * sums) of a Q-type weight, added into acc: 128-bit lane j is block b + j
 * (load_q_quad), so two vpdpbusd leave in each lane an integer dot product
 * of eight quants of one block, converted once and times d_w d_a; with
 * minimums, m_w d_a times the block's activation sum into lane 4j.  With pk
 * the rows' blocks come unpacked from pk (pk[i] and pk[MR + i]) instead,
 * giving the same bits.
 */
KERN void
q_quad(LlmType type, const LlmGemmArgs *a, const uint8_t *const *w, const QStepPack *pk, const int8_t *const *xq,
	   const float *const *xd, const int32_t *const *xs, int64_t b, __m512 acc[4][6], const int MR, const int NT)
{
	const size_t bsz = llm_block_bytes(type);
	const size_t pf = PF_GROUPS * MR * a->row_bytes;
	__m512i		wq[4][2];
	__m512		wd[4];
	__m512		wm[4];

#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
	{
		if (pk != NULL)
		{
			wq[i][0] = _mm512_load_si512(pk[i].q);
			wq[i][1] = _mm512_load_si512(pk[MR + i].q);
			wd[i] = _mm512_load_ps(pk[i].d);
			if (q_has_min(type))
				wm[i] = _mm512_load_ps(pk[i].m);
			continue;
		}
		_mm_prefetch((const char *) (w[i] + pf + b * bsz), _MM_HINT_T0);
		_mm_prefetch((const char *) (w[i] + pf + (b + 4) * bsz - 1), _MM_HINT_T0);
		load_q_quad(type, w[i] + b * bsz, wq[i], &wd[i], &wm[i]);
	}
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		__m512i		av[2];
		__m512i		nc;
		__m512		dv = _mm512_permutexvar_ps(QUAD_SPREAD, _mm512_castps128_ps512(_mm_loadu_ps(xd[q] + b)));
		__m512		sv = _mm512_setzero_ps();

		act_quad(xq[q], b, av);
		nc = _mm512_add_epi32(q_offset(type, av[0]), q_offset(type, av[1]));
		if (q_has_min(type))
			sv = _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi32(0x1111, QUAD_SPREAD,
																   _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *) (xs[q] + b)))));
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			__m512i		p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(nc, wq[i][0], av[0]), wq[i][1], av[1]);

			acc[i][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd[i], dv), acc[i][q]);
			if (q_has_min(type))
				acc[i][q] = _mm512_mask3_fmadd_ps(sv, _mm512_mul_ps(wm[i], dv), acc[i][q], 0x1111);
		}
	}
}

/*
 * Blocks [b, nb) (fewer than 8) of MR rows by NT tokens, added into acc:
 * four by q_quad if there are four, then two at a time by q_step, then the
 * last alone (pk: MR rows a step, two steps for the quad).
 */
KERN void
q_steps(LlmType type, const LlmGemmArgs *a, const uint8_t *const *w, const QStepPack *pk, const int8_t *const *xq,
		const float *const *xd, const int32_t *const *xs, int64_t b, __m512 acc[4][6], const int MR, const int NT)
{
	const int64_t nb = a->k / LLM_QK;

	if (nb - b >= 4)
	{
		q_quad(type, a, w, pk, xq, xd, xs, b, acc, MR, NT);
		b += 4;
		pk += pk != NULL ? 2 * MR : 0;
	}
	for (; b + 2 <= nb; b += 2, pk += pk != NULL ? MR : 0)
		q_step(type, a, w, pk, xq, xd, xs, b, acc, MR, NT, true);
	if (b < nb)
		q_step(type, a, w, pk, xq, xd, xs, b, acc, MR, NT, false);
}

/*
 * The per-block sums of G (8 or 4) vectors of two blocks each (p[s] holds
 * partial sums of block 2s in lanes 0-7 and of 2s + 1 in lanes 8-15): lane
 * e of the result is block BLOCK_ORDER[e] (for G = 4, lanes 0-7 only).
 * Unpack-and-add rounds, 21 instructions for 16 blocks.  The sums of the
 * second halves of the blocks (lanes 4-7 and 12-15) are shifted right by
 * hi_shift first (4 for Q4_0's high nibbles in place; exact).
 */
KERN __m512i
reduce_blocks(const __m512i *p, const int G, const int hi_shift)
{
	__m512i		t[4];
	__m512i		u[2];

#pragma GCC unroll 4
	for (int m = 0; m < G / 2; m++)	/* per 128-bit lane: halves of p[2m], p[2m + 1] interleaved */
		t[m] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * m], p[2 * m + 1]),
								_mm512_unpackhi_epi32(p[2 * m], p[2 * m + 1]));
#pragma GCC unroll 2
	for (int m = 0; m < G / 4; m++)	/* per 128-bit lane: the sums of p[4m] .. p[4m + 3] */
		u[m] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * m], t[2 * m + 1]),
								_mm512_unpackhi_epi64(t[2 * m], t[2 * m + 1]));
	if (G == 4)
		u[1] = u[0];
	/* add the two 128-bit lanes of each block */
	return _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
							hi_shift ? _mm512_srai_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)), hi_shift)
							: _mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Lane e of reduce_blocks' result is block BLOCK_ORDER[e] of the 16: 0 2 4 6 1 3 5 7 8 10 12 14 9 11 13 15. */
#define BLOCK_ORDER _mm512_set_epi32(15, 13, 11, 9, 14, 12, 10, 8, 7, 5, 3, 1, 6, 4, 2, 0)
/* The same as a scalar function of e (the bits: e's 1 and 2 move up one, its 4 down to 1). */
#define BLOCK_ORDER_OF(e) (((e) & 8) | (((e) & 3) << 1) | (((e) >> 2) & 1))

/*
 * The dot products of one group of 2G blocks (G = 8, or 4) of one row by
 * one token, added into acc: wq holds the row's quants as G vectors of
 * two blocks (load_q_pair_gemv's form), xq the token's quants from the
 * group's first block, off the weights' offset times the activations'
 * block sums and scale the blocks' d_w * d_a, both in BLOCK_ORDER.  The
 * integer dot products stay integers until each block's is complete
 * (reduce_blocks); then one subtraction, one convert and one FMA, so lane
 * e of acc gets block BLOCK_ORDER[e] of the group.
 */
KERN __m512
q_group_dot(LlmType type, const __m512i *wq, const int8_t *xq, __m512i off, __m512 scale, __m512 acc, const int G)
{
	__m512i		p[8];

#pragma GCC unroll 8
	for (int s = 0; s < G; s++)
		p[s] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[s], _mm512_loadu_si512(xq + 2 * s * LLM_QK));
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(reduce_blocks(p, G, q_nibbles(type) ? 4 : 0), off)),
						   scale, acc);
}

/*
 * Q4_1's minimums of a group, added into acc after q_group_dot: m_w * d_a
 * (mscale, BLOCK_ORDER) times the activations' block sums, since
 * sum (d_w q + m_w) d_a a = d_w d_a sum q a + m_w d_a sum a.
 */
KERN __m512
q_group_mins(const int32_t *xs, int64_t b, __mmask16 m, __m512 mscale, __m512 acc)
{
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_permutexvar_epi32(BLOCK_ORDER, _mm512_maskz_loadu_epi32(m, xs + b))),
						   mscale, acc);
}

/* The activations' block sums of a group from block b, times the weights' offset (128, 8, 16; with minimums none), in BLOCK_ORDER. */
KERN __m512i
q_group_offset(LlmType type, const int32_t *xs, int64_t b, __mmask16 m)
{
	if (q_has_min(type))
		return _mm512_setzero_si512();	/* unsigned already */
	return _mm512_slli_epi32(_mm512_permutexvar_epi32(BLOCK_ORDER, _mm512_maskz_loadu_epi32(m, xs + b)),
							 q_offset_log2(type));
}

/*
 * The fp16 scales d of blocks [b, b + 2G) of a row at w (G = 4: lanes 8-15
 * zero), and for Q4_1 and Q5_1 in *mins the minimums m, from one gather
 * of the 32-bit words at the block starts (d the low half, m the high).
 */
KERN __m512
q_group_scales(LlmType type, const uint8_t *w, int64_t b, __mmask16 m, __m512 *mins)
{
	const size_t bsz = llm_block_bytes(type);
	const __m512i gidx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
											 _mm512_set1_epi32((int) bsz));
	__m512i		g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, gidx, w + b * bsz, 1);

	if (q_has_min(type))
		*mins = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
}

/* One group of 2G blocks from block b of MR rows (w) by NT tokens, straight from the weights, added into acc. */
KERN void
q_group(LlmType type, const LlmGemmArgs *a, const uint8_t *const *w, const int8_t *const *xq,
		const float *const *xd, const int32_t *const *xs, int64_t b, __m512 acc[4][6],
		const int MR, const int NT, const int G)
{
	const size_t bsz = llm_block_bytes(type);
	const size_t pf = PF_GROUPS * MR * a->row_bytes;
	const __mmask16 m = G == 8 ? 0xFFFF : 0x00FF;
	__m512		sv[4];
	__m512		mv[4];

	/* with several tokens the rows' scales once; with one (the GEMV), after each row's quants are in L1 */
	if (NT > 1)
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			sv[i] = q_group_scales(type, w[i], b, m, &mv[i]);
	if (MR == 1 && NT > 1)
	{
		/* one row by a few tokens: its quants loaded once for all of them */
		const uint8_t *wb = w[0] + b * bsz;
		__m512i		wq[8];

#pragma GCC unroll 8
		for (int s = 0; s < G; s++)
		{
			_mm_prefetch((const char *) (wb + pf + 2 * s * bsz), _MM_HINT_T0);
			if (!q_nibbles(type))
				_mm_prefetch((const char *) (wb + pf + 2 * s * bsz + 2 * bsz - 1), _MM_HINT_T0);
			wq[s] = load_q_pair_gemv(type, wb + 2 * s * bsz);
		}
#pragma GCC unroll 6
		for (int q = 0; q < NT; q++)
		{
			__m512		dav = _mm512_maskz_loadu_ps(m, xd[q] + b);

			acc[0][q] = q_group_dot(type, wq, xq[q] + b * LLM_QK, q_group_offset(type, xs[q], b, m),
									_mm512_permutexvar_ps(BLOCK_ORDER, _mm512_mul_ps(sv[0], dav)), acc[0][q], G);
			if (q_has_min(type))
				acc[0][q] = q_group_mins(xs[q], b, m, _mm512_permutexvar_ps(BLOCK_ORDER, _mm512_mul_ps(mv[0], dav)),
										 acc[0][q]);
		}
		return;
	}
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		__m512		dav = _mm512_maskz_loadu_ps(m, xd[q] + b);
		__m512i		off = q_group_offset(type, xs[q], b, m);

#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
		{
			const uint8_t *wb = w[i] + b * bsz;
			__m512i		wq[8];

#pragma GCC unroll 8
			for (int s = 0; s < G; s++)
			{
				if (NT == 1)
				{
					_mm_prefetch((const char *) (wb + pf + 2 * s * bsz), _MM_HINT_T0);
					if (!q_nibbles(type))
						_mm_prefetch((const char *) (wb + pf + 2 * s * bsz + 2 * bsz - 1), _MM_HINT_T0);
				}
				wq[s] = load_q_pair_gemv(type, wb + 2 * s * bsz);
			}
			if (NT == 1)
				sv[i] = q_group_scales(type, w[i], b, m, &mv[i]);
			/* G = 4: lanes 8-15 have zero scales (and finite sums) */
			acc[i][q] = q_group_dot(type, wq, xq[q] + b * LLM_QK, off,
									_mm512_permutexvar_ps(BLOCK_ORDER, _mm512_mul_ps(sv[i], dav)), acc[i][q], G);
			if (q_has_min(type))
				acc[i][q] = q_group_mins(xs[q], b, m, _mm512_permutexvar_ps(BLOCK_ORDER, _mm512_mul_ps(mv[i], dav)),
										 acc[i][q]);
		}
	}
}

/* The blocks of a row that q_group covers (groups of 16, then one of 8); q_steps takes the rest. */
static inline int64_t
q_group_blocks(int64_t nb)
{
	return nb / 16 * 16 + (nb % 16 >= 8 ? 8 : 0);
}

/*
 * Point w at MR weight rows from r, xq and xd at the quants and scales of
 * NT tokens' activations from t (their block sums follow at the format's
 * offset from xq), and zero acc: the start of every quantized tile.
 */
KERN void
tile_init(const LlmGemmArgs *a, int64_t r, int t, const uint8_t **w, const int8_t **xq, const float **xd,
		  __m512 acc[4][6], const int MR, const int NT)
{
#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
		w[i] = a->w + (size_t) (r + i) * a->row_bytes;
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		const uint8_t *row = a->x + (size_t) (t + q) * a->x_stride;

		xq[q] = (const int8_t *) row;
		xd[q] = (const float *) (row + llm_act_d_offset(a->k));
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			acc[i][q] = _mm512_setzero_ps();
	}
}

/*
 * One row's group of 16 blocks, unpacked and interleaved by block: vector s
 * holds in lane e the quants 4s .. 4s + 3 of block BLOCK_ORDER[e], as
 * unsigned bytes (Q8_0 w + 128, Q4_0/Q4_1 the nibble), so 8 vpdpbusd on
 * equally interleaved activations leave each block's whole integer dot
 * product in its own lane, with no reduction; the scales in BLOCK_ORDER.
 * A group of 8 blocks is folded into q[0..3] (fold_half_group): lanes e and
 * e + 8 both hold block BLOCK_ORDER[e], one swap-and-add from whole.
 */
typedef struct QGroupPack
{
	uint8_t		q[8][64];
	float		d[16];
	float		m[16];			/* Q4_1's minimums, BLOCK_ORDER */
} QGroupPack;

/*
 * The 16 blocks of 32 bytes in v (v[m]: block 2m in lanes 0-7, 2m + 1 in
 * lanes 8-15; an 8-block group with v[4..7] zero) interleaved by block:
 * lane e of out[s] gets dword s of block BLOCK_ORDER[e].  The same three
 * unpack rounds as reduce_blocks', which is why that order comes out.
 */
KERN void
interleave_blocks(const __m512i *v, __m512i *out)
{
	__m512i		t[8];

#pragma GCC unroll 4
	for (int m = 0; m < 4; m++)	/* per 128-bit lane: dwords 0, 1 (lo) or 2, 3 (hi) of v[2m], v[2m + 1] */
	{
		t[2 * m] = _mm512_unpacklo_epi32(v[2 * m], v[2 * m + 1]);
		t[2 * m + 1] = _mm512_unpackhi_epi32(v[2 * m], v[2 * m + 1]);
	}
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++)	/* blocks 0-7 (h = 0) or 8-15 */
#pragma GCC unroll 2
		for (int j = 0; j < 2; j++)	/* dwords 0, 1 (j = 0) or 2, 3 of each 128-bit lane */
		{
			__m512i		lo = _mm512_unpacklo_epi64(t[4 * h + j], t[4 * h + 2 + j]);
			__m512i		hi = _mm512_unpackhi_epi64(t[4 * h + j], t[4 * h + 2 + j]);

			/* per 128-bit lane, dword 2j (lo) or 2j + 1 (hi) of four blocks */
			t[4 * h + j] = lo;
			t[4 * h + 2 + j] = hi;
		}
	/* t[4h + d'] with d' = 0, 2, 1, 3 for dwords 0-3: lanes 0 and 2 those dwords, lanes 1 and 3 dwords + 4 */
#pragma GCC unroll 4
	for (int d = 0; d < 4; d++)
	{
		const int	i = d == 0 ? 0 : d == 1 ? 2 : d == 2 ? 1 : 3;

		out[d] = _mm512_shuffle_i32x4(t[i], t[4 + i], _MM_SHUFFLE(2, 0, 2, 0));
		out[d + 4] = _mm512_shuffle_i32x4(t[i], t[4 + i], _MM_SHUFFLE(3, 1, 3, 1));
	}
}

/*
 * An 8-block group as interleave_blocks leaves it (lanes 8-15 of out[0..7]
 * zero) folded into out[0..3]: lane e of out[s] keeps dword s of block
 * BLOCK_ORDER[e] and lane e + 8 gets its dword s + 4, so four full-width
 * vpdpbusd cover the group and each block's sum is lanes e plus e + 8.
 */
KERN void
fold_half_group(__m512i *out)
{
#pragma GCC unroll 4
	for (int s = 0; s < 4; s++)
		out[s] = _mm512_shuffle_i32x4(out[s], out[s + 4], _MM_SHUFFLE(1, 0, 1, 0));
}

/*
 * One group of 2G blocks (G = 8, or 4: folded) of a token's activation
 * quants from xq, interleaved by block as QGroupPack's (out[G .. 7] are
 * not part of it).
 */
KERN void
interleave_act_group(const int8_t *xq, const int G, __m512i *out)
{
	__m512i		v[8];

	for (int m = 0; m < 8; m++)
		v[m] = m < G ? _mm512_loadu_si512(xq + 2 * m * LLM_QK) : _mm512_setzero_si512();
	interleave_blocks(v, out);
	if (G == 4)
		fold_half_group(out);
}

/*
 * The quants of one token's activation groups (all of k that q_group
 * covers) from xq, interleaved as QGroupPack's (an 8-block group folded
 * into its first 256 bytes), 512 bytes a group, into dst.
 */
KERN void
interleave_act_groups(const int8_t *xq, int64_t ng, uint8_t *dst)
{
	for (int64_t b = 0; b < ng; b += 16, dst += 512)
	{
		__m512i		out[8];

		interleave_act_group(xq + b * LLM_QK, ng - b >= 16 ? 8 : 4, out);
		for (int s = 0; s < 8; s++)	/* all 8 (a bound of G compiles to a rep movsq from the stack) */
			_mm512_store_si512(dst + 64 * s, out[s]);
	}
}

/* Unpack the groups of Q_MR rows from w0 (stride wstride) into buf (group, row), interleaved. */
KERN void
pack_q_groups(LlmType type, const uint8_t *w0, size_t wstride, int64_t nb, QGroupPack *buf)
{
	const size_t bsz = llm_block_bytes(type);
	const int64_t ng = q_group_blocks(nb);

	for (int64_t b = 0; b < ng; b += 16)
		for (int i = 0; i < Q_MR; i++, buf++)
		{
			const uint8_t *w = w0 + (size_t) i * wstride;
			const int	G = ng - b >= 16 ? 8 : 4;
			__m512		mins = _mm512_setzero_ps();
			__m512i		v[8];
			__m512i		out[8];

			for (int m = 0; m < 8; m++)
			{
				/* the next tile's rows, from memory while this tile's tokens run */
				if (m < G)
				{
					_mm_prefetch((const char *) (w + Q_MR * wstride + (b + 2 * m) * bsz), _MM_HINT_T0);
					_mm_prefetch((const char *) (w + Q_MR * wstride + (b + 2 * m + 2) * bsz - 1), _MM_HINT_T0);
				}
				v[m] = m < G ? load_q_pair_gemv(type, w + (b + 2 * m) * bsz) : _mm512_setzero_si512();
				/* Q4: the high nibbles (128-bit lanes 1 and 3) down to their values */
				if (q_nibbles(type))
					v[m] = _mm512_srlv_epi64(v[m], _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
			}
			interleave_blocks(v, out);
			if (G == 4)
				fold_half_group(out);
			for (int s = 0; s < 8; s++)	/* all 8, as interleave_act_groups */
				_mm512_store_si512(buf->q[s], out[s]);
			_mm512_store_ps(buf->d, _mm512_permutexvar_ps(BLOCK_ORDER, q_group_scales(type, w, b, G == 8 ? 0xFFFF : 0x00FF, &mins)));
			_mm512_store_ps(buf->m, _mm512_permutexvar_ps(BLOCK_ORDER, mins));
		}
}

/* Unpack blocks [b, nb) (the tail, fewer than 8) of Q_MR rows from w0 into buf (step, row). */
KERN void
pack_q_tail(LlmType type, const uint8_t *w0, size_t wstride, int64_t b, int64_t nb, QStepPack *buf)
{
	const size_t bsz = llm_block_bytes(type);

	if (nb - b >= 4)			/* q_quad's two steps */
	{
		for (int i = 0; i < Q_MR; i++)
		{
			__m512i		q[2];
			__m512		d;
			__m512		m = _mm512_setzero_ps();

			load_q_quad(type, w0 + (size_t) i * wstride + b * bsz, q, &d, &m);
			_mm512_store_si512(buf[i].q, q[0]);
			_mm512_store_si512(buf[Q_MR + i].q, q[1]);
			_mm512_store_ps(buf[i].d, d);
			_mm512_store_ps(buf[i].m, m);
		}
		buf += 2 * Q_MR;
		b += 4;
	}
	for (; b < nb; b += 2)
		for (int i = 0; i < Q_MR; i++, buf++)
		{
			__m512i		q;
			__m512		d;
			__m512		m = _mm512_setzero_ps();

			if (b + 2 <= nb)
				load_q_pair(type, w0 + (size_t) i * wstride + b * bsz, &q, &d, &m);
			else
				load_q_single(type, w0 + (size_t) i * wstride + b * bsz, &q, &d, &m);
			_mm512_store_si512(buf->q, q);
			_mm512_store_ps(buf->d, d);
			_mm512_store_ps(buf->m, m);
		}
}

/* Step s of q_group_packed_sums: vector s of Q_MR packed rows (pk) by NT tokens' (xi), added into p. */
KERN void
q_packed_step(const QGroupPack *pk, const uint8_t *const *xi, __m512i p[4][6], const int NT, const int s)
{
	__m512i		wq[4];

#pragma GCC unroll 4
	for (int i = 0; i < Q_MR; i++)
	{
		wq[i] = _mm512_load_si512(pk[i].q[s]);
		/* in a register, used NT times: GCC would reload it for every token */
		__asm__("" : "+v"(wq[i]));
	}
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		/* loaded once for the Q_MR rows (as a memory operand, once for each: 15% slower) */
		__m512i		xa = _mm512_load_si512(xi[q] + 64 * s);

		__asm__("" : "+v"(xa));
#pragma GCC unroll 4
		for (int i = 0; i < Q_MR; i++)
			p[i][q] = _mm512_dpbusd_epi32(p[i][q], wq[i], xa);
	}
}

/*
 * The integer dot products of one group of Q_MR packed rows (pk) by NT
 * tokens (xi: their interleaved quants of the group) into p, 8 steps of
 * vpdpbusd, each block's sum whole in its lane; with half (a group of 8
 * blocks, folded) 4 steps, then each lane e < 8 adds lane e + 8 and lanes
 * 8-15 are zeroed: the same exact sums in the same lanes.
 */
KERN void
q_group_packed_sums(const QGroupPack *pk, const uint8_t *const *xi, __m512i p[4][6], const int NT, const bool half)
{
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
#pragma GCC unroll 4
		for (int i = 0; i < Q_MR; i++)
			p[i][q] = _mm512_setzero_si512();
	if (!half)
	{
#pragma GCC unroll 8
		for (int s = 0; s < 8; s++)
			q_packed_step(pk, xi, p, NT, s);
		return;
	}
#pragma GCC unroll 4
	for (int s = 0; s < 4; s++)
		q_packed_step(pk, xi, p, NT, s);
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
#pragma GCC unroll 4
		for (int i = 0; i < Q_MR; i++)
			p[i][q] = _mm512_maskz_add_epi32(0x00FF, p[i][q],
											 _mm512_shuffle_i32x4(p[i][q], p[i][q], _MM_SHUFFLE(1, 0, 3, 2)));
}

/*
 * One group of 16 blocks (or 8: lanes 8-15 zero) from block b of Q_MR
 * packed rows (pk) by NT tokens (xi: their interleaved quants of the
 * group), added into acc (registers): each block's integer dot product
 * whole in its lane after 8 steps, then q_group_dot's subtraction, convert
 * and FMA, so the bits are q_group's.
 */
KERN void
q_group_packed(LlmType type, const QGroupPack *pk, const uint8_t *const *xi, const float *const *xd,
			   const int32_t *const *xs, int64_t b, __m512 acc[4][6], const int NT, const bool half)
{
	const __mmask16 m = half ? 0x00FF : 0xFFFF;
	__m512i		p[4][6];

	if (half)
		q_group_packed_sums(pk, xi, p, NT, true);
	else
		q_group_packed_sums(pk, xi, p, NT, false);
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		__m512		dav = _mm512_permutexvar_ps(BLOCK_ORDER, _mm512_maskz_loadu_ps(m, xd[q] + b));
		__m512i		off = q_group_offset(type, xs[q], b, m);

#pragma GCC unroll 4
		for (int i = 0; i < Q_MR; i++)
		{
			/* (permuted scales times permuted scales: the bits of q_group's permuted product) */
			acc[i][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(p[i][q], off)),
										_mm512_mul_ps(_mm512_load_ps(pk[i].d), dav), acc[i][q]);
			if (q_has_min(type))
				acc[i][q] = q_group_mins(xs[q], b, m, _mm512_mul_ps(_mm512_load_ps(pk[i].m), dav), acc[i][q]);
		}
	}
}

/*
 * Tile of MR rows by NT tokens of a Q8_0, Q4_0 or Q4_1 weight, in the one
 * order of operations every output follows whatever the number of tokens
 * (the batch-invariance rule): groups of 16 blocks (then one of 8 if left)
 * by q_group straight from the weights -- or, given pk (MR = Q_MR), by
 * q_group_packed on the rows' interleaved groups and the tokens' (xi, one
 * token every xi_stride bytes), the same bits -- the last blocks (fewer
 * than 8) by q_steps (from tp when packed), then the 16 lanes summed
 * (hsum4's order).  With one token and no pk this is the GEMV of decode,
 * prefetching two row tiles ahead.
 */
KERN void
tile_q(LlmType type, const LlmGemmArgs *a, const QGroupPack *pk, const QStepPack *tp, const uint8_t *xi0,
	   size_t xi_stride, int64_t r, int t, const int MR, const int NT)
{
	const int64_t ng = q_group_blocks(a->k / LLM_QK);
	const uint8_t *w[4];
	const int8_t *xq[6];
	const float *xd[6];
	const int32_t *xs[6];
	const uint8_t *xi[6];
	__m512		acc[4][6];
	int64_t		b = 0;

	tile_init(a, r, t, w, xq, xd, acc, MR, NT);
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
	{
		xs[q] = (const int32_t *) ((const uint8_t *) xq[q] + llm_act_sums_offset(a->k));
		xi[q] = xi0 + (size_t) q * xi_stride;
	}
	if (pk != NULL && ng > 0)
	{
		for (; b + 16 <= ng; b += 16, pk += Q_MR)
		{
			q_group_packed(type, pk, xi, xd, xs, b, acc, NT, false);
#pragma GCC unroll 6
			for (int q = 0; q < NT; q++)
				xi[q] += 512;
		}
		/* the half group, out of the loop (in it, the full groups' registers spill: 20% slower) */
		if (b < ng)
		{
			q_group_packed(type, pk, xi, xd, xs, b, acc, NT, true);
			b = ng;
		}
	}
	for (; b < ng; b += 16)
	{
		if (ng - b >= 16)
			q_group(type, a, w, xq, xd, xs, b, acc, MR, NT, 8);
		else
			q_group(type, a, w, xq, xd, xs, b, acc, MR, NT, 4);
	}
	q_steps(type, a, w, tp, xq, xd, xs, ng, acc, MR, NT);
	store_tile(a, r, t, acc, MR, NT, false);
}

/* The tile calls of gemm_q, for TOKEN_TILES (they use its locals). */
#define CALL_Q(T, NT) tile_q(type, a, NULL, NULL, NULL, 0, r, T, Q_MR, NT)
#define CALL_Q1(T, NT) tile_q(type, a, NULL, NULL, NULL, 0, r, T, 1, NT)
#define CALL_Q_PACKED(T, NT) tile_q(type, a, pk, tail, \
									xil + (size_t) ((T) - t0) * xil_stride, xil_stride, r, T, Q_MR, NT)

#define Q_PACK_STACK 16			/* groups of Q_MR rows packed on the stack (40 kB); more: the heap */

/*
 * The gemm of Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1: for up to Q_DIRECT_TOKENS
 * tokens a row at a time from the weights (one token: the GEMV); for more,
 * the tokens' activations are interleaved by block once, and each tile of
 * Q_MR rows is unpacked, all of k, into buffers reused for every token
 * (without the memory for either, the direct tiles: the same bits).
 */
KERN void
gemm_q(LlmType type, const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	const int64_t nb = a->k / LLM_QK;
	const int64_t n_groups = (q_group_blocks(nb) + 15) / 16;
	const size_t xil_stride = 512 * (size_t) n_groups;
	_Alignas(64) QGroupPack stack_pk[Q_PACK_STACK * Q_MR];
	_Alignas(64) QStepPack tail[4 * Q_MR];
	QGroupPack *pk = NULL;
	uint8_t    *xil = NULL;
	int64_t		r = r0;

	if (t1 - t0 > Q_DIRECT_TOKENS && n_groups > 0)
	{
		pk = n_groups <= Q_PACK_STACK ? stack_pk : aligned_alloc(64, sizeof(QGroupPack) * Q_MR * (size_t) n_groups);
		xil = aligned_alloc(64, xil_stride * (size_t) (t1 - t0));
		if (pk == NULL || xil == NULL)
		{
			if (pk != stack_pk)
				free(pk);
			free(xil);
			pk = NULL;
			xil = NULL;
		}
		else
			for (int t = t0; t < t1; t++)
				interleave_act_groups((const int8_t *) (a->x + (size_t) t * a->x_stride), q_group_blocks(nb),
									  xil + (size_t) (t - t0) * xil_stride);
	}
	/* a row at a time (the GEMV, and a few tokens): one stream of weights per thread reads DRAM at about 1.8x the speed of four */
	if (t1 - t0 <= Q_DIRECT_TOKENS)
		for (; r < r1; r++)
			TOKEN_TILES(CALL_Q1, Q_DIRECT_TOKENS);
	for (; r + Q_MR <= r1; r += Q_MR)
	{
		if (pk != NULL)
		{
			pack_q_groups(type, a->w + (size_t) r * a->row_bytes, a->row_bytes, nb, pk);
			pack_q_tail(type, a->w + (size_t) r * a->row_bytes, a->row_bytes, q_group_blocks(nb), nb, tail);
			TOKEN_TILES(CALL_Q_PACKED, Q_NT);
		}
		else
			TOKEN_TILES(CALL_Q, Q_NT);
	}
	for (; r < r1; r++)
		TOKEN_TILES(CALL_Q1, Q_NT);
	if (pk != stack_pk)
		free(pk);
	free(xil);
}

/* The gemm of Q8_0 weights. */
static void
gemm_q8_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q8_0, a, r0, r1, t0, t1);
}

/* The gemm of Q4_1 weights. */
static void
gemm_q4_1(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q4_1, a, r0, r1, t0, t1);
}

/* The gemm of Q4_0 weights. */
static void
gemm_q4_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q4_0, a, r0, r1, t0, t1);
}

/* The gemm of Q5_0 weights. */
static void
gemm_q5_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q5_0, a, r0, r1, t0, t1);
}

/* The gemm of Q5_1 weights. */
static void
gemm_q5_1(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q5_1, a, r0, r1, t0, t1);
}

/*
 * ---- the grouped types: Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 rows grouped when a CPU engine starts ----
 *
 * quant_groups.c keeps each group of 16 (or 8) blocks as QGroupPack's
 * vectors (Q4, Q5: two vectors a byte, as nibbles; Q5's fifth bits as one
 * 64-bit mask a vector) after the blocks' fp16 scales in lane order, and
 * the activations (LLM_ACT_Q8G) in the same
 * interleaved order.  So a row's group costs a few loads, the nibbles'
 * masks, 8 vpdpbusd and one convert and FMA: no unpacking, no reduction
 * and no gather, and the bits are the base type's (q_group_packed's
 * operations on the same vectors), as the tests check.  The blocks after
 * the groups are the base type's and go through q_steps.
 */

/* Bytes of a group's scales (Q4_1, Q5_1: and minimums) before its fifth bits (Q5) or quants, for 2G blocks. */
KERN size_t
g_scale_bytes(LlmType base, const int G)
{
	return (size_t) (2 * G) * (q_has_min(base) ? 4 : 2);
}

/* The 2G fp16 values (G = 8 or 4; lanes 8-15 zero for 4) at p as floats. */
KERN __m512
g_load_halves(const uint8_t *p, const int G)
{
	if (G == 8)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p));
	return _mm512_zextps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p)));
}

/*
 * The G vectors of unsigned quants of the group at g (2G blocks): Q8_0's
 * as stored; the others' nibbles (vector s + G / 2 in the high ones), Q5's
 * with their fifth bits, byte i of vector s the bit i of 64-bit word s,
 * added as 16 under that mask.
 */
KERN void
g_load_quants(LlmType base, const uint8_t *g, __m512i *wq, const int G)
{
	const bool	fifth = base == LLM_TYPE_Q5_0 || base == LLM_TYPE_Q5_1;
	const uint8_t *q = g + g_scale_bytes(base, G) + (fifth ? 8 * (size_t) G : 0);

	if (base == LLM_TYPE_Q8_0)
	{
#pragma GCC unroll 8
		for (int s = 0; s < G; s++)
			wq[s] = _mm512_loadu_si512(q + 64 * s);
		return;
	}
#pragma GCC unroll 4
	for (int u = 0; u < G / 2; u++)
	{
		__m512i		v = _mm512_loadu_si512(q + 64 * u);

		wq[u] = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
		wq[u + G / 2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
	}
	if (fifth)
#pragma GCC unroll 8
		for (int s = 0; s < G; s++)
		{
			uint64_t	bits;

			memcpy(&bits, g + g_scale_bytes(base, G) + 8 * s, sizeof(bits));
			wq[s] = _mm512_mask_add_epi8(wq[s], _cvtu64_mask64(bits), wq[s], _mm512_set1_epi8(16));
		}
}

/*
 * One group of 2G blocks (G = 8, or 4: folded) from block b of a grouped
 * row (g: the group's bytes) by NT tokens (xq: their grouped quants), added
 * into acc: 8 (or 4) vpdpbusd into two integer sums per token (their sum
 * exact, so any split gives the same integers), each block's dot product
 * whole in its lane, then q_group_packed's subtraction, convert and FMA.
 * pf: how far ahead to prefetch.
 */
KERN void
g_group(LlmType base, const uint8_t *g, size_t pf, const int8_t *const *xq, const float *const *xd,
		const int32_t *const *xs, int64_t b, __m512 *acc, const int NT, const int G)
{
	const __mmask16 m = G == 8 ? 0xFFFF : 0x00FF;
	const size_t bytes = 2 * (size_t) G * llm_block_bytes(base);
	__m512		wd = g_load_halves(g, G);
	__m512		wm = q_has_min(base) ? g_load_halves(g + 4 * G, G) : _mm512_setzero_ps();
	__m512i		wq[8];

	for (size_t o = 0; o < bytes; o += 64)
		_mm_prefetch((const char *) (g + pf + o), _MM_HINT_T0);
	g_load_quants(base, g, wq, G);
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		const int8_t *x = xq[q] + b * LLM_QK;
		__m512i		p0 = _mm512_setzero_si512();
		__m512i		p1 = _mm512_setzero_si512();
		__m512		dav = _mm512_permutexvar_ps(BLOCK_ORDER, _mm512_maskz_loadu_ps(m, xd[q] + b));
		__m512i		p;

#pragma GCC unroll 4
		for (int s = 0; s < G; s += 2)
		{
			p0 = _mm512_dpbusd_epi32(p0, wq[s], _mm512_loadu_si512(x + 64 * s));
			p1 = _mm512_dpbusd_epi32(p1, wq[s + 1], _mm512_loadu_si512(x + 64 * (s + 1)));
		}
		p = _mm512_add_epi32(p0, p1);
		if (G == 4)				/* lanes e and e + 8 are the halves of one block */
			p = _mm512_maskz_add_epi32(0x00FF, p, _mm512_shuffle_i32x4(p, p, _MM_SHUFFLE(1, 0, 3, 2)));
		acc[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(p, q_group_offset(base, xs[q], b, m))),
								 _mm512_mul_ps(wd, dav), acc[q]);
		if (q_has_min(base))
			acc[q] = q_group_mins(xs[q], b, m, _mm512_mul_ps(wm, dav), acc[q]);
	}
}

/*
 * One grouped row r by NT (<= Q_DIRECT_TOKENS) tokens from t: its groups by
 * g_group, its last blocks by q_steps, then its lanes summed; with one
 * token the GEMV of decode, prefetching two rows ahead.
 */
KERN void
tile_g(LlmType base, const LlmGemmArgs *a, int64_t r, int t, const int NT)
{
	const int64_t nb = a->k / LLM_QK;
	const int64_t ng = q_group_blocks(nb);
	const size_t bsz = llm_block_bytes(base);
	const uint8_t *w[4];
	const int8_t *xq[6];
	const float *xd[6];
	const int32_t *xs[6];
	__m512		acc[4][6];
	int64_t		b = 0;

	tile_init(a, r, t, w, xq, xd, acc, 1, NT);
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
		xs[q] = (const int32_t *) ((const uint8_t *) xq[q] + llm_act_sums_offset(a->k));
	for (; b + 16 <= ng; b += 16)
		g_group(base, w[0] + b * bsz, PF_GROUPS * a->row_bytes, xq, xd, xs, b, acc[0], NT, 8);
	if (b < ng)
		g_group(base, w[0] + b * bsz, PF_GROUPS * a->row_bytes, xq, xd, xs, b, acc[0], NT, 4);
	q_steps(base, a, w, NULL, xq, xd, xs, ng, acc, 1, NT);
	store_tile(a, r, t, acc, 1, NT, false);
}

/* Unpack the groups of Q_MR grouped rows from w0 (stride wstride) into buf (group, row): QGroupPack's form. */
KERN void
pack_g_groups(LlmType base, const uint8_t *w0, size_t wstride, int64_t nb, QGroupPack *buf)
{
	const size_t bsz = llm_block_bytes(base);
	const int64_t ng = q_group_blocks(nb);

	for (int64_t b = 0; b < ng; b += 16)
		for (int i = 0; i < Q_MR; i++, buf++)
		{
			const uint8_t *g = w0 + (size_t) i * wstride + b * bsz;
			const int	G = ng - b >= 16 ? 8 : 4;
			__m512i		wq[8];

			for (size_t o = 0; o < 2 * (size_t) G * bsz; o += 64)
				_mm_prefetch((const char *) (g + Q_MR * wstride + o), _MM_HINT_T0);
			if (G == 8)
				g_load_quants(base, g, wq, 8);
			else
				g_load_quants(base, g, wq, 4);
			for (int s = 0; s < 8; s++)
				_mm512_store_si512(buf->q[s], s < G ? wq[s] : _mm512_setzero_si512());
			_mm512_store_ps(buf->d, g_load_halves(g, G));
			_mm512_store_ps(buf->m, q_has_min(base) ? g_load_halves(g + 4 * G, G) : _mm512_setzero_ps());
		}
}

/* The tile calls of gemm_g, for TOKEN_TILES (they use its locals). */
#define CALL_G1(T, NT) tile_g(base, a, r, T, NT)
#define CALL_G_PACKED(T, NT) tile_q(base, a, pk, tail, a->x + (size_t) (T) * a->x_stride, a->x_stride, r, T, Q_MR, NT)

/*
 * The gemm of a grouped type (base: Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1): up to
 * Q_DIRECT_TOKENS tokens a row at a time from the weights (one token: the
 * GEMV); for more, each tile of Q_MR rows is copied into QGroupPacks (no
 * interleaving left to do) for tile_q's packed path, whose activations are
 * the grouped ones as they are (without the memory, the direct rows: the
 * same bits).
 */
KERN void
gemm_g(LlmType base, const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	const int64_t nb = a->k / LLM_QK;
	const int64_t n_groups = (q_group_blocks(nb) + 15) / 16;
	_Alignas(64) QGroupPack stack_pk[Q_PACK_STACK * Q_MR];
	_Alignas(64) QStepPack tail[4 * Q_MR];
	QGroupPack *pk = NULL;
	int64_t		r = r0;

	if (t1 - t0 > Q_DIRECT_TOKENS && n_groups > 0)
		pk = n_groups <= Q_PACK_STACK ? stack_pk : aligned_alloc(64, sizeof(QGroupPack) * Q_MR * (size_t) n_groups);
	if (pk != NULL)
		for (; r + Q_MR <= r1; r += Q_MR)
		{
			pack_g_groups(base, a->w + (size_t) r * a->row_bytes, a->row_bytes, nb, pk);
			pack_q_tail(base, a->w + (size_t) r * a->row_bytes, a->row_bytes, q_group_blocks(nb), nb, tail);
			TOKEN_TILES(CALL_G_PACKED, Q_NT);
		}
	for (; r < r1; r++)
		TOKEN_TILES(CALL_G1, Q_DIRECT_TOKENS);
	if (pk != stack_pk)
		free(pk);
}

/* The gemm of grouped Q8_0 weights. */
static void
gemm_q8_0_g(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_g(LLM_TYPE_Q8_0, a, r0, r1, t0, t1);
}

/* The gemm of grouped Q4_0 weights. */
static void
gemm_q4_0_g(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_g(LLM_TYPE_Q4_0, a, r0, r1, t0, t1);
}

/* The gemm of grouped Q4_1 weights. */
static void
gemm_q4_1_g(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_g(LLM_TYPE_Q4_1, a, r0, r1, t0, t1);
}

/* The gemm of grouped Q5_0 weights. */
static void
gemm_q5_0_g(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_g(LLM_TYPE_Q5_0, a, r0, r1, t0, t1);
}

/* The gemm of grouped Q5_1 weights. */
static void
gemm_q5_1_g(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_g(LLM_TYPE_Q5_1, a, r0, r1, t0, t1);
}

/*
 * ---- many tokens on AMX: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and their grouped types ----
 *
 * Where cpu_features.c grants AMX (LLM_CPU_AMX=1), matmul.c gives the calls that AMX wins
 * (LLM_AMX_MIN_TOKENS tokens and more, rows of whole groups) to the table
 * llm_matmul_kernels_avx512_amx, whose activations are plain Q8 for every
 * type, grouped or not.  The tokens are packed once per call, 16 a tile
 * (llm_amx_pack_tokens); each panel of 16 rows is unpacked once
 * (amx_unpack_rows: signed quants in value order, Q8_0 read in place) and
 * multiplied by every token tile (llm_amx_tiles, matmul_amx.h), which does
 * q_group's float operations lane by lane and store_tile's sum.  So every
 * output has the bits of the VNNI kernels whatever the number of tokens, as
 * the kernel and invariance tests check with AMX on and off
 * (LLM_CPU_AMX=1).
 */

/*
 * The grouped blocks of w->rows rows from r of a Q type (base; grouped: in
 * quant_groups.c's layout) into w for the A tiles: their quants signed, in
 * value order, at q (row i at q + i * w->stride), and their scales (and
 * minimums) by block.  Q8_0 rows are read in place (q unused).
 */
KERN void
amx_unpack_rows(LlmType base, bool grouped, const LlmGemmArgs *a, int64_t r, LlmAmxRows *w, int8_t *q)
{
	const size_t bsz = llm_block_bytes(base);
	const __m512i off = _mm512_set1_epi8((char) (q_has_min(base) ? 0 : 1 << q_offset_log2(base)));
	const bool	direct = base == LLM_TYPE_Q8_0 && !grouped;

	w->q = direct ? (const int8_t *) (a->w + (size_t) r * a->row_bytes + 2) : q;
	w->stride = direct ? a->row_bytes : (size_t) w->nb * LLM_QK;
	w->block_stride = direct ? bsz : LLM_QK;
	for (int64_t b0 = 0; b0 < w->nb; b0 += 16)
	{
		const int	G = w->nb - b0 >= 16 ? 8 : 4;	/* vectors of two blocks */
		__m512i		ds[16];			/* row i's scales of the group, in value order (grouped: lane order) */
		__m512i		ms[16];

		for (int i = 0; i < 16; i++)
		{
			const uint8_t *row;
			int8_t	   *dst;
			__m512		d;
			__m512		m = _mm512_setzero_ps();

			if (i >= w->rows)
			{
				ds[i] = ms[i] = _mm512_setzero_si512();
				continue;
			}
			row = a->w + (size_t) (r + i) * a->row_bytes + b0 * bsz;
			dst = direct ? NULL : q + (size_t) i * w->stride + b0 * LLM_QK;
			/* the next panel's row, into L2 while this panel's token tiles run */
			for (size_t o = 0; o < 2 * (size_t) G * bsz; o += 64)
				_mm_prefetch((const char *) (row + LLM_AMX_ROWS * a->row_bytes + o), _MM_HINT_T1);
			if (!grouped)
			{
				for (int v = 0; v < G && !direct; v++)
				{
					__m512i		x = load_q_pair_gemv(base, row + 2 * v * bsz);

					if (q_nibbles(base))	/* the high nibbles (128-bit lanes 1 and 3) down to their values */
						x = _mm512_srlv_epi64(x, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
					_mm512_storeu_si512(dst + 64 * v, _mm512_sub_epi8(x, off));
				}
				d = q_group_scales(base, row, 0, G == 8 ? 0xFFFF : 0x00FF, &m);
			}
			else
			{
				/* a group's vectors s (lane e: quad s of block BLOCK_ORDER[e]) transposed to each block's quads */
				__m512i		wq[8];
				__m512i		t[16];

				if (G == 8)
					g_load_quants(base, row, wq, 8);
				else
					g_load_quants(base, row, wq, 4);
				for (int s = 0; s < 16; s++)
					t[s] = s < G ? _mm512_sub_epi8(wq[s], off) : _mm512_setzero_si512();
				llm_transpose16(t);
				for (int e = 0; e < 8 + (G == 8 ? 8 : 0); e++)
				{
					int8_t	   *blk = dst + BLOCK_ORDER_OF(e) * LLM_QK;

					if (G == 8)
						_mm256_storeu_si256((__m256i *) blk, _mm512_castsi512_si256(t[e]));
					else		/* folded: lane e + 8 holds quads 4-7 of the block of lane e */
					{
						_mm_storeu_si128((__m128i *) blk, _mm512_castsi512_si128(t[e]));
						_mm_storeu_si128((__m128i *) (blk + 16), _mm512_castsi512_si128(t[e + 8]));
					}
				}
				d = g_load_halves(row, G);
				if (q_has_min(base))
					m = g_load_halves(row + 4 * G, G);
			}
			ds[i] = _mm512_castps_si512(d);
			ms[i] = _mm512_castps_si512(m);
		}
		/* transposed, vector j is lane j's block of every row: block j, or (grouped) BLOCK_ORDER[j] */
		llm_transpose16(ds);
		llm_transpose16(ms);
		for (int j = 0; j < 2 * G; j++)
		{
			const int64_t b = b0 + (grouped ? BLOCK_ORDER_OF(j) : j);

			_mm512_store_si512(w->d[b], ds[j]);
			if (w->mins)
				_mm512_store_si512(w->m[b], ms[j]);
		}
	}
}

/* The tiles of rows [r0, r1) by the token tiles tks[0 .. n) (from token t), each panel of rows unpacked once. */
KERN void
amx_panels(LlmType base, bool grouped, const LlmGemmArgs *a, int64_t r0, int64_t r1, int t, const LlmAmxTokens *tks,
		   int n, LlmAmxRows *w, int8_t *q)
{
	for (int64_t r = r0; r < r1; r += LLM_AMX_ROWS)
	{
		w->rows = r1 - r < LLM_AMX_ROWS ? (int) (r1 - r) : LLM_AMX_ROWS;
		amx_unpack_rows(base, grouped, a, r, w, q);
		for (int j = 0; j < n; j++)
			llm_amx_tiles(w, &tks[j], a->y + (size_t) (t + j * LLM_AMX_TOKENS) * a->ldy + r, a->ldy);
	}
}

/*
 * The gemm of a Q type (base; grouped: its rows in quant_groups.c's layout)
 * on AMX, activations plain Q8: every tile of 16 tokens packed once (into
 * the thread's llm_amx_scratch), then each panel of 16 rows unpacked once
 * (Q8_0 read in place) and multiplied by all of them; without that memory,
 * one token tile at a time from the stack (the rows unpacked for each: the
 * same bits).
 */
KERN void
gemm_amx(LlmType base, bool grouped, const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	const int64_t ng = q_group_blocks(a->k / LLM_QK);
	const int	n_tiles = (t1 - t0 + LLM_AMX_TOKENS - 1) / LLM_AMX_TOKENS;
	const size_t tile_bytes = llm_amx_tokens_bytes(ng);
	LlmAmxTokens tks[64];
	_Alignas(64) LlmAmxRows w;
	_Alignas(64) int8_t q[LLM_AMX_ROWS * LLM_AMX_MAX_BLOCKS * LLM_QK];
	_Alignas(64) uint8_t one[llm_amx_tokens_bytes(LLM_AMX_MAX_BLOCKS)];
	uint8_t    *buf = n_tiles > 1 && n_tiles <= (int) (sizeof(tks) / sizeof(tks[0]))
		? llm_amx_scratch(tile_bytes * (size_t) n_tiles) : NULL;
	const int	per_pass = buf != NULL ? n_tiles : 1;	/* token tiles packed at once */

	w.nb = ng;
	w.mins = q_has_min(base);
	for (int t = t0; t < t1; t += per_pass * LLM_AMX_TOKENS)
	{
		int			n = 0;

		for (int u = t; u < t1 && n < per_pass; u += LLM_AMX_TOKENS, n++)
			llm_amx_pack_tokens(&tks[n], (buf != NULL ? buf : one) + tile_bytes * (size_t) n,
								a->x + (size_t) u * a->x_stride, a->x_stride, a->k, ng,
								t1 - u < LLM_AMX_TOKENS ? t1 - u : LLM_AMX_TOKENS, w.mins);
		amx_panels(base, grouped, a, r0, r1, t, tks, n, &w, q);
	}
	llm_amx_release();
}

/* The AMX gemm NAME of a type: its base type's, in the grouped layout or not. */
#define GEMM_AMX(NAME, BASE, GROUPED) \
	static void \
	NAME(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1) \
	{ \
		gemm_amx(BASE, GROUPED, a, r0, r1, t0, t1); \
	}

GEMM_AMX(gemm_q8_0_amx, LLM_TYPE_Q8_0, false)
GEMM_AMX(gemm_q4_0_amx, LLM_TYPE_Q4_0, false)
GEMM_AMX(gemm_q4_1_amx, LLM_TYPE_Q4_1, false)
GEMM_AMX(gemm_q5_0_amx, LLM_TYPE_Q5_0, false)
GEMM_AMX(gemm_q5_1_amx, LLM_TYPE_Q5_1, false)
GEMM_AMX(gemm_q8_0_g_amx, LLM_TYPE_Q8_0, true)
GEMM_AMX(gemm_q4_0_g_amx, LLM_TYPE_Q4_0, true)
GEMM_AMX(gemm_q4_1_g_amx, LLM_TYPE_Q4_1, true)
GEMM_AMX(gemm_q5_0_g_amx, LLM_TYPE_Q5_0, true)
GEMM_AMX(gemm_q5_1_g_amx, LLM_TYPE_Q5_1, true)

/* ---- the K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K ---- */

/*
 * A K-quant super-block of one row as the tile's inner loop wants it: its
 * 256 quants as unsigned bytes dealt out to the lanes of four vectors --
 * lane e of q[s] holds quad s of sub-block (of 16) LLM_Q8KI_ORDER[e], as
 * the activations' Q8KI does -- and per lane, d times that sub-block's
 * scale and (Q2_K, Q4_K, Q5_K) -dmin times its minimum.  Four vpdpbusd
 * against the activations leave each sub-block's whole integer dot product
 * in its own lane.  The tile makes one from the weights as it goes (one
 * token tile), or reads those that packing made once for a row tile (many
 * token tiles): the same vectors, so a row's bits do not depend on which.
 */
typedef struct KBlock
{
	__m512i		q[4];
	__m512		scale;
	__m512		min;
} KBlock;

/* Super-blocks a row tile may have to be packed (longer rows are unpacked in the tile). */
#define K_PACK_BLOCKS 32

/* How far apart the tile prefetches a super-block's four chunks (bytes). */
KERN size_t
k_prefetch_step(const LlmType t)
{
	switch (t)
	{
		case LLM_TYPE_Q2_K:
			return 21;
		case LLM_TYPE_Q3_K:
			return 28;
		case LLM_TYPE_Q4_K:
			return 36;
		case LLM_TYPE_Q5_K:
			return 44;
		default:
			return 64;
	}
}

/*
 * Four 64-byte chunks of a super-block in value order (a[c]: values 64c ..
 * 64c + 63) transposed by dwords into the lane order: s[k] lane e gets
 * quad k of sub-block LLM_Q8KI_ORDER[e].  (Lane 4L + i of a[c] is quad i
 * of sub-block 4c + L; two rounds of unpacks exchange the two indices.)
 */
KERN void
k_transpose(const __m512i *a, __m512i *s)
{
	__m512i		t0 = _mm512_unpacklo_epi32(a[0], a[1]);
	__m512i		t1 = _mm512_unpackhi_epi32(a[0], a[1]);
	__m512i		t2 = _mm512_unpacklo_epi32(a[2], a[3]);
	__m512i		t3 = _mm512_unpackhi_epi32(a[2], a[3]);

	s[0] = _mm512_unpacklo_epi64(t0, t2);
	s[1] = _mm512_unpackhi_epi64(t0, t2);
	s[2] = _mm512_unpacklo_epi64(t1, t3);
	s[3] = _mm512_unpackhi_epi64(t1, t3);
}

/*
 * Lane e: byte idx[e] of v (unsigned, or signed), as a float, times f: a
 * block's scales or minimums in the lane order.
 */
KERN __m512
k_lane_floats(__m128i v, __m128i idx, const bool is_signed, float f)
{
	__m128i		p = _mm_shuffle_epi8(v, idx);
	__m512i		w = is_signed ? _mm512_cvtepi8_epi32(p) : _mm512_cvtepu8_epi32(p);

	return _mm512_mul_ps(_mm512_cvtepi32_ps(w), _mm512_set1_ps(f));
}

/* The lane order as byte indices; and for Q4_K and Q5_K, each lane's sub-block of 32 (LLM_Q8KI_ORDER[e] / 2). */
#define K_ORDER _mm_setr_epi8(LLM_Q8KI_ORDER)
#define K_ORDER_32 _mm_setr_epi8(0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7)

/* The lane scales and minimums of Q4_K or Q5_K super-block blk; Q5_K's fifth bits into qh (low half). */
KERN void
q45_head(const uint8_t *blk, const bool five, KBlock *kb, __m512i *qh)
{
	const LlmBlockQ4_K *h = (const LlmBlockQ4_K *) blk;	/* Q5_K: the same head */
	__m128i		sm = llm_q4k_scales_mins(h->scales);

	kb->scale = k_lane_floats(sm, K_ORDER_32, false, _cvtsh_ss(h->d));
	kb->min = k_lane_floats(sm, _mm_add_epi8(K_ORDER_32, _mm_set1_epi8(8)), false, -_cvtsh_ss(h->dmin));
	if (five)
		*qh = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) ((const LlmBlockQ5_K *) blk)->qh));
}

/*
 * The quants of Q4_K or Q5_K super-block blk straight into the lane order:
 * lane e = 4L + i of q[s] is quad s of sub-block 4i + L, values 64i + 16L
 * + 4s .. + 3, which are the low nibbles (L < 2) or the high ones (L >= 2)
 * of qs dword 8i + 4 (L & 1) + s: one two-source permute, a shift of
 * lanes 8-15 and a mask per vector, against the chunks' transpose.
 * Q5_K's fifth bits: bit 2i + (L >= 2) of qh dword 4 (L & 1) + s.
 */
KERN void
q45_quants(const uint8_t *blk, const bool five, __m512i qh, __m512i *q)
{
	const uint8_t *qs = five ? ((const LlmBlockQ5_K *) blk)->qs : ((const LlmBlockQ4_K *) blk)->qs;
	const __m512i lo = _mm512_loadu_si512(qs);
	const __m512i hi = _mm512_loadu_si512(qs + 64);
	const __m512i idx = _mm512_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28, 0, 8, 16, 24, 4, 12, 20, 28);
	const __m512i hidx = _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4);
	const __m512i hbit = _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7);

#pragma GCC unroll 4
	for (int s = 0; s < 4; s++)
	{
		__m512i		v = _mm512_permutex2var_epi32(lo, _mm512_add_epi32(idx, _mm512_set1_epi32(s)), hi);

		v = _mm512_and_si512(_mm512_mask_srli_epi32(v, 0xFF00, v, 4), _mm512_set1_epi8(0x0F));
		if (five)
		{
			__m512i		h = _mm512_permutexvar_epi32(_mm512_add_epi32(hidx, _mm512_set1_epi32(s)), qh);

			h = _mm512_and_si512(_mm512_srlv_epi32(h, hbit), _mm512_set1_epi8(0x01));
			v = _mm512_or_si512(v, _mm512_slli_epi32(h, 4));
		}
		q[s] = v;
	}
}

/*
 * Q2_K and Q3_K have 16 sub-blocks of 16 and take value 128h + 32j + 16s +
 * l's two low bits from bits 2j .. 2j + 1 of qs[32h + 16s + l]; 64 values a
 * chunk (h = chunk / 2, j = 2 (chunk % 2) and one more) are sub-blocks
 * 4 chunk .. 4 chunk + 3.
 * - Q2_K: unsigned quants 0..3, 4-bit scales and minimums; the minimums
 *   apply per sub-block from the activations' sums of 16, as Q4_K's do.
 * - Q3_K: a third bit from bit 4h + j of hmask[16s + l], so u = 0..7 stands
 *   for u - 4, with signed 6-bit scales: the offset of 4 is taken off each
 *   sub-block's integer sum with the activations' sums of 16, as Q6_K's
 *   offset of 32 is.
 */

/* The lane scales and minimums of Q2_K or Q3_K super-block blk; Q3_K's high bits into hm. */
KERN void
q23_head(const uint8_t *blk, const bool three, KBlock *kb, __m512i *hm)
{
	if (three)
	{
		const LlmBlockQ3_K *q3 = (const LlmBlockQ3_K *) blk;
		uint8_t		s6[16];

		llm_q3k_scales6(q3->scales, s6);
		kb->scale = k_lane_floats(_mm_sub_epi8(_mm_loadu_si128((const __m128i *) s6), _mm_set1_epi8(32)), K_ORDER,
								  true, _cvtsh_ss(q3->d));
		kb->min = _mm512_setzero_ps();
		*hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) q3->hmask));
	}
	else
	{
		const LlmBlockQ2_K *q2 = (const LlmBlockQ2_K *) blk;
		__m128i		raw = _mm_loadu_si128((const __m128i *) q2->scales);

		kb->scale = k_lane_floats(_mm_and_si128(raw, _mm_set1_epi8(0x0F)), K_ORDER, false, _cvtsh_ss(q2->d));
		kb->min = k_lane_floats(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)), K_ORDER, false,
								-_cvtsh_ss(q2->dmin));
	}
}

/* Chunk st of Q2_K or Q3_K super-block blk: its 64 unsigned quants in value order. */
KERN __m512i
q23_chunk(const uint8_t *blk, int st, const bool three, __m512i hm)
{
	const int	h = st / 2;
	const int	j0 = 2 * (st % 2);	/* the low half's j; the high half's is j0 + 1 */
	const uint8_t *qs = three ? ((const LlmBlockQ3_K *) blk)->qs : ((const LlmBlockQ2_K *) blk)->qs;
	__m512i		v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (qs + 32 * h)));
	__m512i		wq;

	wq = _mm512_and_si512(_mm512_srlv_epi16(v, _mm512_set_epi64((2 * j0 + 2) * 0x0001000100010001LL,
																 (2 * j0 + 2) * 0x0001000100010001LL,
																 (2 * j0 + 2) * 0x0001000100010001LL,
																 (2 * j0 + 2) * 0x0001000100010001LL,
																 (2 * j0) * 0x0001000100010001LL,
																 (2 * j0) * 0x0001000100010001LL,
																 (2 * j0) * 0x0001000100010001LL,
																 (2 * j0) * 0x0001000100010001LL)),
						  _mm512_set1_epi8(0x03));
	if (three)
	{
		/* bit 4h + j of each hmask byte, moved to bit 2 */
		__m512i		hb = _mm512_srlv_epi16(hm, _mm512_set_epi64((4 * h + j0 + 1) * 0x0001000100010001LL,
																(4 * h + j0 + 1) * 0x0001000100010001LL,
																(4 * h + j0 + 1) * 0x0001000100010001LL,
																(4 * h + j0 + 1) * 0x0001000100010001LL,
																(4 * h + j0) * 0x0001000100010001LL,
																(4 * h + j0) * 0x0001000100010001LL,
																(4 * h + j0) * 0x0001000100010001LL,
																(4 * h + j0) * 0x0001000100010001LL));

		wq = _mm512_or_si512(wq, _mm512_slli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8(0x01)), 2));
	}
	return wq;
}

/* The lane scales of Q6_K super-block blk (its offset of 32 is taken off in the tile). */
KERN void
q6_head(const uint8_t *blk, KBlock *kb)
{
	const LlmBlockQ6_K *q6 = (const LlmBlockQ6_K *) blk;

	kb->scale = k_lane_floats(_mm_loadu_si128((const __m128i *) q6->scales), K_ORDER, true, _cvtsh_ss(q6->d));
	kb->min = _mm512_setzero_ps();
}

/*
 * Chunk s of Q6_K super-block blk: values 64s .. 64s + 63 (h = s / 2, g = 2
 * (s % 2) + 0 or 1) as unsigned 6-bit quants.
 */
KERN __m512i
q6_chunk(const uint8_t *blk, int s)
{
	const LlmBlockQ6_K *q6 = (const LlmBlockQ6_K *) blk;
	const int	h = s / 2;
	const int	odd = s % 2;
	__m512i		qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (q6->qh + 32 * h)));
	__m512i		ql = _mm512_loadu_si512(q6->ql + 64 * h);
	__m512i		lo;
	__m512i		hi;

	/* low four bits: ql's low nibbles (g = 0, 1), or its high ones (g = 2, 3) */
	lo = odd ? _mm512_srli_epi16(ql, 4) : ql;
	/* high two bits, to bits 4-5: qh bits 2g .. 2g + 1, g = 2 odd (first 32 values) or 2 odd + 1 */
	if (odd)
		hi = _mm512_srlv_epi16(qh, _mm512_set_epi64(2 * 0x0001000100010001LL, 2 * 0x0001000100010001LL,
													2 * 0x0001000100010001LL, 2 * 0x0001000100010001LL,
													0, 0, 0, 0));
	else
		hi = _mm512_sllv_epi16(qh, _mm512_set_epi64(2 * 0x0001000100010001LL, 2 * 0x0001000100010001LL,
													2 * 0x0001000100010001LL, 2 * 0x0001000100010001LL,
													4 * 0x0001000100010001LL, 4 * 0x0001000100010001LL,
													4 * 0x0001000100010001LL, 4 * 0x0001000100010001LL));
	return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi8(0x0F)), _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
}

/* Super-block blk of type t unpacked into kb (its lane quants, scales and minimums). */
KERN void
k_unpack(const uint8_t *blk, const LlmType t, KBlock *kb)
{
	__m512i		hi = _mm512_setzero_si512();	/* Q3_K's hmask, Q5_K's qh */
	__m512i		v[4];

	if (t == LLM_TYPE_Q4_K || t == LLM_TYPE_Q5_K)
	{
		q45_head(blk, t == LLM_TYPE_Q5_K, kb, &hi);
		q45_quants(blk, t == LLM_TYPE_Q5_K, hi, kb->q);
		return;
	}
	if (t == LLM_TYPE_Q2_K || t == LLM_TYPE_Q3_K)
		q23_head(blk, t == LLM_TYPE_Q3_K, kb, &hi);
	else
		q6_head(blk, kb);
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++)
		v[c] = t == LLM_TYPE_Q6_K ? q6_chunk(blk, c) : q23_chunk(blk, c, t == LLM_TYPE_Q3_K, hi);
	k_transpose(v, kb->q);
}

/* Unpack the MR rows from r of a type-t weight into pk (super-block b of row i at pk[b * MR + i]). */
KERN void
pack_k(const LlmGemmArgs *a, int64_t r, const int MR, const LlmType t, KBlock *pk)
{
	const int64_t nb = a->k / LLM_QK_K;
	const size_t bsize = llm_block_bytes(t);

	for (int i = 0; i < MR; i++)
	{
		const uint8_t *row = a->w + (size_t) (r + i) * a->row_bytes;

		for (int64_t b = 0; b < nb; b++)
			k_unpack(row + b * bsize, t, &pk[b * MR + i]);
	}
}

/*
 * Tile of MR rows by NT tokens of a type-t weight against Q8KI activations,
 * from the weights or (pk) from their packing, in the one order of
 * operations every output follows whatever the number of tokens.  Per
 * super-block, four vpdpbusd give each lane its sub-block's integer sum
 * p = sum u a of the unsigned quants u; Q3_K's offset of 4 and Q6_K's of
 * 32 come off in int32 (p - C * (the activations' sum of 16), exact), and
 * one FMA adds p times (d * scale) * d_a; the minimums of Q2_K, Q4_K and
 * Q5_K add (-dmin * m) times d_a * (the sum of 16) by a second FMA.
 */
KERN void
tile_k(const LlmGemmArgs *a, int64_t r, int t, const int MR, const int NT, const LlmType kt, const KBlock *pk)
{
	const bool	offset = kt == LLM_TYPE_Q3_K || kt == LLM_TYPE_Q6_K;
	const int64_t nb = a->k / LLM_QK_K;
	const size_t bsize = llm_block_bytes(kt);
	const size_t pf = PF_GROUPS * MR * a->row_bytes;
	const uint8_t *w[4];
	const int8_t *xq[6];
	const float *xd[6];
	const int16_t *xs[6];
	__m512		acc[4][6];

	tile_init(a, r, t, w, xq, xd, acc, MR, NT);
#pragma GCC unroll 6
	for (int q = 0; q < NT; q++)
		xs[q] = (const int16_t *) ((const uint8_t *) xq[q] + llm_act_bsums_offset(a->k));
	for (int64_t b = 0; b < nb; b++)
	{
		_Alignas(64) KBlock kb[4];	/* the block's rows when not packed */
		const KBlock *h = pk != NULL ? pk + b * MR : kb;
		__m512i		p[4][6];

		if (pk == NULL)
#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
			{
#pragma GCC unroll 4
				for (int c = 0; c < 4; c++)
					_mm_prefetch((const char *) w[i] + b * bsize + pf + k_prefetch_step(kt) * c, _MM_HINT_T0);
				k_unpack(w[i] + b * bsize, kt, &kb[i]);
			}
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
			for (int q = 0; q < NT; q++)
				p[i][q] = _mm512_setzero_si512();
#pragma GCC unroll 4
		for (int s = 0; s < 4; s++)
		{
			__m512i		wq[4];

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
				wq[i] = _mm512_load_si512(&h[i].q[s]);
#pragma GCC unroll 6
			for (int q = 0; q < NT; q++)
			{
				__m512i		xa = _mm512_loadu_si512(xq[q] + b * LLM_QK_K + 64 * s);

#pragma GCC unroll 4
				for (int i = 0; i < MR; i++)
					p[i][q] = _mm512_dpbusd_epi32(p[i][q], wq[i], xa);
			}
		}
#pragma GCC unroll 6
		for (int q = 0; q < NT; q++)
		{
			__m512		dq = _mm512_set1_ps(xd[q][b]);
			__m512i		bs = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *) (xs[q] + 16 * b)));
			__m512i		off = kt == LLM_TYPE_Q3_K ? _mm512_slli_epi32(bs, 2) : _mm512_slli_epi32(bs, 5);
			__m512		bf = _mm512_mul_ps(_mm512_cvtepi32_ps(bs), dq);

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
			{
				__m512i		v = offset ? _mm512_sub_epi32(p[i][q], off) : p[i][q];

				acc[i][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(h[i].scale, dq), acc[i][q]);
				if (!offset)
					acc[i][q] = _mm512_fmadd_ps(h[i].min, bf, acc[i][q]);
			}
		}
	}
	store_tile(a, r, t, acc, MR, NT, false);
}

/* The tile calls of gemm_k, for TOKEN_TILES (they use its locals). */
#define CALL_K(T, NT) tile_k(a, r, T, K_MR, NT, kt, NULL)
#define CALL_K_PACKED(T, NT) tile_k(a, r, T, K_MR, NT, kt, pk)
#define CALL_K1(T, NT) tile_k(a, r, T, 1, NT, kt, NULL)

/*
 * The gemm of type-kt weights: tiles of K_MR rows by K_NT tokens.  With
 * more than one token tile, each row tile is unpacked once (pk, on the
 * stack) and every token tile reads it.
 */
KERN void
gemm_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1, const LlmType kt)
{
	_Alignas(64) KBlock pk[K_PACK_BLOCKS * K_MR];
	const bool	pack = t1 - t0 > K_NT && a->k / LLM_QK_K <= K_PACK_BLOCKS;
	int64_t		r = r0;

	/* the GEMV a row at a time, as gemm_q's */
	if (t1 - t0 == 1)
		for (; r < r1; r++)
			TOKEN_TILES(CALL_K1, K_NT);
	for (; r + K_MR <= r1; r += K_MR)
	{
		if (pack)
		{
			pack_k(a, r, K_MR, kt, pk);
			TOKEN_TILES(CALL_K_PACKED, K_NT);
		}
		else
			TOKEN_TILES(CALL_K, K_NT);
	}
	for (; r < r1; r++)
		TOKEN_TILES(CALL_K1, K_NT);
}

/* The gemm of Q2_K weights. */
static void
gemm_q2_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q2_K);
}

/* The gemm of Q3_K weights. */
static void
gemm_q3_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q3_K);
}

/* The gemm of Q4_K weights. */
static void
gemm_q4_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q4_K);
}

/* The gemm of Q5_K weights. */
static void
gemm_q5_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q5_K);
}

/* The gemm of Q6_K weights. */
static void
gemm_q6_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q6_K);
}

/* ---- SPARSE24: 2:4 sparse int8 (quant_blocks.h), and its grouped rows (quant_groups.c) ---- */

/*
 * A SPARSE24 block (64 values, two halves of 32 with their own scales)
 * becomes, in one zmm, what a pair of Q8_0 blocks is to the Q8_0 kernels:
 * its 32 kept int8 plus 128 go back to their 64 places by one vpexpandb on
 * its mask, merged into a vector of 128s, so a pruned weight reads as
 * 0 + 128 (where the processor lacks VBMI2 a loop in C writes the same
 * bytes).  Then as Q8_0's GEMV: vpdpbusd of those unsigned weights with the
 * signed activation quants, the integers of 8 blocks (16 halves) kept until
 * each half's sum is complete (reduce_blocks), the offset 128 * (the
 * activations' block sum) taken back exactly, and one convert and one FMA
 * by d_w * d_a for 16 halves, in BLOCK_ORDER.
 *
 * A grouped row (SPARSE24_G, made when the CPU backend prepares a 2:4
 * model) keeps each group's vectors in Q8_0_G's interleaved order, each
 * as 32 bytes and a mask that one vpexpandb spreads: 8 vpdpbusd then leave
 * every half's sum whole in its own lane, with no reduction, and the
 * scales are one load.  That is the same integer in the same lane, so the
 * same FMA, as the blocks give.
 *
 * A row walks pieces as the grouped layout has them: 8 blocks (16 halves),
 * then 4 (8 halves; grouped, "folded": lanes e and e + 8 of a vector hold
 * quads of the same half) when 4 or more are left, then the rest (fewer
 * than 4) as blocks, each piece one FMA per token; a row's output is its
 * accumulator's 16 lanes summed by
 * _mm512_reduce_add_ps.  One token or many, straight from the weights or
 * from a row unpacked once for many tokens (its vectors and each piece's
 * scales), blocks or groups, every output is that sequence of operations
 * on the same numbers: the same bits whatever the batch and the layout.
 * Decode reads 44 bytes per 64 weights where Q8_0 reads 68.
 *
 * vpexpandb is written in assembly because this file is compiled for
 * AVX-512 without VBMI2 (Cascade Lake has VNNI but not VBMI2), so the
 * compiler puts VBMI2 instructions nowhere else; the gemm picks the path
 * after asking CPUID.
 */

#define S24_G 8					/* blocks per full piece: 16 halves */
#define S24_NT 4				/* tokens per tile */
#define S24_DIRECT_TOKENS 4		/* calls of up to this many tokens read the weights directly, the others unpack each row */
#define S24_STACK_K 16384		/* rows up to this long unpack on the stack */
/*
 * Decode prefetches the weights this many rows ahead into L2 (prefetcht2,
 * which holds no L1 fill buffer for long): a core streams DRAM only as
 * fast as it has lines in flight, and a piece's 70 instructions per 352
 * bytes leave the out-of-order window too few; prefetcht0 two rows ahead
 * kept the 1.1B shape at 10 GB/s a thread, prefetcht2 8 to 32 rows ahead
 * at 11-12 (bench_kernels; 32 is what bench/sparse_bench.sh measured).
 */
#define S24_PREFETCH_ROWS 32

/*
 * 64 unsigned weights: the bytes of src (its first 32 the kept values plus
 * 128, the others 128) spread in order to the set bits of mask m, 128
 * (a zero weight) at the others.
 */
KERN __m512i
s24_spread(uint64_t m, __m512i src, const bool vbmi2)
{
	const __m512i k80 = _mm512_set1_epi8((char) 0x80);

	if (vbmi2)
	{
		__m512i		out = k80;
		__mmask64	k = (__mmask64) m;

		__asm__("vpexpandb %1, %0%{%2%}" : "+v"(out) : "v"(src), "Yk"(k));
		return out;
	}
	else
	{
		_Alignas(64) uint8_t v[LLM_QK_S24];
		_Alignas(64) uint8_t w[LLM_QK_S24];
		int			r = 0;

		_mm512_store_si512(v, src);
		for (int j = 0; j < LLM_QK_S24; j++)
			w[j] = (m >> j) & 1 ? v[r++] : 128;
		return _mm512_load_si512(w);
	}
}

/* The 64 weights of block b plus 128, a pruned one 128: its kept values spread by its mask. */
KERN __m512i
s24_expand(const LlmBlockS24 *b, const bool vbmi2)
{
	const __m512i k80 = _mm512_set1_epi8((char) 0x80);
	uint64_t	m;

	memcpy(&m, b->mask, sizeof(m));
	/* the source's bytes 32-63 are 128 too: a mask of more than 32 bits decodes as the reference does */
	return s24_spread(m, _mm512_xor_si512(_mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *) b->qs)), k80),
					  vbmi2);
}

/* Vector s of the grouped piece at g of 2G halves (G = 8, or 4 folded): its 32 bytes spread by its mask. */
KERN __m512i
s24g_vector(const uint8_t *g, const int G, int s, const bool vbmi2)
{
	uint64_t	m;

	memcpy(&m, g + 4 * G + 8 * s, sizeof(m));
	return s24_spread(m, _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *) (g + 12 * G + 32 * s))), vbmi2);
}

/* Block b's two fp16 scales as one 32-bit integer (d[0] low). */
KERN int
s24_scale_pair(const LlmBlockS24 *b)
{
	int32_t		v;

	memcpy(&v, b->d, sizeof(v));
	return v;
}

/* Block s's scale pair when s < nblk, else 0 (s24_scales' lanes). */
#define S24_PAIR(s) ((s) < nblk ? s24_scale_pair(w + (s)) : 0)

/*
 * The fp16 scales of blocks [0, nblk) at w as floats, half h of block s in
 * lane 2s + h (others zero): built from scalar loads, not by vpgatherdd
 * (which the Gather Data Sampling fix makes stall decode).
 */
KERN __m512
s24_scales(const LlmBlockS24 *w, const int nblk)
{
	return _mm512_cvtph_ps(_mm256_setr_epi32(S24_PAIR(0), S24_PAIR(1), S24_PAIR(2), S24_PAIR(3),
											 S24_PAIR(4), S24_PAIR(5), S24_PAIR(6), S24_PAIR(7)));
}

/*
 * A piece of nblk blocks from block b of a row, as the FMA wants it: wu its
 * vectors, dw its scales by lane in BLOCK_ORDER (halves of blocks: lane e
 * half BLOCK_ORDER[e]), m the lanes it has, grouped whether its vectors
 * are in the grouped order (each half's sum then whole in its lane).
 */
typedef struct S24Piece
{
	__m512i		wu[S24_G];
	__m512		dw;
	__mmask16	m;
	int64_t		b;
	int			nblk;
	bool		grouped;
} S24Piece;

/*
 * The dot products of piece p by one token, added into acc: xq, xd and xs
 * the token's quants (in the grouped order where the piece is grouped),
 * scales and block sums (matmul.h's Q8).
 */
KERN __m512
s24_piece_dot(const S24Piece *p, const int8_t *xq, const float *xd, const int32_t *xs, __m512 acc)
{
	__m512i		sum;
	__m512i		off;
	__m512		scale;

	if (p->grouped)
	{
		/* two chains of vpdpbusd: the integers are exact, so any order gives each lane its half's sum */
		__m512i		d0 = _mm512_setzero_si512();
		__m512i		d1 = _mm512_setzero_si512();

#pragma GCC unroll 4
		for (int s = 0; s < p->nblk; s += 2)
		{
			d0 = _mm512_dpbusd_epi32(d0, p->wu[s], _mm512_loadu_si512(xq + (p->b + s) * LLM_QK_S24));
			d1 = _mm512_dpbusd_epi32(d1, p->wu[s + 1], _mm512_loadu_si512(xq + (p->b + s + 1) * LLM_QK_S24));
		}
		sum = _mm512_add_epi32(d0, d1);
		if (p->nblk == 4)		/* lanes e and e + 8 hold the two halves of one half's quads */
			sum = _mm512_maskz_add_epi32(0x00FF, sum, _mm512_shuffle_i32x4(sum, sum, _MM_SHUFFLE(1, 0, 3, 2)));
	}
	else
	{
		__m512i		d[S24_G];

#pragma GCC unroll 8
		for (int s = 0; s < S24_G; s++)
			d[s] = s < p->nblk ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), p->wu[s],
													 _mm512_loadu_si512(xq + (p->b + s) * LLM_QK_S24))
				: _mm512_setzero_si512();
		sum = reduce_blocks(d, S24_G, 0);
	}
	off = _mm512_slli_epi32(_mm512_permutexvar_epi32(BLOCK_ORDER, _mm512_maskz_loadu_epi32(p->m, xs + 2 * p->b)), 7);
	scale = _mm512_mul_ps(p->dw, _mm512_permutexvar_ps(BLOCK_ORDER, _mm512_maskz_loadu_ps(p->m, xd + 2 * p->b)));
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, off)), scale, acc);
}

/* Blocks in the piece of a row of nb blocks from block b: 8, then 4 if 4 or more are left, then the rest. */
KERN int
s24_piece_blocks(int64_t b, int64_t nb)
{
	return nb - b >= S24_G ? S24_G : nb - b >= S24_G / 2 ? S24_G / 2 : (int) (nb - b);
}

/*
 * Load piece p of row (its blocks, grouped when the row is and the piece
 * has 4 or 8 blocks) from block b, prefetching the same piece pf bytes
 * ahead (0: none).
 */
KERN void
s24_load_piece(const uint8_t *row, bool grouped_row, int64_t b, int64_t nb, size_t pf, S24Piece *p, const bool vbmi2)
{
	const LlmBlockS24 *w = (const LlmBlockS24 *) row + b;

	p->b = b;
	p->nblk = s24_piece_blocks(b, nb);
	p->m = (__mmask16) ((1u << (2 * p->nblk)) - 1);
	p->grouped = grouped_row && p->nblk >= S24_G / 2;
	if (pf > 0)
		for (size_t o = 0; o < (size_t) p->nblk * sizeof(LlmBlockS24); o += 64)
			_mm_prefetch((const char *) w + pf + o, _MM_HINT_T2);
	if (p->grouped)
	{
		p->dw = g_load_halves((const uint8_t *) w, p->nblk);
#pragma GCC unroll 8
		for (int s = 0; s < S24_G; s++)
			p->wu[s] = s < p->nblk ? s24g_vector((const uint8_t *) w, p->nblk, s, vbmi2) : _mm512_setzero_si512();
		return;
	}
	p->dw = _mm512_permutexvar_ps(BLOCK_ORDER, s24_scales(w, p->nblk));
#pragma GCC unroll 8
	for (int s = 0; s < S24_G; s++)
		p->wu[s] = s < p->nblk ? s24_expand(w + s, vbmi2) : _mm512_setzero_si512();
}

/* Token q of a tile from token t: its quants, scales and block sums. */
#define S24_TOKEN(q) \
	const uint8_t *xr = a->x + (size_t) (t + (q)) * a->x_stride; \
	const int8_t *xq = (const int8_t *) xr; \
	const float *xd = (const float *) (xr + llm_act_d_offset(a->k)); \
	const int32_t *xs = (const int32_t *) (xr + llm_act_sums_offset(a->k))

/*
 * Row r for NT tokens from t: from its pieces unpacked into pk (packed),
 * else from its weights (decode: one stream of weights, prefetched
 * S24_PREFETCH_ROWS rows ahead).
 */
KERN void
s24_row(const LlmGemmArgs *a, int64_t r, bool grouped_row, const S24Piece *pk, int t, const int NT, const bool packed,
		const bool vbmi2)
{
	const int64_t nb = a->k / LLM_QK_S24;
	const uint8_t *row = a->w + (size_t) r * a->row_bytes;
	__m512		acc[S24_NT];

	for (int q = 0; q < NT; q++)
		acc[q] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b += s24_piece_blocks(b, nb))
	{
		S24Piece	own;
		const S24Piece *p = packed ? pk++ : &own;

		if (!packed)
			s24_load_piece(row, grouped_row, b, nb, S24_PREFETCH_ROWS * a->row_bytes, &own, vbmi2);
#pragma GCC unroll 4
		for (int q = 0; q < NT; q++)
		{
			S24_TOKEN(q);
			acc[q] = s24_piece_dot(p, xq, xd, xs, acc[q]);
		}
	}
	for (int q = 0; q < NT; q++)
		a->y[(size_t) (t + q) * a->ldy + r] = _mm512_reduce_add_ps(acc[q]);
}

/* The tile calls of gemm_s24_level, for TOKEN_TILES (they use its locals). */
#define CALL_S24_DIRECT(T, NT) s24_row(a, r, grouped, NULL, T, NT, false, vbmi2)
#define CALL_S24_PACKED(T, NT) s24_row(a, r, grouped, pk, T, NT, true, vbmi2)

/*
 * The gemm of SPARSE24 weights (grouped rows: SPARSE24_G), a row at a time:
 * up to S24_DIRECT_TOKENS tokens straight from the weights, more from each
 * row's pieces unpacked once (on the stack, or the heap for long rows;
 * without memory, straight too).
 */
KERN void
gemm_s24_level(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1, const bool grouped, const bool vbmi2)
{
	const int64_t nb = a->k / LLM_QK_S24;
	const int64_t np = nb / S24_G + 2;	/* pieces of a row, at most */
	_Alignas(64) S24Piece stack[S24_STACK_K / LLM_QK_S24 / S24_G + 2];
	S24Piece   *pk = NULL;

	if (t1 - t0 > S24_DIRECT_TOKENS)
		pk = a->k <= S24_STACK_K ? stack : aligned_alloc(64, (size_t) np * sizeof(S24Piece));
	for (int64_t r = r0; r < r1; r++)
	{
		if (pk == NULL)
			TOKEN_TILES(CALL_S24_DIRECT, S24_NT);
		else
		{
			const uint8_t *row = a->w + (size_t) r * a->row_bytes;
			S24Piece   *p = pk;

			for (int64_t b = 0; b < nb; b += s24_piece_blocks(b, nb))
				s24_load_piece(row, grouped, b, nb, 0, p++, vbmi2);
			TOKEN_TILES(CALL_S24_PACKED, S24_NT);
		}
	}
	if (pk != stack)
		free(pk);
}

/* The gemm of SPARSE24 weights: vpexpandb where the processor has it. */
static void
gemm_s24(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	if (llm_cpu_has_vbmi2())
		gemm_s24_level(a, r0, r1, t0, t1, false, true);
	else
		gemm_s24_level(a, r0, r1, t0, t1, false, false);
}

/* The gemm of grouped SPARSE24 weights (their activations grouped too): vpexpandb where the processor has it. */
static void
gemm_s24_g(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	if (llm_cpu_has_vbmi2())
		gemm_s24_level(a, r0, r1, t0, t1, true, true);
	else
		gemm_s24_level(a, r0, r1, t0, t1, true, false);
}

/* ---- activation quantizers (bit-exact with quantize_act.c) ---- */

/* Quantize the n * 16 values at x with one scale into q; returns the scale (NaN if any is not finite). */
KERN float
quant_block16(const float *x, int n, int8_t *q)
{
	const __m512 sign = _mm512_set1_ps(-0.0f);
	__m512		amax = _mm512_setzero_ps();
	__mmask16	bad = 0;
	float		d;
	float		id;
	__m512		vid;

	for (int i = 0; i < n; i++)
	{
		__m512		v = _mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16 * i));

		bad |= _mm512_cmp_ps_mask(v, _mm512_set1_ps(INFINITY), _CMP_NLT_UQ);
		amax = _mm512_max_ps(amax, v);
	}
	if (bad)
	{
		memset(q, 0, (size_t) n * 16);
		return NAN;
	}
	d = _mm512_reduce_max_ps(amax) / 127.0f;
	id = d != 0.0f ? 1.0f / d : 0.0f;
	vid = _mm512_set1_ps(id);
	for (int i = 0; i < n; i++)
	{
		__m512i		v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * i), vid));

		_mm_storeu_si128((__m128i *) (q + 16 * i), _mm512_cvtsepi32_epi8(v));
	}
	return d;
}

/*
 * The maximum of each of m[0..15]'s lanes, block b's in lane b: a tree of
 * halvings over pairs of vectors (exact: a maximum is the same in any order).
 */
KERN __m512
max16x16(const __m512 *m)
{
	__m512		t[8],
				u[4],
				w[2],
				r;

	/* lanes 0-7: m[2i]'s halves' maxima, 8-15: m[2i + 1]'s */
	for (int i = 0; i < 8; i++)
		t[i] = _mm512_max_ps(_mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
							 _mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
	/* 128-bit lane j: four lanes of m[4i + j] */
	for (int i = 0; i < 4; i++)
		u[i] = _mm512_max_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
							 _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
	for (int i = 0; i < 2; i++)
		w[i] = _mm512_max_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[2 * i]), _mm512_castps_pd(u[2 * i + 1]))),
							 _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[2 * i]), _mm512_castps_pd(u[2 * i + 1]))));
	/* lane l now holds block (l % 4) * 4 + l / 4: transpose the 4 x 4 */
	r = _mm512_max_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
					  _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
	return _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), r);
}

/*
 * Sixteen 32-value blocks of LLM_ACT_Q8 at once (quants q, scales d, sums):
 * each block's operations are quant_block16's and quant_q8's -- its
 * maximum, d = max / 127, 1 / d, the rounding and the sum -- with the
 * maxima, scales and reciprocals taken sixteen to a vector instead of one
 * after another.  False, with nothing written, when a value is not finite
 * (the caller then takes the blocks one at a time).
 */
KERN bool
quant_q8_16(const float *x, int8_t *q, float *d, int32_t *sums)
{
	const __m512 sign = _mm512_set1_ps(-0.0f);
	__m512		amax[16];
	__mmask16	bad = 0;
	__m512		vd,
				vid;
	float		ids[16] __attribute__((aligned(64)));

	for (int b = 0; b < 16; b++)
	{
		__m512		v0 = _mm512_andnot_ps(sign, _mm512_loadu_ps(x + 32 * b));
		__m512		v1 = _mm512_andnot_ps(sign, _mm512_loadu_ps(x + 32 * b + 16));

		bad |= _mm512_cmp_ps_mask(v0, _mm512_set1_ps(INFINITY), _CMP_NLT_UQ) |
			_mm512_cmp_ps_mask(v1, _mm512_set1_ps(INFINITY), _CMP_NLT_UQ);
		amax[b] = _mm512_max_ps(_mm512_max_ps(_mm512_setzero_ps(), v0), v1);
	}
	if (bad)
		return false;
	vd = _mm512_div_ps(max16x16(amax), _mm512_set1_ps(127.0f));
	vid = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(vd, _mm512_setzero_ps(), _CMP_NEQ_OQ), _mm512_set1_ps(1.0f), vd);
	_mm512_storeu_ps(d, vd);
	_mm512_store_ps(ids, vid);
	for (int b = 0; b < 16; b++)
	{
		__m512		id = _mm512_set1_ps(ids[b]);
		__m512i		v0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b), id));
		__m512i		v1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b + 16), id));
		__m128i		q0 = _mm512_cvtsepi32_epi8(v0);
		__m128i		q1 = _mm512_cvtsepi32_epi8(v1);

		_mm_storeu_si128((__m128i *) (q + 32 * b), q0);
		_mm_storeu_si128((__m128i *) (q + 32 * b + 16), q1);
		/* the saturated quants' sum, exact in any order */
		sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_cvtepi8_epi32(q0), _mm512_cvtepi8_epi32(q1)));
	}
	return true;
}

/* Quantize one token's k activations to LLM_ACT_Q8: sixteen blocks at a time, then one at a time. */
static void
quant_q8(const float *x, int64_t k, uint8_t *out)
{
	int8_t	   *qs = (int8_t *) out;
	float	   *d = (float *) (out + llm_act_d_offset(k));
	int32_t    *sums = (int32_t *) (out + llm_act_sums_offset(k));
	int64_t		b = 0;

	for (; b + 16 <= k / LLM_QK; b += 16)
		if (!quant_q8_16(x + b * LLM_QK, qs + b * LLM_QK, d + b, sums + b))
			break;
	for (; b < k / LLM_QK; b++)
	{
		__m256i		q;

		d[b] = quant_block16(x + b * LLM_QK, LLM_QK / 16, qs + b * LLM_QK);
		q = _mm256_loadu_si256((const __m256i *) (qs + b * LLM_QK));
		/* sum of the 32 quants: vpmaddubsw by ones into 16-bit pairs, then the rest */
		sums[b] = _mm512_reduce_add_epi32(_mm512_cvtepi16_epi32(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q)));
	}
}

/* Quantize one token's k activations to LLM_ACT_Q8G: Q8's, then the quants of the groups in the grouped order. */
static void
quant_q8g(const float *x, int64_t k, uint8_t *out)
{
	const int64_t ng = q_group_blocks(k / LLM_QK);

	quant_q8(x, k, out);
	for (int64_t b = 0; b < ng; b += 16)
	{
		int8_t	   *g = (int8_t *) out + b * LLM_QK;
		const int	G = ng - b >= 16 ? 8 : 4;
		__m512i		v[8];

		interleave_act_group(g, G, v);
		for (int s = 0; s < G; s++)
			_mm512_storeu_si512(g + 64 * s, v[s]);
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

		d[b] = quant_block16(x + b * LLM_QK_K, LLM_QK_K / 16, qs + b * LLM_QK_K);
		for (int j = 0; j < LLM_QK_K / 16; j++)
		{
			__m512i		v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) (q + 16 * j)));

			bsums[b * (LLM_QK_K / 16) + j] = (int16_t) _mm512_reduce_add_epi32(v);
		}
	}
}

/* Quantize one token's k activations to LLM_ACT_Q8KI: Q8K's, then each block dealt out to the K tiles' lanes. */
static void
quant_q8ki(const float *x, int64_t k, uint8_t *out)
{
	int8_t	   *qs = (int8_t *) out;
	int16_t    *bsums = (int16_t *) (out + llm_act_bsums_offset(k));
	const __m256i order = _mm256_setr_epi16(LLM_Q8KI_ORDER);

	quant_q8k(x, k, out);
	for (int64_t b = 0; b < k / LLM_QK_K; b++)
	{
		__m512i		v[4];
		__m512i		s[4];

		for (int c = 0; c < 4; c++)
			v[c] = _mm512_loadu_si512(qs + b * LLM_QK_K + 64 * c);
		k_transpose(v, s);
		for (int c = 0; c < 4; c++)
			_mm512_storeu_si512(qs + b * LLM_QK_K + 64 * c, s[c]);
		_mm256_storeu_si256((__m256i *) (bsums + 16 * b),
							_mm256_permutexvar_epi16(order, _mm256_loadu_si256((const __m256i *) (bsums + 16 * b))));
	}
}

const LlmMatmulKernels llm_matmul_kernels_avx512 = {
	.name = "avx512",
	.gemm = {
		[LLM_TYPE_F32] = gemm_f32,
		[LLM_TYPE_F16] = gemm_f16,
		[LLM_TYPE_BF16] = gemm_bf16,
		[LLM_TYPE_Q8_0] = gemm_q8_0,
		[LLM_TYPE_Q4_0] = gemm_q4_0,
		[LLM_TYPE_Q4_1] = gemm_q4_1,
		[LLM_TYPE_Q5_0] = gemm_q5_0,
		[LLM_TYPE_Q5_1] = gemm_q5_1,
		[LLM_TYPE_Q2_K] = gemm_q2_k,
		[LLM_TYPE_Q3_K] = gemm_q3_k,
		[LLM_TYPE_Q4_K] = gemm_q4_k,
		[LLM_TYPE_Q5_K] = gemm_q5_k,
		[LLM_TYPE_Q6_K] = gemm_q6_k,
		[LLM_TYPE_Q8_0_G] = gemm_q8_0_g,
		[LLM_TYPE_Q4_0_G] = gemm_q4_0_g,
		[LLM_TYPE_Q4_1_G] = gemm_q4_1_g,
		[LLM_TYPE_Q5_0_G] = gemm_q5_0_g,
		[LLM_TYPE_Q5_1_G] = gemm_q5_1_g,
		[LLM_TYPE_SPARSE24] = gemm_s24,
		[LLM_TYPE_SPARSE24_G] = gemm_s24_g,
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
		[LLM_TYPE_Q8_0_G] = LLM_ACT_Q8G,
		[LLM_TYPE_Q4_0_G] = LLM_ACT_Q8G,
		[LLM_TYPE_Q4_1_G] = LLM_ACT_Q8G,
		[LLM_TYPE_Q5_0_G] = LLM_ACT_Q8G,
		[LLM_TYPE_Q5_1_G] = LLM_ACT_Q8G,
		[LLM_TYPE_SPARSE24] = LLM_ACT_Q8,
		[LLM_TYPE_SPARSE24_G] = LLM_ACT_Q8G,
	},
	.quant = {
		[LLM_ACT_Q8] = quant_q8,
		[LLM_ACT_Q8G] = quant_q8g,
		[LLM_ACT_Q8KI] = quant_q8ki,
	},
};

/* The AMX gemms of many tokens (matmul.c chooses them per call): plain Q8 activations for every type. */
const LlmMatmulKernels llm_matmul_kernels_avx512_amx = {
	.name = "avx512-amx",
	.gemm = {
		[LLM_TYPE_Q8_0] = gemm_q8_0_amx,
		[LLM_TYPE_Q4_0] = gemm_q4_0_amx,
		[LLM_TYPE_Q4_1] = gemm_q4_1_amx,
		[LLM_TYPE_Q5_0] = gemm_q5_0_amx,
		[LLM_TYPE_Q5_1] = gemm_q5_1_amx,
		[LLM_TYPE_Q8_0_G] = gemm_q8_0_g_amx,
		[LLM_TYPE_Q4_0_G] = gemm_q4_0_g_amx,
		[LLM_TYPE_Q4_1_G] = gemm_q4_1_g_amx,
		[LLM_TYPE_Q5_0_G] = gemm_q5_0_g_amx,
		[LLM_TYPE_Q5_1_G] = gemm_q5_1_g_amx,
	},
	.act = {
		[LLM_TYPE_Q8_0] = LLM_ACT_Q8,
		[LLM_TYPE_Q4_0] = LLM_ACT_Q8,
		[LLM_TYPE_Q4_1] = LLM_ACT_Q8,
		[LLM_TYPE_Q5_0] = LLM_ACT_Q8,
		[LLM_TYPE_Q5_1] = LLM_ACT_Q8,
		[LLM_TYPE_Q8_0_G] = LLM_ACT_Q8,
		[LLM_TYPE_Q4_0_G] = LLM_ACT_Q8,
		[LLM_TYPE_Q4_1_G] = LLM_ACT_Q8,
		[LLM_TYPE_Q5_0_G] = LLM_ACT_Q8,
		[LLM_TYPE_Q5_1_G] = LLM_ACT_Q8,
	},
	.quant = {
		[LLM_ACT_Q8] = quant_q8,
	},
};

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else							/* not x86-64 with GCC or Clang */

const LlmMatmulKernels llm_matmul_kernels_avx512 = {0};
const LlmMatmulKernels llm_matmul_kernels_avx512_amx = {0};

#endif
