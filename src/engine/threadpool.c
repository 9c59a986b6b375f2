/*
 * threadpool.c
 *		A persistent pool of compute threads (see threadpool.h).
 *
 * One run at a time.  The caller publishes (fn, ctx, n), bumps the
 * generation and broadcasts; every thread, the caller included, takes task
 * indexes from an atomic counter until they run out, then counts itself
 * done.  The caller returns once all helper threads have finished the
 * generation, so ctx may live on the caller's stack.
 *
 * A forward pass makes about a hundred runs per token, so waking threads
 * through the kernel each time (about 10 us) would cost more than small
 * matmuls themselves.  Waiting threads therefore spin on the generation
 * (and the caller on the done count) for a bounded while before they sleep
 * on a condition variable.  Sleeping and waking happen under the mutex:
 * the generation is bumped and the caller's sleeping flag read with the
 * mutex held, so no wake-up is lost.
 */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void) 0)
#endif

#define SPIN_ITERATIONS 4000	/* about 0.1-0.5 ms of pause instructions */

struct LlmPool
{
	int			n_threads;		/* including the caller */
	pthread_t  *threads;		/* (n_threads - 1) */
	pthread_mutex_t mutex;
	pthread_cond_t wake;		/* a new generation or stop */
	pthread_cond_t done;		/* the last helper finished the generation */
	atomic_uint_fast64_t generation;
	atomic_int	n_done;			/* helpers done with this generation */
	atomic_bool stop;
	bool		caller_sleeping;	/* under mutex */
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

/* Wait (spinning, then sleeping) for a generation other than seen; returns it, or seen on stop. */
static uint64_t
pool_wait_generation(LlmPool *p, uint64_t seen)
{
	uint64_t	g;

	for (int i = 0; i < SPIN_ITERATIONS; i++)
	{
		g = atomic_load_explicit(&p->generation, memory_order_acquire);
		if (g != seen || atomic_load_explicit(&p->stop, memory_order_relaxed))
			return g;
		cpu_relax();
	}
	pthread_mutex_lock(&p->mutex);
	while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
		   !atomic_load_explicit(&p->stop, memory_order_relaxed))
		pthread_cond_wait(&p->wake, &p->mutex);
	pthread_mutex_unlock(&p->mutex);
	return g;
}

/* Body of a helper thread: wait for a generation, drain it, report done. */
static void *
pool_thread_main(void *arg)
{
	LlmPool    *p = arg;
	uint64_t	seen = 0;

	for (;;)
	{
		seen = pool_wait_generation(p, seen);
		if (atomic_load_explicit(&p->stop, memory_order_relaxed))
			break;
		pool_drain(p);
		if (atomic_fetch_add_explicit(&p->n_done, 1, memory_order_acq_rel) + 1 == p->n_threads - 1)
		{
			pthread_mutex_lock(&p->mutex);
			if (p->caller_sleeping)
				pthread_cond_signal(&p->done);
			pthread_mutex_unlock(&p->mutex);
		}
	}
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
	atomic_init(&p->generation, 0);
	atomic_init(&p->n_done, 0);
	atomic_init(&p->stop, false);
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
	atomic_store(&p->stop, true);
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
	int			helpers = p->n_threads - 1;
	bool		finished = false;

	if (n <= 0)
		return;
	if (helpers == 0 || n == 1)
	{
		for (int i = 0; i < n; i++)
			fn(ctx, i);
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	p->n_tasks = n;
	atomic_store_explicit(&p->next, 0, memory_order_relaxed);
	atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
	pthread_mutex_lock(&p->mutex);
	atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mutex);

	pool_drain(p);

	for (int i = 0; i < SPIN_ITERATIONS && !finished; i++)
	{
		finished = atomic_load_explicit(&p->n_done, memory_order_acquire) == helpers;
		if (!finished)
			cpu_relax();
	}
	if (!finished)
	{
		pthread_mutex_lock(&p->mutex);
		p->caller_sleeping = true;
		while (atomic_load_explicit(&p->n_done, memory_order_acquire) < helpers)
			pthread_cond_wait(&p->done, &p->mutex);
		p->caller_sleeping = false;
		pthread_mutex_unlock(&p->mutex);
	}
}
