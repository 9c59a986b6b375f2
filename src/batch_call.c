/*
 * batch_call.c
 *		The functions the "LLM Batch" node runs for a window of rows: which
 *		they are, their jobs for one row's arguments, and their result once
 *		those jobs are answered.
 *
 * A batched function is a C function of this library found by its entry
 * point (whatever its schema or name) with its full argument count.  Its
 * jobs are what the function itself queues when it runs row by row
 * (functions.c for llm_generate, chat.c for llm_chat, semantic.c for the
 * scoring functions), so
 * a row gets the same checks, errors and answer either way.  A call with no
 * jobs has a NULL result and makes no request.  (A definition of an older
 * version of the extension, with fewer arguments, is not batched; it runs
 * row by row until ALTER EXTENSION llm UPDATE.)
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "llm.h"

/* A function the node can run: its entry point and argument count. */
typedef struct LlmBatchFuncInfo
{
	PGFunction	entry;
	int			nargs;
} LlmBatchFuncInfo;

/* Indexed by LlmBatchFunc. */
static const LlmBatchFuncInfo LlmBatchFuncs[] = {
	[LLM_BATCH_GENERATE] = {llm_generate, LLM_GENERATE_NARGS},
	[LLM_BATCH_CHAT] = {llm_chat, LLM_CHAT_NARGS},
	[LLM_BATCH_SCORE] = {llm_score, 4},
	[LLM_BATCH_CLASSIFY] = {llm_classify, 4},
	[LLM_BATCH_FILTER] = {llm_filter, 4},
	[LLM_BATCH_PROBABILITY] = {llm_probability, 3},
	[LLM_BATCH_CLASSIFY_SCORES] = {llm_classify_scores, 4},
	[LLM_BATCH_RANK] = {llm_rank, 4},
};

/* The function that makes a set-returning one's rows from its result in the node: its name and entry point. */
typedef struct LlmBatchFromInfo
{
	const char *name;
	PGFunction	entry;
} LlmBatchFromInfo;

static const LlmBatchFromInfo LlmBatchFroms[] = {
	[LLM_BATCH_CLASSIFY_SCORES] = {"llm_classify_scores_from", llm_classify_scores_from},
	[LLM_BATCH_RANK] = {"llm_rank_from", llm_rank_from},
};

/* Which batched function funcid is, or LLM_BATCH_NONE. */
LlmBatchFunc
LlmBatchFuncOf(Oid funcid)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	bool		is_c;
	int			nargs;
	FmgrInfo	finfo;

	if (!HeapTupleIsValid(tuple))
		return LLM_BATCH_NONE;
	is_c = ((Form_pg_proc) GETSTRUCT(tuple))->prolang == ClanguageId;
	nargs = ((Form_pg_proc) GETSTRUCT(tuple))->pronargs;
	ReleaseSysCache(tuple);
	if (!is_c)
		return LLM_BATCH_NONE;
	fmgr_info(funcid, &finfo);
	for (int f = LLM_BATCH_GENERATE; f < lengthof(LlmBatchFuncs); f++)
		if (finfo.fn_addr == LlmBatchFuncs[f].entry && nargs == LlmBatchFuncs[f].nargs)
			return (LlmBatchFunc) f;
	return LLM_BATCH_NONE;
}

/* The argument count of batched function f. */
int
LlmBatchFuncNargs(LlmBatchFunc f)
{
	Assert(f > LLM_BATCH_NONE && f < lengthof(LlmBatchFuncs));
	return LlmBatchFuncs[f].nargs;
}

/*
 * The function that makes the rows of set-returning batched function f
 * (funcid, in its extension's schema) from its result in the node:
 * llm_classify_scores_from(labels, logprobs) or llm_rank_from(candidates,
 * logprobs), in the same schema; InvalidOid for any other f or when it is
 * missing.
 */
Oid
LlmBatchFromFunc(LlmBatchFunc f, Oid funcid)
{
	Oid			argtypes[2] = {TEXTARRAYOID, FLOAT8ARRAYOID};
	List	   *name;
	Oid			from;
	FmgrInfo	finfo;

	if (f != LLM_BATCH_CLASSIFY_SCORES && f != LLM_BATCH_RANK)
		return InvalidOid;
	name = list_make2(makeString(get_namespace_name(get_func_namespace(funcid))),
					  makeString(pstrdup(LlmBatchFroms[f].name)));
	from = LookupFuncName(name, 2, argtypes, true);
	if (!OidIsValid(from))
		return InvalidOid;
	fmgr_info(from, &finfo);
	return finfo.fn_addr == LlmBatchFroms[f].entry ? from : InvalidOid;
}

/* The jobs of a call of f with args (palloc'd); *n_jobs = 0: NULL, no request. */
LlmJob *
LlmBatchCallJobs(LlmBatchFunc f, const NullableDatum *args, int *n_jobs)
{
	LlmJob	   *job;

	if (f != LLM_BATCH_GENERATE && f != LLM_BATCH_CHAT)
		return LlmSemanticJobs(f, args, n_jobs);
	job = palloc(sizeof(LlmJob));
	if (f == LLM_BATCH_CHAT)
		LlmChatJobFromArgs(job, args);
	else
		LlmJobFromArgs(job, args);
	*n_jobs = job->prompt != NULL;
	return job;
}

/* The result of a call of f with args from its answered jobs (none: NULL). */
Datum
LlmBatchCallResult(LlmBatchFunc f, const NullableDatum *args, const LlmJob *jobs, int n_jobs, bool *isnull)
{
	*isnull = n_jobs == 0;
	if (*isnull)
		return (Datum) 0;
	if (f != LLM_BATCH_GENERATE && f != LLM_BATCH_CHAT)
		return LlmSemanticResult(f, args, jobs, n_jobs);
	*isnull = jobs[0].failed;
	return *isnull ? (Datum) 0 : CStringGetTextDatum(jobs[0].completion);
}
