/*
 * weights.c
 *		The CUDA backend's copies of the model: every weight matrix and norm
 *		vector uploaded once, found again by its host address.  The host
 *		contents must not change while the copy lives; a prepare replaces
 *		every copy read from the host, since a freed model's addresses come
 *		back in the next model loaded.
 *
 * Layouts on the device: F32, F16 and BF16 rows as they are; Q8_0 and
 * Q4_0 (and so the engine's own INT8 / INT4, which use their block
 * layouts) split into aligned integer rows and a separate array of fp16
 * scales, the form the __dp4a GEMV reads in 16-byte pieces (the blocks go
 * up raw in chunks and a kernel splits them); Q5_0 rewritten exactly as
 * Q8_0 on the host first (llm_repack_q8_0); every other ggml type in its
 * blocks as stored.  Nothing is converted to a wider type: device memory
 * holds the model at its file size.
 */
#include "backend_cuda.h"

#include <stdlib.h>
#include <string.h>

#define UPLOAD_CHUNK_BYTES ((size_t) 64 << 20)	/* raw blocks staged per split kernel */

/* Hash of a host address. */
static size_t
addr_hash(const void *p)
{
	uint64_t	x = (uint64_t) (uintptr_t) p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t) x;
}

/* The slot of key host: its entry, or the empty slot where it would go. */
static CudaEntry *
map_slot(CudaBackend *cb, const void *host)
{
	size_t		i = addr_hash(host) & (cb->map_cap - 1);

	while (cb->map[i].host != NULL && cb->map[i].host != host)
		i = (i + 1) & (cb->map_cap - 1);
	return &cb->map[i];
}

/* Make room for one more entry (the table stays at most half full). */
static bool
map_reserve(CudaBackend *cb)
{
	CudaEntry  *old = cb->map;
	size_t		old_cap = cb->map_cap;

	if ((cb->map_n + 1) * 2 <= cb->map_cap)
		return true;
	cb->map_cap = old_cap > 0 ? 2 * old_cap : 256;
	cb->map = calloc(cb->map_cap, sizeof(CudaEntry));
	if (cb->map == NULL)
	{
		cb->map = old;
		cb->map_cap = old_cap;
		cuda_fail(cb, LLM_ERR_NOMEM, "out of memory for the CUDA weight map");
		return false;
	}
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].host != NULL)
			*map_slot(cb, old[i].host) = old[i];
	free(old);
	return true;
}

/* The entry of host, NULL when absent. */
static CudaEntry *
map_find(CudaBackend *cb, const void *host)
{
	CudaEntry  *e;

	if (cb->map_cap == 0)
		return NULL;
	e = map_slot(cb, host);
	return e->host != NULL ? e : NULL;
}

/* Free an entry's device memory and empty it (rehashing the run after it). */
static void
map_remove(CudaBackend *cb, CudaEntry *e)
{
	size_t		i = (size_t) (e - cb->map);

	cudaStreamSynchronize(cb->stream);
	cudaFree(e->dev);
	memset(e, 0, sizeof(*e));
	cb->map_n--;
	for (size_t j = (i + 1) & (cb->map_cap - 1); cb->map[j].host != NULL; j = (j + 1) & (cb->map_cap - 1))
	{
		CudaEntry	moved = cb->map[j];

		memset(&cb->map[j], 0, sizeof(CudaEntry));
		*map_slot(cb, moved.host) = moved;
	}
}

/*
 * Free every copy read from the host, keeping those made on the device.
 * Copies are found by host address alone, and the addresses of a freed
 * model come back in the next one loaded, so a copy from before a
 * prepare could stand for different contents now.
 */
static void
forget_host_copies(CudaBackend *cb)
{
	bool		removed = true;

	/* map_remove moves entries of the run after a slot, maybe behind the scan: scan until a pass removes none */
	while (removed)
	{
		removed = false;
		for (size_t i = 0; i < cb->map_cap; i++)
			while (cb->map[i].host != NULL && !cb->map[i].device_made)
			{
				map_remove(cb, &cb->map[i]);
				removed = true;
			}
	}
}

/* Free every copy. */
void
cuda_weights_free(CudaBackend *cb)
{
	for (size_t i = 0; i < cb->map_cap; i++)
		cudaFree(cb->map[i].dev);
	free(cb->map);
	cb->map = NULL;
	cb->map_cap = cb->map_n = 0;
}

/* Device bytes held for weights and vectors. */
size_t
llm_cuda_weight_bytes(const LlmBackend *be)
{
	const CudaBackend *cb = (const CudaBackend *) be;
	size_t		total = 0;

	for (size_t i = 0; llm_cuda_is_backend(be) && i < cb->map_cap; i++)
		total += cb->map[i].dev_bytes;
	return total;
}

/* The device copy of n floats at host. */
const float *
cuda_const(CudaBackend *cb, const float *host, size_t n)
{
	CudaEntry  *e = map_find(cb, host);
	size_t		bytes = n * sizeof(float);

	if (e != NULL && !e->is_mat && e->host_bytes >= bytes)
		return e->dev;
	if (e != NULL)
		map_remove(cb, e);
	if (!map_reserve(cb))
		return NULL;
	e = map_slot(cb, host);
	if (!cuda_ok(cb, cudaMalloc(&e->dev, bytes > 0 ? bytes : 4), "cudaMalloc (norm weights)"))
		return NULL;
	if (!cuda_ok(cb, cudaMemcpyAsync(e->dev, host, bytes, cudaMemcpyHostToDevice, cb->stream),
				 "cudaMemcpyAsync (norm weights)"))
	{
		cudaFree(e->dev);
		e->dev = NULL;
		return NULL;
	}
	e->host = host;
	e->host_bytes = bytes;
	e->dev_bytes = bytes;
	cb->map_n++;
	return e->dev;
}

/* The device layout weight type t gets, or -1 when there is none. */
static int
layout_of(LlmType t)
{
	switch (t)
	{
		case LLM_TYPE_F32:
			return CUDA_LAYOUT_F32;
		case LLM_TYPE_F16:
			return CUDA_LAYOUT_F16;
		case LLM_TYPE_BF16:
			return CUDA_LAYOUT_BF16;
		case LLM_TYPE_Q8_0:
		case LLM_TYPE_Q5_0:
			return CUDA_LAYOUT_Q8_0R;
		case LLM_TYPE_Q4_0:
			return CUDA_LAYOUT_Q4_0R;
		case LLM_TYPE_Q4_1:
		case LLM_TYPE_Q5_1:
		case LLM_TYPE_Q2_K:
		case LLM_TYPE_Q3_K:
		case LLM_TYPE_Q4_K:
		case LLM_TYPE_Q5_K:
		case LLM_TYPE_Q6_K:
			return CUDA_LAYOUT_GGML;
		default:
			return -1;
	}
}

/* Allocate w's device layout into e (rows, bytes, split scales); false on failure. */
static bool
mat_alloc(CudaBackend *cb, const LlmWeight *w, int layout, CudaEntry *e)
{
	CudaMat    *m = &e->mat;
	size_t		data_bytes;
	size_t		scale_bytes = 0;
	char		call[160];

	memset(m, 0, sizeof(*m));
	m->layout = layout;
	m->ggml_type = w->type;
	m->rows = w->rows;
	m->cols = w->cols;
	switch (layout)
	{
		case CUDA_LAYOUT_Q8_0R:
			m->row_bytes = (size_t) w->cols;
			scale_bytes = (size_t) w->rows * (w->cols / 32) * sizeof(uint16_t);
			break;
		case CUDA_LAYOUT_Q4_0R:
			m->row_bytes = (size_t) w->cols / 2;
			scale_bytes = (size_t) w->rows * (w->cols / 32) * sizeof(uint16_t);
			break;
		case CUDA_LAYOUT_GGML:
			m->row_bytes = w->row_bytes;
			break;
		default:
			m->row_bytes = llm_type_row_size(w->type, w->cols);
			break;
	}
	data_bytes = ((size_t) w->rows * m->row_bytes + 255) & ~(size_t) 255;
	e->dev_bytes = data_bytes + scale_bytes;
	snprintf(call, sizeof(call), "cudaMalloc of %zu MB for weight %s", (e->dev_bytes >> 20) + 1,
			 w->name != NULL ? w->name : "(unnamed)");
	if (!cuda_ok(cb, cudaMalloc(&e->dev, e->dev_bytes), call))
	{
		e->dev = NULL;
		return false;
	}
	m->data = e->dev;
	m->scales = scale_bytes > 0 ? (const uint16_t *) ((uint8_t *) e->dev + data_bytes) : NULL;
	return true;
}

/*
 * Whether w's rows must be rewritten before they go to the device, and
 * the bytes of a rewritten row: Q5_0 as Q8_0, the split layout's.
 */
static bool
upload_rewrites(const LlmWeight *w, size_t *raw_row)
{
	*raw_row = w->row_bytes;
	if (w->type == LLM_TYPE_Q5_0)
	{
		*raw_row = llm_type_row_size(LLM_TYPE_Q8_0, w->cols);
		return true;
	}
	return false;
}

/*
 * Upload w's rows into e in chunks: raw blocks split on the device for the
 * split layouts (split), else copied as they are; rows that
 * upload_rewrites names are rewritten on the host first.
 */
static bool
upload_rows(CudaBackend *cb, const LlmWeight *w, CudaEntry *e, bool split)
{
	size_t		raw_row;
	bool		rewrite = upload_rewrites(w, &raw_row);
	int64_t		chunk = (int64_t) (UPLOAD_CHUNK_BYTES / raw_row);
	uint8_t    *tmp = NULL;
	uint8_t    *repacked = NULL;
	bool		ok = true;

	if (chunk < 1)
		chunk = 1;
	if (chunk > w->rows)
		chunk = w->rows;
	if (split && !cuda_ok(cb, cudaMalloc((void **) &tmp, (size_t) chunk * raw_row), "cudaMalloc (weight upload buffer)"))
		return false;
	if (rewrite && (repacked = malloc((size_t) chunk * raw_row)) == NULL)
	{
		cudaFree(tmp);
		free(repacked);
		cuda_fail(cb, LLM_ERR_NOMEM, "out of memory repacking weight %s", w->name != NULL ? w->name : "");
		return false;
	}
	for (int64_t r0 = 0; ok && r0 < w->rows; r0 += chunk)
	{
		int64_t		nr = w->rows - r0 < chunk ? w->rows - r0 : chunk;
		const void *src = w->data + (size_t) r0 * w->row_bytes;
		uint8_t    *dst = split ? tmp : (uint8_t *) e->dev + (size_t) r0 * raw_row;

		if (repacked != NULL)
		{
			for (int64_t r = 0; r < nr; r++)
				llm_repack_q8_0(LLM_TYPE_Q5_0, w->data + (size_t) (r0 + r) * w->row_bytes,
								repacked + (size_t) r * raw_row, w->cols);
			src = repacked;
		}
		/* the previous chunk's split has run before this copy lands (one stream) */
		ok = cuda_ok(cb, cudaMemcpyAsync(dst, src, (size_t) nr * raw_row, cudaMemcpyHostToDevice, cb->stream),
					 "cudaMemcpyAsync (weight upload)") &&
			(!split || cuda_ok(cb, llm_cuda_split_blocks(&e->mat, tmp, r0, nr, cb->stream), "kernel split_blocks")) &&
			(repacked == NULL || cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize"));
	}
	cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize");
	cudaFree(tmp);
	free(repacked);
	return ok && cb->err_status == LLM_OK;
}

/* Upload weight w into entry e (its key and layout set here). */
static bool
mat_upload(CudaBackend *cb, const LlmWeight *w, CudaEntry *e)
{
	int			layout = layout_of(w->type);
	bool		ok;

	if (layout < 0 || w->data == NULL || w->rows < 1 || w->cols < 1 ||
		((layout == CUDA_LAYOUT_Q8_0R || layout == CUDA_LAYOUT_Q4_0R) && w->cols % 32 != 0))
	{
		cuda_fail(cb, LLM_ERR_UNSUPPORTED, "the CUDA backend cannot hold weight %s of type %s (%lld x %lld)",
				  w->name != NULL ? w->name : "(unnamed)",
				  llm_type_traits(w->type) != NULL ? llm_type_traits(w->type)->name : "?",
				  (long long) w->rows, (long long) w->cols);
		return false;
	}
	if (!mat_alloc(cb, w, layout, e))
		return false;
	if (layout == CUDA_LAYOUT_Q8_0R || layout == CUDA_LAYOUT_Q4_0R)
		ok = upload_rows(cb, w, e, layout == CUDA_LAYOUT_Q8_0R || layout == CUDA_LAYOUT_Q4_0R);
	else
		ok = cuda_ok(cb, cudaMemcpyAsync(e->dev, w->data, (size_t) w->rows * w->row_bytes, cudaMemcpyHostToDevice,
										 cb->stream), "cudaMemcpyAsync (weight upload)");
	if (!ok)
	{
		cudaStreamSynchronize(cb->stream);
		cudaFree(e->dev);
		memset(e, 0, sizeof(*e));
		return false;
	}
	e->host = w->data;
	e->host_bytes = (size_t) w->rows * w->row_bytes;
	e->is_mat = true;
	cb->map_n++;
	return true;
}

/* Whether entry e holds weight w (same shape and type). */
static bool
entry_matches(const CudaEntry *e, const LlmWeight *w)
{
	return e->is_mat && e->mat.rows == w->rows && e->mat.cols == w->cols &&
		e->mat.ggml_type == (int) w->type;
}

/* The device copy of w, uploaded on first use. */
const CudaMat *
cuda_mat(CudaBackend *cb, const LlmWeight *w)
{
	CudaEntry  *e = map_find(cb, w->data);

	if (e != NULL && entry_matches(e, w))
		return &e->mat;
	if (e != NULL)
		map_remove(cb, e);
	if (!map_reserve(cb))
		return NULL;
	e = map_slot(cb, w->data);
	return mat_upload(cb, w, e) ? &e->mat : NULL;
}

/* Upload one vector of n floats for prepare (NULL vectors are skipped). */
static bool
prepare_vec(CudaBackend *cb, const float *v, int n)
{
	return v == NULL || cuda_const(cb, v, (size_t) n) != NULL;
}

/*
 * Upload every weight of m once (the prepare op): the matrices, and every
 * vector the forward pass reads (norms, Q/K/V biases, RoPE frequencies).
 * Every architecture the engine loads runs here; only an attention shape
 * the kernels do not take is refused.
 */
LlmStatus
cuda_prepare(LlmBackend *be, const LlmModel *m, LlmError *err)
{
	CudaBackend *cb = (CudaBackend *) be;
	const LlmConfig *c = &m->config;
	const LlmWeights *w = &m->weights;
	bool		ok;
	LlmStatus	st;

	if (!llm_cuda_attn_supported(c->head_dim, c->n_heads / c->n_kv_heads))
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "the CUDA backend's attention does not take heads of %d with %d query heads per KV head",
							 c->head_dim, c->n_heads / c->n_kv_heads);
	forget_host_copies(cb);	/* this model replaces what the backend held */
	ok = cuda_mat(cb, &w->tok_embd) != NULL && cuda_mat(cb, &w->output) != NULL &&
		prepare_vec(cb, w->output_norm, c->dim) &&
		prepare_vec(cb, m->rope_inv_freq, c->rope_dim / 2) && prepare_vec(cb, m->rope_inv_freq_local, c->rope_dim / 2);
	for (int l = 0; ok && l < c->n_layers; l++)
	{
		const LlmLayerWeights *lw = &w->layers[l];

		for (int i = 0; ok && i < LLM_LAYER_MATRICES; i++)
			ok = cuda_mat(cb, llm_layer_matrix_const(lw, i));
		ok = ok && prepare_vec(cb, lw->attn_norm, c->dim) && prepare_vec(cb, lw->ffn_norm, c->dim) &&
			prepare_vec(cb, lw->q_norm, c->head_dim) && prepare_vec(cb, lw->k_norm, c->head_dim) &&
			prepare_vec(cb, lw->post_attn_norm, c->dim) && prepare_vec(cb, lw->post_ffn_norm, c->dim) &&
			prepare_vec(cb, lw->bq, c->n_heads * c->head_dim) && prepare_vec(cb, lw->bk, c->n_kv_heads * c->head_dim) &&
			prepare_vec(cb, lw->bv, c->n_kv_heads * c->head_dim);
	}
	cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize (weight upload)");
	if (cb->err_status == LLM_OK)
		return LLM_OK;
	st = llm_error_set(err, cb->err_status, "could not load the model onto the GPU: %s", cb->err_msg);
	cb->err_status = LLM_OK;
	return st;
}

/* Give w pseudo-random device contents made on the device (benchmarks: nothing is read at w->data). */
LlmStatus
llm_cuda_weight_random(LlmBackend *be, const LlmWeight *w, uint64_t seed, float std, LlmError *err)
{
	CudaBackend *cb = (CudaBackend *) be;
	int			layout = layout_of(w->type);
	CudaEntry  *e;
	LlmStatus	st;

	if (!llm_cuda_is_backend(be))
		return llm_error_set(err, LLM_ERR_INVALID, "not a CUDA backend");
	if (layout != CUDA_LAYOUT_F32 && layout != CUDA_LAYOUT_F16 && layout != CUDA_LAYOUT_BF16 &&
		!(layout == CUDA_LAYOUT_Q8_0R && w->type == LLM_TYPE_Q8_0) && layout != CUDA_LAYOUT_Q4_0R)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "no random weights of this type on the device");
	if ((e = map_find(cb, w->data)) != NULL)
		map_remove(cb, e);
	if (map_reserve(cb))
	{
		e = map_slot(cb, w->data);
		if (mat_alloc(cb, w, layout, e) &&
			cuda_ok(cb, llm_cuda_fill_random(&e->mat, seed, std, cb->stream), "kernel fill_random") &&
			cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize"))
		{
			e->host = w->data;
			e->host_bytes = (size_t) w->rows * w->row_bytes;
			e->is_mat = true;
			e->device_made = true;
			cb->map_n++;
			return LLM_OK;
		}
		if (e->dev != NULL)
			cudaFree(e->dev);
		memset(e, 0, sizeof(*e));
	}
	st = llm_error_set(err, cb->err_status, "%s", cb->err_msg);
	cb->err_status = LLM_OK;
	return st;
}
