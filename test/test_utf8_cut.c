/*
 * test_utf8_cut.c
 *		A text that max_tokens cuts ends at a character's end: the helper on
 *		every kind of cut-off sequence, then SmolLM2 (byte-level BPE, which
 *		splits CJK characters over tokens) writing Japanese for every
 *		max_tokens from 1 to 40, all in one batch.
 */
#include "test.h"

#include "utf8.h"

/* Whether s[0..n) is well-formed UTF-8. */
static bool
valid_utf8(const char *s, size_t n)
{
	for (size_t i = 0; i < n;)
	{
		size_t		len = llm_utf8_len((const uint8_t *) s + i, n - i);

		if (len == 1 && (unsigned char) s[i] >= 0x80)
			return false;
		i += len;
	}
	return true;
}

/* llm_utf8_whole_len on s (n bytes) is want. */
static void
check_whole(const char *s, size_t n, size_t want)
{
	size_t		got = llm_utf8_whole_len((const uint8_t *) s, n);

	TEST_CHECK(got == want, "whole length of %zu bytes ending in %02x: %zu, want %zu",
			   n, n > 0 ? (unsigned char) s[n - 1] : 0, got, want);
}

/* The helper: each prefix of 1- to 4-byte characters, and bytes that are no character. */
static void
test_whole_len(void)
{
	const char *text = "a\xC3\xA9\xE3\x81\x82\xF0\x9F\x98\x80z";	/* a é あ 😀 z */
	const size_t ends[] = {0, 1, 3, 6, 10, 11};	/* where characters end */

	for (size_t n = 0; n <= strlen(text); n++)
	{
		size_t		want = 0;

		for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
			if (ends[i] <= n)
				want = ends[i];
		check_whole(text, n, want);
	}
	/* not cut characters but bytes that are none: left as they are */
	check_whole("ab\x80", 3, 3);	/* a stray continuation byte */
	check_whole("ab\xC0", 3, 3);	/* a lead byte of overlong forms only */
	check_whole("ab\xFF", 3, 3);
	check_whole("\x80\x80\x80\x80", 4, 4);
}

/* SmolLM2 writing Japanese: every max_tokens from 1 to 40 gives whole characters. */
static void
test_model_cut(const char *path)
{
	enum
	{
		N = 40
	};
	LlmModel   *m;
	LlmEngine  *e;
	LlmError	err;
	int64_t		ids[N];
	char	   *texts[N] = {0};
	int			n_prompt;
	int32_t    *prompt;
	int			trimmed = 0;

	if (llm_model_load(path, &m, &err) != LLM_OK)
	{
		printf("SKIP: %s: %s\n", path, err.msg);
		return;
	}
	e = test_engine_new(m, N, 256);
	prompt = test_tokenize(m, "日本の昔話：むかしむかし、ある山のふもとに、おじいさんとおばあさんが", &n_prompt);
	for (int i = 0; i < N; i++)
	{
		LlmRequest	r;

		llm_request_default(&r);
		r.prompt = prompt;
		r.n_prompt = n_prompt;
		r.max_tokens = i + 1;
		TEST_CHECK(llm_engine_add(e, &r, &ids[i], &err) == LLM_OK, "add: %s", err.msg);
	}
	while (llm_engine_busy(e))
		if (llm_engine_step(e, &err) != LLM_OK)
		{
			TEST_CHECK(false, "step: %s", err.msg);
			break;
		}
	for (LlmResult res; llm_engine_poll(e, &res);)
		for (int i = 0; i < N; i++)
			if (res.id == ids[i])
				texts[i] = strndup(res.text, res.text_len);
	for (int i = 0; i < N; i++)
	{
		TEST_CHECK(texts[i] != NULL, "no result for max_tokens %d", i + 1);
		if (texts[i] == NULL || texts[N - 1] == NULL)
			continue;
		TEST_CHECK(valid_utf8(texts[i], strlen(texts[i])), "max_tokens %d ends in a cut character", i + 1);
		TEST_CHECK(strncmp(texts[i], texts[N - 1], strlen(texts[i])) == 0,
				   "max_tokens %d is not a prefix of the longest text", i + 1);
		/* a token that only began a character added nothing */
		if (i > 0 && texts[i - 1] != NULL && strcmp(texts[i], texts[i - 1]) == 0)
			trimmed++;
	}
	/* the case is met: some token ended inside a character */
	TEST_CHECK(trimmed > 0, "no max_tokens cut a character (the test does not test)");
	printf("SmolLM2: %d of %d cuts fell inside a character; \"%s\"\n", trimmed, N, texts[N - 1]);
	for (int i = 0; i < N; i++)
		free(texts[i]);
	free(prompt);
	llm_engine_free(e);
	llm_model_free(m);
}

int
main(void)
{
	const char *smollm2 = getenv("LLM_TEST_SMOLLM2");

	test_whole_len();
	test_model_cut(smollm2 != NULL ? smollm2 : ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf");
	return test_summary("utf8_cut");
}
