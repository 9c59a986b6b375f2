/*
 * threadpool.h
 *		A persistent pool of compute threads.
 *
 * llm_pool_run(pool, n, fn, ctx) calls fn(ctx, i) for every i in [0, n),
 * spread over the pool's threads and the calling thread, and returns when
 * all are done.  Threads are created once and sleep between runs; no thread
 * is created per call.  Compute threads run only engine code.
 */
#ifndef LLM_THREADPOOL_H
#define LLM_THREADPOOL_H

#include "status.h"

typedef struct LlmPool LlmPool;

/* A task body: do part i of the work described by ctx. */
typedef void (*LlmPoolFn) (void *ctx, int i);

/* Start a pool of n_threads in all (the caller counts as one). */
LlmStatus	llm_pool_new(int n_threads, LlmPool **out, LlmError *err);

/* Stop and join the threads; NULL is allowed. */
void		llm_pool_free(LlmPool *p);

/* Threads in the pool, the caller included. */
int			llm_pool_size(const LlmPool *p);

/* Run fn(ctx, i) for i in [0, n) on all threads; returns when every call is done. */
void		llm_pool_run(LlmPool *p, int n, LlmPoolFn fn, void *ctx);

#endif							/* LLM_THREADPOOL_H */
