/*
 * functions.c
 *		SQL functions llm_generate() and llm_generate_batch().
 *
 * Both check their parameters here, before anything is queued, convert the
 * prompts and stop strings to UTF-8 (what the model reads), and hand the
 * work to queue.c.  A NULL prompt gives a NULL completion without a request.
 * The "LLM Batch" plan node (batch_scan.c) builds its jobs from a row's
 * evaluated arguments with the same LlmJobFromArgs(), so a batched call
 * checks and means exactly what a call row by row does.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_generate);
PG_FUNCTION_INFO_V1(llm_generate_batch);

/* Parameters shared by both functions; their argument positions. */
#define LLM_ARG_PROMPT		0
#define LLM_ARG_MAX_TOKENS	1
#define LLM_ARG_TEMPERATURE 2
#define LLM_ARG_TOP_P		3
#define LLM_ARG_TOP_K		4
#define LLM_ARG_SEED		5
#define LLM_ARG_STOP		6
#define LLM_ARG_CHAT		7
#define LLM_ARG_ON_ERROR	8
#define LLM_ARG_SYSTEM		9
#define LLM_ARG_JSON_SCHEMA 10
#define LLM_ARG_CHOICES		11

/* Whether the worker's model has a chat template (read under the lock). */
bool
LlmModelChats(void)
{
	LlmWorkerInfo w = LlmWorkerServing();

	return w.has_model && w.chat_template;
}

/* Error out when a parameter that has no NULL meaning is NULL. */
static void
LlmCheckNotNull(const NullableDatum *args, int argno, const char *name)
{
	if (args[argno].isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be null", name)));
}

/* Read and check the sampling parameters (the seed is set per job). */
static void
LlmGetParams(const NullableDatum *args, LlmParams *p)
{
	LlmCheckNotNull(args, LLM_ARG_MAX_TOKENS, "max_tokens");
	LlmCheckNotNull(args, LLM_ARG_TEMPERATURE, "temperature");
	LlmCheckNotNull(args, LLM_ARG_TOP_P, "top_p");
	LlmCheckNotNull(args, LLM_ARG_TOP_K, "top_k");

	p->max_tokens = DatumGetInt32(args[LLM_ARG_MAX_TOKENS].value);
	p->temperature = DatumGetFloat8(args[LLM_ARG_TEMPERATURE].value);
	p->top_p = DatumGetFloat8(args[LLM_ARG_TOP_P].value);
	p->top_k = DatumGetInt32(args[LLM_ARG_TOP_K].value);
	p->seed = 0;
	if (!args[LLM_ARG_CHAT].isnull)
		p->chat = DatumGetBool(args[LLM_ARG_CHAT].value);
	else
		p->chat = llm_chat_setting == LLM_CHAT_ON || (llm_chat_setting == LLM_CHAT_AUTO && LlmModelChats());

	if (p->max_tokens < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_tokens must not be negative")));
	if (p->max_tokens > llm_max_tokens)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_tokens %d exceeds the limit of %d tokens", p->max_tokens, llm_max_tokens),
				 errhint("A superuser can raise llm.max_tokens.")));
	/* as the worker sees them, in single precision: 1e308 would be infinite there, 1e-300 zero */
	if (isnan(p->temperature) || isinf((float) p->temperature) || p->temperature < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("temperature must be a finite number greater than or equal to 0")));
	if (isnan(p->top_p) || (float) p->top_p <= 0 || p->top_p > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("top_p must be greater than 0 and at most 1")));
	if (p->top_k < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("top_k must not be negative")));
}

/* Whether on_error asks for NULL ('null') rather than an error ('error'). */
static bool
LlmGetErrorAsNull(const NullableDatum *args)
{
	char	   *s;

	LlmCheckNotNull(args, LLM_ARG_ON_ERROR, "on_error");
	s = TextDatumGetCString(args[LLM_ARG_ON_ERROR].value);
	if (pg_strcasecmp(s, "null") == 0)
		return true;
	if (pg_strcasecmp(s, "error") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for on_error: \"%s\"", s),
				 errhint("Valid values are \"error\" and \"null\".")));
	return false;
}

/* The seed argument, or a random one when it is NULL. */
static uint64
LlmGetSeed(const NullableDatum *args)
{
	if (args[LLM_ARG_SEED].isnull)
		return pg_prng_uint64(&pg_global_prng_state);
	return (uint64) DatumGetInt64(args[LLM_ARG_SEED].value);
}

/* The stop strings in UTF-8, back to back with their NULs, into job; none for a NULL array. */
static void
LlmGetStop(const NullableDatum *args, LlmJob *job)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	StringInfoData buf;

	job->stops = NULL;
	job->stops_len = 0;
	job->n_stop = 0;
	if (args[LLM_ARG_STOP].isnull)
		return;

	arr = DatumGetArrayTypeP(args[LLM_ARG_STOP].value);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		char	   *s;
		char	   *utf8;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stop strings must not be null")));
		s = TextDatumGetCString(elems[i]);
		if (s[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stop strings must not be empty")));
		utf8 = pg_server_to_any(s, strlen(s), PG_UTF8);
		appendBinaryStringInfo(&buf, utf8, strlen(utf8) + 1);
	}
	job->stops = buf.data;
	job->stops_len = buf.len;
	job->n_stop = n;
}

/*
 * Check a json_schema's UTF-8 text or the choices (len bytes) as the worker
 * will compile them, raising the error that names the keyword or the limit;
 * the last of each kind that passed is remembered, so a table's rows that
 * all ask the same are checked once.
 */
static void
LlmCheckGrammar(LlmGrammarKind kind, const char *text, Size len)
{
	static char *last[2];		/* json_schema's, then choices', in TopMemoryContext */
	static Size last_len[2];
	int			k = kind == LLM_GRAMMAR_JSON_SCHEMA ? 0 : 1;
	LlmError	err;
	LlmStatus	st;

	if (last[k] != NULL && last_len[k] == len && memcmp(last[k], text, len) == 0)
		return;
	st = kind == LLM_GRAMMAR_JSON_SCHEMA ? llm_json_schema_check(text, len, &err) : llm_choices_check(text, len, &err);
	if (st != LLM_OK)
		ereport(ERROR,
				(errcode(LlmStatusErrcode(st)),
				 errmsg("invalid %s: %s", k == 0 ? "json_schema" : "choices", err.msg)));
	if (last[k] != NULL)
		pfree(last[k]);
	last[k] = MemoryContextAlloc(TopMemoryContext, Max(len, 1));
	memcpy(last[k], text, len);
	last_len[k] = len;
}

/*
 * The grammar of json_schema or choices, into job: the schema's text in
 * UTF-8, or the choices back to back, NUL-terminated; each checked here as
 * the worker will compile it, so a bad or too big one fails before anything
 * is queued, naming the keyword or the limit.  Neither with stop strings;
 * not both.
 */
static void
LlmGetGrammar(const NullableDatum *args, LlmJob *job)
{
	job->params.grammar = LLM_GRAMMAR_NONE;
	job->params.grammar_len = 0;
	job->grammar = NULL;
	if (!args[LLM_ARG_JSON_SCHEMA].isnull && !args[LLM_ARG_CHOICES].isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("json_schema and choices cannot be used together")));
	if ((!args[LLM_ARG_JSON_SCHEMA].isnull || !args[LLM_ARG_CHOICES].isnull) && job->n_stop > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stop strings cannot be used with %s",
						args[LLM_ARG_CHOICES].isnull ? "json_schema" : "choices")));
	if (!args[LLM_ARG_JSON_SCHEMA].isnull)
	{
		Jsonb	   *jb = DatumGetJsonbP(args[LLM_ARG_JSON_SCHEMA].value);
		char	   *s = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
		char	   *utf8 = pg_server_to_any(s, strlen(s), PG_UTF8);

		LlmCheckGrammar(LLM_GRAMMAR_JSON_SCHEMA, utf8, strlen(utf8));
		job->params.grammar = LLM_GRAMMAR_JSON_SCHEMA;
		job->grammar = utf8;
		job->params.grammar_len = strlen(utf8);
	}
	else if (!args[LLM_ARG_CHOICES].isnull)
	{
		ArrayType  *arr = DatumGetArrayTypeP(args[LLM_ARG_CHOICES].value);
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		StringInfoData buf;

		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		if (n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("choices must not be empty")));
		initStringInfo(&buf);
		for (int i = 0; i < n; i++)
		{
			Size		len;
			char	   *utf8;

			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("choices must not contain nulls")));
			utf8 = LlmTextUtf8(elems[i], &len);
			if (len == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("choices must not contain empty strings")));
			appendBinaryStringInfo(&buf, utf8, len + 1);
		}
		LlmCheckGrammar(LLM_GRAMMAR_CHOICES, buf.data, buf.len);
		job->params.grammar = LLM_GRAMMAR_CHOICES;
		job->grammar = buf.data;
		job->params.grammar_len = buf.len;
	}
}

/* A text datum in UTF-8 (what the model reads), as a NUL-terminated palloc'd copy; its length into *len unless NULL. */
char *
LlmTextUtf8(Datum d, Size *len)
{
	char	   *s = text_to_cstring(DatumGetTextPP(d));
	char	   *utf8 = pg_server_to_any(s, strlen(s), PG_UTF8);

	if (len != NULL)
		*len = strlen(utf8);
	return utf8;
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
 * The system prompt of a job, in UTF-8: the system argument, else
 * llm.system_prompt when it is set and the job is a chat; a system argument
 * without chat is an error.
 */
static void
LlmGetSystem(const NullableDatum *args, LlmJob *job)
{
	const char *data;
	int			len;
	char	   *utf8;

	job->system = NULL;
	job->system_len = 0;
	if (!args[LLM_ARG_SYSTEM].isnull)
	{
		text	   *t = DatumGetTextPP(args[LLM_ARG_SYSTEM].value);

		if (!job->params.chat)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a system prompt needs chat"),
					 errhint("Call llm_generate with chat => true, or set llm.chat to on.")));
		data = VARDATA_ANY(t);
		len = VARSIZE_ANY_EXHDR(t);
	}
	else if (job->params.chat && llm_system_prompt != NULL && llm_system_prompt[0] != '\0')
	{
		data = llm_system_prompt;
		len = strlen(llm_system_prompt);
	}
	else
		return;
	utf8 = pg_server_to_any(data, len, PG_UTF8);
	job->system = utf8;
	job->system_len = (utf8 == data) ? len : strlen(utf8);
}

/*
 * Fill job from llm_generate()'s twelve arguments but the prompt and the
 * system prompt: checks the sampling parameters, stop strings, grammar and
 * on_error, and sets the seed (a random one for NULL).  llm_chat() builds
 * its jobs on it (chat.c).
 */
void
LlmJobParamsFromArgs(LlmJob *job, const NullableDatum *args)
{
	memset(job, 0, sizeof(*job));
	job->slot = -1;
	LlmGetParams(args, &job->params);
	LlmGetStop(args, job);
	LlmGetGrammar(args, job);
	job->error_as_null = LlmGetErrorAsNull(args);
	job->params.seed = LlmGetSeed(args);
	job->params.random_seed = args[LLM_ARG_SEED].isnull;
}

/*
 * Fill job from llm_generate()'s twelve arguments: checks every parameter
 * (also for a NULL prompt, so bad calls fail the same way always), then the
 * system prompt and the prompt (NULL: no request).
 */
void
LlmJobFromArgs(LlmJob *job, const NullableDatum *args)
{
	LlmJobParamsFromArgs(job, args);
	LlmGetSystem(args, job);
	if (!args[LLM_ARG_PROMPT].isnull)
		LlmSetPrompt(job, DatumGetTextPP(args[LLM_ARG_PROMPT].value));
}

/*
 * llm_generate(prompt, max_tokens, temperature, top_p, top_k, seed, stop, chat, on_error, system,
 *				json_schema, choices)
 *		The model's continuation of prompt.
 */
Datum
llm_generate(PG_FUNCTION_ARGS)
{
	LlmJob		job;

	LlmJobFromArgs(&job, fcinfo->args);
	return LlmRunOneJob(&job, fcinfo);
}

/*
 * Run one built job (NULL prompt: no request) and return its answer as the
 * function's text result, NULL when there is none (a NULL input, or a
 * failure that on_error turned into NULL).
 */
Datum
LlmRunOneJob(LlmJob *job, FunctionCallInfo fcinfo)
{
	if (job->prompt == NULL)
		PG_RETURN_NULL();

	LlmQueueRun(job, 1);

	if (job->failed)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(job->completion));
}

/*
 * llm_generate_batch(prompts, max_tokens, temperature, top_p, top_k, seed, stop, chat, on_error, system,
 *					  json_schema, choices)
 *		One row per prompt, in order: (ord, completion, prompt_tokens,
 *		completion_tokens, finish_reason, error).  Every prompt is queued
 *		before the first result is awaited, so the worker batches them.  With
 *		on_error => 'null' a failed prompt gives a NULL completion, the
 *		finish reason "error" and the error's message and detail; the
 *		definition of 1.0 and 1.1 has no error column.
 */
Datum
llm_generate_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmJob		shared;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	LlmJob	   *jobs;
	NullableDatum args[LLM_GENERATE_NARGS];

	/*
	 * The parameters, checked once.  The prompt array is not a prompt: it
	 * must not be read as text (outside UTF-8 databases that conversion
	 * failed on the array's header bytes).
	 */
	memcpy(args, fcinfo->args, sizeof(args));
	args[LLM_ARG_PROMPT].isnull = true;
	LlmJobFromArgs(&shared, args);
	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();

	arr = PG_GETARG_ARRAYTYPE_P(0);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	jobs = palloc0(sizeof(LlmJob) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		jobs[i] = shared;
		jobs[i].prompt = NULL;
		jobs[i].prompt_len = 0;
		if (!nulls[i])
			LlmSetPrompt(&jobs[i], DatumGetTextPP(elems[i]));
		jobs[i].params.seed = LlmGetSeed(fcinfo->args);
		jobs[i].params.random_seed = fcinfo->args[LLM_ARG_SEED].isnull;
	}

	LlmQueueRun(jobs, n);

	for (int i = 0; i < n; i++)
	{
		Datum		values[6];
		bool		isnull[6] = {false, false, false, false, false, true};

		values[0] = Int32GetDatum(i + 1);
		if (jobs[i].prompt == NULL)
		{
			isnull[1] = isnull[2] = isnull[3] = isnull[4] = true;
		}
		else
		{
			isnull[1] = jobs[i].failed;
			values[1] = jobs[i].failed ? (Datum) 0 : CStringGetTextDatum(jobs[i].completion);
			values[2] = Int32GetDatum(jobs[i].prompt_tokens);
			values[3] = Int32GetDatum(jobs[i].completion_tokens);
			values[4] = CStringGetTextDatum(llm_finish_reason_name(jobs[i].finish_reason));
			isnull[5] = !jobs[i].failed;
			values[5] = jobs[i].failed ? CStringGetTextDatum(jobs[i].error) : (Datum) 0;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}

	PG_RETURN_NULL();
}
