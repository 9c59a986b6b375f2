/*
 * worker_tokenize.c
 *		The worker's tokenizer thread: requests' prompts (and scored
 *		continuations) are tokenized off the serving loop, so a long prompt
 *		never stalls the engine's steps for everyone else.
 *
 * The serving loop copies a claimed request's input out of shared memory
 * into a job (malloc'd, so the DSA chunk is freed at once) and queues it
 * (a short one it tokenizes at once, which costs no more than a step's
 * bookkeeping and cannot wait behind a long one);
 * the thread tokenizes it with the engine's functions alone and puts it on
 * the done list; the loop takes it from there, checks that the slot still
 * holds the same request (its backend may have cancelled it meanwhile, and
 * the slot been reused), and puts it in the engine.
 *
 * Protocol: the thread never calls PostgreSQL (it runs engine code and
 * pthread calls only, allocates with malloc, and has every signal
 * blocked).  The two lists and the busy flag are under mutex; the thread
 * waits on cond for work.  The model it reads is the worker's
 * LlmWorkerModel: the loop frees or replaces it only after
 * LlmTokenizerIdle() (nothing queued, nothing being tokenized), and takes
 * no new claims while a reload waits, so the thread never sees a model go.
 * The loop polls the done list every pass, and sleeps at most 1 ms while
 * jobs are out.
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>

#include "llm.h"

static pthread_t tok_thread;
static bool tok_started = false;
static pthread_mutex_t tok_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tok_cond = PTHREAD_COND_INITIALIZER;
static LlmTokenizeJob *tok_queue_head = NULL;	/* oldest first */
static LlmTokenizeJob *tok_queue_tail = NULL;
static LlmTokenizeJob *tok_done_head = NULL;
static LlmTokenizeJob *tok_done_tail = NULL;
static int	tok_outstanding = 0;	/* jobs submitted and not yet taken back */
static bool tok_stop = false;

/* Inputs up to this size are tokenized in the serving loop (milliseconds at most). */
#define LLM_TOKENIZE_INLINE_BYTES 16384

/* Append job to a list. */
static void
LlmJobListPush(LlmTokenizeJob **head, LlmTokenizeJob **tail, LlmTokenizeJob *job)
{
	job->next = NULL;
	if (*tail != NULL)
		(*tail)->next = job;
	else
		*head = job;
	*tail = job;
}

/*
 * Tokenize one job: the prompt as a chat or plain, or a conversation (with
 * its tools) through the chat template; then a scored continuation (engine
 * calls only).
 */
static void
LlmTokenizeOne(LlmTokenizeJob *job)
{
	const char *b = job->bytes;
	const char *prompt = b + job->req.system_len;
	const char *tools = prompt + job->req.prompt_len;

	llm_error_clear(&job->err);
	job->stage = LLM_TOKENIZE_PROMPT;
	if (job->req.params.messages)
	{
		LlmChatRequest chat = {
			.messages = prompt,
			.messages_len = job->req.prompt_len,
			.tools = job->req.has_tools ? tools : NULL,
			.tools_len = job->req.tools_len,
			.add_generation_prompt = true,
			.enable_thinking = job->req.params.enable_thinking,
		};

		job->status = llm_chat_tokenize_messages(LlmWorkerModel, &chat, &job->tokens, &job->n_tokens, &job->err);
	}
	else
		job->status = llm_chat_tokenize(LlmWorkerModel, job->req.has_system ? b : NULL, job->req.system_len,
										prompt, job->req.prompt_len, job->req.params.chat,
										&job->tokens, &job->n_tokens, &job->err);
	if (job->status != LLM_OK || !job->req.params.score)
		return;
	job->stage = LLM_TOKENIZE_CONTINUATION;
	job->status = llm_continuation_tokenize(LlmWorkerModel, tools + job->req.tools_len,
											job->req.continuation_len, &job->forced, &job->n_forced, &job->err);
}

/* The thread: take queued jobs, oldest first, until told to stop. */
static void *
LlmTokenizerMain(void *arg)
{
	(void) arg;
	pthread_mutex_lock(&tok_mutex);
	for (;;)
	{
		LlmTokenizeJob *job;

		while (tok_queue_head == NULL && !tok_stop)
			pthread_cond_wait(&tok_cond, &tok_mutex);
		if (tok_stop)
			break;
		job = tok_queue_head;
		tok_queue_head = job->next;
		if (tok_queue_head == NULL)
			tok_queue_tail = NULL;
		pthread_mutex_unlock(&tok_mutex);

		LlmTokenizeOne(job);

		pthread_mutex_lock(&tok_mutex);
		LlmJobListPush(&tok_done_head, &tok_done_tail, job);
	}
	pthread_mutex_unlock(&tok_mutex);
	return NULL;
}

/* Start the thread, with every signal blocked in it (once; false when it cannot start). */
static bool
LlmTokenizerStart(void)
{
	sigset_t	all,
				old;
	int			rc;

	if (tok_started)
		return true;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&tok_thread, NULL, LlmTokenizerMain, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return false;
	tok_started = true;
	return true;
}

/*
 * Queue a claimed request for tokenizing; the job takes bytes (malloc'd).
 * An input of at most LLM_TOKENIZE_INLINE_BYTES is tokenized here, at once
 * (a few milliseconds at most, and so never queued behind a huge one), as
 * is every input when the thread cannot start.
 */
void
LlmTokenizerSubmit(LlmTokenizeJob *job)
{
	tok_outstanding++;
	if (job->req.input_len <= LLM_TOKENIZE_INLINE_BYTES || !LlmTokenizerStart())
	{
		LlmTokenizeOne(job);
		pthread_mutex_lock(&tok_mutex);
		LlmJobListPush(&tok_done_head, &tok_done_tail, job);
		pthread_mutex_unlock(&tok_mutex);
		return;
	}
	pthread_mutex_lock(&tok_mutex);
	LlmJobListPush(&tok_queue_head, &tok_queue_tail, job);
	pthread_cond_signal(&tok_cond);
	pthread_mutex_unlock(&tok_mutex);
}

/* The next tokenized job, or NULL; the caller frees it with LlmTokenizeJobFree(). */
LlmTokenizeJob *
LlmTokenizerTake(void)
{
	LlmTokenizeJob *job;

	pthread_mutex_lock(&tok_mutex);
	job = tok_done_head;
	if (job != NULL)
	{
		tok_done_head = job->next;
		if (tok_done_head == NULL)
			tok_done_tail = NULL;
		tok_outstanding--;
	}
	pthread_mutex_unlock(&tok_mutex);
	return job;
}

/* Whether every submitted job has been taken back (so the model may change). */
bool
LlmTokenizerIdle(void)
{
	return tok_outstanding == 0;
}

/* Free a job and what it holds. */
void
LlmTokenizeJobFree(LlmTokenizeJob *job)
{
	free(job->bytes);
	free(job->tokens);
	free(job->forced);
	free(job);
}

/*
 * Stop the thread at process exit, after the job it is on: the model must
 * not be freed under it.  Jobs still queued are dropped with the process.
 */
void
LlmTokenizerStop(void)
{
	if (!tok_started)
		return;
	pthread_mutex_lock(&tok_mutex);
	tok_stop = true;
	pthread_cond_signal(&tok_cond);
	pthread_mutex_unlock(&tok_mutex);
	pthread_join(tok_thread, NULL);
	tok_started = false;
}
