/*
 * test_answer_cache.c
 *		The answer cache (answer_cache.c): keys, hits, eviction, and the
 *		file format's checks against every single-byte corruption.
 */
#include "test.h"

/* A request of 4 prompt tokens, greedy, with one stop string. */
static void
base_request(LlmRequest *r, const int32_t *prompt, const char *const *stop)
{
	llm_request_default(r);
	r->prompt = prompt;
	r->n_prompt = 4;
	r->max_tokens = 16;
	r->stop = stop;
	r->n_stop = 1;
}

/* The key of r in partition (the test fails on error). */
static uint8_t *
key_of(const LlmRequest *r, uint64_t partition, size_t *len)
{
	uint8_t    *key = NULL;
	LlmError	err;

	TEST_CHECK(llm_answer_key(r, partition, &key, len, &err) == LLM_OK, "%s", err.msg);
	return key;
}

/* Whether r and s have the same key in partition 0. */
static bool
same_key(const LlmRequest *r, const LlmRequest *s)
{
	size_t		a_len,
				b_len;
	uint8_t    *a = key_of(r, 0, &a_len);
	uint8_t    *b = key_of(s, 0, &b_len);
	bool		same = a_len == b_len && memcmp(a, b, a_len) == 0;

	free(a);
	free(b);
	return same;
}

/* Every parameter that changes an answer changes the key; placement fields and a greedy seed do not. */
static void
test_keys(void)
{
	int32_t		prompt[4] = {1, 2, 3, 4};
	int32_t		other[4] = {1, 2, 3, 5};
	int32_t		forced[2] = {7, 8};
	const char *stop[1] = {"\n"};
	const char *stop2[1] = {"."};
	LlmRequest	r,
				s;
	size_t		l1,
				l2;
	uint8_t    *k1,
			   *k2;

	base_request(&r, prompt, stop);
	s = r;
	TEST_CHECK(same_key(&r, &s), "same request");
	s.seed = 99;
	TEST_CHECK(same_key(&r, &s), "greedy: seed ignored");
	s.cache_partition = 5;
	s.share_group = 3;
	s.share_weight = 2;
	s.draft_group = 11;
	TEST_CHECK(same_key(&r, &s), "placement fields ignored");
#define DIFFERS(field, value) \
	do { s = r; s.field = value; TEST_CHECK(!same_key(&r, &s), "%s changes the key", #field); } while (0)
	DIFFERS(prompt, other);
	DIFFERS(n_prompt, 3);
	DIFFERS(max_tokens, 17);
	DIFFERS(temperature, 0.5f);
	DIFFERS(top_k, 5);
	DIFFERS(top_p, 0.5f);
	DIFFERS(min_p, 0.1f);
	DIFFERS(repeat_penalty, 1.1f);
	DIFFERS(stop, stop2);
	DIFFERS(n_stop, 0);
	DIFFERS(ignore_eos, true);
	DIFFERS(logprobs, true);
	DIFFERS(grammar, LLM_GRAMMAR_CHOICES);
#undef DIFFERS
	s = r;
	s.forced = forced;
	s.n_forced = 2;
	TEST_CHECK(!same_key(&r, &s), "forced tokens change the key");
	r.temperature = s.temperature = 0.8f;
	s = r;
	s.seed = r.seed + 1;
	TEST_CHECK(!same_key(&r, &s), "sampling: the seed changes the key");
	s = r;
	s.grammar = LLM_GRAMMAR_CHOICES;
	s.grammar_text = "a\0b";
	s.grammar_len = 4;
	r.grammar = LLM_GRAMMAR_CHOICES;
	r.grammar_text = "a\0c";
	r.grammar_len = 4;
	TEST_CHECK(!same_key(&r, &s), "grammar text changes the key");

	k1 = key_of(&r, 1, &l1);
	k2 = key_of(&r, 2, &l2);
	TEST_CHECK(l1 == l2 && memcmp(k1, k2, l1) != 0, "partition changes the key");
	free(k1);
	free(k2);
}

/* A key of its own for entry i. */
static size_t
test_key(int i, uint8_t *key)
{
	memset(key, 0, 32);
	memcpy(key, &i, sizeof(i));
	key[31] = 0x5a;
	return 32;
}

/* Entries with logprobs: the first 20 (all of one size), and odd ones. */
#define HAS_LP(i) ((i) < 20 || ((i) & 1) != 0)

/* Put n answers "answer i". */
static void
fill(LlmAnswerCache *c, int from, int n)
{
	for (int i = from; i < from + n; i++)
	{
		uint8_t		key[32];
		char		text[32];
		float		lp[3] = {-0.5f * i, -1.0f, -2.25f};
		LlmAnswer	a = {LLM_FINISH_STOP, 10 + i, 3, text, 0, HAS_LP(i) ? lp : NULL};

		a.text_len = (size_t) snprintf(text, sizeof(text), "answer %04d", i);
		TEST_CHECK(llm_answer_cache_put(c, key, test_key(i, key), &a), "put %d", i);
	}
}

/* Whether entry i is there, exactly as put. */
static bool
has(LlmAnswerCache *c, int i)
{
	uint8_t		key[32];
	char		text[32];
	LlmAnswer	a;
	size_t		len = test_key(i, key);

	snprintf(text, sizeof(text), "answer %04d", i);
	if (!llm_answer_cache_get(c, key, len, &a))
		return false;
	TEST_CHECK(a.reason == LLM_FINISH_STOP && a.n_prompt == 10 + i && a.n_generated == 3, "entry %d fields", i);
	TEST_CHECK(a.text_len == strlen(text) && memcmp(a.text, text, a.text_len) == 0, "entry %d text", i);
	TEST_CHECK((HAS_LP(i)) == (a.logprobs != NULL), "entry %d logprobs", i);
	if (a.logprobs)
		TEST_CHECK(a.logprobs[0] == -0.5f * i && a.logprobs[2] == -2.25f, "entry %d logprob values", i);
	return true;
}

/* Hits, misses, replacement and least-recently-used eviction under the limit. */
static void
test_store(void)
{
	LlmAnswerCache *c = llm_answer_cache_new(1 << 20);
	size_t		per;

	fill(c, 0, 1);
	per = llm_answer_cache_bytes(c);
	llm_answer_cache_clear(c);
	TEST_CHECK(llm_answer_cache_count(c) == 0 && llm_answer_cache_bytes(c) == 0, "cleared");

	llm_answer_cache_set_limit(c, per * 10 + per / 2);	/* room for 10 */
	fill(c, 0, 10);
	TEST_CHECK(llm_answer_cache_count(c) == 10, "10 kept, %zu", llm_answer_cache_count(c));
	TEST_CHECK(has(c, 0), "0 there");	/* 0 now the most recently used */
	fill(c, 10, 2);				/* evicts 1 and 2 */
	TEST_CHECK(has(c, 0) && !has(c, 1) && !has(c, 2) && has(c, 3) && has(c, 11), "LRU eviction");
	TEST_CHECK(!has(c, 99), "miss");
	fill(c, 3, 1);				/* replace */
	TEST_CHECK(llm_answer_cache_count(c) == 10 && has(c, 3), "replaced, not doubled");
	llm_answer_cache_set_limit(c, per * 3);
	TEST_CHECK(llm_answer_cache_count(c) <= 3, "shrunk to %zu", llm_answer_cache_count(c));
	llm_answer_cache_set_limit(c, 16);
	fill(c, 50, 0);
	{
		uint8_t		key[32];
		LlmAnswer	a = {LLM_FINISH_STOP, 1, 0, "", 0, NULL};

		TEST_CHECK(!llm_answer_cache_put(c, key, test_key(1, key), &a), "larger than the limit refused");
	}
	llm_answer_cache_free(c);

	/* many entries: the table grows, every one is found */
	c = llm_answer_cache_new(64 << 20);
	fill(c, 0, 5000);
	for (int i = 0; i < 5000; i += 7)
		TEST_CHECK(has(c, i), "entry %d of 5000", i);
	llm_answer_cache_free(c);
}

/* A file round trip, another model's file, and every single-byte corruption refused whole. */
static void
test_file(void)
{
	LlmAnswerCache *c = llm_answer_cache_new(1 << 20);
	LlmAnswerCache *d;
	uint8_t    *buf;
	size_t		len;
	LlmError	err;
	int			refused = 0;

	fill(c, 0, 6);
	TEST_CHECK(has(c, 2), "2 there");	/* the most recent now */
	TEST_CHECK(llm_answer_cache_dirty(c), "dirty");
	TEST_CHECK(llm_answer_cache_serialize(c, 42, &buf, &len, &err) == LLM_OK, "%s", err.msg);
	TEST_CHECK(!llm_answer_cache_dirty(c), "clean after serialize");

	d = llm_answer_cache_new(1 << 20);
	TEST_CHECK(llm_answer_cache_load(d, 42, buf, len, &err) == LLM_OK, "%s", err.msg);
	for (int i = 0; i < 6; i++)
		TEST_CHECK(has(d, i), "loaded %d", i);
	llm_answer_cache_free(d);

	/* recency survives: a small limit keeps the most recently used (2) */
	d = llm_answer_cache_new(llm_answer_cache_bytes(c) / 6 + 8);
	TEST_CHECK(llm_answer_cache_load(d, 42, buf, len, &err) == LLM_OK, "%s", err.msg);
	TEST_CHECK(llm_answer_cache_count(d) == 1 && has(d, 2), "most recent kept");
	llm_answer_cache_free(d);

	d = llm_answer_cache_new(1 << 20);
	TEST_CHECK(llm_answer_cache_load(d, 43, buf, len, &err) == LLM_ERR_NOT_FOUND, "another model");
	TEST_CHECK(llm_answer_cache_count(d) == 0, "nothing taken");
	for (size_t cut = 0; cut < len; cut += 13)
		TEST_CHECK(llm_answer_cache_load(d, 42, buf, cut, &err) != LLM_OK, "cut at %zu", cut);
	for (size_t i = 0; i < len; i++)
		for (int bit = 0; bit < 8; bit += 3)
		{
			buf[i] ^= (uint8_t) (1 << bit);
			if (llm_answer_cache_load(d, 42, buf, len, &err) != LLM_OK)
				refused++;
			buf[i] ^= (uint8_t) (1 << bit);
		}
	TEST_CHECK(refused == (int) len * 3, "every flipped bit refused: %d of %zu", refused, len * 3);
	TEST_CHECK(llm_answer_cache_count(d) == 0, "nothing taken from a damaged file");
	free(buf);
	llm_answer_cache_free(d);

	/* an empty cache round trips too */
	llm_answer_cache_clear(c);
	TEST_CHECK(llm_answer_cache_serialize(c, 7, &buf, &len, &err) == LLM_OK, "%s", err.msg);
	TEST_CHECK(llm_answer_cache_load(c, 7, buf, len, &err) == LLM_OK && llm_answer_cache_count(c) == 0,
			   "empty file");
	free(buf);
	llm_answer_cache_free(c);
}

/* The hash: stable, and sensitive to every byte and to the length. */
static void
test_hash(void)
{
	uint8_t		b[40] = {0};
	uint64_t	h0 = llm_hash64(b, sizeof(b), 0);

	TEST_CHECK(h0 == llm_hash64(b, sizeof(b), 0), "stable");
	TEST_CHECK(h0 != llm_hash64(b, sizeof(b) - 1, 0), "length");
	TEST_CHECK(h0 != llm_hash64(b, sizeof(b), 1), "seed");
	for (size_t i = 0; i < sizeof(b); i++)
	{
		b[i] = 1;
		TEST_CHECK(llm_hash64(b, sizeof(b), 0) != h0, "byte %zu", i);
		b[i] = 0;
	}
}

int
main(void)
{
	test_hash();
	test_keys();
	test_store();
	test_file();
	return test_summary("answer_cache");
}
