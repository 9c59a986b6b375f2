/*
 * matmul_amx.h
 *		Private: the AMX int8 tiles (Sapphire Rapids and later) under the
 *		AVX-512 level's Q-type gemm of many tokens (matmul_avx512_amx.c).
 *
 * One tdpbssd multiplies a block (32 quants) of up to 16 weight rows (the
 * A tile: each row's 32 signed quants in value order, straight from a
 * Q8_0 row or unpacked) by the same block of up to 16 tokens (the B tile:
 * quad s of each token in tile row s, LlmAmxTokens) into the 16 x 16
 * exact integer dot products of that block.  The float epilogue then does,
 * for every (row, token), the very operations of the AVX-512 q_group
 * kernels in the same order -- the block's product converted, times
 * d_w * d_a, into the float lane of that block's place in its group; Q4_1
 * and Q5_1's minimum after it -- so every lane holds the VNNI kernels'
 * bits, and the rows' sums are store_tile's.
 *
 * Only rows that are whole groups (16 blocks, then one of 8) go through
 * the tiles: the blocks after the groups hold a partial dot product of 4
 * or 8 quants in each lane, which tiles of a whole block cannot give.
 */
#ifndef LLM_CPU_MATMUL_AMX_H
#define LLM_CPU_MATMUL_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LLM_AMX_ROWS 16			/* weight rows of a panel: the rows of the A and C tiles */
#define LLM_AMX_TOKENS 16		/* tokens of a tile: the columns of the B and C tiles */
#define LLM_AMX_MAX_BLOCKS 192	/* grouped blocks of a row (k up to 6144 and its tail); longer rows: VNNI */

/* Up to 16 tokens' grouped activation blocks, as the B tiles read them (in a buffer of llm_amx_tokens_bytes). */
typedef struct LlmAmxTokens
{
	int8_t	   *q;				/* (nb, 8, 16, 4): quant 4s + j of block b of token t at 512 b + 64 s + 4 t + j */
	float	   *d;				/* (nb, 16): the blocks' scales d_a */
	float	   *s;				/* (nb, 16): the blocks' quant sums, as floats (minimums only) */
	int64_t		nb;				/* blocks, a multiple of 8 */
	int			nt;				/* tokens, 1 .. 16 (the others zero) */
} LlmAmxTokens;

/* Bytes of the buffer of one LlmAmxTokens of nb blocks (64-byte aligned). */
#define llm_amx_tokens_bytes(nb) ((size_t) (nb) * (512 + 2 * 64))

/* Up to 16 weight rows' grouped blocks, as the A tiles read them. */
typedef struct LlmAmxRows
{
	const int8_t *q;			/* block b of row i: 32 signed quants at q + i * stride + b * block_stride */
	size_t		stride;
	size_t		block_stride;
	float		d[LLM_AMX_MAX_BLOCKS][LLM_AMX_ROWS];	/* the blocks' scales d_w */
	float		m[LLM_AMX_MAX_BLOCKS][LLM_AMX_ROWS];	/* their minimums m_w (Q4_1, Q5_1) */
	bool		mins;
	int			rows;			/* 1 .. 16 */
	int64_t		nb;				/* blocks, a multiple of 8, at least 16 */
} LlmAmxRows;

/*
 * Fill tk, in buf (llm_amx_tokens_bytes(nb), 64-byte aligned), with nt
 * tokens' first nb blocks (Q8 activations, matmul.h: token t's row at
 * x + t * x_stride); with sums, their block sums too.
 */
void		llm_amx_pack_tokens(LlmAmxTokens *tk, uint8_t *buf, const uint8_t *x, size_t x_stride, int64_t k,
								int64_t nb, int nt, bool sums);

/*
 * The tiles of w's rows by tk's tokens over their blocks, which are the
 * whole rows: the rows' sums, store_tile's bits, at y[t * ldy + i].
 */
void		llm_amx_tiles(const LlmAmxRows *w, const LlmAmxTokens *tk, float *y, size_t ldy);

/*
 * A 64-byte aligned buffer of at least bytes kept by the calling thread
 * for its packed token tiles (grown as needed, freed when the thread
 * exits: a buffer of its own each call cost page faults); NULL when it
 * cannot grow.  Valid until the thread's next call.
 */
uint8_t    *llm_amx_scratch(size_t bytes);

/* Hand the calling thread's tile state back to the OS (after the last tiles of a call). */
void		llm_amx_release(void);

#endif							/* LLM_CPU_MATMUL_AMX_H */
