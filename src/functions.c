/*
 * functions.c
 *		SQL functions llm_generate() and llm_generate_batch().
 *
 * Both check their parameters here, before anything is queued, convert the
 * prompts and stop strings to UTF-8 (what the model reads), and hand the
 * work to queue.c.  A NULL prompt gives a NULL completion without a request.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_generate);
PG_FUNCTION_INFO_V1(llm_generate_batch);

/* Parameters shared by both functions; their first argument position. */
#define LLM_ARG_MAX_TOKENS	1
#define LLM_ARG_TEMPERATURE 2
#define LLM_ARG_TOP_P		3
#define LLM_ARG_TOP_K		4
#define LLM_ARG_SEED		5
#define LLM_ARG_STOP		6
#define LLM_ARG_CHAT		7

/* Error out when a parameter that has no NULL meaning is NULL. */
static void
LlmCheckNotNull(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be null", name)));
}

/* Read and check the sampling parameters. */
static void
LlmGetParams(FunctionCallInfo fcinfo, LlmParams *p)
{
	LlmCheckNotNull(fcinfo, LLM_ARG_MAX_TOKENS, "max_tokens");
	LlmCheckNotNull(fcinfo, LLM_ARG_TEMPERATURE, "temperature");
	LlmCheckNotNull(fcinfo, LLM_ARG_TOP_P, "top_p");
	LlmCheckNotNull(fcinfo, LLM_ARG_TOP_K, "top_k");

	p->max_tokens = PG_GETARG_INT32(LLM_ARG_MAX_TOKENS);
	p->temperature = PG_GETARG_FLOAT8(LLM_ARG_TEMPERATURE);
	p->top_p = PG_GETARG_FLOAT8(LLM_ARG_TOP_P);
	p->top_k = PG_GETARG_INT32(LLM_ARG_TOP_K);
	p->seed = 0;
	p->chat = PG_ARGISNULL(LLM_ARG_CHAT) ? llm_chat : PG_GETARG_BOOL(LLM_ARG_CHAT);

	if (p->max_tokens < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_tokens must not be negative")));
	if (isnan(p->temperature) || isinf(p->temperature) || p->temperature < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("temperature must be a finite number greater than or equal to 0")));
	if (isnan(p->top_p) || p->top_p <= 0 || p->top_p > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("top_p must be greater than 0 and at most 1")));
	if (p->top_k < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("top_k must not be negative")));
}

/* The seed argument, or a random one when it is NULL. */
static uint64
LlmGetSeed(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(LLM_ARG_SEED))
		return pg_prng_uint64(&pg_global_prng_state);
	return (uint64) PG_GETARG_INT64(LLM_ARG_SEED);
}

/* The stop strings in UTF-8; none for a NULL array. */
static char **
LlmGetStop(FunctionCallInfo fcinfo, int *n_stop)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	char	  **stop;

	*n_stop = 0;
	if (PG_ARGISNULL(LLM_ARG_STOP))
		return NULL;

	arr = PG_GETARG_ARRAYTYPE_P(LLM_ARG_STOP);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	stop = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		char	   *s;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stop strings must not be null")));
		s = TextDatumGetCString(elems[i]);
		if (s[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stop strings must not be empty")));
		stop[i] = pg_server_to_any(s, strlen(s), PG_UTF8);
	}
	*n_stop = n;
	return stop;
}

/* Point a job at a prompt, converted to UTF-8. */
static void
LlmSetPrompt(LlmJob *job, text *prompt)
{
	const char *data = VARDATA_ANY(prompt);
	int			len = VARSIZE_ANY_EXHDR(prompt);
	char	   *utf8 = pg_server_to_any(data, len, PG_UTF8);

	job->prompt = utf8;
	job->prompt_len = (utf8 == data) ? len : strlen(utf8);
}

/*
 * llm_generate(prompt, max_tokens, temperature, top_p, top_k, seed, stop, chat)
 *		The model's continuation of prompt.
 */
Datum
llm_generate(PG_FUNCTION_ARGS)
{
	LlmParams	params;
	LlmJob		job;
	char	  **stop;
	int			n_stop;

	/* Checked even for a NULL prompt, so bad calls fail the same way always. */
	LlmGetParams(fcinfo, &params);
	stop = LlmGetStop(fcinfo, &n_stop);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();

	memset(&job, 0, sizeof(job));
	LlmSetPrompt(&job, PG_GETARG_TEXT_PP(0));
	job.seed = LlmGetSeed(fcinfo);

	LlmQueueRun(&job, 1, &params, (const char *const *) stop, n_stop);

	PG_RETURN_TEXT_P(cstring_to_text(job.completion));
}

/*
 * llm_generate_batch(prompts, max_tokens, temperature, top_p, top_k, seed, stop, chat)
 *		One row per prompt, in order: (ord, completion, prompt_tokens,
 *		completion_tokens, finish_reason).  Every prompt is queued before the
 *		first result is awaited, so the worker batches them.
 */
Datum
llm_generate_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmParams	params;
	char	  **stop;
	int			n_stop;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	LlmJob	   *jobs;

	LlmGetParams(fcinfo, &params);
	stop = LlmGetStop(fcinfo, &n_stop);
	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();

	arr = PG_GETARG_ARRAYTYPE_P(0);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	jobs = palloc0(sizeof(LlmJob) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (!nulls[i])
			LlmSetPrompt(&jobs[i], DatumGetTextPP(elems[i]));
		jobs[i].seed = LlmGetSeed(fcinfo);
	}

	LlmQueueRun(jobs, n, &params, (const char *const *) stop, n_stop);

	for (int i = 0; i < n; i++)
	{
		Datum		values[5];
		bool		isnull[5] = {false, false, false, false, false};

		values[0] = Int32GetDatum(i + 1);
		if (jobs[i].prompt == NULL)
		{
			isnull[1] = isnull[2] = isnull[3] = isnull[4] = true;
		}
		else
		{
			values[1] = CStringGetTextDatum(jobs[i].completion);
			values[2] = Int32GetDatum(jobs[i].prompt_tokens);
			values[3] = Int32GetDatum(jobs[i].completion_tokens);
			values[4] = CStringGetTextDatum(llm_finish_reason_name(jobs[i].finish_reason));
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}

	PG_RETURN_NULL();
}
