/*
 * queue.c
 *		The backend's side of the request queue: submit requests to the llm
 *		worker, wait for their results, give them up on cancel or error.
 *
 * A job carries its own prompt, parameters and stop strings.  The pieces
 * (LlmQueueSubmit, LlmQueueWait, LlmQueueCancel) serve the "LLM Batch"
 * plan node (batch_scan.c), which keeps a window of rows in flight.
 * LlmQueueRun() serves one llm_generate() call (one job) or one
 * llm_generate_batch() call (many): it puts every job into a slot before it
 * waits for the first one, so the worker can batch them all; when its role
 * may take no more slots (fair.c: its limit, its share, or none free) it
 * waits for its own earliest job and reuses its slot (a batch of any size
 * works as a sliding window).  A backend refused with nothing in flight
 * fails at once when its role is at llm.max_requests_per_role, and
 * otherwise waits for a slot (LlmQueueSubmit).  Results are collected in
 * order.
 *
 * While waiting the backend sleeps on the slot's condition variable, which
 * checks for interrupts: a query cancel, a statement timeout or a
 * terminate request ends the wait at once.  LlmQueueCancel (run on ERROR
 * and on FATAL exit, through PG_ENSURE_ERROR_CLEANUP here and a memory
 * context callback in the batch node) then marks every unfinished job
 * CANCELLED and wakes the worker, which drops it at its next step; finished
 * but unread results are freed.  See shmem.c for the slot protocol.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "llm.h"

/* What the cleanup callback needs. */
typedef struct LlmQueueRunState
{
	LlmJob	   *jobs;
	int			n_jobs;
} LlmQueueRunState;

/* Check that the extension is usable here and attach to the DSA area (before any cleanup is registered). */
void
LlmQueueAttach(void)
{
	LlmShmemCheck();
	(void) LlmShmemDsa();
}

/*
 * Valid UTF-8 text (len bytes, NUL-terminated) in the server encoding, a
 * character that encoding cannot hold written as "?"; s itself when no
 * conversion is needed.
 */
static char *
LlmUtf8ToServer(const char *s, Size len)
{
	int			enc = GetDatabaseEncoding();
	Oid			proc;
	StringInfoData out;
	Size		i = 0;

	if (enc == PG_UTF8 || enc == PG_SQL_ASCII)
		return (char *) s;
	proc = FindDefaultConversionProc(PG_UTF8, enc);
	if (!OidIsValid(proc))
		return pg_any_to_server(s, len, PG_UTF8);	/* reports the missing conversion */
	initStringInfo(&out);
	while (i < len)
	{
		Size		n = len - i;
		int			done;

		enlargeStringInfo(&out, (int) (n * MAX_CONVERSION_GROWTH + 1));
		done = pg_do_encoding_conversion_buf(proc, PG_UTF8, enc,
											 (unsigned char *) s + i, (int) n,
											 (unsigned char *) out.data + out.len,
											 out.maxlen - out.len, true);
		i += done;
		out.len += strlen(out.data + out.len);
		if (i < len)
		{
			/* the character at i has no place in the server encoding */
			appendStringInfoChar(&out, '?');
			i += pg_utf_mblen((const unsigned char *) s + i);
		}
	}
	return out.data;
}

/*
 * A completion's len bytes as valid text in the server encoding.  The
 * engine's bytes are UTF-8 but may be cut inside a character
 * (max_tokens can end a sequence between byte tokens): invalid or
 * incomplete sequences and NUL bytes become U+FFFD.  A character the
 * server encoding cannot hold (U+FFFD itself in LATIN1) becomes "?", so a
 * completion never fails to convert (LlmUtf8ToServer).
 */
static char *
LlmCompletionToServer(const char *s, Size len)
{
	StringInfoData buf;
	Size		i = 0;
	char	   *converted;

	initStringInfo(&buf);
	while (i < len)
	{
		const unsigned char *p = (const unsigned char *) s + i;
		int			l = pg_utf_mblen(p);

		if (*p != 0 && l <= len - i && pg_utf8_islegal(p, l))
		{
			appendBinaryStringInfo(&buf, (const char *) p, l);
			i += l;
		}
		else
		{
			appendStringInfoString(&buf, "\xEF\xBF\xBD");
			i++;
		}
	}

	converted = LlmUtf8ToServer(buf.data, buf.len);
	if (converted != buf.data)
		pfree(buf.data);
	return converted;
}

/* The text a slot's worker wrote (its result) in the server encoding (LlmCompletionToServer). */
static char *
LlmSlotCompletion(const LlmSlot *slot)
{
	char	   *raw = LlmDsaTextCopy(LlmShmemDsa(), slot->result, slot->result_len);
	char	   *out = LlmCompletionToServer(raw, slot->result_len);

	pfree(raw);
	return out;
}

/* The detail of a failed request with output: that output (in the server encoding), cut to fit detail. */
static void
LlmOutputSoFar(char *detail, Size size, const char *out, int tokens)
{
	int			room = (int) size - 64;
	int			keep = pg_mbcliplen(out, strlen(out), room);

	snprintf(detail, size, "The output so far (%d tokens): %.*s%s", tokens, keep, out,
			 out[keep] != '\0' ? "..." : "");
}

/*
 * Put a job into a slot its role may take (fair.c); returns what refused
 * it, having changed nothing, or LLM_FAIR_OK.  waiter as for
 * LlmFairTakeSlot.
 */
static LlmFairRefusalKind
LlmQueueTrySubmit(LlmJob *job, LlmFairRefusal *why, LlmFairWaiter *waiter)
{
	dsa_area   *area = LlmShmemDsa();
	Size		input_len = job->system_len + job->prompt_len + job->tools_len + job->continuation_len +
		job->stops_len + job->params.grammar_len;
	dsa_pointer input;
	char	   *p;
	char	   *w;
	int			found = -1;

	Assert(job->prompt != NULL && job->slot < 0);
	if (input_len > (Size) llm_max_prompt_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("prompt is too large"),
				 errdetail("The request has %zu bytes of prompt, system prompt, tools, stop strings and schema; llm.max_prompt_bytes is %d.",
						   input_len, llm_max_prompt_bytes)));
	/* the input's layout is LlmSlot's */
	w = p = palloc(Max(input_len, 1));
	if (job->system_len > 0)
		w = (char *) memcpy(w, job->system, job->system_len) + job->system_len;
	w = (char *) memcpy(w, job->prompt, job->prompt_len) + job->prompt_len;
	if (job->tools_len > 0)
		w = (char *) memcpy(w, job->tools, job->tools_len) + job->tools_len;
	if (job->continuation_len > 0)
		w = (char *) memcpy(w, job->continuation, job->continuation_len) + job->continuation_len;
	if (job->stops_len > 0)
		w = (char *) memcpy(w, job->stops, job->stops_len) + job->stops_len;
	if (job->params.grammar_len > 0)
		w = (char *) memcpy(w, job->grammar, job->params.grammar_len) + job->params.grammar_len;
	Assert(w == p + input_len);
	input = LlmDsaTextPut(area, p, input_len, 0);
	pfree(p);

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	found = LlmFairTakeSlot(why, waiter);
	if (found >= 0)
	{
		LlmSlot    *slot = &LlmState->slots[found];

		slot->role = why->role;
		slot->roleid = GetSessionUserId();
		slot->request_id = LlmState->next_request_id++;
		slot->owner_pid = MyProcPid;
		slot->queued_at = GetCurrentTimestamp();
		slot->params = job->params;
		slot->input = input;
		slot->has_system = job->system != NULL;
		slot->system_len = job->system_len;
		slot->prompt_len = job->prompt_len;
		slot->has_tools = job->tools != NULL;
		slot->tools_len = job->tools_len;
		slot->continuation_len = job->continuation_len;
		slot->logprob = 0;
		slot->input_len = input_len;
		slot->n_stop = job->n_stop;
		slot->result = InvalidDsaPointer;
		slot->result_len = 0;
		slot->prompt_tokens = 0;
		slot->completion_tokens = 0;
		slot->cached_tokens = 0;
		slot->drafted_tokens = 0;
		slot->accepted_tokens = 0;
		slot->cache_hit = false;
		slot->run_us = 0;
		slot->finish_reason = LLM_FINISH_NONE;
		slot->sqlerrcode = 0;
		slot->errmsg[0] = '\0';
		slot->errdetail[0] = '\0';
		slot->errdetail_public[0] = '\0';
		slot->errhint[0] = '\0';
		slot->state = LLM_SLOT_QUEUED;
		slot->worker = -1;

		job->slot = found;
		job->request_id = slot->request_id;
	}
	LWLockRelease(LlmState->lock);

	if (found < 0)
	{
		LlmDsaTextFree(area, input);
		return why->refusal;
	}
	LlmWakeWorker();
	return LLM_FAIR_OK;
}

/*
 * libpq/libpq.h's, declared here: that header pulls in libpq-be.h and with
 * it the GSSAPI headers, which building against PostgreSQL need not have.
 */
extern bool pq_check_connection(void);

/* How often a waiting backend looks whether its client is still there. */
#define LLM_CLIENT_CHECK_MS 1000

/*
 * End the session (FATAL, "connection to client lost") when its client has
 * gone, as client_connection_check_interval would, whatever that setting:
 * an abandoned query must not keep the model busy.  The error cleanup then
 * cancels the session's requests.
 */
static void
LlmCheckClient(void)
{
	if (MyProcPort != NULL && !pq_check_connection())
	{
		ClientConnectionLost = true;
		InterruptPending = true;
		CHECK_FOR_INTERRUPTS();
	}
}

/* Cleanup callback of LlmQueueSubmit()'s wait for a slot: no longer waiting. */
static void
LlmQueueSlotWaitCleanup(int code, Datum arg)
{
	ConditionVariableCancelSleep();
	LlmFairStopWaiting((LlmFairWaiter *) DatumGetPointer(arg));
}

/*
 * Put a job into a slot, as the shares of fair.c allow.  Refused, a
 * backend with other jobs in flight (in_flight) gets false, to wait for
 * its own earliest and try again; one with none fails at once when its
 * role is at its limit, and otherwise (other roles hold more than their
 * shares) waits for a slot, which it then gets.
 */
bool
LlmQueueSubmit(LlmJob *job, bool in_flight)
{
	LlmFairRefusal why;
	LlmFairWaiter waiter = {0};
	ConditionVariable *cv;

	if (LlmQueueTrySubmit(job, &why, in_flight ? NULL : &waiter) == LLM_FAIR_OK)
		return true;
	if (in_flight)
		return false;
	if (why.refusal != LLM_FAIR_WAIT)
		LlmFairRefuse(&why);

	cv = LlmFairSlotFreedCV();
	PG_ENSURE_ERROR_CLEANUP(LlmQueueSlotWaitCleanup, PointerGetDatum(&waiter));
	{
		ConditionVariablePrepareToSleep(cv);
		while (LlmQueueTrySubmit(job, &why, &waiter) != LLM_FAIR_OK)
		{
			if (why.refusal != LLM_FAIR_WAIT)
				LlmFairRefuse(&why);
			if (ConditionVariableTimedSleep(cv, LLM_CLIENT_CHECK_MS, LLM_WAIT_EVENT_REQUEST))
				LlmCheckClient();
		}
		ConditionVariableCancelSleep();
	}
	PG_END_ENSURE_ERROR_CLEANUP(LlmQueueSlotWaitCleanup, PointerGetDatum(&waiter));
	return true;
}

/*
 * Whether a submitted job's slot is DONE or ERROR, waiting up to timeout_ms
 * for it (0: just look; -1: until it is).  Its result is then read by
 * LlmQueueWait.
 */
bool
LlmQueuePoll(LlmJob *job, long timeout_ms)
{
	LlmSlot    *slot = &LlmState->slots[job->slot];
	LlmSlotState state;

	for (;;)
	{
		LWLockAcquire(LlmState->lock, LW_SHARED);
		Assert(slot->request_id == job->request_id);
		state = slot->state;
		LWLockRelease(LlmState->lock);

		if (state == LLM_SLOT_DONE || state == LLM_SLOT_ERROR || timeout_ms == 0)
			break;
		/* the first call only prepares to sleep; a timeout ends the second */
		if (ConditionVariableTimedSleep(&slot->cv, timeout_ms, LLM_WAIT_EVENT_REQUEST))
			timeout_ms = 0;
	}
	ConditionVariableCancelSleep();
	return state == LLM_SLOT_DONE || state == LLM_SLOT_ERROR;
}

/*
 * Wait until a submitted job's slot is DONE or ERROR, read it and free the
 * slot; raise the worker's error for ERROR, unless the job takes errors as
 * NULL (then it is marked failed).
 */
void
LlmQueueWait(LlmJob *job)
{
	LlmSlot    *slot = &LlmState->slots[job->slot];
	dsa_pointer chunks[2];
	int			n_chunks = 0;
	LlmSlotState state;
	int			sqlerrcode = 0;
	char		msg[LLM_ERRMSG_LEN];
	char		detail[LLM_ERRDETAIL_LEN];
	char		hint[LLM_ERRHINT_LEN];

	ConditionVariablePrepareToSleep(&slot->cv);
	for (;;)
	{
		LWLockAcquire(LlmState->lock, LW_SHARED);
		Assert(slot->request_id == job->request_id);
		state = slot->state;
		LWLockRelease(LlmState->lock);

		if (state == LLM_SLOT_DONE || state == LLM_SLOT_ERROR)
			break;
		if (ConditionVariableTimedSleep(&slot->cv, LLM_CLIENT_CHECK_MS, LLM_WAIT_EVENT_REQUEST))
			LlmCheckClient();
	}
	ConditionVariableCancelSleep();

	/* Only this backend changes the slot now. */
	if (state == LLM_SLOT_DONE)
	{
		job->completion = LlmSlotCompletion(slot);
		job->prompt_tokens = slot->prompt_tokens;
		job->completion_tokens = slot->completion_tokens;
		job->cached_tokens = slot->cached_tokens;
		job->drafted_tokens = slot->drafted_tokens;
		job->accepted_tokens = slot->accepted_tokens;
		job->logprob = slot->logprob;
		job->cache_hit = slot->cache_hit;
		job->n_scored = job->params.score ? slot->completion_tokens : 0;
		job->run_us = slot->run_us;
		job->finish_reason = slot->finish_reason;
	}
	else
	{
		sqlerrcode = slot->sqlerrcode;
		strlcpy(msg, slot->errmsg, sizeof(msg));
		/* a detail that may name paths: for those who may see them (LlmMaySeePaths) */
		strlcpy(detail, slot->errdetail_public[0] != '\0' && !LlmMaySeePaths() ?
				slot->errdetail_public : slot->errdetail, sizeof(detail));
		strlcpy(hint, slot->errhint, sizeof(hint));
		if (DsaPointerIsValid(slot->result) && detail[0] == '\0')
		{
			char	   *out = LlmSlotCompletion(slot);

			LlmOutputSoFar(detail, sizeof(detail), out, slot->completion_tokens);
			pfree(out);
		}
	}

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmSlotTakeChunks(slot, chunks, &n_chunks);
	LlmSlotFree(slot);
	LWLockRelease(LlmState->lock);
	LlmFreeChunks(chunks, n_chunks);

	job->slot = -1;

	if (state == LLM_SLOT_ERROR && job->error_as_null)
	{
		job->failed = true;
		job->sqlerrcode = sqlerrcode ? sqlerrcode : ERRCODE_INTERNAL_ERROR;
		job->error = detail[0] ? psprintf("%s: %s", msg, detail) : pstrdup(msg);
		job->completion = NULL;
		job->finish_reason = LLM_FINISH_ERROR;
	}
	else if (state == LLM_SLOT_ERROR)
		ereport(ERROR,
				(errcode(sqlerrcode ? sqlerrcode : ERRCODE_INTERNAL_ERROR),
				 errmsg_internal("%s", msg),
				 detail[0] ? errdetail_internal("%s", detail) : 0,
				 hint[0] ? errhint("%s", hint) : 0));
}

/*
 * Give up every job still in a slot: unfinished ones become CANCELLED (the
 * worker frees them), finished ones are freed here.  Raises nothing, so it
 * may run during error cleanup and at process exit.
 */
void
LlmQueueCancel(LlmJob *jobs, int n_jobs)
{
	bool		cancelled = false;

	ConditionVariableCancelSleep();

	for (int j = 0; j < n_jobs; j++)
	{
		LlmJob	   *job = &jobs[j];
		LlmSlot    *slot;
		dsa_pointer chunks[2];
		int			n_chunks = 0;

		if (job->slot < 0)
			continue;
		slot = &LlmState->slots[job->slot];

		LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
		Assert(slot->request_id == job->request_id);
		if (slot->state == LLM_SLOT_QUEUED || slot->state == LLM_SLOT_RUNNING)
		{
			slot->state = LLM_SLOT_CANCELLED;
			cancelled = true;
		}
		else if (slot->state == LLM_SLOT_DONE || slot->state == LLM_SLOT_ERROR)
		{
			LlmSlotTakeChunks(slot, chunks, &n_chunks);
			LlmSlotFree(slot);
		}
		LWLockRelease(LlmState->lock);

		LlmFreeChunks(chunks, n_chunks);
		job->slot = -1;
	}

	if (cancelled)
		LlmWakeWorker();
}

/*
 * Cleanup callback of LlmQueueRun(): runs on ERROR and at process exit
 * while it is active; the work's llm_progress row ends with it, even when
 * its transaction goes on (ROLLBACK TO SAVEPOINT, an exception block).
 */
static void
LlmQueueCleanup(int code, Datum arg)
{
	LlmQueueRunState *run = (LlmQueueRunState *) DatumGetPointer(arg);

	LlmQueueCancel(run->jobs, run->n_jobs);
	LlmProgressEnd();
}

/* Raise the error for a request that finds every slot taken while the backend has none in flight. */
void
LlmQueueSlotsFull(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("too many llm requests are queued"),
			 errdetail("All %d request slots are in use.", LlmState->n_slots),
			 errhint("Try again later, or raise llm.max_queued_requests.")));
}

/*
 * A new draft group (LlmParams.draft_group) for the requests of one batch:
 * this process's pid and a count of its groups, never 0.
 */
uint64
LlmQueueDraftGroup(void)
{
	static uint32 n_groups = 0;

	return ((uint64) MyProcPid << 32) | ++n_groups;
}

/*
 * Submit and collect the jobs in order, submitting all that fit before
 * waiting; the body of LlmQueueRun().  The jobs of one call draft from each
 * other (a draft group).
 */
static void
LlmQueueSubmitAndWait(LlmJob *jobs, int n_jobs)
{
	int			next_submit = 0;
	int			next_wait = 0;
	int			in_flight = 0;
	uint64		group = n_jobs > 1 ? LlmQueueDraftGroup() : 0;

	for (int i = 0; i < n_jobs; i++)
		jobs[i].params.draft_group = group;

	while (next_wait < n_jobs)
	{
		/* Submit all we can before waiting. */
		while (next_submit < n_jobs)
		{
			LlmJob	   *job = &jobs[next_submit];

			if (job->prompt != NULL)
			{
				if (!LlmQueueSubmit(job, in_flight > 0))
					break;
				in_flight++;
			}
			next_submit++;
		}

		/* Collect the earliest job. */
		if (jobs[next_wait].prompt != NULL)
		{
			LlmQueueWait(&jobs[next_wait]);
			in_flight--;
		}
		LlmProgressRow(jobs[next_wait].prompt_tokens, jobs[next_wait].completion_tokens);
		next_wait++;
	}
}

/*
 * Run jobs (NULL prompts are skipped), filling in their results.  Raises
 * the first error any job gets (unless it takes errors as NULL), after
 * giving up the others.
 */
void
LlmQueueRun(LlmJob *jobs, int n_jobs)
{
	LlmQueueRunState run;

	LlmQueueAttach();
	for (int j = 0; j < n_jobs; j++)
		jobs[j].slot = -1;
	run.jobs = jobs;
	run.n_jobs = n_jobs;

	LlmProgressStart(n_jobs, false);
	PG_ENSURE_ERROR_CLEANUP(LlmQueueCleanup, PointerGetDatum(&run));
	{
		LlmQueueSubmitAndWait(jobs, n_jobs);
	}
	PG_END_ENSURE_ERROR_CLEANUP(LlmQueueCleanup, PointerGetDatum(&run));
	LlmProgressEnd();
	LlmShmemDsaTrim();
}
