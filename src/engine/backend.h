/*
 * backend.h
 *		The backend interface: a table of the operations the forward pass
 *		needs.  The forward pass calls nothing else, so a backend (the CPU's
 *		scalar reference, its SIMD variants, CUDA) is a new table.
 *
 * All activations are row-major float arrays: a batch of n tokens of width
 * d is (n, d).  The CPU backend spreads every op over its thread pool.
 *
 * A backend with device_memory (CUDA) keeps activations in its own memory:
 * the forward pass allocates them with alloc, and its logits reach the
 * caller through to_host.  Such a backend may run ops asynchronously; sync
 * waits for them and reports the first failure, naming the call.
 */
#ifndef LLM_BACKEND_H
#define LLM_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "kv.h"
#include "model.h"
#include "threadpool.h"

typedef struct LlmBackend LlmBackend;

/*
 * What attention needs for a batch of n query tokens.  Token i of sequence
 * seq[i] at position pos[i] is in slot pos[i] - seq[i]->n_evicted and sees
 * the slots before it and itself (kv.h): all of them until the sequence's
 * first eviction, and, on a sliding-window layer, only those whose position
 * (slot == position before any eviction, else slot_pos) is within window.
 * When seq[i]->score is set, attention adds to the score of every key the
 * softmax probability each query head gave it (H2O; GQA: summed over the
 * query heads of the key's group).
 */
typedef struct LlmAttnArgs
{
	int			n;				/* query tokens */
	const float *q;				/* (n, n_heads * head_dim), after RoPE */
	float	   *out;			/* (n, n_heads * head_dim) */
	LlmKvSeq *const *seq;		/* (n) each token's sequence */
	const int32_t *pos;			/* (n) each token's position; it sees positions [lo, pos] */
	int			n_heads;
	int			n_kv_heads;
	int			head_dim;
	float		scale;			/* multiplies q.k */
	float		softcap;		/* 0 = off, else scores become softcap * tanh(s / softcap) */
	int			window;			/* 0 = all positions, else lo = pos - window + 1 */
} LlmAttnArgs;

typedef struct LlmBackendOps
{
	const char *name;
	/* make model m's weights usable (upload them); NULL when nothing is needed */
	LlmStatus	(*prepare) (LlmBackend *be, const LlmModel *m, LlmError *err);
	/* y (n, w->rows) = x (n, w->cols) times w transposed, w in its stored type */
	void		(*matmul) (LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n);
	/* out (n, dim) = rows ids of w as floats, times scale */
	void		(*get_rows) (LlmBackend *be, const LlmWeight *w, const int32_t *ids, int n,
							 float scale, float *out);
	/* y (n, dim) = x / rms(x) * w, or * (1 + w) with add_one; y may be x */
	void		(*rmsnorm) (LlmBackend *be, const float *x, const float *w, float *y, int n,
							int dim, float eps, bool add_one);
	/* rotate the first rope_dim values of each head of x (n, n_heads * head_dim) by pos */
	void		(*rope) (LlmBackend *be, float *x, const int32_t *pos, int n, int n_heads,
						 int head_dim, int rope_dim, const float *inv_freq, LlmRopeMode mode);
	/* store k and v (n, kv_dim) of layer in the slot of (seq[i], pos[i]); with slot_info, note pos and a zero score */
	void		(*kv_store) (LlmBackend *be, LlmKvCache *kv, int layer, LlmKvSeq *const *seq,
							 const int32_t *pos, const float *k, const float *v, int n);
	/* fused attention over the paged cache of layer (one pass, online softmax) */
	void		(*attention) (LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a);
	/* apply n key/value moves between slots of seq (the compaction of an eviction, kv.h) */
	void		(*kv_move) (LlmBackend *be, LlmKvCache *kv, const LlmKvSeq *seq, const LlmKvMove *moves, int n);
	/* out (n) = act(gate) * up */
	void		(*glu) (LlmBackend *be, const float *gate, const float *up, float *out, int64_t n,
						LlmActivation act);
	/* x (n) += y (n) */
	void		(*add) (LlmBackend *be, float *x, const float *y, int64_t n);
	/* x (n, width) += b (width, host) on every row; NULL: the backend refuses models with biases at prepare */
	void		(*add_bias) (LlmBackend *be, float *x, const float *b, int n, int width);

	/*
	 * Optional fused ops.  Each may be NULL; the forward pass reaches them
	 * through llm_be_* (below), which then composes the ops above in the
	 * order each comment gives.  A backend fills one in to save launches
	 * or passes over memory (CUDA: cuda/fused.c), falling back to its own
	 * primitives where the fusion does not apply.  Every buffer is distinct
	 * unless a comment says otherwise.
	 */
	/* y[i] (n, w[i]->rows) = x (n, cols) w[i]^T, i < count (Q, K, V): matmul of each in turn */
	void		(*matmul_multi) (LlmBackend *be, const LlmWeight *const *w, const float *x, float *const *y,
								 int count, int n);
	/* gate (n, rows) = act(x Wg^T) * (x Wu^T), up (n, rows) scratch: matmul Wg, matmul Wu, glu into gate */
	void		(*matmul_glu) (LlmBackend *be, const LlmWeight *w_gate, const LlmWeight *w_up, const float *x,
							   float *gate, float *up, int n, LlmActivation act);
	/* x (n, dim) += r; y (n, dim) = rmsnorm(x) as rmsnorm does it: add, then rmsnorm */
	void		(*add_rmsnorm) (LlmBackend *be, float *x, const float *r, const float *w, float *y, int n, int dim,
								float eps, bool add_one);
	/* rope of q (n, n_heads * head_dim), then of k (n, n_kv_heads * head_dim), at the same positions */
	void		(*rope_qk) (LlmBackend *be, float *q, int n_heads, float *k, int n_kv_heads, const int32_t *pos,
							int n, int head_dim, int rope_dim, const float *inv_freq, LlmRopeMode mode);

	/*
	 * Memory and results.  The activations the forward pass hands to the ops
	 * above live in the backend's memory (device memory on a GPU); index
	 * arrays (ids, pos), block tables, slot_pos and H2O scores stay in host
	 * memory, and host copies of results are complete after sync.
	 */
	/* bytes of backend memory; NULL when out of memory */
	void	   *(*alloc) (LlmBackend *be, size_t bytes);
	/* give back memory from alloc; NULL is allowed */
	void		(*free) (LlmBackend *be, void *p);
	/* copy bytes from backend memory src to host memory dst; done on return */
	void		(*to_host) (LlmBackend *be, void *dst, const void *src, size_t bytes);
	/* copy bytes from host memory src to backend memory dst; src may be reused on return */
	void		(*to_device) (LlmBackend *be, void *dst, const void *src, size_t bytes);
	/* out (n, width) = rows idx[i] (host, n) of x (rows, width) */
	void		(*gather_rows) (LlmBackend *be, const float *x, const int32_t *idx, int n, int width,
								float *out);
	/* x (n) = cap * tanh(x / cap) */
	void		(*softcap) (LlmBackend *be, float *x, int64_t n, float cap);
	/* out (n, host) = index of the largest value of each row of x (n, width): lowest on ties, NaN as -inf */
	void		(*argmax) (LlmBackend *be, const float *x, int n, int width, int32_t *out);
	/* x (n, width) = softmax of each row, in place (NaN and -inf get 0) */
	void		(*softmax) (LlmBackend *be, float *x, int n, int width);
	/* wait for every op issued so far; the first error since the last sync, naming the failing call */
	LlmStatus	(*sync) (LlmBackend *be, LlmError *err);
	/* release the backend's own resources and be itself; NULL: the CPU's teardown */
	void		(*destroy) (LlmBackend *be);
} LlmBackendOps;

struct LlmBackend
{
	const LlmBackendOps *ops;
	LlmPool    *pool;			/* compute threads (CPU backends) */
	bool		device_storage; /* the KV pool's keys and values live in the backend (LlmKvParams) */
	bool		device_memory;	/* activations live in memory only the backend reads (alloc, to_host) */
	/*
	 * From LlmBackendOptions at creation: give every token the bits it gets
	 * alone, whatever else is in the call (the CPU kernels always do; the
	 * CUDA backend then routes every matmul through its GEMV kernels, 8
	 * tokens at a time, and every token's attention through the decode
	 * kernel in one key range).
	 */
	bool		deterministic;
	/* set by llm_backend_new(): what computes ("cpu (avx512)", "cuda: NVIDIA H100 ..."), and why */
	char		device[128];
	char		device_note[256];	/* llm_backend_new with LLM_DEVICE_AUTO on the CPU: why not a GPU */
};

/*
 * How to create a backend (llm_backend_new).  The CUDA switches exist to
 * compare and to localise a fault: results agree either way (test_cuda).
 */
typedef struct LlmBackendOptions
{
	int			n_threads;		/* CPU: compute threads */
	int			device_index;	/* CUDA: which GPU (0: the first) */
	bool		deterministic;	/* every token gets the bits it gets alone (LlmBackend) */
	bool		fuse;			/* CUDA: the fused ops (cuda/fused.c); off: the primitives one by one */
	/*
	 * CUDA: kernels launch as programmatic dependents of the one before
	 * (sm_90 and newer, where the device takes it).  One switch for the
	 * process: the backend created last sets it.
	 */
	bool		pdl;
	bool		fp32_gemm;		/* CUDA, tests only: cuBLAS on weights decoded to float (the pre-sm_80 path) */
	const char *cuda_module;	/* path of the CUDA backend module (llm_cuda.so); NULL: none (cuda_module.c) */
} LlmBackendOptions;

/* Defaults: 1 thread, not deterministic, fusion and programmatic dependent launch on, no FP32 GEMM. */
void		llm_backend_options_default(LlmBackendOptions *o);

/*
 * The fused steps of the forward pass (backend.c): be's optional op when it
 * has one, else the composition its comment in LlmBackendOps gives.
 */
void		llm_be_matmul_multi(LlmBackend *be, const LlmWeight *const *w, const float *x, float *const *y,
								int count, int n);
void		llm_be_matmul_glu(LlmBackend *be, const LlmWeight *w_gate, const LlmWeight *w_up, const float *x,
							  float *gate, float *up, int n, LlmActivation act);
void		llm_be_add_rmsnorm(LlmBackend *be, float *x, const float *r, const float *w, float *y, int n, int dim,
							   float eps, bool add_one);
void		llm_be_rope_qk(LlmBackend *be, float *q, int n_heads, float *k, int n_kv_heads, const int32_t *pos,
						   int n, int head_dim, int rope_dim, const float *inv_freq, LlmRopeMode mode);

/* Create the backend for device (device.c): CUDA, or the CPU (cpu/backend_cpu.h); opt NULL: the defaults. */
LlmStatus	llm_backend_new(LlmDevice device, const LlmBackendOptions *opt, LlmBackend **out, LlmError *err);

/* Free any backend through its destroy op (CUDA: device memory, stream, cuBLAS); NULL is allowed. */
void		llm_backend_free(LlmBackend *be);

/*
 * The CUDA backend (cuda/) as a module: llm_cuda.so gives this table as its
 * symbol llm_cuda_module_entry, which cuda_module.c loads at run time, so
 * the engine never links CUDA's libraries.  abi and sizes are those of the
 * module's build; a module whose differ from the engine's is refused.
 * Bump LLM_CUDA_MODULE_ABI when the op table's meaning changes.
 */
#define LLM_CUDA_MODULE_ABI 1
#define LLM_CUDA_MODULE_SIZES \
	{sizeof(LlmBackend), sizeof(LlmBackendOps), sizeof(LlmBackendOptions), sizeof(LlmWeight), sizeof(LlmModel), \
	 sizeof(LlmKvCache)}

typedef struct LlmCudaModule
{
	int			abi;			/* LLM_CUDA_MODULE_ABI */
	size_t		sizes[6];		/* LLM_CUDA_MODULE_SIZES */
	/* the number of CUDA devices this process sees; when 0, why in why (no driver, no device) */
	int			(*device_count) (char *why, size_t why_len);
	/* create the CUDA backend on device 0 with options opt */
	LlmStatus	(*backend_new) (const LlmBackendOptions *opt, LlmBackend **out, LlmError *err);
	/* the name of the device under a backend it created */
	const char *(*device_name) (const LlmBackend *be);
} LlmCudaModule;

/*
 * The CUDA backend for opt->cuda_module, loaded once per process and path
 * (cuda_module.c); NULL with the reason in why when there is none: no path,
 * a file that does not load, or one from another build.
 */
const LlmCudaModule *llm_cuda_module_get(const char *path, char *why, size_t why_len);

/*
 * Use m for every later llm_backend_new() of this process, whatever
 * cuda_module says: for programs linked with the CUDA objects themselves
 * (cuda/test_cuda.c, cuda/bench_cuda.c); NULL goes back to loading.
 */
void		llm_cuda_module_use(const LlmCudaModule *m);

#endif							/* LLM_BACKEND_H */
