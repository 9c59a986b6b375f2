/*
 * draft_model.c
 *		The draft model's passes (see draft_model.h): catch each drafting
 *		sequence up on the tokens it has not read, then choose its next
 *		tokens greedily, one pass per drafted token for every sequence at
 *		once.
 *
 * The drafter belongs to its engine and runs on the engine's thread, between
 * the engine's own steps; nothing here is shared.
 */
#include "draft_model.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/backend_cpu.h"
#include "forward.h"
#include "pace.h"
#include "tokenizer.h"

#define DRAFT_KV_MAX_BYTES ((size_t) 256 << 20)	/* the draft's KV pool, at most */

struct LlmDraftModel
{
	const LlmModel *model;
	LlmBackend *be;
	LlmKvCache	kv;
	LlmRunState run;
	int			max_tokens;		/* tokens a pass, at most */
	int			max_rows;		/* logits rows a pass, at most (a row a sequence) */
	int			n_ctx;			/* positions a sequence may hold */
	float	   *logits;			/* (max_rows, n_vocab) */
	int32_t    *b_token;		/* (max_tokens) a pass's batch */
	int32_t    *b_pos;
	LlmKvSeq  **b_seq;
	bool	   *b_want;
	int		   *b_job;			/* (max_tokens) the job of each token */
};

/* Whether draft's vocabulary is target's, token for token; else why, in err. */
static LlmStatus
same_vocabulary(const LlmModel *target, const LlmModel *draft, LlmError *err)
{
	int			n = llm_tokenizer_n_vocab(target->tokenizer);

	if (llm_tokenizer_n_vocab(draft->tokenizer) != n)
		return llm_error_set(err, LLM_ERR_INVALID,
							 "the draft model's vocabulary has %d tokens, the model's %d: a draft model must share the model's vocabulary",
							 llm_tokenizer_n_vocab(draft->tokenizer), n);
	for (int t = 0; t < n; t++)
	{
		size_t		la = 0,
					lb = 0;
		const char *a = llm_token_piece(target->tokenizer, t, &la);
		const char *b = llm_token_piece(draft->tokenizer, t, &lb);

		if (la != lb || (la > 0 && memcmp(a, b, la) != 0))
			return llm_error_set(err, LLM_ERR_INVALID,
								 "token %d is \"%.*s\" in the draft model and \"%.*s\" in the model: a draft model must share the model's vocabulary",
								 t, (int) (lb < 40 ? lb : 40), b ? b : "", (int) (la < 40 ? la : 40), a ? a : "");
	}
	return LLM_OK;
}

/* A drafter for target on draft (draft_model.h). */
LlmStatus
llm_draft_model_new(const LlmModel *target, const LlmModel *draft, const LlmEngineConfig *cfg,
					const LlmBackendOptions *bo, LlmBackend *beside, LlmDraftModel **out, LlmError *err)
{
	const LlmConfig *mc = &draft->config;
	LlmDraftModel *d;
	LlmKvParams kp;
	size_t		block_bytes;
	int			per_seq;
	LlmStatus	st;

	*out = NULL;
	if ((st = same_vocabulary(target, draft, err)) != LLM_OK)
		return st;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the draft model");
	d->model = draft;
	d->max_tokens = cfg->max_batch_tokens;
	d->max_rows = cfg->max_seqs < cfg->max_batch_tokens ? cfg->max_seqs : cfg->max_batch_tokens;
	d->n_ctx = cfg->n_ctx > 0 && cfg->n_ctx < mc->n_ctx ? cfg->n_ctx : mc->n_ctx;
	block_bytes = llm_kv_block_bytes(mc->n_layers, mc->n_kv_heads, mc->head_dim, cfg->kv_block_size, cfg->kv_type);
	per_seq = (d->n_ctx + cfg->kv_block_size - 1) / cfg->kv_block_size;
	kp = (LlmKvParams) {
		.n_layers = mc->n_layers,.n_kv_heads = mc->n_kv_heads,.head_dim = mc->head_dim,
		.block_size = cfg->kv_block_size,.type = cfg->kv_type,
		.n_blocks = (int) ((size_t) per_seq * cfg->max_seqs * block_bytes > DRAFT_KV_MAX_BYTES ?
						   DRAFT_KV_MAX_BYTES / block_bytes : (size_t) per_seq * cfg->max_seqs),
	};
	if (kp.n_blocks < 1)
		kp.n_blocks = 1;
	/* on the CPU, the target's threads (a pool of its own would spin while the target computes) */
	if ((st = beside->device_memory ? llm_backend_new(cfg->device, bo, &d->be, err) :
		 llm_backend_cpu_new_on(beside->pool, &d->be, err)) != LLM_OK ||
		(d->be->ops->prepare != NULL && (st = d->be->ops->prepare(d->be, draft, err)) != LLM_OK))
	{
		llm_draft_model_free(d);
		return st;
	}
	kp.device_storage = d->be->device_storage;
	if ((st = llm_kv_init(&d->kv, &kp, err)) != LLM_OK ||
		(st = llm_run_state_init(&d->run, mc, d->max_tokens, err)) != LLM_OK)
	{
		llm_draft_model_free(d);
		return st;
	}
	d->logits = malloc((size_t) d->max_rows * mc->n_vocab * sizeof(float));
	d->b_token = malloc((size_t) d->max_tokens * sizeof(int32_t));
	d->b_pos = malloc((size_t) d->max_tokens * sizeof(int32_t));
	d->b_seq = malloc((size_t) d->max_tokens * sizeof(LlmKvSeq *));
	d->b_want = malloc((size_t) d->max_tokens * sizeof(bool));
	d->b_job = malloc((size_t) d->max_tokens * sizeof(int));
	if (!d->logits || !d->b_token || !d->b_pos || !d->b_seq || !d->b_want || !d->b_job)
	{
		llm_draft_model_free(d);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the draft model's buffers");
	}
	*out = d;
	return LLM_OK;
}

/* Free a drafter (its sequences' keys go with its pool); NULL is allowed. */
void
llm_draft_model_free(LlmDraftModel *d)
{
	if (d == NULL)
		return;
	llm_run_state_free(&d->run);
	llm_kv_free(&d->kv);
	llm_backend_free(d->be);
	free(d->logits);
	free(d->b_token);
	free(d->b_pos);
	free(d->b_seq);
	free(d->b_want);
	free(d->b_job);
	free(d);
}

/* The highest of n_vocab logits (lowest id on ties, NaN never), and its probability into *p. */
static int32_t
greedy(const float *logits, int n_vocab, double *p)
{
	int32_t		best = 0;
	double		sum = 0;

	for (int32_t t = 1; t < n_vocab; t++)
		if (logits[t] > logits[best])
			best = t;
	for (int32_t t = 0; t < n_vocab; t++)
		sum += exp((double) logits[t] - logits[best]);
	*p = sum > 0 ? 1.0 / sum : 0;
	return best;
}

/* Run the pass of n batch tokens; each wanted row's greedy token goes to its job's out. */
static LlmStatus
run_pass(LlmDraftModel *d, LlmDraftJob *jobs, int n, LlmError *err)
{
	LlmBatch	b = {n, d->b_token, d->b_pos, d->b_seq, d->b_want};
	int			row = 0;
	LlmStatus	st = llm_forward(d->model, d->be, &d->kv, &d->run, &b, d->logits, err);

	if (st != LLM_OK)
		return st;
	for (int i = 0; i < n; i++)
	{
		LlmDraftJob *j = &jobs[d->b_job[i]];

		j->seq->n_past++;
		if (d->b_want[i])
		{
			double		p;
			int32_t		t = greedy(d->logits + (size_t) row++ * d->model->config.n_vocab, d->model->config.n_vocab, &p);

			/* a proposal unlikely enough to lose its row ends the job's draft */
			if (j->chance * p <= j->min_chance)
				j->max_draft = j->n_out;
			else
			{
				j->chance *= p;
				j->expected += j->chance;
				j->out[j->n_out++] = t;
			}
		}
	}
	return LLM_OK;
}

/* Run a pass of nb tokens for n jobs, timed into *t: as a pass when it has at most a token a job, else as reading. */
static LlmStatus
timed_pass(LlmDraftModel *d, LlmDraftJob *jobs, int nb, int n, LlmDraftTiming *t, LlmError *err)
{
	double		t0 = llm_pace_now();
	LlmStatus	st = run_pass(d, jobs, nb, err);

	if (nb <= n)
	{
		t->passes++;
		t->seconds += llm_pace_now() - t0;
	}
	else
	{
		t->read_tokens += nb;
		t->read_seconds += llm_pace_now() - t0;
	}
	return st;
}

/* Add token t of job ji at pos to the pass being built (n so far); returns the new count. */
static int
pass_add(LlmDraftModel *d, LlmDraftJob *jobs, int ji, int n, int32_t t, int pos, bool want)
{
	d->b_token[n] = t;
	d->b_pos[n] = pos;
	d->b_seq[n] = &jobs[ji].seq->kv;
	d->b_want[n] = want;
	d->b_job[n] = ji;
	return n + 1;
}

/* Propose drafts for n jobs (draft_model.h). */
LlmStatus
llm_draft_model_propose(LlmDraftModel *d, LlmDraftJob *jobs, int n, LlmDraftTiming *t, LlmError *err)
{
	int			passes = 0;
	LlmStatus	st;

	memset(t, 0, sizeof(*t));
	for (int i = 0; i < n; i++)
	{
		LlmDraftJob *j = &jobs[i];

		j->n_out = 0;
		j->chance = 1.0;
		j->expected = 0;
		if (j->seq->n_past > j->n - 1)
			llm_draft_seq_keep(d, j->seq, j->n - 1);
		if (j->n + j->max_draft > d->n_ctx ||
			llm_kv_seq_reserve(&d->kv, &j->seq->kv, j->n + j->max_draft - 1, NULL) != LLM_OK)
			j->max_draft = 0;
		if (j->max_draft > passes)
			passes = j->max_draft;
	}
	/* catch up: each job's unread tokens, its last wanting logits, in passes of at most max_tokens and max_rows */
	for (;;)
	{
		int			nb = 0;
		int			rows = 0;

		for (int i = 0; i < n && nb < d->max_tokens; i++)
			for (int pos = jobs[i].seq->n_past; jobs[i].max_draft > 0 && pos < jobs[i].n && nb < d->max_tokens; pos++)
			{
				bool		want = pos == jobs[i].n - 1;

				if (want && rows == d->max_rows)
					break;
				nb = pass_add(d, jobs, i, nb, jobs[i].tokens[pos], pos, want);
				rows += want;
			}
		if (nb == 0)
			break;
		if ((st = timed_pass(d, jobs, nb, n, t, err)) != LLM_OK)
			return st;
	}
	/* the rest: each pass reads every job's newest draft and proposes the next */
	for (int p = 1; p < passes; p++)
	{
		int			nb = 0;

		for (int i = 0; i < n; i++)
			if (jobs[i].n_out == p && p < jobs[i].max_draft && nb < d->max_tokens)
				nb = pass_add(d, jobs, i, nb, jobs[i].out[p - 1], jobs[i].n + p - 1, true);
		if (nb == 0)
			break;
		if ((st = timed_pass(d, jobs, nb, n, t, err)) != LLM_OK)
			return st;
	}
	return LLM_OK;
}

/* Keep the keys of s's first n_kept tokens. */
void
llm_draft_seq_keep(LlmDraftModel *d, LlmDraftSeq *s, int n_kept)
{
	if (s->n_past > n_kept)
		s->n_past = n_kept;
	llm_kv_seq_shrink(&d->kv, &s->kv, s->n_past);
}

/* Give back all of s's keys. */
void
llm_draft_seq_release(LlmDraftModel *d, LlmDraftSeq *s)
{
	llm_kv_seq_release(&d->kv, &s->kv);
	s->n_past = 0;
}
