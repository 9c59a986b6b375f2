/*
 * quant.c
 *		Type traits and half-precision conversions (see quant.h).
 *
 * The block dequantizers, dot products and quantizers are in quant_ref.c.
 */
#include "quant.h"

#include <math.h>
#include <string.h>

static const LlmTypeTraits type_traits[LLM_TYPE_COUNT] = {
	[LLM_TYPE_F32] = {"F32", 1, 4},
	[LLM_TYPE_F16] = {"F16", 1, 2},
	[LLM_TYPE_Q4_0] = {"Q4_0", LLM_QK, 2 + LLM_QK / 2},
	[LLM_TYPE_Q4_1] = {"Q4_1", LLM_QK, 4 + LLM_QK / 2},
	[LLM_TYPE_Q5_0] = {"Q5_0", LLM_QK, 2 + 4 + LLM_QK / 2},
	[LLM_TYPE_Q5_1] = {"Q5_1", LLM_QK, 4 + 4 + LLM_QK / 2},
	[LLM_TYPE_Q8_0] = {"Q8_0", LLM_QK, 2 + LLM_QK},
	[LLM_TYPE_Q2_K] = {"Q2_K", LLM_QK_K, LLM_QK_K / 16 + LLM_QK_K / 4 + 4},
	[LLM_TYPE_Q3_K] = {"Q3_K", LLM_QK_K, LLM_QK_K / 8 + LLM_QK_K / 4 + 12 + 2},
	[LLM_TYPE_Q4_K] = {"Q4_K", LLM_QK_K, 4 + 12 + LLM_QK_K / 2},
	[LLM_TYPE_Q5_K] = {"Q5_K", LLM_QK_K, 4 + 12 + LLM_QK_K / 8 + LLM_QK_K / 2},
	[LLM_TYPE_Q6_K] = {"Q6_K", LLM_QK_K, LLM_QK_K / 2 + LLM_QK_K / 4 + LLM_QK_K / 16 + 2},
	[LLM_TYPE_BF16] = {"BF16", 1, 2},
	[LLM_TYPE_Q8_0_G] = {"Q8_0_G", LLM_QK, 2 + LLM_QK},
	[LLM_TYPE_Q4_0_G] = {"Q4_0_G", LLM_QK, 2 + LLM_QK / 2},
	[LLM_TYPE_Q4_1_G] = {"Q4_1_G", LLM_QK, 4 + LLM_QK / 2},
	[LLM_TYPE_Q5_0_G] = {"Q5_0_G", LLM_QK, 2 + 4 + LLM_QK / 2},
	[LLM_TYPE_Q5_1_G] = {"Q5_1_G", LLM_QK, 4 + 4 + LLM_QK / 2},
	[LLM_TYPE_SPARSE24] = {"SPARSE24", LLM_QK_S24, 4 + 8 + LLM_QK_S24 / 2},
	[LLM_TYPE_SPARSE24_G] = {"SPARSE24_G", LLM_QK_S24, 4 + 8 + LLM_QK_S24 / 2},
};

/* Traits of a supported type, or NULL for an unknown or unsupported one. */
const LlmTypeTraits *
llm_type_traits(int type)
{
	if (type < 0 || type >= LLM_TYPE_COUNT || type_traits[type].name == NULL)
		return NULL;
	return &type_traits[type];
}

/* Whether type is one a GGUF file may hold (a supported one, not an internal grouped type). */
bool
llm_type_is_file_type(int type)
{
	return llm_type_traits(type) != NULL && llm_type_base((LlmType) type) == (LlmType) type;
}

/* The id GGUF stores for type (ggml's number; ours for our own types). */
uint32_t
llm_type_file_id(LlmType type)
{
	return type == LLM_TYPE_SPARSE24 ? LLM_FILE_TYPE_SPARSE24 : (uint32_t) type;
}

/* The type a tensor's GGUF type id stands for, or -1 for an id that is no file type of ours. */
int
llm_type_from_file_id(uint32_t id)
{
	int			type = id == LLM_FILE_TYPE_SPARSE24 ? LLM_TYPE_SPARSE24 :
		id < (uint32_t) LLM_TYPE_COUNT && id != (uint32_t) LLM_TYPE_SPARSE24 ? (int) id : -1;

	return type >= 0 && llm_type_is_file_type(type) ? type : -1;
}

/* Bytes of a row of n values (n must be a multiple of the block size). */
size_t
llm_type_row_size(LlmType type, int64_t n)
{
	const LlmTypeTraits *t = llm_type_traits(type);

	return (size_t) (n / t->block_size) * (size_t) t->type_size;
}

/* IEEE binary16 to float, exactly (subnormals, infinities and NaN included). */
float
llm_fp16_to_fp32(uint16_t h)
{
	uint32_t	sign = (uint32_t) (h & 0x8000) << 16;
	uint32_t	exp = (h >> 10) & 0x1f;
	uint32_t	mant = h & 0x3ff;
	uint32_t	bits;
	float		f;

	if (exp == 0)
	{
		/* zero or subnormal: mant * 2^-24 */
		f = ldexpf((float) mant, -24);
		return sign ? -f : f;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (mant << 13);
	else
		bits = sign | ((exp + 112) << 23) | (mant << 13);
	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* float to IEEE binary16, rounding to nearest even; overflow gives infinity. */
uint16_t
llm_fp32_to_fp16(float f)
{
	uint32_t	bits;
	uint32_t	sign;
	uint32_t	abs;

	memcpy(&bits, &f, sizeof(bits));
	sign = (bits >> 16) & 0x8000;
	abs = bits & 0x7fffffffu;
	if (abs > 0x7f800000u)
		return (uint16_t) (sign | 0x7e00);	/* NaN */
	if (abs >= 0x477ff000u)
		return (uint16_t) (sign | 0x7c00);	/* rounds to or is infinity */
	if (abs < 0x38800000u)
	{
		/* result is subnormal or zero: round abs * 2^24 to an integer */
		float		a;
		float		r;

		memcpy(&a, &abs, sizeof(a));
		r = nearbyintf(a * 16777216.0f);
		return (uint16_t) (sign | (uint32_t) r);
	}
	else
	{
		uint32_t	mant = abs & 0x7fffff;
		uint32_t	exp = (abs >> 23) - 112;
		uint32_t	h = (exp << 10) | (mant >> 13);
		uint32_t	rest = mant & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
			h++;				/* may carry into the exponent, which is right */
		return (uint16_t) (sign | h);
	}
}

/* bfloat16 to float: the high half of a float. */
float
llm_bf16_to_fp32(uint16_t h)
{
	uint32_t	bits = (uint32_t) h << 16;
	float		f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* float to bfloat16, rounding to nearest even; NaN stays NaN. */
uint16_t
llm_fp32_to_bf16(float f)
{
	uint32_t	bits;

	memcpy(&bits, &f, sizeof(bits));
	if ((bits & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t) ((bits >> 16) | 0x40);
	bits += 0x7fff + ((bits >> 16) & 1);
	return (uint16_t) (bits >> 16);
}
