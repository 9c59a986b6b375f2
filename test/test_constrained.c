/*
 * test_constrained.c
 *		Constrained decoding with real models (stories260K always; SmolLM2
 *		and Gemma 3 when tools/fetch-model.sh has fetched them):
 *
 *   - every token mask equals the scalar reference, which feeds each
 *     token's bytes to the recognizer one by one (the trie walk and the
 *     automaton are only a faster way to the same bits), also when the
 *     automaton is rebuilt at every step;
 *   - outputs parse as JSON and are one of the choices;
 *   - a request gives the same tokens alone and in a batch with others,
 *     and the same through the greedy shortcut and the masked sampler;
 *   - max_tokens too small is an error, never a cut output; bad requests
 *     are refused.
 *
 * test/json_schema_test.py checks the outputs against the schemas with a
 * real JSON Schema validator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constraint.h"
#include "json.h"
#include "json_schema.h"
#include "test.h"

/* Schemas the tests run (each compiles). */
static const char *const schemas[] = {
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\"},"
	"\"happy\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\",\"happy\"]}",
	"{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"minItems\":1,\"maxItems\":4}",
	"{\"type\":\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":8},"
	"\"maxItems\":3},\"score\":{\"type\":\"number\"},\"note\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"tags\"]}",
	"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"object\",\"properties\":{\"x\":{\"const\":1}},\"required\":[\"x\"]}]}",
	"true",
	/* members in any order, each at most once, nested */
	"{\"type\":\"object\",\"properties\":{\"product\":{\"type\":\"string\",\"maxLength\":30},\"rating\":{\"type\":\"integer\"},"
	"\"tags\":{\"properties\":{\"a\":{\"type\":\"boolean\"},\"ab\":{\"type\":\"null\"}},\"required\":[\"ab\"]}},"
	"\"required\":[\"product\"]}",
	/* integer ranges: small, negative, wide and one-sided */
	"{\"type\":\"object\",\"properties\":{\"rating\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5},"
	"\"t\":{\"type\":\"integer\",\"minimum\":-40,\"exclusiveMaximum\":-7},\"n\":{\"type\":\"integer\","
	"\"minimum\":-1000000,\"maximum\":1000000000},\"k\":{\"type\":\"integer\",\"minimum\":3}},\"required\":[\"rating\"]}",
	NULL
};

static const char *const prompts[] = {
	"Once upon a time", "Lily had a dog", "The answer is", "{\"name\": \"Tom\"", NULL
};

/* The scalar reference of a mask: each token's bytes fed to the recognizer from state st. */
static void
reference_mask(const LlmGrammar *g, const LlmTokenizer *tok, const LlmGrammarState *st, uint64_t *mask)
{
	int			n_vocab = llm_tokenizer_n_vocab(tok);
	LlmGrammarState a,
				b;

	llm_grammar_state_init(&a);
	llm_grammar_state_init(&b);
	memset(mask, 0, (size_t) (n_vocab + 63) / 64 * sizeof(uint64_t));
	for (int32_t t = 0; t < n_vocab; t++)
	{
		size_t		len = 0;
		const char *p = llm_token_piece(tok, t, &len);
		bool		ok;

		if (llm_tokenizer_is_eog(tok, t))
			ok = llm_grammar_accepting(st);
		else if (p == NULL || len == 0)
			ok = false;
		else
		{
			ok = llm_grammar_state_copy(&a, st);
			for (size_t i = 0; ok && i < len; i++)
			{
				LlmGrammarState x;

				ok = llm_grammar_advance(g, &a, (uint8_t) p[i], &b);
				x = a;
				a = b;
				b = x;
			}
		}
		if (ok)
			llm_mask_allow(mask, t);
	}
	llm_grammar_state_free(&a);
	llm_grammar_state_free(&b);
}

/*
 * Follow a pseudo-random path of allowed tokens through schema for up to
 * n_steps tokens, comparing each mask with the reference; with a budget of
 * 1 byte the automaton is dropped before every mask.
 */
static void
check_masks(const LlmModel *m, const char *schema, int n_steps, size_t budget)
{
	const LlmTokenizer *tok = llm_model_tokenizer(m);
	int			n_vocab = llm_tokenizer_n_vocab(tok);
	int			words = (n_vocab + 63) / 64;
	LlmConstraintCache *cache;
	LlmConstraint *c;
	LlmConstraintCursor cur;
	LlmGrammar *g;
	LlmError	err;
	uint64_t   *ref = malloc((size_t) words * sizeof(uint64_t));
	int			mismatches = 0;

	TEST_CHECK(llm_constraint_cache_new(tok, &cache, &err) == LLM_OK, "cache: %s", err.msg);
	llm_constraint_cache_set_budget(cache, budget);
	TEST_CHECK(llm_constraint_get(cache, LLM_GRAMMAR_JSON_SCHEMA, schema, strlen(schema), &c, &err) == LLM_OK,
			   "compile %s: %s", schema, err.msg);
	TEST_CHECK(llm_json_schema_compile(schema, strlen(schema), &g, &err) == LLM_OK, "compile: %s", err.msg);
	TEST_CHECK(llm_constraint_cursor_init(c, &cur, &err) == LLM_OK, "cursor: %s", err.msg);
	for (int step = 0; step < n_steps && !llm_constraint_complete(&cur); step++)
	{
		const uint64_t *mask;
		int			n_allowed = 0;
		int32_t		pick = -1;
		int			k;

		TEST_CHECK(llm_constraint_mask(c, &cur, &mask, &err) == LLM_OK, "mask: %s", err.msg);
		reference_mask(g, tok, &cur.state, ref);
		if (memcmp(mask, ref, (size_t) words * sizeof(uint64_t)) != 0)
			mismatches++;
		for (int t = 0; t < n_vocab; t++)
			n_allowed += llm_mask_allows(mask, t);
		TEST_CHECK(n_allowed > 0, "step %d of %s allows no token", step, schema);
		if (n_allowed == 0)
			break;
		/* a pseudo-random allowed token that is not end-of-generation */
		k = (int) (test_rng_next() % (uint64_t) n_allowed);
		for (int t = 0; t < n_vocab && pick < 0; t++)
			if (llm_mask_allows(mask, t) && k-- == 0)
				pick = t;
		if (llm_tokenizer_is_eog(tok, pick))
			break;
		TEST_CHECK(llm_constraint_advance(c, &cur, pick), "advance over an allowed token %d", pick);
	}
	TEST_CHECK(mismatches == 0, "%d masks differ from the reference for %s (budget %zu)", mismatches, schema, budget);
	llm_constraint_cursor_free(&cur);
	llm_constraint_put(cache, c);
	llm_grammar_free(g);
	llm_constraint_cache_free(cache);
	free(ref);
}

/* One request's outcome, copied from its result. */
typedef struct Outcome
{
	LlmFinishReason reason;
	LlmStatus	status;
	char	   *text;
	int			n_tokens;
	int32_t		tokens[512];
} Outcome;

/* Queue prompt constrained by (kind, text, len) on e; -1 when refused (*st says why). */
static int64_t
add_constrained(LlmEngine *e, const LlmModel *m, const char *prompt, LlmGrammarKind kind, const char *text,
				size_t len, int max_tokens, float temperature, uint64_t seed, LlmStatus *st)
{
	LlmRequest	r;
	LlmError	err;
	int64_t		id = -1;
	int			n_ids;
	int32_t    *ids = test_tokenize(m, prompt, &n_ids);

	llm_request_default(&r);
	r.prompt = ids;
	r.n_prompt = n_ids;
	r.max_tokens = max_tokens;
	r.temperature = temperature;
	r.seed = seed;
	r.grammar = kind;
	r.grammar_text = text;
	r.grammar_len = len;
	*st = llm_engine_add(e, &r, &id, &err);
	free(ids);
	return *st == LLM_OK ? id : -1;
}

/* Poll every result of e into out[i] for the request of id ids[i], releasing each. */
static void
collect(LlmEngine *e, const int64_t *ids, Outcome *out, int n_out)
{
	LlmResult	r;

	while (llm_engine_poll(e, &r))
	{
		int			i = 0;

		while (i < n_out && ids[i] != r.id)
			i++;
		if (i < n_out)
		{
			Outcome    *o = &out[i];

			o->reason = r.reason;
			o->status = r.status;
			o->text = strdup(r.text);
			o->n_tokens = r.n_generated < 512 ? r.n_generated : 512;
			memcpy(o->tokens, r.tokens, (size_t) o->n_tokens * sizeof(int32_t));
		}
		llm_engine_release(e, r.id);
	}
}

/* Whether text parses as one JSON value. */
static bool
parses(const char *text)
{
	LlmJson    *v;

	if (llm_json_parse(text, strlen(text), &v, NULL) != LLM_OK)
		return false;
	llm_json_free(v);
	return true;
}

/* Generations for every schema and prompt, greedy and sampled: alone, then all in one batch. */
static void
check_generations(LlmModel *m, const char *name)
{
	enum
	{
		N_MAX = 64
	};
	Outcome    *alone = calloc(N_MAX, sizeof(Outcome));
	Outcome    *batch = calloc(N_MAX, sizeof(Outcome));
	int64_t		ids[N_MAX];
	int			n = 0;
	LlmEngine  *e;
	LlmStatus	st;
	int			n_valid = 0;

	/* alone: one engine per request */
	for (int s = 0; schemas[s] != NULL; s++)
		for (int p = 0; prompts[p] != NULL; p++)
			for (int temp = 0; temp < 2 && n < N_MAX; temp++, n++)
			{
				e = test_engine_new(m, 1, 512);
				ids[0] = add_constrained(e, m, prompts[p], LLM_GRAMMAR_JSON_SCHEMA, schemas[s], strlen(schemas[s]),
										 200, temp ? 1.0f : 0.0f, 1000 + (uint64_t) n, &st);
				TEST_CHECK(st == LLM_OK, "%s: add failed", name);
				test_run_to_idle(e);
				collect(e, ids, &alone[n], 1);
				llm_engine_free(e);
			}
	/* together: every request in one engine, 16 at a time */
	e = test_engine_new(m, 16, 512);
	n = 0;
	for (int s = 0; schemas[s] != NULL; s++)
		for (int p = 0; prompts[p] != NULL; p++)
			for (int temp = 0; temp < 2 && n < N_MAX; temp++, n++)
				ids[n] = add_constrained(e, m, prompts[p], LLM_GRAMMAR_JSON_SCHEMA, schemas[s], strlen(schemas[s]),
										 200, temp ? 1.0f : 0.0f, 1000 + (uint64_t) n, &st);
	test_run_to_idle(e);
	collect(e, ids, batch, n);
	llm_engine_free(e);

	for (int i = 0; i < n; i++)
	{
		TEST_CHECK(alone[i].text != NULL && batch[i].text != NULL, "%s request %d finished", name, i);
		if (alone[i].text == NULL || batch[i].text == NULL)
			continue;
		TEST_CHECK(alone[i].reason == batch[i].reason && alone[i].n_tokens == batch[i].n_tokens &&
				   memcmp(alone[i].tokens, batch[i].tokens, (size_t) alone[i].n_tokens * sizeof(int32_t)) == 0,
				   "%s request %d: the same tokens alone and in a batch (%s | %s)", name, i, alone[i].text, batch[i].text);
		if (alone[i].reason == LLM_FINISH_ERROR)
			TEST_CHECK(alone[i].status == LLM_ERR_LIMIT, "%s request %d fails only by its limit", name, i);
		else
		{
			TEST_CHECK(parses(alone[i].text), "%s request %d parses: %s", name, i, alone[i].text);
			n_valid++;
		}
		free(alone[i].text);
		free(batch[i].text);
	}
	printf("%s: %d of %d constrained outputs complete within 200 tokens\n", name, n_valid, n);
	TEST_CHECK(n_valid >= n / 2, "%s: most outputs complete", name);
	free(alone);
	free(batch);
}

/* Choices, the limit errors and the refused combinations on stories260K. */
static void
check_requests(LlmModel *m)
{
	static const char choices[] = "yes\0no\0maybe so\0";
	LlmEngine  *e = test_engine_new(m, 4, 256);
	Outcome		out[4];
	int64_t		rid[4];
	LlmStatus	st;
	LlmRequest	r;
	LlmError	err;
	int64_t		id;
	int32_t		forced[1] = {5};
	const char *stop[1] = {"x"};
	int			n_ids;
	int32_t    *ids = test_tokenize(m, "Once upon a time", &n_ids);

	memset(out, 0, sizeof(out));
	rid[0] = add_constrained(e, m, "Once upon a time", LLM_GRAMMAR_CHOICES, choices, sizeof(choices) - 1, 16, 0, 0, &st);
	rid[1] = add_constrained(e, m, "Lily", LLM_GRAMMAR_CHOICES, choices, sizeof(choices) - 1, 16, 1.5f, 7, &st);
	rid[2] = add_constrained(e, m, "Once upon a time", LLM_GRAMMAR_JSON_SCHEMA, schemas[0], strlen(schemas[0]), 3, 0, 0, &st);
	rid[3] = add_constrained(e, m, "Once upon a time", LLM_GRAMMAR_JSON_SCHEMA, schemas[0], strlen(schemas[0]), 0, 0, 0, &st);
	test_run_to_idle(e);
	collect(e, rid, out, 4);
	for (int i = 0; i < 2; i++)
		TEST_CHECK(out[i].text != NULL && (strcmp(out[i].text, "yes") == 0 || strcmp(out[i].text, "no") == 0 ||
										   strcmp(out[i].text, "maybe so") == 0),
				   "choice output %d is a choice: %s", i, out[i].text ? out[i].text : "(none)");
	TEST_CHECK(out[2].reason == LLM_FINISH_ERROR && out[2].status == LLM_ERR_LIMIT, "3 tokens cannot hold the object");
	TEST_CHECK(out[3].reason == LLM_FINISH_ERROR && out[3].status == LLM_ERR_LIMIT, "max_tokens 0 cannot hold it");
	for (int i = 0; i < 4; i++)
		free(out[i].text);

	{
		const char *bad = "{\"type\":\"string\",\"format\":\"date\"}";

		add_constrained(e, m, "x", LLM_GRAMMAR_JSON_SCHEMA, bad, strlen(bad), 8, 0, 0, &st);
	}
	TEST_CHECK(st == LLM_ERR_UNSUPPORTED, "an unsupported schema is refused by add");
	add_constrained(e, m, "x", LLM_GRAMMAR_CHOICES, "a\0\0", 3, 8, 0, 0, &st);
	TEST_CHECK(st == LLM_ERR_INVALID, "an empty choice is refused");
	llm_request_default(&r);
	r.prompt = ids;
	r.n_prompt = n_ids;
	r.max_tokens = 1;
	r.grammar = LLM_GRAMMAR_CHOICES;
	r.grammar_text = choices;
	r.grammar_len = sizeof(choices) - 1;
	r.forced = forced;
	r.n_forced = 1;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_INVALID, "a grammar with forced tokens is refused");
	r.forced = NULL;
	r.n_forced = 0;
	r.stop = stop;
	r.n_stop = 1;
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_ERR_INVALID, "a grammar with stop strings is refused");
	free(ids);
	llm_engine_free(e);
}

/*
 * 1,000 choices and an enum of 5,000 values (issue 37: past 256 they once
 * failed to start): greedy and sampled, each output one of them; and the
 * enum's masks against the reference.
 */
static void
check_large_literals(LlmModel *m, const char *name)
{
	enum
	{
		N_CHOICES = 1000,
		N_ENUM = 5000
	};
	char	   *choices = malloc(N_CHOICES * 16);
	char	   *schema = malloc(N_ENUM * 16 + 128);
	size_t		len = 0,
				at;
	LlmEngine  *e = test_engine_new(m, 4, 256);
	Outcome		out[4];
	int64_t		rid[4];
	LlmStatus	st;

	for (int i = 0; i < N_CHOICES; i++)
		len += (size_t) sprintf(choices + len, "choice %d", i) + 1;
	at = (size_t) sprintf(schema, "{\"type\":\"object\",\"properties\":{\"place\":{\"enum\":[");
	for (int i = 0; i < N_ENUM; i++)
		at += (size_t) sprintf(schema + at, "%s\"c%d\"", i ? "," : "", i);
	sprintf(schema + at, "]}},\"required\":[\"place\"]}");

	memset(out, 0, sizeof(out));
	for (int i = 0; i < 2; i++)
	{
		rid[i] = add_constrained(e, m, "Once upon a time", LLM_GRAMMAR_CHOICES, choices, len, 16, i ? 1.0f : 0,
								 (uint64_t) i, &st);
		TEST_CHECK(st == LLM_OK, "%s: 1000 choices are queued", name);
		rid[2 + i] = add_constrained(e, m, "Lily lived in", LLM_GRAMMAR_JSON_SCHEMA, schema, strlen(schema), 64,
									 i ? 1.0f : 0, (uint64_t) i, &st);
		TEST_CHECK(st == LLM_OK, "%s: an enum of 5000 is queued", name);
	}
	test_run_to_idle(e);
	collect(e, rid, out, 4);
	for (int i = 0; i < 2; i++)
	{
		int			k = -1;
		char		tail;

		TEST_CHECK(out[i].reason == LLM_FINISH_STOP && out[i].text != NULL &&
				   sscanf(out[i].text, "choice %d%c", &k, &tail) == 1 && k >= 0 && k < N_CHOICES,
				   "%s: output %d is one of 1000 choices: %s", name, i, out[i].text ? out[i].text : "(none)");
		k = -1;
		TEST_CHECK(out[2 + i].reason == LLM_FINISH_STOP && out[2 + i].text != NULL && parses(out[2 + i].text) &&
				   strstr(out[2 + i].text, "\"c") != NULL &&
				   sscanf(strstr(out[2 + i].text, "\"c"), "\"c%d\"", &k) == 1 && k >= 0 && k < N_ENUM,
				   "%s: output %d has one of 5000 values: %s", name, i, out[2 + i].text ? out[2 + i].text : "(none)");
	}
	for (int i = 0; i < 4; i++)
		free(out[i].text);
	llm_engine_free(e);
	check_masks(m, schema, 12, LLM_CONSTRAINT_BUDGET_BYTES);
	free(choices);
	free(schema);
}

/* Syllables of the place names of check_enum_in_object: UTF-8, spaces, a quote, a backslash. */
static const char *const place_syllables[] = {
	"ber", "lin", "m\xc3\xbcn", "chen", "ham", "burg", "par", "is", "lon", "don", "ro", "me", "ma", "drid",
	"vi", "en", "na", "S\xc3\xa3o ", "New ", "San ", "\"q\" ", "a\\b"
};

#define N_PLACE_SYLLABLES ((int) (sizeof(place_syllables) / sizeof(place_syllables[0])))

/* Place name i: two syllables for the first 22 * 22, then three (so some are prefixes of others). */
static void
place_name(int i, char *out)
{
	int			digits[3] = {i / (N_PLACE_SYLLABLES * N_PLACE_SYLLABLES) % N_PLACE_SYLLABLES,
		i / N_PLACE_SYLLABLES % N_PLACE_SYLLABLES, i % N_PLACE_SYLLABLES};

	out[0] = '\0';
	for (int d = i < N_PLACE_SYLLABLES * N_PLACE_SYLLABLES ? 1 : 0; d < 3; d++)
		strcat(out, place_syllables[digits[d]]);
}

/* Whether v is a string that is place_name(i) for some i < n. */
static bool
is_place(const LlmJson *v, int n)
{
	char		place[64];

	if (v == NULL || v->type != LLM_JSON_STRING)
		return false;
	for (int i = 0; i < n; i++)
	{
		place_name(i, place);
		if (strlen(place) == v->len && memcmp(place, v->str, v->len) == 0)
			return true;
	}
	return false;
}

/*
 * An enum of 5,000 place names in the middle of an object, between a string
 * and an integer range, and again as an array's items: UTF-8, spaces,
 * quotes and backslashes (escaped in the output), names that are prefixes
 * of others.  Greedy and sampled, each output that completes parses and its
 * values are places; the masks against the reference along a random walk.
 * (Issue 37 had such an enum reported to fail in the worker: what failed
 * was llm_extract's prompt, which held the schema's whole text.)
 */
static void
check_enum_in_object(LlmModel *m, const char *name, int max_tokens)
{
	enum
	{
		N_PLACES = 5000,
		N_RUNS = 4
	};
	char	   *list = malloc(N_PLACES * 48);
	char	   *schema = malloc(2 * N_PLACES * 48 + 512);
	char		place[64];
	size_t		at = 0;
	LlmEngine  *e = test_engine_new(m, N_RUNS, 512);
	Outcome		out[N_RUNS];
	int64_t		rid[N_RUNS];
	LlmStatus	st;
	int			n_complete = 0;

	for (int i = 0; i < N_PLACES; i++)
	{
		place_name(i, place);
		if (i > 0)
			list[at++] = ',';
		list[at++] = '"';
		for (const char *c = place; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				list[at++] = '\\';
			list[at++] = *c;
		}
		list[at++] = '"';
	}
	list[at] = '\0';
	sprintf(schema, "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
			"\"city\":{\"enum\":[%s]},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
			"\"visited\":{\"type\":\"array\",\"items\":{\"enum\":[%s]},\"maxItems\":2}},"
			"\"required\":[\"name\",\"city\",\"age\",\"visited\"]}", list, list);

	memset(out, 0, sizeof(out));
	for (int i = 0; i < N_RUNS; i++)
	{
		rid[i] = add_constrained(e, m, i % 2 ? "Anna lives in Berlin." : "Once upon a time", LLM_GRAMMAR_JSON_SCHEMA,
								 schema, strlen(schema), max_tokens, i < 2 ? 0 : 1.0f, (uint64_t) i, &st);
		TEST_CHECK(st == LLM_OK, "%s: an enum of 5000 places in an object is queued", name);
	}
	test_run_to_idle(e);
	collect(e, rid, out, N_RUNS);
	for (int i = 0; i < N_RUNS; i++)
	{
		LlmJson    *v = NULL;
		const LlmJson *visited;
		bool		places;

		TEST_CHECK(out[i].text != NULL, "%s: enum in an object, request %d finished", name, i);
		if (out[i].text == NULL)
			continue;
		if (out[i].reason == LLM_FINISH_ERROR)
		{
			/* only a small model's long name or number may run past max_tokens, never the grammar */
			TEST_CHECK(out[i].status == LLM_ERR_LIMIT && strstr(out[i].text, "\"name\"") != NULL,
					   "%s: enum in an object, request %d fails only by max_tokens: %s", name, i, out[i].text);
			free(out[i].text);
			continue;
		}
		TEST_CHECK(out[i].reason == LLM_FINISH_STOP &&
				   llm_json_parse(out[i].text, strlen(out[i].text), &v, NULL) == LLM_OK,
				   "%s: enum in an object, output %d parses: %s", name, i, out[i].text);
		visited = llm_json_member(v, "visited");
		places = is_place(llm_json_member(v, "city"), N_PLACES) && visited != NULL &&
			visited->type == LLM_JSON_ARRAY;
		for (int k = 0; places && k < visited->n; k++)
			places = is_place(&visited->items[k], N_PLACES);
		TEST_CHECK(places, "%s: enum in an object, output %d has places for city and visited: %s", name, i,
				   out[i].text);
		n_complete++;
		llm_json_free(v);
		free(out[i].text);
	}
	printf("%s: an enum of %d places in an object, %d of %d outputs complete\n", name, N_PLACES, n_complete, N_RUNS);
	TEST_CHECK(n_complete > 0, "%s: some output with the enum in an object completes", name);
	llm_engine_free(e);
	check_masks(m, schema, 40, LLM_CONSTRAINT_BUDGET_BYTES);
	free(list);
	free(schema);
}

/*
 * The greedy shortcut (argmax over the allowed tokens only) against the
 * masked sampler, which logprobs forces: the same tokens for every schema.
 */
static void
check_greedy_paths(LlmModel *m)
{
	for (int s = 0; schemas[s] != NULL; s++)
	{
		Outcome		out[2];
		int64_t		rid[2];
		LlmEngine  *e = test_engine_new(m, 2, 512);

		memset(out, 0, sizeof(out));
		for (int k = 0; k < 2; k++)
		{
			LlmRequest	r;
			LlmError	err;
			int			n_ids;
			int32_t    *ids = test_tokenize(m, prompts[s % 4], &n_ids);

			llm_request_default(&r);
			r.prompt = ids;
			r.n_prompt = n_ids;
			r.max_tokens = 200;
			r.logprobs = k == 1;
			r.grammar = LLM_GRAMMAR_JSON_SCHEMA;
			r.grammar_text = schemas[s];
			r.grammar_len = strlen(schemas[s]);
			TEST_CHECK(llm_engine_add(e, &r, &rid[k], &err) == LLM_OK, "add: %s", err.msg);
			free(ids);
		}
		test_run_to_idle(e);
		collect(e, rid, out, 2);
		TEST_CHECK(out[0].text != NULL && out[1].text != NULL && out[0].n_tokens == out[1].n_tokens &&
				   memcmp(out[0].tokens, out[1].tokens, (size_t) out[0].n_tokens * sizeof(int32_t)) == 0,
				   "schema %d: the greedy shortcut and the masked sampler agree (%s | %s)", s,
				   out[0].text ? out[0].text : "-", out[1].text ? out[1].text : "-");
		free(out[0].text);
		free(out[1].text);
		llm_engine_free(e);
	}
}

/* Load path, or NULL (with a note) when it is absent. */
static LlmModel *
load_optional(const char *path)
{
	LlmModel   *m = NULL;
	LlmError	err;
	FILE	   *f = fopen(path, "rb");

	if (f == NULL)
	{
		printf("test_constrained: %s not fetched, skipped\n", path);
		return NULL;
	}
	fclose(f);
	if (llm_model_load(path, &m, &err) != LLM_OK)
	{
		TEST_CHECK(false, "load %s: %s", path, err.msg);
		return NULL;
	}
	return m;
}

int
main(void)
{
	char		path[1024];
	LlmModel   *m;

	snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
	if ((m = load_optional(path)) == NULL)
		return test_summary("test_constrained");
	for (int s = 0; schemas[s] != NULL; s++)
	{
		check_masks(m, schemas[s], 60, LLM_CONSTRAINT_BUDGET_BYTES);
		check_masks(m, schemas[s], 30, 1);
	}
	check_generations(m, "stories260K");
	check_greedy_paths(m);
	check_requests(m);
	check_large_literals(m, "stories260K");
	check_enum_in_object(m, "stories260K", 200);
	llm_model_free(m);

	/* a BPE vocabulary of 49k tokens (LLM_TEST_SMOLLM2, from tools/fetch-model.sh), on fewer steps */
	if ((m = load_optional(getenv("LLM_TEST_SMOLLM2") ? getenv("LLM_TEST_SMOLLM2") :
						   ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf")) != NULL)
	{
		check_masks(m, schemas[0], 12, LLM_CONSTRAINT_BUDGET_BYTES);
		check_masks(m, schemas[2], 12, LLM_CONSTRAINT_BUDGET_BYTES);
		check_masks(m, schemas[5], 12, LLM_CONSTRAINT_BUDGET_BYTES);
		check_large_literals(m, "SmolLM2-135M");
		check_enum_in_object(m, "SmolLM2-135M", 96);
		printf("SmolLM2-135M: masks checked against the reference\n");
		llm_model_free(m);
	}
	return test_summary("test_constrained");
}
