/*
 * matmul_avx2_q.c
 *		The AVX2 level's gemms of Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 against Q8
 *		activations (see matmul.h and matmul_avx2.h).
 *
 * Every lane gets what the same lane of matmul_avx512.c's tiles gets, so
 * the bits are the AVX-512 level's.  A row's blocks are taken in groups of
 * 16 (then one of 8 if at least 8 are left), lane e of the 16 holding
 * block BLOCK_ORDER[e] of its group (0 2 4 6 1 3 5 7, then 8 more of the
 * same), as one run of 8 blocks per ymm register: the integer dot product
 * of each block whole, then per lane one subtraction of the weights'
 * offset, one convert and one FMA by d_w d_a, and for Q4_1 and Q5_1 one
 * more FMA of m_w d_a by the activations' block sum.  The blocks after the
 * groups (fewer than 8) are taken as matmul_avx512.c's q_steps takes them:
 * four at a time (lanes 4j .. 4j + 3 for block j, 8 quants a lane), then
 * two (lanes 0-7 and 8-15, 4 quants a lane), then one.
 *
 * The dot products take the weights' quants as unsigned bytes: Q4_0's
 * nibble n = w + 8, Q5_0's five bits w + 16, Q4_1's and Q5_1's as they
 * are (their minimums apart); the offset comes back exactly in int32, as
 * C times the activations' block sums (C = 8, 16).  Q8_0 with AVX-VNNI
 * takes w + 128 (w xor 0x80, C = 128); without, ggml's sign trick, |w| by
 * a with w's sign, since (w + 128) a can overflow vpmaddubsw's pairs.
 *
 * Two ways to a run's whole block sums, the same integers:
 * - from the weights (the GEMV, a row at a time): a block a register, its
 *   eight lanes' partial sums added up by unpacks (reduce8) into the
 *   run's lanes;
 * - packed (more tokens): each tile of Q_MR rows is unpacked once, all of
 *   k, a run transposed by dwords so that lane e of step s holds quants
 *   4s .. 4s + 3 of the lane's block, and each token's activations the
 *   same way once per call; then eight dot steps leave each block's sum
 *   whole in its lane with no reduction.
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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/matmul_avx2.h"
#include "quant_blocks.h"

/* Tile shape of the packed tiles, rows by tokens (one thread, 128 tokens: 4 x 2 15% faster than 2 x 2 or 2 x 4). */
#define Q_MR 4
#define Q_NT 2
/*
 * Calls of up to this many tokens run a row and a token at a time from the
 * weights: from 2 tokens packing pays (one thread, 2048 x 768 in L2, 2
 * tokens: 70 us packed, 89 direct).
 */
#define Q_DIRECT_TOKENS 1
/* Runs of Q_MR rows packed on the stack (40 kB); more: the heap. */
#define Q_PACK_STACK 32

/* The blocks of a run in lane order (matmul_avx512.c's BLOCK_ORDER within 8). */
#define Q_ORDER _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)

/* Whether type's blocks carry a minimum (w = d q + m): Q4_1, Q5_1. */
KERN bool
q_has_min(LlmType type)
{
	return type == LLM_TYPE_Q4_1 || type == LLM_TYPE_Q5_1;
}

/*
 * log2 of the offset C the dot products' unsigned quants carry (w + C), or
 * -1 for none: Q8_0 with vnni 128 (without, the sign trick), Q4_0 8, Q5_0
 * 16; Q4_1 and Q5_1 none.
 */
KERN int
q_offset_log2(LlmType type, const bool vnni)
{
	switch (type)
	{
		case LLM_TYPE_Q8_0:
			return vnni ? 7 : -1;
		case LLM_TYPE_Q4_0:
			return 3;
		case LLM_TYPE_Q5_0:
			return 4;
		default:
			return -1;
	}
}

/*
 * The 32 quants of the block at p in value order as q_dot takes them: the
 * unsigned ones (Q8_0 with vnni: w xor 0x80), or Q8_0's signed w without.
 */
KERN __m256i
q_load(LlmType type, const uint8_t *p, const bool vnni)
{
	const size_t qo = q_has_min(type) ? 4 : 2;	/* after d (and m) */

	if (type == LLM_TYPE_Q8_0)
	{
		__m256i		w = _mm256_loadu_si256((const __m256i *) (p + 2));

		return vnni ? _mm256_xor_si256(w, _mm256_set1_epi8((char) 0x80)) : w;
	}
	if (type == LLM_TYPE_Q4_0 || type == LLM_TYPE_Q4_1)
	{
		__m128i		v = _mm_loadu_si128((const __m128i *) (p + qo));

		/* low nibbles are values 0-15, high nibbles 16-31 */
		return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
	}
	else
	{
		/* Q5: the nibbles, plus 16 where bit j of the 32-bit qh is set */
		const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
		uint32_t	qh;
		__m128i		v = _mm_loadu_si128((const __m128i *) (p + qo + 4));
		__m256i		n = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
		__m256i		h;

		memcpy(&qh, p + qo, sizeof(qh));
		/* byte j: byte j / 8 of qh, then its bit j % 8 */
		h = _mm256_shuffle_epi8(_mm256_set1_epi32((int) qh),
								_mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
												 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
		h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
		return _mm256_or_si256(n, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
	}
}

/* acc + per lane the dot product of its four quants of wq (q_load's) with its four of the activations a. */
KERN __m256i
q_dot(LlmType type, __m256i acc, __m256i wq, __m256i a, const bool vnni)
{
	if (type == LLM_TYPE_Q8_0 && !vnni)
		return dot_u8s8(acc, _mm256_sign_epi8(wq, wq), _mm256_sign_epi8(a, wq), false);
	return dot_u8s8(acc, wq, a, vnni);
}

/* Per lane, C times the sum of its four activation quants of a (zero without an offset). */
KERN __m256i
q_lane_offset(LlmType type, __m256i a, const bool vnni)
{
	const int	c = q_offset_log2(type, vnni);

	if (c < 0)
		return _mm256_setzero_si256();
	return dot_u8s8(_mm256_setzero_si256(), _mm256_set1_epi8((char) (1 << c)), a, vnni);
}

/* The four dwords at p, p + step, p + 2 step, p + 3 step. */
KERN __m128i
q_dwords4(const uint8_t *p, size_t step)
{
	__m128i		a = _mm_unpacklo_epi32(_mm_loadu_si32(p), _mm_loadu_si32(p + step));
	__m128i		b = _mm_unpacklo_epi32(_mm_loadu_si32(p + 2 * step), _mm_loadu_si32(p + 3 * step));

	return _mm_unpacklo_epi64(a, b);
}

/*
 * The scales d of blocks b + Q_ORDER[e] of a row at w, as floats in lane
 * e, and in *m their minimums (Q4_1, Q5_1; else zero): the first dword of
 * each block (d, then m or the first quants) gathered by unpacks (a set
 * of eight GCC builds through memory, and a load of eight stores waits for
 * them to retire), its halves split.
 */
KERN __m256
q_run_scales(LlmType type, const uint8_t *w, int64_t b, __m256 *m)
{
	const size_t bsz = llm_block_bytes(type);
	const uint8_t *p = w + b * bsz;
	const __m256i dm = _mm256_set_m128i(q_dwords4(p + bsz, 2 * bsz), q_dwords4(p, 2 * bsz));
	/* per 128-bit lane: the four low halves, then the four high ones */
	const __m256i halves = _mm256_shuffle_epi8(dm, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
																	0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
	/* 64-bit lanes: d of blocks 0-3, d of 4-7, m of 0-3, m of 4-7 (lane order) */
	const __m256i v = _mm256_permute4x64_epi64(halves, _MM_SHUFFLE(3, 1, 2, 0));

	*m = q_has_min(type) ? _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1)) : _mm256_setzero_ps();
	return _mm256_cvtph_ps(_mm256_castsi256_si128(v));
}

/*
 * The per-block sums of eight vectors of block partial sums (p[k]: eight
 * lanes of block k): lane k of the result is the sum of p[k]'s lanes.
 * Unpack-and-add rounds within 128-bit lanes, then the halves added, the
 * sums of the second halves of the blocks (lanes 4-7) shifted right by
 * hi_shift first (4 for Q4's high nibbles kept in place; exact).
 */
KERN __m256i
reduce8(const __m256i *p, const int hi_shift)
{
	__m256i		t[4];
	__m256i		u[2];

#pragma GCC unroll 4
	for (int m = 0; m < 4; m++)
		t[m] = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2 * m], p[2 * m + 1]),
								_mm256_unpackhi_epi32(p[2 * m], p[2 * m + 1]));
#pragma GCC unroll 2
	for (int m = 0; m < 2; m++)	/* per 128-bit lane: the sums of p[4m] .. p[4m + 3] */
		u[m] = _mm256_add_epi32(_mm256_unpacklo_epi64(t[2 * m], t[2 * m + 1]),
								_mm256_unpackhi_epi64(t[2 * m], t[2 * m + 1]));
	return _mm256_add_epi32(_mm256_permute2x128_si256(u[0], u[1], 0x20),
							_mm256_srai_epi32(_mm256_permute2x128_si256(u[0], u[1], 0x31), hi_shift));
}

/*
 * One token's activation quantities of the run of blocks from b, in lane
 * order: the scales d_a, C times the block sums (the weights' offset), and
 * for Q4_1 and Q5_1 the block sums as floats.
 */
typedef struct QRunAct
{
	__m256		d;
	__m256i		off;
	__m256		sums;
} QRunAct;

/* The run's activation quantities of a token (xd, xs: its scales and block sums) from block b. */
KERN QRunAct
q_run_act(LlmType type, const float *xd, const int32_t *xs, int64_t b, const bool vnni)
{
	const int	c = q_offset_log2(type, vnni);
	__m256i		s = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *) (xs + b)), Q_ORDER);
	QRunAct		r;

	r.d = _mm256_permutevar8x32_ps(_mm256_loadu_ps(xd + b), Q_ORDER);
	r.off = c >= 0 ? _mm256_sll_epi32(s, _mm_cvtsi32_si128(c)) : _mm256_setzero_si256();
	r.sums = q_has_min(type) ? _mm256_cvtepi32_ps(s) : _mm256_setzero_ps();
	return r;
}

/*
 * A run's whole integer block sums p (lane order) of one row by one token
 * added into acc: minus the offset, converted, times d_w d_a (wd: the
 * row's scales in lane order), then for Q4_1 and Q5_1 plus the block sums
 * times m_w d_a (wm) -- matmul_avx512.c's q_group_dot and q_group_mins.
 */
KERN __m256
q_run_combine(LlmType type, __m256i p, __m256 wd, __m256 wm, const QRunAct *x, __m256 acc)
{
	acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(p, x->off)), _mm256_mul_ps(wd, x->d), acc);
	if (q_has_min(type))
		acc = _mm256_fmadd_ps(x->sums, _mm256_mul_ps(wm, x->d), acc);
	return acc;
}

/* ---- from the weights: the GEMV and a few tokens ---- */

/*
 * Q4_0's or Q4_1's quants at p for the GEMV with AVX-VNNI: the high
 * nibbles (values 16-31) left in place, worth 16 times their value, which
 * saves a shift and an insert a block; reduce8 divides their sums by 16.
 * (Without AVX-VNNI they would overflow vpmaddubsw's pairs.)
 */
KERN __m256i
q4_load_in_place(LlmType type, const uint8_t *p)
{
	const size_t qo = q_has_min(type) ? 4 : 2;

	return _mm256_and_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) (p + qo))),
							_mm256_setr_epi64x(0x0F0F0F0F0F0F0F0FLL, 0x0F0F0F0F0F0F0F0FLL,
											   (long long) 0xF0F0F0F0F0F0F0F0ULL, (long long) 0xF0F0F0F0F0F0F0F0ULL));
}

/* The run of 8 blocks from b of the row at w by one token (xq, and x its run quantities), added into acc. */
KERN __m256
q_run_direct(LlmType type, const uint8_t *w, const int8_t *xq, const QRunAct *x, int64_t b, __m256 acc,
			 const bool vnni)
{
	static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
	const bool	in_place = vnni && (type == LLM_TYPE_Q4_0 || type == LLM_TYPE_Q4_1);
	const size_t bsz = llm_block_bytes(type);
	__m256i		p[8];
	__m256		wd;
	__m256		wm;

#pragma GCC unroll 8
	for (int k = 0; k < 8; k++)
	{
		const int64_t blk = b + order[k];
		const __m256i wq = in_place ? q4_load_in_place(type, w + blk * bsz) : q_load(type, w + blk * bsz, vnni);

		p[k] = q_dot(type, _mm256_setzero_si256(), wq, _mm256_loadu_si256((const __m256i *) (xq + blk * LLM_QK)), vnni);
	}
	wd = q_run_scales(type, w, b, &wm);
	return q_run_combine(type, reduce8(p, in_place ? 4 : 0), wd, wm, x, acc);
}

/* The exact sum of w a per lane of block blk of the row at w by a token's quants xq (q_dot less the lane offset). */
KERN __m256i
q_block_lanes(LlmType type, const uint8_t *w, const int8_t *xq, int64_t blk, const bool vnni)
{
	__m256i		a = _mm256_loadu_si256((const __m256i *) (xq + blk * LLM_QK));

	return _mm256_sub_epi32(q_dot(type, _mm256_setzero_si256(), q_load(type, w + blk * llm_block_bytes(type), vnni), a,
								  vnni),
							q_lane_offset(type, a, vnni));
}

/* The fp16 at byte off of block blk of the row at w, as a float. */
KERN float
q_half(LlmType type, const uint8_t *w, int64_t blk, size_t off)
{
	uint16_t	h;

	memcpy(&h, w + blk * llm_block_bytes(type) + off, sizeof(h));
	return _cvtsh_ss(h);
}

/*
 * The blocks from b to the end of the row (fewer than 8) of one row (w) by
 * one token (xq, xd, xs), added into acc (16 lanes) as matmul_avx512.c's
 * q_steps adds them: four blocks (lane 4j + i: quants 4i .. 4i + 3 and 16
 * + 4i .. + 3 of block b + j), then pairs (lanes 0-7 block b, 8-15 b + 1,
 * a lane's four quants), then one (lanes 0-7); a block's minimum term in
 * the first lane of its lanes.
 */
KERN void
q_tail(LlmType type, const LlmGemmArgs *a, const uint8_t *w, const int8_t *xq, const float *xd, const int32_t *xs,
	   int64_t b, __m256 acc[2], const bool vnni)
{
	const int64_t nb = a->k / LLM_QK;

	if (nb - b >= 4)
	{
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++)
		{
			const int64_t b0 = b + 2 * h;
			__m256i		p0 = q_block_lanes(type, w, xq, b0, vnni);
			__m256i		p1 = q_block_lanes(type, w, xq, b0 + 1, vnni);
			__m256i		p = _mm256_add_epi32(_mm256_permute2x128_si256(p0, p1, 0x20),
											 _mm256_permute2x128_si256(p0, p1, 0x31));
			__m256		dw = _mm256_set_m128(_mm_set1_ps(q_half(type, w, b0 + 1, 0)), _mm_set1_ps(q_half(type, w, b0, 0)));
			__m256		da = _mm256_set_m128(_mm_set1_ps(xd[b0 + 1]), _mm_set1_ps(xd[b0]));

			acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, da), acc[h]);
			if (q_has_min(type))
			{
				__m256		mw = _mm256_set_m128(_mm_set1_ps(q_half(type, w, b0 + 1, 2)), _mm_set1_ps(q_half(type, w, b0, 2)));
				__m256		s = _mm256_set_m128(_mm_set1_ps((float) xs[b0 + 1]), _mm_set1_ps((float) xs[b0]));

				acc[h] = _mm256_blend_ps(acc[h], _mm256_fmadd_ps(s, _mm256_mul_ps(mw, da), acc[h]), 0x11);
			}
		}
		b += 4;
	}
	for (; b < nb; b += 2)
	{
		for (int h = 0; h < 2 && b + h < nb; h++)
		{
			__m256		da = _mm256_set1_ps(xd[b + h]);

			acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q_block_lanes(type, w, xq, b + h, vnni)),
									 _mm256_mul_ps(_mm256_set1_ps(q_half(type, w, b + h, 0)), da), acc[h]);
			if (q_has_min(type))
				acc[h] = _mm256_blend_ps(acc[h],
										 _mm256_fmadd_ps(_mm256_set1_ps((float) xs[b + h]),
														 _mm256_mul_ps(_mm256_set1_ps(q_half(type, w, b + h, 2)), da),
														 acc[h]), 0x01);
		}
	}
}

/* The blocks of a row that the runs cover (groups of 16, then one of 8); q_tail takes the rest. */
static inline int64_t
q_run_blocks(int64_t nb)
{
	return nb / 16 * 16 + (nb % 16 >= 8 ? 8 : 0);
}

/* Runs of a GEMV's token whose QRunAct are made once per call (longer rows: in the tile). */
#define Q_ACT_RUNS 64

/*
 * One row (r) by one token (t) from the weights: runs, then the tail;
 * stored.  act: the token's run quantities, made once per call, or NULL.
 */
KERN void
tile_q_direct(LlmType type, const LlmGemmArgs *a, int64_t r, int t, const QRunAct *act, const bool vnni)
{
	const int64_t nb = a->k / LLM_QK;
	const int64_t ng = q_run_blocks(nb);
	const size_t bsz = llm_block_bytes(type);
	const size_t pf = prefetch_distance(a->row_bytes, 1);
	const uint8_t *w = a->w + (size_t) r * a->row_bytes;
	const uint8_t *xrow = a->x + (size_t) t * a->x_stride;
	const int8_t *xq = (const int8_t *) xrow;
	const float *xd = (const float *) (xrow + llm_act_d_offset(a->k));
	const int32_t *xs = (const int32_t *) (xrow + llm_act_sums_offset(a->k));
	__m256		acc[4][4][2];			/* [0][0] only: one row, one token */

	acc[0][0][0] = acc[0][0][1] = _mm256_setzero_ps();
	/* a group's two runs (the last group may have one) into lanes 0-7 and 8-15 */
	for (int64_t b = 0; b < ng; b += 16)
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++)
		{
			const int64_t bh = b + 8 * h;
			QRunAct		x;

			if (bh >= ng)
				break;
			x = act != NULL ? act[bh / 8] : q_run_act(type, xd, xs, bh, vnni);
			prefetch_bytes(w + pf + bh * bsz, 8 * bsz);
			acc[0][0][h] = q_run_direct(type, w, xq, &x, bh, acc[0][0][h], vnni);
		}
	q_tail(type, a, w, xq, xd, xs, ng, acc[0][0], vnni);
	store_tile16(a, r, t, acc, 1, 1);
}

/* ---- packed: more tokens ---- */

/* One row's run of 8 blocks unpacked: q[s] lane e holds quants 4s .. 4s + 3 of the lane's block, as q_load gives them. */
typedef struct QRunPack
{
	__m256i		q[8];
	__m256		d;				/* the blocks' d in lane order */
	__m256		m;				/* Q4_1, Q5_1: their m */
} QRunPack;

/* The run of 8 blocks from b of the row at w (its quants by q_load) into pk. */
KERN void
pack_q_run(LlmType type, const uint8_t *w, int64_t b, QRunPack *pk, const bool vnni)
{
	static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
	const size_t bsz = llm_block_bytes(type);
	__m256i		v[8];

#pragma GCC unroll 8
	for (int k = 0; k < 8; k++)
		v[k] = q_load(type, w + (b + order[k]) * bsz, vnni);
	transpose8x32(v, pk->q);
	pk->d = q_run_scales(type, w, b, &pk->m);
}

/* A token's quants of the run of 8 blocks from b (xq: its quants) transposed as QRunPack's, into dst (256 bytes). */
KERN void
pack_act_run(const int8_t *xq, int64_t b, uint8_t *dst)
{
	static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
	__m256i		v[8];
	__m256i		out[8];

#pragma GCC unroll 8
	for (int k = 0; k < 8; k++)
		v[k] = _mm256_loadu_si256((const __m256i *) (xq + (b + order[k]) * LLM_QK));
	transpose8x32(v, out);
#pragma GCC unroll 8
	for (int s = 0; s < 8; s++)
		_mm256_store_si256((__m256i *) (dst + 32 * s), out[s]);
}

/*
 * Tile of Q_MR packed rows (pk: run-major, Q_MR rows a run) by NT tokens
 * (xi: their packed runs, 256 bytes a run), then the tail from the weights:
 * per run eight dot steps leave each block's sum whole in its lane, then
 * q_run_combine, so the bits are tile_q_direct's.
 */
KERN void
tile_q_packed(LlmType type, const LlmGemmArgs *a, const QRunPack *pk, const uint8_t *const *xi, int64_t r, int t,
			  const int NT, const bool vnni)
{
	const int64_t nb = a->k / LLM_QK;
	const int64_t ng = q_run_blocks(nb);
	const uint8_t *w[Q_MR];
	const int8_t *xq[4];
	const float *xd[4];
	const int32_t *xs[4];
	__m256		acc[4][4][2];

#pragma GCC unroll 4
	for (int i = 0; i < Q_MR; i++)
		w[i] = a->w + (size_t) (r + i) * a->row_bytes;
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		const uint8_t *row = a->x + (size_t) (t + q) * a->x_stride;

		xq[q] = (const int8_t *) row;
		xd[q] = (const float *) (row + llm_act_d_offset(a->k));
		xs[q] = (const int32_t *) (row + llm_act_sums_offset(a->k));
#pragma GCC unroll 4
		for (int i = 0; i < Q_MR; i++)
			acc[i][q][0] = acc[i][q][1] = _mm256_setzero_ps();
	}
	for (int64_t b = 0; b < ng; b += 8, pk += Q_MR)
	{
		const int	h = b / 8 % 2;
		__m256i		p[Q_MR][4];

#pragma GCC unroll 4
		for (int i = 0; i < Q_MR; i++)
#pragma GCC unroll 4
			for (int q = 0; q < NT; q++)
				p[i][q] = _mm256_setzero_si256();
#pragma GCC unroll 8
		for (int s = 0; s < 8; s++)
		{
			__m256i		wq[Q_MR];

#pragma GCC unroll 4
			for (int i = 0; i < Q_MR; i++)
				wq[i] = _mm256_load_si256(&pk[i].q[s]);
#pragma GCC unroll 4
			for (int q = 0; q < NT; q++)
			{
				__m256i		xa = _mm256_load_si256((const __m256i *) (xi[q] + b * 32 + 32 * s));

#pragma GCC unroll 4
				for (int i = 0; i < Q_MR; i++)
					p[i][q] = q_dot(type, p[i][q], wq[i], xa, vnni);
			}
		}
#pragma GCC unroll 4
		for (int q = 0; q < NT; q++)
		{
			QRunAct		x = q_run_act(type, xd[q], xs[q], b, vnni);

#pragma GCC unroll 4
			for (int i = 0; i < Q_MR; i++)
				acc[i][q][h] = q_run_combine(type, p[i][q], pk[i].d, pk[i].m, &x, acc[i][q][h]);
		}
	}
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
#pragma GCC unroll 4
		for (int i = 0; i < Q_MR; i++)
			q_tail(type, a, w[i], xq[q], xd[q], xs[q], ng, acc[i][q], vnni);
	store_tile16(a, r, t, acc, Q_MR, NT);
}

/* The tile calls of gemm_q, for TOKEN_TILES (they use its locals). */
#define CALL_Q_PACKED(T, NT) \
	do { \
		const uint8_t *xi_[4]; \
		for (int q_ = 0; q_ < (NT); q_++) \
			xi_[q_] = xil + (size_t) ((T) + q_ - t0) * xil_stride; \
		tile_q_packed(type, a, pk, xi_, r, T, NT, vnni); \
	} while (0)

/*
 * The gemm of a Q type in one variant: for up to Q_DIRECT_TOKENS tokens (the
 * GEMV) a row and a token at a time from the weights; for more, the tokens'
 * activations are packed once, and each tile of Q_MR
 * rows is packed, all of k, into a buffer reused for every token tile
 * (without the memory for either, the direct tiles: the same bits).
 */
KERN void
gemm_q_variant(LlmType type, const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1, const bool vnni)
{
	const int64_t nb = a->k / LLM_QK;
	const int64_t ng = q_run_blocks(nb);
	const size_t xil_stride = 32 * (size_t) ng;
	_Alignas(32) QRunPack stack_pk[Q_PACK_STACK * Q_MR];
	QRunPack   *pk = NULL;
	uint8_t    *xil = NULL;
	int64_t		r = r0;

	if (t1 - t0 > Q_DIRECT_TOKENS && ng > 0 && r1 - r0 >= Q_MR)
	{
		pk = ng / 8 <= Q_PACK_STACK ? stack_pk : aligned_alloc(32, sizeof(QRunPack) * Q_MR * (size_t) (ng / 8));
		xil = aligned_alloc(32, xil_stride * (size_t) (t1 - t0));
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
				for (int64_t b = 0; b < ng; b += 8)
					pack_act_run((const int8_t *) (a->x + (size_t) t * a->x_stride), b,
								 xil + (size_t) (t - t0) * xil_stride + 32 * b);
	}
	if (t1 - t0 == 1 && ng / 8 <= Q_ACT_RUNS)
	{
		/* the GEMV: the token's run quantities once */
		const uint8_t *xrow = a->x + (size_t) t0 * a->x_stride;
		_Alignas(32) QRunAct act[Q_ACT_RUNS];

		for (int64_t b = 0; b < ng; b += 8)
			act[b / 8] = q_run_act(type, (const float *) (xrow + llm_act_d_offset(a->k)),
								   (const int32_t *) (xrow + llm_act_sums_offset(a->k)), b, vnni);
		for (; r < r1; r++)
			tile_q_direct(type, a, r, t0, act, vnni);
		return;
	}
	if (pk != NULL)
		for (; r + Q_MR <= r1; r += Q_MR)
		{
			for (int64_t b = 0; b < ng; b += 8)
				for (int i = 0; i < Q_MR; i++)
					pack_q_run(type, a->w + (size_t) (r + i) * a->row_bytes, b, &pk[b / 8 * Q_MR + i], vnni);
			TOKEN_TILES(CALL_Q_PACKED, Q_NT);
		}
	for (; r < r1; r++)
		for (int t = t0; t < t1; t++)
			tile_q_direct(type, a, r, t, NULL, vnni);
	if (pk != stack_pk)
		free(pk);
	free(xil);
}

/* The gemm of a Q type, in the variant llm_avx2_vnni chose. */
KERN void
gemm_q(LlmType type, const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	if (LLM_AVX2_HAVE_VNNI && llm_avx2_vnni())
		gemm_q_variant(type, a, r0, r1, t0, t1, true);
	else
		gemm_q_variant(type, a, r0, r1, t0, t1, false);
}

/* The gemm of Q8_0 weights. */
void
llm_avx2_gemm_q8_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q8_0, a, r0, r1, t0, t1);
}

/* The gemm of Q4_0 weights. */
void
llm_avx2_gemm_q4_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q4_0, a, r0, r1, t0, t1);
}

/* The gemm of Q4_1 weights. */
void
llm_avx2_gemm_q4_1(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q4_1, a, r0, r1, t0, t1);
}

/* The gemm of Q5_0 weights. */
void
llm_avx2_gemm_q5_0(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q5_0, a, r0, r1, t0, t1);
}

/* The gemm of Q5_1 weights. */
void
llm_avx2_gemm_q5_1(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_q(LLM_TYPE_Q5_1, a, r0, r1, t0, t1);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif							/* x86-64 with GCC or Clang */
