/*
 * aggregate.c
 *		llm_agg(text, instruction): an aggregate that summarizes any number
 *		of rows, beyond one context window, by a map-reduce over chunks.
 *
 * The transition function only collects the texts (in the aggregate's
 * ORDER BY); the final function does the work.  A level packs the texts,
 * in order, into chunks that fit the model's context (by the tokens the
 * worker's tokenizer counts, leaving room for the instruction and the
 * answer), asks the instruction of every chunk as one batch
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

#define LLM_AGG_SEP_TOKENS 4		/* the list's "\n- " before a text, at most */
#define LLM_AGG_MARGIN_TOKENS 16	/* a chunk's tokens may differ from the sum of its parts' counts */
#define LLM_AGG_PIECE_MARGIN 16		/* a text of n bytes may count n + BOS and a leading space */
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

/* A greedy request for prompt p (len bytes); with max_tokens 0 it only counts the prompt's tokens. */
static void
LlmAggJobInit(LlmJob *job, const char *p, int len, bool chat, int max_tokens)
{
	memset(job, 0, sizeof(*job));
	job->slot = -1;
	job->prompt = p;
	job->prompt_len = len;
	job->params.max_tokens = max_tokens;
	job->params.top_p = 1;
	job->params.chat = chat;
}

/*
 * The tokens of the texts which[0 .. n) (texts[i], lens[i] bytes) into
 * tokens[i], as the model's tokenizer counts them, by one batch of
 * requests that only tokenize.  A text longer than piece bytes is counted
 * in pieces of at most piece bytes (each fits the context: a byte is at
 * most one token), and its count is their sum; an empty one counts 0.
 */
static void
LlmAggCount(char **texts, const int *lens, const int *which, int n, int piece, int *tokens)
{
	int		   *first = palloc(sizeof(int) * (n + 1));	/* text which[w]'s pieces: jobs[first[w] .. first[w + 1]) */
	int			max_jobs = 0;
	int			j = 0;
	LlmJob	   *jobs;

	/* a cut at a character boundary falls at most 3 bytes short of piece */
	for (int w = 0; w < n; w++)
		max_jobs += lens[which[w]] / (piece - 3) + 1;
	jobs = palloc(sizeof(LlmJob) * max_jobs);
	for (int w = 0; w < n; w++)
	{
		int			i = which[w];

		first[w] = j;
		for (int off = 0, len; off < lens[i]; off += len)
		{
			len = LlmAggCut(texts[i] + off, lens[i] - off, piece);
			LlmAggJobInit(&jobs[j++], texts[i] + off, len, false, 0);
		}
	}
	first[n] = j;
	if (j > 0)
		LlmQueueRun(jobs, j);
	for (int w = 0; w < n; w++)
	{
		tokens[which[w]] = 0;
		for (int k = first[w]; k < first[w + 1]; k++)
			tokens[which[w]] += jobs[k].prompt_tokens;
	}
	pfree(jobs);
	pfree(first);
}

/* The prompt of a chunk: the instruction, then the chunk's texts as a list. */
static void
LlmAggPrompt(StringInfo p, const char *instruction, const char *chunk, bool chat)
{
	initStringInfo(p);
	appendStringInfo(p, "%s\n\n%s", instruction, chunk);
	if (!chat)
		appendStringInfoString(p, "\n\nAnswer:");
}

/*
 * llm_agg_finalfn(state, text, instruction)
 *		Summarize the collected texts by levels of batched chunks.
 *
 * Chunks are packed by tokens, as the worker's tokenizer counts them: the
 * instruction and the rest of a chunk's prompt (the chat format's frame)
 * cost a fixed number, each text its own count and LLM_AGG_SEP_TOKENS for
 * the list's separator, and all must leave room for the answer.  A text over
 * that room alone is cut, in proportion to its count, and counted again.
 */
Datum
llm_agg_finalfn(PG_FUNCTION_ARGS)
{
	LlmAggState *st = PG_ARGISNULL(0) ? NULL : (LlmAggState *) PG_GETARG_POINTER(0);
	List	   *texts;
	int			n_ctx;
	LlmWorkerInfo serving;
	bool		chat;
	int			max_tokens = Min(LLM_AGG_MAX_TOKENS, llm_max_tokens);
	int			budget;
	int			level = 0;

	if (st == NULL || st->texts == NIL || st->null_instruction)
		PG_RETURN_NULL();

	serving = LlmWorkerServing();
	n_ctx = serving.has_model ? serving.n_ctx : 0;
	chat = LlmModelChats();
	if (n_ctx == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no model is loaded")));
	max_tokens = Min(max_tokens, n_ctx / 8);	/* answers short enough that chunks hold several */
	if (n_ctx - max_tokens - LLM_AGG_MARGIN_TOKENS < 64)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model's context of %d tokens is too short for llm_agg", n_ctx)));

	/*
	 * tokens of texts per chunk: the context less the answer, the
	 * instruction, the rest of an empty chunk's prompt (in the chat format)
	 * and a margin
	 */
	{
		StringInfoData frame;
		char	   *instruction = st->instruction;
		int			instruction_len = strlen(instruction);
		int			zero = 0;
		int			instruction_tokens;
		LlmJob		job;

		LlmAggPrompt(&frame, "", "", chat);
		LlmAggJobInit(&job, frame.data, frame.len, chat, 0);
		LlmQueueRun(&job, 1);
		LlmAggCount(&instruction, &instruction_len, &zero, 1, n_ctx - LLM_AGG_PIECE_MARGIN, &instruction_tokens);
		budget = n_ctx - max_tokens - job.prompt_tokens - instruction_tokens - LLM_AGG_MARGIN_TOKENS;
		if (budget < 64)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the instruction leaves no room for text in the model's context of %d tokens", n_ctx)));
	}

	texts = st->texts;
	for (;;)
	{
		int			n = list_length(texts);
		char	  **t = palloc(sizeof(char *) * n);
		int		   *lens = palloc(sizeof(int) * n);
		int		   *tokens = palloc(sizeof(int) * n);
		int		   *which = palloc(sizeof(int) * n);	/* the texts to count */
		int			n_which = n;
		int			i = 0;
		List	   *chunks = NIL;
		StringInfo	cur = NULL;
		int			cur_tokens = 0;
		ListCell   *lc;
		LlmJob	   *jobs;
		int			n_chunks = 0;
		List	   *next = NIL;

		foreach(lc, texts)
		{
			t[i] = lfirst(lc);
			lens[i] = strlen(t[i]);
			which[i] = i;
			i++;
		}
		/* count, then cut what is too long for a chunk alone and count it again, until all fit */
		while (n_which > 0)
		{
			int			n_cut = 0;

			LlmAggCount(t, lens, which, n_which, n_ctx - LLM_AGG_PIECE_MARGIN, tokens);
			for (int w = 0; w < n_which; w++)
			{
				int			k = which[w];

				if (tokens[k] + LLM_AGG_SEP_TOKENS > budget)
				{
					/* a tenth under its share of the budget, so one cut is almost always enough */
					int64		want = (int64) lens[k] * (budget - LLM_AGG_SEP_TOKENS) / tokens[k] * 9 / 10;

					lens[k] = LlmAggCut(t[k], lens[k], (int) Max(want, 1));
					which[n_cut++] = k;
				}
			}
			n_which = n_cut;
		}

		/* pack the texts into chunks, in order */
		for (i = 0; i < n; i++)
		{
			if (cur != NULL && cur_tokens + tokens[i] + LLM_AGG_SEP_TOKENS > budget)
				cur = NULL;
			if (cur == NULL)
			{
				cur = makeStringInfo();
				chunks = lappend(chunks, cur);
				cur_tokens = 0;
			}
			appendStringInfoString(cur, cur->len > 0 ? "\n- " : "- ");
			appendBinaryStringInfo(cur, t[i], lens[i]);
			cur_tokens += tokens[i] + LLM_AGG_SEP_TOKENS;
		}
		level++;
		jobs = palloc(sizeof(LlmJob) * list_length(chunks));
		foreach(lc, chunks)
		{
			StringInfoData p;
			LlmJob	   *job = &jobs[n_chunks++];

			LlmAggPrompt(&p, st->instruction, ((StringInfo) lfirst(lc))->data, chat);
			LlmAggJobInit(job, p.data, p.len, chat, max_tokens);
		}
		LlmQueueRun(jobs, n_chunks);
		if (n_chunks == 1)
			PG_RETURN_TEXT_P(cstring_to_text(jobs[0].completion));
		/* the answers, back in UTF-8, are the next level's texts */
		for (i = 0; i < n_chunks; i++)
			next = lappend(next, pstrdup(pg_server_to_any(jobs[i].completion, strlen(jobs[i].completion), PG_UTF8)));
		if (list_length(next) >= n)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("llm_agg does not converge: level %d has %d answers for %d texts",
							level, list_length(next), n),
					 errhint("Use a model with a longer context, or shorter texts.")));
		texts = next;
	}
}
