/*
 * chunks.c
 *		Running a text through the model in chunks, each a fresh sequence
 *		(llama.cpp's perplexity method): all positions of a chunk in one
 *		batch, or, with a KV budget, one position of every chunk a step with
 *		eviction after each, so every prediction sees only the kept keys.
 *		Perplexity, AWQ calibration and the eviction study run on these.
 */
#include "cpu/backend_cpu.h"
#include "forward.h"

#include <stdlib.h>
#include <string.h>

#define EVICT_MAX_SEQS 16		/* chunks run side by side under a budget */

/*
 * The token each chunk starts with: BOS when the model asks for one in front
 * of a text (as llama-perplexity does), else -1 (the chunk's own first token).
 */
static int32_t
chunk_bos(const LlmModel *m)
{
	return llm_tokenizer_add_bos(m->tokenizer) ? llm_tokenizer_bos(m->tokenizer) : -1;
}

/* Run n_chunks chunks of chunk tokens as fresh sequences (see forward.h). */
LlmStatus
llm_forward_chunks(const LlmModel *m, const int32_t *tokens, int n_chunks, int chunk,
				   int n_threads, LlmKvType kv_type, const LlmObserver *observer, bool want_logits,
				   LlmChunkFn fn, void *ctx, LlmError *err)
{
	const LlmConfig *c = &m->config;
	int32_t		bos = chunk_bos(m);
	LlmBackend *be = NULL;
	LlmKvCache	kv = {0};
	LlmKvSeq	seq = {0};
	LlmRunState rs = {0};
	int32_t    *buf = malloc((size_t) chunk * sizeof(int32_t));
	int32_t    *pos = malloc((size_t) chunk * sizeof(int32_t));
	LlmKvSeq  **seqs = malloc((size_t) chunk * sizeof(LlmKvSeq *));
	bool	   *want = malloc((size_t) chunk * sizeof(bool));
	float	   *logits = want_logits ? malloc((size_t) chunk * c->n_vocab * sizeof(float)) : NULL;
	LlmKvParams kp = {
		.n_layers = c->n_layers,.n_kv_heads = c->n_kv_heads,.head_dim = c->head_dim,
		.block_size = 16,.n_blocks = (chunk + 15) / 16,.type = kv_type,
	};
	LlmStatus	st;

	if (!buf || !pos || !seqs || !want || (want_logits && !logits))
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for chunks of %d tokens", chunk);
	else if ((st = llm_backend_cpu_new(n_threads, &be, err)) == LLM_OK &&
			 (be->ops->prepare == NULL || (st = be->ops->prepare(be, m, err)) == LLM_OK) &&
			 (st = llm_kv_init(&kv, &kp, err)) == LLM_OK &&
			 (st = llm_run_state_init(&rs, c, chunk, err)) == LLM_OK &&
			 (st = llm_kv_seq_reserve(&kv, &seq, chunk, err)) == LLM_OK)
	{
		rs.observer = observer;
		for (int j = 0; j < chunk; j++)
		{
			pos[j] = j;
			seqs[j] = &seq;
			want[j] = want_logits;
		}
		for (int k = 0; k < n_chunks && st == LLM_OK; k++)
		{
			const int32_t *tok = tokens + (size_t) k * chunk;
			LlmBatch	b = {chunk, buf, pos, seqs, want};

			memcpy(buf, tok, (size_t) chunk * sizeof(int32_t));
			if (bos >= 0)
				buf[0] = bos;
			st = llm_forward(m, be, &kv, &rs, &b, logits, err);
			if (st == LLM_OK && fn != NULL)
				fn(ctx, k, tok, logits);
		}
	}
	llm_run_state_free(&rs);
	llm_kv_seq_release(&kv, &seq);
	llm_kv_seq_free(&seq);
	llm_kv_free(&kv);
	llm_backend_free(be);
	free(buf);
	free(pos);
	free(seqs);
	free(want);
	free(logits);
	return st;
}

/* Run n_chunks chunks one position a step under an eviction rule (see forward.h). */
LlmStatus
llm_forward_chunks_evicting(const LlmModel *m, const int32_t *tokens, int n_chunks, int chunk,
							int n_threads, LlmKvType kv_type, const LlmEvictRule *rule,
							LlmTokenFn fn, void *ctx, LlmError *err)
{
	const LlmConfig *c = &m->config;
	int32_t		bos = chunk_bos(m);
	int			width = n_chunks < EVICT_MAX_SEQS ? n_chunks : EVICT_MAX_SEQS;
	int			kept = rule->budget > 0 && rule->budget < chunk ? rule->budget + 1 : chunk;
	LlmKvParams kp = {
		.n_layers = c->n_layers,.n_kv_heads = c->n_kv_heads,.head_dim = c->head_dim,
		.block_size = 16,.n_blocks = width * ((kept + 15) / 16),.type = kv_type,
		.slot_info = true,.scores = rule->by_score,
	};
	LlmBackend *be = NULL;
	LlmKvCache	kv = {0};
	LlmRunState rs = {0};
	LlmKvSeq	seq[EVICT_MAX_SEQS] = {{0}};
	LlmKvSeq   *seqs[EVICT_MAX_SEQS];
	int32_t		tok[EVICT_MAX_SEQS];
	int32_t		pos[EVICT_MAX_SEQS];
	bool		want[EVICT_MAX_SEQS];
	float	   *logits = malloc((size_t) width * c->n_vocab * sizeof(float));
	LlmKvMove  *moves = malloc((size_t) c->n_layers * c->n_kv_heads * sizeof(LlmKvMove));
	LlmStatus	st;

	if (n_chunks < 1 || chunk < 2)
		st = llm_error_set(err, LLM_ERR_INVALID, "need at least one chunk of two tokens");
	else if (!logits || !moves)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %d chunks side by side", width);
	else if ((st = llm_backend_cpu_new(n_threads, &be, err)) == LLM_OK &&
			 (be->ops->prepare == NULL || (st = be->ops->prepare(be, m, err)) == LLM_OK) &&
			 (st = llm_kv_init(&kv, &kp, err)) == LLM_OK)
		st = llm_run_state_init(&rs, c, width, err);
	for (int k0 = 0; k0 < n_chunks && st == LLM_OK; k0 += width)
	{
		int			n = n_chunks - k0 < width ? n_chunks - k0 : width;

		for (int j = 0; j < chunk - 1 && st == LLM_OK; j++)
		{
			LlmBatch	b = {n, tok, pos, seqs, want};

			for (int i = 0; i < n && st == LLM_OK; i++)
			{
				tok[i] = j == 0 && bos >= 0 ? bos : tokens[(size_t) (k0 + i) * chunk + j];
				pos[i] = j;
				seqs[i] = &seq[i];
				want[i] = true;
				st = llm_kv_seq_reserve(&kv, &seq[i], j + 1 - seq[i].n_evicted, err);
			}
			if (st == LLM_OK)
				st = llm_forward(m, be, &kv, &rs, &b, logits, err);
			for (int i = 0; i < n && st == LLM_OK; i++)
			{
				fn(ctx, k0 + i, j, tokens + (size_t) (k0 + i) * chunk, logits + (size_t) i * c->n_vocab);
				if (rule->budget > 0)
					st = llm_kv_evict_apply(be, &kv, &seq[i], j + 1 - seq[i].n_evicted, j, rule, moves, err);
			}
		}
		for (int i = 0; i < n; i++)
			llm_kv_seq_release(&kv, &seq[i]);
	}
	for (int i = 0; i < width; i++)
		llm_kv_seq_free(&seq[i]);
	llm_run_state_free(&rs);
	llm_kv_free(&kv);
	llm_backend_free(be);
	free(logits);
	free(moves);
	return st;
}
