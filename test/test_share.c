/*
 * test_share.c
 *		Fair shares among groups of sequences (share.h) on the real
 *		stories260K model: the virtual times of share.c; a short prompt of
 *		a second group is fed within two steps while one group has long
 *		prompts waiting for the step's budget; when the KV pool runs dry,
 *		the group holding the most gives way, not the newcomer; and every
 *		answer is the one it gets alone.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "share.h"
#include "test.h"

static LlmModel *model;

/* The virtual times: charged per weight, a newcomer enters at the least, an absent group is forgotten. */
static void
test_virtual_times(void)
{
	LlmShares	s = {0};
	int			a,
				b,
				c;

	llm_shares_begin(&s);
	a = llm_shares_enter(&s, 10);
	TEST_CHECK(a == 0 && s.groups[a].vtime == 0, "the first group enters at 0");
	llm_shares_charge(&s, a, 2, 100);
	TEST_CHECK(s.groups[a].vtime == 50, "100 tokens at weight 2 are 50, got %g", s.groups[a].vtime);
	b = llm_shares_enter(&s, 20);
	TEST_CHECK(b == 1 && s.groups[b].vtime == 50, "a newcomer enters at the least time (50), got %g", s.groups[b].vtime);
	llm_shares_charge(&s, b, 0, 30);
	TEST_CHECK(s.groups[b].vtime == 80, "weight 0 counts as 1: 80, got %g", s.groups[b].vtime);
	TEST_CHECK(llm_shares_enter(&s, 10) == a, "a present group keeps its index");
	llm_shares_end(&s);
	TEST_CHECK(s.n == 2, "both groups stay while present, %d", s.n);

	/* a step where only group 20 has a prompt: 10 is forgotten, and comes back at 20's time */
	llm_shares_begin(&s);
	b = llm_shares_enter(&s, 20);
	llm_shares_end(&s);
	TEST_CHECK(s.n == 1 && s.groups[0].id == 20, "an absent group is forgotten");
	llm_shares_begin(&s);
	c = llm_shares_enter(&s, 10);
	TEST_CHECK(s.groups[c].vtime == 80, "a returning group has no credit: 80, got %g", s.groups[c].vtime);
	llm_shares_free(&s);
}

/* An engine: f32 KV of kv_blocks blocks of 16 (0: default pool), pace off (each step takes budget tokens). */
static LlmEngine *
make_engine(int max_seqs, int budget, int kv_blocks)
{
	LlmEngineConfig c;

	llm_engine_config_default(&c);
	c.kv_type = LLM_KV_F32;
	c.max_seqs = max_seqs;
	c.max_batch_tokens = budget;
	c.kv_cache_bytes = (size_t) kv_blocks * 2 * 5 * 16 * 32 * sizeof(float);
	c.kv_block_size = 16;
	c.n_ctx = 1024;
	c.step_time_ms = 0;
	c.prefix_cache = false;
	return test_engine_with(model, &c);
}

/* Add prompt p of group, n new tokens (greedy). */
static int64_t
add(LlmEngine *e, const char *p, int n, uint32_t group)
{
	return test_add(e, model, p, n, group);
}

/* Step once, keeping the texts of finished sequences in texts[id]; whether id want finished in it. */
static bool
step(LlmEngine *e, char **texts, int64_t want)
{
	LlmError	err;
	LlmResult	r;
	bool		done = false;

	TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
	while (llm_engine_poll(e, &r))
	{
		texts[r.id] = strdup(r.text);
		done |= r.id == want;
		llm_engine_release(e, r.id);
	}
	return done;
}

/* The text of prompt p alone (n greedy tokens). */
static char *
alone(const char *p, int n)
{
	LlmEngine  *e = make_engine(1, 64, 0);
	char	   *texts[4] = {0};
	int64_t		id = add(e, p, n, 0);

	while (!step(e, texts, id))
		;
	llm_engine_free(e);
	return texts[id];
}

/* A long prompt: the story told k times (about 60 tokens each). */
static char *
long_prompt(int k, int variant)
{
	const char *story = "Once upon a time there was a little girl named Lily. She liked to play in the park "
		"with her friend Tom. One day they found a big red ball. ";
	char	   *p = malloc(strlen(story) * k + 32);

	snprintf(p, 32, "%d. ", variant);
	for (int i = 0; i < k; i++)
		strcat(p, story);
	return p;
}

/* Group 1's eight prompts of ~600 tokens wait for 64-token steps; group 2's short one is fed at once. */
static void
test_prefill_share(void)
{
	LlmEngine  *e = make_engine(16, 64, 0);
	char	   *texts[64] = {0};
	char	   *prompts[8];
	int64_t		ids[8];
	char	   *expect = alone("The cat sat on", 4);
	int64_t		newcomer;
	int			steps = 0;

	for (int i = 0; i < 8; i++)
		ids[i] = add(e, prompts[i] = long_prompt(10, i), 1, 1);
	step(e, texts, -1);
	step(e, texts, -1);
	newcomer = add(e, "The cat sat on", 4, 2);
	while (!step(e, texts, newcomer) && ++steps < 200)
		;
	/* its prompt in one of the next two steps, then 3 more tokens; group 1 needs ~75 steps of prompt */
	TEST_CHECK(steps <= 5, "the newcomer of another group took %d steps", steps + 1);
	TEST_CHECK(texts[newcomer] && strcmp(texts[newcomer], expect) == 0, "the newcomer's text differs from alone");
	while (llm_engine_busy(e))
		step(e, texts, -1);
	for (int i = 0; i < 8; i++)
	{
		char	   *a = alone(prompts[i], 1);

		TEST_CHECK(texts[ids[i]] && strcmp(texts[ids[i]], a) == 0, "group 1's prompt %d differs from alone", i);
		free(a);
		free(prompts[i]);
	}
	for (int i = 0; i < 64; i++)
		free(texts[i]);
	free(expect);
	llm_engine_free(e);
}

/* Group 1 fills a 48-block pool with long generations; group 2's request takes from group 1, and finishes. */
static void
test_preempt_share(void)
{
	LlmEngine  *e = make_engine(16, 256, 48);
	char	   *texts[64] = {0};
	char	   *expect = alone("Lily and Ben", 8);
	char	   *ref[6];
	int64_t		ids[6];
	const char *starts[6] = {"Once upon a time", "The sun", "Sue had a red ball. She", "Tom went to", "A big dog",
	"The little bird"};
	int64_t		newcomer;
	int			steps = 0;
	LlmEngineStats st;

	for (int i = 0; i < 6; i++)
	{
		ref[i] = alone(starts[i], 200);
		ids[i] = add(e, starts[i], 200, 1);
	}
	/* until the pool is full: 6 sequences of ~16 blocks want 96 of 48 */
	for (int i = 0; i < 130; i++)
		step(e, texts, -1);
	llm_engine_stats(e, &st);
	TEST_CHECK(st.preemptions > 0, "group 1 alone should already preempt its own (%lld)", (long long) st.preemptions);
	newcomer = add(e, "Lily and Ben", 8, 2);
	while (!step(e, texts, newcomer) && ++steps < 1000)
		;
	TEST_CHECK(steps <= 12, "the newcomer of another group took %d steps beside a full pool", steps + 1);
	TEST_CHECK(texts[newcomer] && strcmp(texts[newcomer], expect) == 0, "the newcomer's text differs from alone");
	while (llm_engine_busy(e))
		step(e, texts, -1);
	for (int i = 0; i < 6; i++)
	{
		TEST_CHECK(texts[ids[i]] && strcmp(texts[ids[i]], ref[i]) == 0, "group 1's sequence %d differs from alone", i);
		free(ref[i]);
	}
	for (int i = 0; i < 64; i++)
		free(texts[i]);
	free(expect);
	llm_engine_free(e);
}

int
main(void)
{
	char		path[1024];
	LlmError	err;

	test_virtual_times();
	snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
	if (llm_model_load(path, &model, &err) != LLM_OK)
	{
		fprintf(stderr, "could not load %s: %s\n", path, err.msg);
		return 1;
	}
	test_prefill_share();
	test_preempt_share();
	llm_model_free(model);
	return test_summary("share");
}
