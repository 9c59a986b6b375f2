/*
 * engine.c
 *		Sequences and the iteration-level scheduler behind engine.h.
 *
 * A sequence keeps all its tokens (prompt, then generated) and how many of
 * them are in its KV blocks (n_past).  Each step feeds every running
 * sequence the tokens it has not fed yet: one for a decoding sequence, a
 * chunk for a prompt, under the step's token budget (decoding sequences
 * first, so prompts never stall generation).  When a chunk reaches the end
 * of the sequence's tokens, its last position yields logits and a new token.
 * Prefill and decode are the same operation, which also makes preemption
 * simple: when the KV pool runs dry, a running sequence gives back its
 * blocks (n_past = 0) and waits; later it recomputes its tokens (Kwon et
 * al., SOSP 2023, recomputation).  Which prompt gets the step's chunks and
 * which sequence gives way follow the groups' fair shares (share.h).
 *
 * A scored continuation (LlmRequest.forced) is known in advance, so it is
 * fed with its prompt, as one more chunk of it: every position from the
 * prompt's last one yields logits, the forced token's log-probability is
 * read from them, and the whole continuation is scored in one pass after
 * the prompt's (as many as the step's logits rows need; its last token is
 * never fed: nothing reads its keys).  The prompt but its last token goes
 * in steps of its own, so that the other labels of one llm_classify() can
 * copy it from the first (seq_copy_prompt_tail) before it is done.  A row's
 * logits do not depend on the chunking, so these are the bits that
 * sampling the same tokens one step at a time would give.
 *
 * With a KV budget (kv_budget > 0), a sequence that holds more keys than
 * the budget after a step drops the excess in every layer and KV head
 * (evict.c: H2O, StreamingLLM or a plain window) and gives the freed blocks
 * back at once, so it needs at most budget + one step's tokens of slots.
 */
#include "engine.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "constraint.h"
#include "draft.h"
#include "draft_model.h"
#include "forward.h"
#include "kv.h"
#include "model.h"
#include "pace.h"
#include "sampler.h"
#include "share.h"
#include "spec_gate.h"
#include "utf8.h"

#define DEFAULT_KV_CAP_BYTES ((size_t) 1 << 30)
#define SEQ_RATE_DECAY 0.7f		/* weight of a sequence's older verifications at each new one */
#define SEQ_IDLE_DECAY 0.9f		/* the same at each step in which it drafts nothing */
#define ENGINE_RATE_DECAY 0.95f	/* the same, for the engine's estimate over all sequences */

typedef enum SeqState
{
	SEQ_WAITING,
	SEQ_RUNNING,
	SEQ_FINISHED
} SeqState;

typedef struct Seq
{
	int64_t		id;
	SeqState	state;
	int32_t    *tokens;			/* (cap) prompt, then generated tokens */
	float	   *logprobs;		/* (cap) when asked: log-probability of tokens[i], generated ones only */
	int			n_tokens;
	int			cap;
	int			n_prompt;
	int			n_past;			/* tokens whose keys and values are in kv */
	int			n_attached;		/* of those, taken from the prefix cache at admission */
	int			n_passed;		/* admissions that went to sequences queued after this one */
	int			max_tokens;
	bool		ignore_eos;
	uint32_t	share_group;	/* whose fair share it uses (share.h) */
	float		share_weight;
	int			share_index;	/* during a step: its group's index in e->shares, or -1 */
	int32_t    *forced;			/* (max_tokens) the generation to score instead of sampling, or NULL;
								 * all but its last token follow the prompt in tokens from the start */
	LlmConstraint *constraint;	/* the grammar the output follows, or NULL */
	LlmConstraintCursor cursor; /* where the output is in it */
	LlmSampler	sampler;
	char	  **stop;			/* (n_stop) */
	int			n_stop;
	char	   *text;			/* generated text, NUL-terminated */
	size_t		text_len;
	size_t		text_cap;
	LlmFinishReason reason;
	char	   *error;
	LlmStatus	status;			/* why, when reason is LLM_FINISH_ERROR */
	bool		polled;
	LlmKvSeq	kv;
	/* speculative decoding (config.speculative): this step's drafts follow tokens[n_tokens - 1] */
	int			n_draft;		/* drafted tokens fed this step, at tokens[n_tokens ..] */
	int			draft_base;		/* n_tokens when they were drafted */
	int			draft_len;		/* tokens to draft next time (adapts to how many were accepted) */
	int			draft_misses;	/* verifications in a row that accepted nothing */
	int			draft_skip;		/* steps to go without drafting (backs off after misses) */
	int			n_draft_forced; /* of this step's drafts, the first ones its grammar forces */
	LlmSpecRate spec_rate;		/* its drafts' recent acceptance (spec_gate.h) */
	LlmDraftSeq draft_seq;		/* LLM_SPEC_DRAFT: its keys in the draft model */
	uint64_t	draft_group;	/* LlmRequest.draft_group */
	int			n_drafted;		/* tokens drafted for it, and of those accepted, in all */
	int			n_draft_accepted;
} Seq;

struct LlmEngine
{
	LlmModel   *model;
	LlmEngineConfig config;
	LlmBackend *backend;
	LlmKvCache	kv;
	LlmRunState run;
	float	   *logits;			/* (max_out, n_vocab) */
	int			max_out;

	Seq		  **seqs;			/* (n_seqs) every unreleased sequence, in arrival order */
	int			n_seqs;
	int			seqs_cap;
	int		   *prompt_order;	/* (seqs_cap) a step's running prompts, in the order of their shares */
	LlmShares	shares;			/* the groups' virtual times (share.h) */
	int64_t		next_id;

	LlmEvictRule evict;			/* budget 0: no eviction */
	LlmSpecRate spec_rate;		/* every sequence's drafts' recent acceptance: a new sequence's prior */
	LlmSpecGate spec_gate;		/* the step's drafts so far, against their cost */
	LlmSpecCosts spec_costs;	/* what decode steps and draft-model passes take */
	LlmKvMove  *moves;			/* (n_layers * n_kv_heads * max(max_batch_tokens, block_size)) an eviction's compaction, a prompt tail's copy */

	/* the step's batch, (max_batch_tokens) each */
	int32_t    *b_token;
	int32_t    *b_pos;
	LlmKvSeq  **b_seq;
	bool	   *b_want;
	Seq		  **b_owner;		/* sequence of each token */

	LlmPace		pace;			/* prompt chunks sized to the step time */
	LlmConstraintCache *constraints;	/* grammars of constrained requests, made on first use */
	LlmConstraintCursor draft_cursor;	/* scratch: where a draft of forced tokens leads */
	LlmDraftModel *drafter;		/* LLM_SPEC_DRAFT */
	LlmDraftJob *draft_jobs;	/* (max_seqs) a step's, */
	Seq		  **draft_owner;	/* (max_seqs) their sequences */

	LlmEngineStats stats;
};

/* Waiting sequences admit_waiting() looks at in one step. */
#define LLM_ADMIT_SCAN			256
/* Admissions a waiting sequence may be passed over for later ones before it goes first. */
#define LLM_ADMIT_MAX_PASSED	8

/*
 * Defaults: 1 thread, model context, 512 batch tokens, 16 sequences, blocks
 * of 16, f32 KV, prefix cache on, 100 ms steps, no speculation (8 drafted
 * tokens at most when on, in steps of up to 16 tokens).
 */
void
llm_engine_config_default(LlmEngineConfig *c)
{
	memset(c, 0, sizeof(*c));
	c->n_threads = 1;
	c->n_ctx = 0;
	c->max_batch_tokens = 512;
	c->max_seqs = 16;
	c->kv_block_size = 16;
	c->kv_cache_bytes = 0;
	c->kv_type = LLM_KV_F16;
	c->prefix_cache = true;
	c->kv_budget = 0;
	c->kv_sink_tokens = 4;
	c->evict_policy = LLM_EVICT_H2O;
	c->device = LLM_DEVICE_AUTO;
	c->step_time_ms = 100;
	c->gpu_fusion = true;
	c->gpu_pdl = true;
	c->speculative = LLM_SPEC_OFF;
	c->spec_max_draft = 8;
	c->spec_step_drafts = 32;
	c->spec_knee_tokens = 0;
}



/* Request defaults: greedy, 128 tokens, filters off. */
void
llm_request_default(LlmRequest *r)
{
	memset(r, 0, sizeof(*r));
	r->max_tokens = 128;
	r->top_p = 1.0f;
	r->repeat_penalty = 1.0f;
}

/* "stop", "length", "cancelled", "error". */
const char *
llm_finish_reason_name(LlmFinishReason r)
{
	switch (r)
	{
		case LLM_FINISH_NONE:
			return "running";
		case LLM_FINISH_STOP:
			return "stop";
		case LLM_FINISH_LENGTH:
			return "length";
		case LLM_FINISH_CANCELLED:
			return "cancelled";
		case LLM_FINISH_ERROR:
			return "error";
	}
	return "unknown";
}

/* Create an engine serving model m. */
LlmStatus
llm_engine_new(LlmModel *m, const LlmEngineConfig *cfg, LlmEngine **out, LlmError *err)
{
	LlmEngine  *e;
	const LlmConfig *mc = &m->config;
	LlmKvParams kp;
	LlmBackendOptions bo;
	LlmEvictRule rule;
	size_t		block_bytes;
	size_t		kv_bytes;
	int			n_blocks;
	int			nb;
	LlmStatus	st;

	if (cfg->n_threads < 1 || cfg->max_batch_tokens < 1 || cfg->max_seqs < 1 ||
		cfg->kv_block_size < 1 || cfg->n_ctx < 0)
		return llm_error_set(err, LLM_ERR_INVALID,
							 "invalid engine configuration: threads %d, batch tokens %d, sequences %d, block size %d, context %d",
							 cfg->n_threads, cfg->max_batch_tokens, cfg->max_seqs, cfg->kv_block_size, cfg->n_ctx);
	if (cfg->speculative == LLM_SPEC_DRAFT && cfg->draft_model == NULL)
		return llm_error_set(err, LLM_ERR_INVALID, "speculative decoding with a draft model needs the draft model");
	if (cfg->speculative != LLM_SPEC_OFF &&
		(cfg->spec_max_draft < 1 || cfg->spec_max_draft > LLM_SPEC_MAX_DRAFT || cfg->spec_step_drafts < 1 ||
		 !(cfg->spec_knee_tokens >= 0)))
		return llm_error_set(err, LLM_ERR_INVALID,
							 "invalid speculative decoding configuration: %d drafted tokens (1 to %d), %d a step (at least 1), knee %g tokens",
							 cfg->spec_max_draft, LLM_SPEC_MAX_DRAFT, cfg->spec_step_drafts, cfg->spec_knee_tokens);
	if ((st = llm_evict_rule_make(cfg->kv_budget, cfg->kv_sink_tokens, cfg->evict_policy, &rule, err)))
		return st;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the engine");
	e->model = m;
	e->config = *cfg;
	e->evict = rule;
	if (rule.budget > 0)
	{
		e->config.prefix_cache = false; /* shared blocks cannot be compacted (kv.h) */
		e->config.speculative = LLM_SPEC_OFF;	/* a rejected draft's keys would have to leave the scores too */
	}
	if (e->config.n_ctx == 0 || e->config.n_ctx > mc->n_ctx)
		e->config.n_ctx = mc->n_ctx;
	e->next_id = 1;
	llm_grammar_state_init(&e->draft_cursor.state);
	llm_pace_init(&e->pace, m, cfg->step_time_ms);

	/* the KV pool: as configured, else max_seqs full contexts up to a cap (at least one context) */
	block_bytes = llm_kv_block_bytes(mc->n_layers, mc->n_kv_heads, mc->head_dim, cfg->kv_block_size,
									 cfg->kv_type);
	nb = (e->config.n_ctx + cfg->kv_block_size - 1) / cfg->kv_block_size;
	kv_bytes = cfg->kv_cache_bytes;
	if (kv_bytes == 0)
	{
		kv_bytes = (size_t) nb * block_bytes * (size_t) cfg->max_seqs;
		if (kv_bytes > DEFAULT_KV_CAP_BYTES)
			kv_bytes = DEFAULT_KV_CAP_BYTES > (size_t) nb * block_bytes ? DEFAULT_KV_CAP_BYTES : (size_t) nb * block_bytes;
	}
	if (kv_bytes / block_bytes < 1 || kv_bytes / block_bytes > INT32_MAX)
	{
		free(e);
		return llm_error_set(err, LLM_ERR_INVALID, "KV cache size %zu bytes holds no %zu-byte block",
							 kv_bytes, block_bytes);
	}
	n_blocks = (int) (kv_bytes / block_bytes);
	kp = (LlmKvParams) {
		.n_layers = mc->n_layers,.n_kv_heads = mc->n_kv_heads,.head_dim = mc->head_dim,
		.block_size = cfg->kv_block_size,.n_blocks = n_blocks,.type = cfg->kv_type,
		.prefix_cache = e->config.prefix_cache,.slot_info = rule.budget > 0,
		.scores = rule.budget > 0 && rule.by_score,.prefault = cfg->kv_prefault,
	};

	/* logits rows: one a sequence, and a step's drafts */
	e->max_out = cfg->max_seqs + (e->config.speculative != LLM_SPEC_OFF ? cfg->spec_step_drafts : 0);
	if (e->max_out > cfg->max_batch_tokens)
		e->max_out = cfg->max_batch_tokens;
	llm_backend_options_default(&bo);
	bo.n_threads = cfg->n_threads;
	bo.device_index = cfg->device_index;
	bo.deterministic = cfg->deterministic;
	bo.fuse = cfg->gpu_fusion;
	bo.pdl = cfg->gpu_pdl;
	bo.cuda_module = cfg->cuda_module;
	/* the backend makes its own copies of the weights in the layouts its kernels read */
	if ((st = llm_backend_new(cfg->device, &bo, &e->backend, err)) != LLM_OK ||
		(e->backend->ops->prepare != NULL && (st = e->backend->ops->prepare(e->backend, m, err))))
	{
		llm_engine_free(e);
		return st;
	}
	kp.device_storage = e->backend->device_storage;
	if (e->config.spec_knee_tokens == 0)
		e->config.spec_knee_tokens = e->backend->device_memory ? LLM_SPEC_KNEE_GPU : LLM_SPEC_KNEE_CPU;
	if ((st = llm_kv_init(&e->kv, &kp, err)) ||
		(st = llm_run_state_init(&e->run, mc, cfg->max_batch_tokens, err)) ||
		(e->config.speculative == LLM_SPEC_DRAFT &&
		 (st = llm_draft_model_new(m, cfg->draft_model, &e->config, &bo, e->backend, &e->drafter, err))))
	{
		llm_engine_free(e);
		return st;
	}
	if (e->drafter != NULL &&
		((e->draft_jobs = malloc((size_t) cfg->max_seqs * sizeof(LlmDraftJob))) == NULL ||
		 (e->draft_owner = malloc((size_t) cfg->max_seqs * sizeof(Seq *))) == NULL))
	{
		llm_engine_free(e);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the draft model's jobs");
	}
	e->logits = malloc((size_t) e->max_out * mc->n_vocab * sizeof(float));
	e->b_token = malloc((size_t) cfg->max_batch_tokens * sizeof(int32_t));
	e->b_pos = malloc((size_t) cfg->max_batch_tokens * sizeof(int32_t));
	e->b_seq = malloc((size_t) cfg->max_batch_tokens * sizeof(LlmKvSeq *));
	e->b_want = malloc((size_t) cfg->max_batch_tokens * sizeof(bool));
	e->b_owner = malloc((size_t) cfg->max_batch_tokens * sizeof(Seq *));
	e->moves = malloc((size_t) mc->n_layers * mc->n_kv_heads *
					  (cfg->max_batch_tokens > cfg->kv_block_size ? cfg->max_batch_tokens : cfg->kv_block_size) *
					  sizeof(LlmKvMove));
	if (!e->logits || !e->b_token || !e->b_pos || !e->b_seq || !e->b_want || !e->b_owner || !e->moves)
	{
		llm_engine_free(e);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the engine's step buffers");
	}
	e->stats.kv_blocks_total = n_blocks;
	*out = e;
	return LLM_OK;
}

/* Free a sequence and everything it holds (its KV blocks go back first). */
static void
seq_free(LlmEngine *e, Seq *s)
{
	llm_kv_seq_release(&e->kv, &s->kv);
	llm_kv_seq_free(&s->kv);
	if (e->drafter != NULL)
		llm_draft_seq_release(e->drafter, &s->draft_seq);
	llm_kv_seq_free(&s->draft_seq.kv);
	llm_sampler_free(&s->sampler);
	for (int i = 0; i < s->n_stop; i++)
		free(s->stop[i]);
	free(s->stop);
	free(s->tokens);
	free(s->logprobs);
	free(s->forced);
	if (s->constraint != NULL)
	{
		llm_constraint_cursor_free(&s->cursor);
		llm_constraint_put(e->constraints, s->constraint);
	}
	free(s->text);
	free(s->error);
	free(s);
}

/* Free the engine and all its sequences; NULL is allowed. */
void
llm_engine_free(LlmEngine *e)
{
	if (e == NULL)
		return;
	for (int i = 0; i < e->n_seqs; i++)
		seq_free(e, e->seqs[i]);
	free(e->seqs);
	free(e->prompt_order);
	llm_shares_free(&e->shares);
	llm_constraint_cursor_free(&e->draft_cursor);
	llm_draft_model_free(e->drafter);
	free(e->draft_jobs);
	free(e->draft_owner);
	llm_constraint_cache_free(e->constraints);
	llm_run_state_free(&e->run);
	llm_kv_free(&e->kv);
	llm_backend_free(e->backend);
	free(e->logits);
	free(e->b_token);
	free(e->b_pos);
	free(e->b_seq);
	free(e->b_want);
	free(e->b_owner);
	free(e->moves);
	free(e);
}

/* The engine's per-sequence context limit. */
int
llm_engine_n_ctx(const LlmEngine *e)
{
	return e->config.n_ctx;
}

/* What the engine computes on (the backend's description). */
const char *
llm_engine_device(const LlmEngine *e)
{
	return e->backend->device;
}

/* Why the engine is on the CPU under device auto, or "". */
const char *
llm_engine_device_note(const LlmEngine *e)
{
	return e->backend->device_note;
}

/* Whether a prompt of n_prompt tokens fits the context with max_tokens wanted. */
bool
llm_engine_prompt_fits(const LlmEngine *e, int n_prompt, int max_tokens)
{
	return n_prompt < e->config.n_ctx || (n_prompt == e->config.n_ctx && max_tokens <= 0);
}

/* Append bytes to a sequence's text. */
static bool
seq_append_text(Seq *s, const char *p, size_t len)
{
	if (s->text_len + len + 1 > s->text_cap)
	{
		size_t		cap = s->text_cap ? s->text_cap : 256;
		char	   *t;

		while (cap < s->text_len + len + 1)
			cap *= 2;
		t = realloc(s->text, cap);
		if (t == NULL)
			return false;
		s->text = t;
		s->text_cap = cap;
	}
	memcpy(s->text + s->text_len, p, len);
	s->text_len += len;
	s->text[s->text_len] = '\0';
	return true;
}

/*
 * Mark s finished with reason (and, for LLM_FINISH_ERROR, status and
 * message) and give its KV blocks back at once.
 */
static void
seq_finish(LlmEngine *e, Seq *s, LlmFinishReason reason, LlmStatus status, const char *error)
{
	/* a text cut by max_tokens (or anything else) ends at a character's end */
	if (s->text != NULL)
	{
		s->text_len = llm_utf8_whole_len((const uint8_t *) s->text, s->text_len);
		s->text[s->text_len] = '\0';
	}
	s->state = SEQ_FINISHED;
	s->reason = reason;
	s->status = status;
	if (s->forced != NULL && reason != LLM_FINISH_LENGTH)
		s->n_tokens = s->n_prompt;	/* a score is reported whole or not at all */
	if (error != NULL && s->error == NULL)
		s->error = strdup(error);
	llm_kv_seq_release(&e->kv, &s->kv);
	if (e->drafter != NULL)
		llm_draft_seq_release(e->drafter, &s->draft_seq);
	s->n_past = 0;
}

/* Copy the request's stop strings (empty ones are ignored). */
static LlmStatus
seq_copy_stops(Seq *s, const LlmRequest *r, LlmError *err)
{
	if (r->n_stop <= 0)
		return LLM_OK;
	s->stop = calloc((size_t) r->n_stop, sizeof(char *));
	if (s->stop == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for stop strings");
	for (int i = 0; i < r->n_stop; i++)
	{
		if (r->stop[i] == NULL || r->stop[i][0] == '\0')
			continue;
		if ((s->stop[s->n_stop] = strdup(r->stop[i])) == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for stop strings");
		s->n_stop++;
	}
	return LLM_OK;
}

/*
 * Finish s at max_tokens or the context length: LENGTH, or an error when
 * its output is not yet whole for its grammar (a constrained output is
 * never cut).
 */
static void
seq_finish_at_limit(LlmEngine *e, Seq *s)
{
	if (s->constraint == NULL || llm_constraint_accepting(&s->cursor))
		seq_finish(e, s, LLM_FINISH_LENGTH, LLM_OK, NULL);
	else
		seq_finish(e, s, LLM_FINISH_ERROR, LLM_ERR_LIMIT,
				   s->n_tokens - s->n_prompt >= s->max_tokens ?
				   "the output reached max_tokens before it was complete for its grammar" :
				   "the output reached the context length before it was complete for its grammar");
}

/* Give s the constraint of r's grammar (compiled by the engine's cache on first use). */
static LlmStatus
seq_attach_grammar(LlmEngine *e, Seq *s, const LlmRequest *r, LlmError *err)
{
	LlmStatus	st;

	if (e->constraints == NULL &&
		(st = llm_constraint_cache_new(e->model->tokenizer, &e->constraints, err)) != LLM_OK)
		return st;
	if ((st = llm_constraint_get(e->constraints, r->grammar, r->grammar_text, r->grammar_len,
								 &s->constraint, err)) != LLM_OK)
		return st;
	if ((st = llm_constraint_cursor_init(s->constraint, &s->cursor, err)) != LLM_OK)
	{
		llm_constraint_cursor_free(&s->cursor);
		llm_constraint_put(e->constraints, s->constraint);
		s->constraint = NULL;
	}
	return st;
}

/* Queue a sequence. */
LlmStatus
llm_engine_add(LlmEngine *e, const LlmRequest *r, int64_t *id, LlmError *err)
{
	LlmSamplerParams sp;
	Seq		   *s;
	int			n_ctx = e->config.n_ctx;
	int			want;
	int			slots;
	LlmStatus	st;

	if (r->n_prompt < 1)
		return llm_error_set(err, LLM_ERR_INVALID, "the prompt has no tokens");
	if (r->max_tokens < 0)
		return llm_error_set(err, LLM_ERR_INVALID, "max_tokens must not be negative, got %d", r->max_tokens);
	if (r->n_forced < 0 || (r->n_forced > 0 && (r->forced == NULL || r->max_tokens != r->n_forced)))
		return llm_error_set(err, LLM_ERR_INVALID, "forced tokens need max_tokens equal to their number, got %d and %d",
							 r->max_tokens, r->n_forced);
	if (r->n_forced > 0 && r->n_prompt + r->n_forced > e->config.n_ctx)
		return llm_error_set(err, LLM_ERR_LIMIT, "a prompt of %d tokens and a continuation of %d do not fit the context of %d",
							 r->n_prompt, r->n_forced, e->config.n_ctx);
	if (r->grammar != LLM_GRAMMAR_NONE && (r->n_forced > 0 || r->n_stop > 0))
		return llm_error_set(err, LLM_ERR_INVALID, "a grammar cannot be combined with %s",
							 r->n_forced > 0 ? "forced tokens" : "stop strings");
	for (int i = 0; i < r->n_forced; i++)
		if (r->forced[i] < 0 || r->forced[i] >= e->model->config.n_vocab)
			return llm_error_set(err, LLM_ERR_INVALID, "forced token %d is out of the vocabulary", r->forced[i]);
	/* the prompt must fit, with room for one new token unless none is wanted */
	if (!llm_engine_prompt_fits(e, r->n_prompt, r->max_tokens))
		return llm_error_set(err, LLM_ERR_LIMIT, "the prompt has %d tokens; the context length is %d",
							 r->n_prompt, n_ctx);
	for (int i = 0; i < r->n_prompt; i++)
		if (r->prompt[i] < 0 || r->prompt[i] >= e->model->config.n_vocab)
			return llm_error_set(err, LLM_ERR_INVALID, "prompt token %d is %d, outside the vocabulary",
								 i, r->prompt[i]);
	/* the sequence must fit the whole pool by itself, or it could never finish */
	want = r->max_tokens < n_ctx - r->n_prompt ? r->n_prompt + r->max_tokens : n_ctx;
	slots = want;
	if (e->evict.budget > 0 && slots > e->evict.budget + e->config.max_batch_tokens)
		slots = e->evict.budget + e->config.max_batch_tokens;	/* it never holds more */
	if (llm_kv_blocks_for(&e->kv, slots) > e->kv.n_blocks)
		return llm_error_set(err, LLM_ERR_LIMIT,
							 "the request needs %d KV blocks of %d tokens but the pool has only %d",
							 llm_kv_blocks_for(&e->kv, slots), e->kv.block_size, e->kv.n_blocks);

	llm_sampler_params_default(&sp);
	sp.temperature = r->temperature;
	sp.top_k = r->top_k;
	sp.top_p = r->top_p;
	sp.min_p = r->min_p;
	sp.repeat_penalty = r->repeat_penalty;
	sp.seed = r->seed;
	if ((st = llm_sampler_params_check(&sp, err)))
		return st;

	if (e->n_seqs == e->seqs_cap)
	{
		int			cap = e->seqs_cap ? 2 * e->seqs_cap : 64;
		Seq		  **seqs = realloc(e->seqs, (size_t) cap * sizeof(Seq *));
		int		   *order;

		if (seqs == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for sequences");
		e->seqs = seqs;
		order = realloc(e->prompt_order, (size_t) cap * sizeof(int));
		if (order == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for sequences");
		e->prompt_order = order;
		e->seqs_cap = cap;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a sequence");
	s->cap = want + 1;
	s->tokens = malloc((size_t) s->cap * sizeof(int32_t));
	if (r->logprobs || r->n_forced > 0)
		s->logprobs = malloc((size_t) s->cap * sizeof(float));
	if (r->n_forced > 0 && (s->forced = malloc((size_t) r->n_forced * sizeof(int32_t))) != NULL)
		memcpy(s->forced, r->forced, (size_t) r->n_forced * sizeof(int32_t));
	if (s->tokens == NULL || ((r->logprobs || r->n_forced > 0) && s->logprobs == NULL) ||
		(r->n_forced > 0 && s->forced == NULL) || !seq_append_text(s, "", 0))
	{
		seq_free(e, s);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a sequence of %d tokens", want);
	}
	if ((st = llm_sampler_init(&s->sampler, &sp, e->model->config.n_vocab, err)) ||
		(st = seq_copy_stops(s, r, err)) ||
		(r->grammar != LLM_GRAMMAR_NONE && (st = seq_attach_grammar(e, s, r, err))))
	{
		seq_free(e, s);
		return st;
	}
	memcpy(s->tokens, r->prompt, (size_t) r->n_prompt * sizeof(int32_t));
	s->n_tokens = s->n_prompt = r->n_prompt;
	if (s->forced != NULL)
	{
		/* fed with the prompt, in its pass: all but the last forced token */
		memcpy(s->tokens + s->n_prompt, s->forced, (size_t) (r->n_forced - 1) * sizeof(int32_t));
		s->n_tokens += r->n_forced - 1;
	}
	s->max_tokens = r->max_tokens;
	s->draft_len = e->config.spec_max_draft < 4 ? e->config.spec_max_draft : 4;
	s->draft_group = r->draft_group;
	s->ignore_eos = r->ignore_eos;
	s->share_group = r->share_group;
	s->share_weight = r->share_weight > 0 ? r->share_weight : 1;
	s->kv.partition = r->cache_partition;
	s->id = e->next_id++;
	s->state = SEQ_WAITING;
	if (s->max_tokens == 0)
		seq_finish_at_limit(e, s);
	e->seqs[e->n_seqs++] = s;
	*id = s->id;
	return LLM_OK;
}

/* Whether any sequence is queued or running. */
bool
llm_engine_busy(const LlmEngine *e)
{
	for (int i = 0; i < e->n_seqs; i++)
		if (e->seqs[i]->state != SEQ_FINISHED)
			return true;
	return false;
}

/* Index of sequence id in e->seqs, or -1. */
static int
seq_index(const LlmEngine *e, int64_t id)
{
	for (int i = 0; i < e->n_seqs; i++)
		if (e->seqs[i]->id == id)
			return i;
	return -1;
}

/*
 * Send a running sequence back to waiting, giving back its blocks (it
 * recomputes later).  Only a sequence that loses work it computed counts as
 * preempted: one that held nothing but cached blocks just waits longer.
 */
static void
seq_preempt(LlmEngine *e, Seq *s)
{
	if (s->n_past > s->n_attached)
		e->stats.preemptions++;
	llm_kv_seq_release(&e->kv, &s->kv);
	if (e->drafter != NULL)
		llm_draft_seq_release(e->drafter, &s->draft_seq);
	s->n_past = 0;
	s->n_attached = 0;
	s->state = SEQ_WAITING;
}

/* KV blocks per unit of weight that group holds in running sequences. */
static double
group_load(const LlmEngine *e, uint32_t group)
{
	double		load = 0;

	for (int i = 0; i < e->n_seqs; i++)
		if (e->seqs[i]->state == SEQ_RUNNING && e->seqs[i]->share_group == group)
			load += e->seqs[i]->kv.n_blocks / (double) e->seqs[i]->share_weight;
	return load;
}

/*
 * The running sequence to give way so that s gets KV (share.h): the newest
 * of the group holding the most blocks per weight, among those with no
 * tokens in this step's batch (its first batch_start), s itself included;
 * s when that one is older than s in s's group, or there is none.
 */
static Seq *
preemption_victim(LlmEngine *e, Seq *s, int batch_start)
{
	Seq		   *victim = NULL;
	double		victim_load = -1;
	int			victim_index = -1;
	int			s_index = -1;

	for (int i = e->n_seqs - 1; i >= 0; i--)
	{
		Seq		   *c = e->seqs[i];
		bool		in_batch = false;
		double		load;

		if (c == s)
			s_index = i;
		if (c->state != SEQ_RUNNING && c != s)
			continue;
		for (int b = 0; b < batch_start && !in_batch; b++)
			in_batch = e->b_owner[b] == c;
		if (in_batch)
			continue;
		/* the newest of each group comes first: an older one of the same group never wins */
		load = group_load(e, c->share_group);
		if (load > victim_load)
		{
			victim = c;
			victim_load = load;
			victim_index = i;
		}
	}
	if (victim == NULL || (victim->share_group == s->share_group && victim_index < s_index))
		return s;
	return victim;
}

/*
 * Put the indices of the running sequences with prompt tokens to feed in
 * e->prompt_order, least virtual time of their group first, then oldest
 * first (share.h); returns how many.  Enters their groups for the step.
 */
static int
prompt_order(LlmEngine *e)
{
	int			n = 0;

	llm_shares_begin(&e->shares);
	for (int i = 0; i < e->n_seqs; i++)
	{
		Seq		   *s = e->seqs[i];
		double		vtime;
		int			j;

		s->share_index = -1;
		if (s->state != SEQ_RUNNING || s->n_tokens - s->n_past <= 1)
			continue;
		/* out of memory for a new group: it goes first, uncharged */
		s->share_index = llm_shares_enter(&e->shares, s->share_group);
		vtime = s->share_index >= 0 ? e->shares.groups[s->share_index].vtime : 0;
		/* insertion: after every earlier one of no greater time (stable) */
		for (j = n; j > 0; j--)
		{
			const Seq  *p = e->seqs[e->prompt_order[j - 1]];
			double		pt = p->share_index >= 0 ? e->shares.groups[p->share_index].vtime : 0;

			if (pt <= vtime)
				break;
			e->prompt_order[j] = e->prompt_order[j - 1];
		}
		e->prompt_order[j] = i;
		n++;
	}
	return n;
}

/*
 * Reserve KV for s to hold n_tokens positions, preempting other running
 * sequences (preemption_victim) while the pool is short.  Returns false
 * when s itself had to be preempted.
 */
static bool
reserve_or_preempt(LlmEngine *e, Seq *s, int n_tokens, int batch_start)
{
	while (llm_kv_seq_reserve(&e->kv, &s->kv, n_tokens, NULL) != LLM_OK)
	{
		Seq		   *victim = preemption_victim(e, s, batch_start);

		seq_preempt(e, victim);
		if (victim == s)
			return false;
	}
	return true;
}

/*
 * The first position of s whose logits are needed: its last token's, or
 * for a scored continuation the prompt's last one (each position from
 * there predicts a forced token).
 */
static int
seq_first_wanted(const Seq *s)
{
	return s->forced != NULL ? s->n_prompt - 1 : s->n_tokens - 1;
}

/*
 * Grammar jump-forward: the tokens s's grammar forces next, each the only
 * one its mask allows (an end-of-generation token ends them), at most k,
 * into tokens[n_tokens ..]; returns how many.  They are accepted without
 * sampling, as seq_accept_logits takes them.
 */
static int
seq_draft_forced(LlmEngine *e, Seq *s, int k)
{
	const uint64_t *mask;
	LlmError	err;
	int			n = 0;

	if (s->constraint == NULL || !llm_constraint_cursor_copy(&e->draft_cursor, &s->cursor))
		return 0;
	while (n < k && llm_constraint_mask(s->constraint, &e->draft_cursor, &mask, &err) == LLM_OK)
	{
		int32_t		t = llm_mask_single(mask, e->model->config.n_vocab);

		if (t < 0 || llm_tokenizer_is_eog(e->model->tokenizer, t) ||
			!llm_constraint_advance(s->constraint, &e->draft_cursor, t))
			break;
		s->tokens[s->n_tokens + n++] = t;
	}
	return n;
}

/*
 * How many tokens decoding s may draft this step, at most budget: its
 * adaptive length, as max_tokens and the context allow; 0 while it pauses
 * after misses, or scores.  Starts s's draft.
 */
static int
seq_draft_room(LlmEngine *e, Seq *s, int budget)
{
	int			k = s->draft_len < budget ? s->draft_len : budget;
	int			room = s->max_tokens - (s->n_tokens - s->n_prompt) - 1;	/* the token after the drafts is sampled too */

	s->n_draft = 0;
	s->draft_base = s->n_tokens;
	if (s->draft_skip > 0)
	{
		s->draft_skip--;
		return 0;
	}
	if (room > e->config.n_ctx - s->n_tokens)
		room = e->config.n_ctx - s->n_tokens;
	if (k > room)
		k = room;
	return s->forced != NULL || k < 1 ? 0 : k;
}

/* Make the k tokens at tokens[n_tokens ..] s's draft when the pool has KV for them without preempting anyone. */
static int
seq_draft_keep(LlmEngine *e, Seq *s, int k)
{
	if (k > 0 && llm_kv_seq_reserve(&e->kv, &s->kv, s->n_past - s->kv.n_evicted + 1 + k, NULL) != LLM_OK)
		k = 0;
	s->n_draft = k;
	return k;
}

/*
 * Prompt lookup for s, after the forced tokens it has at tokens[n_tokens ..]:
 * up to as many tokens as the step's gate finds worth feeding at s's rate,
 * from its own tokens or, finding nothing there, from those of its draft
 * group's other requests (the newest first); returns how many, counted
 * into the gate.
 */
static int
seq_draft_lookup(LlmEngine *e, Seq *s, int forced, int k)
{
	double		rate = llm_spec_rate(&s->spec_rate, &e->spec_rate);
	int			worth = llm_spec_gate_worth(&e->spec_gate, rate, k);
	int			found = 0;

	if (worth > 0)
		found = llm_draft_ngram(s->tokens, s->n_tokens + forced, worth, s->tokens + s->n_tokens + forced);
	for (int i = e->n_seqs - 1; i >= 0 && worth > 0 && found == 0 && s->draft_group != 0; i--)
		if (e->seqs[i] != s && e->seqs[i]->draft_group == s->draft_group)
			found = llm_draft_ngram_other(s->tokens, s->n_tokens + forced, e->seqs[i]->tokens, e->seqs[i]->n_tokens,
										  worth, s->tokens + s->n_tokens + forced);
	llm_spec_gate_take(&e->spec_gate, 0, rate, found);
	return found;
}

/*
 * s's drafts that need no draft-model pass, up to k (at least 1): the
 * tokens its grammar forces (*forced of them), then prompt lookup's, all
 * counted into the step's gate; returns how many.
 */
static int
seq_draft_without_model(LlmEngine *e, Seq *s, int k, int *forced)
{
	*forced = s->n_draft_forced = seq_draft_forced(e, s, k);
	llm_spec_gate_take(&e->spec_gate, *forced, 0, 0);
	return *forced + (*forced < k ? seq_draft_lookup(e, s, *forced, k - *forced) : 0);
}

/*
 * Draft up to budget tokens to follow decoding s's last one by prompt
 * lookup (LLM_SPEC_NGRAM) into tokens[n_tokens ..]: those its grammar
 * forces, then prompt lookup's; returns how many.
 */
static int
seq_draft(LlmEngine *e, Seq *s, int budget)
{
	int			k = seq_draft_room(e, s, budget);
	int			forced;
	int			n = k >= 1 ? seq_draft_without_model(e, s, k, &forced) : 0;

	if (n == 0)
		llm_spec_rate_forget(&s->spec_rate, SEQ_IDLE_DECAY);
	return seq_draft_keep(e, s, n);
}

/*
 * Keep only the first n of s's drafts (the step has no room for more; n may
 * be 0).  With none left, the draft model forgets what it read of them: its
 * keys past the last sure token could differ from the tokens that follow.
 */
static void
seq_cut_draft(LlmEngine *e, Seq *s, int n)
{
	s->n_draft = n > 0 ? n : 0;
	if (s->n_draft == 0 && e->drafter != NULL)
		llm_draft_seq_keep(e->drafter, &s->draft_seq, s->draft_base);
}

/*
 * Draft for every decoding sequence at once (LLM_SPEC_DRAFT), within
 * budget tokens: each one's forced tokens, then prompt lookup's, which
 * cost nothing to find, or where it finds none, the draft model's greedy
 * guesses, for all such sequences in the same passes.  A failure of the
 * draft model's pass costs only the drafts.
 */
static void
draft_with_model(LlmEngine *e, int budget)
{
	int			nj = 0;
	LlmError	err;

	for (int i = 0; i < e->n_seqs && budget > 0 && nj < e->config.max_seqs; i++)
	{
		Seq		   *s = e->seqs[i];
		int			k;
		int			f;
		int			n;

		if (s->state != SEQ_RUNNING || s->n_tokens - s->n_past != 1 || (k = seq_draft_room(e, s, budget)) < 1)
			continue;
		n = seq_draft_without_model(e, s, k, &f);
		s->n_draft = f;
		budget -= k;
		/* the draft model's passes cost too: only for a sequence whose drafts are likely enough */
		if (f == k || n > f ||
			llm_spec_rate(&s->spec_rate, &e->spec_rate) <=
			llm_spec_gate_bar_drafted(&e->spec_gate, &e->spec_costs, s->n_tokens + f - 1 - s->draft_seq.n_past,
									  s->max_tokens - (s->n_tokens - s->n_prompt)))
		{
			if (n == 0)
				llm_spec_rate_forget(&s->spec_rate, SEQ_IDLE_DECAY);
			seq_draft_keep(e, s, n);
			continue;
		}
		/* its confidence then says how far each is worth drafting */
		e->draft_jobs[nj] = (LlmDraftJob) {
			.seq = &s->draft_seq,.tokens = s->tokens,.n = s->n_tokens + f,.max_draft = k - f,
			.out = s->tokens + s->n_tokens + f,.min_chance = llm_spec_gate_bar_drafted(&e->spec_gate, &e->spec_costs, 0, 0)
		};
		e->draft_owner[nj] = s;
		nj++;
	}
	if (nj > 0)
	{
		LlmDraftTiming t;

		if (llm_draft_model_propose(e->drafter, e->draft_jobs, nj, &t, &err) != LLM_OK)
			for (int i = 0; i < nj; i++)
				e->draft_jobs[i].n_out = 0, e->draft_jobs[i].expected = 0;
		llm_spec_costs_passes(&e->spec_costs, t.seconds, t.passes, t.read_seconds, t.read_tokens);
	}
	for (int i = 0; i < nj; i++)
	{
		Seq		   *s = e->draft_owner[i];

		llm_spec_gate_add(&e->spec_gate, e->draft_jobs[i].n_out, e->draft_jobs[i].expected);
		/* drafts the pool cannot hold are dropped */
		if (seq_draft_keep(e, s, s->n_draft + e->draft_jobs[i].n_out) == 0)
			seq_cut_draft(e, s, 0);
	}
}

/*
 * Whether the logits of batch row b (of s, which drafted) count: the token
 * fed there is s's own, every drafted token before it having been accepted.
 */
static bool
draft_row_live(const LlmEngine *e, const Seq *s, int b)
{
	int			pos = e->b_pos[b];

	return s->n_tokens == pos + 1 && s->tokens[pos] == e->b_token[b];
}

/*
 * After a step in which s drafted: its accepted drafts are its own tokens
 * now; the keys of the rejected ones leave its KV (whose blocks were not
 * offered to the prefix cache past its last sure token), and the next draft
 * length follows how many were accepted (none, twice running: a pause).
 */
static void
seq_end_draft(LlmEngine *e, Seq *s)
{
	int			drafted = s->n_draft;
	int			accepted = s->n_tokens - s->draft_base - 1;
	int			forced = s->n_draft_forced < drafted ? s->n_draft_forced : drafted;

	s->n_draft = 0;
	if (accepted < 0)
		accepted = 0;				/* finished before the first sample took */
	if (accepted > drafted)
		accepted = drafted;
	e->stats.draft_tokens += drafted;
	e->stats.draft_accepted += accepted;
	s->n_drafted += drafted;
	s->n_draft_accepted += accepted;
	e->stats.draft_rounds++;
	if (s->state == SEQ_RUNNING)
	{
		s->n_past = s->n_tokens - 1;
		llm_kv_seq_shrink(&e->kv, &s->kv, s->n_past - s->kv.n_evicted);
		llm_kv_prefix_register(&e->kv, &s->kv, s->tokens, s->n_past);
		if (e->drafter != NULL)
			llm_draft_seq_keep(e->drafter, &s->draft_seq, s->n_past);
	}
	/* the gate's estimates count drafted tokens only: a forced one is certain */
	llm_spec_rate_note(&s->spec_rate, drafted - forced, accepted > forced ? accepted - forced : 0, SEQ_RATE_DECAY);
	llm_spec_rate_note(&e->spec_rate, drafted - forced, accepted > forced ? accepted - forced : 0, ENGINE_RATE_DECAY);
	s->n_draft_forced = 0;
	/* a miss costs a step its drafts: after misses in a row, pause 2, 4, ... 32 steps */
	s->draft_misses = accepted == 0 ? s->draft_misses + 1 : 0;
	s->draft_skip = s->draft_misses > 1 ? 1 << (s->draft_misses - 1 < 5 ? s->draft_misses - 1 : 5) : 0;
	s->draft_len = accepted == drafted ? 2 * drafted : accepted + 1;
	if (s->draft_len > e->config.spec_max_draft)
		s->draft_len = e->config.spec_max_draft;
	if (s->draft_len < 1)
		s->draft_len = 1;
}

/*
 * Add up to budget of s's unfed tokens (its drafts included) to the batch,
 * with at most out_room of them wanting logits; returns how many were added.
 */
static int
batch_add_seq(LlmEngine *e, Seq *s, int n_batch, int budget, int out_room)
{
	int			take = s->n_tokens + s->n_draft - s->n_past;
	int			first_want = seq_first_wanted(s);
	int			skip = first_want > s->n_past ? first_want - s->n_past : 0;	/* unfed tokens that want no logits */

	if (take > budget)
		take = budget;
	if (take > skip + out_room)
		take = skip + out_room;
	if (s->forced != NULL && skip > 0 && take > skip)
		take = skip;			/* the prompt first, so that other labels of it can copy it (seq_copy_prompt_tail) */
	/* drafts that do not fit are not drafted */
	if (s->n_draft > 0 && take - (s->n_tokens - s->n_past) < s->n_draft)
		seq_cut_draft(e, s, take - (s->n_tokens - s->n_past));
	if (take <= 0 || !reserve_or_preempt(e, s, s->n_past - s->kv.n_evicted + take, n_batch))
	{
		if (s->n_draft > 0)
			seq_cut_draft(e, s, 0);
		return 0;
	}
	if (s->n_past == s->n_attached && s->n_attached > 0)
		e->stats.prefix_hit_tokens += s->n_attached;	/* the cached prefix is used now */
	for (int j = 0; j < take; j++)
	{
		int			b = n_batch + j;

		e->b_token[b] = s->tokens[s->n_past + j];
		e->b_pos[b] = s->n_past + j;
		e->b_seq[b] = &s->kv;
		e->b_owner[b] = s;
		e->b_want[b] = (s->n_past + j >= first_want);
	}
	return take;
}

/*
 * Check s's text for a stop string that ends in its newest bytes
 * (added_len); cut the text at the earliest such hit.  memmem, not strstr:
 * the text may hold NUL bytes from byte tokens.
 */
static bool
seq_hit_stop(Seq *s, size_t added_len)
{
	size_t		cut = s->text_len + 1;

	for (int i = 0; i < s->n_stop; i++)
	{
		size_t		slen = strlen(s->stop[i]);
		size_t		from = s->text_len - added_len;
		char	   *hit;

		from = from > slen - 1 ? from - (slen - 1) : 0;
		hit = memmem(s->text + from, s->text_len - from, s->stop[i], slen);
		if (hit != NULL && (size_t) (hit - s->text) < cut)
			cut = (size_t) (hit - s->text);
	}
	if (cut > s->text_len)
		return false;
	s->text_len = cut;
	s->text[cut] = '\0';
	return true;
}

/*
 * Choose s's next token under its grammar: the highest logit among the
 * tokens mask allows (lowest id on ties, NaN as -infinity) when s is greedy
 * without a repetition penalty or log-probabilities, which needs no pass
 * over the disallowed tokens; else the sampler's pick after every
 * disallowed logit is set to -infinity.  Either way the same token; should
 * every allowed logit be -infinity or NaN, the lowest allowed id.  -1 when
 * the mask allows no token.
 */
static int32_t
seq_sample_constrained(Seq *s, const uint64_t *mask, float *logits, int n_vocab)
{
	const LlmSamplerParams *p = &s->sampler.params;
	int32_t		first = -1,
				best = -1;
	float		top = -INFINITY;

	for (int w = 0; w * 64 < n_vocab && first < 0; w++)
		if (mask[w] != 0)
			first = w * 64 + __builtin_ctzll(mask[w]);
	if (first < 0)
		return -1;
	if (!(p->temperature > 0.0f) && p->repeat_penalty == 1.0f && s->logprobs == NULL)
	{
		for (int w = first >> 6; w * 64 < n_vocab; w++)
			for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1)
			{
				int32_t		t = w * 64 + __builtin_ctzll(bits);

				if (logits[t] > top)	/* false for NaN */
				{
					top = logits[t];
					best = t;
				}
			}
		return best >= 0 ? best : first;
	}
	for (int w = 0; w * 64 < n_vocab; w++)
	{
		uint64_t	bits = mask[w];
		int			end = w * 64 + 64 < n_vocab ? w * 64 + 64 : n_vocab;

		if (bits == ~(uint64_t) 0)
			continue;
		for (int t = w * 64; t < end; t++)
			if (!llm_mask_allows(mask, t))
				logits[t] = -INFINITY;
	}
	best = llm_sampler_sample(&s->sampler, logits, s->tokens, s->n_tokens);
	return best >= 0 && best < n_vocab && llm_mask_allows(mask, best) ? best : first;
}

/*
 * Take the logits of position pos of a scored continuation s: the
 * log-probability of the forced token they predict; at the last one the
 * continuation is whole.  Nothing ends it early (EOS, stop strings).
 */
static void
seq_accept_forced(LlmEngine *e, Seq *s, int pos, const float *logits)
{
	int			i = pos - (s->n_prompt - 1);	/* the forced token these logits predict */

	s->logprobs[s->n_prompt + i] = llm_logprob(logits, e->model->config.n_vocab, s->forced[i]);
	if (i < s->max_tokens - 1)
		return;
	s->tokens[s->n_tokens++] = s->forced[i];
	e->stats.tokens_generated += s->max_tokens;
	seq_finish(e, s, LLM_FINISH_LENGTH, LLM_OK, NULL);
}

/*
 * Sample s's next token from logits (or, scoring, take the forced token at
 * position pos) and decide whether s is finished.
 */
static void
seq_accept_logits(LlmEngine *e, Seq *s, int pos, float *logits)
{
	const LlmTokenizer *tok = e->model->tokenizer;
	int32_t		t;
	const char *piece;
	size_t		len = 0;

	if (s->forced != NULL)
	{
		seq_accept_forced(e, s, pos, logits);
		return;
	}
	if (s->constraint != NULL)
	{
		const uint64_t *mask;
		LlmError	err;

		if (llm_constraint_mask(s->constraint, &s->cursor, &mask, &err) != LLM_OK)
		{
			seq_finish(e, s, LLM_FINISH_ERROR, err.status, err.msg);
			return;
		}
		/* a token the grammar forces is taken as it is: no sampling, no draw from the random stream */
		if ((t = llm_mask_single(mask, e->model->config.n_vocab)) < 0 &&
			(t = seq_sample_constrained(s, mask, logits, e->model->config.n_vocab)) < 0)
		{
			seq_finish(e, s, LLM_FINISH_ERROR, LLM_ERR_LIMIT, "no token of the vocabulary can continue the grammar here");
			return;
		}
	}
	else
		t = llm_sampler_sample(&s->sampler, logits, s->tokens, s->n_tokens);
	if (llm_tokenizer_is_eog(tok, t) && (!s->ignore_eos || s->constraint != NULL))
	{
		seq_finish(e, s, LLM_FINISH_STOP, LLM_OK, NULL);
		return;
	}
	if (s->constraint != NULL && !llm_constraint_advance(s->constraint, &s->cursor, t))
	{
		seq_finish(e, s, LLM_FINISH_ERROR, LLM_ERR_NOMEM, "out of memory following the grammar");
		return;
	}
	if (s->logprobs != NULL)
		s->logprobs[s->n_tokens] = llm_logprob(logits, e->model->config.n_vocab, t);
	s->tokens[s->n_tokens++] = t;
	e->stats.tokens_generated++;
	piece = llm_token_piece(tok, t, &len);
	if (piece != NULL && !seq_append_text(s, piece, len))
	{
		seq_finish(e, s, LLM_FINISH_ERROR, LLM_ERR_NOMEM, "out of memory for the generated text");
		return;
	}
	if (seq_hit_stop(s, len) || (s->constraint != NULL && llm_constraint_complete(&s->cursor)))
		seq_finish(e, s, LLM_FINISH_STOP, LLM_OK, NULL);
	else if (s->n_tokens - s->n_prompt >= s->max_tokens || s->n_tokens >= e->config.n_ctx)
		seq_finish_at_limit(e, s);
}

/*
 * Whether waiting s shares full prompt blocks with a running sequence that
 * has not computed (and registered) them yet, or all its tokens before the
 * first whose logits it needs (seq_first_wanted), not computed yet either.
 * Admitting s now would compute the same keys twice; a step or two later
 * it finds them cached, or copies them (seq_copy_prompt_tail).
 */
static bool
shares_pending_prefix(const LlmEngine *e, const Seq *s)
{
	int			bs = e->kv.block_size;
	int			reuse = seq_first_wanted(s);	/* s's tokens that another sequence's keys could serve */

	if (!e->kv.prefix_cache || s->n_past != 0)
		return false;
	for (int i = 0; i < e->n_seqs; i++)
	{
		const Seq  *r = e->seqs[i];
		int			limit;
		int			n = 0;

		if (r->state != SEQ_RUNNING || r->n_past >= r->n_prompt)
			continue;
		limit = (reuse < r->n_prompt ? reuse : r->n_prompt) / bs;
		while (n < limit && memcmp(s->tokens + (size_t) n * bs, r->tokens + (size_t) n * bs,
								   (size_t) bs * sizeof(int32_t)) == 0)
			n++;
		if (n > r->kv.n_registered)
			return true;
		if (n == limit && reuse <= r->n_prompt && r->n_past < reuse &&
			memcmp(s->tokens + (size_t) n * bs, r->tokens + (size_t) n * bs,
				   (size_t) (reuse - n * bs) * sizeof(int32_t)) == 0)
			return true;
	}
	return false;
}

/* A running sequence other than s that has computed the keys of s's first n tokens, or NULL. */
static const Seq *
computed_prefix_donor(const LlmEngine *e, const Seq *s, int n)
{
	for (int i = 0; i < e->n_seqs; i++)
	{
		const Seq  *r = e->seqs[i];

		if (r != s && r->state == SEQ_RUNNING && r->n_past >= n && r->kv.n_evicted == 0 &&
			memcmp(r->tokens, s->tokens, (size_t) n * sizeof(int32_t)) == 0)
			return r;
	}
	return NULL;
}

/*
 * Copy into s, just admitted with its cached blocks, the keys and values of
 * the rest of its tokens before the first whose logits it needs (its
 * prompt but the last token, seq_first_wanted) from a running sequence that
 * has computed the same tokens: the partial last block, which the prefix
 * cache does not keep, so that the labels of one llm_classify() call (the
 * same prompt, each with its own continuation) compute their prompt once.
 * These are the bits s would compute itself (the keys of a position do not
 * depend on the batch or the chunking), so no answer changes.  Nothing is
 * copied when the pool is short, or without the prefix cache (eviction).
 */
static void
seq_copy_prompt_tail(LlmEngine *e, Seq *s)
{
	LlmKvCache *kv = &e->kv;
	int			bs = kv->block_size;
	int			to = seq_first_wanted(s);
	const Seq  *donor;

	if (!kv->prefix_cache || s->n_past >= to || s->n_past % bs != 0 ||
		(donor = computed_prefix_donor(e, s, to)) == NULL ||
		llm_kv_seq_reserve(kv, &s->kv, to, NULL) != LLM_OK)
		return;
	for (int b = s->n_past / bs; b * bs < to; b++)
	{
		int32_t		pair_blocks[2] = {donor->kv.blocks[b], s->kv.blocks[b]};
		LlmKvSeq	pair = {.n_blocks = 2,.cap = 2,.blocks = pair_blocks};
		int			n = 0;

		/* slot j of the pair is the donor's block, slot bs + j the same place in s's */
		for (int j = 0; j < bs && b * bs + j < to; j++)
			for (int l = 0; l < kv->n_layers; l++)
				for (int h = 0; h < kv->n_kv_heads; h++)
					e->moves[n++] = (LlmKvMove) {.layer = l,.head = h,.from = j,.to = bs + j};
		e->backend->ops->kv_move(e->backend, kv, &pair, e->moves, n);
	}
	s->n_past = s->n_attached = to;
}

/*
 * Start running s: reuse the cached blocks of the longest cached prefix of
 * its tokens, and copy the rest of its prompt from a sequence that computed
 * it, always leaving the tokens whose logits it needs to compute
 * (seq_first_wanted).
 */
static void
seq_admit(LlmEngine *e, Seq *s)
{
	s->state = SEQ_RUNNING;
	if (s->n_past == 0)
	{
		s->n_past = s->n_attached = llm_kv_prefix_attach(&e->kv, &s->kv, s->tokens, seq_first_wanted(s));
		seq_copy_prompt_tail(e, s);
	}
}

/* A waiting sequence considered for admission: its place in e->seqs and its priority. */
typedef struct AdmitCandidate
{
	int			index;
	int			key;			/* INT_MAX when it has waited long enough, else its cached prompt tokens */
} AdmitCandidate;

/* Order of admission: higher key first, then arrival order. */
static int
admit_order(const void *a, const void *b)
{
	const AdmitCandidate *x = a;
	const AdmitCandidate *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return x->index - y->index;
}

/*
 * Admit waiting sequences while there is room: first those that have been
 * passed over LLM_ADMIT_MAX_PASSED times (in arrival order, so none
 * starves), then those whose prompt prefix is in the cache, longest first,
 * so that rows sharing an instruction run together on its cached blocks
 * (SGLang's longest-prefix-match), then the rest in arrival order.  Only
 * the first LLM_ADMIT_SCAN waiting sequences are looked at, which bounds
 * the hashing a step does.  A sequence whose prefix another one is still
 * computing waits for it (shares_pending_prefix), checked as each one is
 * admitted.
 */
static void
admit_waiting(LlmEngine *e, int n_running)
{
	AdmitCandidate cand[LLM_ADMIT_SCAN];
	int			n = 0;
	int			last_admitted = -1;

	if (n_running >= e->config.max_seqs)
		return;
	for (int i = 0; i < e->n_seqs && n < LLM_ADMIT_SCAN; i++)
	{
		Seq		   *s = e->seqs[i];

		if (s->state != SEQ_WAITING)
			continue;
		cand[n].index = i;
		cand[n].key = s->n_passed >= LLM_ADMIT_MAX_PASSED ? INT_MAX
			: s->n_past == 0 ? llm_kv_prefix_cached(&e->kv, s->kv.partition, s->tokens, seq_first_wanted(s)) : 0;
		n++;
	}
	qsort(cand, n, sizeof(cand[0]), admit_order);
	for (int c = 0; c < n && n_running < e->config.max_seqs; c++)
	{
		Seq		   *s = e->seqs[cand[c].index];

		if (shares_pending_prefix(e, s))
			continue;
		seq_admit(e, s);
		n_running++;
		if (cand[c].index > last_admitted)
			last_admitted = cand[c].index;
	}
	/* every sequence still waiting that came before one admitted was passed over */
	for (int i = 0; i < last_admitted; i++)
		if (e->seqs[i]->state == SEQ_WAITING)
			e->seqs[i]->n_passed++;
}

/* Drop s's keys beyond the KV budget and give back the blocks that frees. */
static void
seq_evict(LlmEngine *e, Seq *s)
{
	LlmError	err;
	LlmStatus	st;

	if (e->evict.budget > 0 && s->state == SEQ_RUNNING &&
		(st = llm_kv_evict_apply(e->backend, &e->kv, &s->kv, s->n_past - s->kv.n_evicted, s->n_past - 1,
								 &e->evict, e->moves, &err)) != LLM_OK)
		seq_finish(e, s, LLM_FINISH_ERROR, st, err.msg);
}

/* Run one step: admit, batch, forward, sample, finish. */
LlmStatus
llm_engine_step(LlmEngine *e, LlmError *err)
{
	int			n_running = 0;
	int			n_batch = 0;
	int			n_out = 0;
	int			budget = e->config.max_batch_tokens;
	int			n_prompts;
	bool		any_prompt = false;
	LlmBatch	batch;
	LlmStatus	st;

	int			n_decoding = 0;
	int			spec_budget;
	double		t_forward;

	for (int i = 0; i < e->n_seqs; i++)
		if (e->seqs[i]->state == SEQ_RUNNING)
			n_running++;
	admit_waiting(e, n_running);

	/*
	 * decoding sequences first (one token each), then prompt chunks in the
	 * order of the groups' shares (share.h), while the step's time (pace.h)
	 * lasts; tokens that want logits only while the logits rows last
	 * (batch_add_seq)
	 */
	{
		int			running = 0;
		int			waiting = 0;

		for (int i = 0; i < e->n_seqs; i++)
		{
			running += e->seqs[i]->state == SEQ_RUNNING;
			waiting += e->seqs[i]->state == SEQ_WAITING;
		}
		llm_pace_begin(&e->pace, running == 1 && waiting == 0);
	}
	n_prompts = prompt_order(e);
	/* drafts only in steps with no prompt, and only those worth their compute (spec_gate.h) */
	for (int i = 0; i < e->n_seqs; i++)
		n_decoding += e->seqs[i]->state == SEQ_RUNNING && e->seqs[i]->n_tokens - e->seqs[i]->n_past == 1;
	spec_budget = e->config.speculative != LLM_SPEC_OFF && n_prompts == 0 ? e->config.spec_step_drafts : 0;
	llm_spec_gate_begin(&e->spec_gate, n_decoding, e->config.spec_knee_tokens);
	if (e->drafter != NULL && spec_budget > 0)
	{
		draft_with_model(e, spec_budget);
		spec_budget = 0;		/* every draft is made: none in pass 0 */
	}
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < (pass == 0 ? e->n_seqs : n_prompts) && n_batch < budget; k++)
		{
			Seq		   *s = e->seqs[pass == 0 ? k : e->prompt_order[k]];
			bool		decoding = s->n_tokens - s->n_past == 1;
			int			added;
			int			limit = budget - n_batch;

			if (s->state != SEQ_RUNNING || decoding != (pass == 0))
				continue;
			if (!decoding)
			{
				limit = llm_pace_chunk(&e->pace, s->n_past, s->n_tokens - s->n_past < limit ? s->n_tokens - s->n_past : limit,
									   !any_prompt);
				if (limit == 0)
					break;
				any_prompt = true;
			}
			if (decoding && spec_budget > 0 && e->drafter == NULL)
				spec_budget -= seq_draft(e, s, spec_budget);
			added = batch_add_seq(e, s, n_batch, limit, e->max_out - n_out);
			llm_pace_add(&e->pace, s->n_past, added, !decoding);
			if (!decoding && s->share_index >= 0)
				llm_shares_charge(&e->shares, s->share_index, s->share_weight, added);
			for (int j = 0; j < added; j++)
				n_out += e->b_want[n_batch + j];
			if (s->n_past < s->n_prompt)
				e->stats.tokens_prefilled += added < s->n_prompt - s->n_past ? added : s->n_prompt - s->n_past;
			n_batch += added;
		}
	llm_shares_end(&e->shares);
	if (n_batch == 0)
		return LLM_OK;

	batch.n = n_batch;
	batch.token = e->b_token;
	batch.pos = e->b_pos;
	batch.seq = e->b_seq;
	batch.want_logits = e->b_want;
	t_forward = llm_pace_now();
	st = llm_forward(e->model, e->backend, &e->kv, &e->run, &batch, e->logits, err);
	llm_pace_end(&e->pace);
	if (e->config.speculative == LLM_SPEC_DRAFT && !any_prompt)
		llm_spec_costs_step(&e->spec_costs, llm_pace_now() - t_forward, n_batch, e->config.spec_knee_tokens);
	e->stats.steps++;
	if (st != LLM_OK)
	{
		/* fail the sequences of this batch, keep the engine usable */
		for (int b = 0; b < n_batch; b++)
			if (e->b_owner[b]->state == SEQ_RUNNING)
				seq_finish(e, e->b_owner[b], LLM_FINISH_ERROR, st, err ? err->msg : "forward pass failed");
		return st;
	}

	/*
	 * the batch's keys and values are stored: advance, offer full blocks to
	 * the prefix cache (up to a drafting sequence's last sure token), evict
	 */
	for (int b = 0; b < n_batch; b++)
		e->b_owner[b]->n_past++;
	for (int b = 0; b < n_batch; b++)
		if (b == n_batch - 1 || e->b_owner[b + 1] != e->b_owner[b])
		{
			Seq		   *s = e->b_owner[b];

			llm_kv_prefix_register(&e->kv, &s->kv, s->tokens, s->n_past - s->n_draft);
			seq_evict(e, s);
		}

	/* sample each row in order; a drafting sequence's rows count while its drafts are accepted */
	n_out = 0;
	for (int b = 0; b < n_batch; b++)
	{
		Seq		   *s = e->b_owner[b];

		if (!e->b_want[b])
			continue;
		if (s->state == SEQ_RUNNING && (s->n_draft == 0 || draft_row_live(e, s, b)))
			seq_accept_logits(e, s, e->b_pos[b], e->logits + (size_t) n_out * e->model->config.n_vocab);
		n_out++;
		if (s->n_draft > 0 && (b == n_batch - 1 || e->b_owner[b + 1] != s))
			seq_end_draft(e, s);
	}
	return LLM_OK;
}

/* Take the next finished (not yet polled) sequence; false when none. */
bool
llm_engine_poll(LlmEngine *e, LlmResult *out)
{
	for (int i = 0; i < e->n_seqs; i++)
	{
		Seq		   *s = e->seqs[i];

		if (s->state != SEQ_FINISHED || s->polled)
			continue;
		s->polled = true;
		out->id = s->id;
		out->reason = s->reason;
		out->n_prompt = s->n_prompt;
		out->n_cached = s->n_attached;
		out->n_drafted = s->n_drafted;
		out->n_draft_accepted = s->n_draft_accepted;
		out->n_generated = s->n_tokens - s->n_prompt;
		out->tokens = s->tokens + s->n_prompt;
		out->text = s->text;
		out->text_len = s->text_len;
		out->error = s->error;
		out->status = s->status;
		out->logprobs = s->logprobs != NULL ? s->logprobs + s->n_prompt : NULL;
		return true;
	}
	return false;
}

/* Cancel a queued or running sequence; unknown ids are ignored. */
void
llm_engine_cancel(LlmEngine *e, int64_t id)
{
	int			i = seq_index(e, id);

	if (i >= 0 && e->seqs[i]->state != SEQ_FINISHED)
		seq_finish(e, e->seqs[i], LLM_FINISH_CANCELLED, LLM_OK, NULL);
}

/* Forget a sequence, finished or not. */
void
llm_engine_release(LlmEngine *e, int64_t id)
{
	int			i = seq_index(e, id);

	if (i < 0)
		return;
	seq_free(e, e->seqs[i]);
	memmove(&e->seqs[i], &e->seqs[i + 1], (size_t) (e->n_seqs - i - 1) * sizeof(Seq *));
	e->n_seqs--;
}

/* Tokens sequence id has generated so far (0 for an unknown id). */
int
llm_engine_generated(const LlmEngine *e, int64_t id)
{
	int			i = seq_index(e, id);
	int			n = i < 0 ? 0 : e->seqs[i]->n_tokens - e->seqs[i]->n_prompt;

	return n > 0 ? n : 0;
}

/* Counters for llm_stats. */
void
llm_engine_stats(const LlmEngine *e, LlmEngineStats *out)
{
	*out = e->stats;
	out->n_waiting = 0;
	out->n_running = 0;
	out->kv_tokens = 0;
	out->kv_capacity = 0;
	for (int i = 0; i < e->n_seqs; i++)
	{
		const Seq  *s = e->seqs[i];

		if (s->state == SEQ_WAITING)
			out->n_waiting++;
		else if (s->state == SEQ_RUNNING)
		{
			out->n_running++;
			out->kv_tokens += s->n_past - s->kv.n_evicted;
			out->kv_capacity += (int64_t) s->kv.n_blocks * e->kv.block_size;
		}
	}
	out->kv_blocks_used = e->kv.n_blocks - e->kv.n_free - e->kv.n_lru;
	out->kv_blocks_cached = e->kv.n_lru;
	out->kv_blocks_total = e->kv.n_blocks;
	out->evicted_keys = e->kv.evicted_keys;

}
