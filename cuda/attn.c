/*
 * attn.c
 *		The CUDA backend's KV cache and attention ops, host side: the pool's
 *		device storage, the step's batch facts (positions, slots, block
 *		tables) uploaded once per step, the bookkeeping kv_store owes the
 *		host (slot_pos, zeroed scores, as cpu/kv_ops.c), and the plan of an
 *		attention call -- which tokens take the tiled prefill kernel (runs of
 *		one sequence's consecutive tokens), which the split-K decode kernel
 *		and into how many key ranges, the window's slot positions and the
 *		H2O sums to bring back (attention.cu has the kernels).
 */
#include "backend_cuda.h"

#include <stdlib.h>
#include <string.h>

#define PREFILL_MIN_RUN 4		/* a run this long takes the tiled kernel */
#define SPLIT_MIN_KEYS 32		/* keys per range at least (one tile), when splitting */
#define MAX_SPLITS 64

/* Free every pool's device storage. */
void
cuda_kv_free(CudaBackend *cb)
{
	for (int i = 0; i < CUDA_MAX_KV_STORES; i++)
	{
		cudaFree(cb->kv[i].mem);
		memset(&cb->kv[i], 0, sizeof(CudaKvStore));
	}
}

/* Whether store s was made for kv as it is now. */
static bool
store_matches(const CudaKvStore *s, const LlmKvCache *kv)
{
	return s->owner == kv && s->mem != NULL && s->n_layers == kv->n_layers && s->dev.n_kv_heads == kv->n_kv_heads &&
		s->dev.head_dim == kv->head_dim && s->dev.block_size == kv->block_size &&
		s->dev.n_blocks == kv->n_blocks && s->dev.type == (int) kv->type;
}

/* The device storage of kv, allocated (and zeroed) at its first use. */
static CudaKvStore *
kv_store_of(CudaBackend *cb, const LlmKvCache *kv)
{
	CudaKvStore *s = NULL;
	size_t		rows = (size_t) kv->n_layers * kv->n_blocks * kv->block_size;
	size_t		data = rows * kv->kv_dim * kv->elem_size;
	size_t		scales = kv->type == LLM_KV_I8 ? rows * kv->n_kv_heads * sizeof(float) : 0;
	size_t		data_al = (data + 255) & ~(size_t) 255;
	size_t		scales_al = (scales + 255) & ~(size_t) 255;
	char		call[200];
	uint8_t    *mem;

	for (int i = 0; i < CUDA_MAX_KV_STORES; i++)
		if (store_matches(&cb->kv[i], kv))
			return &cb->kv[i];
	/* a free place, else one for the same pool (reshaped), else the first */
	for (int i = 0; s == NULL && i < CUDA_MAX_KV_STORES; i++)
		if (cb->kv[i].mem == NULL || cb->kv[i].owner == kv)
			s = &cb->kv[i];
	if (s == NULL)
		s = &cb->kv[0];
	if (s->mem != NULL)
	{
		cudaStreamSynchronize(cb->stream);
		cudaFree(s->mem);
	}
	memset(s, 0, sizeof(*s));
	snprintf(call, sizeof(call), "cudaMalloc of %zu MB for the KV cache (%d blocks; lower llm.kv_cache_mb)",
			 ((2 * (data_al + scales_al)) >> 20) + 1, kv->n_blocks);
	if (!cuda_ok(cb, cudaMalloc((void **) &mem, 2 * (data_al + scales_al)), call))
		return NULL;
	if (!cuda_ok(cb, cudaMemsetAsync(mem, 0, 2 * (data_al + scales_al), cb->stream), "cudaMemsetAsync (KV cache)"))
	{
		cudaFree(mem);
		return NULL;
	}
	s->owner = kv;
	s->n_layers = kv->n_layers;
	s->mem = mem;
	s->bytes = 2 * (data_al + scales_al);
	s->dev.type = kv->type;
	s->dev.n_kv_heads = kv->n_kv_heads;
	s->dev.head_dim = kv->head_dim;
	s->dev.kv_dim = kv->kv_dim;
	s->dev.block_size = kv->block_size;
	s->dev.n_blocks = kv->n_blocks;
	s->dev.elem_size = (int) kv->elem_size;
	s->dev.k = mem;
	s->dev.v = mem + data_al;
	s->dev.k_scale = scales > 0 ? (float *) (mem + 2 * data_al) : NULL;
	s->dev.v_scale = scales > 0 ? (float *) (mem + 2 * data_al + scales_al) : NULL;
	return s;
}

/* The device positions of pos (n), uploaded once per step. */
const int32_t *
cuda_step_positions(CudaBackend *cb, const int32_t *pos, int n)
{
	CudaStep   *st = &cb->step;

	if (st->rope_pos == pos && st->rope_n == n && st->rope_pos_d != NULL)
		return st->rope_pos_d;
	st->rope_pos_d = cuda_upload_i32(cb, pos, (size_t) n);
	st->rope_pos = st->rope_pos_d != NULL ? pos : NULL;
	st->rope_n = n;
	return st->rope_pos_d;
}

/* The step's token facts and block tables, uploaded at the first use in a step. */
static bool
step_facts(CudaBackend *cb, LlmKvSeq *const *seq, const int32_t *pos, int n)
{
	CudaStep   *st = &cb->step;
	size_t		n_table = 0;
	int32_t    *h;
	uint8_t    *d;
	size_t		bytes;
	int			table = 0;

	if (st->valid && st->seq == seq && st->pos == pos && st->n == n)
		return true;
	st->valid = false;
	st->plan_valid = false;
	if (n > st->tok_cap)
	{
		int32_t    *t = realloc(st->tok_h, (size_t) n * CUDA_TOK_FIELDS * sizeof(int32_t));

		if (t == NULL)
		{
			cuda_fail(cb, LLM_ERR_NOMEM, "out of memory for a step of %d tokens", n);
			return false;
		}
		st->tok_h = t;
		st->tok_cap = n;
	}
	for (int i = 0; i < n; i++)
		if (i == 0 || seq[i] != seq[i - 1])
			n_table += (size_t) seq[i]->n_blocks;
	bytes = ((size_t) n * CUDA_TOK_FIELDS + n_table) * sizeof(int32_t);
	if ((d = cuda_stage(cb, bytes, (void **) &h)) == NULL)
		return false;
	/* the facts, then the block tables: a sequence's once per run of its tokens */
	n_table = 0;
	for (int i = 0; i < n; i++)
	{
		int32_t    *t = st->tok_h + (size_t) i * CUDA_TOK_FIELDS;

		if (i == 0 || seq[i] != seq[i - 1])
		{
			table = (int) n_table;
			memcpy(h + (size_t) n * CUDA_TOK_FIELDS + n_table, seq[i]->blocks,
				   (size_t) seq[i]->n_blocks * sizeof(int32_t));
			n_table += (size_t) seq[i]->n_blocks;
		}
		t[CUDA_TOK_POS] = pos[i];
		t[CUDA_TOK_SLOT] = pos[i] - seq[i]->n_evicted;
		t[CUDA_TOK_TABLE] = table;
		t[CUDA_TOK_EVICTED] = seq[i]->n_evicted;
	}
	memcpy(h, st->tok_h, (size_t) n * CUDA_TOK_FIELDS * sizeof(int32_t));
	if (!cuda_stage_push(cb, d, bytes))
		return false;
	st->tok_d = (const int32_t *) d;
	st->blocks_d = (const int32_t *) d + (size_t) n * CUDA_TOK_FIELDS;
	st->seq = seq;
	st->pos = pos;
	st->n = n;
	st->valid = true;
	return true;
}

/* Store k and v (n, kv_dim) of layer in their slots; note slot positions and zero scores on the host. */
void
cuda_kv_store(LlmBackend *be, LlmKvCache *kv, int layer, LlmKvSeq *const *seq, const int32_t *pos,
			  const float *k, const float *v, int n)
{
	CudaBackend *cb = (CudaBackend *) be;
	CudaKvStore *s;

	if (cb->err_status != LLM_OK || n < 1 || (s = kv_store_of(cb, kv)) == NULL || !step_facts(cb, seq, pos, n))
		return;
	for (int i = 0; i < n; i++)
	{
		int			slot = pos[i] - seq[i]->n_evicted;

		for (int h = 0; h < kv->n_kv_heads; h++)
		{
			if (kv->slot_info)
				seq[i]->slot_pos[llm_kv_info_index(kv, slot, layer, h)] = pos[i];
			if (kv->scores)
				seq[i]->score[llm_kv_info_index(kv, slot, layer, h)] = 0.0f;
		}
	}
	cuda_ok(cb, llm_cuda_kv_store(&s->dev, layer, cb->step.tok_d, cb->step.blocks_d, k, v, n, cb->stream),
			"kernel kv_store");
}

/* Apply n key/value moves of seq (an eviction's compaction) on the device. */
void
cuda_kv_move(LlmBackend *be, LlmKvCache *kv, const LlmKvSeq *seq, const LlmKvMove *moves, int n)
{
	CudaBackend *cb = (CudaBackend *) be;
	CudaKvStore *s;
	int32_t    *h;
	void	   *d;

	if (cb->err_status != LLM_OK || n < 1 || (s = kv_store_of(cb, kv)) == NULL ||
		(d = cuda_stage(cb, (size_t) n * 4 * sizeof(int32_t), (void **) &h)) == NULL)
		return;
	for (int i = 0; i < n; i++)
	{
		h[4 * i] = moves[i].layer;
		h[4 * i + 1] = moves[i].head;
		h[4 * i + 2] = (int32_t) llm_kv_row(kv, seq, moves[i].layer, moves[i].from);
		h[4 * i + 3] = (int32_t) llm_kv_row(kv, seq, moves[i].layer, moves[i].to);
	}
	if (cuda_stage_push(cb, d, (size_t) n * 4 * sizeof(int32_t)))
		cuda_ok(cb, llm_cuda_kv_move(&s->dev, d, n, cb->stream), "kernel kv_move");
}

/*
 * The step's plan for a head shape: decode tokens and their key ranges,
 * prefill tiles, runs of one sequence (H2O sums); uploaded once per step.
 */
static bool
step_plan(CudaBackend *cb, const LlmAttnArgs *a)
{
	CudaStep   *st = &cb->step;
	int			group = a->n_heads / a->n_kv_heads;
	/* deterministic: every token by the decode kernel over one key range, as it would run alone */
	int			tile = cb->base.deterministic ? 0 : llm_cuda_attn_tile_tokens(group, a->head_dim);
	int			n = a->n;
	int32_t    *h;
	int32_t    *dec;
	int32_t    *tiles;
	int32_t    *runs;
	uint8_t    *d;
	size_t		bytes;
	int			max_len = 1;
	size_t		off = 0;

	if (st->plan_valid && st->plan_group == group && st->plan_hd == a->head_dim)
		return true;
	/* room for the worst case: every token decodes, or tiles, or runs alone */
	bytes = (size_t) (n + 2 * n + 4 * n) * sizeof(int32_t);
	if (n > st->runs_cap)
	{
		int32_t    *r = realloc(st->runs_h, (size_t) n * 4 * sizeof(int32_t));

		if (r == NULL)
		{
			cuda_fail(cb, LLM_ERR_NOMEM, "out of memory planning attention for %d tokens", n);
			return false;
		}
		st->runs_h = r;
		st->runs_cap = n;
	}
	if ((d = cuda_stage(cb, bytes, (void **) &h)) == NULL)
		return false;
	dec = h;
	tiles = h + n;
	runs = h + 3 * n;
	st->n_dec = st->n_tiles = st->n_runs = 0;
	st->max_width = 0;
	for (int i = 0; i < n;)
	{
		int			j = i;
		int			width = 0;

		while (j < n && a->seq[j] == a->seq[i])
			j++;
		/* the run [i, j): its H2O sums cover slots 0 .. its widest token's last slot */
		for (int k = i; k < j; k++)
			if (st->tok_h[(size_t) k * CUDA_TOK_FIELDS + CUDA_TOK_SLOT] + 1 > width)
				width = st->tok_h[(size_t) k * CUDA_TOK_FIELDS + CUDA_TOK_SLOT] + 1;
		runs[4 * st->n_runs] = i;
		runs[4 * st->n_runs + 1] = j - i;
		runs[4 * st->n_runs + 2] = (int32_t) off;
		runs[4 * st->n_runs + 3] = width;
		st->n_runs++;
		off += (size_t) a->n_kv_heads * width;
		if (width > st->max_width)
			st->max_width = width;
		if (tile > 0 && j - i >= PREFILL_MIN_RUN)
			for (int k = i; k < j; k += tile)
			{
				tiles[2 * st->n_tiles] = k;
				tiles[2 * st->n_tiles + 1] = j - k < tile ? j - k : tile;
				st->n_tiles++;
			}
		else
			for (int k = i; k < j; k++)
			{
				int			len = st->tok_h[(size_t) k * CUDA_TOK_FIELDS + CUDA_TOK_SLOT] + 1;

				dec[st->n_dec++] = k;
				if (len > max_len)
					max_len = len;
			}
		i = j;
	}
	memcpy(st->runs_h, runs, (size_t) st->n_runs * 4 * sizeof(int32_t));
	st->delta_floats = off;
	/* key ranges: enough blocks to fill the GPU twice, none shorter than SPLIT_MIN_KEYS */
	st->n_splits = 1;
	if (st->n_dec > 0 && !cb->base.deterministic)
	{
		int			blocks = st->n_dec * a->n_kv_heads;
		int			want = (2 * cb->sm_count + blocks - 1) / blocks;
		int			most = (max_len + SPLIT_MIN_KEYS - 1) / SPLIT_MIN_KEYS;

		st->n_splits = want < most ? want : most;
		if (st->n_splits > MAX_SPLITS)
			st->n_splits = MAX_SPLITS;
		if (st->n_splits < 1)
			st->n_splits = 1;
	}
	if (!cuda_stage_push(cb, d, bytes))
		return false;
	st->dec_d = (const int32_t *) d;
	st->tiles_d = (const int32_t *) d + n;
	st->runs_d = (const int32_t *) d + 3 * n;
	st->plan_group = group;
	st->plan_hd = a->head_dim;
	st->plan_valid = true;
	return true;
}

/*
 * The window's slot positions of this layer for the tokens that need them
 * (a sliding-window layer, a sequence that evicted): per run, slots 0 ..
 * width - 1 of every KV head; spos_off per token.  False on failure.
 */
static bool
stage_slot_positions(CudaBackend *cb, const LlmKvCache *kv, int layer, const LlmAttnArgs *a,
					 const int32_t **off_d, const int32_t **spos_d)
{
	CudaStep   *st = &cb->step;
	size_t		total = 0;
	int32_t    *h;
	uint8_t    *d;
	size_t		at = 0;

	*off_d = *spos_d = NULL;
	if (a->window <= 0 || !kv->slot_info)
		return true;
	for (int r = 0; r < st->n_runs; r++)
		if (a->seq[st->runs_h[4 * r]]->n_evicted > 0)
			total += (size_t) st->runs_h[4 * r + 3] * kv->n_kv_heads;
	if (total == 0)
		return true;
	if ((d = cuda_stage(cb, ((size_t) a->n + total) * sizeof(int32_t), (void **) &h)) == NULL)
		return false;
	for (int r = 0; r < st->n_runs; r++)
	{
		int			first = st->runs_h[4 * r];
		int			count = st->runs_h[4 * r + 1];
		int			width = st->runs_h[4 * r + 3];
		const LlmKvSeq *seq = a->seq[first];
		int32_t    *dst = h + a->n + at;

		for (int k = first; k < first + count; k++)
			h[k] = seq->n_evicted > 0 ? (int32_t) at : -1;
		if (seq->n_evicted == 0)
			continue;
		for (int j = 0; j < width; j++)
			for (int g = 0; g < kv->n_kv_heads; g++)
				dst[(size_t) j * kv->n_kv_heads + g] = seq->slot_pos[llm_kv_info_index(kv, j, layer, g)];
		at += (size_t) width * kv->n_kv_heads;
	}
	if (!cuda_stage_push(cb, d, ((size_t) a->n + total) * sizeof(int32_t)))
		return false;
	*off_d = (const int32_t *) d;
	*spos_d = (const int32_t *) d + a->n;
	return true;
}

/* Attention of layer over the paged cache, with H2O sums when the batch keeps scores. */
void
cuda_attention(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a)
{
	CudaBackend *cb = (CudaBackend *) be;
	CudaStep   *st = &cb->step;
	CudaKvStore *s;
	CudaAttn	c;
	bool		scores = a->seq[0]->score != NULL;
	size_t		part_floats;
	size_t		ml_floats;
	float	   *work;

	if (cb->err_status != LLM_OK || a->n < 1)
		return;
	if (!llm_cuda_attn_supported(a->head_dim, a->n_heads / a->n_kv_heads))
	{
		cuda_fail(cb, LLM_ERR_UNSUPPORTED, "the CUDA backend's attention does not take heads of %d with %d query heads per KV head",
				  a->head_dim, a->n_heads / a->n_kv_heads);
		return;
	}
	if ((s = kv_store_of(cb, kv)) == NULL || !step_facts(cb, a->seq, a->pos, a->n) || !step_plan(cb, a))
		return;
	memset(&c, 0, sizeof(c));
	c.kv = s->dev;
	c.layer = layer;
	c.n = a->n;
	c.q = a->q;
	c.out = a->out;
	c.n_heads = a->n_heads;
	c.n_kv_heads = a->n_kv_heads;
	c.head_dim = a->head_dim;
	c.scale = a->scale;
	c.softcap = a->softcap;
	c.window = a->window;
	c.tok = st->tok_d;
	c.blocks = st->blocks_d;
	if (!stage_slot_positions(cb, kv, layer, a, &c.spos_off, &c.spos))
		return;
	/* window masks need slot positions: a pool without them never evicts, so none is missing */
	c.n_dec = st->n_dec;
	c.dec = st->dec_d;
	c.n_splits = st->n_splits;
	c.n_tiles = st->n_tiles;
	c.tiles = st->tiles_d;
	c.n_runs = st->n_runs;
	c.runs = st->runs_d;
	c.max_width = st->max_width;

	/* workspace: split partials, then (m, l) and the H2O sums when scoring */
	part_floats = c.n_splits > 1 ? (size_t) c.n_dec * a->n_heads * c.n_splits * (a->head_dim + 2) : 0;
	ml_floats = scores ? (size_t) a->n * a->n_heads * 2 : 0;
	work = cuda_scratch(cb, &cb->work, (part_floats + ml_floats + (scores ? st->delta_floats : 0) + 64) * sizeof(float),
						"attention workspace");
	if (work == NULL)
		return;
	c.part = part_floats > 0 ? work : NULL;
	c.ml = scores ? work + part_floats : NULL;
	c.delta = scores ? work + part_floats + ml_floats : NULL;
	if (!cuda_ok(cb, llm_cuda_attention(&c, cb->stream), "kernel attention"))
		return;

	/* H2O: bring the sums back; sync adds them to the host scores */
	if (scores)
	{
		const float *sums = cuda_readback(cb, c.delta, st->delta_floats * sizeof(float));

		for (int r = 0; sums != NULL && r < st->n_runs; r++)
			if (!cuda_queue_score_add(cb, kv, a->seq[st->runs_h[4 * r]], layer, st->runs_h[4 * r + 3],
									  sums + st->runs_h[4 * r + 2]))
				return;
	}
}

/* Copy kv's device storage into host buffers laid out as a host pool's (tests). */
LlmStatus
llm_cuda_kv_download(LlmBackend *be, const LlmKvCache *kv, void *k, void *v, float *k_scale, float *v_scale,
					 LlmError *err)
{
	CudaBackend *cb = (CudaBackend *) be;
	CudaKvStore *s;
	size_t		rows = (size_t) kv->n_layers * kv->n_blocks * kv->block_size;
	LlmStatus	st;

	if (!llm_cuda_is_backend(be))
		return llm_error_set(err, LLM_ERR_INVALID, "not a CUDA backend");
	if ((s = kv_store_of(cb, kv)) != NULL &&
		cuda_ok(cb, cudaMemcpyAsync(k, s->dev.k, rows * kv->kv_dim * kv->elem_size, cudaMemcpyDeviceToHost, cb->stream), "cudaMemcpyAsync") &&
		cuda_ok(cb, cudaMemcpyAsync(v, s->dev.v, rows * kv->kv_dim * kv->elem_size, cudaMemcpyDeviceToHost, cb->stream), "cudaMemcpyAsync") &&
		(kv->type != LLM_KV_I8 ||
		 (cuda_ok(cb, cudaMemcpyAsync(k_scale, s->dev.k_scale, rows * kv->n_kv_heads * sizeof(float), cudaMemcpyDeviceToHost, cb->stream), "cudaMemcpyAsync") &&
		  cuda_ok(cb, cudaMemcpyAsync(v_scale, s->dev.v_scale, rows * kv->n_kv_heads * sizeof(float), cudaMemcpyDeviceToHost, cb->stream), "cudaMemcpyAsync"))))
		cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize");
	if (cb->err_status == LLM_OK)
		return LLM_OK;
	st = llm_error_set(err, cb->err_status, "%s", cb->err_msg);
	cb->err_status = LLM_OK;
	return st;
}
