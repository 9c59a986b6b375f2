/*
 * kv.cu
 *		Writes to the paged KV cache on the device: storing a step's keys and
 *		values in the cache's type (F32, F16, or INT8 with a scale per
 *		(slot, head) computed exactly as llm_quantize_i8 does, so the stored
 *		bytes equal the CPU's), and the slot moves of an eviction.
 *
 * A token's row in the pool is found as llm_kv_row does on the host:
 * ((layer * n_blocks + table[slot / block_size]) * block_size + slot % block_size).
 */
#include "common.cuh"

/* Row of slot of the token whose facts are t, in layer. */
static __device__ __forceinline__ int64_t
kv_row(const CudaKv &kv, int layer, const int32_t *t, const int32_t *blocks, int slot)
{
	int64_t		blk = blocks[t[CUDA_TOK_TABLE] + slot / kv.block_size];

	return ((int64_t) layer * kv.n_blocks + blk) * kv.block_size + slot % kv.block_size;
}

/* Store one head vector (hd floats) at dst in the cache's type; one warp; INT8's scale to *scale. */
static __device__ __forceinline__ void
store_head(const CudaKv &kv, const float *src, uint8_t *dst, float *scale)
{
	int			lane = threadIdx.x & 31;
	int			hd = kv.head_dim;

	if (kv.type == 0)
		for (int d = lane; d < hd; d += 32)
			((float *) dst)[d] = src[d];
	else if (kv.type == 1)
		for (int d = lane; d < hd; d += 32)
			((uint16_t *) dst)[d] = f32_to_f16(src[d]);
	else
	{
		float		amax = 0.0f;
		float		sc;
		float		id;

		for (int d = lane; d < hd; d += 32)
			amax = fmaxf(amax, fabsf(src[d]));
		amax = warp_max(amax);	/* max is exact: the same as the CPU's sequential fmaxf */
		sc = amax / 127.0f;
		id = sc != 0.0f ? 1.0f / sc : 0.0f;
		for (int d = lane; d < hd; d += 32)
		{
			float		q = roundf(src[d] * id);

			if (!(q >= -127.0f))
				q = isnan(q) ? 0.0f : -127.0f;
			else if (q > 127.0f)
				q = 127.0f;
			((int8_t *) dst)[d] = (int8_t) q;
		}
		if (lane == 0)
			*scale = sc;
	}
}

/* Token blockIdx.x, KV head blockIdx.y: its key and value to its slot. */
__global__ void
kv_store_kernel(CudaKv kv, int layer, const int32_t *__restrict__ tok, const int32_t *__restrict__ blocks,
				const float *__restrict__ k, const float *__restrict__ v)
{
	pdl_wait();
	pdl_launch_next();
	const int32_t *t = tok + (size_t) blockIdx.x * CUDA_TOK_FIELDS;
	int			h = blockIdx.y;
	int64_t		row = kv_row(kv, layer, t, blocks, t[CUDA_TOK_SLOT]);
	size_t		off = ((size_t) row * kv.kv_dim + (size_t) h * kv.head_dim) * kv.elem_size;
	size_t		src = (size_t) blockIdx.x * kv.kv_dim + (size_t) h * kv.head_dim;
	float	   *ks = kv.type == 2 ? kv.k_scale + (size_t) row * kv.n_kv_heads + h : nullptr;
	float	   *vs = kv.type == 2 ? kv.v_scale + (size_t) row * kv.n_kv_heads + h : nullptr;

	store_head(kv, k + src, kv.k + off, ks);
	store_head(kv, v + src, kv.v + off, vs);
}

/* Store k and v (n, kv_dim) of layer in each token's slot. */
cudaError_t
llm_cuda_kv_store(const CudaKv *kv, int layer, const int32_t *tok, const int32_t *blocks, const float *k,
				  const float *v, int n, cudaStream_t st)
{
	LLM_CHECK_DEV(kv->k);
	LLM_CHECK_DEV(kv->v);
	LLM_CHECK_DEV(kv->k_scale);
	LLM_CHECK_DEV(kv->v_scale);
	LLM_CHECK_DEV(tok);
	LLM_CHECK_DEV(blocks);
	LLM_CHECK_DEV(k);
	LLM_CHECK_DEV(v);
	if (n < 1)
		return cudaSuccess;
	LLM_LAUNCH(kv_store_kernel, dim3(n, kv->n_kv_heads), 32, 0, st, *kv, layer, tok, blocks, k, v);
	return cudaGetLastError();
}

/* Move blockIdx.x: one head's key and value (and INT8 scales) from one row to another. */
__global__ void
kv_move_kernel(CudaKv kv, const int32_t *__restrict__ moves)
{
	pdl_wait();
	pdl_launch_next();
	const int32_t *m = moves + (size_t) blockIdx.x * 4;
	int			h = m[1];
	size_t		head_bytes = (size_t) kv.head_dim * kv.elem_size;
	size_t		from = ((size_t) m[2] * kv.kv_dim) * kv.elem_size + h * head_bytes;
	size_t		to = ((size_t) m[3] * kv.kv_dim) * kv.elem_size + h * head_bytes;

	for (size_t b = threadIdx.x; b < head_bytes; b += blockDim.x)
	{
		kv.k[to + b] = kv.k[from + b];
		kv.v[to + b] = kv.v[from + b];
	}
	if (kv.type == 2 && threadIdx.x == 0)
	{
		kv.k_scale[(size_t) m[3] * kv.n_kv_heads + h] = kv.k_scale[(size_t) m[2] * kv.n_kv_heads + h];
		kv.v_scale[(size_t) m[3] * kv.n_kv_heads + h] = kv.v_scale[(size_t) m[2] * kv.n_kv_heads + h];
	}
}

/* Apply n moves (layer, head, from_row, to_row): sources and targets are disjoint (evict.c). */
cudaError_t
llm_cuda_kv_move(const CudaKv *kv, const int32_t *moves, int n, cudaStream_t st)
{
	LLM_CHECK_DEV(kv->k);
	LLM_CHECK_DEV(kv->v);
	LLM_CHECK_DEV(moves);
	if (n < 1)
		return cudaSuccess;
	LLM_LAUNCH(kv_move_kernel, n, 128, 0, st, *kv, moves);
	return cudaGetLastError();
}
