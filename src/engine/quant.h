/*
 * quant.h
 *		Weight types: GGUF/ggml block layouts, scalar reference dequantizers,
 *		dot products and quantizers, and half-precision conversions.
 *
 * Everything here is the plain-C reference: the test oracle for every fast
 * kernel.  Block layouts follow ggml's (little-endian, packed):
 *   Q8_0  (32 values, 34 bytes): fp16 d; int8 qs[32];              x = d*q
 *   Q4_0  (32 values, 18 bytes): fp16 d; uint8 qs[16];             x = d*(nibble-8),
 *          low nibbles are values 0..15, high nibbles values 16..31
 *   Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K as in ggml-common.h.
 * and the engine's own SPARSE24 (2:4 sparse int8, 64 values in 44 bytes,
 * quant_blocks.h), which GGUF stores under an id of ours (llm_type_file_id).
 */
#ifndef LLM_QUANT_H
#define LLM_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* Tensor element types, numbered as ggml's (the values GGUF stores). */
typedef enum LlmType
{
	LLM_TYPE_F32 = 0,
	LLM_TYPE_F16 = 1,
	LLM_TYPE_Q4_0 = 2,
	LLM_TYPE_Q4_1 = 3,
	LLM_TYPE_Q5_0 = 6,
	LLM_TYPE_Q5_1 = 7,
	LLM_TYPE_Q8_0 = 8,
	LLM_TYPE_Q2_K = 10,
	LLM_TYPE_Q3_K = 11,
	LLM_TYPE_Q4_K = 12,
	LLM_TYPE_Q5_K = 13,
	LLM_TYPE_Q6_K = 14,
	LLM_TYPE_BF16 = 30,
	/* the CPU backend's own, never in a file or a model: rows grouped for the AVX-512 kernels (quant_groups.c) */
	LLM_TYPE_Q8_0_G = 40,
	LLM_TYPE_Q4_0_G = 41,
	LLM_TYPE_Q4_1_G = 42,
	LLM_TYPE_Q5_0_G = 43,
	LLM_TYPE_Q5_1_G = 44,
	/* the engine's own file types: in GGUF under LLM_FILE_TYPE_OWN + n (llm_type_file_id), not these numbers */
	LLM_TYPE_SPARSE24 = 45,
	/* the CPU backend's grouped SPARSE24 (quant_groups.c), like the grouped types above */
	LLM_TYPE_SPARSE24_G = 46,
	LLM_TYPE_COUNT = 47
} LlmType;

/*
 * The GGUF type id of the engine's first own type.  ggml numbers its types
 * densely from 0 (39 in 2025) and GGUF stores them as uint32; ours start at
 * 0x4C4D0000 ("LM"), far from any id ggml will reach, so a file of ours is
 * never misread as a ggml type and a reader without our types refuses it.
 */
#define LLM_FILE_TYPE_OWN 0x4C4D0000u
#define LLM_FILE_TYPE_SPARSE24 (LLM_FILE_TYPE_OWN + 1u)

#define LLM_QK 32				/* values per block of the Q4_0 .. Q8_0 types */
#define LLM_QK_K 256			/* values per super-block of the K types */
#define LLM_QK_S24 64			/* values per SPARSE24 block */

typedef struct LlmTypeTraits
{
	const char *name;			/* "Q8_0" */
	int			block_size;		/* values per block */
	int			type_size;		/* bytes per block */
} LlmTypeTraits;

/* Traits of a supported type, or NULL for an unknown or unsupported one. */
const LlmTypeTraits *llm_type_traits(int type);

/* Whether type is one a GGUF file may hold (a supported one, not an internal grouped type). */
bool		llm_type_is_file_type(int type);

/* The id GGUF stores for type (ggml's number; ours for our own types). */
uint32_t	llm_type_file_id(LlmType type);

/* The type a tensor's GGUF type id stands for, or -1 for an id that is no file type of ours. */
int			llm_type_from_file_id(uint32_t id);

/* Bytes of a row of n values (n must be a multiple of the block size). */
size_t		llm_type_row_size(LlmType type, int64_t n);

/* Half-precision conversions (IEEE binary16 with subnormals, inf, nan; bfloat16 round-to-nearest-even). */
float		llm_fp16_to_fp32(uint16_t h);
uint16_t	llm_fp32_to_fp16(float f);
float		llm_bf16_to_fp32(uint16_t h);
uint16_t	llm_fp32_to_bf16(float f);

/* Decode n values (a multiple of the block size) of a row of type into dst. */
void		llm_dequant_row(LlmType type, const void *src, float *dst, int64_t n);

/* Scalar reference dot product of a row of type with n floats, accumulated in float. */
float		llm_dot_row_ref(LlmType type, const void *row, const float *x, int64_t n);

/* Whether llm_quantize_row can produce type (F32, F16, BF16, Q8_0, Q4_0, SPARSE24). */
bool		llm_type_can_quantize(LlmType type);

/*
 * Encode n floats (a multiple of the block size) as type into dst, as
 * ggml's reference quantizers do; SPARSE24 by magnitude pruning to 2:4
 * (quant_ref.c).
 */
void		llm_quantize_row(LlmType type, const float *src, void *dst, int64_t n);

/* Encode n floats as int8 with one float scale (amax / 127), which it returns: x ~ q * scale. */
float		llm_quantize_i8(const float *src, int8_t *dst, int64_t n);

/*
 * Own quantization into standard block layouts (so the fast kernels serve
 * it): INT8 with one scale per row, as Q8_0 blocks sharing it; INT4 with one
 * scale per group of g values (g a multiple of 32), as Q4_0 blocks sharing it.
 */
void		llm_quantize_row_int8_channel(const float *src, void *dst_q8_0, int64_t n);
void		llm_quantize_row_int4_group(const float *src, void *dst_q4_0, int64_t n, int g);

/* Own quantization schemes (LlmQuantScheme, in types.h). */

/* "none", "int8", "int4" (= int4_g128), "int4_g32", "int4_g128", any case; false for others. */
bool		llm_quant_scheme_parse(const char *name, LlmQuantScheme *out);

/* The name of a scheme, e.g. "int4_g128". */
const char *llm_quant_scheme_name(LlmQuantScheme s);

/* The block type a scheme stores into (Q8_0 or Q4_0). */
LlmType		llm_quant_scheme_type(LlmQuantScheme s);

/* Quantize n floats (n a multiple of the scheme's group) into the scheme's blocks. */
void		llm_quantize_row_scheme(LlmQuantScheme s, const float *src, void *dst, int64_t n);

/* Values that share one scale in a row of n under scheme s: the row (INT8) or the group (32, 128). */
int64_t		llm_quant_scheme_group(LlmQuantScheme s, int64_t n);

/* The scale scheme s stores for the n values of one group, exactly as the fp16 blocks hold it. */
float		llm_quant_scheme_scale(LlmQuantScheme s, const float *src, int64_t n);

/* x on scheme s's grid of scale d (d times the stored integer), rounded as its blocks are encoded. */
float		llm_quant_scheme_round(LlmQuantScheme s, float x, float d);

/*
 * Encode n floats into scheme s's blocks with the given scales (n /
 * llm_quant_scheme_group of them, fp16-exact): GPTQ's output, whose values
 * already lie on those grids, is stored without moving them.
 */
void		llm_quantize_row_scheme_scaled(LlmQuantScheme s, const float *src, const float *scales, void *dst,
										   int64_t n);

/* Whether a row of n values can take the scheme (n a multiple of its group). */
bool		llm_quant_scheme_fits(LlmQuantScheme s, int64_t n);

/*
 * Convert rows x cols values from type from (rows of llm_type_row_size
 * bytes) to type to, or with a scheme (not NONE) to the scheme's type;
 * dst holds rows of the target's row size.  False when out of memory.
 */
bool		llm_convert_rows(LlmType from, const void *src, int64_t rows, int64_t cols,
							 LlmType to, LlmQuantScheme scheme, void *dst);

/* Whether a row of type can be rewritten exactly as Q8_0 (Q5_0 can). */
bool		llm_type_repacks_to_q8_0(LlmType type);

/* Rewrite n values of such a type as Q8_0 blocks with the same scales and integers. */
void		llm_repack_q8_0(LlmType type, const void *src, void *dst, int64_t n);

/*
 * The grouped types (quant_groups.c): a row of Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 with its
 * blocks rewritten 16 at a time into the AVX-512 kernels' order, the same
 * numbers in the same bytes per row.
 */

/* The grouped type of base (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, SPARSE24), or LLM_TYPE_COUNT when it has none. */
LlmType		llm_type_grouped(LlmType base);

/* The type a grouped type rewrites; any other type itself. */
LlmType		llm_type_base(LlmType type);

/* Blocks of a row of nb blocks that are grouped: 16 at a time, then 8 if at least 8 are left. */
int64_t		llm_group_blocks(int64_t nb);

/* Blocks of the piece of a row of nb blocks that starts at block b: its group (16 or 8), or one block. */
int64_t		llm_group_piece(int64_t b, int64_t nb);

/* Whether a SPARSE24 row of n values can be grouped: no four values of a half with more than two kept. */
bool		llm_s24_groupable(const void *row, int64_t n);

/* Rewrite a row of n values of base as its grouped type, or back (src and dst apart). */
void		llm_group_row(LlmType base, const void *src, void *dst, int64_t n);
void		llm_ungroup_row(LlmType type, const void *src, void *dst, int64_t n);

/* Decode n values of a row of a grouped type (llm_dequant_row calls it). */
void		llm_dequant_grouped(LlmType type, const void *src, float *dst, int64_t n);

/* Put the int8 quants of a row of nb activation blocks in the grouped types' order, in place. */
void		llm_group_act(int8_t *qs, int64_t nb);

#endif							/* LLM_QUANT_H */
