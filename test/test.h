/*
 * test.h
 *		A minimal harness for the engine's C tests.
 *
 * Each test program calls TEST_CHECK for every assertion and ends with
 * `return test_summary("name");`, which prints "name: N passed, N failed"
 * and returns the exit status.  The first few failures are printed with
 * file and line; a failing check never stops the program.
 */
#ifndef LLM_TEST_H
#define LLM_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "tokenizer.h"

static int	test_n_passed;
static int	test_n_failed;

/* Count one check; print it when it fails. */
#define TEST_CHECK(cond, ...) \
	do { \
		if (cond) \
			test_n_passed++; \
		else \
		{ \
			test_n_failed++; \
			if (test_n_failed <= 50) \
			{ \
				fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
				fprintf(stderr, __VA_ARGS__); \
				fputc('\n', stderr); \
			} \
		} \
	} while (0)

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull	/* where test_rng_state starts (a program may start it again) */

static uint64_t test_rng_state = TEST_RNG_SEED;

/* The next pseudo-random 64 bits (splitmix64; fixed seed, so runs repeat). */
static inline uint64_t
test_rng_next(void)
{
	uint64_t	z = (test_rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A pseudo-random float uniform in [lo, hi). */
static inline float
test_rng_uniform(float lo, float hi)
{
	return lo + (hi - lo) * (float) ((test_rng_next() >> 40) * (1.0 / 16777216.0));
}

/* Print the closing line of one test program; returns its exit status. */
static inline int
test_summary(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, test_n_passed, test_n_failed);
	return test_n_failed == 0 ? 0 : 1;
}

/* The shared/ folder beside the checkout (LLM_SHARED overrides). */
static inline const char *
test_shared_dir(void)
{
	const char *d = getenv("LLM_SHARED");

	return d != NULL ? d : "../shared";
}

/* Tokenize s (BOS first) with model m's tokenizer into a new array of *n ids; exits on failure. */
static inline int32_t *
test_tokenize(const LlmModel *m, const char *s, int *n)
{
	int32_t    *ids = NULL;
	LlmError	err;

	if (llm_tokenize(llm_model_tokenizer(m), s, strlen(s), true, false, &ids, n, &err) != LLM_OK)
	{
		fprintf(stderr, "tokenize: %s\n", err.msg);
		exit(1);
	}
	return ids;
}

/* An engine for m configured by c; exits on failure. */
static inline LlmEngine *
test_engine_with(LlmModel *m, const LlmEngineConfig *c)
{
	LlmEngine  *e = NULL;
	LlmError	err;

	if (llm_engine_new(m, c, &e, &err) != LLM_OK)
	{
		fprintf(stderr, "engine: %s\n", err.msg);
		exit(1);
	}
	return e;
}

/* An engine for m of up to max_seqs sequences and n_ctx tokens each, KV of kv_type, prefix cache on; exits on failure. */
static inline LlmEngine *
test_engine_new_kv(LlmModel *m, int max_seqs, int n_ctx, LlmKvType kv_type)
{
	LlmEngineConfig c;

	llm_engine_config_default(&c);
	c.kv_type = kv_type;
	c.max_seqs = max_seqs;
	c.n_ctx = n_ctx;
	return test_engine_with(m, &c);
}

/* Add prompt p to e as a greedy request of n new tokens in share group group; its id (-1 and a failed check when refused). */
static inline int64_t
test_add(LlmEngine *e, const LlmModel *m, const char *p, int n, uint32_t group)
{
	LlmRequest	r;
	LlmError	err;
	int64_t		id = -1;
	int			n_ids;
	int32_t    *ids = test_tokenize(m, p, &n_ids);

	llm_request_default(&r);
	r.prompt = ids;
	r.n_prompt = n_ids;
	r.max_tokens = n;
	r.share_group = group;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_OK, "add: %s", err.msg);
	free(ids);
	return id;
}

/* test_engine_new_kv with f32 KV. */
static inline LlmEngine *
test_engine_new(LlmModel *m, int max_seqs, int n_ctx)
{
	return test_engine_new_kv(m, max_seqs, n_ctx, LLM_KV_F32);
}

/* Step e until it is idle (a failed step counts as a failed check). */
static inline void
test_run_to_idle(LlmEngine *e)
{
	LlmError	err;

	for (int steps = 0; llm_engine_busy(e) && steps < 100000; steps++)
		if (llm_engine_step(e, &err) != LLM_OK)
		{
			TEST_CHECK(false, "step: %s", err.msg);
			return;
		}
}

#endif							/* LLM_TEST_H */
