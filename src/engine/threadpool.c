/*
 * threadpool.c
 *		A persistent pool of compute threads (see threadpool.h).
 *
 * One run at a time.  The caller publishes (fn, ctx, n), bumps the
 * generation and broadcasts; every thread, the caller included, takes task
 * indexes from an atomic counter until they run out, then counts itself
 * done.  The caller waits until all helper threads have finished the
 * generation before it returns, so ctx may live on the caller's stack.
 */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct LlmPool
{
	int			n_threads;		/* including the caller */
	pthread_t  *threads;		/* (n_threads - 1) */
	pthread_mutex_t mutex;
	pthread_cond_t wake;		/* a new generation or stop */
	pthread_cond_t done;		/* a helper finished the generation */
	uint64_t	generation;
	int			n_done;			/* helpers done with this generation */
	bool		stop;
	LlmPoolFn	fn;
	void	   *ctx;
	int			n_tasks;
	atomic_int	next;			/* next task index to take */
};

/* Take and run tasks until none are left. */
static void
pool_drain(LlmPool *p)
{
	for (;;)
	{
		int			i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);

		if (i >= p->n_tasks)
			break;
		p->fn(p->ctx, i);
	}
}

/* Body of a helper thread: wait for a generation, drain it, report done. */
static void *
pool_thread_main(void *arg)
{
	LlmPool    *p = arg;
	uint64_t	seen = 0;

	pthread_mutex_lock(&p->mutex);
	for (;;)
	{
		while (!p->stop && p->generation == seen)
			pthread_cond_wait(&p->wake, &p->mutex);
		if (p->stop)
			break;
		seen = p->generation;
		pthread_mutex_unlock(&p->mutex);

		pool_drain(p);

		pthread_mutex_lock(&p->mutex);
		p->n_done++;
		pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mutex);
	return NULL;
}

/* Start a pool of n_threads in all (the caller counts as one). */
LlmStatus
llm_pool_new(int n_threads, LlmPool **out, LlmError *err)
{
	LlmPool    *p;

	if (n_threads < 1 || n_threads > 1024)
		return llm_error_set(err, LLM_ERR_INVALID, "thread count must be between 1 and 1024, got %d", n_threads);
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the thread pool");
	p->threads = calloc((size_t) n_threads, sizeof(pthread_t));
	if (p->threads == NULL)
	{
		free(p);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the thread pool");
	}
	pthread_mutex_init(&p->mutex, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	atomic_init(&p->next, 0);
	p->n_threads = 1;
	for (int t = 0; t < n_threads - 1; t++)
	{
		if (pthread_create(&p->threads[t], NULL, pool_thread_main, p) != 0)
		{
			llm_pool_free(p);
			return llm_error_set(err, LLM_ERR_NOMEM, "could not start compute thread %d", t + 1);
		}
		p->n_threads++;
	}
	*out = p;
	return LLM_OK;
}

/* Stop and join the threads; NULL is allowed. */
void
llm_pool_free(LlmPool *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mutex);
	p->stop = true;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mutex);
	for (int t = 0; t < p->n_threads - 1; t++)
		pthread_join(p->threads[t], NULL);
	pthread_mutex_destroy(&p->mutex);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->done);
	free(p->threads);
	free(p);
}

/* Threads in the pool, the caller included. */
int
llm_pool_size(const LlmPool *p)
{
	return p->n_threads;
}

/* Run fn(ctx, i) for i in [0, n) on all threads; returns when every call is done. */
void
llm_pool_run(LlmPool *p, int n, LlmPoolFn fn, void *ctx)
{
	if (n <= 0)
		return;
	if (p->n_threads == 1 || n == 1)
	{
		for (int i = 0; i < n; i++)
			fn(ctx, i);
		return;
	}
	pthread_mutex_lock(&p->mutex);
	p->fn = fn;
	p->ctx = ctx;
	p->n_tasks = n;
	atomic_store(&p->next, 0);
	p->n_done = 0;
	p->generation++;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mutex);

	pool_drain(p);

	pthread_mutex_lock(&p->mutex);
	while (p->n_done < p->n_threads - 1)
		pthread_cond_wait(&p->done, &p->mutex);
	pthread_mutex_unlock(&p->mutex);
}
