/*
 * batch_call.c
 *		The functions the "LLM Batch" node runs for a window of rows: which
 *		they are, their jobs for one row's arguments, and their result once
 *		those jobs are answered.
 *
 * A batched function is a C function of this library found by its entry
 * point (whatever its schema or name) with its full argument count.  Its
 * jobs are what the function itself queues when it runs row by row
 * (functions.c for llm_generate, semantic.c for the scoring functions), so
 * a row gets the same checks, errors and answer either way.  A call with no
 * jobs has a NULL result and makes no request.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "utils/builtins.h"
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
	[LLM_BATCH_SCORE] = {llm_score, 4},
	[LLM_BATCH_CLASSIFY] = {llm_classify, 3},
	[LLM_BATCH_FILTER] = {llm_filter, 3},
	[LLM_BATCH_PROBABILITY] = {llm_probability, 2},
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
	is_c = ((Form_pg_proc) GETSTRUCT(tuple))->prolang == ClanguageId &&
		!((Form_pg_proc) GETSTRUCT(tuple))->proretset;
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

/* The jobs of a call of f with args (palloc'd); *n_jobs = 0: NULL, no request. */
LlmJob *
LlmBatchCallJobs(LlmBatchFunc f, const NullableDatum *args, int *n_jobs)
{
	LlmJob	   *job;

	if (f != LLM_BATCH_GENERATE)
		return LlmSemanticJobs(f, args, n_jobs);
	job = palloc(sizeof(LlmJob));
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
	if (f != LLM_BATCH_GENERATE)
		return LlmSemanticResult(f, args, jobs, n_jobs);
	*isnull = jobs[0].failed;
	return *isnull ? (Datum) 0 : CStringGetTextDatum(jobs[0].completion);
}
