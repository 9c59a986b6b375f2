/*
 * emu.cpp
 *		Host-side half of the CUDA emulator (see emu.h): the block scheduler
 *		that runs kernels as fibers, and CPU stand-ins for the CUDA runtime
 *		and cuBLAS calls the backend makes.
 *
 * The stand-ins keep the real functions' contracts where a mistake would
 * otherwise only show on a GPU: launch limits (threads per block, grid
 * size), cuBLAS's leading-dimension rules, device memory poisoned with NaN
 * bytes when allocated, and a registry of device allocations so that the
 * launchers can check that every pointer they hand a kernel is device
 * memory (a host pointer there would work here and fault on a GPU).
 * Streams run in order at once; events read the host clock.
 *
 * Scheduling: the threads of one block are fibers, each resumed in turn
 * until it finishes or waits at a collective; a fiber waiting for a
 * barrier is resumed only once the barrier's generation has moved on.  A
 * round in which nothing can move is a deadlock (a collective that not
 * every thread reaches), reported as such; so is a shuffle that reads a
 * lane the block does not have (a block of part of a warp), which a GPU
 * leaves undefined.
 */
#include "emu.h"

#include <cublas_v2.h>

#include <map>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

#undef warpSize					/* a field of cudaDeviceProp here */

/*
 * Switching fibers.  On x86-64 a few instructions that keep only what the
 * ABI says a call preserves (glibc's swapcontext also saves the signal
 * mask with a system call, which made the emulator several times slower);
 * elsewhere swapcontext.
 */
#if defined(__x86_64__)
#define EMU_FAST_SWITCH 1
extern "C" void emu_switch(void **save_sp, void *new_sp);
__asm__(".text\n"
		".globl emu_switch\n"
		".type emu_switch, @function\n"
		"emu_switch:\n"
		"\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
		"\tmovq %rsp, (%rdi)\n"
		"\tmovq %rsi, %rsp\n"
		"\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
		"\tret\n"
		".size emu_switch, .-emu_switch\n");
#endif

namespace emu
{
	Thread	   *current;
	uint3		block_idx;
	dim3		block_dim;
	dim3		grid_dim;

	static const size_t STACK_BYTES = 256 * 1024;

	enum Wait
	{
		WAIT_NONE,
		WAIT_BLOCK,
		WAIT_WARP
	};

	struct Fiber
	{
		ucontext_t	ctx;
		void	   *sp;				/* saved stack pointer (fast switch) */
		Thread		t;
		char	   *stack;
		bool		done;
		Wait		wait;
		uint64_t	wait_gen;
		void	   *fake_stack;
	};

	struct Warp
	{
		uint64_t	gen;
		int			arrived;
		int			live;
		int			lanes;			/* threads of the block in this warp (32 but in a last, partial warp) */
		uint64_t	slot[2][32];
	};

	[[maybe_unused]] static ucontext_t sched_ctx;
	[[maybe_unused]] static void *sched_sp;
	static std::vector<Fiber *> &fibers = *new std::vector<Fiber *>();	/* never destroyed: stays reachable */
	static std::vector<Warp> warps;
	static Fiber *running;
	static const std::function<void()> *kernel;
	static unsigned char *smem_dyn;
	static uint64_t bar_gen;
	static int	bar_arrived;
	static int	n_live;
	static uint64_t events;
	[[maybe_unused]] static const void *sched_stack_bottom;
	[[maybe_unused]] static size_t sched_stack_size;
	static std::map<uintptr_t, size_t> device_blocks;
	static cudaError_t last_error = cudaSuccess;

	/* Switch from the running fiber back to the scheduler; finished: the fiber will not come back. */
	static void
	to_scheduler(bool finished)
	{
		Fiber	   *f = running;

#ifdef EMU_ASAN
		__sanitizer_start_switch_fiber(finished ? nullptr : &f->fake_stack, sched_stack_bottom,
									   sched_stack_size);
#endif
#ifdef EMU_FAST_SWITCH
		emu_switch(&f->sp, sched_sp);	/* a finished fiber never comes back here */
#else
		if (finished)
			return;				/* returning from the entry function goes to uc_link */
		swapcontext(&f->ctx, &sched_ctx);
#endif
#ifdef EMU_ASAN
		__sanitizer_finish_switch_fiber(f->fake_stack, &sched_stack_bottom, &sched_stack_size);
#endif
		current = &f->t;
	}

	/* The body of every fiber: the kernel, then leaving the block's collectives. */
	static void
	fiber_entry()
	{
		Fiber	   *f = running;
		Warp	   &w = warps[f->t.linear / 32];

#ifdef EMU_ASAN
		__sanitizer_finish_switch_fiber(nullptr, &sched_stack_bottom, &sched_stack_size);
#endif
		current = &f->t;
		(*kernel) ();
		f->done = true;
		n_live--;
		w.live--;
		events++;
		/* an exited thread no longer holds up a barrier */
		if (bar_arrived > 0 && bar_arrived >= n_live)
		{
			bar_gen++;
			bar_arrived = 0;
		}
		if (w.arrived > 0 && w.arrived >= w.live)
		{
			w.gen++;
			w.arrived = 0;
		}
		to_scheduler(true);
	}

	/* Resume fiber f until it waits or finishes. */
	static void
	resume(Fiber *f)
	{
#ifdef EMU_ASAN
		void	   *fake = nullptr;

		__sanitizer_start_switch_fiber(&fake, f->stack, STACK_BYTES);
#endif
		running = f;
#ifdef EMU_FAST_SWITCH
		emu_switch(&sched_sp, f->sp);
#else
		swapcontext(&sched_ctx, &f->ctx);
#endif
#ifdef EMU_ASAN
		__sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
	}

	/* Whether waiting fiber f may go on. */
	static bool
	ready(const Fiber *f)
	{
		if (f->wait == WAIT_BLOCK)
			return bar_gen != f->wait_gen;
		if (f->wait == WAIT_WARP)
			return warps[f->t.linear / 32].gen != f->wait_gen;
		return true;
	}

	/* Run one block to completion. */
	static void
	run_block(int n)
	{
		bar_gen = 0;
		bar_arrived = 0;
		n_live = n;
		warps.assign((size_t) (n + 31) / 32, Warp());
		for (int w = 0; w < (n + 31) / 32; w++)
			warps[w].live = warps[w].lanes = (w + 1) * 32 <= n ? 32 : n - w * 32;
		for (int i = 0; i < n; i++)
		{
			Fiber	   *f = fibers[i];

			f->done = false;
			f->wait = WAIT_NONE;
			f->t.linear = i;
			f->t.tid = make_uint3(i % block_dim.x, (i / block_dim.x) % block_dim.y,
								  i / (block_dim.x * block_dim.y));
#ifdef EMU_FAST_SWITCH
			{
				/* a stack that "returns" into fiber_entry as if it had been called */
				uintptr_t	top = ((uintptr_t) f->stack + STACK_BYTES) & ~(uintptr_t) 15;
				void	  **sp = (void **) top;

				*--sp = nullptr;	/* fiber_entry's return address: it never returns */
				*--sp = (void *) fiber_entry;
				for (int k = 0; k < 6; k++)
					*--sp = nullptr;	/* rbp, rbx, r12 .. r15 */
				f->sp = sp;
			}
#else
			getcontext(&f->ctx);
			f->ctx.uc_stack.ss_sp = f->stack;
			f->ctx.uc_stack.ss_size = STACK_BYTES;
			f->ctx.uc_link = &sched_ctx;
			makecontext(&f->ctx, fiber_entry, 0);
#endif
		}
		while (n_live > 0)
		{
			uint64_t	before = events;
			bool		moved = false;

			for (int i = 0; i < n; i++)
				if (!fibers[i]->done && ready(fibers[i]))
				{
					fibers[i]->wait = WAIT_NONE;
					resume(fibers[i]);
					moved = true;
				}
			if (!moved || (before == events && n_live > 0 && !moved))
			{
				fprintf(stderr, "cuda emulator: deadlock in block (%u, %u, %u): a collective not reached by every thread\n",
						block_idx.x, block_idx.y, block_idx.z);
				abort();
			}
		}
	}

	static long n_launches;

	/* Run f for every thread of every block. */
	void
	launch(dim3 grid, dim3 block, size_t dyn, const std::function<void()> &f)
	{
		int			n = (int) (block.x * block.y * block.z);

		n_launches++;
		if (getenv("LLM_CUDA_EMU_TRACE") != NULL)
			fprintf(stderr, "cuda emulator: launch %ld (%u,%u,%u) x (%u,%u,%u): %s\n", n_launches, grid.x, grid.y,
					grid.z, block.x, block.y, block.z, f.target_type().name());
		if (n < 1 || n > 1024 || block.z > 64 || grid.x < 1 || grid.y < 1 || grid.z < 1 ||
			grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u || dyn > 227 * 1024)
		{
			last_error = cudaErrorInvalidConfiguration;
			return;
		}
		while ((int) fibers.size() < n)
		{
			Fiber	   *fb = new Fiber();

			fb->stack = (char *) malloc(STACK_BYTES);
			fibers.push_back(fb);
		}
		kernel = &f;
		block_dim = block;
		grid_dim = grid;
		smem_dyn = (unsigned char *) malloc(dyn > 0 ? dyn : 1);
		memset(smem_dyn, 0xff, dyn);
		for (unsigned z = 0; z < grid.z; z++)
			for (unsigned y = 0; y < grid.y; y++)
				for (unsigned x = 0; x < grid.x; x++)
				{
					block_idx = make_uint3(x, y, z);
					run_block(n);
				}
		free(smem_dyn);
		smem_dyn = nullptr;
		current = nullptr;
	}

	/* The launch's dynamic shared memory. */
	unsigned char *
	dyn_smem()
	{
		return smem_dyn;
	}

	/* A block barrier. */
	void
	sync_block()
	{
		Fiber	   *f = running;

		events++;
		if (++bar_arrived >= n_live)
		{
			bar_gen++;
			bar_arrived = 0;
			return;
		}
		f->wait = WAIT_BLOCK;
		f->wait_gen = bar_gen;
		to_scheduler(false);
	}

	/* A warp collective: every live lane puts 8 bytes in, each takes lane src's. */
	uint64_t
	warp_exchange(uint64_t mine, int src)
	{
		Fiber	   *f = running;
		int			lane = f->t.linear & 31;
		Warp	   &w = warps[f->t.linear / 32];
		uint64_t	gen = w.gen;

		/* a lane the block does not have holds nothing defined on a GPU (here it would read 0) */
		if (src >= w.lanes)
		{
			fprintf(stderr, "cuda emulator: a warp shuffle in block (%u, %u, %u) reads lane %d of a warp of %d threads\n",
					block_idx.x, block_idx.y, block_idx.z, src, w.lanes);
			abort();
		}
		events++;
		w.slot[gen & 1][lane] = mine;
		if (++w.arrived >= w.live)
		{
			w.gen++;
			w.arrived = 0;
		}
		else
		{
			f->wait = WAIT_WARP;
			f->wait_gen = gen;
			to_scheduler(false);
		}
		return warps[f->t.linear / 32].slot[gen & 1][src];
	}

	/* Whether p lies inside (or just past) a device allocation. */
	bool
	is_device(const void *p)
	{
		uintptr_t	a = (uintptr_t) p;
		auto		it = device_blocks.upper_bound(a);

		if (it == device_blocks.begin())
			return false;
		--it;
		return a <= it->first + it->second;
	}

	/* A kernel was handed a pointer that is not device memory. */
	void
	not_device(const void *p, const char *what, const char *file, int line)
	{
		fprintf(stderr, "cuda emulator: %s:%d: %s = %p is not device memory\n", file, line, what, p);
		abort();
	}
}

using namespace emu;

/* ---- the CUDA runtime ---- */

extern "C"
{

/* Kernels launched so far (tests count the launches of a step). */
long
llm_cuda_emu_launches(void)
{
	return emu::n_launches;
}

/* One emulated device (LLM_CUDA_EMU_DEVICES=0: none, for the skip path). */
cudaError_t
cudaGetDeviceCount(int *count)
{
	const char *env = getenv("LLM_CUDA_EMU_DEVICES");

	*count = env != NULL ? atoi(env) : 1;
	return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

/* Only device 0 exists. */
cudaError_t
cudaSetDevice(int device)
{
	return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

/* The device is always 0. */
cudaError_t
cudaGetDevice(int *device)
{
	*device = 0;
	return cudaSuccess;
}

/* The emulated device's properties: an H200's shape, the CPU's speed. */
cudaError_t
cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "CUDA emulator on the CPU");
	p->totalGlobalMem = (size_t) 16 << 30;
	p->multiProcessorCount = 132;	/* an H200's: the launch heuristics (split-K) take the GPU's paths */
	p->major = 9;
	p->minor = 0;
	p->warpSize = 32;
	p->maxThreadsPerBlock = 1024;
	p->sharedMemPerBlock = 48 * 1024;
	p->sharedMemPerBlockOptin = 227 * 1024;
	p->l2CacheSize = 1 << 20;
	return cudaSuccess;
}

/* The few attributes anyone asks for. */
cudaError_t
cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	*value = 0;
	if (attr == cudaDevAttrMultiProcessorCount)
		*value = 132;
	else if (attr == cudaDevAttrComputeCapabilityMajor)
		*value = 9;
	else if (attr == cudaDevAttrMaxSharedMemoryPerBlockOptin)
		*value = 227 * 1024;
	return cudaSuccess;
}

/* The runtime version the headers are from. */
cudaError_t
cudaRuntimeGetVersion(int *v)
{
	*v = 13000;
	return cudaSuccess;
}

/* The driver version: as the runtime. */
cudaError_t
cudaDriverGetVersion(int *v)
{
	*v = 13000;
	return cudaSuccess;
}

/* Free and total device memory, nominal. */
cudaError_t
cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
	*free_bytes = (size_t) 8 << 30;
	*total = (size_t) 16 << 30;
	return cudaSuccess;
}

/* Device memory: host memory poisoned with NaN bytes, registered as device memory. */
cudaError_t
cudaMalloc(void **p, size_t bytes)
{
	*p = NULL;
	if (bytes > ((size_t) 16 << 30))
		return cudaErrorMemoryAllocation;	/* more than the emulated device holds */
	*p = malloc(bytes > 0 ? bytes : 1);
	if (*p == NULL)
		return cudaErrorMemoryAllocation;
	memset(*p, 0xff, bytes);	/* NaN in every float, like memory nobody wrote */
	device_blocks[(uintptr_t) *p] = bytes;
	return cudaSuccess;
}

/* Free device memory (an unknown pointer is an error, as on a GPU). */
cudaError_t
cudaFree(void *p)
{
	if (p == NULL)
		return cudaSuccess;
	if (device_blocks.erase((uintptr_t) p) != 1)
		return cudaErrorInvalidValue;
	free(p);
	return cudaSuccess;
}

/* Pinned host memory: plain host memory. */
cudaError_t
cudaMallocHost(void **p, size_t bytes)
{
	*p = malloc(bytes > 0 ? bytes : 1);
	return *p != NULL ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* Pinned host memory with flags: plain host memory. */
cudaError_t
cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
	return cudaMallocHost(p, bytes);
}

/* Free pinned host memory. */
cudaError_t
cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}

/* Copies in any direction are memmove here. */
cudaError_t
cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	if (bytes > 0)
		memmove(dst, src, bytes);
	return cudaSuccess;
}

/* Streams run in order at once: an asynchronous copy is a copy. */
cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
	return cudaMemcpy(dst, src, bytes, kind);
}

/* Fill device memory. */
cudaError_t
cudaMemset(void *p, int value, size_t bytes)
{
	memset(p, value, bytes);
	return cudaSuccess;
}

/* Fill device memory, in stream order (at once). */
cudaError_t
cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s)
{
	return cudaMemset(p, value, bytes);
}

/* A stream: a token, everything runs at once. */
cudaError_t
cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	*s = (cudaStream_t) malloc(16);
	return cudaSuccess;
}

/* A stream with default flags. */
cudaError_t
cudaStreamCreate(cudaStream_t *s)
{
	return cudaStreamCreateWithFlags(s, 0);
}

/* Free a stream token. */
cudaError_t
cudaStreamDestroy(cudaStream_t s)
{
	free((void *) s);
	return cudaSuccess;
}

/* Nothing is ever pending. */
cudaError_t
cudaStreamSynchronize(cudaStream_t s)
{
	return cudaSuccess;
}

/* Nothing is ever pending. */
cudaError_t
cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}

/* The last launch error (bad launch configurations), cleared. */
cudaError_t
cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

/* The last launch error, kept. */
cudaError_t
cudaPeekAtLastError(void)
{
	return last_error;
}

/* A message for the errors the emulator produces. */
const char *
cudaGetErrorString(cudaError_t e)
{
	switch (e)
	{
		case cudaSuccess:
			return "no error";
		case cudaErrorMemoryAllocation:
			return "out of memory";
		case cudaErrorInvalidConfiguration:
			return "invalid configuration argument";
		case cudaErrorNoDevice:
			return "no CUDA-capable device is detected";
		default:
			return "emulated error";
	}
}

/* The same as the message. */
const char *
cudaGetErrorName(cudaError_t e)
{
	return cudaGetErrorString(e);
}

/* Accept shared-memory limits a GPU would accept. */
cudaError_t
cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize && value > 227 * 1024)
		return cudaErrorInvalidValue;
	return cudaSuccess;
}

struct EmuEvent
{
	double		t;
};

/* An event: a host timestamp. */
cudaError_t
cudaEventCreate(cudaEvent_t *e)
{
	*e = (cudaEvent_t) new EmuEvent();
	return cudaSuccess;
}

/* Free an event. */
cudaError_t
cudaEventDestroy(cudaEvent_t e)
{
	delete (EmuEvent *) e;
	return cudaSuccess;
}

/* Record the host clock. */
cudaError_t
cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	((EmuEvent *) e)->t = ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
	return cudaSuccess;
}

/* Events are complete when recorded. */
cudaError_t
cudaEventSynchronize(cudaEvent_t e)
{
	return cudaSuccess;
}

/* Milliseconds between two events. */
cudaError_t
cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = (float) (((EmuEvent *) b)->t - ((EmuEvent *) a)->t);
	return cudaSuccess;
}

/* ---- cuBLAS ---- */

/* A cuBLAS handle: a token. */
cublasStatus_t
cublasCreate_v2(cublasHandle_t *h)
{
	*h = (cublasHandle_t) malloc(16);
	return CUBLAS_STATUS_SUCCESS;
}

/* Free a cuBLAS handle. */
cublasStatus_t
cublasDestroy_v2(cublasHandle_t h)
{
	free((void *) h);
	return CUBLAS_STATUS_SUCCESS;
}

/* Streams run at once: nothing to set. */
cublasStatus_t
cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
	return CUBLAS_STATUS_SUCCESS;
}

/* One math mode: plain float. */
cublasStatus_t
cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
	return CUBLAS_STATUS_SUCCESS;
}

/* No workspace is needed. */
cublasStatus_t
cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes)
{
	return CUBLAS_STATUS_SUCCESS;
}

/* The status's name. */
const char *
cublasGetStatusString(cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}

/* Element i of a matrix of type t as a float. */
static float
elem(const void *p, cudaDataType t, size_t i)
{
	uint16_t	h;

	switch (t)
	{
		case CUDA_R_32F:
			return ((const float *) p)[i];
		case CUDA_R_16BF:
			h = ((const uint16_t *) p)[i];
			return __uint_as_float((uint32_t) h << 16);
		case CUDA_R_16F:
			{
				uint32_t	s,
							e,
							m,
							bits;

				h = ((const uint16_t *) p)[i];
				s = (uint32_t) (h >> 15) << 31;
				e = (h >> 10) & 31;
				m = h & 1023;
				if (e == 31)
					bits = s | 0x7f800000u | (m << 13);
				else if (e != 0)
					bits = s | ((e + 112) << 23) | (m << 13);
				else
				{
					float		v = ldexpf((float) m, -24);

					return s ? -v : v;
				}
				return __uint_as_float(bits);
			}
		default:
			return NAN;
	}
}

/* Column-major C = alpha op(A) op(B) + beta C, checked as cuBLAS checks its arguments. */
cublasStatus_t
cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
			 const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
			 int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
			 cublasGemmAlgo_t algo)
{
	float		al = *(const float *) alpha;
	float		be = *(const float *) beta;

	if (m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) ||
		ldc < m || lda < 1 || ldb < 1 || ldc < 1 || ct != CUDA_R_32F || at != bt ||
		(compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!is_device(A) || !is_device(B) || !is_device(C))
		not_device(!is_device(A) ? A : !is_device(B) ? B : C, "a cublasGemmEx operand", __FILE__, __LINE__);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++)
		{
			float		sum = 0.0f;
			float	   *c = (float *) C + i + (size_t) j * ldc;

			for (int p = 0; p < k; p++)
			{
				float		a = elem(A, at, ta == CUBLAS_OP_N ? i + (size_t) p * lda : p + (size_t) i * lda);
				float		b = elem(B, bt, tb == CUBLAS_OP_N ? p + (size_t) j * ldb : j + (size_t) p * ldb);

				sum += a * b;
			}
			*c = al * sum + (be != 0.0f ? be * *c : 0.0f);
		}
	return CUBLAS_STATUS_SUCCESS;
}

}								/* extern "C" */
