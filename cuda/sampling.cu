/*
 * sampling.cu
 *		Argmax and softmax over rows of logits, for sampling on the device:
 *		one block per row, with the sampler's total order (higher value
 *		first, lower index on equal values, NaN as -infinity), so greedy
 *		picks the same token as the host sampler.
 */
#include "common.cuh"

#define SAMPLE_THREADS 256

/* A value in the sampler's order: NaN counts as -infinity. */
static __device__ __forceinline__ float
order_value(float v)
{
	return v != v ? -INFINITY : v;
}

/* Whether (v, i) comes before (bv, bi): a larger value, or an equal one at a lower index. */
static __device__ __forceinline__ bool
better(float v, int i, float bv, int bi)
{
	return v > bv || (v == bv && i < bi);
}

/* The argmax of one row. */
__global__ void
argmax_kernel(const float *__restrict__ x, int width, int32_t *__restrict__ out)
{
	pdl_wait();
	pdl_launch_next();
	__shared__ float sv[32];
	__shared__ int si[32];
	const float *r = x + (size_t) blockIdx.x * width;
	float		bv = -INFINITY;
	int			bi = width;		/* no index yet: loses every tie */
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;

	for (int j = threadIdx.x; j < width; j += blockDim.x)
		if (better(order_value(r[j]), j, bv, bi))
		{
			bv = order_value(r[j]);
			bi = j;
		}
	for (int o = 16; o > 0; o >>= 1)
	{
		float		ov = __shfl_xor_sync(FULL_MASK, bv, o);
		int			oi = __shfl_xor_sync(FULL_MASK, bi, o);

		if (better(ov, oi, bv, bi))
		{
			bv = ov;
			bi = oi;
		}
	}
	if (lane == 0)
	{
		sv[warp] = bv;
		si[warp] = bi;
	}
	__syncthreads();
	if (warp == 0)
	{
		bv = lane < (int) (blockDim.x >> 5) ? sv[lane] : -INFINITY;
		bi = lane < (int) (blockDim.x >> 5) ? si[lane] : width;
		for (int o = 16; o > 0; o >>= 1)
		{
			float		ov = __shfl_xor_sync(FULL_MASK, bv, o);
			int			oi = __shfl_xor_sync(FULL_MASK, bi, o);

			if (better(ov, oi, bv, bi))
			{
				bv = ov;
				bi = oi;
			}
		}
		if (lane == 0)
			out[blockIdx.x] = bi < width ? bi : 0;	/* a row of only -inf and NaN: index 0 */
	}
}

/* out (n) = argmax of each row of x (n, width). */
cudaError_t
llm_cuda_argmax(const float *x, int n, int width, int32_t *out, cudaStream_t st)
{
	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(out);
	if (n < 1)
		return cudaSuccess;
	LLM_LAUNCH(argmax_kernel, n, SAMPLE_THREADS, 0, st, x, width, out);
	return cudaGetLastError();
}

/* Softmax of one row in place: exp(x - max) / sum; NaN and -inf get 0. */
__global__ void
softmax_kernel(float *x, int width)
{
	pdl_wait();
	pdl_launch_next();
	__shared__ float red[32];
	float	   *r = x + (size_t) blockIdx.x * width;
	float		m = -INFINITY;
	float		sum = 0.0f;

	for (int j = threadIdx.x; j < width; j += blockDim.x)
		m = fmaxf(m, order_value(r[j]));
	m = warp_max(m);
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = m;
	__syncthreads();
	m = (int) (threadIdx.x & 31) < (int) (blockDim.x >> 5) ? red[threadIdx.x & 31] : -INFINITY;
	m = warp_max(m);
	for (int j = threadIdx.x; j < width; j += blockDim.x)
	{
		float		v = order_value(r[j]);
		float		e = v == -INFINITY ? 0.0f : expf(v - m);

		r[j] = e;
		sum += e;
	}
	sum = block_sum(sum, red);
	for (int j = threadIdx.x; j < width; j += blockDim.x)
		r[j] = sum > 0.0f ? r[j] / sum : 0.0f;
}

/* x (n, width) = softmax of each row. */
cudaError_t
llm_cuda_softmax(float *x, int n, int width, cudaStream_t st)
{
	LLM_CHECK_DEV(x);
	if (n < 1)
		return cudaSuccess;
	LLM_LAUNCH(softmax_kernel, n, SAMPLE_THREADS, 0, st, x, width);
	return cudaGetLastError();
}
