/*
 * test_score.c
 *		Scoring a continuation (LlmRequest.forced), the engine's part of
 *		llm_score, llm_classify and llm_filter, on stories260K: the forced
 *		tokens' log-probabilities are bit for bit those of the same tokens
 *		generated greedily, whatever else shares the steps; a continuation
 *		is scored in one pass after its prompt (or in as many as the step's
 *		logits rows need), and a cancelled one reports nothing; labels sharing a
 *		prompt compute it once and score as they do alone; nothing ends a
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

/* The ids of text without the BOS the tokenizer puts first: at most max into ids; returns how many. */
static int
continuation_ids(const char *text, int32_t *ids, int max)
{
	int			n;
	int32_t    *all = test_tokenize(model, text, &n);

	n = n - 1 < max ? n - 1 : max;
	memcpy(ids, all + 1, sizeof(int32_t) * n);
	free(all);
	return n;
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
	 * One pass: on a fresh engine the prompt takes a step, and the
	 * continuation as many more as its 12 logits rows need at max_seqs rows
	 * a step (2 at 8 sequences, 6 at 2, where they were 12 steps); the same
	 * bits either way.
	 */
	for (int max_seqs = 8; max_seqs >= 2; max_seqs -= 6)
	{
		LlmEngine  *f = make_engine(max_seqs);
		LlmEngineStats stats;

		id = add(f, prompt, 12, greedy, &err, &st);
		test_run_to_idle(f);
		llm_engine_stats(f, &stats);
		n = result(f, id, got, lp_got, &reason);
		TEST_CHECK(n == 12 && memcmp(lp_got, lp_greedy, sizeof(float) * 12) == 0,
				   "%d sequences: the one-pass score equals the greedy log-probabilities bit for bit", max_seqs);
		TEST_CHECK(stats.steps == 1 + (12 + max_seqs - 1) / max_seqs, "%d sequences: scored in %lld steps, want %d",
				   max_seqs, (long long) stats.steps, 1 + (12 + max_seqs - 1) / max_seqs);
		TEST_CHECK(stats.tokens_generated == 12, "12 scored tokens counted as generated, got %lld",
				   (long long) stats.tokens_generated);

		/* cancelled after its prompt's step: no tokens, no log-probabilities */
		id = add(f, prompt, 12, greedy, &err, &st);
		TEST_CHECK(llm_engine_step(f, &err) == LLM_OK, "a step");
		llm_engine_cancel(f, id);
		n = result(f, id, got, lp_got, &reason);
		TEST_CHECK(n == 0 && reason == LLM_FINISH_CANCELLED, "a cancelled score reports %d tokens", n);
		forget_results();
		llm_engine_free(f);
	}

	/*
	 * Labels sharing a prompt, as llm_classify() queues them: a long prompt
	 * scored with four continuations queued together (the others wait for
	 * the first's blocks, then take the full ones from the prefix cache and
	 * copy the partial last one), then again on a fresh engine one at a
	 * time: the same bits, in each KV type, and the prompt computed once.
	 */
	{
		const char *shared = "Is there a dog?\n\nText: The dog ran to the park. Lily and Tom went to see the big "
			"dog and they played with a red ball all day long.\n\nAnswer with one of: Yes, No.\nAnswer:";
		const char *labels[4] = {" Yes", " No", " Maybe", " The dog"};
		const LlmKvType kv_types[3] = {LLM_KV_F32, LLM_KV_F16, LLM_KV_I8};
		int32_t		label_ids[4][2];
		int			n_label[4];
		int			n_prompt;

		free(test_tokenize(model, shared, &n_prompt));
		for (int k = 0; k < 4; k++)
			n_label[k] = continuation_ids(labels[k], label_ids[k], 2);

		for (int t = 0; t < 3; t++)
		{
			float		lp[2][4][16];
			LlmEngineStats stats[2];

			for (int round = 0; round < 2; round++)
			{
				LlmEngine  *f = test_engine_new_kv(model, 8, 256, kv_types[t]);
				int64_t		ids[4];

				for (int k = 0; k < 4; k++)
				{
					ids[k] = add(f, shared, n_label[k], label_ids[k], &err, &st);
					if (round == 1)
						test_run_to_idle(f);
				}
				test_run_to_idle(f);
				llm_engine_stats(f, &stats[round]);
				for (int k = 0; k < 4; k++)
					TEST_CHECK(result(f, ids[k], got, lp[round][k], &reason) == n_label[k], "label %d scored", k);
				forget_results();
				llm_engine_free(f);
			}
			for (int k = 0; k < 4; k++)
				TEST_CHECK(memcmp(lp[0][k], lp[1][k], sizeof(float) * n_label[k]) == 0,
						   "KV type %d, label %d: the same bits together and one at a time (%.9g vs %.9g)",
						   t, k, lp[0][k][0], lp[1][k][0]);
			TEST_CHECK(stats[0].prefix_hit_tokens == 3 * (n_prompt - 1),
					   "KV type %d: the other labels take their whole prompt but its last token from the first "
					   "(%lld cached tokens, want %d)", t, (long long) stats[0].prefix_hit_tokens, 3 * (n_prompt - 1));
		}
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
