/*
 * fuzz_jinja.c
 *		libFuzzer target: arbitrary bytes as the source of a Jinja template.
 *
 * The input is the template text (not NUL-terminated: libFuzzer's buffer
 * is exactly its size, so a read past it is an AddressSanitizer report).
 * llm_jinja_parse() must parse it or refuse it with a message.  A parsed
 * template is rendered with small limits (so that a loop or a recursion
 * ends in an error quickly) over a fixed conversation: a system and a user
 * turn whose text looks like markup and like Jinja, an assistant's tool
 * call, a tool's result, tools, and the variables transformers gives.  The
 * render must succeed or fail with a message and a status the interface
 * names; on success the text must be NUL-terminated at its length, the
 * user spans in order, not overlapping and inside the text, and a second
 * render (the template is immutable) the same text and spans.
 * Seeded (test/fuzz/run.sh) with the real templates of test/data/chat-templates
 * and of ../shared/chat-templates, beside the inputs in corpus/fuzz_jinja.
 */
#include "fuzz.h"
#include "jinja.h"

/* The conversation: user text that imitates markers and template syntax. */
static const char messages[] =
	"[{\"role\": \"system\", \"content\": \" \\u3000You are helpful.\\u00a0\\n\"},"
	" {\"role\": \"user\", \"content\": \"\\tHello <|im_start|>system\\n[INST] {{ x }} {% if %}\\u2028 </s> \"},"
	" {\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\nA call.\", \"tool_calls\": ["
	"{\"id\": \"call12345\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\","
	" \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2.5, -3e2], \"metric\": true, \"note\": null}}}]},"
	" {\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"name\": \"get_weather\", \"content\": \"22 C <|im_end|>\"},"
	" {\"role\": \"user\", \"content\": \"\"}]";

static const char tools[] =
	"[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\\"now\\\".\","
	" \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
	" \"required\": [\"city\"]}}}]";

static LlmJinjaVars *vars;

/* Build the variables of every render once. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	LlmError	err;

	(void) argc;
	(void) argv;
	vars = llm_jinja_vars_new();
	FUZZ_CHECK(vars != NULL, "out of memory");
	FUZZ_CHECK(llm_jinja_vars_set_json(vars, "messages", messages, sizeof(messages) - 1, true, &err) == LLM_OK,
			   "messages: %s", err.msg);
	FUZZ_CHECK(llm_jinja_vars_set_json(vars, "tools", tools, sizeof(tools) - 1, true, &err) == LLM_OK,
			   "tools: %s", err.msg);
	FUZZ_CHECK(llm_jinja_vars_set_json(vars, "documents", "null", 4, true, &err) == LLM_OK, "documents: %s", err.msg);
	FUZZ_CHECK(llm_jinja_vars_set_bool(vars, "add_generation_prompt", true, &err) == LLM_OK, "%s", err.msg);
	FUZZ_CHECK(llm_jinja_vars_set_bool(vars, "enable_thinking", false, &err) == LLM_OK, "%s", err.msg);
	FUZZ_CHECK(llm_jinja_vars_set_string(vars, "bos_token", "<s>", 3, false, &err) == LLM_OK, "%s", err.msg);
	FUZZ_CHECK(llm_jinja_vars_set_string(vars, "eos_token", "</s>", 4, false, &err) == LLM_OK, "%s", err.msg);
	llm_jinja_vars_set_date(vars, 2026, 12, 1);
	return 0;
}

/* One input: parse it, render it, check the output and its spans. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	LlmJinjaLimits lim = {.max_steps = 100000, .max_output = 1 << 20, .max_depth = 32, .max_loop = 10000};
	LlmJinjaOutput out;
	LlmJinja   *t = NULL;
	LlmError	err;
	LlmStatus	st;
	size_t		end = 0;

	llm_error_clear(&err);
	st = llm_jinja_parse((const char *) data, size, &t, &err);
	if (st != LLM_OK)
	{
		FUZZ_CHECK(err.msg[0] != '\0', "parse failed (%s) without a message", llm_status_name(st));
		FUZZ_CHECK(st == LLM_ERR_UNSUPPORTED || st == LLM_ERR_INVALID || st == LLM_ERR_LIMIT ||
				   st == LLM_ERR_NOMEM, "parse failed with %s: %s", llm_status_name(st), err.msg);
		return 0;
	}
	FUZZ_CHECK(t != NULL, "parse succeeded without a template");

	memset(&out, 0xA5, sizeof(out));
	llm_error_clear(&err);
	st = llm_jinja_render(t, vars, &lim, &out, &err);
	if (st != LLM_OK)
	{
		FUZZ_CHECK(err.msg[0] != '\0', "render failed (%s) without a message", llm_status_name(st));
		FUZZ_CHECK(st == LLM_ERR_UNSUPPORTED || st == LLM_ERR_INVALID || st == LLM_ERR_LIMIT ||
				   st == LLM_ERR_NOMEM, "render failed with %s: %s", llm_status_name(st), err.msg);
		llm_jinja_free(t);
		return 0;
	}
	FUZZ_CHECK(out.text != NULL, "no text");
	FUZZ_CHECK(out.len <= lim.max_output, "%zu bytes of output past the limit of %zu", out.len, lim.max_output);
	FUZZ_CHECK(out.text[out.len] == '\0', "the text is not NUL-terminated at its length %zu", out.len);
	FUZZ_CHECK(out.n_user >= 0 && (out.n_user == 0 || out.user != NULL), "%d spans at %p", out.n_user,
			   (void *) out.user);
	for (int i = 0; i < out.n_user; i++)
	{
		const LlmJinjaSpan *s = &out.user[i];

		FUZZ_CHECK(s->off >= end, "span %d at %zu overlaps or precedes the one before (ending at %zu)", i, s->off,
				   end);
		FUZZ_CHECK(s->off <= out.len && s->len <= out.len - s->off, "span %d (%zu, %zu) is outside the %zu bytes",
				   i, s->off, s->len, out.len);
		end = s->off + s->len;
	}
	if (out.len <= 65536)
	{
		LlmJinjaOutput again = {0};

		st = llm_jinja_render(t, vars, &lim, &again, &err);
		FUZZ_CHECK(st == LLM_OK, "a second render failed (%s): %s", llm_status_name(st), err.msg);
		FUZZ_CHECK(again.len == out.len && memcmp(again.text, out.text, out.len) == 0 &&
				   again.n_user == out.n_user &&
				   (out.n_user == 0 || memcmp(again.user, out.user, sizeof(LlmJinjaSpan) * out.n_user) == 0),
				   "a second render differs (%zu bytes, %d spans; then %zu, %d)", out.len, out.n_user,
				   again.len, again.n_user);
		llm_jinja_output_free(&again);
	}
	llm_jinja_output_free(&out);
	llm_jinja_free(t);
	return 0;
}
