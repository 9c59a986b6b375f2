/*
 * remote_serve.c
 *		A remote inference node's side: llm_remote_batch(), which runs a
 *		coordinator's batch of requests (remote.c sends them), the wire
 *		format both sides use, and llm_model_identity().
 *
 * Node.  llm_remote_batch(requests bytea) reads the requests (checked as
 * the SQL functions check their arguments: a remote call is a client like
 * any other), queues them as the session's role, so that the node's fair
 * shares apply to the mapped role, and returns each answer as a bytea row
 * as it finishes, flushing the rows to the client as they go.
 *
 * The wire format of a batch (all integers in network order):
 *   int32 magic, int32 n, then per request: int64 tag, int32 max_tokens,
 *   float8 temperature, float8 top_p, int32 top_k, int64 seed, int8 chat,
 *   int8 messages, int8 enable_thinking, int8 score, int8 grammar kind,
 *   int32 n_stop, then six strings (int32 length, -1 for none, and bytes):
 *   system, prompt, tools, continuation, stops, grammar.
 * An answer: int64 tag, int8 failed, int32 sqlerrcode, string error,
 *   string completion (UTF-8), int32 prompt, completion, cached, drafted
 *   and accepted tokens, float8 logprob, int8 cache hit, int32 n_scored,
 *   int64 run_us, int8 finish reason.
 */
#include "postgres.h"

#include <inttypes.h>
#include <math.h>

#include "funcapi.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_remote_batch);
PG_FUNCTION_INFO_V1(llm_model_identity);

/*
 * The server's output functions (libpq/libpq.h's PQcommMethods, the same in
 * 15 to 18), declared here: that header pulls in libpq-be.h and the GSSAPI
 * headers, which building against PostgreSQL need not have.
 */
typedef struct LlmPqCommMethods
{
	void		(*comm_reset) (void);
	int			(*flush) (void);
} LlmPqCommMethods;
extern PGDLLIMPORT const LlmPqCommMethods *PqCommMethods;

/* ---------- the wire format ---------- */

/* Append a string (NULL: none) to buf. */
static void
remote_put_string(StringInfo buf, const char *s, Size len)
{
	if (s == NULL)
	{
		pq_sendint32(buf, (uint32) -1);
		return;
	}
	pq_sendint32(buf, (uint32) len);
	pq_sendbytes(buf, s, len);
}

/* Read a string written by remote_put_string (palloc'd, NUL-terminated; NULL for none). */
static char *
remote_get_string(StringInfo buf, Size *len)
{
	int32		n = (int32) pq_getmsgint(buf, 4);
	char	   *s;

	*len = 0;
	if (n == -1)
		return NULL;
	if (n < 0 || n > buf->len - buf->cursor)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid llm remote batch"),
				 errdetail("A string's length %d is beyond the data left.", n)));
	s = palloc(n + 1);
	memcpy(s, pq_getmsgbytes(buf, n), n);
	s[n] = '\0';
	*len = n;
	return s;
}

/* Append a job's request to buf, tagged. */
void
LlmRemotePutJob(StringInfo buf, const LlmJob *job, uint64 tag)
{
	const LlmParams *p = &job->params;

	pq_sendint64(buf, tag);
	pq_sendint32(buf, p->max_tokens);
	pq_sendfloat8(buf, p->temperature);
	pq_sendfloat8(buf, p->top_p);
	pq_sendint32(buf, p->top_k);
	pq_sendint64(buf, p->seed);
	pq_sendint8(buf, p->chat);
	pq_sendint8(buf, p->messages);
	pq_sendint8(buf, p->enable_thinking);
	pq_sendint8(buf, p->score);
	pq_sendint8(buf, (int8) p->grammar);
	pq_sendint32(buf, job->n_stop);
	remote_put_string(buf, job->system, job->system_len);
	remote_put_string(buf, job->prompt, job->prompt_len);
	remote_put_string(buf, job->tools, job->tools_len);
	remote_put_string(buf, job->continuation_len > 0 ? job->continuation : NULL, job->continuation_len);
	remote_put_string(buf, job->n_stop > 0 ? job->stops : NULL, job->stops_len);
	remote_put_string(buf, p->grammar != LLM_GRAMMAR_NONE ? job->grammar : NULL, p->grammar_len);
}

/* Raise the error for a bad request of a batch. */
pg_noreturn static void
remote_bad_request(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid llm remote batch"),
			 errdetail("%s", what)));
}

/*
 * A string of a request (NULL: none), valid UTF-8; only the stop strings
 * and the choices (pieces) are NUL-separated, each piece checked.
 */
static char *
remote_get_text(StringInfo buf, Size *len, const char *name, bool pieces)
{
	char	   *s = remote_get_string(buf, len);
	const char *q = s;

	if (s == NULL)
		return NULL;
	if (!pieces && strlen(s) != *len)
		remote_bad_request(psprintf("The %s contains a zero byte.", name));
	while (q < s + *len)
	{
		int			n = strlen(q);

		if (pg_verify_mbstr_len(PG_UTF8, q, n, true) < 0)
			remote_bad_request(psprintf("The %s is not valid UTF-8.", name));
		q += n + 1;
	}
	return s;
}

/* Read and check one request of a batch into job (as the SQL functions check their arguments). */
static void
remote_get_job(StringInfo buf, LlmJob *job, uint64 *tag)
{
	LlmParams  *p = &job->params;
	int			grammar;
	Size		len;

	memset(job, 0, sizeof(*job));
	job->slot = -1;
	job->remote_node = -1;
	*tag = pq_getmsgint64(buf);
	p->max_tokens = (int32) pq_getmsgint(buf, 4);
	p->temperature = pq_getmsgfloat8(buf);
	p->top_p = pq_getmsgfloat8(buf);
	p->top_k = (int32) pq_getmsgint(buf, 4);
	p->seed = (uint64) pq_getmsgint64(buf);
	p->chat = pq_getmsgbyte(buf) != 0;
	p->messages = pq_getmsgbyte(buf) != 0;
	p->enable_thinking = (int8) pq_getmsgbyte(buf);
	p->score = pq_getmsgbyte(buf) != 0;
	grammar = (int8) pq_getmsgbyte(buf);
	job->n_stop = (int32) pq_getmsgint(buf, 4);
	if (p->max_tokens < 0 || p->max_tokens > llm_max_tokens)
		remote_bad_request(psprintf("max_tokens %d is outside 0 to llm.max_tokens (%d).", p->max_tokens, llm_max_tokens));
	if (isnan(p->temperature) || isinf((float) p->temperature) || p->temperature < 0)
		remote_bad_request("temperature must be a finite number greater than or equal to 0.");
	if (isnan(p->top_p) || (float) p->top_p <= 0 || p->top_p > 1)
		remote_bad_request("top_p must be greater than 0 and at most 1.");
	if (p->top_k < 0)
		remote_bad_request("top_k must not be negative.");
	if (p->enable_thinking < -1 || p->enable_thinking > 1)
		remote_bad_request("enable_thinking must be -1, 0 or 1.");
	if (grammar < LLM_GRAMMAR_NONE || grammar > LLM_GRAMMAR_CHOICES)
		remote_bad_request(psprintf("Grammar kind %d is unknown.", grammar));
	p->grammar = (LlmGrammarKind) grammar;

	job->system = remote_get_text(buf, &job->system_len, "system prompt", false);
	job->prompt = remote_get_text(buf, &job->prompt_len, "prompt", false);
	job->tools = remote_get_text(buf, &job->tools_len, "tools", false);
	job->continuation = remote_get_text(buf, &job->continuation_len, "continuation", false);
	job->stops = remote_get_text(buf, &job->stops_len, "stop strings", true);
	job->grammar = remote_get_text(buf, &len, "grammar", grammar == LLM_GRAMMAR_CHOICES);
	p->grammar_len = len;

	if (job->prompt == NULL)
		remote_bad_request("A request has no prompt.");
	if (job->system != NULL && !p->chat)
		remote_bad_request("A system prompt needs chat.");
	if (job->tools != NULL && !p->messages)
		remote_bad_request("Tools need a conversation.");
	if (job->continuation != NULL && !p->score)
		remote_bad_request("A continuation comes only with scoring.");	/* scoring may have an empty one */
	/* the stop strings: n_stop non-empty NUL-terminated strings, back to back */
	if (job->n_stop < 0 || (job->n_stop == 0) != (job->stops == NULL))
		remote_bad_request("The stop strings do not match their count.");
	if (job->stops != NULL)
	{
		int			n = 0;

		for (Size i = 0; i < job->stops_len; i++)
			if (job->stops[i] == '\0')
			{
				if (i == 0 || job->stops[i - 1] == '\0')
					remote_bad_request("A stop string is empty.");
				n++;
			}
		if (n != job->n_stop || job->stops[job->stops_len - 1] != '\0')
			remote_bad_request("The stop strings do not match their count.");
	}
	if ((p->grammar != LLM_GRAMMAR_NONE) != (job->grammar != NULL))
		remote_bad_request("The grammar does not match its kind.");
	if (p->grammar != LLM_GRAMMAR_NONE)
	{
		LlmError	err;
		LlmStatus	st = p->grammar == LLM_GRAMMAR_JSON_SCHEMA ?
			llm_json_schema_check(job->grammar, p->grammar_len, &err) :
			llm_choices_check(job->grammar, p->grammar_len, &err);

		if (job->n_stop > 0)
			remote_bad_request("Stop strings cannot be used with a grammar.");
		if (st != LLM_OK)
			ereport(ERROR,
					(errcode(LlmStatusErrcode(st)),
					 errmsg("invalid %s: %s", p->grammar == LLM_GRAMMAR_JSON_SCHEMA ? "json_schema" : "choices",
							err.msg)));
	}
	if (job->stops == NULL)
		job->stops_len = 0;
	/* every failure comes back as an answer, for the coordinator to raise */
	job->error_as_null = true;
}

/* Append a finished job's answer to buf, tagged. */
static void
remote_put_answer(StringInfo buf, const LlmJob *job, uint64 tag)
{
	pq_sendint64(buf, tag);
	pq_sendint8(buf, job->failed);
	pq_sendint32(buf, job->failed ? job->sqlerrcode : 0);
	remote_put_string(buf, job->failed ? job->error : NULL, job->failed ? strlen(job->error) : 0);
	if (job->completion != NULL)
	{
		char	   *utf8 = pg_server_to_any(job->completion, strlen(job->completion), PG_UTF8);

		remote_put_string(buf, utf8, strlen(utf8));
	}
	else
		remote_put_string(buf, NULL, 0);
	pq_sendint32(buf, job->prompt_tokens);
	pq_sendint32(buf, job->completion_tokens);
	pq_sendint32(buf, job->cached_tokens);
	pq_sendint32(buf, job->drafted_tokens);
	pq_sendint32(buf, job->accepted_tokens);
	pq_sendfloat8(buf, job->logprob);
	pq_sendint8(buf, job->cache_hit);
	pq_sendint32(buf, job->n_scored);
	pq_sendint64(buf, job->run_us);
	pq_sendint8(buf, (int8) job->finish_reason);
}

/* Read an answer into ans (its texts palloc'd, in the server encoding); false when it is malformed. */
bool
LlmRemoteGetAnswer(StringInfo buf, LlmJob *ans, uint64 *tag)
{
	volatile bool ok = true;
	MemoryContext cxt = CurrentMemoryContext;

	memset(ans, 0, sizeof(*ans));
	PG_TRY();
	{
		Size		len;
		char	   *s;

		*tag = pq_getmsgint64(buf);
		ans->failed = pq_getmsgbyte(buf) != 0;
		ans->sqlerrcode = (int) pq_getmsgint(buf, 4);
		ans->error = remote_get_string(buf, &len);
		s = remote_get_string(buf, &len);
		ans->completion = s ? pg_any_to_server(s, len, PG_UTF8) : NULL;
		ans->prompt_tokens = (int32) pq_getmsgint(buf, 4);
		ans->completion_tokens = (int32) pq_getmsgint(buf, 4);
		ans->cached_tokens = (int32) pq_getmsgint(buf, 4);
		ans->drafted_tokens = (int32) pq_getmsgint(buf, 4);
		ans->accepted_tokens = (int32) pq_getmsgint(buf, 4);
		ans->logprob = pq_getmsgfloat8(buf);
		ans->cache_hit = pq_getmsgbyte(buf) != 0;
		ans->n_scored = (int32) pq_getmsgint(buf, 4);
		ans->run_us = pq_getmsgint64(buf);
		ans->finish_reason = (LlmFinishReason) pq_getmsgbyte(buf);
		pq_getmsgend(buf);
		if (ans->failed ? ans->error == NULL : ans->completion == NULL)
			ok = false;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/* ---------- the node's side: llm_remote_batch() ---------- */

/* A call of llm_remote_batch(). */
typedef struct RemoteServe
{
	LlmJob	   *jobs;			/* (n) */
	uint64	   *tags;
	bool	   *returned;
	int			n;
	int			n_submitted;
	int			n_returned;
	MemoryContextCallback cancel_cb;
} RemoteServe;

/* Reset callback of the call's memory: give up what is still queued. */
static void
remote_serve_cancel(void *arg)
{
	RemoteServe *st = (RemoteServe *) arg;

	LlmQueueCancel(st->jobs, st->n);
}

/*
 * llm_remote_batch(requests bytea) RETURNS SETOF bytea
 *		Queue a coordinator's serialized requests as the session's role and
 *		return each one's serialized answer as it finishes.
 */
Datum
llm_remote_batch(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	RemoteServe *st;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext old;
		bytea	   *in = PG_GETARG_BYTEA_PP(0);
		StringInfoData buf;
		uint64		group;
		int			n;

		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		initStringInfo(&buf);
		appendBinaryStringInfo(&buf, VARDATA_ANY(in), VARSIZE_ANY_EXHDR(in));
		if (buf.len < 8 || pq_getmsgint(&buf, 4) != LLM_REMOTE_MAGIC)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("invalid llm remote batch"),
					 errdetail("The batch does not begin with the format's mark.")));
		n = (int) pq_getmsgint(&buf, 4);
		if (n < 0 || n > buf.len)
			remote_bad_request(psprintf("The batch claims %d requests.", n));
		st = palloc0(sizeof(RemoteServe));
		st->jobs = palloc0(sizeof(LlmJob) * Max(n, 1));
		st->tags = palloc0(sizeof(uint64) * Max(n, 1));
		st->returned = palloc0(sizeof(bool) * Max(n, 1));
		group = LlmQueueDraftGroup();
		for (int i = 0; i < n; i++)
		{
			remote_get_job(&buf, &st->jobs[i], &st->tags[i]);
			st->jobs[i].params.draft_group = group;
			st->n = i + 1;
		}
		pq_getmsgend(&buf);
		LlmQueueAttach();
		st->cancel_cb.func = remote_serve_cancel;
		st->cancel_cb.arg = st;
		MemoryContextRegisterResetCallback(funcctx->multi_call_memory_ctx, &st->cancel_cb);
		funcctx->user_fctx = st;
		MemoryContextSwitchTo(old);
	}
	funcctx = SRF_PERCALL_SETUP();
	st = (RemoteServe *) funcctx->user_fctx;
	if (st->n_returned == st->n)
		SRF_RETURN_DONE(funcctx);

	/* the answers returned so far go to the coordinator now, not when the buffer fills */
	if (whereToSendOutput == DestRemote)
		(void) PqCommMethods->flush();

	for (;;)
	{
		int			first = -1;

		/* queue what the shares allow */
		while (st->n_submitted < st->n)
		{
			MemoryContext old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
			bool		ok = LlmQueueSubmit(&st->jobs[st->n_submitted], st->n_submitted > st->n_returned);

			MemoryContextSwitchTo(old);
			if (!ok)
				break;
			st->n_submitted++;
		}
		/* return any finished answer */
		for (int i = 0; i < st->n_submitted; i++)
		{
			LlmJob	   *job = &st->jobs[i];
			StringInfoData out;

			if (st->returned[i])
				continue;
			if (!LlmQueuePoll(job, 0))
			{
				if (first < 0)
					first = i;
				continue;
			}
			LlmQueueWait(job);
			st->returned[i] = true;
			st->n_returned++;
			pq_begintypsend(&out);
			remote_put_answer(&out, job, st->tags[i]);
			if (job->completion)
				pfree(job->completion);
			job->completion = NULL;
			SRF_RETURN_NEXT(funcctx, PointerGetDatum(pq_endtypsend(&out)));
		}
		CHECK_FOR_INTERRUPTS();
		if (first >= 0)
			(void) LlmQueuePoll(&st->jobs[first], LLM_REMOTE_WAIT_MS / 10);
	}
}

/*
 * llm_model_identity() RETURNS text
 *		The identity of the loaded model's answers (the answer cache's: the
 *		file's content and the settings that change answers), in hex; NULL
 *		while no model is loaded.  Remote nodes serve a coordinator only
 *		when theirs is the coordinator's.
 */
Datum
llm_model_identity(PG_FUNCTION_ARGS)
{
	LlmWorkerInfo w;
	uint64		id;

	LlmShmemCheck();
	w = LlmWorkerServing();
	id = w.has_model ? w.identity : 0;
	if (id == 0)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%016" PRIx64, id)));
}
