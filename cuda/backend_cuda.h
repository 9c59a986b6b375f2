/*
 * backend_cuda.h
 *		Private: the CUDA backend's state and the pieces its files share.
 *
 * Memory contract (backend.h).  Activations (every float pointer an op
 * gets) are device memory from the alloc op.  Index arrays (token ids,
 * positions), block tables, slot_pos and H2O scores are host memory: an op
 * copies what its kernels need into a pinned staging arena and uploads it
 * with one asynchronous copy.  Weights and norm vectors are host pointers
 * into the model; prepare uploads each once and keeps a map from host
 * address to device copy (a pointer not uploaded yet is uploaded on first
 * use).  The KV pool's keys and values live here, in the layout of kv.h,
 * allocated when a pool is first used.
 *
 * Ordering.  Everything runs in order on one stream.  Host data staged for
 * a step (positions, the batch's block tables) is uploaded once per step,
 * at its first use, and reused by every layer until sync: between two
 * syncs the caller must not change them (llm_forward does not).  The
 * staging arena is reset only after the stream is idle, so no upload ever
 * reads host memory that was rewritten, and what it hands out stays valid
 * until then (a full arena is replaced by a larger one, the old one freed
 * at the reset).  H2O probabilities come back into a pinned readback arena
 * and are added to the host scores at sync.
 *
 * Errors.  The first failing CUDA or cuBLAS call is recorded with its name
 * and CUDA's message; later ops do nothing until sync reports it (and
 * forgets it, so a failed step does not poison the next).  Nothing aborts.
 */
#ifndef LLM_BACKEND_CUDA_H
#define LLM_BACKEND_CUDA_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "kernels.h"

/* A host constant's device copy: a weight matrix or a float vector. */
typedef struct CudaEntry
{
	const void *host;			/* key: the host address (NULL: empty slot) */
	size_t		host_bytes;		/* float vectors: their size; matrices: rows * row_bytes */
	bool		is_mat;
	bool		device_made;	/* contents made on the device (llm_cuda_weight_random): host is only a key */
	CudaMat		mat;			/* matrices: the device layout */
	void	   *dev;			/* the allocation (data, then split scales) */
	size_t		dev_bytes;
} CudaEntry;

/* The device storage of one KV pool. */
typedef struct CudaKvStore
{
	const LlmKvCache *owner;	/* the pool it belongs to (its shape is checked too) */
	int			n_layers;
	CudaKv		dev;
	void	   *mem;
	size_t		bytes;
} CudaKvStore;

#define CUDA_MAX_KV_STORES 4

/* A host score update waiting for sync: width slots of layer for every KV head of seq. */
typedef struct CudaScoreAdd
{
	const LlmKvCache *kv;
	LlmKvSeq   *seq;
	int			layer;
	int			width;
	const float *sums;			/* (n_kv_heads, width) in the readback arena */
} CudaScoreAdd;

/* An arena replaced by a larger one mid-step: freed at the next reset. */
typedef struct CudaRetired
{
	void	   *host;			/* pinned */
	void	   *dev;			/* device mirror, or NULL */
} CudaRetired;

#define CUDA_MAX_RETIRED 32

/* A device scratch buffer that grows. */
typedef struct CudaScratch
{
	void	   *p;
	size_t		bytes;
} CudaScratch;

/* The batch facts of the current step, uploaded once (see the top of this file). */
typedef struct CudaStep
{
	bool		valid;
	LlmKvSeq *const *seq;		/* key: the caller's arrays and length */
	const int32_t *pos;
	int			n;
	const int32_t *tok_d;		/* (n, CUDA_TOK_FIELDS) device */
	const int32_t *blocks_d;	/* the block tables, device */
	int32_t    *tok_h;			/* (n, CUDA_TOK_FIELDS) host copy */
	int			tok_cap;
	/* the attention plan for one head shape */
	bool		plan_valid;
	int			plan_group;
	int			plan_hd;
	int			n_dec;
	int			n_tiles;
	int			n_runs;
	int			n_splits;
	int			max_width;
	size_t		delta_floats;
	const int32_t *dec_d;
	const int32_t *tiles_d;
	const int32_t *runs_d;
	int32_t    *runs_h;			/* (n_runs, 4) host copy */
	int			runs_cap;
	/* rope's positions */
	const int32_t *rope_pos;	/* key */
	int			rope_n;
	const int32_t *rope_pos_d;
} CudaStep;

typedef struct CudaBackend
{
	LlmBackend	base;			/* first: the engine sees only this */
	int			device;
	char		device_name[256];
	int			sm_count;
	int			cc_major;
	cudaStream_t stream;
	cublasHandle_t cublas;

	/* the first error since the last sync */
	LlmStatus	err_status;
	char		err_msg[LLM_ERROR_MSG_LEN];

	/* host constants on the device: open addressing on the host address */
	CudaEntry  *map;
	size_t		map_cap;		/* a power of two */
	size_t		map_n;

	CudaKvStore kv[CUDA_MAX_KV_STORES];

	/* scratch */
	CudaScratch act;			/* activations as bfloat16 or int8 */
	CudaScratch wbf;			/* weights decoded to bfloat16 for cuBLAS */
	CudaScratch work;			/* attention's partial results, (m, l), H2O sums */

	/* pinned staging arena and its device mirror; the readback arena */
	uint8_t    *stage_h;
	uint8_t    *stage_d;
	size_t		stage_cap;
	size_t		stage_used;
	uint8_t    *rb_h;
	size_t		rb_cap;
	size_t		rb_used;
	CudaRetired retired[CUDA_MAX_RETIRED];
	int			n_retired;
	CudaScoreAdd *adds;
	int			n_adds;
	int			adds_cap;

	CudaStep	step;

	bool		force_fp32_gemm;	/* LlmBackendOptions.fp32_gemm: the pre-sm_80 GEMM path everywhere (tests) */
} CudaBackend;

/* backend_cuda.c */

/* Record the first error: "<what> failed: <CUDA's message>"; false when e is an error. */
bool		cuda_ok(CudaBackend *cb, cudaError_t e, const char *what);
/* The same for cuBLAS. */
bool		cublas_ok(CudaBackend *cb, cublasStatus_t s, const char *what);
/* Record a non-CUDA failure (unsupported shape, out of host memory). */
void		cuda_fail(CudaBackend *cb, LlmStatus st, const char *fmt,...) __attribute__((format(printf, 3, 4)));
/* Make s hold at least bytes of device memory (waits for the stream before freeing); NULL on failure. */
void	   *cuda_scratch(CudaBackend *cb, CudaScratch *s, size_t bytes, const char *what);

/* stage.c */

/* bytes (aligned) of the staging arena: *host to fill, returns the device address (NULL on failure). */
void	   *cuda_stage(CudaBackend *cb, size_t bytes, void **host);
/* Upload what was staged at dev (bytes from cuda_stage) to the device. */
bool		cuda_stage_push(CudaBackend *cb, const void *dev, size_t bytes);
/* Stage and upload n int32 of host array src; the device copy, or NULL. */
const int32_t *cuda_upload_i32(CudaBackend *cb, const int32_t *src, size_t n);
/* Copy bytes of device memory src into the readback arena; where they will be after sync, or NULL. */
const void *cuda_readback(CudaBackend *cb, const void *src, size_t bytes);
/* Queue adding H2O sums (n_kv_heads, width, from cuda_readback) to seq's scores of layer at sync. */
bool		cuda_queue_score_add(CudaBackend *cb, const LlmKvCache *kv, LlmKvSeq *seq, int layer, int width,
								 const float *sums);
/* After the stream is idle: apply the queued score additions (unless an error was recorded), reset arenas and step. */
void		cuda_stage_reset(CudaBackend *cb);
void		cuda_stage_free(CudaBackend *cb);

/* weights.c */

/* The device copy of float vector host (n floats), uploaded on first use; NULL on failure. */
const float *cuda_const(CudaBackend *cb, const float *host, size_t n);
/* The device copy of weight w, uploaded on first use; NULL on failure. */
const CudaMat *cuda_mat(CudaBackend *cb, const LlmWeight *w);
/* Upload every weight of m (the prepare op). */
LlmStatus	cuda_prepare(LlmBackend *be, const LlmModel *m, LlmError *err);
void		cuda_weights_free(CudaBackend *cb);

/* matmul.c */

void		cuda_matmul(LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n);
/* Run a GEMV job of n <= CUDA_GEMV_MAX_TOKENS tokens now (quantizing x first for the split layouts). */
void		cuda_run_gemv(CudaBackend *cb, const CudaGemvJob *job, const float *x, int n);
/* Whether matmuls of n tokens take the GEMV kernels (more go to cuBLAS, unless deterministic). */
bool		cuda_gemv_takes(const CudaBackend *cb, int n);
/* Run a GEMV job of any number of tokens, CUDA_GEMV_MAX_TOKENS at a time. */
void		cuda_gemv(CudaBackend *cb, const CudaGemvJob *job, const float *x, int n);

/* fused.c: the optional fused ops of backend.h */

void		cuda_matmul_multi(LlmBackend *be, const LlmWeight *const *w, const float *x, float *const *y, int count,
							  int n);
void		cuda_matmul_glu(LlmBackend *be, const LlmWeight *w_gate, const LlmWeight *w_up, const float *x,
							float *gate, float *up, int n, LlmActivation act);
void		cuda_add_rmsnorm(LlmBackend *be, float *x, const float *r, const float *w, float *y, int n, int dim,
							 float eps, bool add_one);
void		cuda_rope_qk(LlmBackend *be, float *q, int n_heads, float *k, int n_kv_heads, const int32_t *pos, int n,
						 int head_dim, int rope_dim, const float *inv_freq, LlmRopeMode mode);

/* attn.c */

void		cuda_kv_store(LlmBackend *be, LlmKvCache *kv, int layer, LlmKvSeq *const *seq, const int32_t *pos,
						  const float *k, const float *v, int n);
void		cuda_kv_move(LlmBackend *be, LlmKvCache *kv, const LlmKvSeq *seq, const LlmKvMove *moves, int n);
void		cuda_attention(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a);
/* The device positions of rope's pos array (n), cached for the step. */
const int32_t *cuda_step_positions(CudaBackend *cb, const int32_t *pos, int n);
void		cuda_kv_free(CudaBackend *cb);

/* The CUDA backend's own API for tests and benchmarks (cuda/cuda_api.h re-exports it). */
#include "cuda_api.h"

#endif							/* LLM_BACKEND_CUDA_H */
