/*
 * test_score.c
 *		Scoring a continuation (LlmRequest.forced), the engine's part of
 *		llm_score, llm_classify and llm_filter, on stories260K: the forced
 *		tokens' log-probabilities are bit for bit those of the same tokens
 *		generated greedily, whatever else shares the steps; nothing ends a
 *		forced continuation early; bad requests are refused.
 */
#include "engine.h"
#include "test.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static LlmModel *model;

/* An engine of up to max_seqs sequences of 256 tokens (test_engine_new). */
static LlmEngine *
make_engine(int max_seqs)
{
	return test_engine_new(model, max_seqs, 256);
}

/* Queue prompt with n greedy tokens, or the n forced ones when forced is set; logprobs recorded. */
static int64_t
add(LlmEngine *e, const char *prompt, int n, const int32_t *forced, LlmError *err, LlmStatus *st)
{
	LlmRequest	r;
	int64_t		id = -1;
	int			n_ids;
	int32_t    *ids = test_tokenize(model, prompt, &n_ids);

	llm_request_default(&r);
	r.prompt = ids;
	r.n_prompt = n_ids;
	r.max_tokens = n;
	r.logprobs = true;
	r.forced = forced;
	r.n_forced = forced != NULL ? n : 0;
	*st = llm_engine_add(e, &r, &id, err);
	free(ids);
	return id;
}

/* Results polled while looking for another one (valid until their sequence is released). */
static LlmResult stash[16];
static int	n_stash;

/* Drop the stashed results (before their engine is freed or they are released). */
static void
forget_results(void)
{
	n_stash = 0;
}

/* The result of id, copied: its tokens and log-probabilities (n of each); other results stay unread. */
static int
result(LlmEngine *e, int64_t id, int32_t *tokens, float *logprobs, LlmFinishReason *reason)
{
	LlmResult	r;
	int			n = -1;
	bool		found = false;

	for (int i = 0; i < n_stash && !found; i++)
		if (stash[i].id == id)
		{
			r = stash[i];
			stash[i] = stash[--n_stash];
			found = true;
		}
	while (!found && llm_engine_poll(e, &r))
	{
		if (r.id == id)
			found = true;
		else if (n_stash < 16)
			stash[n_stash++] = r;
	}
	if (found)
	{
		n = r.n_generated;
		memcpy(tokens, r.tokens, (size_t) n * sizeof(int32_t));
		memcpy(logprobs, r.logprobs, (size_t) n * sizeof(float));
		*reason = r.reason;
	}
	llm_engine_release(e, id);
	return n;
}

int
main(void)
{
	char		path[1024];
	LlmError	err;
	LlmStatus	st;
	LlmEngine  *e;
	int32_t		greedy[16], got[16], other[16];
	float		lp_greedy[16], lp_got[16], lp_other[16];
	LlmFinishReason reason;
	const char *prompt = "Once upon a time, there was a little girl named Lily. She";
	int64_t		id;
	int			n;

	snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
	if (llm_model_load(path, &model, &err) != LLM_OK)
	{
		fprintf(stderr, "load %s: %s\n", path, err.msg);
		return 1;
	}

	/* greedy generation's tokens and log-probabilities */
	e = make_engine(8);
	id = add(e, prompt, 12, NULL, &err, &st);
	test_run_to_idle(e);
	n = result(e, id, greedy, lp_greedy, &reason);
	TEST_CHECK(n == 12, "greedy: %d tokens", n);

	/* the same tokens forced, alone and beside three other sequences: the same bits */
	for (int crowd = 0; crowd <= 3; crowd += 3)
	{
		int64_t		others[3];

		id = add(e, prompt, 12, greedy, &err, &st);
		TEST_CHECK(st == LLM_OK, "forced add: %s", err.msg);
		for (int k = 0; k < crowd; k++)
			others[k] = add(e, k == 0 ? "The dog" : k == 1 ? "Tom and Sue went to the park and" : "Lily",
							20 + k, NULL, &err, &st);
		test_run_to_idle(e);
		n = result(e, id, got, lp_got, &reason);
		forget_results();
		for (int k = 0; k < crowd; k++)
			llm_engine_release(e, others[k]);
		TEST_CHECK(n == 12 && reason == LLM_FINISH_LENGTH, "forced: %d tokens", n);
		TEST_CHECK(memcmp(got, greedy, sizeof(int32_t) * 12) == 0, "forced tokens are the ones given");
		TEST_CHECK(memcmp(lp_got, lp_greedy, sizeof(float) * 12) == 0,
				   "forced log-probabilities equal the greedy ones bit for bit (%d others)", crowd);
	}

	/*
	 * Through the prefix cache: a long shared prompt scored with two
	 * continuations queued together (the second waits for the first's
	 * blocks), then again on a fresh engine one at a time: the same bits.
	 */
	{
		const char *shared = "Is there a dog?\n\nText: The dog ran to the park. Lily and Tom went to see the big "
			"dog and they played with a red ball all day long.\n\nAnswer with one of: Yes, No.\nAnswer:";
		int32_t		yes[2], no[2];
		float		lp_a[2][16], lp_b[2][16];
		int			n_yes, n_no;
		int32_t    *ids;

		ids = test_tokenize(model, " Yes", &n_yes);	/* BOS first: skip it */
		memcpy(yes, ids + 1, sizeof(int32_t) * (n_yes - 1 < 2 ? n_yes - 1 : 2));
		n_yes = n_yes - 1 < 2 ? n_yes - 1 : 2;
		free(ids);
		ids = test_tokenize(model, " No", &n_no);
		memcpy(no, ids + 1, sizeof(int32_t) * (n_no - 1 < 2 ? n_no - 1 : 2));
		n_no = n_no - 1 < 2 ? n_no - 1 : 2;
		free(ids);

		for (int round = 0; round < 2; round++)
		{
			LlmEngine  *f = make_engine(8);
			int64_t		a, b;

			if (round == 0)
			{
				a = add(f, shared, n_yes, yes, &err, &st);
				b = add(f, shared, n_no, no, &err, &st);
				test_run_to_idle(f);
			}
			else
			{
				b = add(f, shared, n_no, no, &err, &st);
				test_run_to_idle(f);
				a = add(f, shared, n_yes, yes, &err, &st);
				test_run_to_idle(f);
			}
			TEST_CHECK(result(f, a, got, round == 0 ? lp_a[0] : lp_b[0], &reason) == n_yes, "yes scored");
			TEST_CHECK(result(f, b, got, round == 0 ? lp_a[1] : lp_b[1], &reason) == n_no, "no scored");
			forget_results();
			llm_engine_free(f);
		}
		TEST_CHECK(memcmp(lp_a[0], lp_b[0], sizeof(float) * n_yes) == 0 &&
				   memcmp(lp_a[1], lp_b[1], sizeof(float) * n_no) == 0,
				   "a shared prompt scores the same together and one at a time through the cache "
				   "(yes %.9g vs %.9g, no %.9g vs %.9g)", lp_a[0][0], lp_b[0][0], lp_a[1][0], lp_b[1][0]);
	}

	/* another continuation: scored to its end, each step no likelier than the greedy choice */
	for (int i = 0; i < 12; i++)
		other[i] = (greedy[i] + 7 + i) % llm_tokenizer_n_vocab(llm_model_tokenizer(model));
	id = add(e, prompt, 12, other, &err, &st);
	test_run_to_idle(e);
	n = result(e, id, got, lp_got, &reason);
	TEST_CHECK(n == 12, "a forced continuation is never cut short (EOS, stop): %d", n);
	TEST_CHECK(lp_got[0] <= lp_greedy[0], "the first forced token is no likelier than the greedy one");
	for (int i = 0; i < 12; i++)
		lp_other[i] = lp_got[i];
	TEST_CHECK(lp_other[0] < 0, "a log-probability is negative");

	/* refusals: a count that is not max_tokens, a token outside the vocabulary, too long for the context */
	{
		LlmRequest	r;
		int32_t		bad[2] = {1, llm_tokenizer_n_vocab(llm_model_tokenizer(model))};
		int32_t		prompt_ids[1] = {1};
		int32_t    *many = calloc(300, sizeof(int32_t));

		llm_request_default(&r);
		r.prompt = prompt_ids;
		r.n_prompt = 1;
		r.forced = bad;
		r.n_forced = 1;
		r.max_tokens = 2;
		TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_INVALID, "n_forced != max_tokens is refused");
		r.n_forced = r.max_tokens = 2;
		TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_INVALID && strstr(err.msg, "vocabulary") != NULL,
				   "a token outside the vocabulary is refused: %s", err.msg);
		r.forced = many;
		r.n_forced = r.max_tokens = 300;
		TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_LIMIT, "a continuation past the context is refused");
		free(many);
	}
	llm_engine_free(e);
	llm_model_free(model);
	return test_summary("test_score");
}
