/*
 * matmul_avx512_amx.c
 *		The AMX int8 tiles under the AVX-512 level's Q-type gemm of many
 *		tokens (see matmul_amx.h), compiled for AVX-512 and AMX whatever the
 *		build's -march and run only after cpu_features.c has found AMX and
 *		the OS has granted this process its tile state.
 *
 * The model of a tile (16 weight rows by 16 tokens, one block of 32): one
 * tdpbssd takes 16 x 16 x 32 = 8192 multiply-adds, from 512 bytes of
 * weights (16 rows of 32: L1 after the first token tile) and 512 of packed
 * activations (L1), in about 16 cycles of the tile unit; its products
 * leave by one tile store (16 stores of 64 bytes).  The epilogue is then 16
 * vectors (one a row: convert, the scale product, an FMA into that row's
 * lane of the block, a load and a store of the float sums; Q4_1/Q5_1 a
 * second product and FMA).  Measured on a Sapphire Rapids Xeon: the tile
 * products about 22 TSC cycles a block, the epilogue about 27 alone, and
 * they hardly overlap (the tile loads and stores and the epilogue's stores
 * share the load and store ports), so about 55-75 cycles a block: 110-150
 * multiply-adds a cycle, against about 60 for the VNNI tiles.  The
 * per-block epilogue is the price of the batch-invariance rule: every
 * output has the VNNI kernels' bits, block by block.
 */
#include "cpu/matmul_amx.h"
#include "cpu/matmul.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")
#endif

#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/transpose_avx512.h"

#define KERN static inline __attribute__((always_inline))

/* The lane of block p of a group in the AVX-512 kernels (the inverse of their BLOCK_ORDER 0 2 4 6 1 3 5 7 8 10 ...). */
static const int8_t lane_of_block[16] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};

/* The tile configuration (palette 1), as ldtilecfg reads it. */
typedef struct TileConfig
{
	uint8_t		palette;
	uint8_t		start_row;
	uint8_t		reserved[14];
	uint16_t	colsb[16];
	uint8_t		rows[16];
} TileConfig;

/* The configuration loaded on this thread (0: none): weight rows by tokens. */
static __thread int config_rows;
static __thread int config_nt;

/*
 * Make the tile configuration for rows weight rows by nt tokens current on
 * this thread (ldtilecfg only when it changes): tiles 0 and 2 A (a block's
 * 32 quants of each row), 1 and 3 B (its 8 quads of each token), 4 to 7 C
 * (rows by tokens, int32).
 */
KERN void
amx_config(int rows, int nt)
{
	_Alignas(64) TileConfig c;

	if (rows == config_rows && nt == config_nt)
		return;
	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int i = 0; i < 8; i++)
	{
		bool		a = i == 0 || i == 2;
		bool		b = i == 1 || i == 3;

		c.rows[i] = (uint8_t) (b ? 8 : rows);
		c.colsb[i] = (uint16_t) (a ? 32 : 4 * nt);
	}
	_tile_loadconfig(&c);
	config_rows = rows;
	config_nt = nt;
}

/*
 * The 32-bit words of blocks b0 .. b0 + 15 (fewer at nb, a multiple of 8)
 * of nt token rows (from p, x_stride apart), transposed to (block, token)
 * at dst + 16 b; to_float: ints converted.
 */
KERN void
amx_deal_words(const uint8_t *p, size_t x_stride, int64_t b0, int64_t nb, int nt, bool to_float, float *dst)
{
	const __mmask16 m = nb - b0 >= 16 ? 0xFFFF : 0x00FF;
	__m512i		r[16];

	for (int t = 0; t < 16; t++)
	{
		__m512i		v = t < nt ? _mm512_maskz_loadu_epi32(m, p + (size_t) t * x_stride + 4 * (size_t) b0)
			: _mm512_setzero_si512();

		r[t] = to_float ? _mm512_castps_si512(_mm512_cvtepi32_ps(v)) : v;
	}
	llm_transpose16(r);
	for (int j = 0; j < 16 && b0 + j < nb; j++)
		_mm512_store_si512(dst + 16 * (b0 + j), r[j]);
}

/* Fill tk with nt tokens' first nb blocks (matmul_amx.h). */
void
llm_amx_pack_tokens(LlmAmxTokens *tk, uint8_t *buf, const uint8_t *x, size_t x_stride, int64_t k, int64_t nb, int nt,
					bool sums)
{
	const size_t d_offset = llm_act_d_offset(k);
	const size_t s_offset = llm_act_sums_offset(k);

	tk->q = (int8_t *) buf;
	tk->d = (float *) (buf + 512 * (size_t) nb);
	tk->s = tk->d + 16 * (size_t) nb;
	tk->nb = nb;
	tk->nt = nt;
	/* two blocks (64 bytes) of 16 tokens transposed: dword j is quad j of the first block (j < 8) or of the second */
	for (int64_t b = 0; b < nb; b += 2)
	{
		__m512i		r[16];

		for (int t = 0; t < 16; t++)
			r[t] = t < nt ? _mm512_loadu_si512(x + (size_t) t * x_stride + 32 * (size_t) b) : _mm512_setzero_si512();
		llm_transpose16(r);
		for (int j = 0; j < 16; j++)
			_mm512_store_si512(tk->q + 512 * (b + j / 8) + 64 * (j % 8), r[j]);
	}
	/* the scales (and sums) of 16 blocks of 16 tokens transposed to (block, token) */
	for (int64_t b0 = 0; b0 < nb; b0 += 16)
	{
		amx_deal_words(x + d_offset, x_stride, b0, nb, nt, false, tk->d);
		if (sums)
			amx_deal_words(x + s_offset, x_stride, b0, nb, nt, true, tk->s);
	}
}

/*
 * Block b's products c (rows by tokens) into acc (row, lane, token): the
 * block's lane in its group takes, for every row and token, the product
 * converted times d_w * d_a, then (MINS) the block sum times m_w * d_a:
 * q_group_packed's operations on one lane.  FIRST: the lane's first block,
 * added to zero rather than to acc (the same bits, without zeroing acc).
 */
KERN void
amx_epilogue(const LlmAmxRows *w, const LlmAmxTokens *tk, int64_t b, int32_t c[LLM_AMX_ROWS][16],
			 float acc[LLM_AMX_ROWS][16][16], const int NR, const bool MINS, const bool FIRST)
{
	const int	e = lane_of_block[b % 16];
	const __m512 da = _mm512_load_ps(tk->d + 16 * b);
	const __m512 sa = MINS ? _mm512_load_ps(tk->s + 16 * b) : _mm512_setzero_ps();

#pragma GCC unroll 16
	for (int i = 0; i < NR; i++)
	{
		__m512		v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[i])),
										_mm512_mul_ps(_mm512_set1_ps(w->d[b][i]), da),
										FIRST ? _mm512_setzero_ps() : _mm512_load_ps(acc[i][e]));

		if (MINS)
			v = _mm512_fmadd_ps(sa, _mm512_mul_ps(_mm512_set1_ps(w->m[b][i]), da), v);
		_mm512_store_ps(acc[i][e], v);
	}
}

/*
 * The products of blocks b .. b + 3 (rows by tokens) into c: two pairs of
 * A and B tiles in turn, four C tiles, so four tdpbssd are in flight.
 */
KERN void
amx_products(const LlmAmxRows *w, const LlmAmxTokens *tk, int64_t b, int32_t c[4][LLM_AMX_ROWS][16])
{
	const long	ws = (long) w->stride;

	/* block b + i: A tile TA and B tile TB, products into C tile TC (tile numbers are literals in the asm) */
#define AMX_BLOCK(i, TA, TB, TC) \
	do { \
		_tile_loadd(TA, w->q + (b + (i)) * w->block_stride, ws); \
		_tile_loadd(TB, tk->q + 512 * (b + (i)), 64); \
		_tile_zero(TC); \
		_tile_dpbssd(TC, TA, TB); \
	} while (0)
	AMX_BLOCK(0, 0, 1, 4);
	AMX_BLOCK(1, 2, 3, 5);
	AMX_BLOCK(2, 0, 1, 6);
	AMX_BLOCK(3, 2, 3, 7);
#undef AMX_BLOCK
	_tile_stored(4, c[0], 64);
	_tile_stored(5, c[1], 64);
	_tile_stored(6, c[2], 64);
	_tile_stored(7, c[3], 64);
}

/*
 * All blocks into acc (the first group's written, not added: every lane,
 * since a panel has a whole group of 16 at least), software
 * pipelined by four blocks: the epilogue of blocks b - 4 .. b - 1 runs
 * while the tile unit computes b .. b + 3.
 */
KERN void
amx_blocks(const LlmAmxRows *w, const LlmAmxTokens *tk, float acc[LLM_AMX_ROWS][16][16], const int NR,
		   const bool MINS)
{
	_Alignas(64) int32_t c[2][4][LLM_AMX_ROWS][16];	/* two steps' products of four blocks, rows by tokens */

	for (int64_t b = 0; b <= w->nb; b += 4)
	{
		if (b < w->nb)
			amx_products(w, tk, b, c[(b / 4) % 2]);
		if (b > 0 && b - 4 < 16)
			for (int i = 0; i < 4; i++)
				amx_epilogue(w, tk, b - 4 + i, c[(b / 4 - 1) % 2][i], acc, NR, MINS, true);
		else if (b > 0)
			for (int i = 0; i < 4; i++)
				amx_epilogue(w, tk, b - 4 + i, c[(b / 4 - 1) % 2][i], acc, NR, MINS, false);
	}
}

/*
 * The lanes' sum of one row for every token (acc[e]: lane e of the 16
 * tokens), in store_tile's order (hsum4's tree): with P_L the sum of lanes
 * 4L .. 4L + 3 as (4L + 4L+2) + (4L+1 + 4L+3), (P_0 + P_2) + (P_1 + P_3).
 */
KERN __m512
amx_lane_sums(float acc[16][16])
{
	__m512		pl[4];

#pragma GCC unroll 4
	for (int l = 0; l < 4; l++)
		pl[l] = _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(acc[4 * l]), _mm512_load_ps(acc[4 * l + 2])),
							  _mm512_add_ps(_mm512_load_ps(acc[4 * l + 1]), _mm512_load_ps(acc[4 * l + 3])));
	return _mm512_add_ps(_mm512_add_ps(pl[0], pl[2]), _mm512_add_ps(pl[1], pl[3]));
}

/* The tiles of w's rows by tk's tokens (matmul_amx.h). */
void
llm_amx_tiles(const LlmAmxRows *w, const LlmAmxTokens *tk, float *y, size_t ldy)
{
	_Alignas(64) float acc[LLM_AMX_ROWS][16][16];	/* (row, lane, token) */
	const int	nr = w->rows;
	const int	nt = tk->nt;
	__m512i		r[16];

	amx_config(nr, nt);
	if (nr == LLM_AMX_ROWS && !w->mins)
		amx_blocks(w, tk, acc, LLM_AMX_ROWS, false);
	else if (nr == LLM_AMX_ROWS)
		amx_blocks(w, tk, acc, LLM_AMX_ROWS, true);
	else if (!w->mins)			/* a last panel of fewer rows: a loop over them */
		amx_blocks(w, tk, acc, nr, false);
	else
		amx_blocks(w, tk, acc, nr, true);
	/* each row's sums over the tokens, transposed to each token's over the rows */
	for (int i = 0; i < 16; i++)
		r[i] = i < nr ? _mm512_castps_si512(amx_lane_sums(acc[i])) : _mm512_setzero_si512();
	llm_transpose16(r);
	for (int t = 0; t < nt; t++)
		_mm512_mask_storeu_ps(y + (size_t) t * ldy, (__mmask16) ((1u << nr) - 1), _mm512_castsi512_ps(r[t]));
}

/* This thread's buffer of packed token tiles (llm_amx_scratch), freed when the thread exits. */
static __thread uint8_t *scratch;
static __thread size_t scratch_bytes;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

/* Free a thread's buffer at its exit. */
static void
scratch_free(void *p)
{
	free(p);
}

/* Create the key whose destructor frees each thread's buffer. */
static void
scratch_key_init(void)
{
	(void) pthread_key_create(&scratch_key, scratch_free);
}

/* A 64-byte aligned buffer of at least bytes for this thread (matmul_amx.h). */
uint8_t *
llm_amx_scratch(size_t bytes)
{
	uint8_t    *p;

	if (bytes <= scratch_bytes)
		return scratch;
	pthread_once(&scratch_once, scratch_key_init);
	bytes = (bytes + 65535) & ~(size_t) 65535;
	if ((p = aligned_alloc(64, bytes)) == NULL || pthread_setspecific(scratch_key, p) != 0)
	{
		free(p);
		return NULL;
	}
	free(scratch);
	scratch = p;
	scratch_bytes = bytes;
	return p;
}

/* Hand the calling thread's tile state back (matmul_amx.h). */
void
llm_amx_release(void)
{
	_tile_release();
	config_nt = 0;
	config_rows = 0;
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else							/* not x86-64 with GCC or Clang: never called (no AMX found) */

void
llm_amx_pack_tokens(LlmAmxTokens *tk, uint8_t *buf, const uint8_t *x, size_t x_stride, int64_t k, int64_t nb, int nt,
					bool sums)
{
	(void) tk, (void) buf, (void) x, (void) x_stride, (void) k, (void) nb, (void) nt, (void) sums;
}

void
llm_amx_tiles(const LlmAmxRows *w, const LlmAmxTokens *tk, float *y, size_t ldy)
{
	(void) w, (void) tk, (void) y, (void) ldy;
}

uint8_t *
llm_amx_scratch(size_t bytes)
{
	(void) bytes;
	return NULL;
}

void
llm_amx_release(void)
{
}

#endif
