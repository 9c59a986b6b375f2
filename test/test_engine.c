/*
 * test_engine.c
 *		The engine end to end on the real stories260K model: greedy output
 *		equals the golden file; batched generation equals one-at-a-time
 *		generation exactly (mixed lengths, sequences joining mid-way,
 *		preemption forced by a tiny KV pool); stop strings, max_tokens,
 *		cancel, seeded sampling; no KV block leaks; a prefaulted KV pool
 *		changes nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "pace.h"
#include "test.h"

#define N_PROMPTS 6

static const char *prompts[N_PROMPTS] = {
	"Once upon a time",
	"Lily and Ben",
	"The cat sat on",
	"One day, a little boy named Tim went to the park with his mom. He saw",
	"The sun",
	"Sue had a red ball. She",
};

static LlmModel *model;

/* Make an engine with the given limits (f32 KV), prefix cache on or off. */
static LlmEngine *
make_engine_prefix(int max_seqs, int max_batch_tokens, size_t kv_bytes, int block_size, bool prefix)
{
	LlmEngineConfig c;

	llm_engine_config_default(&c);
	c.kv_type = LLM_KV_F32;		/* the tests size their pools in f32 blocks */
	c.max_seqs = max_seqs;
	c.max_batch_tokens = max_batch_tokens;
	c.kv_cache_bytes = kv_bytes;
	c.kv_block_size = block_size;
	c.n_ctx = 512;
	c.prefix_cache = prefix;
	return test_engine_with(model, &c);
}

/* Make an engine with the given limits (f32 KV, prefix cache on). */
static LlmEngine *
make_engine(int max_seqs, int max_batch_tokens, size_t kv_bytes, int block_size)
{
	return make_engine_prefix(max_seqs, max_batch_tokens, kv_bytes, block_size, true);
}

/* Step until idle; returns the number of steps. */
static int
run_to_idle(LlmEngine *e)
{
	LlmError	err;
	int			steps = 0;

	while (llm_engine_busy(e))
	{
		LlmStatus	st = llm_engine_step(e, &err);

		TEST_CHECK(st == LLM_OK, "step failed: %s", err.msg);
		if (st != LLM_OK || ++steps > 100000)
			break;
	}
	return steps;
}

/* Add prompt p with n new tokens (greedy). */
static int64_t
add(LlmEngine *e, const char *p, int n)
{
	return test_add(e, model, p, n, 0);
}

/* Poll the result of id (must be finished); copies its text. */
static char *
result_text(LlmEngine *e, int64_t id, LlmResult *out)
{
	LlmResult	r;

	while (llm_engine_poll(e, &r))
		if (r.id == id)
		{
			*out = r;
			return strdup(r.text);
		}
	return NULL;
}

/* The greedy text of each prompt, generated alone. */
static char *reference[N_PROMPTS];

/* Each prompt alone, greedy, 48 tokens. */
static void
test_reference(void)
{
	for (int i = 0; i < N_PROMPTS; i++)
	{
		LlmEngine  *e = make_engine(1, 512, 0, 16);
		int64_t		id = add(e, prompts[i], 48);
		LlmResult	r;

		run_to_idle(e);
		reference[i] = result_text(e, id, &r);
		TEST_CHECK(reference[i] != NULL && r.n_generated > 0, "prompt %d produced nothing", i);
		llm_engine_free(e);
	}
	/* the golden file's first line, prefix-checked (48 of its 64 tokens) */
	TEST_CHECK(strncmp(reference[0], ", there was a little girl named Lily. She loved to play outside in the park.", 70) == 0,
			   "golden mismatch: %s", reference[0]);
}


/* Collect all results (any order) into texts[] by id position. */
static void
collect(LlmEngine *e, const int64_t *ids, char **texts)
{
	LlmResult	r;

	while (llm_engine_poll(e, &r))
		for (int i = 0; i < N_PROMPTS; i++)
			if (r.id == ids[i])
				texts[i] = strdup(r.text);
}

/* Compare collected texts with the references, then release. */
static void
check_collected(LlmEngine *e, const int64_t *ids, char **texts, const char *what)
{
	for (int i = 0; i < N_PROMPTS; i++)
	{
		TEST_CHECK(texts[i] != NULL && strcmp(texts[i], reference[i]) == 0,
				   "%s: prompt %d differs:\n  got  %s\n  want %s", what, i, texts[i] ? texts[i] : "(none)", reference[i]);
		free(texts[i]);
		texts[i] = NULL;
		llm_engine_release(e, ids[i]);
	}
}

/* All prompts at once, with several batch budgets (prompts split in chunks). */
static void
test_batched(void)
{
	int			budgets[] = {512, 7, 1};

	for (int b = 0; b < 3; b++)
	{
		LlmEngine  *e = make_engine(N_PROMPTS, budgets[b], 0, 16);
		int64_t		ids[N_PROMPTS];
		char	   *texts[N_PROMPTS] = {0};
		LlmEngineStats st;
		char		what[64];

		for (int i = 0; i < N_PROMPTS; i++)
			ids[i] = add(e, prompts[i], 48);
		run_to_idle(e);
		collect(e, ids, texts);
		snprintf(what, sizeof(what), "batched, budget %d", budgets[b]);
		check_collected(e, ids, texts, what);
		llm_engine_stats(e, &st);
		TEST_CHECK(st.kv_blocks_used == 0, "%d KV blocks leaked", st.kv_blocks_used);
		llm_engine_free(e);
	}
}

/* All prompts at once in an engine of KV type, pages prefaulted or not; texts (N_PROMPTS) are set. */
static void
run_prefault(LlmKvType type, bool prefault, char **texts)
{
	LlmEngineConfig c;
	LlmEngine  *e = NULL;
	LlmError	err;
	int64_t		ids[N_PROMPTS];

	llm_engine_config_default(&c);
	c.kv_type = type;
	c.kv_prefault = prefault;
	c.max_seqs = N_PROMPTS;
	c.n_ctx = 512;
	if (llm_engine_new(model, &c, &e, &err) != LLM_OK)
	{
		TEST_CHECK(false, "engine: %s", err.msg);
		return;
	}
	for (int i = 0; i < N_PROMPTS; i++)
		ids[i] = add(e, prompts[i], 48);
	run_to_idle(e);
	collect(e, ids, texts);
	llm_engine_free(e);
}

/* A prefaulted KV pool (f32, and int8 with its scales) gives the texts of one faulted in on first use. */
static void
test_kv_prefault(void)
{
	LlmKvType	types[] = {LLM_KV_F32, LLM_KV_I8};

	for (int t = 0; t < 2; t++)
	{
		char	   *plain[N_PROMPTS] = {0};
		char	   *touched[N_PROMPTS] = {0};

		run_prefault(types[t], false, plain);
		run_prefault(types[t], true, touched);
		for (int i = 0; i < N_PROMPTS; i++)
		{
			TEST_CHECK(plain[i] != NULL && touched[i] != NULL && strcmp(plain[i], touched[i]) == 0,
					   "KV type %d, prefaulted: prompt %d differs", (int) types[t], i);
			if (types[t] == LLM_KV_F32)
				TEST_CHECK(touched[i] != NULL && strcmp(touched[i], reference[i]) == 0,
						   "prefaulted f32 KV: prompt %d differs from alone", i);
			free(plain[i]);
			free(touched[i]);
		}
	}
}

/* Sequences joining mid-way, and a pool so small that sequences are preempted. */
static void
test_join_and_preempt(void)
{
	/* block of 4 tokens, pool of 40 blocks: every sequence fits alone, not all together */
	size_t		block_bytes = 2 * 5 * 4 * 32 * sizeof(float);
	LlmEngine  *e = make_engine(N_PROMPTS, 16, 40 * block_bytes, 4);
	int64_t		ids[N_PROMPTS];
	char	   *texts[N_PROMPTS] = {0};
	LlmEngineStats st;
	LlmError	err;

	for (int i = 0; i < N_PROMPTS; i++)
	{
		ids[i] = add(e, prompts[i], 48);
		/* a few steps between arrivals */
		for (int s = 0; s < 5; s++)
			TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
		collect(e, ids, texts);
	}
	run_to_idle(e);
	collect(e, ids, texts);
	llm_engine_stats(e, &st);
	TEST_CHECK(st.preemptions > 0, "the tiny pool should have forced preemption");
	check_collected(e, ids, texts, "joining + preemption");
	llm_engine_stats(e, &st);
	TEST_CHECK(st.kv_blocks_used == 0, "%d KV blocks leaked", st.kv_blocks_used);
	llm_engine_free(e);
}

/* A request that cannot fit the pool alone is refused with a clear error. */
static void
test_too_big(void)
{
	size_t		block_bytes = 2 * 5 * 16 * 32 * sizeof(float);
	LlmEngine  *e = make_engine(2, 64, 2 * block_bytes, 16);
	LlmRequest	r;
	LlmError	err;
	int64_t		id;
	int			n_ids;
	int32_t    *ids = test_tokenize(model, prompts[3], &n_ids);
	int			n_ctx = llm_engine_n_ctx(e);

	/* the context rule add applies (and the worker checks first): a full context only for no new token */
	TEST_CHECK(llm_engine_prompt_fits(e, n_ctx - 1, 1) && llm_engine_prompt_fits(e, n_ctx, 0) &&
			   !llm_engine_prompt_fits(e, n_ctx, 1) && !llm_engine_prompt_fits(e, n_ctx + 1, 0),
			   "llm_engine_prompt_fits is wrong at the context length %d", n_ctx);

	llm_request_default(&r);
	r.prompt = ids;
	r.n_prompt = n_ids;
	r.max_tokens = 100;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_LIMIT && strstr(err.msg, "KV blocks") != NULL,
			   "expected a KV limit error, got %s", err.msg);
	/* prompt longer than the context */
	r.max_tokens = 1;
	r.n_prompt = 600;
	ids = realloc(ids, 600 * sizeof(int32_t));
	for (int i = n_ids; i < 600; i++)
		ids[i] = 5;
	r.prompt = ids;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_LIMIT && strstr(err.msg, "600") != NULL,
			   "expected a context error, got %s", err.msg);
	r.max_tokens = 0;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_LIMIT,
			   "a prompt over the context must be refused even with max_tokens 0");
	/* bad parameters */
	r.max_tokens = 1;
	r.n_prompt = n_ids;
	r.top_p = 1.5f;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_INVALID && strstr(err.msg, "top_p") != NULL,
			   "expected a top_p error, got %s", err.msg);
	r.top_p = 1.0f;
	r.max_tokens = -1;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_INVALID, "negative max_tokens accepted");
	r.max_tokens = 4;
	ids[1] = 100000;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_INVALID, "out-of-vocabulary token accepted");
	free(ids);
	llm_engine_free(e);
}

/* Stop strings cut the text; max_tokens 0 finishes at once; cancel frees blocks. */
static void
test_stop_cancel(void)
{
	LlmEngine  *e = make_engine(4, 64, 0, 16);
	LlmRequest	r;
	LlmResult	res;
	LlmError	err;
	LlmEngineStats st;
	int64_t		a,
				b,
				c;
	int			n_ids;
	int32_t    *ids = test_tokenize(model, prompts[0], &n_ids);
	const char *stops[] = {"named", "Lily", "there"};
	char	   *t;

	llm_request_default(&r);
	r.prompt = ids;
	r.n_prompt = n_ids;
	r.max_tokens = 64;
	r.stop = stops;
	r.n_stop = 3;
	TEST_CHECK(llm_engine_add(e, &r, &a, &err) == LLM_OK, "add: %s", err.msg);
	r.n_stop = 0;
	r.max_tokens = 0;
	TEST_CHECK(llm_engine_add(e, &r, &b, &err) == LLM_OK, "add: %s", err.msg);
	r.max_tokens = 64;
	TEST_CHECK(llm_engine_add(e, &r, &c, &err) == LLM_OK, "add: %s", err.msg);
	TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
	llm_engine_cancel(e, c);
	run_to_idle(e);

	t = result_text(e, a, &res);
	/* the earliest hit wins, whatever its place in the list */
	TEST_CHECK(t != NULL && strcmp(t, ", ") == 0 && res.reason == LLM_FINISH_STOP,
			   "stop string: got \"%s\" (%s)", t ? t : "", llm_finish_reason_name(res.reason));
	free(t);
	llm_engine_release(e, a);
	t = result_text(e, b, &res);
	TEST_CHECK(t != NULL && t[0] == '\0' && res.reason == LLM_FINISH_LENGTH && res.n_generated == 0,
			   "max_tokens 0: got \"%s\"", t ? t : "");
	free(t);
	llm_engine_release(e, b);
	t = result_text(e, c, &res);
	TEST_CHECK(t != NULL && res.reason == LLM_FINISH_CANCELLED, "cancel: %s", llm_finish_reason_name(res.reason));
	free(t);
	llm_engine_release(e, c);
	llm_engine_stats(e, &st);
	TEST_CHECK(st.kv_blocks_used == 0 && st.n_running == 0, "blocks %d, running %d after all finished",
			   st.kv_blocks_used, st.n_running);
	/* unknown ids are ignored */
	llm_engine_cancel(e, 12345);
	llm_engine_release(e, 12345);
	free(ids);
	llm_engine_free(e);
}

/*
 * Pacing's chunk sizes against its own cost model: with a measured rate, a
 * prompt chunk costs at most the step's budget (rate x target), except the
 * minimum first chunk; without a rate or a target it takes everything.
 */
static void
test_pace_chunks(void)
{
	LlmPace		p;
	int			n;

	llm_pace_init(&p, model, 0);
	TEST_CHECK(llm_pace_chunk(&p, 0, 400, true) == 400, "no target: the whole prompt");
	llm_pace_init(&p, model, 10);
	TEST_CHECK(llm_pace_chunk(&p, 0, 400, true) == 400, "no rate yet: the whole prompt");
	/* a rate at which ten tokens at positions 0..9 fill the budget exactly */
	llm_pace_begin(&p, false);
	llm_pace_add(&p, 0, 10, true);
	p.rate = p.prompt_cost / 0.010;
	/* a prompt alone: steps of LLM_PACE_ALONE_S, 25 times the 10 ms target, take more */
	llm_pace_begin(&p, true);
	n = llm_pace_chunk(&p, 0, 400, false);
	TEST_CHECK(n > 100, "alone, a budget of 250 ms: took %d", n);
	llm_pace_begin(&p, false);
	n = llm_pace_chunk(&p, 0, 400, false);
	TEST_CHECK(n == 10, "budget of ten tokens: took %d", n);
	TEST_CHECK(llm_pace_chunk(&p, 0, 400, true) == LLM_PACE_MIN_CHUNK, "first chunk: at least the minimum");
	TEST_CHECK(llm_pace_chunk(&p, 0, 5, true) == 5, "first chunk: not more than wanted");
	/* later positions cost more (they attend to more keys): fewer fit */
	n = llm_pace_chunk(&p, 300, 400, false);
	TEST_CHECK(n >= 1 && n < 10, "budget at position 300: took %d", n);
	/* a step whose decoding tokens already cost the budget takes no more prompt */
	llm_pace_add(&p, 0, 10, true);
	TEST_CHECK(llm_pace_chunk(&p, 0, 400, false) == 0, "budget spent: took a prompt chunk");
}

/*
 * A long prompt beside a decoding sequence, steps paced to 1 ms: the
 * prompt is prefilled over several steps, the decoding sequence gets one
 * token in every one of them (a long prompt never stalls decode), and a
 * cancel of the long prompt between two of its chunks ends it at once,
 * every block back in the pool.
 */
static void
test_paced_prefill(void)
{
	LlmEngineConfig c;
	LlmEngine  *e = NULL;
	LlmError	err;
	LlmEngineStats st,
				prev;
	LlmResult	res;
	char		long_prompt[4096] = "";
	int64_t		dec,
				lng;
	int			prefill_steps = 0;
	bool		stalled = false;
	char	   *t;

	llm_engine_config_default(&c);
	c.kv_type = LLM_KV_F32;
	c.max_seqs = 4;
	c.n_ctx = 512;
	c.step_time_ms = 1;
	TEST_CHECK(llm_engine_new(model, &c, &e, &err) == LLM_OK, "engine: %s", err.msg);
	if (e == NULL)
		return;
	dec = add(e, prompts[0], 300);
	for (int i = 0; i < 8; i++)		/* its prompt, then decoding: the rate is measured */
		TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
	while (strlen(long_prompt) < 1400)
		strcat(long_prompt, "Once upon a time there was a little girl who liked to play in the park. ");
	lng = add(e, long_prompt, 1);
	llm_engine_stats(e, &prev);
	for (int i = 0; i < 400; i++)
	{
		TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
		llm_engine_stats(e, &st);
		if (st.tokens_prefilled == prev.tokens_prefilled)
			break;
		prefill_steps++;
		stalled |= st.tokens_generated != prev.tokens_generated + 1;
		prev = st;
		if (prefill_steps == 2)
			break;
	}
	TEST_CHECK(prefill_steps == 2, "the long prompt was prefilled in %d step(s), not chunked", prefill_steps);
	TEST_CHECK(!stalled, "a decoding sequence got no token in a step that prefilled the long prompt");
	/* cancelled between chunks: the next step runs without it */
	llm_engine_cancel(e, lng);
	TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
	llm_engine_stats(e, &st);
	TEST_CHECK(st.tokens_prefilled == prev.tokens_prefilled && st.tokens_generated == prev.tokens_generated + 1,
			   "after the cancel: %lld prompt tokens and %lld new tokens in a step",
			   (long long) (st.tokens_prefilled - prev.tokens_prefilled),
			   (long long) (st.tokens_generated - prev.tokens_generated));
	t = result_text(e, lng, &res);
	TEST_CHECK(t != NULL && res.reason == LLM_FINISH_CANCELLED, "cancelled prompt: %s",
			   t ? llm_finish_reason_name(res.reason) : "no result");
	free(t);
	llm_engine_release(e, lng);
	llm_engine_cancel(e, dec);
	run_to_idle(e);
	while (llm_engine_poll(e, &res))
		;
	llm_engine_release(e, dec);
	llm_engine_stats(e, &st);
	TEST_CHECK(st.kv_blocks_used == 0 && st.n_running == 0, "blocks %d, running %d after the cancels",
			   st.kv_blocks_used, st.n_running);
	llm_engine_free(e);
}

/* A huge max_tokens stops at the context length, without overflow. */
static void
test_huge_max_tokens(void)
{
	LlmEngine  *e = make_engine(1, 64, 0, 16);
	LlmResult	res;
	int64_t		id = add(e, prompts[0], 2147483647);
	char	   *t;

	run_to_idle(e);
	t = result_text(e, id, &res);
	TEST_CHECK(t != NULL && res.reason == LLM_FINISH_LENGTH && res.n_prompt + res.n_generated == 512,
			   "huge max_tokens: %s after %d + %d tokens", llm_finish_reason_name(res.reason),
			   res.n_prompt, res.n_generated);
	free(t);
	llm_engine_free(e);
}

/* Same seed, same text; sampling differs from greedy. */
static void
test_seeded(void)
{
	char	   *texts[3];

	for (int k = 0; k < 3; k++)
	{
		LlmEngine  *e = make_engine(1, 64, 0, 16);
		LlmRequest	r;
		LlmResult	res;
		LlmError	err;
		int64_t		id;
		int			n_ids;
		int32_t    *ids = test_tokenize(model, prompts[0], &n_ids);

		llm_request_default(&r);
		r.prompt = ids;
		r.n_prompt = n_ids;
		r.max_tokens = 48;
		r.temperature = 1.0f;
		r.top_p = 0.9f;
		r.seed = k < 2 ? 42 : 7;
		TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_OK, "add: %s", err.msg);
		run_to_idle(e);
		texts[k] = result_text(e, id, &res);
		free(ids);
		llm_engine_free(e);
	}
	TEST_CHECK(texts[0] && texts[1] && strcmp(texts[0], texts[1]) == 0, "same seed, different text");
	TEST_CHECK(texts[0] && texts[2] && strcmp(texts[0], texts[2]) != 0, "different seeds, same text");
	TEST_CHECK(texts[0] && strcmp(texts[0], reference[0]) != 0, "temperature 1 gave the greedy text");
	for (int k = 0; k < 3; k++)
		free(texts[k]);
}

/*
 * Prompts sharing a long prefix: with the prefix cache on, later prompts
 * reuse the first one's blocks, and every text equals the text computed
 * without the cache.
 */
static void
test_prefix_cache(void)
{
	const char *shared = "Once upon a time, there was a little girl named Lily. She loved to play outside "
		"in the park with her friends. One day, ";
	char		full[N_PROMPTS][512];
	char	   *want[N_PROMPTS];
	LlmEngine  *off = make_engine_prefix(N_PROMPTS, 64, 0, 8, false);
	LlmEngine  *on = make_engine_prefix(2, 64, 0, 8, true);
	int64_t		ids[N_PROMPTS];
	LlmEngineStats st;
	LlmResult	r;

	for (int i = 0; i < N_PROMPTS; i++)
		snprintf(full[i], sizeof(full[i]), "%s%s", shared, prompts[i]);
	for (int i = 0; i < N_PROMPTS; i++)
		ids[i] = add(off, full[i], 24);
	run_to_idle(off);
	for (int i = 0; i < N_PROMPTS; i++)
		want[i] = result_text(off, ids[i], &r);
	/* with the cache: the first alone, then the rest together (two at a time) */
	ids[0] = add(on, full[0], 24);
	run_to_idle(on);
	for (int i = 1; i < N_PROMPTS; i++)
		ids[i] = add(on, full[i], 24);
	run_to_idle(on);
	llm_engine_stats(on, &st);
	TEST_CHECK(st.prefix_hit_tokens >= (N_PROMPTS - 1) * 24, "only %lld prompt tokens came from the cache",
			   (long long) st.prefix_hit_tokens);
	TEST_CHECK(st.kv_blocks_used == 0 && st.kv_blocks_cached > 0, "idle pool: %d used, %d cached",
			   st.kv_blocks_used, st.kv_blocks_cached);
	for (int i = 0; i < N_PROMPTS; i++)
	{
		char	   *got = result_text(on, ids[i], &r);

		TEST_CHECK(got && want[i] && strcmp(got, want[i]) == 0, "prefix cache changed prompt %d:\n  got  %s\n  want %s",
				   i, got ? got : "(none)", want[i] ? want[i] : "(none)");
		free(got);
		free(want[i]);
	}
	llm_engine_free(off);
	llm_engine_free(on);
}

/* The id of the first sequence to finish while stepping e; -1 if none does. */
static int64_t
first_to_finish(LlmEngine *e)
{
	LlmError	err;
	LlmResult	r;

	while (llm_engine_busy(e))
	{
		if (llm_engine_step(e, &err) != LLM_OK)
			return -1;
		if (llm_engine_poll(e, &r))
			return r.id;
	}
	return -1;
}

/*
 * Admission prefers a cached prompt prefix: with one sequence at a time, a
 * prompt that shares a cached instruction goes before one queued earlier
 * that shares nothing; and a sequence passed over
 * often enough goes first whatever its prefix, so none starves.
 */
static void
test_prefix_first(void)
{
	const char *instruction = "Once upon a time, there was a little girl named Lily. She loved to play outside "
		"in the park with her friends. One day, ";
	char		a[512];
	char		b[512];
	LlmEngine  *e = make_engine_prefix(1, 64, 0, 8, true);
	int64_t		id_other;
	int64_t		id_sharer;
	int64_t		first;
	LlmResult	r;

	snprintf(a, sizeof(a), "%s%s", instruction, prompts[0]);
	snprintf(b, sizeof(b), "%s%s", instruction, prompts[1]);
	add(e, a, 4);
	run_to_idle(e);
	while (llm_engine_poll(e, &r))
		llm_engine_release(e, r.id);

	id_other = add(e, prompts[2], 4);
	id_sharer = add(e, b, 4);
	first = first_to_finish(e);
	TEST_CHECK(first == id_sharer, "the prompt with a cached prefix should run first (finished first: %lld, "
			   "sharer %lld, other %lld)", (long long) first, (long long) id_sharer, (long long) id_other);
	run_to_idle(e);
	while (llm_engine_poll(e, &r))
		llm_engine_release(e, r.id);

	/* a stream of sharers cannot hold back the other prompt for long */
	id_other = add(e, prompts[2], 2);
	for (int i = 0; i < 20; i++)
		add(e, b, 2);
	{
		LlmError	err;
		int			done_before = 0;
		bool		other_done = false;

		while (llm_engine_busy(e) && !other_done)
		{
			TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
			while (llm_engine_poll(e, &r))
			{
				if (r.id == id_other)
					other_done = true;
				else
					done_before++;
				llm_engine_release(e, r.id);
			}
		}
		TEST_CHECK(other_done && done_before <= 10, "the prompt without a cached prefix waited for %d others",
				   done_before);
	}
	llm_engine_free(e);
}

/* Random add / step / cancel / release sequences never leak or double-free blocks. */
static void
test_random_ops(void)
{
	size_t		block_bytes = 2 * 5 * 4 * 32 * sizeof(float);
	LlmEngine  *e = make_engine(5, 24, 30 * block_bytes, 4);
	uint64_t	x = 12345;
	int64_t		live[64];
	int			n_live = 0;
	LlmEngineStats st;
	LlmError	err;

	for (int it = 0; it < 400; it++)
	{
		int			op;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		op = (int) (x % 10);
		if (op < 3 && n_live < 64)
			live[n_live++] = add(e, prompts[x % N_PROMPTS], (int) ((x >> 8) % 20));
		else if (op == 3 && n_live > 0)
			llm_engine_cancel(e, live[(x >> 8) % (uint64_t) n_live]);
		else if (op == 4 && n_live > 0)
		{
			int			k = (int) ((x >> 8) % (uint64_t) n_live);

			llm_engine_release(e, live[k]);
			live[k] = live[--n_live];
		}
		else
			TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
		llm_engine_stats(e, &st);
		TEST_CHECK(st.kv_blocks_used >= 0 && st.kv_blocks_used <= st.kv_blocks_total, "blocks used %d of %d",
				   st.kv_blocks_used, st.kv_blocks_total);
	}
	run_to_idle(e);
	llm_engine_stats(e, &st);
	TEST_CHECK(st.kv_blocks_used == 0, "%d KV blocks still used when idle", st.kv_blocks_used);
	for (int i = 0; i < n_live; i++)
		llm_engine_release(e, live[i]);
	llm_engine_free(e);
}

int
main(void)
{
	char		path[1024];
	LlmError	err;

	snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
	if (llm_model_load(path, &model, &err) != LLM_OK)
	{
		fprintf(stderr, "could not load %s: %s\n", path, err.msg);
		return 1;
	}
	test_reference();
	test_batched();
	test_kv_prefault();
	test_join_and_preempt();
	test_too_big();
	test_stop_cancel();
	test_pace_chunks();
	test_paced_prefill();
	test_seeded();
	test_huge_max_tokens();
	test_prefix_cache();
	test_prefix_first();
	test_random_ops();
	for (int i = 0; i < N_PROMPTS; i++)
		free(reference[i]);
	llm_model_free(model);
	return test_summary("engine");
}
