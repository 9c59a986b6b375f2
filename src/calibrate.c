/*
 * calibrate.c
 *		Contextual calibration of the semantic functions' label scores, and
 *		the answers of its content-free jobs, kept for the statement.
 *
 * A small model answers with strong priors: asked for the sentiment of any
 * text, SmolLM2-135M says "positive" two times in three.  Contextual
 * calibration (Zhao et al., "Calibrate Before Use: Improving Few-Shot
 * Performance of Language Models", ICML 2021) estimates that prior by
 * asking the same question about content-free inputs ("N/A", ...) and
 * divides it out:
 *
 *   p_cal(label | x)  ∝  p(label | x) / mean_k p(label | content-free_k)
 *
 * renormalised over the labels.  Each p here is the softmax over the labels
 * of the label's mean log-probability per token (its end-of-turn token
 * included), so a label of three tokens does not lose to one of one merely
 * by its length.  The content-free question depends only on the model, the
 * instruction and the labels, never on the row, so an answer stays a
 * function of (model, input, labels, instruction) alone.
 *
 * The content-free jobs of a call are marked shared (LlmJob.shared): the
 * backend keeps their answers for the rest of the statement, so a table
 * of rows asks them once per distinct instruction and labels, row by row
 * (LlmQueueRunKept) as in the LLM Batch node (batch_scan.c).  The engine is
 * deterministic, so a kept answer is the one a new request would get.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "llm.h"

/*
 * The content-free inputs, averaged over.  On bench/data/semantic_eval with
 * SmolLM2-135M, "N/A" alone left sentiment at 34% (the uncalibrated 34%),
 * the three together gave 50%; per-token means beat sums by 1 to 3 points
 * (bench/results/semantic_accuracy.md).
 */
const char *const LlmContentFreeInputs[LLM_CONTENT_FREE_INPUTS] = {"N/A", "", "[MASK]"};

/* A kept answer: the hash of its request, the request itself, and the answer. */
typedef struct LlmKept
{
	uint64		hash;			/* the hash table's key */
	char	   *request;		/* (request_len) what LlmRequestKey made */
	Size		request_len;
	double		logprob;
	int32		n_scored;
} LlmKept;

static HTAB *KeptAnswers = NULL;
static MemoryContext KeptCxt = NULL;
static TimestampTz KeptStatement = 0;

/* The kept answers of this statement, forgetting those of an earlier one. */
static HTAB *
LlmKeptTable(void)
{
	HASHCTL		ctl;

	if (KeptAnswers != NULL && KeptStatement == GetCurrentStatementStartTimestamp())
		return KeptAnswers;
	if (KeptCxt == NULL)
		KeptCxt = AllocSetContextCreate(TopMemoryContext, "llm kept answers", ALLOCSET_SMALL_SIZES);
	MemoryContextReset(KeptCxt);
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(LlmKept);
	ctl.hcxt = KeptCxt;
	KeptAnswers = hash_create("llm kept answers", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	KeptStatement = GetCurrentStatementStartTimestamp();
	return KeptAnswers;
}

/* What identifies a scoring job's answer: its flags, prompt, system prompt and continuation, in one string. */
static void
LlmRequestKey(const LlmJob *job, StringInfo key)
{
	initStringInfo(key);
	appendStringInfo(key, "%d %zu %zu %zu|", job->params.chat,
					 job->system != NULL ? job->system_len : (Size) -1, job->prompt_len, job->continuation_len);
	if (job->system != NULL)
		appendBinaryStringInfo(key, job->system, job->system_len);
	appendBinaryStringInfo(key, job->prompt, job->prompt_len);
	appendBinaryStringInfo(key, job->continuation, job->continuation_len);
}

/* Find (HASH_FIND) or enter (HASH_ENTER, *found set) shared job's entry; key gets its request. */
static LlmKept *
LlmKeptEntry(const LlmJob *job, HASHACTION action, StringInfo key, bool *found)
{
	uint64		hash;

	Assert(job->shared && job->params.score);
	LlmRequestKey(job, key);
	hash = hash_bytes_extended((const unsigned char *) key->data, key->len, 0);
	return hash_search(LlmKeptTable(), &hash, action, found);
}

/* Give shared job its kept answer, if this statement has one; whether it had. */
bool
LlmKeptAnswer(LlmJob *job)
{
	StringInfoData key;
	LlmKept    *kept = LlmKeptEntry(job, HASH_FIND, &key, NULL);

	if (kept == NULL || kept->request_len != key.len || memcmp(kept->request, key.data, key.len) != 0)
		return false;
	job->logprob = kept->logprob;
	job->n_scored = kept->n_scored;
	return true;
}

/* Keep the answer of shared job for the rest of the statement. */
void
LlmKeepAnswer(const LlmJob *job)
{
	StringInfoData key;
	bool		found;
	LlmKept    *kept = LlmKeptEntry(job, HASH_ENTER, &key, &found);

	if (found)
		return;					/* the same request, or (never seen) another with its hash: keep the first */
	kept->request = MemoryContextAlloc(KeptCxt, key.len);
	memcpy(kept->request, key.data, key.len);
	kept->request_len = key.len;
	kept->logprob = job->logprob;
	kept->n_scored = job->n_scored;
}

/* Run jobs through the queue, the shared ones that this statement has answered excepted, and keep theirs. */
void
LlmQueueRunKept(LlmJob *jobs, int n_jobs)
{
	LlmJob	   *run = palloc(sizeof(LlmJob) * Max(n_jobs, 1));
	int		   *from = palloc(sizeof(int) * Max(n_jobs, 1));
	int			n_run = 0;

	for (int j = 0; j < n_jobs; j++)
		if (!jobs[j].shared || !LlmKeptAnswer(&jobs[j]))
		{
			from[n_run] = j;
			run[n_run++] = jobs[j];
		}
	/* a background fill (job_worker.c) spreads over the remote inference nodes too */
	if (llm_remote_servers != NULL && llm_remote_servers[0] != '\0')
		LlmRemoteRunJobs(run, n_run);
	else
		LlmQueueRun(run, n_run);
	for (int r = 0; r < n_run; r++)
	{
		jobs[from[r]] = run[r];
		if (run[r].shared)
			LlmKeepAnswer(&run[r]);
	}
}

/* The softmax of n log-scores, in order, into probs. */
void
LlmSoftmax(const double *logprobs, int n, double *probs)
{
	double		best = -INFINITY;
	double		sum = 0;

	for (int i = 0; i < n; i++)
		best = Max(best, logprobs[i]);
	for (int i = 0; i < n; i++)
		sum += probs[i] = exp(logprobs[i] - best);
	for (int i = 0; i < n; i++)
		probs[i] /= sum;
}

/* The log of the sum of the exponentials of n numbers, without overflow. */
static double
LlmLogSumExp(const double *x, int n)
{
	double		best = -INFINITY;
	double		sum = 0;

	for (int i = 0; i < n; i++)
		best = Max(best, x[i]);
	for (int i = 0; i < n; i++)
		sum += exp(x[i] - best);
	return best + log(sum);
}

/* The log-probabilities of n labels from their answered jobs: the log-softmax of each one's mean log-probability per token. */
static void
LlmPerTokenLogProbs(const LlmJob *jobs, int n, double *logp)
{
	double		total;

	for (int i = 0; i < n; i++)
		logp[i] = jobs[i].logprob / Max(jobs[i].n_scored, 1);
	total = LlmLogSumExp(logp, n);
	for (int i = 0; i < n; i++)
		logp[i] -= total;
}

/*
 * The log-scores of n labels, whose softmax is their probability: with
 * cf_jobs NULL, the raw log-probabilities of the label jobs (the whole
 * answers'); else calibrated by cf_jobs, the same labels' jobs for each
 * content-free input in turn (LLM_CONTENT_FREE_INPUTS * n), as the log of
 * the calibrated probabilities.
 */
void
LlmLabelScores(const LlmJob *jobs, const LlmJob *cf_jobs, int n, double *scores)
{
	double	   *cf;
	double		prior[LLM_CONTENT_FREE_INPUTS];
	double		total;

	if (cf_jobs == NULL)
	{
		for (int i = 0; i < n; i++)
			scores[i] = jobs[i].logprob;
		return;
	}
	cf = palloc(sizeof(double) * LLM_CONTENT_FREE_INPUTS * n);
	/* the prior: each label's probability averaged over the content-free inputs, as a log */
	for (int k = 0; k < LLM_CONTENT_FREE_INPUTS; k++)
		LlmPerTokenLogProbs(&cf_jobs[k * n], n, &cf[k * n]);
	LlmPerTokenLogProbs(jobs, n, scores);
	for (int i = 0; i < n; i++)
	{
		for (int k = 0; k < LLM_CONTENT_FREE_INPUTS; k++)
			prior[k] = cf[k * n + i];
		scores[i] -= LlmLogSumExp(prior, LLM_CONTENT_FREE_INPUTS) - log(LLM_CONTENT_FREE_INPUTS);
	}
	/* divided out, renormalised */
	total = LlmLogSumExp(scores, n);
	for (int i = 0; i < n; i++)
		scores[i] -= total;
	pfree(cf);
}
