/*
 * emu.h
 *		Kernel-side half of the CUDA emulator: what a .cu file of cuda/ needs
 *		in order to compile as plain C++ (g++) and run on the CPU.
 *
 * There is no GPU where this project is developed and tested in CI, so the
 * CUDA backend's kernels are also built against this header and run, one
 * block at a time, by emu.cpp: each CUDA thread of a block is a fiber
 * (ucontext) on one OS thread, and every collective -- __syncthreads, a
 * warp shuffle, __syncwarp -- is a point where the fiber yields until all
 * the threads it waits for have arrived.  So indexing, block and warp
 * reductions, shared-memory tiling, the block formats and the host code
 * around the kernels all run for real against the CPU reference (under
 * AddressSanitizer, which catches out-of-bounds accesses to device
 * buffers); what it cannot show is timing, races between blocks (blocks run
 * one after another) and anything about the real memory system.
 *
 * Kernels keep to a small dialect for this: launches through LLM_LAUNCH,
 * dynamic shared memory through LLM_DYN_SMEM, no inline PTX, collectives
 * reached by every thread of the block (or warp), full-warp masks only.
 * __shared__ variables become function statics, shared by the fibers of
 * the one block that runs at a time.
 */
#ifndef LLM_CUDA_EMU_H
#define LLM_CUDA_EMU_H

#include <cuda_runtime_api.h>
#include <vector_types.h>
#include <vector_functions.h>

#include <functional>
#include <math.h>
#include <stdint.h>
#include <string.h>

#undef __device__
#undef __global__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __device__
#define __global__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace emu
{
	struct Thread
	{
		uint3		tid;			/* threadIdx */
		int			linear;			/* index in the block */
	};

	extern Thread *current;			/* the fiber running now */
	extern uint3 block_idx;
	extern dim3 block_dim;
	extern dim3 grid_dim;

	/* Run f once per thread of every block of grid, as one launch of a kernel. */
	void		launch(dim3 grid, dim3 block, size_t dyn_smem, const std::function<void()> &f);
	/* The launch's dynamic shared memory. */
	unsigned char *dyn_smem();
	/* Wait for every live thread of the block. */
	void		sync_block();
	/* Exchange 8 bytes with the lanes of the warp: returns what lane src put in. */
	uint64_t	warp_exchange(uint64_t mine, int src);
	/* Whether p lies inside memory from cudaMalloc (launchers check kernel pointers). */
	bool		is_device(const void *p);
	/* Report a pointer that is not device memory and stop the test program. */
	[[noreturn]] void not_device(const void *p, const char *what, const char *file, int line);
}

#define threadIdx (emu::current->tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define warpSize 32

/* __syncthreads: a block barrier. */
static inline void
__syncthreads()
{
	emu::sync_block();
}

/* __syncwarp: a barrier of the warp. */
static inline void
__syncwarp(unsigned mask = 0xffffffffu)
{
	(void) mask;
	emu::warp_exchange(0, 0);
}

/* Lane of the calling thread. */
static inline int
emu_lane()
{
	return emu::current->linear & 31;
}

/* __shfl_sync for any type of at most 8 bytes. */
template <typename T>
static inline T
__shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	uint64_t	raw = 0;
	T			out;

	(void) mask;
	(void) width;
	memcpy(&raw, &v, sizeof(T));
	raw = emu::warp_exchange(raw, src & 31);
	memcpy(&out, &raw, sizeof(T));
	return out;
}

/* __shfl_xor_sync: the value of lane (this lane ^ lane_mask). */
template <typename T>
static inline T
__shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	return __shfl_sync(mask, v, emu_lane() ^ lane_mask, width);
}

/* __shfl_down_sync: the value of lane (this lane + delta), or this lane's past the warp. */
template <typename T>
static inline T
__shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	int			src = emu_lane() + (int) delta;

	return __shfl_sync(mask, v, src < 32 ? src : emu_lane(), width);
}

/* Atomics: fibers share one OS thread, so a plain update is atomic. */
static inline float
atomicAdd(float *p, float v)
{
	float		old = *p;

	*p = old + v;
	return old;
}

/* atomicAdd on ints. */
static inline int
atomicAdd(int *p, int v)
{
	int			old = *p;

	*p = old + v;
	return old;
}

/* Loads through the read-only and streaming caches are plain loads here. */
/* A read-only-cache load: a plain load. */
template <typename T>
static inline T
__ldg(const T *p)
{
	return *p;
}

/* A streaming load: a plain load. */
template <typename T>
static inline T
__ldcs(const T *p)
{
	return *p;
}

/* Bit casts: float of unsigned bits. */
static inline float
__uint_as_float(unsigned u)
{
	float		f;

	memcpy(&f, &u, 4);
	return f;
}

/* The bits of a float. */
static inline unsigned
__float_as_uint(float f)
{
	unsigned	u;

	memcpy(&u, &f, 4);
	return u;
}

/* Float of int bits. */
static inline float
__int_as_float(int i)
{
	float		f;

	memcpy(&f, &i, 4);
	return f;
}

/* The bits of a float as an int. */
static inline int
__float_as_int(float f)
{
	int			i;

	memcpy(&i, &f, 4);
	return i;
}

/* Sum of the four signed byte products of a and b, plus c. */
static inline int
__dp4a(int a, int b, int c)
{
	for (int k = 0; k < 4; k++)
		c += (int) (int8_t) (a >> (8 * k)) * (int) (int8_t) (b >> (8 * k));
	return c;
}

/* 1 / sqrt(x). */
static inline float
rsqrtf(float x)
{
	return 1.0f / sqrtf(x);
}

/* a / b (the GPU's fast division). */
static inline float
__fdividef(float a, float b)
{
	return a / b;
}

#endif							/* LLM_CUDA_EMU_H */
