/*
 * quant_groups.c
 *		The grouped weight types (see quant.h): rows of Q8_0, Q4_0, Q4_1,
 *		Q5_0 or Q5_1 rewritten by the CPU backend's prepare (cpu/weights.c),
 *		16 blocks at a time, into the order in which the AVX-512 kernels
 *		multiply them, and the matching order of the activations' quants.  Plain C: the layout's definition and the
 *		reference every kernel of these types is tested against.
 *
 * A row of n values has nb = n / 32 blocks.  Its first llm_group_blocks(nb)
 * blocks (groups of 16, then one group of 8 when 8 or more are left) are
 * grouped; the rest, fewer than 8, stay as the base type's blocks.  A group
 * takes exactly the bytes of its blocks, so rows keep their size.
 *
 * A group of B blocks (16 or 8) is V = B / 2 "vectors" of 64 unsigned
 * bytes.  Byte 4L + j (lane L = 0 .. 15, j = 0 .. 3) of vector s holds
 *   B = 16:  value 4s + j of block ORDER[L];
 *   B = 8:   value 4(s + 4 (L / 8)) + j of block ORDER[L % 8]  (folded:
 *            lanes L and L + 8 are the two halves of one block),
 * as an unsigned quant: Q8_0's q + 128, Q4's nibble, Q5's nibble with its
 * fifth bit (Q5_0: q + 16).  So one
 * vpdpbusd a vector against activations in the same order (llm_group_act)
 * leaves every block's integer dot product whole in its own lane.  ORDER
 * (0 2 4 6 1 3 5 7 8 10 12 14 9 11 13 15) is the order that unpack rounds
 * leave blocks in, which the ungrouped kernels use too.
 *
 * Bytes of a group:
 *   Q8_0:  fp16 d[B] (lane order), then the V vectors;
 *   Q4_0:  fp16 d[B], then V / 2 vectors of nibbles: vector s in the low
 *          nibbles of stored vector s, vector s + V / 2 in the high ones;
 *   Q4_1:  fp16 d[B], fp16 m[B], then the nibbles as Q4_0's;
 *   Q5_0:  fp16 d[B], the fifth bits (bit i of 64-bit word s for byte i of
 *          vector s, 8 bytes a vector), then the low four bits as Q4_0's;
 *   Q5_1:  fp16 d[B], fp16 m[B], then as Q5_0's.
 * Lane L of the scales (and minimums) is the block of lane L (L < B).
 *
 * SPARSE24 (64 values a block, two scales: two Q8_0 blocks' worth, 2:4
 * sparse) groups the same way, counting its halves of 32 as the blocks:
 * a group of B halves (B / 2 SPARSE24 blocks, the same bytes) holds
 *   fp16 d[B] (lane order), then V 64-bit masks, then V times 32 bytes:
 *   bit 4L + j of mask s says that byte 4L + j of vector s (as above) is
 *   not zero, and the 32 bytes of vector s are those values in order, as
 *   q + 128 (unused bytes 128).
 * vpexpandb of the 32 bytes under the mask, into a vector of 128s, gives
 * vector s as Q8_0's grouped layout has it.  Every four values of a vector
 * are four consecutive values of one half, so a 2:4 row has at most 32 in
 * a vector; a block with more than two values in some four (no quantizer
 * writes one) cannot be grouped (llm_s24_groupable).  The tail, fewer than
 * 8 halves, stays as SPARSE24 blocks.
 */
#include "quant.h"

#include <stdbool.h>
#include <string.h>

#include "quant_blocks.h"

#define GROUP_MAX 16			/* blocks of a full group */

static const int group_order[GROUP_MAX] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};

/* Blocks of a row of nb blocks that are grouped: 16 at a time, then 8 if at least 8 are left. */
int64_t
llm_group_blocks(int64_t nb)
{
	return nb / GROUP_MAX * GROUP_MAX + (nb % GROUP_MAX >= GROUP_MAX / 2 ? GROUP_MAX / 2 : 0);
}

/* Blocks of the piece of a row of nb blocks that starts at block b: its group (16 or 8), or one block. */
int64_t
llm_group_piece(int64_t b, int64_t nb)
{
	if (b < nb / GROUP_MAX * GROUP_MAX)
		return GROUP_MAX;
	return b < llm_group_blocks(nb) ? GROUP_MAX / 2 : 1;
}

/* The grouped type of base (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), or LLM_TYPE_COUNT when it has none. */
LlmType
llm_type_grouped(LlmType base)
{
	switch (base)
	{
		case LLM_TYPE_Q8_0:
			return LLM_TYPE_Q8_0_G;
		case LLM_TYPE_Q4_0:
			return LLM_TYPE_Q4_0_G;
		case LLM_TYPE_Q4_1:
			return LLM_TYPE_Q4_1_G;
		case LLM_TYPE_Q5_0:
			return LLM_TYPE_Q5_0_G;
		case LLM_TYPE_Q5_1:
			return LLM_TYPE_Q5_1_G;
		case LLM_TYPE_SPARSE24:
			return LLM_TYPE_SPARSE24_G;
		default:
			return LLM_TYPE_COUNT;
	}
}

/* The type a grouped type rewrites; any other type itself. */
LlmType
llm_type_base(LlmType type)
{
	switch (type)
	{
		case LLM_TYPE_Q8_0_G:
			return LLM_TYPE_Q8_0;
		case LLM_TYPE_Q4_0_G:
			return LLM_TYPE_Q4_0;
		case LLM_TYPE_Q4_1_G:
			return LLM_TYPE_Q4_1;
		case LLM_TYPE_Q5_0_G:
			return LLM_TYPE_Q5_0;
		case LLM_TYPE_Q5_1_G:
			return LLM_TYPE_Q5_1;
		case LLM_TYPE_SPARSE24_G:
			return LLM_TYPE_SPARSE24;
		default:
			return type;
	}
}

/* The block and the first of the four values that lane L of vector s of a group of nblk (16 or 8) blocks holds. */
static void
group_lane(int nblk, int s, int lane, int *blk, int *val)
{
	if (nblk == GROUP_MAX)
	{
		*blk = group_order[lane];
		*val = 4 * s;
	}
	else
	{
		*blk = group_order[lane % 8];
		*val = 4 * (s + 4 * (lane / 8));
	}
}

/* Whether base's blocks have a minimum (Q4_1, Q5_1) and fifth bits (Q5_0, Q5_1). */
static bool
has_min(LlmType base)
{
	return base == LLM_TYPE_Q4_1 || base == LLM_TYPE_Q5_1;
}

static bool
has_fifth_bits(LlmType base)
{
	return base == LLM_TYPE_Q5_0 || base == LLM_TYPE_Q5_1;
}

/* Bytes of a group's scales (and minimums) and fifth bits, before its nibbles or quants. */
static size_t
group_header_bytes(LlmType base, int nblk)
{
	return (size_t) nblk * (has_min(base) ? 4 : 2) + (has_fifth_bits(base) ? (size_t) nblk * 4 : 0);
}

/* Offsets in a base block of its minimum, fifth bits and nibbles (or Q8_0's quants). */
static size_t
block_nibbles_at(LlmType base)
{
	return base == LLM_TYPE_Q8_0 || base == LLM_TYPE_Q4_0 ? 2 : base == LLM_TYPE_Q5_0 ? 6 : base == LLM_TYPE_Q5_1 ? 8 : 4;
}

static size_t
block_fifth_bits_at(LlmType base)
{
	return has_min(base) ? 4 : 2;
}

/*
 * The unsigned quants of values x .. x + 3 (x a multiple of 4) of the base
 * block b as the bytes of a word: Q8_0's q + 128; the nibbles (without the
 * fifth bits, which block_fifth4 gives).
 */
static uint32_t
block_quants4(LlmType base, const uint8_t *b, int x)
{
	const uint8_t *qs = b + block_nibbles_at(base);
	uint32_t	w;

	memcpy(&w, qs + (base == LLM_TYPE_Q8_0 ? x : x % (LLM_QK / 2)), 4);
	if (base == LLM_TYPE_Q8_0)
		return w ^ 0x80808080u;
	return x < LLM_QK / 2 ? w & 0x0F0F0F0Fu : (w >> 4) & 0x0F0F0F0Fu;
}

/* The fifth bits of values x .. x + 3 of a Q5 block b, as bits 0-3. */
static unsigned
block_fifth4(LlmType base, const uint8_t *b, int x)
{
	return (unsigned) (b[block_fifth_bits_at(base) + x / 8] >> (x % 8)) & 0x0F;
}

/* Set values x .. x + 3 of the base block b (zeroed beforehand) to the unsigned quants w and fifth bits h. */
static void
block_set_quants4(LlmType base, uint8_t *b, int x, uint32_t w, unsigned h)
{
	uint8_t    *qs = b + block_nibbles_at(base);
	uint32_t	old;

	if (base == LLM_TYPE_Q8_0)
	{
		w ^= 0x80808080u;
		memcpy(qs + x, &w, 4);
		return;
	}
	memcpy(&old, qs + x % (LLM_QK / 2), 4);
	old |= x < LLM_QK / 2 ? w : w << 4;
	memcpy(qs + x % (LLM_QK / 2), &old, 4);
	if (has_fifth_bits(base))
		b[block_fifth_bits_at(base) + x / 8] |= (uint8_t) (h << (x % 8));
}

/*
 * Where vector s of a group of nblk blocks is stored in the group's quants
 * (after the header), and its nibbles' shift (the second half of the
 * vectors in the high nibbles); Q8_0's are whole bytes.
 */
static size_t
group_vector_pos(LlmType base, int nblk, int s, int *shift)
{
	int			half = nblk / 4;

	*shift = 0;
	if (base != LLM_TYPE_Q8_0 && s >= half)
	{
		*shift = 4;
		s -= half;
	}
	return (size_t) (64 * s);
}

/* Copy the fp16 scales (and minimums) of nblk base blocks into a group's header (to_group), or back. */
static void
group_scales(LlmType base, const uint8_t *from, uint8_t *to, int nblk, bool to_group)
{
	const size_t bsz = (size_t) llm_type_traits(base)->type_size;

	for (int l = 0; l < nblk; l++)
		for (int f = 0; f < (has_min(base) ? 2 : 1); f++)	/* d (and m) lead every base block */
		{
			size_t		in_block = (size_t) group_order[l] * bsz + 2 * (size_t) f;
			size_t		in_group = 2 * (size_t) (f * nblk + l);

			memcpy(to + (to_group ? in_group : in_block), from + (to_group ? in_block : in_group), 2);
		}
}

/* Rewrite the nblk (16 or 8) base blocks at src as one group at dst. */
static void
group_pack(LlmType base, const uint8_t *src, int nblk, uint8_t *dst)
{
	const size_t bsz = (size_t) llm_type_traits(base)->type_size;
	const size_t hdr = group_header_bytes(base, nblk);
	uint8_t    *fifth = dst + (size_t) nblk * (has_min(base) ? 4 : 2);
	uint8_t    *q = dst + hdr;

	group_scales(base, src, dst, nblk, true);
	memset(fifth, 0, (size_t) nblk * bsz - (size_t) (fifth - dst));
	for (int s = 0; s < nblk / 2; s++)
	{
		int			shift;
		uint8_t    *v = q + group_vector_pos(base, nblk, s, &shift);

		for (int lane = 0; lane < 16; lane++)
		{
			int			blk;
			int			val;
			uint32_t	w,
						cur;
			const uint8_t *b;

			group_lane(nblk, s, lane, &blk, &val);
			b = src + (size_t) blk * bsz;
			w = block_quants4(base, b, val) << shift;
			memcpy(&cur, v + 4 * lane, 4);
			cur |= w;
			memcpy(v + 4 * lane, &cur, 4);
			if (has_fifth_bits(base))
				fifth[8 * s + lane / 2] |= (uint8_t) (block_fifth4(base, b, val) << (4 * (lane % 2)));
		}
	}
}

/* Rewrite the group of nblk blocks at src as nblk base blocks at dst. */
static void
group_unpack(LlmType base, const uint8_t *src, int nblk, uint8_t *dst)
{
	const size_t bsz = (size_t) llm_type_traits(base)->type_size;
	const uint8_t *fifth = src + (size_t) nblk * (has_min(base) ? 4 : 2);
	const uint8_t *q = src + group_header_bytes(base, nblk);

	memset(dst, 0, (size_t) nblk * bsz);
	group_scales(base, src, dst, nblk, false);
	for (int s = 0; s < nblk / 2; s++)
	{
		int			shift;
		const uint8_t *v = q + group_vector_pos(base, nblk, s, &shift);

		for (int lane = 0; lane < 16; lane++)
		{
			int			blk;
			int			val;
			uint32_t	w;
			unsigned	h = 0;

			group_lane(nblk, s, lane, &blk, &val);
			memcpy(&w, v + 4 * lane, 4);
			if (base != LLM_TYPE_Q8_0)
				w = (w >> shift) & 0x0F0F0F0Fu;
			if (has_fifth_bits(base))
				h = (fifth[8 * s + lane / 2] >> (4 * (lane % 2))) & 0x0F;
			block_set_quants4(base, dst + (size_t) blk * bsz, val, w, h);
		}
	}
}

/* Offsets in a SPARSE24 group of nblk halves of its masks and its kept values (after the scales). */
static size_t
s24_masks_at(int nblk)
{
	return 2 * (size_t) nblk;
}

static size_t
s24_values_at(int nblk)
{
	return 2 * (size_t) nblk + 8 * (size_t) (nblk / 2);
}

/* Each nibble of m replaced by its count of set bits (SWAR: the engine is built for any x86-64, without popcnt). */
static uint64_t
nibble_counts(uint64_t m)
{
	m = m - ((m >> 1) & 0x5555555555555555ull);
	return (m & 0x3333333333333333ull) + ((m >> 2) & 0x3333333333333333ull);
}

/* The number of set bits of m. */
static int
popcount64(uint64_t m)
{
	m = nibble_counts(m);
	m = (m + (m >> 4)) & 0x0F0F0F0F0F0F0F0Full;
	return (int) ((m * 0x0101010101010101ull) >> 56);
}

/*
 * Rewrite the nblk / 2 SPARSE24 blocks at src (of a 2:4 row:
 * llm_s24_groupable, so at most two kept in any four and none past the
 * 32nd) as one group at dst: each lane's four values found by its block's
 * mask, their place among the kept ones by the bits below.
 */
static void
s24_group_pack(const uint8_t *src, int nblk, uint8_t *dst)
{
	const LlmBlockS24 *blocks = (const LlmBlockS24 *) src;

	for (int l = 0; l < nblk; l++)
		memcpy(dst + 2 * l, blocks[group_order[l] / 2].d + group_order[l] % 2, 2);
	for (int s = 0; s < nblk / 2; s++)
	{
		uint8_t    *vals = dst + s24_values_at(nblk) + 32 * s;
		uint64_t	mask = 0;
		int			n = 0;

		memset(vals, 0x80, 32);
		for (int lane = 0; lane < 16; lane++)
		{
			int			blk;
			int			val;
			int			pos;
			int			r;
			uint64_t	m;
			const LlmBlockS24 *b;

			group_lane(nblk, s, lane, &blk, &val);
			b = blocks + blk / 2;
			pos = (blk % 2) * LLM_QK + val;
			memcpy(&m, b->mask, sizeof(m));
			r = popcount64(m & (((uint64_t) 1 << pos) - 1));
			for (int j = 0; j < 4; j++)
				if ((m >> (pos + j)) & 1)
				{
					int8_t		q = b->qs[r++];

					if (q != 0 && n < 32)
					{
						mask |= (uint64_t) 1 << (4 * lane + j);
						vals[n++] = (uint8_t) (q ^ 0x80);
					}
				}
		}
		memcpy(dst + s24_masks_at(nblk) + 8 * s, &mask, sizeof(mask));
	}
}

/* The int8 quants of a SPARSE24 group of nblk halves at src, half b as q[b]. */
static void
s24_group_quants(const uint8_t *src, int nblk, int8_t q[][LLM_QK])
{
	for (int s = 0; s < nblk / 2; s++)
	{
		const uint8_t *vals = src + s24_values_at(nblk) + 32 * s;
		uint64_t	mask;
		int			n = 0;

		memcpy(&mask, src + s24_masks_at(nblk) + 8 * s, sizeof(mask));
		for (int lane = 0; lane < 16; lane++)
		{
			int			blk;
			int			val;

			group_lane(nblk, s, lane, &blk, &val);
			for (int j = 0; j < 4; j++)
				q[blk][val + j] = (mask >> (4 * lane + j)) & 1 && n < 32 ? (int8_t) (vals[n++] ^ 0x80) : 0;
		}
	}
}

/* Rewrite a SPARSE24 group of nblk halves at src as nblk / 2 SPARSE24 blocks (the non-zero values kept) at dst. */
static void
s24_group_unpack(const uint8_t *src, int nblk, uint8_t *dst)
{
	int8_t		q[GROUP_MAX][LLM_QK];

	s24_group_quants(src, nblk, q);
	memset(dst, 0, (size_t) (nblk / 2) * sizeof(LlmBlockS24));
	for (int l = 0; l < nblk; l++)
		memcpy(((LlmBlockS24 *) dst)[group_order[l] / 2].d + group_order[l] % 2, src + 2 * l, 2);
	for (int i = 0; i < nblk / 2; i++)
	{
		LlmBlockS24 *b = (LlmBlockS24 *) dst + i;
		uint64_t	mask = 0;
		int			n = 0;

		for (int j = 0; j < LLM_QK_S24; j++)
			if (q[2 * i + j / LLM_QK][j % LLM_QK] != 0)
			{
				mask |= (uint64_t) 1 << j;
				b->qs[n++] = q[2 * i + j / LLM_QK][j % LLM_QK];
			}
		memcpy(b->mask, &mask, sizeof(mask));
	}
}

/* Whether a SPARSE24 row of n values can be grouped: no four values of a half with more than two kept. */
bool
llm_s24_groupable(const void *row, int64_t n)
{
	const LlmBlockS24 *b = row;

	for (int64_t i = 0; i < n / LLM_QK_S24; i++)
	{
		uint64_t	m;

		memcpy(&m, b[i].mask, sizeof(m));
		/* a nibble's count c > 2 exactly when c + 5 reaches 8 */
		if (((nibble_counts(m) + 0x5555555555555555ull) & 0x8888888888888888ull) != 0)
			return false;
	}
	return true;
}

/* Bytes of 32 values of base: a block, or half a SPARSE24 block. */
static size_t
half_bytes(LlmType base)
{
	return base == LLM_TYPE_SPARSE24 ? sizeof(LlmBlockS24) / 2 : (size_t) llm_type_traits(base)->type_size;
}

/* Blocks of 32 in the piece of a row of base (nb of them) from block b: a group, or one block of base. */
static int
base_piece(LlmType base, int64_t b, int64_t nb)
{
	int64_t		np = llm_group_piece(b, nb);

	return (int) (np == 1 && base == LLM_TYPE_SPARSE24 ? LLM_QK_S24 / LLM_QK : np);
}

/* Rewrite a row of n values of base into its grouped type (pack) or back: each group, then the tail as it is. */
static void
regroup_row(LlmType base, const uint8_t *src, uint8_t *dst, int64_t n, bool pack)
{
	const size_t hsz = half_bytes(base);
	const int64_t nb = n / LLM_QK;
	const int64_t ng = llm_group_blocks(nb);

	for (int64_t b = 0, np; b < ng; b += np)
	{
		np = base_piece(base, b, nb);
		if (base == LLM_TYPE_SPARSE24)
			(pack ? s24_group_pack : s24_group_unpack) (src + (size_t) b * hsz, (int) np, dst + (size_t) b * hsz);
		else
			(pack ? group_pack : group_unpack) (base, src + (size_t) b * hsz, (int) np, dst + (size_t) b * hsz);
	}
	memcpy(dst + (size_t) ng * hsz, src + (size_t) ng * hsz, (size_t) (nb - ng) * hsz);
}

/* Rewrite a row of n values of base as its grouped type (same size, src and dst apart; SPARSE24: llm_s24_groupable). */
void
llm_group_row(LlmType base, const void *src, void *dst, int64_t n)
{
	regroup_row(base, src, dst, n, true);
}

/* Rewrite a row of n values of a grouped type as its base type's blocks (src and dst apart). */
void
llm_ungroup_row(LlmType type, const void *src, void *dst, int64_t n)
{
	regroup_row(llm_type_base(type), src, dst, n, false);
}

/* Decode n values of a row of a grouped type into dst, a piece (group or block) at a time. */
void
llm_dequant_grouped(LlmType type, const void *src, float *dst, int64_t n)
{
	const LlmType base = llm_type_base(type);
	const size_t hsz = half_bytes(base);
	const int64_t nb = n / LLM_QK;
	const uint8_t *s = src;
	_Alignas(16) uint8_t buf[GROUP_MAX * sizeof(LlmBlockQ8_0)];	/* the largest group */

	for (int64_t b = 0, np; b < nb; b += np)
	{
		np = base_piece(base, b, nb);
		if (np < GROUP_MAX / 2)
			memcpy(buf, s + (size_t) b * hsz, (size_t) np * hsz);
		else if (base == LLM_TYPE_SPARSE24)
			s24_group_unpack(s + (size_t) b * hsz, (int) np, buf);
		else
			group_unpack(base, s + (size_t) b * hsz, (int) np, buf);
		llm_dequant_row(base, buf, dst + b * LLM_QK, np * LLM_QK);
	}
}

/*
 * Put the int8 quants of a row of nb activation blocks (32 each) in the
 * grouped order: block b's value v goes where the weights' grouped layout
 * keeps block b's value v (a group of 16 blocks in 512 bytes, of 8 folded
 * into 256), so a grouped weight's vectors meet their activations byte for
 * byte; the blocks after the groups stay in place.
 */
void
llm_group_act(int8_t *qs, int64_t nb)
{
	const int64_t ng = llm_group_blocks(nb);
	int8_t		tmp[GROUP_MAX * LLM_QK];

	for (int64_t b = 0, np; b < ng; b += np)
	{
		int8_t	   *g = qs + b * LLM_QK;

		np = llm_group_piece(b, nb);
		memcpy(tmp, g, (size_t) np * LLM_QK);
		for (int s = 0; s < np / 2; s++)
			for (int lane = 0; lane < 16; lane++)
			{
				int			blk;
				int			val;

				group_lane((int) np, s, lane, &blk, &val);
				memcpy(g + 64 * s + 4 * lane, tmp + blk * LLM_QK + val, 4);
			}
	}
}
