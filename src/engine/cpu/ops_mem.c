/*
 * ops_mem.c
 *		The CPU backend's memory and result ops: its activations are plain
 *		host memory, so alloc is malloc and the copies are memcpy; the
 *		logits' soft cap, and argmax and softmax for sampling, are scalar
 *		loops (the reference a device backend is tested against); and the
 *		backend's teardown.
 */
#include "cpu/backend_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Host memory for activations. */
void *
llm_cpu_alloc(LlmBackend *be, size_t bytes)
{
	return malloc(bytes > 0 ? bytes : 1);
}

/* Free memory from llm_cpu_alloc; NULL is allowed. */
void
llm_cpu_free(LlmBackend *be, void *p)
{
	free(p);
}

/* Copy bytes between host buffers (to_host and to_device alike). */
void
llm_cpu_copy(LlmBackend *be, void *dst, const void *src, size_t bytes)
{
	if (dst != src && bytes > 0)
		memcpy(dst, src, bytes);
}

/* out (n, width) = rows idx[i] of x. */
void
llm_cpu_gather_rows(LlmBackend *be, const float *x, const int32_t *idx, int n, int width, float *out)
{
	for (int i = 0; i < n; i++)
		if (out + (size_t) i * width != x + (size_t) idx[i] * width)
			memcpy(out + (size_t) i * width, x + (size_t) idx[i] * width, (size_t) width * sizeof(float));
}

/* x (n) = cap * tanh(x / cap). */
void
llm_cpu_softcap(LlmBackend *be, float *x, int64_t n, float cap)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = cap * tanhf(x[i] / cap);
}

/* A value as the sampler orders it: NaN counts as -infinity. */
static inline float
order_value(float v)
{
	return isnan(v) ? -INFINITY : v;
}

/* out (n) = index of each row's largest value, the lowest index on ties. */
void
llm_cpu_argmax(LlmBackend *be, const float *x, int n, int width, int32_t *out)
{
	for (int i = 0; i < n; i++)
	{
		const float *r = x + (size_t) i * width;
		int32_t		best = 0;
		float		bv = order_value(r[0]);

		for (int j = 1; j < width; j++)
			if (order_value(r[j]) > bv)
			{
				bv = order_value(r[j]);
				best = j;
			}
		out[i] = best;
	}
}

/* x (n, width) = softmax of each row in place; NaN and -inf entries get 0, a row of only those all 0. */
void
llm_cpu_softmax(LlmBackend *be, float *x, int n, int width)
{
	for (int i = 0; i < n; i++)
	{
		float	   *r = x + (size_t) i * width;
		float		m = -INFINITY;
		float		sum = 0.0f;

		for (int j = 0; j < width; j++)
			m = fmaxf(m, order_value(r[j]));
		for (int j = 0; j < width; j++)
		{
			float		v = order_value(r[j]);

			r[j] = v == -INFINITY ? 0.0f : expf(v - m);
			sum += r[j];
		}
		for (int j = 0; j < width; j++)
			r[j] = sum > 0.0f ? r[j] / sum : 0.0f;
	}
}

/* Nothing runs asynchronously on the CPU: never an error. */
LlmStatus
llm_cpu_sync(LlmBackend *be, LlmError *err)
{
	return LLM_OK;
}

/* Free a CPU backend: its weight copies, its thread pool (when its own), then itself. */
void
llm_cpu_destroy(LlmBackend *be)
{
	llm_cpu_weights_free(be);
	if (((CpuBackend *) be)->pool_owned)
		llm_pool_free(be->pool);
	free(be);
}
