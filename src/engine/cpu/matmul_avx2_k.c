/*
 * matmul_avx2_k.c
 *		The AVX2 level's gemms of the K-quants (Q2_K, Q3_K, Q4_K, Q5_K,
 *		Q6_K) against Q8KI activations (see matmul.h and matmul_avx2.h).
 *
 * matmul_avx512.c's K tiles on ymm registers: each super-block's 256
 * quants, as unsigned bytes, are dealt out to 16 lanes (lanes 0-7 in one
 * register, 8-15 in another) in the activations' Q8KI order, lane e of
 * step s holding quad s of sub-block (of 16) LLM_Q8KI_ORDER[e], so eight
 * vpdpbusd (or vpmaddubsw + vpmaddwd pairs; no pair exceeds 2 * 63 * 127)
 * leave each sub-block's whole integer dot product in its own lane, exact.
 * Then per super-block and lane one convert and one FMA by d times the
 * sub-block's scale times d_a; Q3_K's offset of 4 and Q6_K's of 32 come
 * off each lane's integer first, with the activations' sums of 16, and the
 * minimums of Q2_K, Q4_K and Q5_K are one more FMA by those sums.  The
 * same operations in the same lanes as the AVX-512 level, so the same bits.
 *
 * Dealing out: Q4_K's and Q5_K's nibbles come out of one 4 x 4 transpose
 * of dwords per 128-bit lane of the quants (the low nibbles are lanes 0-7,
 * the high ones 8-15); Q2_K's and Q3_K's bit planes out of one gather of
 * each step's dwords and shifts by lane; Q6_K's quants are assembled in
 * value order, 64 at a time, and transposed as matmul_avx512.c's
 * k_transpose does (which works within 128-bit lanes, so on each half).
 *
 * The GEMV takes a row at a time (one stream of weights per thread), its
 * token's per-super-block quantities made once per call (KAct); more
 * tokens take tiles of K_MR rows, unpacked once into KBlocks when several
 * token tiles read them.
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
#include <string.h>

#include "cpu/avx2_util.h"
#include "cpu/matmul_avx2.h"
#include "quant_blocks.h"

/* Tile shape, rows by tokens (one thread, 128 tokens: 4 x 2 12% faster than 2 x 2, 4% than 3 x 2). */
#define K_MR 4
#define K_NT 2

/* Super-blocks a row tile may have to be packed (longer rows are unpacked in the tile). */
#define K_PACK_BLOCKS 32

/*
 * A super-block of one row as the tile wants it: q[s][h] lane e holds
 * quad s of sub-block LLM_Q8KI_ORDER[8h + e] (unsigned), and scale[h] and
 * min[h] lane e d times its scale and (Q2_K, Q4_K, Q5_K) -dmin times its
 * minimum.  The tile makes one from the weights as it goes (one token
 * tile), or reads those that packing made once for a row tile: the same
 * vectors, so a row's bits do not depend on which.
 */
typedef struct KBlock
{
	__m256i		q[4][2];
	__m256		scale[2];
	__m256		min[2];
} KBlock;

/*
 * Four 32-byte halves of chunks in value order (a[c]: values 64c + 32h ..
 * + 31 of half h) transposed by dwords within 128-bit lanes: s[k] lane e
 * gets quad k of sub-block LLM_Q8KI_ORDER[8h + e] (matmul_avx512.c's
 * k_transpose on one half).
 */
KERN void
k_transpose(const __m256i *a, __m256i *s)
{
	__m256i		t0 = _mm256_unpacklo_epi32(a[0], a[1]);
	__m256i		t1 = _mm256_unpackhi_epi32(a[0], a[1]);
	__m256i		t2 = _mm256_unpacklo_epi32(a[2], a[3]);
	__m256i		t3 = _mm256_unpackhi_epi32(a[2], a[3]);

	s[0] = _mm256_unpacklo_epi64(t0, t2);
	s[1] = _mm256_unpackhi_epi64(t0, t2);
	s[2] = _mm256_unpacklo_epi64(t1, t3);
	s[3] = _mm256_unpackhi_epi64(t1, t3);
}

/*
 * Lane e of out[h]: byte idx[8h + e] of v (unsigned, or signed), as a
 * float, times f: a block's scales or minimums in the lane order.
 */
KERN void
k_lane_floats(__m128i v, __m128i idx, const bool is_signed, float f, __m256 *out)
{
	__m128i		p = _mm_shuffle_epi8(v, idx);
	__m128i		p_hi = _mm_srli_si128(p, 8);
	__m256i		w0 = is_signed ? _mm256_cvtepi8_epi32(p) : _mm256_cvtepu8_epi32(p);
	__m256i		w1 = is_signed ? _mm256_cvtepi8_epi32(p_hi) : _mm256_cvtepu8_epi32(p_hi);

	out[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(w0), _mm256_set1_ps(f));
	out[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(w1), _mm256_set1_ps(f));
}

/* The lane order as byte indices; and for Q4_K and Q5_K, each lane's sub-block of 32 (LLM_Q8KI_ORDER[e] / 2). */
#define K_ORDER _mm_setr_epi8(LLM_Q8KI_ORDER)
#define K_ORDER_32 _mm_setr_epi8(0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7)

/*
 * Q4_K or Q5_K super-block blk into kb.  Lane e = 4L + i of the 16 is quad
 * s of sub-block 4i + L, values 64i + 16L + 4s .. + 3: the low nibbles (L <
 * 2, lanes 0-7) or the high ones (L >= 2, lanes 8-15) of qs dword 8i + 4 (L
 * & 1) + s, so both halves come from one 4 x 4 transpose of the quants'
 * dwords per 128-bit lane.  Q5_K's fifth bits: bit 2i + (L >= 2) of qh
 * dword 4 (L & 1) + s.
 */
KERN void
k_unpack_q45(const uint8_t *blk, const bool five, KBlock *kb)
{
	const LlmBlockQ4_K *h = (const LlmBlockQ4_K *) blk;	/* Q5_K: the same head */
	const uint8_t *qs = five ? ((const LlmBlockQ5_K *) blk)->qs : h->qs;
	__m128i		sm = llm_q4k_scales_mins(h->scales);
	__m256i		y[4];
	__m256i		g[4];
	__m256i		qh = _mm256_setzero_si256();

	k_lane_floats(sm, K_ORDER_32, false, _cvtsh_ss(h->d), kb->scale);
	k_lane_floats(sm, _mm_add_epi8(K_ORDER_32, _mm_set1_epi8(8)), false, -_cvtsh_ss(h->dmin), kb->min);
	if (five)
		qh = _mm256_loadu_si256((const __m256i *) ((const LlmBlockQ5_K *) blk)->qh);
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
		y[i] = _mm256_loadu_si256((const __m256i *) (qs + 32 * i));
	k_transpose(y, g);
#pragma GCC unroll 4
	for (int s = 0; s < 4; s++)
	{
		__m256i		lo = _mm256_and_si256(g[s], _mm256_set1_epi8(0x0F));
		__m256i		hi = _mm256_and_si256(_mm256_srli_epi16(g[s], 4), _mm256_set1_epi8(0x0F));

		if (five)
		{
			/* lane 4L + i: qh dword 4L + s, bit 2i (lanes 0-7) or 2i + 1 (8-15) of each byte */
			__m256i		hs = _mm256_permutevar8x32_epi32(qh, _mm256_setr_epi32(s, s, s, s, 4 + s, 4 + s, 4 + s, 4 + s));
			__m256i		b0 = _mm256_srlv_epi32(hs, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
			__m256i		b1 = _mm256_srlv_epi32(hs, _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7));

			lo = _mm256_or_si256(lo, _mm256_slli_epi32(_mm256_and_si256(b0, _mm256_set1_epi8(0x01)), 4));
			hi = _mm256_or_si256(hi, _mm256_slli_epi32(_mm256_and_si256(b1, _mm256_set1_epi8(0x01)), 4));
		}
		kb->q[s][0] = lo;
		kb->q[s][1] = hi;
	}
}

/*
 * Half h of chunk st of a Q6_K super-block: values 64 st + 32h .. + 31 (g
 * = 2 (st % 2) + h), their low four bits from ql[64 (st / 2) + 32h + l]
 * (low nibbles for st even, high for odd), their high two from bits 2g ..
 * 2g + 1 of qh[32 (st / 2) + l]; unsigned, standing for q - 32.
 */
KERN __m256i
q6_half(const LlmBlockQ6_K *b, int st, int h)
{
	const int	g = 2 * (st % 2) + h;
	__m256i		ql = _mm256_loadu_si256((const __m256i *) (b->ql + 64 * (st / 2) + 32 * h));
	__m256i		qh = _mm256_loadu_si256((const __m256i *) (b->qh + 32 * (st / 2)));
	__m256i		lo = _mm256_and_si256(st % 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0F));
	__m256i		hi;

	/* bits 2g .. 2g + 1 to bits 4 .. 5 */
	if (g < 2)
		hi = _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - 2 * g));
	else
		hi = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g - 4));
	return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
}

/*
 * The sixteen signed scales (-32 .. 31) of a Q3_K super-block's 12 bytes
 * at q (llm_q3k_scales6 less 32, by vector shifts: word w takes its low
 * nibbles from the low or high nibbles of dword w % 2 and its two high bits
 * from bits 2w .. 2w + 1 of dword 2).
 */
KERN __m128i
q3_scales(const uint8_t *q)
{
	uint32_t	u2;
	__m128i		u01;
	__m128i		lo;
	__m128i		hi;

	memcpy(&u2, q + 8, sizeof(u2));
	u01 = _mm_shuffle_epi32(_mm_loadl_epi64((const __m128i *) q), _MM_SHUFFLE(1, 0, 1, 0));
	lo = _mm_and_si128(_mm_srlv_epi32(u01, _mm_setr_epi32(0, 0, 4, 4)), _mm_set1_epi8(0x0F));
	hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int) u2), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(0x03));
	return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi32(hi, 4)), _mm_set1_epi8(32));
}

/*
 * Q2_K or Q3_K super-block blk into kb.  Lane e = 4L + i of the 16 is quad
 * s of sub-block 4i + L, values 128 (i / 2) + 32j + 16 (L % 2) + 4s .. + 3
 * with j = 2 (i % 2) + L / 2, whose two low bits are bits 2j .. 2j + 1 of
 * qs dword 8 (i / 2) + 4 (L % 2) + s: the same dword for lanes 0-7 and
 * 8-15, bits 4 (i % 2) in the first, two higher in the second.  So each
 * step's dwords are gathered once, by an unpack and a shuffle within
 * 128-bit lanes, and shifted per lane.  Q3_K's high bit: bit 2i + L / 2 of
 * hmask dword 4 (L % 2) + s.  Unsigned: Q3_K's u = 0..7 stands for u - 4.
 */
KERN void
k_unpack_q23(const uint8_t *blk, const bool three, KBlock *kb)
{
	const uint8_t *qs = three ? ((const LlmBlockQ3_K *) blk)->qs : ((const LlmBlockQ2_K *) blk)->qs;
	const __m256i y0 = _mm256_loadu_si256((const __m256i *) qs);
	const __m256i y1 = _mm256_loadu_si256((const __m256i *) (qs + 32));
	const __m256i lo01 = _mm256_unpacklo_epi32(y0, y1);	/* per 128-bit lane: y0[0] y1[0] y0[1] y1[1] */
	const __m256i hi01 = _mm256_unpackhi_epi32(y0, y1);
	__m256i		g[4];
	__m256i		hm = _mm256_setzero_si256();

	if (three)
	{
		const LlmBlockQ3_K *q3 = (const LlmBlockQ3_K *) blk;

		k_lane_floats(q3_scales(q3->scales), K_ORDER, true, _cvtsh_ss(q3->d), kb->scale);
		kb->min[0] = kb->min[1] = _mm256_setzero_ps();
		hm = _mm256_loadu_si256((const __m256i *) q3->hmask);
	}
	else
	{
		const LlmBlockQ2_K *q2 = (const LlmBlockQ2_K *) blk;
		__m128i		raw = _mm_loadu_si128((const __m128i *) q2->scales);

		k_lane_floats(_mm_and_si128(raw, _mm_set1_epi8(0x0F)), K_ORDER, false, _cvtsh_ss(q2->d), kb->scale);
		k_lane_floats(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)), K_ORDER, false,
					  -_cvtsh_ss(q2->dmin), kb->min);
	}
	/* g[s], per 128-bit lane: dword s of y0, twice, then of y1, twice */
	g[0] = _mm256_shuffle_epi32(lo01, _MM_SHUFFLE(1, 1, 0, 0));
	g[1] = _mm256_shuffle_epi32(lo01, _MM_SHUFFLE(3, 3, 2, 2));
	g[2] = _mm256_shuffle_epi32(hi01, _MM_SHUFFLE(1, 1, 0, 0));
	g[3] = _mm256_shuffle_epi32(hi01, _MM_SHUFFLE(3, 3, 2, 2));
#pragma GCC unroll 4
	for (int s = 0; s < 4; s++)
	{
		__m256i		x = _mm256_srlv_epi32(g[s], _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
		__m256i		lo = _mm256_and_si256(x, _mm256_set1_epi8(0x03));
		__m256i		hi = _mm256_and_si256(_mm256_srli_epi32(x, 2), _mm256_set1_epi8(0x03));

		if (three)
		{
			/* hmask dword 4L + s in lane 4L + i (L < 2), bit 2i of each byte (lanes 0-7) or 2i + 1 (8-15) */
			__m256i		hs = s == 0 ? _mm256_shuffle_epi32(hm, 0x00) : s == 1 ? _mm256_shuffle_epi32(hm, 0x55)
				: s == 2 ? _mm256_shuffle_epi32(hm, 0xAA) : _mm256_shuffle_epi32(hm, 0xFF);
			__m256i		h = _mm256_srlv_epi32(hs, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));

			lo = _mm256_or_si256(lo, _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi8(0x01)), 2));
			hi = _mm256_or_si256(hi, _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi8(0x02)), 1));
		}
		kb->q[s][0] = lo;
		kb->q[s][1] = hi;
	}
}

/* Q6_K super-block blk into kb: its scales, then the quants in value order, transposed. */
KERN void
k_unpack_q6(const uint8_t *blk, KBlock *kb)
{
	const LlmBlockQ6_K *q6 = (const LlmBlockQ6_K *) blk;

	k_lane_floats(_mm_loadu_si128((const __m128i *) q6->scales), K_ORDER, true, _cvtsh_ss(q6->d), kb->scale);
	kb->min[0] = kb->min[1] = _mm256_setzero_ps();
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++)
	{
		__m256i		v[4];
		__m256i		s[4];

#pragma GCC unroll 4
		for (int c = 0; c < 4; c++)
			v[c] = q6_half(q6, c, h);
		k_transpose(v, s);
#pragma GCC unroll 4
		for (int c = 0; c < 4; c++)
			kb->q[c][h] = s[c];
	}
}

/* Super-block blk of type t unpacked into kb. */
KERN void
k_unpack(const uint8_t *blk, const LlmType t, KBlock *kb)
{
	if (t == LLM_TYPE_Q4_K || t == LLM_TYPE_Q5_K)
		k_unpack_q45(blk, t == LLM_TYPE_Q5_K, kb);
	else if (t == LLM_TYPE_Q2_K || t == LLM_TYPE_Q3_K)
		k_unpack_q23(blk, t == LLM_TYPE_Q3_K, kb);
	else
		k_unpack_q6(blk, kb);
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
 * One token's quantities of a super-block for the tiles, lanes as the
 * weights': d_a, C times the sums of 16 (Q3_K's C = 4, Q6_K's 32) and d_a
 * times those sums (the minimums' factor).
 */
typedef struct KAct
{
	__m256		dq;
	__m256i		off[2];
	__m256		bf[2];
} KAct;

/* Super-blocks of a GEMV's token whose KAct are made once per call (longer rows: in the tile). */
#define K_ACT_BLOCKS 64

/* Token t's quantities of super-block b, for type kt. */
KERN KAct
k_act(const LlmGemmArgs *a, int t, int64_t b, const LlmType kt)
{
	const uint8_t *row = a->x + (size_t) t * a->x_stride;
	const int16_t *xs = (const int16_t *) (row + llm_act_bsums_offset(a->k));
	KAct		ka;

	ka.dq = _mm256_set1_ps(((const float *) (row + llm_act_d_offset(a->k)))[b]);
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++)
	{
		__m256i		bs = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *) (xs + 16 * b + 8 * h)));

		ka.off[h] = kt == LLM_TYPE_Q3_K ? _mm256_slli_epi32(bs, 2) : _mm256_slli_epi32(bs, 5);
		ka.bf[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(bs), ka.dq);
	}
	return ka;
}

/*
 * Tile of MR rows by NT tokens of a type-t weight against Q8KI
 * activations, from the weights or (pk) from their packing, in the one
 * order of operations every output follows whatever the number of tokens
 * (matmul_avx512.c's tile_k, half by half): per super-block, four dot
 * steps give each lane its sub-block's integer sum p = sum u a of the
 * unsigned quants u; Q3_K's offset of 4 and Q6_K's of 32 come off in int32
 * (p - C * (the activations' sum of 16), exact), and one FMA adds p times
 * (d * scale) * d_a; the minimums of Q2_K, Q4_K and Q5_K add (-dmin * m)
 * times d_a * (the sum of 16) by a second FMA.
 */
KERN void
tile_k(const LlmGemmArgs *a, int64_t r, int t, const int MR, const int NT, const LlmType kt, const KBlock *pk,
	   const KAct *act, const bool vnni)
{
	const bool	offset = kt == LLM_TYPE_Q3_K || kt == LLM_TYPE_Q6_K;
	const int64_t nb = a->k / LLM_QK_K;
	const size_t bsize = llm_block_bytes(kt);
	const size_t pf = prefetch_distance(a->row_bytes, MR);
	const uint8_t *w[4];
	const int8_t *xq[4];
	__m256		acc[4][4][2];

#pragma GCC unroll 4
	for (int i = 0; i < MR; i++)
		w[i] = a->w + (size_t) (r + i) * a->row_bytes;
#pragma GCC unroll 4
	for (int q = 0; q < NT; q++)
	{
		xq[q] = (const int8_t *) (a->x + (size_t) (t + q) * a->x_stride);
#pragma GCC unroll 4
		for (int i = 0; i < MR; i++)
			acc[i][q][0] = acc[i][q][1] = _mm256_setzero_ps();
	}
	for (int64_t b = 0; b < nb; b++)
	{
		_Alignas(32) KBlock kb[4];	/* the block's rows when not packed */
		const KBlock *kp = pk != NULL ? pk + b * MR : kb;

		if (pk == NULL)
#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
			{
				prefetch_bytes(w[i] + b * bsize + pf, bsize);
				k_unpack(w[i] + b * bsize, kt, &kb[i]);
			}
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++)
		{
			__m256i		p[4][4];

#pragma GCC unroll 4
			for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
				for (int q = 0; q < NT; q++)
					p[i][q] = _mm256_setzero_si256();
#pragma GCC unroll 4
			for (int s = 0; s < 4; s++)
#pragma GCC unroll 4
				for (int q = 0; q < NT; q++)
				{
					__m256i		xa = _mm256_loadu_si256((const __m256i *) (xq[q] + b * LLM_QK_K + 64 * s + 32 * h));

#pragma GCC unroll 4
					for (int i = 0; i < MR; i++)
						p[i][q] = dot_u8s8(p[i][q], kp[i].q[s][h], xa, vnni);
				}
#pragma GCC unroll 4
			for (int q = 0; q < NT; q++)
			{
				const KAct	x = act != NULL ? act[b] : k_act(a, t + q, b, kt);

#pragma GCC unroll 4
				for (int i = 0; i < MR; i++)
				{
					__m256i		v = offset ? _mm256_sub_epi32(p[i][q], x.off[h]) : p[i][q];

					acc[i][q][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(kp[i].scale[h], x.dq),
												   acc[i][q][h]);
					if (!offset)
						acc[i][q][h] = _mm256_fmadd_ps(kp[i].min[h], x.bf[h], acc[i][q][h]);
				}
			}
		}
	}
	store_tile16(a, r, t, acc, MR, NT);
}

/* The tile calls of gemm_k, for TOKEN_TILES (they use its locals). */
#define CALL_K(T, NT) tile_k(a, r, T, K_MR, NT, kt, NULL, NULL, vnni)
#define CALL_K_PACKED(T, NT) tile_k(a, r, T, K_MR, NT, kt, pk, NULL, vnni)
#define CALL_K1(T, NT) tile_k(a, r, T, 1, NT, kt, NULL, NULL, vnni)

/*
 * The gemm of type-kt weights in one variant: the GEMV a row at a time,
 * its token's quantities made once; else tiles of K_MR rows by K_NT
 * tokens, and with more than one token tile each row tile is unpacked
 * once (pk, on the stack) and every token tile reads it.
 */
KERN void
gemm_k_variant(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1, const LlmType kt, const bool vnni)
{
	const int64_t nb = a->k / LLM_QK_K;
	const bool	pack = t1 - t0 > K_NT && nb <= K_PACK_BLOCKS;
	int64_t		r = r0;
	_Alignas(32) KBlock pk[K_PACK_BLOCKS * K_MR];

	if (t1 - t0 == 1 && nb <= K_ACT_BLOCKS)
	{
		_Alignas(32) KAct act[K_ACT_BLOCKS];

		for (int64_t b = 0; b < nb; b++)
			act[b] = k_act(a, t0, b, kt);
		for (; r < r1; r++)
			tile_k(a, r, t0, 1, 1, kt, NULL, act, vnni);
		return;
	}
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

/* The gemm of type-kt weights, in the variant llm_avx2_vnni chose. */
KERN void
gemm_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1, const LlmType kt)
{
	if (LLM_AVX2_HAVE_VNNI && llm_avx2_vnni())
		gemm_k_variant(a, r0, r1, t0, t1, kt, true);
	else
		gemm_k_variant(a, r0, r1, t0, t1, kt, false);
}

/* The gemm of Q2_K weights. */
void
llm_avx2_gemm_q2_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q2_K);
}

/* The gemm of Q3_K weights. */
void
llm_avx2_gemm_q3_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q3_K);
}

/* The gemm of Q4_K weights. */
void
llm_avx2_gemm_q4_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q4_K);
}

/* The gemm of Q5_K weights. */
void
llm_avx2_gemm_q5_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q5_K);
}

/* The gemm of Q6_K weights. */
void
llm_avx2_gemm_q6_k(const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1)
{
	gemm_k(a, r0, r1, t0, t1, LLM_TYPE_Q6_K);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif							/* x86-64 with GCC or Clang */
