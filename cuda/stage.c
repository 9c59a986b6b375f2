/*
 * stage.c
 *		The CUDA backend's traffic of small host data: a pinned staging
 *		arena mirrored in device memory for uploads (ids, positions, block
 *		tables, moves), and a pinned readback arena for H2O sums, whose
 *		additions to the host scores wait in a queue until sync.
 *
 * Both arenas are bump allocators reset only when the stream is idle (at
 * sync), so an asynchronous copy never reads or writes a region that was
 * handed out again, and every address handed out stays valid until then:
 * an arena that runs full mid-step is replaced by one twice as large and
 * retired, to be freed at the reset.  A reset also forgets the step's
 * cached uploads (CudaStep), which live in the staging arena.
 */
#include "backend_cuda.h"

#include <stdlib.h>
#include <string.h>

#define STAGE_ALIGN 256
#define STAGE_MIN_BYTES ((size_t) 4 << 20)

/* bytes rounded up to the arenas' alignment. */
static size_t
align_up(size_t bytes)
{
	return (bytes + STAGE_ALIGN - 1) & ~(size_t) (STAGE_ALIGN - 1);
}

/* Free the retired arenas (the stream must be idle). */
static void
free_retired(CudaBackend *cb)
{
	for (int i = 0; i < cb->n_retired; i++)
	{
		cudaFreeHost(cb->retired[i].host);
		cudaFree(cb->retired[i].dev);
	}
	cb->n_retired = 0;
}

/* Free both arenas' memory. */
void
cuda_stage_free(CudaBackend *cb)
{
	free_retired(cb);
	cudaFreeHost(cb->stage_h);
	cudaFree(cb->stage_d);
	cudaFreeHost(cb->rb_h);
	free(cb->adds);
	cb->stage_h = cb->stage_d = cb->rb_h = NULL;
	cb->adds = NULL;
	cb->stage_cap = cb->rb_cap = 0;
	cb->stage_used = cb->rb_used = 0;
	cb->n_adds = cb->adds_cap = 0;
}

/* After the stream is idle: add the queued H2O sums (unless a call failed) and start the arenas over. */
void
cuda_stage_reset(CudaBackend *cb)
{
	for (int i = 0; cb->err_status == LLM_OK && i < cb->n_adds; i++)
	{
		const CudaScoreAdd *a = &cb->adds[i];

		for (int h = 0; h < a->kv->n_kv_heads; h++)
			for (int j = 0; j < a->width; j++)
				a->seq->score[llm_kv_info_index(a->kv, j, a->layer, h)] += a->sums[(size_t) h * a->width + j];
	}
	cb->n_adds = 0;
	free_retired(cb);
	cb->stage_used = 0;
	cb->rb_used = 0;
	cb->step.valid = false;
	cb->step.plan_valid = false;
	cb->step.rope_pos = NULL;
}

/* Replace a full arena by one of at least need bytes (the old one retires); false on failure. */
static bool
arena_grow(CudaBackend *cb, uint8_t **host, uint8_t **dev, size_t *cap, size_t *used, size_t need)
{
	size_t		c = *cap > 0 ? 2 * *cap : STAGE_MIN_BYTES;
	uint8_t    *h = NULL;
	uint8_t    *d = NULL;

	while (c < need)
		c *= 2;
	if (cb->n_retired == CUDA_MAX_RETIRED)
	{
		cuda_fail(cb, LLM_ERR_LIMIT, "the CUDA backend's staging arenas grew %d times in one step",
				  CUDA_MAX_RETIRED);
		return false;
	}
	if (!cuda_ok(cb, cudaMallocHost((void **) &h, c), "cudaMallocHost (staging arena)") ||
		(dev != NULL && !cuda_ok(cb, cudaMalloc((void **) &d, c), "cudaMalloc (staging arena)")))
	{
		cudaFreeHost(h);
		return false;
	}
	if (*host != NULL)
		cb->retired[cb->n_retired++] = (CudaRetired) {*host, dev != NULL ? *dev : NULL};
	*host = h;
	if (dev != NULL)
		*dev = d;
	*cap = c;
	*used = 0;
	return true;
}

/* bytes of the staging arena: *host to fill; returns the device address. */
void *
cuda_stage(CudaBackend *cb, size_t bytes, void **host)
{
	size_t		need = align_up(bytes > 0 ? bytes : 1);
	size_t		off;

	if (cb->stage_used + need > cb->stage_cap &&
		!arena_grow(cb, &cb->stage_h, &cb->stage_d, &cb->stage_cap, &cb->stage_used, need))
		return NULL;
	off = cb->stage_used;
	cb->stage_used += need;
	*host = cb->stage_h + off;
	return cb->stage_d + off;
}

/* Upload the staged bytes at dev (an address from cuda_stage). */
bool
cuda_stage_push(CudaBackend *cb, const void *dev, size_t bytes)
{
	size_t		off = (size_t) ((const uint8_t *) dev - cb->stage_d);

	if (bytes == 0)
		return true;
	return cuda_ok(cb, cudaMemcpyAsync(cb->stage_d + off, cb->stage_h + off, bytes, cudaMemcpyHostToDevice,
									   cb->stream), "cudaMemcpyAsync (staging upload)");
}

/* Stage and upload n int32. */
const int32_t *
cuda_upload_i32(CudaBackend *cb, const int32_t *src, size_t n)
{
	void	   *h;
	void	   *d = cuda_stage(cb, n * sizeof(int32_t), &h);

	if (d == NULL)
		return NULL;
	memcpy(h, src, n * sizeof(int32_t));
	return cuda_stage_push(cb, d, n * sizeof(int32_t)) ? d : NULL;
}

/* Copy bytes of device memory into the readback arena; where they will be once the stream is idle. */
const void *
cuda_readback(CudaBackend *cb, const void *src, size_t bytes)
{
	size_t		need = align_up(bytes > 0 ? bytes : 1);
	uint8_t    *dst;

	if (cb->rb_used + need > cb->rb_cap &&
		!arena_grow(cb, &cb->rb_h, NULL, &cb->rb_cap, &cb->rb_used, need))
		return NULL;
	dst = cb->rb_h + cb->rb_used;
	cb->rb_used += need;
	if (!cuda_ok(cb, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cb->stream),
				 "cudaMemcpyAsync (H2O sums to host)"))
		return NULL;
	return dst;
}

/* Queue adding H2O sums (n_kv_heads, width) to seq's scores of layer. */
bool
cuda_queue_score_add(CudaBackend *cb, const LlmKvCache *kv, LlmKvSeq *seq, int layer, int width,
					 const float *sums)
{
	if (cb->n_adds == cb->adds_cap)
	{
		int			cap = cb->adds_cap > 0 ? 2 * cb->adds_cap : 256;
		CudaScoreAdd *a = realloc(cb->adds, (size_t) cap * sizeof(CudaScoreAdd));

		if (a == NULL)
		{
			cuda_fail(cb, LLM_ERR_NOMEM, "out of memory for the H2O score queue");
			return false;
		}
		cb->adds = a;
		cb->adds_cap = cap;
	}
	cb->adds[cb->n_adds++] = (CudaScoreAdd) {kv, seq, layer, width, sums};
	return true;
}
