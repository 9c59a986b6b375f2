/*
 * backend_cpu.h
 *		The CPU backend (cpu/), the peer of the CUDA backend (cuda/): its op
 *		tables, one per SIMD level, and the copies of the model's weights it
 *		keeps in the layout its kernels read.
 *
 * The model keeps its file's layout.  The prepare op of a SIMD level's
 * table (cpu/weights.c) makes the backend's own copy of each matrix its
 * kernels read faster in another form: Q5_0 rewritten exactly as Q8_0 where
 * the level has no Q5_0 kernel, and the grouped types (quant.h) where it
 * has their kernels.  Each copy holds the same numbers as the file's, so
 * the answers are the same bits with or without it; the matmul ops find a
 * copy by the host address of the model's rows (llm_cpu_weight).
 */
#ifndef LLM_CPU_BACKEND_CPU_H
#define LLM_CPU_BACKEND_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "cpu/cpu_features.h"

/* One weight copy: the model's rows at key, served as w. */
typedef struct CpuWeightCopy
{
	const void *key;			/* the model's rows (LlmWeight.data) */
	LlmWeight	w;				/* the copy: the model's weight with its own type, data and row size */
} CpuWeightCopy;

/* A CPU backend: the common part first, then its weight copies. */
typedef struct CpuBackend
{
	LlmBackend	base;
	CpuWeightCopy *copies;		/* sorted by key */
	int			n_copies;
	size_t		copy_bytes;		/* their rows' bytes */
	bool		pool_owned;		/* base.pool is its own (else another backend's: llm_backend_cpu_new_on) */
} CpuBackend;

/* Create a CPU backend with n_threads compute threads, on this process's SIMD level. */
LlmStatus	llm_backend_cpu_new(int n_threads, LlmBackend **out, LlmError *err);

/*
 * Create a CPU backend that computes on pool, another backend's, which must
 * outlive it: two backends used in turn (a draft model's beside its
 * target's) share one set of threads instead of each spinning while the
 * other computes.
 */
LlmStatus	llm_backend_cpu_new_on(LlmPool *pool, LlmBackend **out, LlmError *err);

/* The backend with the scalar reference kernels (cpu/ops_ref.c): no weight copies. */
extern const LlmBackendOps llm_cpu_ref_ops;

/* The backend op table of level isa (llm_cpu_ref_ops for scalar); NULL if the processor lacks it. */
const LlmBackendOps *llm_cpu_ops_for_isa(LlmCpuIsa isa);

/* The op table for this process: the level of llm_cpu_isa(). */
const LlmBackendOps *llm_cpu_select_ops(void);

/* Whether this process's CPU level has a fast matmul kernel for weight type (else: the scalar reference). */
bool		llm_cpu_has_kernel(LlmType type);

/*
 * Weight copies (cpu/weights.c).  llm_cpu_weights_prepare replaces the
 * backend's copies with those m's matrices need on kernels kern (matmul.h;
 * NULL: none); llm_cpu_weight is the copy of w, or w itself.
 */
struct LlmMatmulKernels;
LlmStatus	llm_cpu_weights_prepare(LlmBackend *be, const LlmModel *m, const struct LlmMatmulKernels *kern,
									LlmError *err);
const LlmWeight *llm_cpu_weight(const LlmBackend *be, const LlmWeight *w);
void		llm_cpu_weights_free(LlmBackend *be);

/* Bytes of the backend's weight copies. */
size_t		llm_cpu_weight_bytes(const LlmBackend *be);

/* Free a CPU backend: its weight copies, its thread pool, then itself (the destroy op of every level). */
void		llm_cpu_destroy(LlmBackend *be);

/* The CPU backend's memory and result ops (cpu/ops_mem.c), shared by every SIMD level's table. */
void	   *llm_cpu_alloc(LlmBackend *be, size_t bytes);
void		llm_cpu_free(LlmBackend *be, void *p);
void		llm_cpu_copy(LlmBackend *be, void *dst, const void *src, size_t bytes);
void		llm_cpu_gather_rows(LlmBackend *be, const float *x, const int32_t *idx, int n, int width, float *out);
void		llm_cpu_softcap(LlmBackend *be, float *x, int64_t n, float cap);
void		llm_cpu_argmax(LlmBackend *be, const float *x, int n, int width, int32_t *out);
void		llm_cpu_softmax(LlmBackend *be, float *x, int n, int width);
LlmStatus	llm_cpu_sync(LlmBackend *be, LlmError *err);

#endif							/* LLM_CPU_BACKEND_CPU_H */
