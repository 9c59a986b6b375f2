/*
 * semantic.c
 *		SQL functions that read the model's probabilities instead of
 *		sampling text: llm_score(), llm_classify(), llm_classify_scores(),
 *		llm_filter(), llm_probability() and llm_rank().
 *
 * Each is one or more scoring jobs (LlmParams.score): the worker prefills
 * the prompt and takes the continuation's tokens as the generation,
 * summing their log-probabilities (LlmRequest.forced), so a label's
 * probability needs no decoding and no parsing.  A label is scored as the
 * model's whole answer: in the model's chat format when it has a template
 * (the label, then the end-of-turn token), else after "Answer:" in a plain
 * prompt.  The jobs of one call share the prompt, so the prefix cache
 * computes it once; they are queued together, and the worker batches them.
 * Probabilities over labels are the softmax of those sums.  NULL inputs
 * give NULL without a request.  Every answer depends only on (model,
 * input, labels, instruction), as for llm_generate.
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

/* A scoring job: prompt (chat or plain), then continuation; greedy parameters otherwise. */
static void
LlmScoreJob(LlmJob *job, const char *prompt, Size prompt_len, const char *cont, Size cont_len,
			bool chat, bool end_of_turn)
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
	job->params.score_eos = end_of_turn;
}

/* Whether the worker's model has a chat template (read under the lock). */
static bool
LlmModelChats(void)
{
	bool		chats;

	LWLockAcquire(LlmState->lock, LW_SHARED);
	chats = LlmState->worker.has_model && LlmState->worker.chat_template;
	LWLockRelease(LlmState->lock);
	return chats;
}

/* The labels of a text[] in UTF-8, checked: not empty, no NULL, none empty, no two alike. */
static const char **
LlmGetLabels(ArrayType *arr, int *n_labels, Size **lens)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	const char **labels;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("labels must be a one-dimensional array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("labels must not be empty")));
	labels = palloc(sizeof(char *) * n);
	*lens = palloc(sizeof(Size) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("labels must not contain NULL")));
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
 * to the question made of instruction and input.  With a chat template the
 * question is the user's turn and a label the whole reply; without one, a
 * plain "...\nAnswer:" and " label".
 */
static void
LlmLabelJobs(const char *instruction, const char *input, Size input_len,
			 const char *const *labels, const Size *lens, int n, bool chat, LlmJob *jobs)
{
	StringInfoData q;

	initStringInfo(&q);
	appendStringInfoString(&q, instruction);
	appendStringInfoString(&q, "\n\nText: ");
	appendBinaryStringInfo(&q, input, input_len);
	appendStringInfoString(&q, "\n\nAnswer with one of: ");
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&q, ", ");
		appendBinaryStringInfo(&q, labels[i], lens[i]);
	}
	appendStringInfoString(&q, chat ? "." : ".\nAnswer:");

	for (int i = 0; i < n; i++)
	{
		const char *cont = labels[i];
		Size		cont_len = lens[i];

		if (!chat)
		{
			char	   *spaced = palloc(lens[i] + 2);

			spaced[0] = ' ';
			memcpy(spaced + 1, labels[i], lens[i]);
			spaced[lens[i] + 1] = '\0';
			cont = spaced;
			cont_len = lens[i] + 1;
		}
		LlmScoreJob(&jobs[i], q.data, q.len, cont, cont_len, chat, chat);
	}
}

/* The softmax of n run scoring jobs' log-probabilities, in order, into probs. */
static void
LlmLabelSoftmax(const LlmJob *jobs, int n, double *probs)
{
	double		best = -INFINITY;
	double		sum = 0;

	for (int i = 0; i < n; i++)
		best = Max(best, jobs[i].logprob);
	for (int i = 0; i < n; i++)
		sum += probs[i] = exp(jobs[i].logprob - best);
	for (int i = 0; i < n; i++)
		probs[i] /= sum;
}

/* The probability of each of n labels as the model's answer (LlmLabelJobs), summing to 1. */
static void
LlmLabelProbabilities(const char *instruction, const char *input, Size input_len,
					  const char *const *labels, const Size *lens, int n, double *probs)
{
	LlmJob	   *jobs = palloc(sizeof(LlmJob) * n);

	LlmLabelJobs(instruction, input, input_len, labels, lens, n, LlmModelChats(), jobs);
	LlmQueueRun(jobs, n);
	LlmLabelSoftmax(jobs, n, probs);
}

/* The instruction of a classify call: the argument, or a default naming the task. */
static const char *
LlmInstruction(FunctionCallInfo fcinfo, int argno, const char *dflt)
{
	Size		len;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return dflt;
	return LlmTextUtf8(PG_GETARG_DATUM(argno), &len);
}

/*
 * llm_score(prompt, continuation, chat, system)
 *		The natural log of the probability of continuation after prompt.
 */
Datum
llm_score(PG_FUNCTION_ARGS)
{
	LlmJob		job;
	const char *prompt;
	const char *cont;
	Size		prompt_len;
	Size		cont_len;
	bool		chat = !PG_ARGISNULL(2) && PG_GETARG_BOOL(2);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (!PG_ARGISNULL(3) && !chat)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a system prompt needs chat"),
				 errhint("Call llm_score with chat => true.")));
	prompt = LlmTextUtf8(PG_GETARG_DATUM(0), &prompt_len);
	cont = LlmTextUtf8(PG_GETARG_DATUM(1), &cont_len);
	if (cont_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("continuation must not be empty")));
	LlmScoreJob(&job, prompt, prompt_len, cont, cont_len, chat, false);
	if (!PG_ARGISNULL(3))
		job.system = LlmTextUtf8(PG_GETARG_DATUM(3), &job.system_len);
	LlmQueueRun(&job, 1);
	PG_RETURN_FLOAT8(job.logprob);
}

#define LLM_CLASSIFY_INSTRUCTION "Classify the text."

/* The label probabilities of a classify call, or false for NULL input or labels. */
static bool
LlmClassifyArgs(FunctionCallInfo fcinfo, const char ***labels, int *n, double **probs)
{
	Size	   *lens;
	Size		input_len;
	const char *input;
	const char *instruction;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		return false;
	*labels = LlmGetLabels(PG_GETARG_ARRAYTYPE_P(1), n, &lens);
	instruction = LlmInstruction(fcinfo, 2, LLM_CLASSIFY_INSTRUCTION);
	input = LlmTextUtf8(PG_GETARG_DATUM(0), &input_len);
	*probs = palloc(sizeof(double) * *n);
	LlmLabelProbabilities(instruction, input, input_len, *labels, lens, *n, *probs);
	return true;
}

/*
 * llm_classify(input, labels, instruction)
 *		The label the model finds likeliest as its answer (the first of equals).
 */
Datum
llm_classify(PG_FUNCTION_ARGS)
{
	const char **labels;
	int			n;
	double	   *probs;
	int			best = 0;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n_elems;

	if (!LlmClassifyArgs(fcinfo, &labels, &n, &probs))
		PG_RETURN_NULL();
	for (int i = 1; i < n; i++)
		if (probs[i] > probs[best])
			best = i;
	/* the label as given, in the server encoding */
	arr = PG_GETARG_ARRAYTYPE_P(1);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n_elems);
	PG_RETURN_DATUM(elems[best]);
}

/*
 * llm_classify_scores(input, labels, instruction)
 *		One row per label, in order: (label, probability).
 */
Datum
llm_classify_scores(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char **labels;
	int			n;
	double	   *probs;
	Datum	   *elems;
	bool	   *nulls;
	int			n_elems;

	InitMaterializedSRF(fcinfo, 0);
	if (!LlmClassifyArgs(fcinfo, &labels, &n, &probs))
		PG_RETURN_NULL();
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n_elems);
	for (int i = 0; i < n; i++)
	{
		Datum		values[2] = {elems[i], Float8GetDatum(probs[i])};
		bool		isnull[2] = {false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	PG_RETURN_NULL();
}

static const char *const LlmYesNo[2] = {"Yes", "No"};
static const Size LlmYesNoLen[2] = {3, 2};

/* P(Yes) against P(No) as the model's answer to question about input. */
static double
LlmYesProbability(FunctionCallInfo fcinfo)
{
	double		probs[2];
	Size		input_len;
	Size		question_len;
	const char *input = LlmTextUtf8(PG_GETARG_DATUM(0), &input_len);
	const char *question = LlmTextUtf8(PG_GETARG_DATUM(1), &question_len);

	if (question_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("question must not be empty")));
	LlmLabelProbabilities(question, input, input_len, LlmYesNo, LlmYesNoLen, 2, probs);
	return probs[0];
}

/*
 * llm_filter(input, question, threshold)
 *		Whether the model answers Yes to question about input with at least
 *		threshold probability (against No).
 */
Datum
llm_filter(PG_FUNCTION_ARGS)
{
	double		threshold = PG_ARGISNULL(2) ? 0.5 : PG_GETARG_FLOAT8(2);

	if (isnan(threshold) || threshold < 0 || threshold > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("threshold must be between 0 and 1")));
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_BOOL(LlmYesProbability(fcinfo) >= threshold);
}

/*
 * llm_probability(input, question)
 *		The probability that the model answers Yes (against No) to question about input.
 */
Datum
llm_probability(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(LlmYesProbability(fcinfo));
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
 * llm_rank(query, candidates, instruction)
 *		One row per candidate, best first: (rank, candidate, score), the
 *		score being the probability that the model answers Yes (against No)
 *		to whether the candidate is relevant to the query.  Every
 *		candidate's two scoring jobs are queued at once, so the worker
 *		batches them all.
 */
Datum
llm_rank(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	Size		query_len;
	const char *query;
	const char *instruction;
	StringInfoData q;
	LlmJob	   *jobs;
	LlmRanked  *ranked;
	bool		chat;

	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (ARR_NDIM(PG_GETARG_ARRAYTYPE_P(1)) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("candidates must be a one-dimensional array")));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	query = LlmTextUtf8(PG_GETARG_DATUM(0), &query_len);
	instruction = LlmInstruction(fcinfo, 2, LLM_RANK_INSTRUCTION);
	initStringInfo(&q);
	appendStringInfo(&q, "%s\n\nQuery: %s", instruction, query);

	chat = LlmModelChats();
	jobs = palloc(sizeof(LlmJob) * 2 * Max(n, 1));
	ranked = palloc(sizeof(LlmRanked) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		Size		len;
		const char *cand;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("candidates must not contain NULL")));
		cand = LlmTextUtf8(elems[i], &len);
		LlmLabelJobs(q.data, cand, len, LlmYesNo, LlmYesNoLen, 2, chat, &jobs[2 * i]);
	}
	LlmQueueRun(jobs, 2 * n);

	for (int i = 0; i < n; i++)
	{
		double		probs[2];

		LlmLabelSoftmax(&jobs[2 * i], 2, probs);
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
	PG_RETURN_NULL();
}
