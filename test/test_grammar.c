/*
 * test_grammar.c
 *		The JSON reader, the JSON Schema compiler and the byte recognizer:
 *		which texts each schema accepts and refuses, and the errors for
 *		schemas it cannot compile.  test_constrained.c runs them in the
 *		engine with real models.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar.h"
#include "json.h"
#include "json_schema.h"
#include "test.h"

/* Whether grammar g accepts text as a whole sentence (and every prefix of it as a prefix). */
static bool
grammar_accepts(const LlmGrammar *g, const char *text, bool *prefix_ok)
{
	LlmGrammarState a,
				b;
	bool		ok = true;

	llm_grammar_state_init(&a);
	llm_grammar_state_init(&b);
	if (llm_grammar_start(g, &a, NULL) != LLM_OK)
		ok = false;
	for (size_t i = 0; ok && text[i] != '\0'; i++)
	{
		LlmGrammarState t;

		ok = llm_grammar_advance(g, &a, (uint8_t) text[i], &b);
		t = a;
		a = b;
		b = t;
	}
	*prefix_ok = ok;
	ok = ok && llm_grammar_accepting(&a);
	llm_grammar_state_free(&a);
	llm_grammar_state_free(&b);
	return ok;
}

/* Check that schema accepts every text of good and refuses every text of bad (NULL-terminated lists). */
static void
check_schema(const char *schema, const char *const *good, const char *const *bad)
{
	LlmGrammar *g = NULL;
	LlmError	err;
	LlmStatus	st = llm_json_schema_compile(schema, strlen(schema), &g, &err);

	TEST_CHECK(st == LLM_OK, "%s: %s", schema, err.msg);
	if (st != LLM_OK)
		return;
	for (int i = 0; good[i] != NULL; i++)
	{
		bool		prefix;

		TEST_CHECK(grammar_accepts(g, good[i], &prefix), "%s should accept %s", schema, good[i]);
	}
	for (int i = 0; bad[i] != NULL; i++)
	{
		bool		prefix;

		TEST_CHECK(!grammar_accepts(g, bad[i], &prefix), "%s should refuse %s", schema, bad[i]);
	}
	llm_grammar_free(g);
}

/* Check that schema fails to compile with status want and a message containing part. */
static void
check_schema_error(const char *schema, LlmStatus want, const char *part)
{
	LlmGrammar *g = NULL;
	LlmError	err;
	LlmStatus	st = llm_json_schema_compile(schema, strlen(schema), &g, &err);

	TEST_CHECK(st == want, "%s: status %d, want %d (%s)", schema, (int) st, (int) want, st ? err.msg : "ok");
	TEST_CHECK(st == LLM_OK || strstr(err.msg, part) != NULL, "%s: message \"%s\" lacks \"%s\"", schema, err.msg, part);
	llm_grammar_free(g);
}

/* Numbers rounded up and down to int64 exactly from their text, and those past its ends refused. */
static void
test_json_number_int64(void)
{
	static const struct
	{
		const char *text;
		bool		ok;
		int64_t		down,
					up;
	}			cases[] = {
		{"0", true, 0, 0}, {"-0", true, 0, 0}, {"7", true, 7, 7}, {"1.0", true, 1, 1}, {"1.5", true, 1, 2},
		{"-1.5", true, -2, -1}, {"-0.5", true, -1, 0}, {"0.0001", true, 0, 1}, {"15e-1", true, 1, 2},
		{"1E2", true, 100, 100}, {"0.25e2", true, 25, 25}, {"2.5e+1", true, 25, 25}, {"1e-400", true, 0, 1},
		{"-1e-400", true, -1, 0}, {"0e999999999999", true, 0, 0}, {"100.000000000000000000000000001", true, 100, 101},
		{"9007199254740993", true, 9007199254740993, 9007199254740993},
		{"9223372036854775807", true, INT64_MAX, INT64_MAX},
		{"-9223372036854775808", true, INT64_MIN, INT64_MIN},
		{"9223372036854775806.5", true, INT64_MAX - 1, INT64_MAX},
		{"-9223372036854775807.5", true, INT64_MIN, INT64_MIN + 1},
		{"9223372036854775808", false, 0, 0}, {"-9223372036854775809", false, 0, 0}, {"1e19", false, 0, 0},
		{"1e400", false, 0, 0}, {"-1e400", false, 0, 0}, {"99999999999999999999", false, 0, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		LlmJson    *v = NULL;
		int64_t		down = 0,
					up = 0;
		bool		ok;

		if (llm_json_parse(cases[i].text, strlen(cases[i].text), &v, NULL) != LLM_OK)
		{
			TEST_CHECK(false, "parse %s", cases[i].text);
			continue;
		}
		ok = llm_json_number_int64(v, false, &down);
		ok = llm_json_number_int64(v, true, &up) && ok;
		TEST_CHECK(ok == cases[i].ok && (!ok || (down == cases[i].down && up == cases[i].up)),
				   "%s: %d, down %" PRId64 ", up %" PRId64, cases[i].text, ok, down, up);
		llm_json_free(v);
	}
	{
		LlmJson    *v = NULL;
		int64_t		x;

		TEST_CHECK(llm_json_parse("\"1\"", 3, &v, NULL) == LLM_OK && !llm_json_number_int64(v, true, &x),
				   "a string is no number");
		llm_json_free(v);
	}
}

/* The JSON reader: values, escapes, errors, equality and the writer's round trip. */
static void
test_json_reader(void)
{
	static const char *const good[] = {
		"null", " true ", "-0.5e+3", "\"a\\u00e9\\ud83d\\ude00\\n\"", "[1,[2,{}]]",
		"{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}", "{\"a\\u0000b\":1,\"a\":2}", NULL
	};
	static const char *const bad[] = {
		"", "nul", "01", "1.", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "\"\\x\"", "\"\\ud800\"",
		"{\"a\":1,\"a\":2}", "[1] 2", "\"tab\there\"", NULL
	};
	LlmJson    *v,
			   *w;
	LlmError	err;
	char	   *text;
	size_t		len;
	char		deep[200];

	for (int i = 0; good[i] != NULL; i++)
	{
		TEST_CHECK(llm_json_parse(good[i], strlen(good[i]), &v, &err) == LLM_OK, "%s: %s", good[i], err.msg);
		if (v == NULL)
			continue;
		/* writing and reading again gives the same value */
		TEST_CHECK(llm_json_write(v, &text, &len, &err) == LLM_OK, "write %s", good[i]);
		TEST_CHECK(llm_json_parse(text, len, &w, &err) == LLM_OK && llm_json_equal(v, w), "round trip of %s: %s",
				   good[i], text);
		llm_json_free(w);
		free(text);
		llm_json_free(v);
		v = NULL;
	}
	for (int i = 0; bad[i] != NULL; i++)
		TEST_CHECK(llm_json_parse(bad[i], strlen(bad[i]), &v, &err) == LLM_ERR_INVALID, "%s should be refused", bad[i]);

	TEST_CHECK(llm_json_parse("\"\\u00e9\\ud83d\\ude00\"", 20, &v, &err) == LLM_OK &&
			   v->len == 6 && memcmp(v->str, "\xc3\xa9\xf0\x9f\x98\x80", 6) == 0, "escapes decode to UTF-8");
	llm_json_free(v);
	memset(deep, '[', sizeof(deep));
	TEST_CHECK(llm_json_parse(deep, sizeof(deep), &v, &err) == LLM_ERR_INVALID && strstr(err.msg, "deeply"),
			   "deep nesting is refused: %s", err.msg);
	TEST_CHECK(llm_json_valid("{\"a\":1,\"a\":2}", 13) && !llm_json_valid("{\"a\":1,}", 8),
			   "llm_json_valid allows duplicate names, and nothing else the reader refuses");
	TEST_CHECK(llm_json_parse("{\"a\":1,\"b\":2}", 13, &v, &err) == LLM_OK &&
			   llm_json_parse("{\"b\":2.0,\"a\":1}", 15, &w, &err) == LLM_OK && llm_json_equal(v, w),
			   "members compare in any order, numbers by value");
	llm_json_free(v);
	llm_json_free(w);
	test_json_number_int64();
}

/* Schemas of every supported keyword against texts they must accept and refuse. */
static void
test_schema_texts(void)
{
	check_schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
				 "\"city\":{\"type\":\"string\"}},\"required\":[\"name\",\"age\",\"city\"]}",
				 (const char *[]) {
		"{\"name\":\"Alice\",\"age\":31,\"city\":\"Paris\"}",
			"{\n  \"name\": \"Alice\",\n  \"age\": 31,\n  \"city\": \"Paris\"\n}",
			"{ \"name\" : \"A\\\"\\n\", \"age\" : -7, \"city\" : \"\xc3\xa9\" }",
			"{\"age\":31,\"name\":\"Alice\",\"city\":\"P\"}", NULL
	},
				 (const char *[]) {
		"{\"name\":\"Alice\",\"age\":31}", "{\"name\":\"Alice\",\"age\":31,\"city\":\"P\",\"age\":31}",
			"{\"name\":\"Alice\",\"age\":31,\"city\":\"Paris\",}", "{\"name\":\"A\",\"age\":3.5,\"city\":\"P\"}",
			" {\"name\":\"A\",\"age\":3,\"city\":\"P\"}", "{\"name\":\"A\",\"age\":3,\"city\":\"P\"} ",
			"{\"name\":\"\\u0041\",\"age\":3,\"city\":\"P\"}", "{\"name\":\"\x01\",\"age\":3,\"city\":\"P\"}",
			"{\"name\":\"\xc3\",\"age\":3,\"city\":\"P\"}", "{\"name\":\"\xed\xa0\x80\",\"age\":3,\"city\":\"P\"}", NULL
	});
	/* optional properties: any subset, in any order, commas only between */
	check_schema("{\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"boolean\"},\"c\":{\"const\":7}},"
				 "\"required\":[\"b\"],\"additionalProperties\":false}",
				 (const char *[]) {
		"{\"b\":true}", "{\"a\":null,\"b\":false}", "{\"b\":true,\"c\":7}", "{\"a\":null,\"b\":true,\"c\":7}",
			"{\"c\":7,\"b\":true}", "{\"c\":7, \"b\":true,\n \"a\":null}", NULL
	},
				 (const char *[]) {
		"{}", "{\"a\":null}", "{,\"b\":true}", "{\"b\":true,}", "{\"b\":true,\"c\":8}", "{\"c\":7,\"a\":null}",
			"{\"b\":true,\"b\":true}", "{\"b\":true,\"d\":1}", "{\"b\":true,,\"c\":7}", NULL
	});
	check_schema("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}}}",
				 (const char *[]) {"{}", "{ }", "{\"x\":0}", "{\"x\":-1.25e-3}", "{\"x\":12.5E+2}", NULL},
				 (const char *[]) {"{\"x\":01}", "{\"x\":.5}", "{\"x\":1.}", "{\"x\":1e}", "{\"x\":+1}", NULL});
	check_schema("{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",1,null]},\"minItems\":1,\"maxItems\":3}",
				 (const char *[]) {"[\"red\"]", "[1, null, \"green\"]", "[\n  \"red\",\n  1\n]", NULL},
				 (const char *[]) {"[]", "[\"blue\"]", "[1,1,1,1]", "[\"red\",]", "[\"Red\"]", NULL});
	check_schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
				 (const char *[]) {"\"ab\"", "\"abc\"", "\"\xc3\xa9\xc3\xa9\"", "\"\\n\\t\"", NULL},
				 (const char *[]) {"\"a\"", "\"abcd\"", "ab", NULL});
	check_schema("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"array\",\"maxItems\":0}]}",
				 (const char *[]) {"42", "[]", "[ ]", NULL},
				 (const char *[]) {"[1]", "4.5", "\"x\"", NULL});
	check_schema("{\"type\":[\"string\",\"null\"],\"maxLength\":1}",
				 (const char *[]) {"null", "\"\"", "\"x\"", NULL},
				 (const char *[]) {"\"xy\"", "0", NULL});
	check_schema("{\"const\":{\"k\":[1,\"two\"]}}",
				 (const char *[]) {"{\"k\":[1,\"two\"]}", NULL},
				 (const char *[]) {"{\"k\": [1,\"two\"]}", "{\"k\":[1]}", NULL});
	check_schema("true",
				 (const char *[]) {"1", "\"s\"", "{\"a\":[{\"b\":null}]}", "[[[]]]", "false", NULL},
				 (const char *[]) {"", "[1,]", "{\"a\"}", "nul", NULL});
	check_schema("{\"type\":\"integer\"}",
				 (const char *[]) {"0", "-12", "1234567890123456", NULL},
				 (const char *[]) {"12345678901234567", "00", "-", NULL});
	check_schema("{\"type\":\"object\",\"properties\":{\"a/b~c\":{\"type\":\"string\",\"enum\":[\"q\\\"\"]}},"
				 "\"required\":[\"a/b~c\"]}",
				 (const char *[]) {"{\"a/b~c\":\"q\\\"\"}", NULL},
				 (const char *[]) {"{\"a/b~c\":\"q\"}", NULL});
	/* enum and const beside "type": only the values of that type (a validator refuses the others) */
	check_schema("{\"type\":\"string\",\"enum\":[\"a\",1,null,\"b\"]}",
				 (const char *[]) {"\"a\"", "\"b\"", NULL},
				 (const char *[]) {"1", "null", NULL});
	check_schema("{\"type\":[\"integer\",\"null\"],\"enum\":[1,2.5,3.0,null,\"1\"]}",
				 (const char *[]) {"1", "3.0", "null", NULL},
				 (const char *[]) {"2.5", "\"1\"", NULL});
	/* integer ranges (test_int_range.c checks them against a reference) */
	check_schema("{\"type\":\"integer\",\"minimum\":1,\"maximum\":5}",
				 (const char *[]) {"1", "3", "5", NULL},
				 (const char *[]) {"0", "6", "-1", "10", "05", "1.0", "", NULL});
	check_schema("{\"type\":\"integer\",\"minimum\":-12,\"exclusiveMaximum\":0}",
				 (const char *[]) {"-12", "-1", "-7", NULL},
				 (const char *[]) {"0", "-0", "-13", "1", "-012", NULL});
	check_schema("{\"type\":\"integer\",\"minimum\":1.5,\"maximum\":4.9999}",
				 (const char *[]) {"2", "4", NULL},
				 (const char *[]) {"1", "5", NULL});
	check_schema("{\"type\":\"integer\",\"exclusiveMinimum\":-2.5,\"maximum\":3.0e0,\"minimum\":-100}",
				 (const char *[]) {"-2", "0", "3", NULL},
				 (const char *[]) {"-3", "4", NULL});
	check_schema("{\"type\":\"integer\",\"minimum\":9007199254740993,\"maximum\":9223372036854775807}",
				 (const char *[]) {"9007199254740993", "9223372036854775807", NULL},
				 (const char *[]) {"9007199254740992", "9223372036854775808", NULL});
	/* an open side ends at 16 digits, as a plain integer does */
	check_schema("{\"type\":\"integer\",\"minimum\":0}",
				 (const char *[]) {"0", "7", "9999999999999999", NULL},
				 (const char *[]) {"-1", "-0", "00", "10000000000000000", "123456789012345678901234567890", NULL});
	check_schema("{\"type\":[\"integer\",\"null\",\"string\"],\"maximum\":-3,\"maxLength\":1}",
				 (const char *[]) {"-3", "-40", "null", "\"x\"", NULL},
				 (const char *[]) {"-2", "3", "\"xy\"", NULL});
	check_schema("{\"type\":\"number\",\"const\":2.5,\"description\":\"x\"}",
				 (const char *[]) {"2.5", NULL},
				 (const char *[]) {"2", NULL});
}

/* Whether g refuses text at its last byte, having taken every byte before it. */
static bool
grammar_refuses_last(const LlmGrammar *g, const char *text)
{
	size_t		n = strlen(text);
	char	   *head = strndup(text, n - 1);
	bool		prefix;

	grammar_accepts(g, head, &prefix);
	free(head);
	if (!prefix)
		return false;
	grammar_accepts(g, text, &prefix);
	return !prefix;
}

/* The schema of n integer properties p0..p(n-1), the first n_required of them required. */
static char *
many_properties_schema(int n, int n_required)
{
	char	   *s = malloc(64 + (size_t) n * 64);
	size_t		at = 0;

	at += sprintf(s + at, "{\"properties\":{");
	for (int i = 0; i < n; i++)
		at += sprintf(s + at, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
	at += sprintf(s + at, "},\"required\":[");
	for (int i = 0; i < n_required; i++)
		at += sprintf(s + at, "%s\"p%d\"", i ? "," : "", i);
	sprintf(s + at, "]}");
	return s;
}

/*
 * Follow text with g, checking that no state has more than max_stacks
 * stacks; whether g accepts it.
 */
static bool
accepts_within(const LlmGrammar *g, const char *text, int max_stacks, int *most)
{
	LlmGrammarState a,
				b;
	bool		ok;

	llm_grammar_state_init(&a);
	llm_grammar_state_init(&b);
	ok = llm_grammar_start(g, &a, NULL) == LLM_OK;
	*most = a.n_stacks;
	for (size_t i = 0; ok && text[i] != '\0'; i++)
	{
		LlmGrammarState t;

		ok = llm_grammar_advance(g, &a, (uint8_t) text[i], &b);
		t = a;
		a = b;
		b = t;
		if (a.n_stacks > *most)
			*most = a.n_stacks;
	}
	ok = ok && llm_grammar_accepting(&a) && *most <= max_stacks;
	llm_grammar_state_free(&a);
	llm_grammar_state_free(&b);
	return ok;
}

/* n properties, the first n_required required, written in reverse order: accepted, with stacks bounded. */
static void
check_many_properties(int n, int n_required)
{
	char	   *schema = many_properties_schema(n, n_required);
	char	   *text = malloc(16 + (size_t) n * 16);
	size_t		at = 0;
	LlmGrammar *g = NULL;
	LlmError	err;
	int			most = 0;
	clock_t		t0 = clock();

	TEST_CHECK(llm_json_schema_compile(schema, strlen(schema), &g, &err) == LLM_OK, "%d properties: %s", n, err.msg);
	TEST_CHECK(clock() - t0 < CLOCKS_PER_SEC / 10, "%d properties compile in under 0.1 s", n);
	if (g != NULL)
	{
		at += sprintf(text + at, "{");
		for (int i = n - 1; i >= 0; i--)
			at += sprintf(text + at, "%s\"p%d\":%d", i < n - 1 ? "," : "", i, i);
		sprintf(text + at, "}");
		/* after "{": one stack per member, and two for each of the whitespace before and after them, and "}" */
		TEST_CHECK(accepts_within(g, text, n + 5, &most), "%d properties in reverse order (%d stacks at most)", n,
				   most);
		text[1] = '\0';
		at = 1;
		for (int i = 0; i < n_required - 1; i++)
			at += sprintf(text + at, "%s\"p%d\":%d", i ? "," : "", i, i);
		sprintf(text + at, "}");
		TEST_CHECK(n_required == 0 || grammar_refuses_last(g, text), "\"}\" before the last required property: %s",
				   text);
	}
	llm_grammar_free(g);
	free(text);
	free(schema);
}

/* Objects' members in any order, each at most once, "}" only after the required ones. */
static void
test_any_order(void)
{
	static const char product[] =
		"{\"type\":\"object\",\"properties\":{\"product\":{\"type\":\"string\",\"maxLength\":30},"
		"\"rating\":{\"type\":\"integer\"}},\"required\":[\"product\"]}";
	static const char nested[] =
		"{\"properties\":{\"a\":{\"properties\":{\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"integer\"}},"
		"\"required\":[\"x\"]},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}";
	static const char rated[] =
		"{\"type\":\"object\",\"properties\":{\"product\":{\"type\":\"string\"},"
		"\"rating\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5}},\"required\":[\"product\"]}";
	static const char wide[] =
		"{\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":-1000000,\"maximum\":1000000000}},"
		"\"required\":[\"n\"]}";
	LlmGrammar *g = NULL;
	char	   *schema;
	int			most = 0;

	/* the issue's schema: the optional rating may come before or after the product */
	check_schema(product,
				 (const char *[]) {
		"{\"product\":\"Acme kettle\",\"rating\":5}", "{\"rating\":5,\"product\":\"Acme kettle\"}",
			"{\"product\":\"Acme kettle\"}", "{ \"rating\" : 5, \"product\" : \"\" }", NULL
	},
				 (const char *[]) {
		"{\"rating\":5}", "{}", "{\"product\":\"a\",\"product\":\"b\"}", "{\"rating\":5,\"product\":\"a\",\"rating\":4}",
			"{\"product\":\"a\",\"price\":3}", "{\"product\":\"a\",}", "{,\"product\":\"a\"}", NULL
	});
	TEST_CHECK(llm_json_schema_compile(product, strlen(product), &g, NULL) == LLM_OK, "compile the issue's schema");
	TEST_CHECK(grammar_refuses_last(g, "{\"rating\":5}") && grammar_refuses_last(g, "{ }") &&
			   grammar_refuses_last(g, "{}"), "\"}\" is refused until the required property is written");
	TEST_CHECK(grammar_refuses_last(g, "{\"product\":\"a\",\"p") && grammar_refuses_last(g, "{\"rating\":5,\"r"),
			   "a written key is not offered again");
	TEST_CHECK(grammar_refuses_last(g, "{\"product\":\"a\",\"rating\":1,"), "no comma once every key is written");
	TEST_CHECK(grammar_refuses_last(g, "{\"p\"") && grammar_refuses_last(g, "{\"rat\""),
			   "only whole listed keys (additionalProperties false)");
	llm_grammar_free(g);

	/* the issue's schema as it was, with its rating's range; and a wide range, with few stacks */
	check_schema(rated,
				 (const char *[]) {
		"{\"product\":\"Acme kettle\",\"rating\":5}", "{\"rating\":1,\"product\":\"a\"}", "{\"product\":\"a\"}", NULL
	},
				 (const char *[]) {
		"{\"product\":\"a\",\"rating\":0}", "{\"product\":\"a\",\"rating\":6}", "{\"product\":\"a\",\"rating\":-1}",
			"{\"product\":\"a\",\"rating\":10}", "{\"product\":\"a\",\"rating\":4.5}", NULL
	});
	TEST_CHECK(llm_json_schema_compile(wide, strlen(wide), &g, NULL) == LLM_OK, "compile a wide range");
	TEST_CHECK(accepts_within(g, "{\"n\": 1000000000}", 24, &most) && accepts_within(g, "{\"n\":-999999}", 24, &most) &&
			   accepts_within(g, "{\"n\":0}", 24, &most), "[-1000000, 1000000000] in an object (%d stacks at most)",
			   most);
	TEST_CHECK(grammar_refuses_last(g, "{\"n\":10000000000") && grammar_refuses_last(g, "{\"n\":-1000001") &&
			   grammar_refuses_last(g, "{\"n\":1000000001") && grammar_refuses_last(g, "{\"n\":-0"),
			   "the wide range's ends");
	llm_grammar_free(g);

	/* nested objects keep their own written keys */
	check_schema(nested,
				 (const char *[]) {
		"{\"a\":{\"x\":1},\"b\":2}", "{\"b\":2,\"a\":{\"y\":3,\"x\":1}}", "{\"a\":{\"x\":1,\"y\":3},\"b\":2}", NULL
	},
				 (const char *[]) {
		"{\"a\":{\"y\":3},\"b\":2}", "{\"a\":{\"x\":1,\"x\":1},\"b\":2}", "{\"a\":{\"x\":1,\"b\":2}}",
			"{\"a\":{\"x\":1},\"b\":2,\"a\":{\"x\":1}}", "{\"b\":2,\"x\":1}", NULL
	});
	/* a key that is a prefix of another */
	check_schema("{\"properties\":{\"ab\":{\"type\":\"integer\"},\"a\":{\"type\":\"integer\"}}}",
				 (const char *[]) {"{\"a\":1,\"ab\":2}", "{\"ab\":2,\"a\":1}", "{\"ab\":2}", "{}", NULL},
				 (const char *[]) {"{\"a\":1,\"a\":2}", "{\"ab\":1,\"ab\":2}", "{\"abc\":1}", NULL});
	/* in an array, each object starts with none written */
	check_schema("{\"type\":\"array\",\"items\":{\"properties\":{\"k\":{\"type\":\"null\"},\"v\":{\"type\":\"null\"}},"
				 "\"required\":[\"v\"]}}",
				 (const char *[]) {"[{\"v\":null,\"k\":null},{\"v\":null},{\"k\":null,\"v\":null}]", NULL},
				 (const char *[]) {"[{\"v\":null},{\"k\":null}]", "[{\"v\":null,\"v\":null}]", NULL});

	check_many_properties(20, 0);
	check_many_properties(20, 7);
	check_many_properties(64, 0);	/* issue 37: a chain of optional rules, before the group, failed from 62 */
	check_many_properties(LLM_SCHEMA_MAX_PROPERTIES, 0);
	check_many_properties(LLM_SCHEMA_MAX_PROPERTIES, LLM_SCHEMA_MAX_PROPERTIES);
	schema = many_properties_schema(LLM_SCHEMA_MAX_PROPERTIES + 1, 0);
	check_schema_error(schema, LLM_ERR_LIMIT, "more than 128 properties in an object are not supported at #");
	free(schema);
}

/* Schemas that must not compile, with the keyword or place named. */
static void
test_schema_errors(void)
{
	check_schema_error("{\"type\":\"string\",\"pattern\":\"^a\"}", LLM_ERR_UNSUPPORTED, "keyword \"pattern\" at #");
	check_schema_error("{\"properties\":{\"n\":{\"type\":\"integer\",\"multipleOf\":2}}}", LLM_ERR_UNSUPPORTED,
					   "\"multipleOf\" at #/properties/n");
	check_schema_error("{\"type\":\"array\",\"items\":{\"format\":\"date\"}}", LLM_ERR_UNSUPPORTED, "\"format\" at #/items");
	check_schema_error("{\"anyOf\":[{\"type\":\"integer\"},{\"$ref\":\"#/x\"}]}", LLM_ERR_UNSUPPORTED, "\"$ref\" at #/anyOf/1");
	check_schema_error("{\"properties\":{\"a/b\":{\"oneOf\":[]}}}", LLM_ERR_UNSUPPORTED, "at #/properties/a~1b");
	check_schema_error("{\"type\":\"object\",\"additionalProperties\":true}", LLM_ERR_UNSUPPORTED, "additionalProperties");
	check_schema_error("{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}", LLM_ERR_INVALID,
					   "required property \"x\"");
	check_schema_error("{\"type\":\"strin\"}", LLM_ERR_INVALID, "unknown type \"strin\"");
	check_schema_error("{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", LLM_ERR_INVALID, "minLength");
	check_schema_error("{\"type\":\"string\",\"maxLength\":-1}", LLM_ERR_INVALID, "maxLength");
	check_schema_error("{\"type\":\"string\",\"maxLength\":1e9}", LLM_ERR_LIMIT, "maxLength above");
	check_schema_error("{\"enum\":[]}", LLM_ERR_INVALID, "\"enum\" must be a non-empty array");
	check_schema_error("{\"type\":\"string\",\"enum\":[1,null]}", LLM_ERR_INVALID, "no value of \"enum\" has");
	check_schema_error("{\"type\":\"integer\",\"const\":\"7\"}", LLM_ERR_INVALID, "\"const\" does not have");
	check_schema_error("{\"type\":\"string\",\"enum\":[\"abc\"],\"maxLength\":2}", LLM_ERR_UNSUPPORTED,
					   "\"enum\" beside assertions other than \"type\"");
	check_schema_error("{\"const\":1,\"enum\":[1,2]}", LLM_ERR_UNSUPPORTED, "\"const\" beside");
	check_schema_error("{\"type\":7,\"enum\":[1]}", LLM_ERR_INVALID, "\"type\" must be");
	check_schema_error("{\"anyOf\":[{\"type\":\"null\"}],\"type\":\"string\"}", LLM_ERR_UNSUPPORTED, "anyOf");
	check_schema_error("{\"type\":\"array\",\"items\":[{\"type\":\"null\"}]}", LLM_ERR_UNSUPPORTED, "tuple");
	check_schema_error("false", LLM_ERR_INVALID, "allows no value");
	check_schema_error("[1]", LLM_ERR_INVALID, "object or a boolean");
	check_schema_error("{\"type\":", LLM_ERR_INVALID, "invalid JSON at byte");
	check_schema_error("{\"const\":\"a\\u0000b\"}", LLM_ERR_INVALID, "NUL");
	/* integer ranges: bounds within int64, not empty, and only on integers */
	check_schema_error("{\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":9223372036854775808}}}",
					   LLM_ERR_INVALID, "\"maximum\" is outside the 64-bit integer range (-9223372036854775808 to "
					   "9223372036854775807) at #/properties/n");
	check_schema_error("{\"type\":\"integer\",\"minimum\":-9223372036854775809}", LLM_ERR_INVALID,
					   "\"minimum\" is outside the 64-bit integer range");
	check_schema_error("{\"type\":\"integer\",\"minimum\":1e400}", LLM_ERR_INVALID, "\"minimum\" is outside");
	check_schema_error("{\"type\":\"integer\",\"maximum\":-1e19}", LLM_ERR_INVALID, "\"maximum\" is outside");
	check_schema_error("{\"type\":\"integer\",\"exclusiveMinimum\":9223372036854775807}", LLM_ERR_INVALID,
					   "\"exclusiveMinimum\" is outside");
	check_schema_error("{\"type\":\"integer\",\"exclusiveMaximum\":-9223372036854775808}", LLM_ERR_INVALID,
					   "\"exclusiveMaximum\" is outside");
	check_schema_error("{\"type\":\"integer\",\"minimum\":\"1\"}", LLM_ERR_INVALID, "\"minimum\" must be a number at #");
	check_schema_error("{\"items\":{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}}", LLM_ERR_INVALID,
					   "no integer satisfies both \"minimum\" and \"maximum\" at #/items");
	check_schema_error("{\"type\":\"integer\",\"minimum\":1.2,\"exclusiveMaximum\":2}", LLM_ERR_INVALID,
					   "no integer satisfies both \"minimum\" and \"exclusiveMaximum\"");
	check_schema_error("{\"type\":\"number\",\"minimum\":0}", LLM_ERR_UNSUPPORTED,
					   "supported only for \"type\": \"integer\", not \"number\" at #");
	check_schema_error("{\"type\":[\"integer\",\"number\"],\"maximum\":3}", LLM_ERR_UNSUPPORTED, "not \"number\"");
	check_schema_error("{\"properties\":{\"n\":{\"maximum\":3}}}", LLM_ERR_UNSUPPORTED,
					   "need \"type\": \"integer\" at #/properties/n");
	check_schema_error("{\"type\":\"integer\",\"enum\":[1,2],\"minimum\":2}", LLM_ERR_UNSUPPORTED, "\"enum\" beside");
	TEST_CHECK(llm_json_schema_check("{\"type\":\"boolean\"}", 18, NULL) == LLM_OK, "check accepts a good schema");
}

/* The grammar builder alone: choices-like alternatives, a prefix of another, and refused empty rules. */
static void
test_builder(void)
{
	LlmGrammarBuilder *b = llm_grammar_builder_new();
	LlmGrammar *g = NULL;
	int			root = llm_grammar_rule(b);
	bool		prefix;

	llm_grammar_add_literal(b, llm_grammar_alt(b, root), "yes", 3);
	llm_grammar_add_literal(b, llm_grammar_alt(b, root), "yes please", 10);
	llm_grammar_add_literal(b, llm_grammar_alt(b, root), "no", 2);
	TEST_CHECK(llm_grammar_builder_finish(b, root, &g, NULL) == LLM_OK, "choices build");
	TEST_CHECK(grammar_accepts(g, "yes", &prefix) && grammar_accepts(g, "yes please", &prefix) &&
			   grammar_accepts(g, "no", &prefix), "each choice is a sentence");
	TEST_CHECK(!grammar_accepts(g, "yes p", &prefix) && prefix, "a prefix of a choice is a prefix, not a sentence");
	TEST_CHECK(!grammar_accepts(g, "nope", &prefix) && !prefix, "text past a choice is refused");
	llm_grammar_free(g);

	b = llm_grammar_builder_new();
	root = llm_grammar_rule(b);
	(void) llm_grammar_rule(b);		/* never given an alternative */
	llm_grammar_alt(b, root);
	TEST_CHECK(llm_grammar_builder_finish(b, root, &g, NULL) == LLM_ERR_INVALID, "a rule without alternatives is refused");
}

/* Whether g accepts each of the n strings, no state passing max_stacks stacks; the most seen into *most. */
static bool
accepts_strings(const LlmGrammar *g, char **strs, int n, int max_stacks, int *most)
{
	bool		ok = true;

	*most = 0;
	for (int i = 0; i < n && ok; i++)
	{
		int			m = 0;

		ok = accepts_within(g, strs[i], max_stacks, &m);
		if (m > *most)
			*most = m;
	}
	return ok;
}

/* A schema of one enum of the values "v0" .. "v<n-1>", between head and tail, in a malloc'd string. */
static char *
enum_schema(const char *head, int n, const char *tail)
{
	char	   *s = malloc(strlen(head) + strlen(tail) + 16 * (size_t) n + 1);
	size_t		at = (size_t) sprintf(s, "%s", head);

	for (int i = 0; i < n; i++)
		at += (size_t) sprintf(s + at, "%s\"v%d\"", i ? "," : "", i);
	sprintf(s + at, "%s", tail);
	return s;
}

/*
 * Many strings as one rule (llm_grammar_strings_rule): choices and enums of
 * thousands, once refused for passing the recognizer's bound on stacks
 * (an alternative each, issue 37), follow a trie with a stack per next byte.
 */
static void
test_strings_rule(void)
{
	enum
	{
		N = 5000
	};
	char	  **strs = malloc(N * sizeof(char *));
	size_t	   *lens = malloc(N * sizeof(size_t));
	LlmGrammarBuilder *b;
	LlmGrammar *g = NULL;
	LlmError	err;
	LlmGrammarState st;
	bool		prefix;
	int			most = 0;
	char	   *schema;

	/* "v0" .. "v4999": "v1" is a prefix of "v10", "v100" and "v1000" */
	for (int i = 0; i < N; i++)
	{
		strs[i] = malloc(16);
		lens[i] = (size_t) sprintf(strs[i], "v%d", i);
	}
	b = llm_grammar_builder_new();
	TEST_CHECK(llm_grammar_builder_finish(b, llm_grammar_strings_rule(b, (const char *const *) strs, lens, N), &g,
										  &err) == LLM_OK, "5000 strings build: %s", err.msg);
	llm_grammar_state_init(&st);
	TEST_CHECK(g != NULL && llm_grammar_start(g, &st, NULL) == LLM_OK && st.n_stacks == 1,
			   "their start is one stack (%d)", st.n_stacks);
	llm_grammar_state_free(&st);
	/* a stack per next byte: ten digits and the end */
	TEST_CHECK(accepts_strings(g, strs, N, 11, &most), "each of 5000 strings is a sentence (%d stacks at most)", most);
	TEST_CHECK(!grammar_accepts(g, "v", &prefix) && prefix, "a common prefix is a prefix, not a sentence");
	TEST_CHECK(!grammar_accepts(g, "v5000", &prefix) && !prefix && !grammar_accepts(g, "v01", &prefix) &&
			   !grammar_accepts(g, "v10000", &prefix) && !grammar_accepts(g, "w", &prefix),
			   "strings not in the list are refused");
	llm_grammar_free(g);

	/* duplicates, the empty string, a prefix of another, and bytes past ASCII */
	{
		const char *some[] = {"yes", "no", "yes", "", "yes please", "\xc3\xa9t\xc3\xa9"};
		size_t		some_lens[] = {3, 2, 3, 0, 10, 5};

		b = llm_grammar_builder_new();
		TEST_CHECK(llm_grammar_builder_finish(b, llm_grammar_strings_rule(b, some, some_lens, 6), &g, NULL) == LLM_OK,
				   "strings with duplicates and the empty one build");
		TEST_CHECK(grammar_accepts(g, "", &prefix) && grammar_accepts(g, "yes", &prefix) &&
				   grammar_accepts(g, "yes please", &prefix) && grammar_accepts(g, "no", &prefix) &&
				   grammar_accepts(g, "\xc3\xa9t\xc3\xa9", &prefix), "each is a sentence");
		TEST_CHECK(!grammar_accepts(g, "yes p", &prefix) && prefix && !grammar_accepts(g, "yess", &prefix) &&
				   !prefix && !grammar_accepts(g, "\xc3\xa9", &prefix) && prefix, "and nothing else");
		llm_grammar_free(g);
	}

	/* "a", "aa", ... : a trie node per string, built without recursion */
	for (int i = 0; i < N; i++)
	{
		free(strs[i]);
		strs[i] = malloc((size_t) i + 2);
		memset(strs[i], 'a', (size_t) i + 1);
		strs[i][i + 1] = '\0';
		lens[i] = (size_t) i + 1;
	}
	b = llm_grammar_builder_new();
	TEST_CHECK(llm_grammar_builder_finish(b, llm_grammar_strings_rule(b, (const char *const *) strs, lens, N), &g,
										  &err) == LLM_OK, "a, aa, ... (5000 nested nodes) build: %s", err.msg);
	TEST_CHECK(grammar_accepts(g, strs[N - 1], &prefix) && grammar_accepts(g, strs[0], &prefix) &&
			   !grammar_accepts(g, "", &prefix), "the longest and the shortest are sentences");
	llm_grammar_free(g);
	for (int i = 0; i < N; i++)
		free(strs[i]);
	free(strs);
	free(lens);

	/* an enum of 5000 values, as a property's, with values of other types; and alone */
	schema = enum_schema("{\"properties\":{\"k\":{\"enum\":[", N, ",7,null]}},\"required\":[\"k\"]}");
	TEST_CHECK(llm_json_schema_check(schema, strlen(schema), &err) == LLM_OK, "an enum of 5000 values: %s", err.msg);
	check_schema(schema, (const char *[]) {"{\"k\":\"v0\"}", "{\"k\": \"v4999\"}", "{\"k\":7}", "{\"k\":null}", NULL},
				 (const char *[]) {"{\"k\":\"v5000\"}", "{\"k\":\"v\"}", "{\"k\":8}", "{\"k\":\"v1\"\"}", NULL});
	TEST_CHECK(llm_json_schema_compile(schema, strlen(schema), &g, NULL) == LLM_OK &&
			   accepts_within(g, "{\"k\": \"v1234\"}", 16, &most), "its value with few stacks (%d)", most);
	llm_grammar_free(g);
	free(schema);
	schema = enum_schema("{\"type\":\"string\",\"enum\":[", N, ",1]}");
	TEST_CHECK(llm_json_schema_check(schema, strlen(schema), &err) == LLM_OK, "a bare enum of 5000 values: %s",
			   err.msg);
	free(schema);
	check_schema_error("{\"type\":\"integer\",\"enum\":[\"a\",\"b\"]}", LLM_ERR_INVALID, "no value of \"enum\" has");
	check_schema_error("{\"enum\":[\"a\",\"b\\u0000\"]}", LLM_ERR_INVALID, "NUL character cannot be written at #/enum/1");

	/* anyOf keeps an alternative per subschema: more than the bound is refused, and so is a start past it */
	{
		char	   *any = malloc(32 * 320 + 64);
		size_t		at = (size_t) sprintf(any, "{\"anyOf\":[");

		for (int i = 0; i < 257; i++)
			at += (size_t) sprintf(any + at, "%s{\"const\":\"v%d\"}", i ? "," : "", i);
		sprintf(any + at, "]}");
		check_schema_error(any, LLM_ERR_LIMIT, "\"anyOf\" with more than 256 subschemas is not supported");
		at = (size_t) sprintf(any, "{\"anyOf\":[");
		for (int i = 0; i < 40; i++)
		{
			at += (size_t) sprintf(any + at, "%s{\"anyOf\":[", i ? "," : "");
			for (int k = 0; k < 8; k++)
				at += (size_t) sprintf(any + at, "%s{\"const\":%d}", k ? "," : "", i * 8 + k);
			at += (size_t) sprintf(any + at, "]}");
		}
		sprintf(any + at, "]}");
		TEST_CHECK(llm_json_schema_check(any, strlen(any), &err) == LLM_ERR_LIMIT &&
				   strstr(err.msg, "may begin in more than 256 ways") != NULL, "40 anyOf of 8 at the start: %s",
				   err.msg);
		free(any);
	}
}

int
main(void)
{
	test_json_reader();
	test_schema_texts();
	test_schema_errors();
	test_any_order();
	test_builder();
	test_strings_rule();
	return test_summary("test_grammar");
}
