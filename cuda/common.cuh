/*
 * common.cuh
 *		Private: what every kernel file of the CUDA backend shares -- the
 *		dialect that also compiles for the CPU emulator (emu/emu.h), half
 *		precision conversions, warp reductions and vector loads.
 *
 * Launch with LLM_LAUNCH(kernel, grid, block, shared bytes, stream, args...)
 * (a kernel with template arguments goes in LLM_K(...)); take dynamic
 * shared memory with LLM_DYN_SMEM(name); check every device pointer a
 * launcher passes with LLM_CHECK_DEV (a no-op on the GPU, a guard against
 * host pointers in the emulator).
 */
#ifndef LLM_CUDA_COMMON_CUH
#define LLM_CUDA_COMMON_CUH

#ifdef LLM_CUDA_EMU
#include "emu/emu.h"
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#endif

#include <math.h>
#include <stdint.h>

#include "kernels.h"

#define LLM_K(...) __VA_ARGS__

#ifdef LLM_CUDA_EMU
#define LLM_LAUNCH(k, grid, block, smem, stream, ...) \
	emu::launch(dim3(grid), dim3(block), (smem), [=]() { k(__VA_ARGS__); })
#define LLM_DYN_SMEM(name) unsigned char *name = emu::dyn_smem()
#define LLM_CHECK_DEV(p) \
	do { \
		if ((p) != nullptr && !emu::is_device(p)) \
			emu::not_device((p), #p, __FILE__, __LINE__); \
	} while (0)
#else
#define LLM_LAUNCH(k, grid, block, smem, stream, ...) \
	llm_launch(k, dim3(grid), dim3(block), (size_t) (smem), (stream), __VA_ARGS__)
#define LLM_DYN_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#define LLM_CHECK_DEV(p) ((void) 0)

/*
 * Launch kernel k; with programmatic dependent launch on (sm_90,
 * llm_cuda_set_pdl), k may start while the kernel before it in the stream
 * finishes: every kernel waits for it (pdl_wait) before touching memory.
 */
template <typename... P, typename... A>
static inline void
llm_launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, A... args)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1];

	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = st;
	if (llm_cuda_pdl_on())
	{
		attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		attr[0].val.programmaticStreamSerializationAllowed = 1;
		cfg.attrs = attr;
		cfg.numAttrs = 1;
	}
	cudaLaunchKernelEx(&cfg, k, ((P) args)...);
}
#endif

/*
 * Programmatic dependent launch, the kernel's side: wait until the kernel
 * before it in the stream has finished and its writes are visible (the
 * first statement of every kernel, so reads and writes alike are ordered
 * as without it), and let the kernel after it start launching (once every
 * block has called it or exited).  No-ops before sm_90 and in the emulator.
 */
static __device__ __forceinline__ void
pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Let the next kernel in the stream start launching. */
static __device__ __forceinline__ void
pdl_launch_next(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

#define FULL_MASK 0xffffffffu

/* bfloat16 bits to float. */
static __device__ __forceinline__ float
bf16_to_f32(uint16_t h)
{
	return __uint_as_float((uint32_t) h << 16);
}

/* float to bfloat16 bits, rounding to nearest even (NaN stays NaN), as llm_fp32_to_bf16. */
static __device__ __forceinline__ uint16_t
f32_to_bf16(float f)
{
	uint32_t	bits = __float_as_uint(f);

	if ((bits & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t) ((bits >> 16) | 0x40);
	bits += 0x7fffu + ((bits >> 16) & 1);
	return (uint16_t) (bits >> 16);
}

/* IEEE half bits to float (exact). */
static __device__ __forceinline__ float
f16_to_f32(uint16_t h)
{
#ifdef LLM_CUDA_EMU
	uint32_t	sign = (uint32_t) (h & 0x8000) << 16;
	uint32_t	exp = (h >> 10) & 0x1f;
	uint32_t	mant = h & 0x3ff;

	if (exp == 0)
	{
		float		f = (float) mant * 5.9604644775390625e-8f;	/* mant * 2^-24 */

		return sign ? -f : f;
	}
	if (exp == 31)
		return __uint_as_float(sign | 0x7f800000u | (mant << 13));
	return __uint_as_float(sign | ((exp + 112) << 23) | (mant << 13));
#else
	return __half2float(__ushort_as_half(h));
#endif
}

/* float to IEEE half bits, rounding to nearest even, as llm_fp32_to_fp16. */
static __device__ __forceinline__ uint16_t
f32_to_f16(float f)
{
#ifdef LLM_CUDA_EMU
	uint32_t	bits = __float_as_uint(f);
	uint32_t	sign = (bits >> 16) & 0x8000;
	uint32_t	abs = bits & 0x7fffffffu;

	if (abs > 0x7f800000u)
		return (uint16_t) (sign | 0x7e00);
	if (abs >= 0x477ff000u)
		return (uint16_t) (sign | 0x7c00);
	if (abs < 0x38800000u)
		return (uint16_t) (sign | (uint32_t) rintf(__uint_as_float(abs) * 16777216.0f));
	{
		uint32_t	mant = abs & 0x7fffff;
		uint32_t	h = (((abs >> 23) - 112) << 10) | (mant >> 13);
		uint32_t	rest = mant & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
			h++;
		return (uint16_t) (sign | h);
	}
#else
	return __half_as_ushort(__float2half_rn(f));
#endif
}

/* Sum of v over the warp, in every lane. */
static __device__ __forceinline__ float
warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

/* Maximum of v over the warp, in every lane (NaN-free inputs). */
static __device__ __forceinline__ float
warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

/* Sum of v over a block of whole warps, in every thread; red holds 32 floats of shared memory. */
static __device__ __forceinline__ float
block_sum(float v, float *red)
{
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;
	int			n_warps = (blockDim.x + 31) >> 5;

	v = warp_sum(v);
	__syncthreads();			/* red may still be read from an earlier call */
	if (lane == 0)
		red[warp] = v;
	__syncthreads();
	v = lane < n_warps ? red[lane] : 0.0f;
	return warp_sum(v);
}

/* The smaller of two ints (min / max are not in the emulator's dialect). */
static __host__ __device__ __forceinline__ int
imin(int a, int b)
{
	return a < b ? a : b;
}

/* The larger of two ints. */
static __host__ __device__ __forceinline__ int
imax(int a, int b)
{
	return a > b ? a : b;
}

/* 16 bytes of weights, streamed: read once, kept out of L1 so the activations stay there. */
static __device__ __forceinline__ uint4
load_stream16(const void *p)
{
	return __ldcs((const uint4 *) p);
}

/* 16 bytes through the read-only cache. */
static __device__ __forceinline__ uint4
load_ro16(const void *p)
{
	return __ldg((const uint4 *) p);
}

/* Unsigned 16-bit value at p (2-byte aligned). */
static __device__ __forceinline__ uint16_t
load_u16(const uint8_t *p)
{
	return *(const uint16_t *) p;
}

/* GELU, tanh approximation (ops_ref.c's gelu_tanh). */
static __device__ __forceinline__ float
gelu_tanh(float x)
{
	return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* The gate's activation: 0 SiLU (ops_ref.c's expression), 1 GELU. */
static __device__ __forceinline__ float
gate_act(float g, int act)
{
	return act == 0 ? g / (1.0f + expf(-g)) : gelu_tanh(g);
}

/* The grid that covers n items with threads per block (at least one block). */
static inline unsigned
grid_for(int64_t n, int threads)
{
	int64_t		b = (n + threads - 1) / threads;

	return (unsigned) (b < 1 ? 1 : b);
}

#endif							/* LLM_CUDA_COMMON_CUH */
