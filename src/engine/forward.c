/*
 * forward.c
 *		The decoder's forward pass over a batch of tokens (see forward.h).
 *
 * It reads top to bottom like the papers: embed; per layer, RMSNorm, the
 * Q/K/V projections, RoPE, store K/V in the paged cache, attention, the
 * output projection and residual; RMSNorm, the gated FFN and residual; a
 * final RMSNorm and the vocabulary projection for the tokens that want
 * logits.  Every weight is applied to the whole batch at once (one matmul
 * per weight per step), and every op goes through the backend's table.
 *
 * Four steps go through the table's optional fused ops (backend.h's
 * llm_be_*): Q, K and V as one multi-matrix matmul, gate and up with the
 * GLU, RoPE of q and k, and each residual add with the RMSNorm that reads
 * its sum next.  That norm is the next block's: the attention residual
 * with the FFN norm, the FFN residual with the next layer's attention norm
 * (so layer 0's attention norm comes right after the embeddings, and the
 * last layer's residual is a plain add, followed by the gather of the rows
 * that want logits and the output norm).
 */
#include "forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Free the activation buffers (and device logits) wherever they live; the host want_rows stays. */
static void
run_state_free_buffers(LlmRunState *s)
{
	float	  **bufs[] = {&s->x, &s->xb, &s->xb2, &s->q, &s->k, &s->v, &s->att, &s->hb, &s->hb2, &s->xo,
	&s->logits};

	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
	{
		if (s->be != NULL)
			s->be->ops->free(s->be, *bufs[i]);
		else
			free(*bufs[i]);
		*bufs[i] = NULL;
	}
	s->logits_rows = 0;
	s->be = NULL;
}

/*
 * Allocate the activation buffers for max_tokens tokens with be's alloc
 * (be NULL: malloc); false when out of memory, with nothing held.
 */
static bool
run_state_alloc_buffers(LlmRunState *s, LlmBackend *be)
{
	float	  **bufs[] = {&s->x, &s->xb, &s->xb2, &s->q, &s->k, &s->v, &s->att, &s->hb, &s->hb2, &s->xo};
	int			widths[] = {s->dim, s->dim, s->dim, s->q_dim, s->kv_dim, s->kv_dim, s->q_dim, s->ffn_dim,
	s->ffn_dim, s->dim};
	bool		ok = true;

	s->be = be;
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
	{
		size_t		bytes = (size_t) s->max_tokens * widths[i] * sizeof(float);

		*bufs[i] = be != NULL ? be->ops->alloc(be, bytes) : malloc(bytes);
		ok = ok && *bufs[i] != NULL;
	}
	if (!ok)
		run_state_free_buffers(s);
	return ok;
}

/* Allocate activation buffers for up to max_tokens tokens a step. */
LlmStatus
llm_run_state_init(LlmRunState *s, const LlmConfig *c, int max_tokens, LlmError *err)
{
	memset(s, 0, sizeof(*s));
	if (max_tokens < 1)
		return llm_error_set(err, LLM_ERR_INVALID, "a step must hold at least one token, got %d", max_tokens);
	s->max_tokens = max_tokens;
	s->dim = c->dim;
	s->q_dim = c->n_heads * c->head_dim;
	s->kv_dim = c->n_kv_heads * c->head_dim;
	s->ffn_dim = c->ffn_dim;
	s->n_vocab = c->n_vocab;
	s->want_rows = malloc((size_t) max_tokens * sizeof(int32_t));
	if (s->want_rows == NULL || !run_state_alloc_buffers(s, NULL))
	{
		llm_run_state_free(s);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for activations of %d tokens", max_tokens);
	}
	return LLM_OK;
}

/* Free the activation buffers (through the backend that holds them); safe on a zeroed struct. */
void
llm_run_state_free(LlmRunState *s)
{
	run_state_free_buffers(s);
	free(s->want_rows);
	memset(s, 0, sizeof(*s));
}

/*
 * Make s's buffers usable by be: a backend with device memory gets them in
 * its own memory (moved there on first use), with room for n_out rows of
 * logits.
 */
static LlmStatus
run_state_bind(LlmRunState *s, LlmBackend *be, int n_out, LlmError *err)
{
	if (be->device_memory && s->be != be)
	{
		run_state_free_buffers(s);
		if (!run_state_alloc_buffers(s, be))
			return llm_error_set(err, LLM_ERR_NOMEM, "out of %s memory for activations of %d tokens",
								 be->ops->name, s->max_tokens);
	}
	if (s->x == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "no activation buffers (an earlier allocation failed)");
	if (be->device_memory && n_out > s->logits_rows)
	{
		be->ops->free(be, s->logits);
		s->logits_rows = 0;
		s->logits = be->ops->alloc(be, (size_t) n_out * s->n_vocab * sizeof(float));
		if (s->logits == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of %s memory for the logits of %d tokens",
								 be->ops->name, n_out);
		s->logits_rows = n_out;
	}
	return LLM_OK;
}

/* Per-head RMSNorm of x (n * n_heads rows of head_dim), in place (gemma3's and qwen3's Q/K norm). */
static void
head_norm(LlmBackend *be, const LlmConfig *c, float *x, int n, int n_heads, const float *w)
{
	be->ops->rmsnorm(be, x, w, x, n * n_heads, c->head_dim, c->rms_eps, c->norm_add_one);
}

/* Show the run state's observer, if any, the input x (n, width) of layer's matmuls which. */
static inline void
observe(const LlmRunState *s, int layer, LlmMatmulInput which, const float *x, int n, int width)
{
	if (s->observer != NULL)
		s->observer->input(s->observer->ctx, layer, which, x, n, width);
}

/* Run batch b through the model; logits (n_want, n_vocab) for the tokens that want them. */
LlmStatus
llm_forward(const LlmModel *m, LlmBackend *be, LlmKvCache *kv, LlmRunState *s,
			const LlmBatch *b, float *logits, LlmError *err)
{
	const LlmConfig *c = &m->config;
	const LlmWeights *w = &m->weights;
	const LlmBackendOps *ops = be->ops;
	int			n = b->n;
	int			dim = c->dim;
	int			n_out = 0;
	LlmStatus	st;

	if (n < 1 || n > s->max_tokens)
		return llm_error_set(err, LLM_ERR_INVALID, "batch of %d tokens, expected 1 to %d", n, s->max_tokens);
	for (int i = 0; i < n; i++)
		if (b->token[i] < 0 || b->token[i] >= c->n_vocab)
			return llm_error_set(err, LLM_ERR_INVALID, "token id %d is outside the vocabulary (%d)",
								 b->token[i], c->n_vocab);
	if (s->observer != NULL && be->device_memory)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "an observed forward pass runs on the CPU backend only");
	for (int l = 0; l < c->n_layers && ops->add_bias == NULL; l++)
		if (w->layers[l].bq != NULL)
			return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the %s backend does not support Q/K/V biases", ops->name);
	for (int i = 0; i < n; i++)
		if (b->want_logits[i])
			s->want_rows[n_out++] = i;
	if ((st = run_state_bind(s, be, n_out, err)) != LLM_OK)
		return st;

	/* token embeddings: x (n, dim); the first layer's attention norm: xb = rmsnorm(x) */
	ops->get_rows(be, &w->tok_embd, b->token, n, c->embd_scale, s->x);
	ops->rmsnorm(be, s->x, w->layers[0].attn_norm, s->xb, n, dim, c->rms_eps, c->norm_add_one);

	for (int l = 0; l < c->n_layers; l++)
	{
		const LlmLayerWeights *lw = &w->layers[l];
		const float *inv_freq = lw->is_local ? m->rope_inv_freq_local : m->rope_inv_freq;
		const LlmWeight *qkv_w[3] = {&lw->wq, &lw->wk, &lw->wv};
		float	   *qkv_y[3] = {s->q, s->k, s->v};
		LlmAttnArgs attn = {
			.n = n,.q = s->q,.out = s->att,.seq = b->seq,.pos = b->pos,
			.n_heads = c->n_heads,.n_kv_heads = c->n_kv_heads,.head_dim = c->head_dim,
			.scale = c->attn_scale,.softcap = c->attn_softcap,
			.window = lw->is_local ? c->sliding_window : 0,
		};

		/* attention: q, k, v = xb Wq, xb Wk, xb Wv, xb = rmsnorm(x) from the step before */
		observe(s, l, LLM_INPUT_ATTN, s->xb, n, dim);
		llm_be_matmul_multi(be, qkv_w, s->xb, qkv_y, 3, n);
		if (lw->bq != NULL)
		{
			/* qwen2: q, k, v += their biases, token by token */
			ops->add_bias(be, s->q, lw->bq, n, c->n_heads * c->head_dim);
			ops->add_bias(be, s->k, lw->bk, n, c->n_kv_heads * c->head_dim);
			ops->add_bias(be, s->v, lw->bv, n, c->n_kv_heads * c->head_dim);
		}
		if (lw->q_norm != NULL)
			head_norm(be, c, s->q, n, c->n_heads, lw->q_norm);
		if (lw->k_norm != NULL)
			head_norm(be, c, s->k, n, c->n_kv_heads, lw->k_norm);

		/* rotary position embedding of q and k; keys are cached rotated */
		llm_be_rope_qk(be, s->q, c->n_heads, s->k, c->n_kv_heads, b->pos, n, c->head_dim, c->rope_dim, inv_freq,
					   c->rope_mode);
		ops->kv_store(be, kv, l, b->seq, b->pos, s->k, s->v, n);

		/* softmax(q k^T * scale) v over each token's cached positions, then Wo */
		ops->attention(be, kv, l, &attn);
		observe(s, l, LLM_INPUT_WO, s->att, n, c->n_heads * c->head_dim);
		ops->matmul(be, &lw->wo, s->att, s->xb2, n);
		if (lw->post_attn_norm != NULL)
			ops->rmsnorm(be, s->xb2, lw->post_attn_norm, s->xb2, n, dim, c->rms_eps, c->norm_add_one);

		/* residual, and the feed-forward's norm: x += xb2; xb = rmsnorm(x) */
		llm_be_add_rmsnorm(be, s->x, s->xb2, lw->ffn_norm, s->xb, n, dim, c->rms_eps, c->norm_add_one);

		/* feed-forward: xb2 = W_down (act(xb W_gate) * xb W_up) */
		observe(s, l, LLM_INPUT_FFN, s->xb, n, dim);
		llm_be_matmul_glu(be, &lw->w_gate, &lw->w_up, s->xb, s->hb, s->hb2, n, c->act);
		observe(s, l, LLM_INPUT_DOWN, s->hb, n, c->ffn_dim);
		ops->matmul(be, &lw->w_down, s->hb, s->xb2, n);
		if (lw->post_ffn_norm != NULL)
			ops->rmsnorm(be, s->xb2, lw->post_ffn_norm, s->xb2, n, dim, c->rms_eps, c->norm_add_one);

		/* residual, and the next layer's attention norm: x += xb2; xb = rmsnorm(x) (the last: only the add) */
		if (l + 1 < c->n_layers)
			llm_be_add_rmsnorm(be, s->x, s->xb2, w->layers[l + 1].attn_norm, s->xb, n, dim, c->rms_eps,
							   c->norm_add_one);
		else
			ops->add(be, s->x, s->xb2, (int64_t) n * dim);
	}

	if (s->observer != NULL && s->observer->step_done != NULL)
		s->observer->step_done(s->observer->ctx, n);

	/*
	 * final norm and vocabulary projection, only for the rows that want
	 * logits (host logits, through to_host): gather them, then normalise
	 */
	if (n_out > 0)
	{
		float	   *out = be->device_memory ? s->logits : logits;	/* (n_out, n_vocab) */

		ops->gather_rows(be, s->x, s->want_rows, n_out, dim, s->xb);
		ops->rmsnorm(be, s->xb, w->output_norm, s->xo, n_out, dim, c->rms_eps, c->norm_add_one);
		ops->matmul(be, &w->output, s->xo, out, n_out);
		if (c->final_softcap > 0.0f)
			ops->softcap(be, out, (int64_t) n_out * c->n_vocab, c->final_softcap);
		if (out != logits)
			ops->to_host(be, logits, out, (size_t) n_out * c->n_vocab * sizeof(float));
	}
	/* an asynchronous backend's errors surface here, naming the call that failed */
	return ops->sync(be, err);
}
