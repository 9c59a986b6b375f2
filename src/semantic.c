/*
 * semantic.c
 *		SQL functions that read the model's probabilities instead of
 *		sampling text: llm_score(), llm_classify(), llm_classify_scores(),
 *		llm_filter(), llm_probability() and llm_rank().
 *
 * Each is one or more scoring jobs (LlmParams.score): the worker prefills
 * the prompt, then feeds the whole continuation in one pass, summing the
 * log-probabilities of its tokens (LlmRequest.forced), so a label's
 * probability needs no decoding and no parsing.  A label is scored as the
 * answer after 'Text: "input"', the question and "Answer:", in plain text
 * (LlmLabelJobs).  The jobs of one call share the prompt, so the prefix
 * cache computes it once; they are queued together, and the worker batches
 * them.
 * Probabilities over labels are the softmax of those sums.  NULL inputs
 * give NULL without a request.  Every answer depends only on (model,
 * input, labels, instruction, calibrate), as for llm_generate.
 *
 * Calibrated (calibrate => true, the default): each call also scores its
 * labels for a few content-free inputs, whose answers the statement keeps,
 * and divides that prior out (calibrate.c); calibrate => false gives the
 * raw probabilities.  The calibrated jobs follow the call's own.
 *
 * The set-returning ones (llm_classify_scores(), llm_rank()) are batched
 * over a table too: the LLM Batch node runs their jobs and hands their
 * log-scores, as a float8[], to llm_classify_scores_from() or
 * llm_rank_from(), which the planner calls in their place (batch_plan.c)
 * and which make the same rows from them.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_score);
PG_FUNCTION_INFO_V1(llm_classify);
PG_FUNCTION_INFO_V1(llm_classify_scores);
PG_FUNCTION_INFO_V1(llm_filter);
PG_FUNCTION_INFO_V1(llm_probability);
PG_FUNCTION_INFO_V1(llm_rank);
PG_FUNCTION_INFO_V1(llm_classify_scores_from);
PG_FUNCTION_INFO_V1(llm_rank_from);

/* A scoring job: prompt (chat or plain), then continuation; greedy parameters otherwise. */
static void
LlmScoreJob(LlmJob *job, const char *prompt, Size prompt_len, const char *cont, Size cont_len, bool chat)
{
	memset(job, 0, sizeof(*job));
	job->slot = -1;
	job->prompt = prompt;
	job->prompt_len = prompt_len;
	job->continuation = cont;
	job->continuation_len = cont_len;
	job->params.top_p = 1;
	job->params.chat = chat;
	job->params.score = true;
}

/* The elements of a one-dimensional text[] argument named what (NULLs refused). */
static Datum *
LlmTextElems(Datum arr, const char *what, int *n)
{
	ArrayType  *a = DatumGetArrayTypeP(arr);
	Datum	   *elems;
	bool	   *nulls;

	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what)));
	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	for (int i = 0; i < *n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain NULL", what)));
	return elems;
}

/* The labels of a text[] in UTF-8, checked: not empty, no NULL, none empty, no two alike. */
static const char **
LlmGetLabels(Datum arr, int *n_labels, Size **lens)
{
	int			n;
	Datum	   *elems = LlmTextElems(arr, "labels", &n);
	const char **labels;

	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("labels must not be empty")));
	labels = palloc(sizeof(char *) * n);
	*lens = palloc(sizeof(Size) * n);
	for (int i = 0; i < n; i++)
	{
		labels[i] = LlmTextUtf8(elems[i], &(*lens)[i]);
		if ((*lens)[i] == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("labels must not be empty strings")));
		for (int j = 0; j < i; j++)
			if ((*lens)[j] == (*lens)[i] && memcmp(labels[j], labels[i], (*lens)[i]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("duplicate label \"%s\"", TextDatumGetCString(elems[i]))));
	}
	*n_labels = n;
	return labels;
}

/*
 * The scoring jobs (jobs[0..n)) for each of n labels as the model's answer
 * to question about input, after context (NULL: none) when given:
 *
 *     context + 'Text: "' input '"\nQuestion: ' question '\nAnswer:'
 *
 * continued by " label", in plain text whether or not the model chats:
 * with the text first and quoted, even a 135M instruct model tells apart
 * what a chat turn does not (bench/semantic_accuracy.sh).  The labels
 * share the prompt, so the prefix cache computes it once.
 */
static void
LlmLabelJobs(const char *context, const char *question, const char *input, Size input_len,
			 const char *const *labels, const Size *lens, int n, LlmJob *jobs)
{
	StringInfoData q;

	initStringInfo(&q);
	if (context != NULL)
		appendStringInfoString(&q, context);
	appendStringInfoString(&q, "Text: \"");
	appendBinaryStringInfo(&q, input, input_len);
	appendStringInfo(&q, "\"\nQuestion: %s\nAnswer:", question);

	for (int i = 0; i < n; i++)
	{
		char	   *spaced = palloc(lens[i] + 2);

		spaced[0] = ' ';
		memcpy(spaced + 1, labels[i], lens[i]);
		spaced[lens[i] + 1] = '\0';
		LlmScoreJob(&jobs[i], q.data, q.len, spaced, lens[i] + 1, false);
	}
}

/*
 * The jobs of a call that calibrates, after its own: the n labels' jobs
 * for each content-free input in turn, asked as the call asks about its
 * input (shared: the statement keeps their answers).
 */
static void
LlmContentFreeJobs(const char *context, const char *question, const char *const *labels, const Size *lens, int n,
				   LlmJob *jobs)
{
	for (int k = 0; k < LLM_CONTENT_FREE_INPUTS; k++)
	{
		const char *input = LlmContentFreeInputs[k];

		LlmLabelJobs(context, question, input, strlen(input), labels, lens, n, &jobs[k * n]);
		for (int i = 0; i < n; i++)
			jobs[k * n + i].shared = true;
	}
}

/*
 * Whether a call of scoring function f with args calibrates: its calibrate
 * argument, the last of every label function's (NULL: true); llm_score
 * never does.
 */
static bool
LlmCalibrates(LlmBatchFunc f, const NullableDatum *args)
{
	int			a = LlmBatchFuncNargs(f) - 1;

	if (f == LLM_BATCH_SCORE)
		return false;
	return args[a].isnull || DatumGetBool(args[a].value);
}

#define LLM_CLASSIFY_INSTRUCTION "Classify the text."

static const char *const LlmYesNo[2] = {"Yes", "No"};
static const Size LlmYesNoLen[2] = {3, 2};

/* llm_score(prompt, continuation, chat, system): its one job, or none for a NULL prompt or continuation. */
static LlmJob *
LlmScoreCallJobs(const NullableDatum *args, int *n_jobs)
{
	LlmJob	   *job;
	const char *prompt;
	const char *cont;
	Size		prompt_len;
	Size		cont_len;
	bool		chat = !args[2].isnull && DatumGetBool(args[2].value);

	*n_jobs = 0;
	if (args[0].isnull || args[1].isnull)
		return NULL;
	if (!args[3].isnull && !chat)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a system prompt needs chat"),
				 errhint("Call llm_score with chat => true.")));
	prompt = LlmTextUtf8(args[0].value, &prompt_len);
	cont = LlmTextUtf8(args[1].value, &cont_len);
	if (cont_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("continuation must not be empty")));
	job = palloc(sizeof(LlmJob));
	LlmScoreJob(job, prompt, prompt_len, cont, cont_len, chat);
	if (!args[3].isnull)
		job->system = LlmTextUtf8(args[3].value, &job->system_len);
	*n_jobs = 1;
	return job;
}

/*
 * The jobs of a question with n labels about input: one per label, then,
 * when calibrate, those of the content-free inputs.
 */
static LlmJob *
LlmQuestionJobs(const char *instruction, const char *input, Size input_len, const char *const *labels,
				const Size *lens, int n, bool calibrate, int *n_jobs)
{
	LlmJob	   *jobs;

	*n_jobs = n * (calibrate ? 1 + LLM_CONTENT_FREE_INPUTS : 1);
	jobs = palloc(sizeof(LlmJob) * *n_jobs);
	LlmLabelJobs(NULL, instruction, input, input_len, labels, lens, n, jobs);
	if (calibrate)
		LlmContentFreeJobs(NULL, instruction, labels, lens, n, &jobs[n]);
	return jobs;
}

/* llm_classify(input, labels, instruction, calibrate): LlmQuestionJobs, or none for a NULL input or labels. */
static LlmJob *
LlmClassifyCallJobs(LlmBatchFunc f, const NullableDatum *args, int *n_jobs)
{
	const char **labels;
	Size	   *lens;
	Size		input_len;
	const char *input;
	const char *instruction;
	int			n;

	*n_jobs = 0;
	if (args[0].isnull || args[1].isnull)
		return NULL;
	labels = LlmGetLabels(args[1].value, &n, &lens);
	instruction = args[2].isnull ? LLM_CLASSIFY_INSTRUCTION : LlmTextUtf8(args[2].value, NULL);
	input = LlmTextUtf8(args[0].value, &input_len);
	return LlmQuestionJobs(instruction, input, input_len, labels, lens, n, LlmCalibrates(f, args), n_jobs);
}

/* llm_filter's threshold argument (args[2]; NULL: 0.5), checked. */
static double
LlmFilterThreshold(const NullableDatum *args)
{
	double		threshold = args[2].isnull ? 0.5 : DatumGetFloat8(args[2].value);

	if (isnan(threshold) || threshold < 0 || threshold > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("threshold must be between 0 and 1")));
	return threshold;
}

/* llm_filter or llm_probability(input, question, ...): the Yes and No jobs (LlmQuestionJobs), or none for a NULL input or question. */
static LlmJob *
LlmYesNoCallJobs(LlmBatchFunc f, const NullableDatum *args, int *n_jobs)
{
	Size		input_len;
	Size		question_len;
	const char *input;
	const char *question;

	*n_jobs = 0;
	if (args[0].isnull || args[1].isnull)
		return NULL;
	input = LlmTextUtf8(args[0].value, &input_len);
	question = LlmTextUtf8(args[1].value, &question_len);
	if (question_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("question must not be empty")));
	return LlmQuestionJobs(question, input, input_len, LlmYesNo, LlmYesNoLen, 2, LlmCalibrates(f, args), n_jobs);
}

/* A candidate of llm_rank() with its score, for sorting. */
typedef struct LlmRanked
{
	int			index;
	double		score;
} LlmRanked;

/* qsort order of llm_rank(): higher score first, then the candidates' order. */
static int
LlmRankedCompare(const void *a, const void *b)
{
	const LlmRanked *x = a;
	const LlmRanked *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->index - y->index;
}

#define LLM_RANK_INSTRUCTION "Is the text relevant to the query?"

/*
 * llm_rank(query, candidates, instruction, calibrate): the Yes and No jobs
 * of each candidate (2 per candidate, in order), the text of a question
 * after the line 'Query: "query"', then, when calibrate, those of the
 * content-free inputs asked alike; none for a NULL query or candidates or
 * no candidates.
 */
static LlmJob *
LlmRankCallJobs(LlmBatchFunc f, const NullableDatum *args, int *n_jobs)
{
	Datum	   *elems;
	int			n;
	const char *instruction;
	StringInfoData context;
	LlmJob	   *jobs;
	bool		calibrate = LlmCalibrates(f, args);

	*n_jobs = 0;
	if (args[0].isnull || args[1].isnull)
		return NULL;
	elems = LlmTextElems(args[1].value, "candidates", &n);
	if (n == 0)
		return NULL;
	instruction = args[2].isnull ? LLM_RANK_INSTRUCTION : LlmTextUtf8(args[2].value, NULL);
	initStringInfo(&context);
	appendStringInfo(&context, "Query: \"%s\"\n", LlmTextUtf8(args[0].value, NULL));
	*n_jobs = 2 * n + (calibrate ? 2 * LLM_CONTENT_FREE_INPUTS : 0);
	jobs = palloc(sizeof(LlmJob) * *n_jobs);
	for (int i = 0; i < n; i++)
	{
		Size		len;
		const char *cand = LlmTextUtf8(elems[i], &len);

		LlmLabelJobs(context.data, instruction, cand, len, LlmYesNo, LlmYesNoLen, 2, &jobs[2 * i]);
	}
	if (calibrate)
		LlmContentFreeJobs(context.data, instruction, LlmYesNo, LlmYesNoLen, 2, &jobs[2 * n]);
	return jobs;
}

/* n log-scores as a float8[]. */
static Datum
LlmScoreArray(const double *scores, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * n);

	for (int i = 0; i < n; i++)
		elems[i] = Float8GetDatum(scores[i]);
	return PointerGetDatum(construct_array(elems, n, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/* The jobs of a call of scoring function f with args (palloc'd); *n_jobs = 0: NULL, no request. */
LlmJob *
LlmSemanticJobs(LlmBatchFunc f, const NullableDatum *args, int *n_jobs)
{
	switch (f)
	{
		case LLM_BATCH_SCORE:
			return LlmScoreCallJobs(args, n_jobs);
		case LLM_BATCH_CLASSIFY:
		case LLM_BATCH_CLASSIFY_SCORES:
			return LlmClassifyCallJobs(f, args, n_jobs);
		case LLM_BATCH_FILTER:
			LlmFilterThreshold(args);	/* checked even for a NULL input, as row by row */
			return LlmYesNoCallJobs(f, args, n_jobs);
		case LLM_BATCH_PROBABILITY:
			return LlmYesNoCallJobs(f, args, n_jobs);
		case LLM_BATCH_RANK:
			return LlmRankCallJobs(f, args, n_jobs);
		default:
			elog(ERROR, "not a scoring function: %d", (int) f);
	}
	return NULL;				/* keep the compiler quiet */
}

/* The likeliest of n labels by their log-scores (the first of equals). */
static int
LlmBestLabel(const double *scores, int n)
{
	int			best = 0;

	for (int i = 1; i < n; i++)
		if (scores[i] > scores[best])
			best = i;
	return best;
}

/*
 * The log-scores of a call of a label function f (not llm_score) from its
 * n_jobs answered jobs, whose softmax over a question's labels is their
 * probability (LlmLabelScores); for llm_rank, Yes then No for each
 * candidate.  *n: how many.
 */
static double *
LlmCallScores(LlmBatchFunc f, const NullableDatum *args, const LlmJob *jobs, int n_jobs, int *n)
{
	bool		calibrate = LlmCalibrates(f, args);
	int			n_cf = calibrate ? LLM_CONTENT_FREE_INPUTS : 0;
	double	   *scores;

	if (f == LLM_BATCH_RANK)
	{
		*n = n_jobs - 2 * n_cf;
		scores = palloc(sizeof(double) * *n);
		for (int i = 0; i < *n; i += 2)
			LlmLabelScores(&jobs[i], calibrate ? &jobs[*n] : NULL, 2, &scores[i]);
		return scores;
	}
	*n = n_jobs / (1 + n_cf);
	scores = palloc(sizeof(double) * *n);
	LlmLabelScores(jobs, calibrate ? &jobs[*n] : NULL, *n, scores);
	return scores;
}

/* The result of a call of scoring function f with args from its n_jobs (> 0) answered jobs. */
Datum
LlmSemanticResult(LlmBatchFunc f, const NullableDatum *args, const LlmJob *jobs, int n_jobs)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	double	   *scores;
	double		p_yes[2];

	if (f == LLM_BATCH_SCORE)
		return Float8GetDatum(jobs[0].logprob);
	scores = LlmCallScores(f, args, jobs, n_jobs, &n);
	switch (f)
	{
		case LLM_BATCH_CLASSIFY:
			/* the label as given, in the server encoding */
			deconstruct_array(DatumGetArrayTypeP(args[1].value), TEXTOID, -1, false, TYPALIGN_INT,
							  &elems, &nulls, &n);
			return elems[LlmBestLabel(scores, n)];
		case LLM_BATCH_FILTER:
			LlmSoftmax(scores, 2, p_yes);
			return BoolGetDatum(p_yes[0] >= LlmFilterThreshold(args));
		case LLM_BATCH_PROBABILITY:
			LlmSoftmax(scores, 2, p_yes);
			return Float8GetDatum(p_yes[0]);
		case LLM_BATCH_CLASSIFY_SCORES:
		case LLM_BATCH_RANK:
			/* what llm_classify_scores_from() or llm_rank_from() makes the rows from */
			return LlmScoreArray(scores, n);
		default:
			elog(ERROR, "not a scoring function: %d", (int) f);
	}
	return (Datum) 0;			/* keep the compiler quiet */
}

/*
 * The arguments of a row-by-row call of scoring function f: fcinfo's, and
 * NULL for those a definition of an older version of the extension lacks
 * (calibrate, until ALTER EXTENSION llm UPDATE).
 */
static NullableDatum *
LlmSemanticArgs(FunctionCallInfo fcinfo, LlmBatchFunc f)
{
	int			nargs = LlmBatchFuncNargs(f);
	NullableDatum *args = palloc(sizeof(NullableDatum) * nargs);

	for (int a = 0; a < nargs; a++)
	{
		args[a].isnull = a >= PG_NARGS() || fcinfo->args[a].isnull;
		args[a].value = args[a].isnull ? (Datum) 0 : fcinfo->args[a].value;
	}
	return args;
}

/* Run a scoring function row by row: its jobs, through the queue, to its result. */
static Datum
LlmSemanticCall(FunctionCallInfo fcinfo, LlmBatchFunc f)
{
	int			n_jobs;
	NullableDatum *args = LlmSemanticArgs(fcinfo, f);
	LlmJob	   *jobs = LlmSemanticJobs(f, args, &n_jobs);

	if (n_jobs == 0)
		PG_RETURN_NULL();
	LlmQueueRunKept(jobs, n_jobs);
	return LlmSemanticResult(f, args, jobs, n_jobs);
}

/*
 * llm_score(prompt, continuation, chat, system)
 *		The natural log of the probability of continuation after prompt.
 */
Datum
llm_score(PG_FUNCTION_ARGS)
{
	return LlmSemanticCall(fcinfo, LLM_BATCH_SCORE);
}

/*
 * llm_classify(input, labels, instruction, calibrate)
 *		The label the model finds likeliest as its answer (the first of equals).
 */
Datum
llm_classify(PG_FUNCTION_ARGS)
{
	return LlmSemanticCall(fcinfo, LLM_BATCH_CLASSIFY);
}

/*
 * llm_filter(input, question, threshold, calibrate)
 *		Whether the model answers Yes to question about input with at least
 *		threshold probability (against No).
 */
Datum
llm_filter(PG_FUNCTION_ARGS)
{
	return LlmSemanticCall(fcinfo, LLM_BATCH_FILTER);
}

/*
 * llm_probability(input, question, calibrate)
 *		The probability that the model answers Yes (against No) to question about input.
 */
Datum
llm_probability(PG_FUNCTION_ARGS)
{
	return LlmSemanticCall(fcinfo, LLM_BATCH_PROBABILITY);
}

/* The float8[] argument of log-scores (no NULLs), which must have n elements. */
static const float8 *
LlmGetLogprobs(Datum arr, int n)
{
	ArrayType  *a = DatumGetArrayTypeP(arr);

	if (ARR_NDIM(a) > 1 || ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) != n || ARR_HASNULL(a))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("logprobs must be %d numbers, one per scoring job", n)));
	return (float8 *) ARR_DATA_PTR(a);
}

/* llm_classify_scores' rows from its labels (a text[]) and their log-scores: (label, probability) in label order. */
static void
LlmClassifyScoresRows(FunctionCallInfo fcinfo, Datum labels, Datum logprobs)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n;
	Datum	   *elems = LlmTextElems(labels, "labels", &n);
	double	   *probs = palloc(sizeof(double) * n);

	LlmSoftmax(LlmGetLogprobs(logprobs, n), n, probs);
	for (int i = 0; i < n; i++)
	{
		Datum		values[2] = {elems[i], Float8GetDatum(probs[i])};
		bool		isnull[2] = {false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
}

/* llm_rank's rows from its candidates (a text[]) and their Yes and No log-scores: (rank, candidate, score), best first. */
static void
LlmRankRows(FunctionCallInfo fcinfo, Datum candidates, Datum logprobs)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n;
	Datum	   *elems = LlmTextElems(candidates, "candidates", &n);
	const float8 *lp = LlmGetLogprobs(logprobs, 2 * n);
	LlmRanked  *ranked = palloc(sizeof(LlmRanked) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		double		probs[2];

		LlmSoftmax(&lp[2 * i], 2, probs);	/* P(Yes) against P(No) */
		ranked[i].index = i;
		ranked[i].score = probs[0];
	}
	qsort(ranked, n, sizeof(LlmRanked), LlmRankedCompare);
	for (int i = 0; i < n; i++)
	{
		Datum		values[3] = {Int32GetDatum(i + 1), elems[ranked[i].index], Float8GetDatum(ranked[i].score)};
		bool		isnull[3] = {false, false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
}

/*
 * Run a set-returning scoring function f row by row: its jobs, through the
 * queue, to its rows, made from its log-scores as the LLM Batch node has
 * the _from function make them.
 */
static Datum
LlmSemanticSetCall(FunctionCallInfo fcinfo, LlmBatchFunc f)
{
	int			n_jobs;
	NullableDatum *args = LlmSemanticArgs(fcinfo, f);
	LlmJob	   *jobs;
	Datum		scores;

	InitMaterializedSRF(fcinfo, 0);
	jobs = LlmSemanticJobs(f, args, &n_jobs);
	if (n_jobs == 0)
		PG_RETURN_NULL();
	LlmQueueRunKept(jobs, n_jobs);
	scores = LlmSemanticResult(f, args, jobs, n_jobs);
	if (f == LLM_BATCH_CLASSIFY_SCORES)
		LlmClassifyScoresRows(fcinfo, PG_GETARG_DATUM(1), scores);
	else
		LlmRankRows(fcinfo, PG_GETARG_DATUM(1), scores);
	PG_RETURN_NULL();
}

/*
 * llm_classify_scores(input, labels, instruction, calibrate)
 *		One row per label, in order: (label, probability).
 */
Datum
llm_classify_scores(PG_FUNCTION_ARGS)
{
	return LlmSemanticSetCall(fcinfo, LLM_BATCH_CLASSIFY_SCORES);
}

/*
 * llm_rank(query, candidates, instruction, calibrate)
 *		One row per candidate, best first: (rank, candidate, score), the
 *		score being the probability that the model answers Yes (against No)
 *		to whether the candidate is relevant to the query.  Every
 *		candidate's two scoring jobs are queued at once, so the worker
 *		batches them all.
 */
Datum
llm_rank(PG_FUNCTION_ARGS)
{
	return LlmSemanticSetCall(fcinfo, LLM_BATCH_RANK);
}

/*
 * llm_classify_scores_from(labels, logprobs)
 *		llm_classify_scores' rows from its labels' log-scores (the raw
 *		log-probabilities of its label jobs, or the calibrated ones), made
 *		from the jobs the LLM Batch node ran (no rows for NULL logprobs: a
 *		NULL input).
 */
Datum
llm_classify_scores_from(PG_FUNCTION_ARGS)
{
	InitMaterializedSRF(fcinfo, 0);
	if (!PG_ARGISNULL(0) && !PG_ARGISNULL(1))
		LlmClassifyScoresRows(fcinfo, PG_GETARG_DATUM(0), PG_GETARG_DATUM(1));
	PG_RETURN_NULL();
}

/*
 * llm_rank_from(candidates, logprobs)
 *		llm_rank's rows from the log-scores of its Yes and No answers, made
 *		from the jobs the LLM Batch node ran (no rows for NULL logprobs).
 */
Datum
llm_rank_from(PG_FUNCTION_ARGS)
{
	InitMaterializedSRF(fcinfo, 0);
	if (!PG_ARGISNULL(0) && !PG_ARGISNULL(1))
		LlmRankRows(fcinfo, PG_GETARG_DATUM(0), PG_GETARG_DATUM(1));
	PG_RETURN_NULL();
}
