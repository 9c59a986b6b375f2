/*
 * quant_ref.c
 *		Scalar reference dequantizers, dot product and quantizers (see quant.h).
 *
 * This is the oracle every fast kernel is tested against, so it is written
 * to be obviously right rather than fast: one function per block type,
 * decoding in the same order as ggml's dequantize_row_* (block layouts in
 * quant_blocks.h).  Every value is computed in float32 in ggml's order of
 * operations -- for the K types first scale = d * sc and offset = dmin * m,
 * then scale * q - offset -- so that results are bit-exact with ggml and
 * with the golden vectors in shared/golden/quant.  Where a product is
 * followed by an addition (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) the product is
 * exact in float -- an fp16 scale (11 significant bits) times a 6-bit scale
 * times a quant of at most 5 bits needs at most 22 -- so the result is the
 * same whether or not the compiler fuses multiply and add into an FMA.
 *
 * The quantizers follow ggml's quantize_row_*_ref: Q8_0 with d = amax / 127
 * and q = round(x / d); Q4_0 with d = max / -8 where max is the value of
 * largest magnitude, sign kept, and q = min(15, trunc(x / d + 8.5)).
 *
 * Callers pass n as a multiple of the type's block size; a trailing partial
 * block is ignored.  An unsupported type decodes as zeros, dots as zero and
 * quantizes to nothing (llm_type_can_quantize says which types can be
 * produced): the engine never aborts.
 */
#include "quant.h"
#include "quant_blocks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Decode nb F32 values (a copy). */
static void
dequant_f32(const void *src, float *dst, int64_t nb)
{
	memcpy(dst, src, (size_t) nb * sizeof(float));
}

/* Decode nb F16 values. */
static void
dequant_f16(const void *src, float *dst, int64_t nb)
{
	const uint8_t *p = src;

	for (int64_t i = 0; i < nb; i++)
	{
		uint16_t	h;

		memcpy(&h, p + 2 * i, sizeof(h));
		dst[i] = llm_fp16_to_fp32(h);
	}
}

/* Decode nb BF16 values. */
static void
dequant_bf16(const void *src, float *dst, int64_t nb)
{
	const uint8_t *p = src;

	for (int64_t i = 0; i < nb; i++)
	{
		uint16_t	h;

		memcpy(&h, p + 2 * i, sizeof(h));
		dst[i] = llm_bf16_to_fp32(h);
	}
}

/* Decode nb Q4_0 blocks: x = d * (nibble - 8). */
static void
dequant_q4_0(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ4_0 *b = src;

	for (int64_t i = 0; i < nb; i++, b++, dst += LLM_QK)
	{
		const float d = llm_fp16_to_fp32(b->d);

		for (int j = 0; j < LLM_QK / 2; j++)
		{
			const int	x0 = (b->qs[j] & 0xf) - 8;
			const int	x1 = (b->qs[j] >> 4) - 8;

			dst[j] = x0 * d;
			dst[j + LLM_QK / 2] = x1 * d;
		}
	}
}

/* Decode nb Q4_1 blocks: x = d * nibble + m. */
static void
dequant_q4_1(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ4_1 *b = src;

	for (int64_t i = 0; i < nb; i++, b++, dst += LLM_QK)
	{
		const float d = llm_fp16_to_fp32(b->d);
		const float m = llm_fp16_to_fp32(b->m);

		for (int j = 0; j < LLM_QK / 2; j++)
		{
			dst[j] = (b->qs[j] & 0xf) * d + m;
			dst[j + LLM_QK / 2] = (b->qs[j] >> 4) * d + m;
		}
	}
}

/* The 32 fifth bits of a Q5 block as one integer, bit j for value j. */
static uint32_t
q5_high_bits(const uint8_t *qh)
{
	return (uint32_t) qh[0] | ((uint32_t) qh[1] << 8) |
		((uint32_t) qh[2] << 16) | ((uint32_t) qh[3] << 24);
}

/* The 32 signed integers q - 16 of a Q5_0 block. */
static void
q5_0_ints(const LlmBlockQ5_0 *b, int8_t *q)
{
	const uint32_t qh = q5_high_bits(b->qh);

	for (int j = 0; j < LLM_QK / 2; j++)
	{
		const int	h0 = (qh >> j) & 1;
		const int	h1 = (qh >> (j + LLM_QK / 2)) & 1;

		q[j] = (int8_t) (((b->qs[j] & 0xf) | (h0 << 4)) - 16);
		q[j + LLM_QK / 2] = (int8_t) (((b->qs[j] >> 4) | (h1 << 4)) - 16);
	}
}

/* Decode nb Q5_0 blocks: x = d * (q - 16). */
static void
dequant_q5_0(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ5_0 *b = src;

	for (int64_t i = 0; i < nb; i++, b++, dst += LLM_QK)
	{
		const float d = llm_fp16_to_fp32(b->d);
		int8_t		q[LLM_QK];

		q5_0_ints(b, q);
		for (int j = 0; j < LLM_QK; j++)
			dst[j] = q[j] * d;
	}
}

/* Whether a row of type can be rewritten exactly as Q8_0 (llm_repack_q8_0). */
bool
llm_type_repacks_to_q8_0(LlmType type)
{
	return type == LLM_TYPE_Q5_0;
}

/*
 * Rewrite n values of type as Q8_0 blocks, exactly: the same fp16 scale and
 * the same integers (Q5_0's q - 16 lies in [-16, 15]), so kernels without a
 * Q5_0 path compute the same products.
 */
void
llm_repack_q8_0(LlmType type, const void *src, void *dst, int64_t n)
{
	const LlmBlockQ5_0 *b = src;
	LlmBlockQ8_0 *o = dst;

	if (type != LLM_TYPE_Q5_0)
		return;
	for (int64_t i = 0; i < n / LLM_QK; i++, b++, o++)
	{
		o->d = b->d;
		q5_0_ints(b, o->qs);
	}
}

/* Decode nb Q5_1 blocks: x = d * q + m. */
static void
dequant_q5_1(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ5_1 *b = src;

	for (int64_t i = 0; i < nb; i++, b++, dst += LLM_QK)
	{
		const float d = llm_fp16_to_fp32(b->d);
		const float m = llm_fp16_to_fp32(b->m);
		const uint32_t qh = q5_high_bits(b->qh);

		for (int j = 0; j < LLM_QK / 2; j++)
		{
			const int	h0 = (qh >> j) & 1;
			const int	h1 = (qh >> (j + LLM_QK / 2)) & 1;
			const int	x0 = (b->qs[j] & 0xf) | (h0 << 4);
			const int	x1 = (b->qs[j] >> 4) | (h1 << 4);

			dst[j] = x0 * d + m;
			dst[j + LLM_QK / 2] = x1 * d + m;
		}
	}
}

/* Decode nb Q8_0 blocks: x = d * q. */
static void
dequant_q8_0(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ8_0 *b = src;

	for (int64_t i = 0; i < nb; i++, b++, dst += LLM_QK)
	{
		const float d = llm_fp16_to_fp32(b->d);

		for (int j = 0; j < LLM_QK; j++)
			dst[j] = b->qs[j] * d;
	}
}

/* Decode nb Q2_K super-blocks: x = d * (sc & 15) * q - dmin * (sc >> 4). */
static void
dequant_q2_k(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ2_K *b = src;

	for (int64_t i = 0; i < nb; i++, b++)
	{
		const float d = llm_fp16_to_fp32(b->d);
		const float dmin = llm_fp16_to_fp32(b->dmin);
		const uint8_t *sc = b->scales;

		for (int h = 0; h < 2; h++)
		{
			const uint8_t *q = b->qs + 32 * h;

			for (int j = 0; j < 4; j++)
			{
				for (int s = 0; s < 2; s++)
				{
					const float scale = d * (*sc & 0xf);
					const float offset = dmin * (*sc >> 4);

					sc++;
					for (int l = 0; l < 16; l++)
						*dst++ = scale * ((q[16 * s + l] >> (2 * j)) & 3) - offset;
				}
			}
		}
	}
}

/* Decode nb Q3_K super-blocks: x = d * sc * (q - (hbit ? 0 : 4)). */
static void
dequant_q3_k(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ3_K *b = src;

	for (int64_t i = 0; i < nb; i++, b++)
	{
		const float d = llm_fp16_to_fp32(b->d);
		int			k = 0;		/* sub-block, 0 .. 15 */

		for (int h = 0; h < 2; h++)
		{
			const uint8_t *q = b->qs + 32 * h;

			for (int j = 0; j < 4; j++)
			{
				const int	mask = 1 << (4 * h + j);

				for (int s = 0; s < 2; s++, k++)
				{
					const float scale = d * llm_q3k_scale(k, b->scales);

					for (int l = 0; l < 16; l++)
					{
						const int	lo = (q[16 * s + l] >> (2 * j)) & 3;
						const int	hi = (b->hmask[16 * s + l] & mask) ? 0 : 4;

						*dst++ = scale * (lo - hi);
					}
				}
			}
		}
	}
}

/* Decode nb Q4_K super-blocks: x = d * sc * nibble - dmin * m. */
static void
dequant_q4_k(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ4_K *b = src;

	for (int64_t i = 0; i < nb; i++, b++)
	{
		const float d = llm_fp16_to_fp32(b->d);
		const float dmin = llm_fp16_to_fp32(b->dmin);

		for (int c = 0; c < 4; c++)
		{
			const uint8_t *q = b->qs + 32 * c;
			uint8_t		sc;
			uint8_t		m;
			float		scale0;
			float		offset0;
			float		scale1;
			float		offset1;

			llm_k4_scale_min(2 * c, b->scales, &sc, &m);
			scale0 = d * sc;
			offset0 = dmin * m;
			llm_k4_scale_min(2 * c + 1, b->scales, &sc, &m);
			scale1 = d * sc;
			offset1 = dmin * m;
			for (int l = 0; l < 32; l++)
				*dst++ = scale0 * (q[l] & 0xf) - offset0;
			for (int l = 0; l < 32; l++)
				*dst++ = scale1 * (q[l] >> 4) - offset1;
		}
	}
}

/* Decode nb Q5_K super-blocks: x = d * sc * q - dmin * m, q five bits. */
static void
dequant_q5_k(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ5_K *b = src;

	for (int64_t i = 0; i < nb; i++, b++)
	{
		const float d = llm_fp16_to_fp32(b->d);
		const float dmin = llm_fp16_to_fp32(b->dmin);

		for (int c = 0; c < 4; c++)
		{
			const uint8_t *q = b->qs + 32 * c;
			const int	bit0 = 1 << (2 * c);
			const int	bit1 = 1 << (2 * c + 1);
			uint8_t		sc;
			uint8_t		m;
			float		scale0;
			float		offset0;
			float		scale1;
			float		offset1;

			llm_k4_scale_min(2 * c, b->scales, &sc, &m);
			scale0 = d * sc;
			offset0 = dmin * m;
			llm_k4_scale_min(2 * c + 1, b->scales, &sc, &m);
			scale1 = d * sc;
			offset1 = dmin * m;
			for (int l = 0; l < 32; l++)
				*dst++ = scale0 * ((q[l] & 0xf) + ((b->qh[l] & bit0) ? 16 : 0)) - offset0;
			for (int l = 0; l < 32; l++)
				*dst++ = scale1 * ((q[l] >> 4) + ((b->qh[l] & bit1) ? 16 : 0)) - offset1;
		}
	}
}

/* Decode nb Q6_K super-blocks: x = d * scale * (q - 32), q six bits. */
static void
dequant_q6_k(const void *src, float *dst, int64_t nb)
{
	const LlmBlockQ6_K *b = src;

	for (int64_t i = 0; i < nb; i++, b++)
	{
		const float d = llm_fp16_to_fp32(b->d);

		for (int h = 0; h < 2; h++, dst += 128)
		{
			const uint8_t *ql = b->ql + 64 * h;
			const uint8_t *qh = b->qh + 32 * h;
			const int8_t *sc = b->scales + 8 * h;

			for (int l = 0; l < 32; l++)
			{
				const int	is = l / 16;
				const int	q0 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
				const int	q1 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
				const int	q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
				const int	q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;

				dst[l] = d * sc[is + 0] * q0;
				dst[l + 32] = d * sc[is + 2] * q1;
				dst[l + 64] = d * sc[is + 4] * q2;
				dst[l + 96] = d * sc[is + 6] * q3;
			}
		}
	}
}

/* The 64 kept-bits of a SPARSE24 block. */
static uint64_t
s24_mask(const LlmBlockS24 *b)
{
	uint64_t	m;

	memcpy(&m, b->mask, sizeof(m));
	return m;
}

/* Decode nb SPARSE24 blocks: x_j = d[j / 32] * (the next kept value, if j is kept and one is left) or 0. */
static void
dequant_s24(const void *src, float *dst, int64_t nb)
{
	const LlmBlockS24 *b = src;

	for (int64_t i = 0; i < nb; i++, b++, dst += LLM_QK_S24)
	{
		const uint64_t m = s24_mask(b);
		int			r = 0;

		for (int j = 0; j < LLM_QK_S24; j++)
		{
			int			q = 0;

			if ((m >> j) & 1)
				q = r < LLM_QK_S24 / 2 ? b->qs[r++] : 0;
			dst[j] = q * llm_fp16_to_fp32(b->d[j / LLM_QK]);
		}
	}
}

/* Decode n values (a multiple of the block size) of a row of type into dst. */
void
llm_dequant_row(LlmType type, const void *src, float *dst, int64_t n)
{
	const LlmTypeTraits *t = llm_type_traits(type);
	int64_t		nb;

	if (n <= 0)
		return;
	if (t == NULL)
	{
		memset(dst, 0, (size_t) n * sizeof(float));
		return;
	}
	nb = n / t->block_size;
	switch (type)
	{
		case LLM_TYPE_F32:
			dequant_f32(src, dst, nb);
			break;
		case LLM_TYPE_F16:
			dequant_f16(src, dst, nb);
			break;
		case LLM_TYPE_BF16:
			dequant_bf16(src, dst, nb);
			break;
		case LLM_TYPE_Q4_0:
			dequant_q4_0(src, dst, nb);
			break;
		case LLM_TYPE_Q4_1:
			dequant_q4_1(src, dst, nb);
			break;
		case LLM_TYPE_Q5_0:
			dequant_q5_0(src, dst, nb);
			break;
		case LLM_TYPE_Q5_1:
			dequant_q5_1(src, dst, nb);
			break;
		case LLM_TYPE_Q8_0:
			dequant_q8_0(src, dst, nb);
			break;
		case LLM_TYPE_Q2_K:
			dequant_q2_k(src, dst, nb);
			break;
		case LLM_TYPE_Q3_K:
			dequant_q3_k(src, dst, nb);
			break;
		case LLM_TYPE_Q4_K:
			dequant_q4_k(src, dst, nb);
			break;
		case LLM_TYPE_Q5_K:
			dequant_q5_k(src, dst, nb);
			break;
		case LLM_TYPE_Q6_K:
			dequant_q6_k(src, dst, nb);
			break;
		case LLM_TYPE_Q8_0_G:
		case LLM_TYPE_Q4_0_G:
		case LLM_TYPE_Q4_1_G:
		case LLM_TYPE_Q5_0_G:
		case LLM_TYPE_Q5_1_G:
		case LLM_TYPE_SPARSE24_G:
			llm_dequant_grouped(type, src, dst, n);
			break;
		case LLM_TYPE_SPARSE24:
			dequant_s24(src, dst, nb);
			break;
		default:
			memset(dst, 0, (size_t) n * sizeof(float));
			break;
	}
}

/*
 * Scalar reference dot product of a row of type with n floats, accumulated
 * in float: decode one block (or, for the one-value "blocks" of F32, F16 and
 * BF16, up to LLM_QK_K values) into a stack buffer, then multiply and add
 * value by value, in order.
 */
float
llm_dot_row_ref(LlmType type, const void *row, const float *x, int64_t n)
{
	const LlmTypeTraits *t = llm_type_traits(type);
	const uint8_t *src = row;
	const bool	grouped = llm_type_base(type) != type;
	float		buf[16 * LLM_QK];	/* a group of a grouped type; >= LLM_QK_K */
	float		sum = 0.0f;
	int64_t		chunk;

	if (t == NULL || n <= 0)
		return 0.0f;
	chunk = t->block_size == 1 ? LLM_QK_K : t->block_size;
	n -= n % t->block_size;
	for (int64_t i = 0, m; i < n; i += m)
	{
		m = n - i < chunk ? n - i : chunk;
		if (grouped)			/* a group decodes as a whole; a block of the tail is at least 32 values */
			m = llm_group_piece(i / LLM_QK, n / LLM_QK) * LLM_QK > t->block_size ?
				llm_group_piece(i / LLM_QK, n / LLM_QK) * LLM_QK : t->block_size;
		llm_dequant_row(type, src + llm_type_row_size(type, i), buf, m);
		for (int64_t j = 0; j < m; j++)
			sum += buf[j] * x[i + j];
	}
	return sum;
}

/* Whether llm_quantize_row can produce type (F32, F16, BF16, Q8_0, Q4_0, SPARSE24). */
bool
llm_type_can_quantize(LlmType type)
{
	switch (type)
	{
		case LLM_TYPE_F32:
		case LLM_TYPE_F16:
		case LLM_TYPE_BF16:
		case LLM_TYPE_Q8_0:
		case LLM_TYPE_Q4_0:
		case LLM_TYPE_SPARSE24:
			return true;
		default:
			return false;
	}
}

/* Encode n floats as int8 with scale d (q = round(x / d), clamped to [-127, 127]). */
static void
encode_i8(const float *src, float d, int8_t *dst, int64_t n)
{
	float		id = d != 0.0f ? 1.0f / d : 0.0f;

	for (int64_t j = 0; j < n; j++)
	{
		float		q = roundf(src[j] * id);

		/* |q| <= 127 when d covers the values; the clamp guards wider groups, NaN and infinity */
		if (!(q >= -127.0f))
			q = isnan(q) ? 0.0f : -127.0f;
		else if (q > 127.0f)
			q = 127.0f;
		dst[j] = (int8_t) q;
	}
}

/* Encode 32 floats as one Q8_0 block with scale d. */
static void
encode_q8_0_block(const float *src, float d, LlmBlockQ8_0 *dst)
{
	dst->d = llm_fp32_to_fp16(d);
	encode_i8(src, d, dst->qs, LLM_QK);
}

/* Encode 32 floats as one Q4_0 block with scale d (q = x / d + 8.5 truncated, clamped to [0, 15]). */
static void
encode_q4_0_block(const float *src, float d, LlmBlockQ4_0 *dst)
{
	float		id = d != 0.0f ? 1.0f / d : 0.0f;

	dst->d = llm_fp32_to_fp16(d);
	for (int j = 0; j < LLM_QK / 2; j++)
	{
		int			q[2];

		for (int k = 0; k < 2; k++)
		{
			float		v = src[j + k * LLM_QK / 2] * id + 8.5f;

			/* ggml: min(15, (int8_t) v); v >= 0.5 for finite input within the scale */
			q[k] = v >= 15.0f ? 15 : (v > 0.0f ? (int) v : 0);
		}
		dst->qs[j] = (uint8_t) (q[0] | (q[1] << 4));
	}
}

/* The largest magnitude among n floats. */
static float
abs_max(const float *src, int64_t n)
{
	float		amax = 0.0f;

	for (int64_t j = 0; j < n; j++)
		amax = fmaxf(amax, fabsf(src[j]));
	return amax;
}

/* Encode n floats as int8 with one float scale (amax / 127), returned; the INT8 KV cache's format. */
float
llm_quantize_i8(const float *src, int8_t *dst, int64_t n)
{
	float		d = abs_max(src, n) / 127.0f;

	encode_i8(src, d, dst, n);
	return d;
}

/* Q4_0's scale for n floats: the value of largest magnitude, sign kept (the first on ties), over -8. */
static float
q4_0_scale(const float *src, int64_t n)
{
	float		amax = 0.0f;
	float		max = 0.0f;

	for (int64_t j = 0; j < n; j++)
		if (amax < fabsf(src[j]))
		{
			amax = fabsf(src[j]);
			max = src[j];
		}
	return max / -8.0f;
}

/* Encode nb blocks of 32 floats as Q8_0 (ggml's quantize_row_q8_0_ref). */
static void
quantize_q8_0(const float *src, LlmBlockQ8_0 *dst, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, src += LLM_QK, dst++)
		encode_q8_0_block(src, abs_max(src, LLM_QK) / 127.0f, dst);
}

/* Encode nb blocks of 32 floats as Q4_0 (ggml's quantize_row_q4_0_ref). */
static void
quantize_q4_0(const float *src, LlmBlockQ4_0 *dst, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, src += LLM_QK, dst++)
		encode_q4_0_block(src, q4_0_scale(src, LLM_QK), dst);
}

/* INT8's scale for a row of n floats: amax / 127 as fp16 holds it, one fp16 step up if rounding lost range. */
static float
int8_channel_scale(const float *src, int64_t n)
{
	float		amax = abs_max(src, n);
	uint16_t	h = llm_fp32_to_fp16(amax / 127.0f);

	if (amax > 0.0f && amax / llm_fp16_to_fp32(h) > 127.49f)
		h++;
	return llm_fp16_to_fp32(h);
}

/*
 * Encode nb blocks of 64 floats as SPARSE24: magnitude pruning, then Q8_0's
 * int8.  Of each four values the two of largest magnitude are kept (the
 * first on ties), so a row already 2:4 -- at most two nonzeros in each
 * four -- keeps exactly its nonzeros.  Each half of 32 takes Q8_0's scale,
 * amax / 127, which the pruning never changes (a four's largest value is
 * kept), so a Q8_0 row pruned this way keeps its kept integers and scales.
 */
static void
quantize_s24(const float *src, LlmBlockS24 *dst, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, src += LLM_QK_S24, dst++)
	{
		float		kept[LLM_QK_S24 / 2];	/* the kept values, in order */
		uint64_t	m = 0;

		for (int g = 0; g < LLM_QK_S24 / 4; g++)
		{
			const float *v = src + 4 * g;
			int			a = 0,
						b = -1;

			/* a: the largest |v|, b: the next (both the first of equals) */
			for (int j = 1; j < 4; j++)
				if (fabsf(v[j]) > fabsf(v[a]))
					a = j;
			for (int j = 0; j < 4; j++)
				if (j != a && (b < 0 || fabsf(v[j]) > fabsf(v[b])))
					b = j;
			m |= ((uint64_t) 1 << (4 * g + a)) | ((uint64_t) 1 << (4 * g + b));
			kept[2 * g] = v[a < b ? a : b];
			kept[2 * g + 1] = v[a < b ? b : a];
		}
		memcpy(dst->mask, &m, sizeof(m));
		for (int h = 0; h < 2; h++)
		{
			float		d = abs_max(src + h * LLM_QK, LLM_QK) / 127.0f;

			dst->d[h] = llm_fp32_to_fp16(d);
			encode_i8(kept + h * LLM_QK / 2, d, dst->qs + h * LLM_QK / 2, LLM_QK / 2);
		}
	}
}

/*
 * INT8 per output channel: one scale per row (amax / 127), stored as Q8_0
 * blocks that all carry it, so the Q8_0 kernels serve it unchanged (the
 * price is a 2-byte scale per 32 values instead of 4 bytes per row).
 */
void
llm_quantize_row_int8_channel(const float *src, void *dst, int64_t n)
{
	float		d = int8_channel_scale(src, n);
	LlmBlockQ8_0 *o = dst;

	/* quantize with the scale exactly as the fp16 blocks hold it */
	for (int64_t i = 0; i < n / LLM_QK; i++)
		encode_q8_0_block(src + i * LLM_QK, d, o + i);
}

/*
 * INT4 in groups of g values along the input (g a multiple of 32): one
 * Q4_0-style scale per group, stored in each of the group's Q4_0 blocks.
 */
void
llm_quantize_row_int4_group(const float *src, void *dst, int64_t n, int g)
{
	LlmBlockQ4_0 *o = dst;

	for (int64_t g0 = 0; g0 < n; g0 += g)
	{
		int64_t		len = n - g0 < g ? n - g0 : g;
		float		d = q4_0_scale(src + g0, len);

		for (int64_t i = 0; i < len / LLM_QK; i++)
			encode_q4_0_block(src + g0 + i * LLM_QK, d, o + (g0 / LLM_QK) + i);
	}
}

/* Values that share one scale in a row of n under scheme s: the row (INT8) or the group. */
int64_t
llm_quant_scheme_group(LlmQuantScheme s, int64_t n)
{
	return s == LLM_QUANT_INT8 ? n : s == LLM_QUANT_INT4_G32 ? 32 : 128;
}

/* The scale scheme s stores for the n values of one group (fp16-exact). */
float
llm_quant_scheme_scale(LlmQuantScheme s, const float *src, int64_t n)
{
	if (s == LLM_QUANT_INT8)
		return int8_channel_scale(src, n);
	return llm_fp16_to_fp32(llm_fp32_to_fp16(q4_0_scale(src, n)));
}

/* x on scheme s's grid of scale d, rounded as the scheme's block encoder rounds. */
float
llm_quant_scheme_round(LlmQuantScheme s, float x, float d)
{
	float		id = d != 0.0f ? 1.0f / d : 0.0f;

	if (s == LLM_QUANT_INT8)
	{
		float		q = roundf(x * id);

		q = !(q >= -127.0f) ? (isnan(q) ? 0.0f : -127.0f) : q > 127.0f ? 127.0f : q;
		return q * d;
	}
	else
	{
		float		v = x * id + 8.5f;
		int			q = v >= 15.0f ? 15 : (v > 0.0f ? (int) v : 0);

		return (float) (q - 8) * d;
	}
}

/* Encode n floats into scheme s's blocks with the given scales (one per llm_quant_scheme_group values). */
void
llm_quantize_row_scheme_scaled(LlmQuantScheme s, const float *src, const float *scales, void *dst, int64_t n)
{
	int64_t		g = llm_quant_scheme_group(s, n);

	for (int64_t i = 0; i < n / LLM_QK; i++)
	{
		float		d = scales[i * LLM_QK / g];

		if (s == LLM_QUANT_INT8)
			encode_q8_0_block(src + i * LLM_QK, d, (LlmBlockQ8_0 *) dst + i);
		else
			encode_q4_0_block(src + i * LLM_QK, d, (LlmBlockQ4_0 *) dst + i);
	}
}

/* "none", "int8", "int4" (= int4_g128), "int4_g32", "int4_g128", any case; false for others. */
bool
llm_quant_scheme_parse(const char *name, LlmQuantScheme *out)
{
	static const struct
	{
		const char *name;
		LlmQuantScheme scheme;
	}			names[] = {
		{"none", LLM_QUANT_NONE}, {"int8", LLM_QUANT_INT8}, {"int4", LLM_QUANT_INT4_G128},
		{"int4_g32", LLM_QUANT_INT4_G32}, {"int4_g128", LLM_QUANT_INT4_G128},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(name, names[i].name) == 0)
		{
			*out = names[i].scheme;
			return true;
		}
	return false;
}

/* The name of a scheme, e.g. "int4_g128". */
const char *
llm_quant_scheme_name(LlmQuantScheme s)
{
	switch (s)
	{
		case LLM_QUANT_NONE:
			return "none";
		case LLM_QUANT_INT8:
			return "int8";
		case LLM_QUANT_INT4_G32:
			return "int4_g32";
		case LLM_QUANT_INT4_G128:
			return "int4_g128";
	}
	return "unknown";
}

/* The block type a scheme stores into (Q8_0 or Q4_0). */
LlmType
llm_quant_scheme_type(LlmQuantScheme s)
{
	return s == LLM_QUANT_INT8 ? LLM_TYPE_Q8_0 : LLM_TYPE_Q4_0;
}

/* Whether a row of n values can take the scheme. */
bool
llm_quant_scheme_fits(LlmQuantScheme s, int64_t n)
{
	return s != LLM_QUANT_NONE && n % (s == LLM_QUANT_INT4_G128 ? 128 : LLM_QK) == 0;
}

/* Quantize n floats into the scheme's blocks. */
void
llm_quantize_row_scheme(LlmQuantScheme s, const float *src, void *dst, int64_t n)
{
	if (s == LLM_QUANT_INT8)
		llm_quantize_row_int8_channel(src, dst, n);
	else if (s == LLM_QUANT_INT4_G32 || s == LLM_QUANT_INT4_G128)
		llm_quantize_row_int4_group(src, dst, n, s == LLM_QUANT_INT4_G32 ? 32 : 128);
}

/* Convert rows x cols values from type from to type to (or to a scheme's blocks); false when out of memory. */
bool
llm_convert_rows(LlmType from, const void *src, int64_t rows, int64_t cols,
				 LlmType to, LlmQuantScheme scheme, void *dst)
{
	size_t		in_row = llm_type_row_size(from, cols);
	size_t		out_row = llm_type_row_size(scheme != LLM_QUANT_NONE ? llm_quant_scheme_type(scheme) : to, cols);
	float	   *buf = malloc((size_t) cols * sizeof(float));

	if (buf == NULL)
		return false;
	for (int64_t r = 0; r < rows; r++)
	{
		llm_dequant_row(from, (const uint8_t *) src + (size_t) r * in_row, buf, cols);
		if (scheme != LLM_QUANT_NONE)
			llm_quantize_row_scheme(scheme, buf, (uint8_t *) dst + (size_t) r * out_row, cols);
		else
			llm_quantize_row(to, buf, (uint8_t *) dst + (size_t) r * out_row, cols);
	}
	free(buf);
	return true;
}

/* Encode n floats (a multiple of the block size) as type into dst, as ggml's reference quantizers do. */
void
llm_quantize_row(LlmType type, const float *src, void *dst, int64_t n)
{
	uint8_t    *p = dst;

	if (n <= 0)
		return;
	switch (type)
	{
		case LLM_TYPE_F32:
			memcpy(dst, src, (size_t) n * sizeof(float));
			break;
		case LLM_TYPE_F16:
			for (int64_t i = 0; i < n; i++)
			{
				uint16_t	h = llm_fp32_to_fp16(src[i]);

				memcpy(p + 2 * i, &h, sizeof(h));
			}
			break;
		case LLM_TYPE_BF16:
			for (int64_t i = 0; i < n; i++)
			{
				uint16_t	h = llm_fp32_to_bf16(src[i]);

				memcpy(p + 2 * i, &h, sizeof(h));
			}
			break;
		case LLM_TYPE_Q8_0:
			quantize_q8_0(src, dst, n / LLM_QK);
			break;
		case LLM_TYPE_Q4_0:
			quantize_q4_0(src, dst, n / LLM_QK);
			break;
		case LLM_TYPE_SPARSE24:
			quantize_s24(src, dst, n / LLM_QK_S24);
			break;
		default:
			break;
	}
}
