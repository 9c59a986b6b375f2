/*
 * quant.cuh
 *		Private: decoding 32 consecutive weights of a row on the device, for
 *		every layout and ggml block type (the device twin of quant_ref.c).
 *
 * decode32(w, row, c, out) writes values 32c .. 32c + 31 of row; past the
 * row's end (float layouts of odd width) it writes zeros.  Each ggml type
 * follows its dequant_* function in quant_ref.c in the same order of float
 * operations, so the decoded values are bit-identical to the reference's
 * (block layouts in quant_blocks.h).  A chunk of a K type is one of the 8
 * runs of 32 values of its 256-value super-block.  Reads are byte and
 * 16-bit loads: ggml blocks are only 2-byte aligned.
 */
#ifndef LLM_CUDA_QUANT_CUH
#define LLM_CUDA_QUANT_CUH

#include "common.cuh"

/* ggml type numbers (LlmType). */
#define GGML_F32 0
#define GGML_F16 1
#define GGML_Q4_0 2
#define GGML_Q4_1 3
#define GGML_Q5_0 6
#define GGML_Q5_1 7
#define GGML_Q8_0 8
#define GGML_Q2_K 10
#define GGML_Q3_K 11
#define GGML_Q4_K 12
#define GGML_Q5_K 13
#define GGML_Q6_K 14
#define GGML_BF16 30

/* Values per block of a ggml quantized type (0 for others). */
static __host__ __device__ __forceinline__ int
ggml_block_values(int t)
{
	switch (t)
	{
		case GGML_Q4_0:
		case GGML_Q4_1:
		case GGML_Q5_0:
		case GGML_Q5_1:
		case GGML_Q8_0:
			return 32;
		case GGML_Q2_K:
		case GGML_Q3_K:
		case GGML_Q4_K:
		case GGML_Q5_K:
		case GGML_Q6_K:
			return 256;
		default:
			return 0;
	}
}

/* Bytes per block of a ggml quantized type (0 for others). */
static __host__ __device__ __forceinline__ int
ggml_block_bytes(int t)
{
	switch (t)
	{
		case GGML_Q4_0:
			return 18;
		case GGML_Q4_1:
			return 20;
		case GGML_Q5_0:
			return 22;
		case GGML_Q5_1:
			return 24;
		case GGML_Q8_0:
			return 34;
		case GGML_Q2_K:
			return 84;
		case GGML_Q3_K:
			return 110;
		case GGML_Q4_K:
			return 144;
		case GGML_Q5_K:
			return 176;
		case GGML_Q6_K:
			return 210;
		default:
			return 0;
	}
}

/* Q4_1: x = d * nibble + m (block: d, m, qs[16]). */
static __device__ __forceinline__ void
decode_q4_1(const uint8_t *b, float *out)
{
	float		d = f16_to_f32(load_u16(b));
	float		m = f16_to_f32(load_u16(b + 2));

	for (int j = 0; j < 16; j++)
	{
		out[j] = (b[4 + j] & 0xf) * d + m;
		out[j + 16] = (b[4 + j] >> 4) * d + m;
	}
}

/* The 32 fifth bits of a Q5 block. */
static __device__ __forceinline__ uint32_t
q5_high(const uint8_t *qh)
{
	return (uint32_t) qh[0] | ((uint32_t) qh[1] << 8) | ((uint32_t) qh[2] << 16) | ((uint32_t) qh[3] << 24);
}

/* Q5_0: x = d * (q - 16) (block: d, qh[4], qs[16]). */
static __device__ __forceinline__ void
decode_q5_0(const uint8_t *b, float *out)
{
	float		d = f16_to_f32(load_u16(b));
	uint32_t	qh = q5_high(b + 2);

	for (int j = 0; j < 16; j++)
	{
		int			x0 = ((b[6 + j] & 0xf) | (((qh >> j) & 1) << 4)) - 16;
		int			x1 = ((b[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;

		out[j] = (float) (int8_t) x0 * d;
		out[j + 16] = (float) (int8_t) x1 * d;
	}
}

/* Q5_1: x = d * q + m (block: d, m, qh[4], qs[16]). */
static __device__ __forceinline__ void
decode_q5_1(const uint8_t *b, float *out)
{
	float		d = f16_to_f32(load_u16(b));
	float		m = f16_to_f32(load_u16(b + 2));
	uint32_t	qh = q5_high(b + 4);

	for (int j = 0; j < 16; j++)
	{
		int			x0 = (b[8 + j] & 0xf) | (((qh >> j) & 1) << 4);
		int			x1 = (b[8 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4);

		out[j] = x0 * d + m;
		out[j + 16] = x1 * d + m;
	}
}

/* Q8_0 as ggml stores it: x = d * q (block: d, qs[32]). */
static __device__ __forceinline__ void
decode_q8_0(const uint8_t *b, float *out)
{
	float		d = f16_to_f32(load_u16(b));

	for (int j = 0; j < 32; j++)
		out[j] = (float) (int8_t) b[2 + j] * d;
}

/* Q4_0 as ggml stores it: x = d * (nibble - 8) (block: d, qs[16]). */
static __device__ __forceinline__ void
decode_q4_0(const uint8_t *b, float *out)
{
	float		d = f16_to_f32(load_u16(b));

	for (int j = 0; j < 16; j++)
	{
		out[j] = ((b[2 + j] & 0xf) - 8) * d;
		out[j + 16] = ((b[2 + j] >> 4) - 8) * d;
	}
}

/* Q2_K part p (values 32p ..): x = d * (sc & 15) * q - dmin * (sc >> 4) (scales[16], qs[64], d, dmin). */
static __device__ __forceinline__ void
decode_q2_k(const uint8_t *b, int p, float *out)
{
	float		d = f16_to_f32(load_u16(b + 80));
	float		dmin = f16_to_f32(load_u16(b + 82));
	int			h = p / 4;
	int			j = p % 4;

	for (int s = 0; s < 2; s++)
	{
		uint8_t		sc = b[8 * h + 2 * j + s];
		float		scale = d * (sc & 0xf);
		float		offset = dmin * (sc >> 4);

		for (int l = 0; l < 16; l++)
			out[16 * s + l] = scale * ((b[16 + 32 * h + 16 * s + l] >> (2 * j)) & 3) - offset;
	}
}

/* The signed 6-bit scale k of a Q3_K block (llm_q3k_scale). */
static __device__ __forceinline__ int
q3k_scale(int k, const uint8_t *q)
{
	int			lo = k < 8 ? (q[k] & 0xf) : (q[k - 8] >> 4);
	int			hi = (q[8 + (k & 3)] >> (2 * (k >> 2))) & 3;

	return (lo | (hi << 4)) - 32;
}

/* Q3_K part p: x = d * sc * (q - (hbit ? 0 : 4)) (hmask[32], qs[64], scales[12], d). */
static __device__ __forceinline__ void
decode_q3_k(const uint8_t *b, int p, float *out)
{
	float		d = f16_to_f32(load_u16(b + 108));
	int			h = p / 4;
	int			j = p % 4;
	int			mask = 1 << (4 * h + j);

	for (int s = 0; s < 2; s++)
	{
		float		scale = d * q3k_scale(8 * h + 2 * j + s, b + 96);

		for (int l = 0; l < 16; l++)
		{
			int			lo = (b[32 + 32 * h + 16 * s + l] >> (2 * j)) & 3;
			int			hi = (b[16 * s + l] & mask) ? 0 : 4;

			out[16 * s + l] = scale * (lo - hi);
		}
	}
}

/* The 6-bit scale and min of sub-block j of a Q4_K / Q5_K block (llm_k4_scale_min). */
static __device__ __forceinline__ void
k4_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
	if (j < 4)
	{
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	}
	else
	{
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Q4_K part p: x = d * sc * nibble - dmin * m (d, dmin, scales[12], qs[128]). */
static __device__ __forceinline__ void
decode_q4_k(const uint8_t *b, int p, float *out)
{
	float		d = f16_to_f32(load_u16(b));
	float		dmin = f16_to_f32(load_u16(b + 2));
	const uint8_t *q = b + 16 + 32 * (p / 2);
	int			shift = 4 * (p % 2);
	int			sc;
	int			m;
	float		scale;
	float		offset;

	k4_scale_min(p, b + 4, &sc, &m);
	scale = d * sc;
	offset = dmin * m;
	for (int l = 0; l < 32; l++)
		out[l] = scale * ((q[l] >> shift) & 0xf) - offset;
}

/* Q5_K part p: as Q4_K with a fifth bit from qh (d, dmin, scales[12], qh[32], qs[128]). */
static __device__ __forceinline__ void
decode_q5_k(const uint8_t *b, int p, float *out)
{
	float		d = f16_to_f32(load_u16(b));
	float		dmin = f16_to_f32(load_u16(b + 2));
	const uint8_t *qh = b + 16;
	const uint8_t *q = b + 48 + 32 * (p / 2);
	int			shift = 4 * (p % 2);
	int			sc;
	int			m;
	float		scale;
	float		offset;

	k4_scale_min(p, b + 4, &sc, &m);
	scale = d * sc;
	offset = dmin * m;
	for (int l = 0; l < 32; l++)
		out[l] = scale * (((q[l] >> shift) & 0xf) + ((qh[l] & (1 << p)) ? 16 : 0)) - offset;
}

/* Q6_K part p: x = d * scale * (q - 32) (ql[128], qh[64], scales[16] signed, d). */
static __device__ __forceinline__ void
decode_q6_k(const uint8_t *b, int p, float *out)
{
	float		d = f16_to_f32(load_u16(b + 208));
	int			h = p / 4;
	int			g = p % 4;
	const uint8_t *ql = b + 64 * h + 32 * (g & 1);
	const uint8_t *qh = b + 128 + 32 * h;
	const int8_t *sc = (const int8_t *) (b + 192) + 8 * h + 2 * g;
	int			shift = g < 2 ? 0 : 4;

	for (int l = 0; l < 32; l++)
	{
		int			q = (((ql[l] >> shift) & 0xf) | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;

		out[l] = d * sc[l / 16] * q;
	}
}

/* Values 32c .. 32c + 31 of row r of w (zeros past the end). */
static __device__ __forceinline__ void
decode32(const CudaMat &w, int64_t r, int64_t c, float *out)
{
	const uint8_t *row = w.data + (size_t) r * w.row_bytes;
	int64_t		c0 = c * 32;

	switch (w.layout)
	{
		case CUDA_LAYOUT_F32:
		case CUDA_LAYOUT_F16:
		case CUDA_LAYOUT_BF16:
			for (int j = 0; j < 32; j++)
			{
				int64_t		k = c0 + j;

				if (k >= w.cols)
					out[j] = 0.0f;
				else if (w.layout == CUDA_LAYOUT_F32)
					out[j] = ((const float *) row)[k];
				else if (w.layout == CUDA_LAYOUT_F16)
					out[j] = f16_to_f32(((const uint16_t *) row)[k]);
				else
					out[j] = bf16_to_f32(((const uint16_t *) row)[k]);
			}
			return;
		case CUDA_LAYOUT_Q8_0R:
			{
				float		d = f16_to_f32(w.scales[r * (w.cols / 32) + c]);
				const int8_t *q = (const int8_t *) row + c0;

				for (int j = 0; j < 32; j++)
					out[j] = (float) q[j] * d;
				return;
			}
		case CUDA_LAYOUT_Q4_0R:
			{
				float		d = f16_to_f32(w.scales[r * (w.cols / 32) + c]);
				const uint8_t *q = row + c * 16;

				for (int j = 0; j < 16; j++)
				{
					out[j] = ((q[j] & 0xf) - 8) * d;
					out[j + 16] = ((q[j] >> 4) - 8) * d;
				}
				return;
			}
		default:
			{
				int			bv = ggml_block_values(w.ggml_type);
				int64_t		blk = c0 / (bv > 0 ? bv : 32);
				const uint8_t *b = row + blk * ggml_block_bytes(w.ggml_type);
				int			p = (int) ((c0 % (bv > 0 ? bv : 32)) / 32);

				switch (w.ggml_type)
				{
					case GGML_Q4_0:
						decode_q4_0(b, out);
						return;
					case GGML_Q4_1:
						decode_q4_1(b, out);
						return;
					case GGML_Q5_0:
						decode_q5_0(b, out);
						return;
					case GGML_Q5_1:
						decode_q5_1(b, out);
						return;
					case GGML_Q8_0:
						decode_q8_0(b, out);
						return;
					case GGML_Q2_K:
						decode_q2_k(b, p, out);
						return;
					case GGML_Q3_K:
						decode_q3_k(b, p, out);
						return;
					case GGML_Q4_K:
						decode_q4_k(b, p, out);
						return;
					case GGML_Q5_K:
						decode_q5_k(b, p, out);
						return;
					case GGML_Q6_K:
						decode_q6_k(b, p, out);
						return;
					default:
						for (int j = 0; j < 32; j++)
							out[j] = 0.0f;
						return;
				}
			}
	}
}

#endif							/* LLM_CUDA_QUANT_CUH */
