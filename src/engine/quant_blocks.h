/*
 * quant_blocks.h
 *		Private: the byte layouts of ggml's quantized blocks, for the reference
 *		kernels in quant_ref.c and the fast kernels that must agree with them.
 *
 * Each struct is one block exactly as GGUF stores it (ggml-common.h), field
 * names as in ggml so that its documentation can be read alongside.  Every
 * member is a byte or a 16-bit half, so the structs have no padding and need
 * only 2-byte alignment; their sizes are checked at compile time against the
 * formulas of the type traits in quant.c (and test_quant.c checks them
 * against llm_type_traits at run time).  All multi-byte fields are
 * little-endian, which is also the only host byte order supported.
 *
 * "fp16" below is an IEEE binary16 bit pattern: decode with llm_fp16_to_fp32.
 */
#ifndef LLM_QUANT_BLOCKS_H
#define LLM_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the quantized block layouts assume a little-endian host"
#endif

/* Q4_0: x = d * (q - 8), q a nibble; value j in the low nibble of qs[j], value j+16 in the high one. */
typedef struct LlmBlockQ4_0
{
	uint16_t	d;				/* fp16 scale */
	uint8_t		qs[LLM_QK / 2]; /* nibbles */
} LlmBlockQ4_0;

/* Q4_1: x = d * q + m, nibbles placed as in Q4_0. */
typedef struct LlmBlockQ4_1
{
	uint16_t	d;				/* fp16 scale */
	uint16_t	m;				/* fp16 minimum */
	uint8_t		qs[LLM_QK / 2]; /* nibbles */
} LlmBlockQ4_1;

/* Q5_0: x = d * (q - 16), q = nibble | bit j of qh (a little-endian uint32) << 4. */
typedef struct LlmBlockQ5_0
{
	uint16_t	d;				/* fp16 scale */
	uint8_t		qh[4];			/* fifth bits, bit j for value j */
	uint8_t		qs[LLM_QK / 2]; /* low four bits, placed as in Q4_0 */
} LlmBlockQ5_0;

/* Q5_1: x = d * q + m, q as in Q5_0. */
typedef struct LlmBlockQ5_1
{
	uint16_t	d;				/* fp16 scale */
	uint16_t	m;				/* fp16 minimum */
	uint8_t		qh[4];			/* fifth bits, bit j for value j */
	uint8_t		qs[LLM_QK / 2]; /* low four bits, placed as in Q4_0 */
} LlmBlockQ5_1;

/* Q8_0: x = d * q. */
typedef struct LlmBlockQ8_0
{
	uint16_t	d;				/* fp16 scale */
	int8_t		qs[LLM_QK];		/* signed quants */
} LlmBlockQ8_0;

/*
 * Q2_K: 16 sub-blocks of 16 values; x = d * (sc & 15) * q - dmin * (sc >> 4).
 * Value 128*h + 32*j + 16*s + l (h < 2, j < 4, s < 2, l < 16) is bits 2j..2j+1
 * of qs[32*h + 16*s + l], with scale byte scales[8*h + 2*j + s].
 */
typedef struct LlmBlockQ2_K
{
	uint8_t		scales[LLM_QK_K / 16];	/* 4-bit scale | 4-bit min << 4 */
	uint8_t		qs[LLM_QK_K / 4];	/* 2-bit quants */
	uint16_t	d;				/* fp16 super-block scale of the scales */
	uint16_t	dmin;			/* fp16 super-block scale of the mins */
} LlmBlockQ2_K;

/*
 * Q3_K: 16 sub-blocks of 16 values; x = d * (sc - 32) * (q - (hbit ? 0 : 4)),
 * sc a 6-bit scale (llm_q3k_scale).  Value 128*h + 32*j + 16*s + l takes its
 * two low bits as Q2_K does and its high bit from bit 4*h + j of
 * hmask[16*s + l]; its scale is number 8*h + 2*j + s.
 */
typedef struct LlmBlockQ3_K
{
	uint8_t		hmask[LLM_QK_K / 8];	/* high bits of the quants */
	uint8_t		qs[LLM_QK_K / 4];	/* low two bits of the quants */
	uint8_t		scales[12];		/* 16 6-bit scales, packed */
	uint16_t	d;				/* fp16 super-block scale */
} LlmBlockQ3_K;

/*
 * Q4_K: 8 sub-blocks of 32 values; x = d * sc * q - dmin * m with 6-bit sc, m
 * (llm_k4_scale_min).  Value 64*c + l (l < 32) is the low nibble of
 * qs[32*c + l] in sub-block 2*c; value 64*c + 32 + l its high nibble, in
 * sub-block 2*c + 1.
 */
typedef struct LlmBlockQ4_K
{
	uint16_t	d;				/* fp16 super-block scale of the scales */
	uint16_t	dmin;			/* fp16 super-block scale of the mins */
	uint8_t		scales[12];		/* 8 6-bit scales and 8 6-bit mins, packed */
	uint8_t		qs[LLM_QK_K / 2];	/* nibbles */
} LlmBlockQ4_K;

/*
 * Q5_K: as Q4_K, plus a fifth bit: sub-block t (= 2*c or 2*c + 1) takes it
 * from bit t of qh[l].
 */
typedef struct LlmBlockQ5_K
{
	uint16_t	d;				/* fp16 super-block scale of the scales */
	uint16_t	dmin;			/* fp16 super-block scale of the mins */
	uint8_t		scales[12];		/* 8 6-bit scales and 8 6-bit mins, packed */
	uint8_t		qh[LLM_QK_K / 8];	/* fifth bits */
	uint8_t		qs[LLM_QK_K / 2];	/* low four bits */
} LlmBlockQ5_K;

/*
 * Q6_K: 16 sub-blocks of 16 values; x = d * scales[k] * (q - 32), q 6 bits.
 * Value 128*h + 32*g + l (g < 4, l < 32): low four bits from
 * ql[64*h + l + 32*(g & 1)] (low nibble for g < 2, high for g >= 2), high
 * two bits from bits 2g..2g+1 of qh[32*h + l]; scale scales[8*h + 2*g + l/16].
 */
typedef struct LlmBlockQ6_K
{
	uint8_t		ql[LLM_QK_K / 2];	/* low four bits */
	uint8_t		qh[LLM_QK_K / 4];	/* high two bits */
	int8_t		scales[LLM_QK_K / 16];	/* 8-bit signed scales */
	uint16_t	d;				/* fp16 super-block scale */
} LlmBlockQ6_K;

/*
 * SPARSE24 (the engine's own, not ggml's): 2:4 sparse int8.  Of each four
 * consecutive values two are kept (the pruned ones are zero); bit j of
 * mask (a little-endian uint64) says value j is kept, so every nibble of
 * it has two bits set -- the same four bits per four values as two 2-bit
 * indices, in the form vpexpandb takes.  qs holds the kept values in order:
 * value j is d[j / 32] * qs[r], r the number of kept values before it.  A
 * mask with more than 32 bits set (no quantizer writes one) decodes its
 * values past the 32nd as zeros.  22 bytes per 32 values (5.5 bits per
 * weight) against Q8_0's 34.
 */
typedef struct LlmBlockS24
{
	uint16_t	d[2];			/* fp16 scales of values 0..31 and 32..63 */
	uint8_t		mask[8];		/* bit j: value j kept */
	int8_t		qs[LLM_QK_S24 / 2]; /* the kept values, signed */
} LlmBlockS24;

_Static_assert(sizeof(LlmBlockQ4_0) == 2 + LLM_QK / 2, "Q4_0 block size");
_Static_assert(sizeof(LlmBlockQ4_1) == 4 + LLM_QK / 2, "Q4_1 block size");
_Static_assert(sizeof(LlmBlockQ5_0) == 2 + 4 + LLM_QK / 2, "Q5_0 block size");
_Static_assert(sizeof(LlmBlockQ5_1) == 4 + 4 + LLM_QK / 2, "Q5_1 block size");
_Static_assert(sizeof(LlmBlockQ8_0) == 2 + LLM_QK, "Q8_0 block size");
_Static_assert(sizeof(LlmBlockQ2_K) == LLM_QK_K / 16 + LLM_QK_K / 4 + 4, "Q2_K block size");
_Static_assert(sizeof(LlmBlockQ3_K) == LLM_QK_K / 8 + LLM_QK_K / 4 + 12 + 2, "Q3_K block size");
_Static_assert(sizeof(LlmBlockQ4_K) == 4 + 12 + LLM_QK_K / 2, "Q4_K block size");
_Static_assert(sizeof(LlmBlockQ5_K) == 4 + 12 + LLM_QK_K / 8 + LLM_QK_K / 2, "Q5_K block size");
_Static_assert(sizeof(LlmBlockQ6_K) == LLM_QK_K / 2 + LLM_QK_K / 4 + LLM_QK_K / 16 + 2, "Q6_K block size");
_Static_assert(sizeof(LlmBlockS24) == 4 + 8 + LLM_QK_S24 / 2, "SPARSE24 block size");

/*
 * Bytes of one block of a quantized ggml type (the K-quants' super-blocks
 * too; Q6_K for any other): a constant wherever the type is, so kernels
 * that inline it fold it away (llm_type_traits' type_size is not).
 */
static inline size_t
llm_block_bytes(LlmType type)
{
	switch (type)
	{
		case LLM_TYPE_Q8_0:
			return sizeof(LlmBlockQ8_0);
		case LLM_TYPE_Q4_0:
			return sizeof(LlmBlockQ4_0);
		case LLM_TYPE_Q4_1:
			return sizeof(LlmBlockQ4_1);
		case LLM_TYPE_Q5_0:
			return sizeof(LlmBlockQ5_0);
		case LLM_TYPE_Q5_1:
			return sizeof(LlmBlockQ5_1);
		case LLM_TYPE_Q2_K:
			return sizeof(LlmBlockQ2_K);
		case LLM_TYPE_Q3_K:
			return sizeof(LlmBlockQ3_K);
		case LLM_TYPE_Q4_K:
			return sizeof(LlmBlockQ4_K);
		case LLM_TYPE_Q5_K:
			return sizeof(LlmBlockQ5_K);
		default:
			return sizeof(LlmBlockQ6_K);
	}
}

/*
 * The 6-bit scale and min of sub-block j (< 8) of a Q4_K or Q5_K block:
 * for j < 4 the low six bits of q[j] and q[j + 4]; for j >= 4 the nibbles
 * of q[j + 4] with, as their two high bits, the top two bits of q[j - 4]
 * (scale) and q[j] (min).
 */
static inline void
llm_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
	if (j < 4)
	{
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	}
	else
	{
		*sc = (uint8_t) ((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t) ((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
	}
}

/*
 * All eight 6-bit scales (out[0 .. 7]) and mins (out[8 .. 15]) of a Q4_K or
 * Q5_K block's 12 bytes q at once, as llm_k4_scale_min gives them one by
 * one (ggml's unpacking by 32-bit masks), for the SIMD kernels to load.
 */
static inline void
llm_k4_scales_mins(const uint8_t *q, uint8_t *out)
{
	const uint32_t kmask1 = 0x3f3f3f3f;
	const uint32_t kmask2 = 0x0f0f0f0f;
	const uint32_t kmask3 = 0x03030303;
	uint32_t	u[4];
	uint32_t	m03;

	memcpy(u, q, 12);
	u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
	m03 = u[1] & kmask1;
	u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
	u[2] = m03;
	u[0] &= kmask1;
	memcpy(out, u, 16);
}

/*
 * The signed scale (-32 .. 31) of sub-block k (< 16) of a Q3_K block: its
 * low nibble is the low (k < 8) or high (k >= 8) nibble of q[k % 8], its two
 * high bits are bits 2*(k/4) .. 2*(k/4)+1 of q[8 + k % 4].
 */
static inline int
llm_q3k_scale(int k, const uint8_t *q)
{
	int			lo = k < 8 ? (q[k] & 0xf) : (q[k - 8] >> 4);
	int			hi = (q[8 + (k & 3)] >> (2 * (k >> 2))) & 3;

	return (lo | (hi << 4)) - 32;
}

/*
 * All sixteen 6-bit scales of a Q3_K block's 12 bytes q at once, unsigned
 * (llm_q3k_scale(k) is out[k] - 32), by 32-bit masks: word w of out takes
 * its low nibbles from q[0 .. 3] (w = 0, 2) or q[4 .. 7] (w = 1, 3), low or
 * high (w >= 2), and its two high bits from bits 2w .. 2w + 1 of q[8 .. 11].
 */
static inline void
llm_q3k_scales6(const uint8_t *q, uint8_t *out)
{
	uint32_t	u[3];
	uint32_t	o[4];

	memcpy(u, q, 12);
	for (int w = 0; w < 4; w++)
		o[w] = ((u[w & 1] >> (4 * (w >> 1))) & 0x0f0f0f0f) | (((u[2] >> (2 * w)) & 0x03030303) << 4);
	memcpy(out, o, 16);
}

#endif							/* LLM_QUANT_BLOCKS_H */
