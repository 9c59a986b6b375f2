/*
 * matmul.h
 *		Private: the CPU backend's fast matrix multiplication -- the kernel
 *		tables of each SIMD level, the activation formats they read, and the
 *		matmul ops built on them (backend_cpu.c puts those in the op tables).
 *
 * y (n, rows) = x (n, cols) times w transposed.  For float weights (F32,
 * F16, BF16) the kernels read x as given and multiply in float.  For the
 * quantized types x is first quantized, once per call, to int8 blocks
 * (as ggml does): the kernels then take integer dot products of weight and
 * activation quants and apply both scales per block.
 *
 * A kernel computes a rectangle of outputs (rows [r0, r1) for tokens
 * [t0, t1)) with a register tile of a few rows by a few tokens, so each
 * weight vector loaded is used for several tokens and each activation
 * vector for several rows; matmul.c cuts the rectangle into pool tasks.
 */
#ifndef LLM_CPU_MATMUL_H
#define LLM_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cpu/cpu_features.h"
#include "quant.h"

/* How a kernel wants the activations. */
typedef enum LlmActFormat
{
	LLM_ACT_F32,				/* the floats as given */
	LLM_ACT_Q8,					/* blocks of 32: int8 quants, one float scale */
	LLM_ACT_Q8G,				/* Q8 with the quants in the grouped types' order (llm_group_act) */
	LLM_ACT_Q8K,				/* blocks of 256: int8 quants, one float scale, int16 sums of 16 */
	LLM_ACT_Q8KI,				/* Q8K with each block's quants and sums in the K tiles' lane order */
	LLM_ACT_FORMATS
} LlmActFormat;

/*
 * Layout of one token's quantized activations (k values, a multiple of the
 * block size), each part starting on a 64-byte boundary:
 *   Q8:  int8 qs[k]; float d[k / 32]; int32 sums[k / 32]     x_i = d[i / 32] * qs[i],
 *                                                            sums[b] = sum of block b's quants
 *   Q8G: Q8's, with the quants of each group of blocks (quant.h's grouped
 *        types) in the grouped order, llm_group_act
 *   Q8K: int8 qs[k]; float d[k / 256]; int16 bsums[k / 16]  bsums[j] = sum of qs[16j .. 16j + 15]
 *   Q8KI: Q8K's values, with the 16 sub-blocks of 16 of each block of 256
 *        dealt out as the AVX-512 K tiles read them: quad s (4 quants) of
 *        sub-block LLM_Q8KI_ORDER[e] at bytes 64s + 4e of the block, and
 *        bsums[16b + e] the sum of sub-block LLM_Q8KI_ORDER[e].
 * Quants are in [-127, 127] with d = amax / 127 per block, rounded to
 * nearest even; a block holding a NaN or infinity gets d = NaN and zero
 * quants, so the NaN reaches the output.
 */

/*
 * The sub-block of 16 in lane e (e = 4L + i: sub-block 4i + L) of the K
 * tiles: the order in which a 4x4 transpose of dwords by unpacks leaves
 * them.  Its own inverse.
 */
#define LLM_Q8KI_ORDER 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15
#define LLM_ACT_ALIGN(n) ((((size_t) (n)) + 63) & ~(size_t) 63)

/* Offset of the scales d in a token's row. */
static inline size_t
llm_act_d_offset(int64_t k)
{
	return LLM_ACT_ALIGN(k);
}

/* Offset of the Q8 block sums in a token's row. */
static inline size_t
llm_act_sums_offset(int64_t k)
{
	return LLM_ACT_ALIGN(k) + LLM_ACT_ALIGN(sizeof(float) * (size_t) (k / LLM_QK));
}

/* Offset of the Q8K block sums in a token's row. */
static inline size_t
llm_act_bsums_offset(int64_t k)
{
	return LLM_ACT_ALIGN(k) + LLM_ACT_ALIGN(sizeof(float) * (size_t) (k / LLM_QK_K));
}

/* Bytes of one token's activations in format f (a multiple of 64). */
static inline size_t
llm_act_row_bytes(LlmActFormat f, int64_t k)
{
	switch (f)
	{
		case LLM_ACT_Q8:
		case LLM_ACT_Q8G:
			return llm_act_sums_offset(k) + LLM_ACT_ALIGN(sizeof(int32_t) * (size_t) (k / LLM_QK));
		case LLM_ACT_Q8K:
		case LLM_ACT_Q8KI:
			return llm_act_bsums_offset(k) + LLM_ACT_ALIGN(sizeof(int16_t) * (size_t) (k / 16));
		default:
			return LLM_ACT_ALIGN(sizeof(float) * (size_t) k);
	}
}

/* What a kernel is given: the whole problem; the rectangle comes separately. */
typedef struct LlmGemmArgs
{
	const uint8_t *w;			/* (rows, row_bytes) weights in their stored type */
	size_t		row_bytes;
	int64_t		k;				/* cols */
	const uint8_t *x;			/* (n, x_stride) activations in the kernel's format */
	size_t		x_stride;
	float	   *y;				/* (n, ldy) output */
	int64_t		ldy;			/* rows */
} LlmGemmArgs;

/* Compute y for rows [r0, r1) and tokens [t0, t1). */
typedef void (*LlmGemmFn) (const LlmGemmArgs *a, int64_t r0, int64_t r1, int t0, int t1);

/* Quantize one token's k activations into out (layout above). */
typedef void (*LlmActQuantFn) (const float *x, int64_t k, uint8_t *out);

/*
 * Run CALL(t, NT) over tokens [t0, t1) in tiles of NTV (at most 6), the
 * last one smaller (a switch, so each size is its own unrolled code): the
 * token loop of every level's kernels.
 */
#define TOKEN_TILES(CALL, NTV) \
	do { \
		int			t_ = t0; \
		for (; t_ + (NTV) <= t1; t_ += (NTV)) \
			CALL(t_, NTV); \
		switch (t1 - t_) \
		{ \
			case 5: if ((NTV) > 5) CALL(t_, 5); break; \
			case 4: if ((NTV) > 4) CALL(t_, 4); break; \
			case 3: if ((NTV) > 3) CALL(t_, 3); break; \
			case 2: if ((NTV) > 2) CALL(t_, 2); break; \
			case 1: if ((NTV) > 1) CALL(t_, 1); break; \
			default: break; \
		} \
	} while (0)

/* The kernels of one SIMD level. */
typedef struct LlmMatmulKernels
{
	const char *name;			/* "avx512" */
	LlmGemmFn	gemm[LLM_TYPE_COUNT];	/* by weight type; NULL: the scalar reference */
	LlmActFormat act[LLM_TYPE_COUNT];	/* the activations gemm[type] reads */
	LlmActQuantFn quant[LLM_ACT_FORMATS];	/* by format read; NULL for F32 and formats none reads */
} LlmMatmulKernels;

/* Defined in matmul_avx2.c and matmul_avx512.c (empty tables off x86-64). */
extern const LlmMatmulKernels llm_matmul_kernels_avx2;
extern const LlmMatmulKernels llm_matmul_kernels_avx512;

/*
 * The AVX-512 level's Q-type gemms on AMX's int8 tiles (matmul_avx512.c,
 * matmul_amx.h): matmul.c takes them instead of llm_matmul_kernels_avx512's
 * where llm_cpu_has_amx(), for calls of LLM_AMX_MIN_TOKENS tokens or more
 * on rows of whole groups of LLM_AMX_MIN_BLOCKS blocks or more (k >= 768),
 * where they were measured faster; the same bits.  (Sapphire Rapids Xeon,
 * 128 tokens: 1.2-1.6x the VNNI tiles from 768 columns, alone; at 512
 * columns, and under 16 tokens, slower.)  Off unless LLM_CPU_AMX=1: in a
 * whole prefill (bench/amx_prefill.sh: random 134M and 1.1B Q8_0 models,
 * SmolLM2) they measured 0.83-1.10x, their own time in a profile no shorter
 * than the VNNI tiles', for reasons not yet found.
 */
extern const LlmMatmulKernels llm_matmul_kernels_avx512_amx;
#define LLM_AMX_MIN_TOKENS 16
#define LLM_AMX_MIN_BLOCKS 24

/* Scalar reference activation quantizers (quantize_act.c); the SIMD ones match them exactly. */
void		llm_quantize_act_q8_ref(const float *x, int64_t k, uint8_t *out);
void		llm_quantize_act_q8g_ref(const float *x, int64_t k, uint8_t *out);
void		llm_quantize_act_q8k_ref(const float *x, int64_t k, uint8_t *out);
void		llm_quantize_act_q8ki_ref(const float *x, int64_t k, uint8_t *out);

/* The kernels of level isa; NULL for scalar or a level this processor lacks. */
const LlmMatmulKernels *llm_matmul_kernels(LlmCpuIsa isa);

/* y (n, rows) = x (n, cols) times w transposed, on kernels kern (matmul.c): the matmul op of a level. */
void		llm_cpu_matmul(LlmBackend *be, const LlmMatmulKernels *kern, const LlmWeight *w, const float *x, float *y,
						   int n);

/* y[i] = x w[i]^T for i < count, x quantized once (matmul.c): the matmul_multi op of a level. */
void		llm_cpu_matmul_multi(LlmBackend *be, const LlmMatmulKernels *kern, const LlmWeight *const *w,
								 const float *x, float *const *y, int count, int n);

/* y (n, rows) = x (n, cols) times w transposed on the scalar reference (ops_ref.c): w in any type. */
void		llm_cpu_matmul_ref(LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n);

#endif							/* LLM_CPU_MATMUL_H */
