/*
 * fuzz_json_schema.c
 *		libFuzzer target: arbitrary bytes as a JSON Schema and as text for
 *		its grammar.
 *
 * The input is a schema, a NUL byte, and text.  The schema must compile
 * or be refused with a message; the JSON reader's value, written and read
 * again, must be the same value.  A compiled grammar then follows the text
 * byte by byte, and whatever prefix of it the grammar accepts as a whole
 * sentence must be JSON (duplicate names in a free-form object allowed, as
 * RFC 8259 and jsonb allow them): the grammar never lets the decoder write
 * invalid JSON.  Seeded with schemas of every supported keyword.
 */
#include "fuzz.h"
#include "grammar.h"
#include "json.h"
#include "json_schema.h"

/* The reader's round trip: a parsed value, written and parsed again, is the same value. */
static void
fuzz_json_round_trip(const char *text, size_t len)
{
	LlmJson    *v = NULL,
			   *w = NULL;
	char	   *out = NULL;
	size_t		out_len = 0;

	if (llm_json_parse(text, len, &v, NULL) != LLM_OK)
		return;
	FUZZ_CHECK(llm_json_write(v, &out, &out_len, NULL) == LLM_OK, "write failed");
	FUZZ_CHECK(llm_json_parse(out, out_len, &w, NULL) == LLM_OK, "written JSON does not parse: %s", out);
	FUZZ_CHECK(llm_json_equal(v, w), "round trip changed the value: %s", out);
	llm_json_free(v);
	llm_json_free(w);
	free(out);
}

/* Follow text with g; every accepted prefix must be JSON. */
static void
fuzz_follow(const LlmGrammar *g, const uint8_t *text, size_t len)
{
	LlmGrammarState a,
				b;

	llm_grammar_state_init(&a);
	llm_grammar_state_init(&b);
	if (llm_grammar_start(g, &a, NULL) == LLM_OK)
		for (size_t i = 0; i < len; i++)
		{
			LlmGrammarState t;

			if (!llm_grammar_advance(g, &a, text[i], &b))
				break;
			t = a;
			a = b;
			b = t;
			if (llm_grammar_accepting(&a))
				FUZZ_CHECK(llm_json_valid((const char *) text, i + 1),
						   "the grammar accepts %zu bytes that are not JSON: %.*s", i + 1, (int) (i + 1), text);
		}
	llm_grammar_state_free(&a);
	llm_grammar_state_free(&b);
}

/* One input: schema NUL text. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t		schema_len = nul != NULL ? (size_t) (nul - data) : size;
	const uint8_t *text = nul != NULL ? nul + 1 : data + size;
	size_t		text_len = size - schema_len - (nul != NULL);
	char	   *schema = malloc(schema_len ? schema_len : 1);
	LlmGrammar *g = NULL;
	LlmError	err;
	LlmStatus	st;

	if (schema == NULL)
		return 0;
	memcpy(schema, data, schema_len);	/* its own buffer: a read past it is a report */
	fuzz_json_round_trip(schema, schema_len);
	st = llm_json_schema_compile(schema, schema_len, &g, &err);
	if (st != LLM_OK)
		FUZZ_CHECK((st == LLM_ERR_INVALID || st == LLM_ERR_UNSUPPORTED || st == LLM_ERR_LIMIT ||
					st == LLM_ERR_NOMEM) && err.msg[0] != '\0',
				   "compile failed with %s and message \"%s\"", llm_status_name(st), err.msg);
	else
	{
		fuzz_follow(g, text, text_len);
		llm_grammar_free(g);
	}
	free(schema);
	return 0;
}
