/*
 * aggregate.c
 *		llm_agg(text, instruction): an aggregate that summarizes any number
 *		of rows, beyond one context window, by a map-reduce over chunks.
 *
 * The transition function only collects the texts (in the aggregate's
 * ORDER BY); the final function does the work.  A level packs the texts,
 * in order, into chunks that fit the model's context (by bytes, at most
 * LLM_AGG_BYTES_PER_TOKEN a token, leaving room for the instruction and
 * the answer), asks the instruction of every chunk as one batch
 * (LlmQueueRun), and the answers become the next level's texts, until one
 * chunk holds them all: its answer is the result.  A text too long for a
 * chunk alone is cut at a character boundary.  Greedy, so the result
 * depends only on (model, texts in order, instruction).  In the model's
 * chat format when it has a template.  No rows, only NULL texts, or a NULL
 * instruction: NULL, without a request.  The instruction must be the same
 * in every row of a group.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_agg_transfn);
PG_FUNCTION_INFO_V1(llm_agg_finalfn);

#define LLM_AGG_BYTES_PER_TOKEN 2	/* a conservative bound: English text runs 3 to 5 */
#define LLM_AGG_MAX_TOKENS 256		/* each chunk's answer, at most (and llm.max_tokens) */

/* The aggregate's state: the texts so far and the instruction. */
typedef struct LlmAggState
{
	List	   *texts;			/* (char *) UTF-8, in order */
	char	   *instruction;	/* UTF-8, the first row's that is not NULL */
	bool		null_instruction;	/* a row's was NULL: the result is NULL */
} LlmAggState;

/*
 * llm_agg_transfn(state, text, instruction)
 *		Collect one row's text (NULL ones are skipped); the instruction must
 *		not be empty, and the same as the group's first row's.
 */
Datum
llm_agg_transfn(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	MemoryContext old;
	LlmAggState *st;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("llm_agg_transfn called in non-aggregate context")));
	if (!PG_ARGISNULL(2) && VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(2)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("instruction must not be empty")));
	old = MemoryContextSwitchTo(aggcxt);
	st = PG_ARGISNULL(0) ? NULL : (LlmAggState *) PG_GETARG_POINTER(0);
	if (st == NULL)
		st = palloc0(sizeof(*st));
	if (PG_ARGISNULL(2))
		st->null_instruction = true;
	else
	{
		char	   *instruction = LlmTextUtf8(PG_GETARG_DATUM(2), NULL);

		if (st->instruction == NULL)
			st->instruction = instruction;
		else if (strcmp(instruction, st->instruction) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("llm_agg needs the same instruction in every row of a group")));
		else
			pfree(instruction);
	}
	if (!PG_ARGISNULL(1) && !st->null_instruction)
		st->texts = lappend(st->texts, LlmTextUtf8(PG_GETARG_DATUM(1), NULL));
	MemoryContextSwitchTo(old);
	PG_RETURN_POINTER(st);
}

/* The byte length of s cut to at most max bytes at a UTF-8 character boundary. */
static int
LlmAggCut(const char *s, int len, int max)
{
	if (len <= max)
		return len;
	while (max > 0 && (s[max] & 0xC0) == 0x80)
		max--;
	return max;
}

/* One chunk's request: the instruction, then its texts as a list. */
static void
LlmAggJob(LlmJob *job, const char *instruction, StringInfo chunk, bool chat, int max_tokens)
{
	StringInfoData p;

	initStringInfo(&p);
	appendStringInfo(&p, "%s\n\n%s", instruction, chunk->data);
	if (!chat)
		appendStringInfoString(&p, "\n\nAnswer:");
	memset(job, 0, sizeof(*job));
	job->slot = -1;
	job->prompt = p.data;
	job->prompt_len = p.len;
	job->params.max_tokens = max_tokens;
	job->params.top_p = 1;
	job->params.chat = chat;
}

/*
 * llm_agg_finalfn(state, text, instruction)
 *		Summarize the collected texts by levels of batched chunks.
 */
Datum
llm_agg_finalfn(PG_FUNCTION_ARGS)
{
	LlmAggState *st = PG_ARGISNULL(0) ? NULL : (LlmAggState *) PG_GETARG_POINTER(0);
	List	   *texts;
	int			n_ctx;
	bool		chat;
	int			max_tokens = Min(LLM_AGG_MAX_TOKENS, llm_max_tokens);
	int			budget;
	int			level = 0;

	if (st == NULL || st->texts == NIL || st->null_instruction)
		PG_RETURN_NULL();

	LWLockAcquire(LlmState->lock, LW_SHARED);
	n_ctx = LlmState->worker.has_model ? LlmState->worker.n_ctx : 0;
	chat = LlmState->worker.has_model && LlmState->worker.chat_template;
	LWLockRelease(LlmState->lock);
	if (n_ctx == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no model is loaded")));
	/* bytes of texts per chunk: the context less the answer and a margin for the template */
	max_tokens = Min(max_tokens, n_ctx / 8);	/* answers short enough that chunks hold several */
	budget = (n_ctx - max_tokens - 64) * LLM_AGG_BYTES_PER_TOKEN - (int) strlen(st->instruction);
	if (budget < 64)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the instruction leaves no room for text in the model's context of %d tokens", n_ctx)));

	texts = st->texts;
	for (;;)
	{
		List	   *chunks = NIL;
		StringInfo	cur = NULL;
		ListCell   *lc;
		LlmJob	   *jobs;
		int			n = 0;
		List	   *next = NIL;

		/* pack the texts into chunks, in order */
		foreach(lc, texts)
		{
			const char *t = lfirst(lc);
			int			len = LlmAggCut(t, strlen(t), budget - 3);

			if (cur != NULL && cur->len + len + 3 > budget)
				cur = NULL;
			if (cur == NULL)
			{
				cur = makeStringInfo();
				chunks = lappend(chunks, cur);
			}
			appendStringInfoString(cur, cur->len > 0 ? "\n- " : "- ");
			appendBinaryStringInfo(cur, t, len);
		}
		level++;
		jobs = palloc(sizeof(LlmJob) * list_length(chunks));
		foreach(lc, chunks)
			LlmAggJob(&jobs[n++], st->instruction, lfirst(lc), chat, max_tokens);
		LlmQueueRun(jobs, n);
		if (n == 1)
			PG_RETURN_TEXT_P(cstring_to_text(jobs[0].completion));
		/* the answers, back in UTF-8, are the next level's texts */
		for (int i = 0; i < n; i++)
			next = lappend(next, pstrdup(pg_server_to_any(jobs[i].completion, strlen(jobs[i].completion), PG_UTF8)));
		if (list_length(next) >= list_length(texts))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("llm_agg does not converge: level %d has %d answers for %d texts",
							level, list_length(next), list_length(texts)),
					 errhint("Use a model with a longer context, or shorter texts.")));
		texts = next;
	}
}
