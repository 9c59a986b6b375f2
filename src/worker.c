/*
 * worker.c
 *		The background worker "llm worker": serves the request queue
 *		through the engine.
 *
 * One worker per device of llm.devices (devices.c; one when it is empty),
 * each with its own engine over the same model, all serving the one queue:
 * a worker claims its share of the queued requests (fair.c) and answers
 * only those, and a request stays with the worker that claimed it (its KV
 * is there) until it is answered or cancelled.  Each worker's entry of
 * LlmState->workers (LlmWorkerSelf) is its own to write.
 *
 * At start (and when the model settings change on SIGHUP, once the engine
 * has drained) a worker loads llm.model and creates an engine for it
 * through worker_model.c.  Without a model (none set, or
 * missing, outside llm.model_dir or invalid) it keeps running and answers
 * every request with "no model is loaded": a bad setting must not become a
 * crash loop.
 *
 * The main loop, once per engine step:
 *   1. drop CANCELLED slots (releasing their engine sequences) and claim
 *      as many QUEUED ones as the engine runs at once, in the order of
 *      fair.c's weighted fair queue over roles: tokenize, check the context
 *      length, then answer it from the answer cache (worker_cache.c) when
 *      the same request was answered before, else llm_engine_add(); every
 *      claimed request joins the engine at once and the engine batches them
 *      (continuous batching), and the rest wait in their slots, where the
 *      next claim chooses again;
 *   2. run one llm_engine_step() when the engine has work, then hand every
 *      finished sequence back to its slot (DONE or ERROR) and wake the
 *      waiting backend; a step that fails fails only the sequences of its
 *      batch (the engine finishes them with an error), not the others;
 *   3. write the answer cache's file when it is due, wait on the latch
 *      (not at all while the engine has work), then handle SIGHUP and
 *      SIGTERM.
 * New requests, cancellations and signals are thus seen between any two
 * steps.
 *
 * Only this process touches the engine.  The engine's compute threads must
 * never run PostgreSQL code, including its signal handlers, so every engine
 * call that may start threads runs with all signals blocked
 * (LlmBlockSignals); threads inherit that mask.  On exit (ERROR, FATAL,
 * SIGTERM) a before_shmem_exit callback fails every request the worker has
 * not answered, so waiting backends get an error rather than wait forever;
 * a crash (SIGKILL) makes the postmaster reset shared memory, which ends
 * every session anyway.  The postmaster restarts the worker after a second
 * in both cases.
 */
#include "postgres.h"

#include <stdlib.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "llm.h"

/* The worker's view of a slot it has put into the engine. */
typedef struct LlmWorkerSeq
{
	bool		active;			/* in the engine */
	int64		engine_id;
	TimestampTz claimed_at;		/* when the worker took the request */
	uint8_t    *cache_key;		/* (cache_key_len) malloc'd: its answer's key in the answer cache, or NULL */
	size_t		cache_key_len;
} LlmWorkerSeq;

static LlmWorkerSeq *WorkerSeqs = NULL;	/* (n_slots) */
static bool WorkerReloadPending = false;
static uint64 WorkerAnswers = 0;	/* slots answered so far: whether a pass of the loop made room */
static LlmEngineStats WorkerLast;	/* the engine's counters at the last publish */

/* This process's index in LlmState->workers (a model worker's; 0 elsewhere, unused). */
int			LlmMyWorker = 0;

/* Register one worker per device of llm.devices; called by _PG_init in the postmaster. */
void
LlmWorkerRegister(void)
{
	for (int i = 0; i < LlmDeviceCount(); i++)
	{
		BackgroundWorker worker;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_ConsistentState;
		worker.bgw_restart_time = 1;
		worker.bgw_main_arg = Int32GetDatum(i);
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "llm");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "LlmWorkerMain");
		if (i == 0)
			snprintf(worker.bgw_name, BGW_MAXLEN, "llm worker");
		else
			snprintf(worker.bgw_name, BGW_MAXLEN, "llm worker %d", i);
		snprintf(worker.bgw_type, BGW_MAXLEN, "llm worker");
		RegisterBackgroundWorker(&worker);
	}
}

/* This worker's entry of LlmState->workers, which only it writes. */
LlmWorkerInfo *
LlmWorkerSelf(void)
{
	return &LlmState->workers[LlmMyWorker];
}

/*
 * A copy of the entry of the worker that serves: the first with a model,
 * else the first (what llm_worker_status() and the SQL functions that ask
 * about the model read).  Takes the lock.
 */
LlmWorkerInfo
LlmWorkerServing(void)
{
	LlmWorkerInfo w;
	int			k = 0;

	LWLockAcquire(LlmState->lock, LW_SHARED);
	while (k < LlmState->n_workers - 1 && !LlmState->workers[k].has_model)
		k++;
	if (!LlmState->workers[k].has_model)
		k = 0;
	w = LlmState->workers[k];
	LWLockRelease(LlmState->lock);
	return w;
}

/* How many model workers have a model loaded (a worker that exits clears has_model); lock held. */
int
LlmWorkersReady(void)
{
	int			ready = 0;

	for (int w = 0; w < LlmState->n_workers; w++)
		ready += LlmState->workers[w].has_model;
	return ready;
}

/*
 * Answer a slot the worker holds (RUNNING): with the error when msg is
 * given, else with result.  A failed request keeps result's text, its
 * output so far, for the error's detail.  A detail that may name paths
 * comes with detail_public, what roles that may not see them get instead
 * (LlmMaySeePaths); NULL: detail is for everyone.  cache_hit: result
 * comes from the answer cache.  A slot its backend cancelled in the
 * meantime is freed instead.  text is copied into the DSA area.
 */
static void
LlmWorkerAnswer(int slotno, const LlmResult *result, int sqlerrcode,
				const char *msg, const char *detail, const char *detail_public, const char *hint,
				bool cache_hit)
{
	LlmSlot    *slot = &LlmState->slots[slotno];
	dsa_area   *area = LlmShmemDsa();
	dsa_pointer text = InvalidDsaPointer;
	dsa_pointer chunks[3];
	int			n_chunks = 0;
	bool		answered = false;

	WorkerAnswers++;

	if (result && result->text_len > 0)
	{
		text = LlmDsaTextPut(area, result->text, result->text_len, DSA_ALLOC_NO_OOM);
		if (!DsaPointerIsValid(text))
		{
			sqlerrcode = ERRCODE_OUT_OF_MEMORY;
			msg = "out of memory";
			detail = psprintf("Failed on request for %zu bytes of shared memory for the completion.",
							  result->text_len);
			hint = NULL;
			result = NULL;
		}
	}

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	if (slot->state == LLM_SLOT_RUNNING || slot->state == LLM_SLOT_QUEUED)
	{
		slot->run_us = GetCurrentTimestamp() - WorkerSeqs[slotno].claimed_at;
		if (msg == NULL)
		{
			LlmWorkerInfo *me = LlmWorkerSelf();

			me->requests++;
			me->prompt_tokens += result->n_prompt;
			me->completion_tokens += result->n_generated;
			slot->result = text;
			slot->result_len = result->text_len;
			slot->prompt_tokens = result->n_prompt;
			slot->completion_tokens = result->n_generated;
			slot->cached_tokens = result->n_cached;
			slot->drafted_tokens = result->n_drafted;
			slot->accepted_tokens = result->n_draft_accepted;
			slot->logprob = 0;
			for (int i = 0; result->logprobs != NULL && i < result->n_generated; i++)
				slot->logprob += result->logprobs[i];	/* in order: the same sum every time */
			slot->finish_reason = result->reason;
			slot->cache_hit = cache_hit;
			slot->state = LLM_SLOT_DONE;
			LlmCountOutcome(slot, LLM_SLOT_DONE);
		}
		else
		{
			slot->result = text;	/* the output so far, if any */
			slot->result_len = result ? result->text_len : 0;
			slot->completion_tokens = result ? result->n_generated : 0;
			slot->sqlerrcode = sqlerrcode;
			strlcpy(slot->errmsg, msg, sizeof(slot->errmsg));
			strlcpy(slot->errdetail, detail ? detail : "", sizeof(slot->errdetail));
			strlcpy(slot->errdetail_public, detail_public ? detail_public : "", sizeof(slot->errdetail_public));
			strlcpy(slot->errhint, hint ? hint : "", sizeof(slot->errhint));
			slot->state = LLM_SLOT_ERROR;
			LlmCountOutcome(slot, LLM_SLOT_ERROR);
		}
		answered = true;
	}
	else
	{
		/* cancelled meanwhile: free it */
		Assert(slot->state == LLM_SLOT_CANCELLED);
		LlmSlotTakeChunks(slot, chunks, &n_chunks);
		LlmCountOutcome(slot, LLM_SLOT_CANCELLED);
		LlmSlotFree(slot);
	}
	LWLockRelease(LlmState->lock);

	if (!answered && DsaPointerIsValid(text))
		chunks[n_chunks++] = text;
	LlmFreeChunks(chunks, n_chunks);
	if (answered)
		ConditionVariableBroadcast(&slot->cv);
}

/* Take a slot's sequence out of the engine. */
static void
LlmWorkerRelease(int slotno)
{
	LlmWorkerSeq *seq = &WorkerSeqs[slotno];

	if (!seq->active)
		return;
	llm_engine_release(LlmWorkerEngine, seq->engine_id);
	seq->active = false;
	free(seq->cache_key);
	seq->cache_key = NULL;
}

/* Why a claimed request could not start: what its slot is answered with. */
typedef struct LlmStartError
{
	int			sqlerrcode;
	const char *msg;
	const char *detail;
	const char *hint;
} LlmStartError;

/* Fill in why a request could not start; returns false, for LlmWorkerAdd(). */
static bool
LlmStartFailed(LlmStartError *why, int sqlerrcode, const char *msg, const char *detail,
			   const char *hint)
{
	why->sqlerrcode = sqlerrcode;
	why->msg = msg;
	why->detail = detail;
	why->hint = hint;
	return false;
}

/* Answer a claimed request that cannot start: no model is loaded. */
static void
LlmWorkerNoModel(int slotno)
{
	const char *reason;
	const char *reason_public;

	LWLockAcquire(LlmState->lock, LW_SHARED);
	reason = pstrdup(LlmWorkerSelf()->error);
	reason_public = pstrdup(LlmWorkerSelf()->error_public);
	LWLockRelease(LlmState->lock);
	/* the reason may name paths under llm.model_dir */
	LlmWorkerAnswer(slotno, NULL, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
					"no model is loaded", reason, reason[0] != '\0' ? reason_public : NULL,
					"Set llm.model to a GGUF file in llm.model_dir and reload the configuration; "
					"a change of llm.device takes a restart.", false);
}

/*
 * Check a tokenized request (job: its input, then the tokenizer thread's
 * result) and add it to the engine as sequence *id, unless the answer
 * cache has its answer (*hit, with *cached): the input holds the system
 * prompt, the prompt (or conversation), the tools, the continuation,
 * n_stop NUL-terminated stop strings and the grammar.  A request added
 * that may be cached gets its key in the slot's LlmWorkerSeq.  Returns
 * false, with *why filled in, when the request cannot start.
 */
static bool
LlmWorkerAdd(const LlmTokenizeJob *job, int64 *id, bool *hit, LlmResult *cached, LlmStartError *why)
{
	LlmWorkerSeq *seq = &WorkerSeqs[job->req.slotno];
	const LlmParams *params = &job->req.params;
	const char **stop = NULL;
	LlmRequest	req;
	LlmError	err;
	LlmStatus	status;
	int			n_ctx;
	const char *grammar;
	sigset_t	mask;

	if (job->status != LLM_OK && params->messages)
		return LlmStartFailed(why, LlmStatusErrcode(job->status),
							  job->status == LLM_ERR_UNSUPPORTED ?
							  "the model's chat template cannot render the conversation" :
							  "could not render the conversation", LlmMessageAsSentence(job->err.msg), NULL);
	if (job->status == LLM_ERR_UNSUPPORTED && job->stage == LLM_TOKENIZE_PROMPT)
		return LlmStartFailed(why, ERRCODE_FEATURE_NOT_SUPPORTED,
							  "the model's chat format cannot be used", LlmMessageAsSentence(job->err.msg),
							  "Pass chat => false, or set llm.chat to off.");
	if (job->status != LLM_OK)
		return LlmStartFailed(why, LlmStatusErrcode(job->status),
							  job->stage == LLM_TOKENIZE_PROMPT ? "could not tokenize the prompt" :
							  "could not tokenize the continuation",
							  LlmMessageAsSentence(job->err.msg), NULL);

	/*
	 * The engine's own limit, checked here to tell the user both counts
	 * (llm_engine_add would fail with a terser message).
	 */
	n_ctx = llm_engine_n_ctx(LlmWorkerEngine);
	if (!llm_engine_prompt_fits(LlmWorkerEngine, job->n_tokens, params->max_tokens))
		return LlmStartFailed(why, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
							  "prompt is too long",
							  psprintf("The prompt has %d tokens; the model's context length is %d.",
									   job->n_tokens, n_ctx),
							  NULL);

	/* The stop strings follow the prompt, the tools and the continuation, each NUL-terminated; then the grammar. */
	grammar = job->bytes + job->req.system_len + job->req.prompt_len + job->req.tools_len +
		job->req.continuation_len;
	if (job->req.n_stop > 0)
	{
		stop = palloc(sizeof(char *) * job->req.n_stop);
		for (int i = 0; i < job->req.n_stop; i++)
		{
			stop[i] = grammar;
			grammar += strlen(grammar) + 1;
		}
	}

	llm_request_default(&req);
	req.prompt = job->tokens;
	req.n_prompt = job->n_tokens;
	req.max_tokens = params->max_tokens;
	if (params->score)
	{
		/* the continuation's tokens, scored instead of sampled */
		if (job->n_forced == 0)
			return LlmStartFailed(why, ERRCODE_INVALID_PARAMETER_VALUE, "the continuation is empty", NULL, NULL);
		if (job->n_tokens + job->n_forced > n_ctx)
			return LlmStartFailed(why, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "prompt and continuation are too long",
								  psprintf("They have %d and %d tokens; the model's context length is %d.",
										   job->n_tokens, job->n_forced, n_ctx), NULL);
		req.forced = job->forced;
		req.n_forced = job->n_forced;
		req.max_tokens = job->n_forced;
		req.logprobs = true;
	}
	req.temperature = (float) params->temperature;
	req.top_p = (float) params->top_p;
	req.top_k = params->top_k;
	req.seed = params->seed;
	/* each role its own prefix cache, unless llm.prefix_cache_shared (never 0, the shared one) */
	req.cache_partition = llm_prefix_cache_shared ? 0 : ((uint64) job->req.roleid << 32) | 0x6c6c6d;
	/* the engine shares its prompt budget and KV pool by role, as the queue does (fair.c) */
	req.share_group = job->req.roleid;
	req.share_weight = (float) job->req.weight;
	req.draft_group = params->draft_group;
	req.stop = stop;
	req.n_stop = job->req.n_stop;
	req.grammar = params->grammar;
	req.grammar_text = grammar;
	req.grammar_len = params->grammar_len;

	/* a request answered before: its answer, without the engine */
	free(seq->cache_key);
	*hit = LlmAnswerCacheLookup(&req, &job->req, cached, &seq->cache_key, &seq->cache_key_len);
	if (*hit)
	{
		free(seq->cache_key);
		seq->cache_key = NULL;
		return true;
	}

	llm_error_clear(&err);
	mask = LlmBlockSignals();
	status = llm_engine_add(LlmWorkerEngine, &req, id, &err);
	LlmRestoreSignals(&mask);
	if (status != LLM_OK)
	{
		free(seq->cache_key);
		seq->cache_key = NULL;
		return LlmStartFailed(why, LlmStatusErrcode(status), pstrdup(err.msg), NULL, NULL);
	}
	return true;
}

/* A request the worker has claimed: what it takes from the slot, and the slot's input. */
typedef struct LlmClaim
{
	LlmClaimed	req;
	dsa_pointer input;
} LlmClaim;

/*
 * Hand a claimed request to the tokenizer thread (worker_tokenize.c): its
 * input copied out of shared memory, whose chunk is freed at once.  Without
 * a model the request is answered with the error here.
 */
static void
LlmWorkerStart(const LlmClaim *c)
{
	dsa_area   *area = LlmShmemDsa();
	LlmTokenizeJob *job;

	WorkerSeqs[c->req.slotno].claimed_at = GetCurrentTimestamp();
	if (LlmWorkerEngine == NULL)
	{
		LlmDsaTextFree(area, c->input);
		LlmWorkerNoModel(c->req.slotno);
		return;
	}
	job = calloc(1, sizeof(LlmTokenizeJob));
	if (job == NULL || (job->bytes = malloc(Max(c->req.input_len, 1))) == NULL)
	{
		free(job);
		LlmDsaTextFree(area, c->input);
		LlmWorkerAnswer(c->req.slotno, NULL, ERRCODE_OUT_OF_MEMORY, "out of memory",
						psprintf("Failed on request for %zu bytes to tokenize the prompt.", c->req.input_len),
						NULL, NULL, false);
		return;
	}
	LlmDsaTextGet(area, c->input, job->bytes, c->req.input_len);
	LlmDsaTextFree(area, c->input);
	job->req = c->req;
	LlmTokenizerSubmit(job);
}

/*
 * Step 1b of the loop: put the requests the tokenizer thread has finished
 * into the engine, or answer them with why they cannot start; drop those
 * whose backends gave up meanwhile (their slots were freed, and may hold
 * another request by now).
 */
static void
LlmWorkerAdmitTokenized(void)
{
	LlmTokenizeJob *job;

	while ((job = LlmTokenizerTake()) != NULL)
	{
		LlmSlot    *slot = &LlmState->slots[job->req.slotno];
		bool		ours;
		int64		id = 0;
		bool		hit = false;
		LlmResult	cached;
		LlmStartError why;

		LWLockAcquire(LlmState->lock, LW_SHARED);
		ours = slot->request_id == job->req.request_id && slot->state == LLM_SLOT_RUNNING;
		LWLockRelease(LlmState->lock);
		if (!ours)
			;					/* cancelled while it was tokenized */
		else if (LlmWorkerEngine == NULL)
			LlmWorkerNoModel(job->req.slotno);
		else if (!LlmWorkerAdd(job, &id, &hit, &cached, &why))
			LlmWorkerAnswer(job->req.slotno, NULL, why.sqlerrcode, why.msg, why.detail, NULL, why.hint, false);
		else if (hit)
			LlmWorkerAnswer(job->req.slotno, &cached, 0, NULL, NULL, NULL, NULL, true);
		else
		{
			WorkerSeqs[job->req.slotno].active = true;
			WorkerSeqs[job->req.slotno].engine_id = id;
		}
		LlmTokenizeJobFree(job);	/* the engine copied the prompt and stop strings */
	}
}

/*
 * Step 1 of the loop: free the slots whose backends gave up (dropping their
 * sequences: only this worker's, and those no worker had claimed) and
 * claim the queued ones the engine has room for, in the order of fair.c's
 * weighted fair queue (none while a reload is waiting for the engine to
 * drain).  Returns whether queued requests were left for want of room.
 */
static bool
LlmWorkerScanSlots(void)
{
	int			n_slots = LlmState->n_slots;
	LlmClaim   *claims = palloc(sizeof(LlmClaim) * n_slots);
	int		   *dropped = palloc(sizeof(int) * n_slots);
	int		   *picked = palloc(sizeof(int) * n_slots);
	dsa_pointer *chunks = palloc(sizeof(dsa_pointer) * 2 * n_slots);
	int			n_claims = 0;
	int			n_dropped = 0;
	int			n_chunks = 0;
	int			n_queued = 0;

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n_slots; i++)
	{
		LlmSlot    *slot = &LlmState->slots[i];

		if (slot->state == LLM_SLOT_CANCELLED && (slot->worker == LlmMyWorker || slot->worker < 0))
		{
			dropped[n_dropped++] = i;
			LlmSlotTakeChunks(slot, chunks, &n_chunks);
			LlmCountOutcome(slot, LLM_SLOT_CANCELLED);
			LlmSlotFree(slot);
		}
		else if (slot->state == LLM_SLOT_QUEUED)
			n_queued++;
	}
	if (!WorkerReloadPending)
		n_claims = LlmFairPick(picked, LlmWorkerEngine ? LlmWorkerEngineSeqs() : n_slots, LlmWorkerEngine != NULL);
	for (int k = 0; k < n_claims; k++)
	{
		LlmSlot    *slot = &LlmState->slots[picked[k]];
		LlmClaim   *c = &claims[k];

		c->req.slotno = picked[k];
		c->req.request_id = slot->request_id;
		c->req.roleid = slot->roleid;
		c->req.weight = LlmFairRoleWeight(slot->role);
		c->req.params = slot->params;
		c->req.input_len = slot->input_len;
		c->req.has_system = slot->has_system;
		c->req.system_len = slot->system_len;
		c->req.prompt_len = slot->prompt_len;
		c->req.has_tools = slot->has_tools;
		c->req.tools_len = slot->tools_len;
		c->req.continuation_len = slot->continuation_len;
		c->req.n_stop = slot->n_stop;
		c->input = slot->input;
		slot->input = InvalidDsaPointer;
		slot->state = LLM_SLOT_RUNNING;
		slot->worker = LlmMyWorker;
	}
	LWLockRelease(LlmState->lock);

	/* Engine calls and DSA frees come after releasing the lock. */
	for (int i = 0; i < n_dropped; i++)
		LlmWorkerRelease(dropped[i]);
	LlmFreeChunks(chunks, n_chunks);
	for (int i = 0; i < n_claims; i++)
		LlmWorkerStart(&claims[i]);
	return n_claims < n_queued && !WorkerReloadPending;
}

/* The slot whose sequence has this engine id, or -1. */
static int
LlmWorkerFindSeq(int64 engine_id)
{
	for (int i = 0; i < LlmState->n_slots; i++)
		if (WorkerSeqs[i].active && WorkerSeqs[i].engine_id == engine_id)
			return i;
	return -1;
}

/*
 * Step 2 of the loop: one engine step.  A failed step is logged here; the
 * engine has finished the sequences of that step's batch with an error,
 * which LlmWorkerCollect() hands to their slots, and stays usable, so the
 * other sequences (waiting ones included) go on.  The engine has no state
 * in which it must be reset: if its device stays broken, every later step
 * fails its own batch the same way, so every request still gets an answer.
 */
static void
LlmWorkerStep(void)
{
	LlmError	err;
	LlmStatus	status;
	sigset_t	mask;
	TimestampTz start = GetCurrentTimestamp();

	llm_error_clear(&err);
	mask = LlmBlockSignals();
	status = llm_engine_step(LlmWorkerEngine, &err);
	LlmRestoreSignals(&mask);

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmState->counters.steps++;
	LlmState->counters.busy_us += GetCurrentTimestamp() - start;
	/* each running request's tokens so far, for its backend's llm_progress row */
	for (int s = 0; s < LlmState->n_slots; s++)
		if (WorkerSeqs[s].active && LlmState->slots[s].state == LLM_SLOT_RUNNING)
			LlmState->slots[s].completion_tokens = llm_engine_generated(LlmWorkerEngine, WorkerSeqs[s].engine_id);
	LWLockRelease(LlmState->lock);

	if (status != LLM_OK)
		ereport(WARNING,
				(errcode(LlmStatusErrcode(status)),
				 errmsg("llm engine step failed: %s", err.msg)));
}

/*
 * Answer every finished sequence.  Runs after each step and after adding
 * requests (a sequence can finish without a step, e.g. max_tokens = 0).
 */
static void
LlmWorkerCollect(void)
{
	LlmResult	result;

	while (llm_engine_poll(LlmWorkerEngine, &result))
	{
		int			slotno = LlmWorkerFindSeq(result.id);

		if (slotno < 0)
		{
			elog(WARNING, "llm engine finished unknown sequence " INT64_FORMAT, result.id);
			llm_engine_release(LlmWorkerEngine, result.id);
			continue;
		}
		if (result.reason == LLM_FINISH_ERROR)
			LlmWorkerAnswer(slotno, &result, LlmStatusErrcode(result.status),
							result.error ? result.error : "generation failed", NULL, NULL,
							result.status == LLM_ERR_LIMIT &&
							result.n_generated >= LlmState->slots[slotno].params.max_tokens ?
							"Raise max_tokens, or pass on_error => 'null' for NULL where a row fails." :
							"Pass on_error => 'null' for NULL where a row fails.", false);
		else
		{
			LlmAnswerCacheStore(WorkerSeqs[slotno].cache_key, WorkerSeqs[slotno].cache_key_len, &result);
			LlmWorkerAnswer(slotno, &result, 0, NULL, NULL, NULL, NULL, false);
		}
		LlmWorkerRelease(slotno);	/* after answering: result.text lives until here */
	}
}

/* Publish the engine's gauges and report what the worker is doing. */
static void
LlmWorkerPublish(void)
{
	LlmEngineStats st;
	static int	last_waiting = -1;
	static int	last_running = -1;
	int64		cache_entries;
	int64		cache_bytes;
	LlmWorkerInfo *me = LlmWorkerSelf();

	memset(&st, 0, sizeof(st));
	if (LlmWorkerEngine)
		llm_engine_stats(LlmWorkerEngine, &st);
	LlmAnswerCacheGauges(&cache_entries, &cache_bytes);

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	me->cache_entries = cache_entries;
	me->cache_bytes = cache_bytes;
	me->engine_waiting = st.n_waiting;
	me->engine_running = st.n_running;
	me->kv_blocks_used = st.kv_blocks_used;
	me->kv_blocks_cached = st.kv_blocks_cached;
	me->kv_blocks_total = st.kv_blocks_total;
	/* The engine's totals restart with each engine: add what is new. */
	if (st.preemptions > WorkerLast.preemptions)
		LlmState->counters.preemptions += st.preemptions - WorkerLast.preemptions;
	if (st.prefix_hit_tokens > WorkerLast.prefix_hit_tokens)
		LlmState->counters.prefix_hit_tokens += st.prefix_hit_tokens - WorkerLast.prefix_hit_tokens;
	if (st.evicted_keys > WorkerLast.evicted_keys)
		LlmState->counters.evicted_keys += st.evicted_keys - WorkerLast.evicted_keys;
	if (st.draft_tokens > WorkerLast.draft_tokens)
		LlmState->counters.draft_tokens += st.draft_tokens - WorkerLast.draft_tokens;
	if (st.draft_accepted > WorkerLast.draft_accepted)
		LlmState->counters.draft_accepted += st.draft_accepted - WorkerLast.draft_accepted;
	LWLockRelease(LlmState->lock);
	WorkerLast = st;

	if (st.n_waiting != last_waiting || st.n_running != last_running)
	{
		if (st.n_waiting + st.n_running == 0)
			pgstat_report_activity(STATE_IDLE, NULL);
		else
			pgstat_report_activity(STATE_RUNNING,
								   psprintf("generating: %d running, %d waiting",
											st.n_running, st.n_waiting));
		last_waiting = st.n_waiting;
		last_running = st.n_running;
	}
}

/* Re-read the configuration; changed model settings schedule a reload. */
static void
LlmWorkerReloadConfig(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	LlmAnswerCacheConfigure();

	if (LlmWorkerModelStale())
		WorkerReloadPending = true;
	else
		LlmWorkerForgetFailedReload();
}

/* Whether SIGTERM asked the worker to exit (an administrator's shutdown, not a failure). */
static volatile sig_atomic_t WorkerGotSigterm = false;

/* SIGTERM: remember it, then exit as die() does. */
static void
LlmWorkerSigterm(SIGNAL_ARGS)
{
	WorkerGotSigterm = true;
	die(postgres_signal_arg);
}

/*
 * before_shmem_exit callback: fail every request this worker has not
 * answered, free its cancelled ones, and say the worker is gone.  Queued
 * requests are failed too when no other worker is running to take them.
 */
static void
LlmWorkerOnExit(int code, Datum arg)
{
	int			n_slots = LlmState->n_slots;
	bool	   *wake = palloc0(sizeof(bool) * n_slots);
	dsa_pointer *chunks = palloc(sizeof(dsa_pointer) * 2 * n_slots);
	int			n_chunks = 0;
	/* SIGTERM (a shutdown, pg_terminate_backend): ProcessInterrupts cleared ProcDiePending */
	int			sqlerrcode = WorkerGotSigterm || ProcDiePending ? ERRCODE_ADMIN_SHUTDOWN : ERRCODE_INTERNAL_ERROR;
	bool		others = false;
	LlmWorkerInfo *me = LlmWorkerSelf();

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	for (int w = 0; w < LlmState->n_workers; w++)
		if (w != LlmMyWorker && LlmState->workers[w].pid != 0)
			others = true;
	for (int i = 0; i < n_slots; i++)
	{
		LlmSlot    *slot = &LlmState->slots[i];
		bool		mine = slot->worker == LlmMyWorker;

		if ((slot->state == LLM_SLOT_QUEUED && !others) || (slot->state == LLM_SLOT_RUNNING && mine))
		{
			slot->sqlerrcode = sqlerrcode;
			strlcpy(slot->errmsg, "llm background worker exited", sizeof(slot->errmsg));
			strlcpy(slot->errdetail, "The request was not finished.", sizeof(slot->errdetail));
			slot->errhint[0] = '\0';
			slot->state = LLM_SLOT_ERROR;
			LlmCountOutcome(slot, LLM_SLOT_ERROR);
			wake[i] = true;
		}
		else if (slot->state == LLM_SLOT_CANCELLED && (mine || slot->worker < 0))
		{
			LlmSlotTakeChunks(slot, chunks, &n_chunks);
			LlmCountOutcome(slot, LLM_SLOT_CANCELLED);
			LlmSlotFree(slot);
		}
	}
	me->pid = 0;
	me->state = LLM_WORKER_STOPPED;
	me->has_model = false;
	me->engine_waiting = 0;
	me->engine_running = 0;
	me->kv_blocks_used = 0;
	me->kv_blocks_cached = 0;
	LWLockRelease(LlmState->lock);
	if (others)
		LlmWakeWorker();		/* the queued requests are theirs now */

	LlmFreeChunks(chunks, n_chunks);
	for (int i = 0; i < n_slots; i++)
		if (wake[i])
			ConditionVariableBroadcast(&LlmState->slots[i].cv);

	LlmTokenizerStop();			/* it may be reading the model */
	LlmWorkerFreeEngine();
	LlmAnswerCacheSave(true, false);	/* what was answered, for the next worker */
}

/*
 * Give the DSA area's free segments back to the operating system once the
 * worker has nothing to do (after huge prompts, /dev/shm would otherwise
 * keep their size until the server stops), and let go of those that
 * backends freed last; once per idle spell (LlmShmemDsaTrim).  A backend
 * does the same at the end of each batch, when the worker has freed its
 * prompts.
 */
static void
LlmWorkerTrimDsa(bool busy)
{
	static bool trimmed = true;

	if (busy)
		trimmed = false;
	else if (!trimmed)
	{
		LlmShmemDsaTrim();
		trimmed = true;
	}
}

/* Main entry point of the background worker. */
void
LlmWorkerMain(Datum main_arg)
{
	MemoryContext iteration_cxt;

	LlmMyWorker = DatumGetInt32(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, LlmWorkerSigterm);
	BackgroundWorkerUnblockSignals();

	/* No database: only for pg_stat_activity and the wait events. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname(LlmMyWorker == 0 ? "llm worker" : psprintf("llm worker %d", LlmMyWorker));

	WorkerSeqs = MemoryContextAllocZero(TopMemoryContext,
										sizeof(LlmWorkerSeq) * LlmState->n_slots);
	(void) LlmShmemDsa();
	LlmFairWorkerInit();

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmWorkerSelf()->pid = MyProcPid;
	LlmWorkerSelf()->pgprocno = LlmMyProcNumber();
	LlmWorkerSelf()->state = LLM_WORKER_STARTING;
	LlmWorkerSelf()->started_at = GetCurrentTimestamp();
	LlmWorkerSelf()->has_model = false;
	LWLockRelease(LlmState->lock);
	before_shmem_exit(LlmWorkerOnExit, 0);

	iteration_cxt = AllocSetContextCreate(TopMemoryContext,
										  "llm worker iteration",
										  ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(iteration_cxt);

	LlmAnswerCacheConfigure();
	LlmWorkerLoad();

	for (;;)
	{
		bool		busy;
		bool		tokenizing;
		bool		left_queued;
		uint64		answers_before = WorkerAnswers;

		MemoryContextReset(iteration_cxt);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
			LlmWorkerReloadConfig();

		/* A reload waits until the sequences in the engine, and those being tokenized, have finished. */
		if (WorkerReloadPending && (LlmWorkerEngine == NULL || !llm_engine_busy(LlmWorkerEngine)) &&
			LlmTokenizerIdle())
		{
			WorkerReloadPending = false;
			if (LlmWorkerLoad())	/* the old model serves until a new one works */
				memset(&WorkerLast, 0, sizeof(WorkerLast));	/* a new engine counts from 0 */
		}

		left_queued = LlmWorkerScanSlots();
		LlmWorkerAdmitTokenized();

		busy = LlmWorkerEngine != NULL && llm_engine_busy(LlmWorkerEngine);
		if (busy)
			LlmWorkerStep();
		if (LlmWorkerEngine != NULL)
			LlmWorkerCollect();
		LlmWorkerPublish();
		tokenizing = !LlmTokenizerIdle();
		LlmWorkerTrimDsa(busy || tokenizing);
		LlmAnswerCacheSave(false, busy || tokenizing);	/* when changed: once a minute when idle */

		/*
		 * Requests left queued for want of room, which answers given without
		 * a step (max_tokens 0, or an error at admission) have just made:
		 * claim them now, since no backend sets the latch for them again.
		 */
		if (left_queued && WorkerAnswers != answers_before && !busy)
			continue;

		/*
		 * Sleep only when idle; when busy just look at the latch and the
		 * postmaster; while prompts are being tokenized, look again in 1 ms.
		 */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | (busy || tokenizing ? WL_TIMEOUT : 0),
						 busy ? llm_debug_step_delay : tokenizing ? 1L : -1L,
						 LLM_WAIT_EVENT_WORKER);
		ResetLatch(MyLatch);
	}
}
