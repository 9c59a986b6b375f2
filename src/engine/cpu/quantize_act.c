/*
 * quantize_act.c
 *		Scalar reference quantizers of activations for the integer matmul
 *		kernels (formats in matmul.h).
 *
 * As ggml's quantize_row_q8_0 / q8_K: per block, d = amax / 127 and
 * q = round(x / d), computed as x * (1 / d) and rounded to nearest even --
 * exactly what the SIMD quantizers compute with cvtps2dq, so they agree
 * bit for bit and the kernels can be tested against this code.  The error
 * of each value is at most d / 2 = amax / 254 (no value is clamped: |x| *
 * (1 / d) <= 127 within a few ulps).
 */
#include "cpu/matmul.h"

#include <math.h>
#include <string.h>

/* Quantize n (<= 256) values with one scale into q; the scale, NaN if any value is not finite. */
static float
quantize_block(const float *x, int n, int8_t *q)
{
	float		amax = 0.0f;
	float		d;
	float		id;

	for (int i = 0; i < n; i++)
	{
		if (!isfinite(x[i]))
		{
			memset(q, 0, (size_t) n);
			return NAN;
		}
		amax = fmaxf(amax, fabsf(x[i]));
	}
	d = amax / 127.0f;
	id = d != 0.0f ? 1.0f / d : 0.0f;
	for (int i = 0; i < n; i++)
		q[i] = (int8_t) nearbyintf(x[i] * id);
	return d;
}

/* Quantize one token's k activations to LLM_ACT_Q8 (blocks of 32, with their sums). */
void
llm_quantize_act_q8_ref(const float *x, int64_t k, uint8_t *out)
{
	int8_t	   *qs = (int8_t *) out;
	float	   *d = (float *) (out + llm_act_d_offset(k));
	int32_t    *sums = (int32_t *) (out + llm_act_sums_offset(k));

	for (int64_t b = 0; b < k / LLM_QK; b++)
	{
		int32_t		s = 0;

		d[b] = quantize_block(x + b * LLM_QK, LLM_QK, qs + b * LLM_QK);
		for (int i = 0; i < LLM_QK; i++)
			s += qs[b * LLM_QK + i];
		sums[b] = s;
	}
}

/* Quantize one token's k activations to LLM_ACT_Q8G: Q8's, the groups' quants in the grouped order. */
void
llm_quantize_act_q8g_ref(const float *x, int64_t k, uint8_t *out)
{
	llm_quantize_act_q8_ref(x, k, out);
	llm_group_act((int8_t *) out, k / LLM_QK);
}

/* Quantize one token's k activations to LLM_ACT_Q8K (blocks of 256 with sums of 16). */
void
llm_quantize_act_q8k_ref(const float *x, int64_t k, uint8_t *out)
{
	int8_t	   *qs = (int8_t *) out;
	float	   *d = (float *) (out + llm_act_d_offset(k));
	int16_t    *bsums = (int16_t *) (out + llm_act_bsums_offset(k));

	for (int64_t b = 0; b < k / LLM_QK_K; b++)
	{
		int8_t	   *q = qs + b * LLM_QK_K;

		d[b] = quantize_block(x + b * LLM_QK_K, LLM_QK_K, q);
		for (int j = 0; j < LLM_QK_K / 16; j++)
		{
			int			s = 0;

			for (int i = 0; i < 16; i++)
				s += q[16 * j + i];
			bsums[b * (LLM_QK_K / 16) + j] = (int16_t) s;
		}
	}
}

/* Quantize one token's k activations to LLM_ACT_Q8KI: LLM_ACT_Q8K's, each block's sub-blocks dealt out to their lanes. */
void
llm_quantize_act_q8ki_ref(const float *x, int64_t k, uint8_t *out)
{
	static const int order[16] = {LLM_Q8KI_ORDER};
	int8_t	   *qs = (int8_t *) out;
	int16_t    *bsums = (int16_t *) (out + llm_act_bsums_offset(k));

	llm_quantize_act_q8k_ref(x, k, out);
	for (int64_t b = 0; b < k / LLM_QK_K; b++)
	{
		int8_t		q[LLM_QK_K];
		int16_t		s[16];

		memcpy(q, qs + b * LLM_QK_K, sizeof(q));
		memcpy(s, bsums + 16 * b, sizeof(s));
		for (int e = 0; e < 16; e++)
		{
			for (int st = 0; st < 4; st++)
				memcpy(qs + b * LLM_QK_K + 64 * st + 4 * e, q + 16 * order[e] + 4 * st, 4);
			bsums[16 * b + e] = s[order[e]];
		}
	}
}
