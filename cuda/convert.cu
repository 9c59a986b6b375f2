/*
 * convert.cu
 *		Weights and activations changing form: ggml Q8_0 / Q4_0 blocks split
 *		into the GEMV's aligned layout at upload, any layout decoded to
 *		bfloat16 for cuBLAS (or to float, on GPUs older than sm_80), rows of the embedding decoded (get_rows),
 *		activations rounded to bfloat16, and pseudo-random weights made on
 *		the device for the benchmark.
 */
#include "common.cuh"
#include "quant.cuh"

/* Split one ggml block (row r, block b) into quants and scale. */
__global__ void
split_blocks_kernel(CudaMat w, const uint8_t *__restrict__ src, int64_t row0, int64_t nrows)
{
	pdl_wait();
	pdl_launch_next();
	int64_t		nb = w.cols / 32;
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	bool		q8 = w.layout == CUDA_LAYOUT_Q8_0R;
	int			bytes = q8 ? 34 : 18;
	int			qbytes = q8 ? 32 : 16;
	const uint8_t *b;
	uint8_t    *dst;
	int64_t		r;

	if (i >= nrows * nb)
		return;
	r = i / nb;
	b = src + (size_t) r * nb * bytes + (i % nb) * bytes;
	dst = (uint8_t *) w.data + (size_t) (row0 + r) * w.row_bytes + (i % nb) * qbytes;
	for (int j = 0; j < qbytes; j++)
		dst[j] = b[2 + j];
	((uint16_t *) w.scales)[(row0 + r) * nb + i % nb] = (uint16_t) (b[0] | (b[1] << 8));
}

/* Split nrows rows of ggml blocks (src) into w's split layout from row row0. */
cudaError_t
llm_cuda_split_blocks(const CudaMat *w, const uint8_t *src, int64_t row0, int64_t nrows, cudaStream_t st)
{
	if ((w->layout != CUDA_LAYOUT_Q8_0R && w->layout != CUDA_LAYOUT_Q4_0R) || w->cols % 32 != 0)
		return cudaErrorInvalidValue;
	LLM_CHECK_DEV(w->data);
	LLM_CHECK_DEV(w->scales);
	LLM_CHECK_DEV(src);
	LLM_LAUNCH(split_blocks_kernel, grid_for(nrows * (w->cols / 32), 256), 256, 0, st, *w, src, row0, nrows);
	return cudaGetLastError();
}

/* Decode run c of row row0 + r into 32 bfloat16 (fewer at the end of an odd-width row). */
__global__ void
dequant_bf16_kernel(CudaMat w, int64_t row0, int64_t nrows, uint16_t *__restrict__ out)
{
	pdl_wait();
	pdl_launch_next();
	int64_t		nc = (w.cols + 31) / 32;
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	int64_t		r;
	int64_t		c;
	float		v[32];
	uint16_t   *o;

	if (i >= nrows * nc)
		return;
	r = i / nc;
	c = i % nc;
	decode32(w, row0 + r, c, v);
	o = out + (size_t) r * w.cols + c * 32;
	if (w.cols % 32 == 0)
	{
		uint32_t	p[16];

		for (int j = 0; j < 16; j++)
			p[j] = (uint32_t) f32_to_bf16(v[2 * j]) | ((uint32_t) f32_to_bf16(v[2 * j + 1]) << 16);
		for (int j = 0; j < 4; j++)
			((uint4 *) o)[j] = make_uint4(p[4 * j], p[4 * j + 1], p[4 * j + 2], p[4 * j + 3]);
	}
	else
		for (int j = 0; j < 32 && c * 32 + j < w.cols; j++)
			o[j] = f32_to_bf16(v[j]);
}

/* out (nrows, cols) bfloat16 = rows [row0, row0 + nrows) of w. */
cudaError_t
llm_cuda_dequant_bf16(const CudaMat *w, int64_t row0, int64_t nrows, uint16_t *out, cudaStream_t st)
{
	LLM_CHECK_DEV(w->data);
	LLM_CHECK_DEV(w->scales);
	LLM_CHECK_DEV(out);
	if (nrows < 1)
		return cudaSuccess;
	LLM_LAUNCH(dequant_bf16_kernel, grid_for(nrows * ((w->cols + 31) / 32), 256), 256, 0, st, *w, row0, nrows,
			   out);
	return cudaGetLastError();
}

/* Decode run c of row row0 + r into 32 floats (fewer at the end of an odd-width row). */
__global__ void
dequant_f32_kernel(CudaMat w, int64_t row0, int64_t nrows, float *__restrict__ out)
{
	pdl_wait();
	pdl_launch_next();
	int64_t		nc = (w.cols + 31) / 32;
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	float		v[32];
	float	   *o;

	if (i >= nrows * nc)
		return;
	decode32(w, row0 + i / nc, i % nc, v);
	o = out + (size_t) (i / nc) * w.cols + (i % nc) * 32;
	for (int j = 0; j < 32 && (i % nc) * 32 + j < w.cols; j++)
		o[j] = v[j];
}

/* out (nrows, cols) float = rows [row0, row0 + nrows) of w. */
cudaError_t
llm_cuda_dequant_f32(const CudaMat *w, int64_t row0, int64_t nrows, float *out, cudaStream_t st)
{
	LLM_CHECK_DEV(w->data);
	LLM_CHECK_DEV(w->scales);
	LLM_CHECK_DEV(out);
	if (nrows < 1)
		return cudaSuccess;
	LLM_LAUNCH(dequant_f32_kernel, grid_for(nrows * ((w->cols + 31) / 32), 256), 256, 0, st, *w, row0, nrows, out);
	return cudaGetLastError();
}

/* Row ids[blockIdx.x] of w, decoded and scaled. */
__global__ void
get_rows_kernel(CudaMat w, const int32_t *__restrict__ ids, float scale, float *__restrict__ out)
{
	pdl_wait();
	pdl_launch_next();
	int64_t		nc = (w.cols + 31) / 32;
	float	   *o = out + (size_t) blockIdx.x * w.cols;
	int64_t		r = ids[blockIdx.x];

	for (int64_t c = threadIdx.x; c < nc; c += blockDim.x)
	{
		float		v[32];

		decode32(w, r, c, v);
		for (int j = 0; j < 32 && c * 32 + j < w.cols; j++)
			o[c * 32 + j] = v[j] * scale;
	}
}

/* out (n, cols) = rows ids[i] of w times scale. */
cudaError_t
llm_cuda_get_rows(const CudaMat *w, const int32_t *ids, int n, float scale, float *out, cudaStream_t st)
{
	LLM_CHECK_DEV(w->data);
	LLM_CHECK_DEV(w->scales);
	LLM_CHECK_DEV(ids);
	LLM_CHECK_DEV(out);
	if (n < 1)
		return cudaSuccess;
	LLM_LAUNCH(get_rows_kernel, n, 128, 0, st, *w, ids, scale, out);
	return cudaGetLastError();
}

/* out (n) = x (n) as bfloat16. */
__global__ void
to_bf16_kernel(const float *__restrict__ x, int64_t n, uint16_t *__restrict__ out)
{
	pdl_wait();
	pdl_launch_next();
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
		out[i] = f32_to_bf16(x[i]);
}

/* out (n) bfloat16 = x (n). */
cudaError_t
llm_cuda_to_bf16(const float *x, int64_t n, uint16_t *out, cudaStream_t st)
{
	int64_t		blocks = (n + 255) / 256;

	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(out);
	LLM_LAUNCH(to_bf16_kernel, (unsigned) (blocks > 65536 ? 65536 : (blocks < 1 ? 1 : blocks)), 256, 0, st, x, n,
			   out);
	return cudaGetLastError();
}

/* 32 pseudo-random bits for index i under seed (splitmix64). */
static __device__ __forceinline__ uint32_t
hash32(uint64_t seed, uint64_t i)
{
	uint64_t	z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t) ((z ^ (z >> 31)) >> 32);
}

/* A value uniform in [-a, a) from 32 random bits. */
static __device__ __forceinline__ float
uniform(uint32_t bits, float a)
{
	return ((float) (bits >> 8) * (1.0f / 8388608.0f) - 1.0f) * a;
}

/* Fill w with values of standard deviation about std (uniform; the split layouts' scales follow). */
__global__ void
fill_random_kernel(CudaMat w, uint64_t seed, float std)
{
	pdl_wait();
	pdl_launch_next();
	int64_t		stride = (int64_t) gridDim.x * blockDim.x;
	int64_t		i0 = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	float		a = std * 1.7320508f;	/* uniform on [-a, a) has deviation a / sqrt(3) */
	int64_t		words = (int64_t) (w.rows * w.row_bytes / 4);

	/* the values (or quants), 4 bytes at a time */
	for (int64_t i = i0; i < words; i += stride)
	{
		uint32_t	h = hash32(seed, (uint64_t) i);
		uint32_t   *p = (uint32_t *) w.data + i;

		if (w.layout == CUDA_LAYOUT_F32)
			*p = __float_as_uint(uniform(h, a));
		else if (w.layout == CUDA_LAYOUT_BF16)
			*p = (uint32_t) f32_to_bf16(uniform(h, a)) |
				((uint32_t) f32_to_bf16(uniform(hash32(seed ^ 1, (uint64_t) i), a)) << 16);
		else if (w.layout == CUDA_LAYOUT_F16)
			*p = (uint32_t) f32_to_f16(uniform(h, a)) |
				((uint32_t) f32_to_f16(uniform(hash32(seed ^ 1, (uint64_t) i), a)) << 16);
		else if (w.layout == CUDA_LAYOUT_Q8_0R)
			*p = h & 0x7f7f7f7fu;	/* bytes in [0, 127]: the sign bit comes from below */
		else
			*p = h;				/* any nibbles */
		if (w.layout == CUDA_LAYOUT_Q8_0R)
			*p ^= (hash32(seed ^ 2, (uint64_t) i) & 0x80808080u);
	}
	/* the split layouts' scales: int8 quants have deviation ~73, nibbles - 8 ~4.6 */
	if (w.layout == CUDA_LAYOUT_Q8_0R || w.layout == CUDA_LAYOUT_Q4_0R)
		for (int64_t i = i0; i < w.rows * (w.cols / 32); i += stride)
			((uint16_t *) w.scales)[i] = f32_to_f16(std / (w.layout == CUDA_LAYOUT_Q8_0R ? 73.3f : 4.6f) *
													(0.75f + 0.5f * (float) (hash32(seed ^ 3, (uint64_t) i) >> 8) *
													 (1.0f / 16777216.0f)));
}

/* Fill w with pseudo-random values of about std. */
cudaError_t
llm_cuda_fill_random(const CudaMat *w, uint64_t seed, float std, cudaStream_t st)
{
	if (w->layout == CUDA_LAYOUT_GGML || (w->rows * w->row_bytes) % 4 != 0)
		return cudaErrorInvalidValue;
	LLM_CHECK_DEV(w->data);
	LLM_CHECK_DEV(w->scales);
	LLM_LAUNCH(fill_random_kernel, 132 * 16, 256, 0, st, *w, seed, std);
	return cudaGetLastError();
}
