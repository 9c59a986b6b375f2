/*
 * chat.c
 *		Render a conversation with a model's chat template, and tokenize
 *		the rendering for generation (see chat.h).
 *
 * The conversation reaches the template as transformers passes it: the
 * messages and tools as parsed JSON (user text, but for the roles, which
 * are checked), tools and documents None when not given,
 * add_generation_prompt, bos_token and eos_token (template text), and
 * enable_thinking only when the request gives it, so that a template's own
 * default applies.
 */
#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "model.h"
#include "tokenizer.h"

/*
 * Parse and check the conversation: messages a non-empty array of objects
 * with a known role, tools (when given) an array.  *msgs and *tools (NULL
 * when not given) are the parsed trees, which the caller frees.
 */
static LlmStatus
parse_conversation(const LlmChatRequest *req, LlmJson **msgs, LlmJson **tools, LlmError *err)
{
	static const char *const roles[] = {"system", "user", "assistant", "tool"};
	LlmStatus	st;

	*msgs = *tools = NULL;
	st = llm_json_parse(req->messages, req->messages_len, msgs, err);
	if (st != LLM_OK)
		return llm_error_set(err, LLM_ERR_INVALID, "the messages are not JSON: %s", err->msg);
	if ((*msgs)->type != LLM_JSON_ARRAY || (*msgs)->n == 0)
		return llm_error_set(err, LLM_ERR_INVALID, "the messages must be a non-empty JSON array");
	for (int i = 0; i < (*msgs)->n; i++)
	{
		const LlmJson *m = &(*msgs)->items[i];
		const LlmJson *role = llm_json_member(m, "role");
		bool		known = false;

		if (m->type != LLM_JSON_OBJECT)
			return llm_error_set(err, LLM_ERR_INVALID, "message %d is not a JSON object", i + 1);
		if (role == NULL || role->type != LLM_JSON_STRING)
			return llm_error_set(err, LLM_ERR_INVALID, "message %d has no \"role\" string", i + 1);
		for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]); k++)
			known |= strcmp(role->str, roles[k]) == 0;
		if (!known)
			return llm_error_set(err, LLM_ERR_INVALID,
								 "message %d has the role \"%.64s\"; roles are system, user, assistant and tool",
								 i + 1, role->str);
	}
	if (req->tools == NULL)
		return LLM_OK;
	st = llm_json_parse(req->tools, req->tools_len, tools, err);
	if (st != LLM_OK)
		return llm_error_set(err, LLM_ERR_INVALID, "the tools are not JSON: %s", err->msg);
	if ((*tools)->type != LLM_JSON_ARRAY)
		return llm_error_set(err, LLM_ERR_INVALID, "the tools must be a JSON array");
	return LLM_OK;
}

/* Render a conversation with a template (see chat.h). */
LlmStatus
llm_chat_render(const LlmJinja *t, const LlmChatRequest *req, const LlmChatContext *ctx,
				LlmJinjaOutput *out, LlmError *err)
{
	LlmJinjaVars *v = NULL;
	LlmJson    *msgs;
	LlmJson    *tools;
	LlmStatus	st;

	memset(out, 0, sizeof(*out));
	st = parse_conversation(req, &msgs, &tools, err);
	if (st == LLM_OK && (v = llm_jinja_vars_new()) == NULL)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory rendering a chat template");
	/* the roles were checked to be one of four words: template text, as in '<|' + role + '|>' */
	if (st == LLM_OK)
		st = llm_jinja_vars_set_tree(v, "messages", msgs, true, "role", err);
	/* transformers passes tools and documents always, None when not given */
	if (st == LLM_OK)
		st = tools != NULL ? llm_jinja_vars_set_tree(v, "tools", tools, true, NULL, err) :
			llm_jinja_vars_set_json(v, "tools", "null", 4, false, err);
	if (st == LLM_OK)
		st = llm_jinja_vars_set_json(v, "documents", "null", 4, false, err);
	if (st == LLM_OK)
		st = llm_jinja_vars_set_bool(v, "add_generation_prompt", req->add_generation_prompt, err);
	if (st == LLM_OK && req->enable_thinking >= 0)
		st = llm_jinja_vars_set_bool(v, "enable_thinking", req->enable_thinking != 0, err);
	if (st == LLM_OK)
		st = llm_jinja_vars_set_string(v, "bos_token", ctx->bos, strlen(ctx->bos), false, err);
	if (st == LLM_OK)
		st = llm_jinja_vars_set_string(v, "eos_token", ctx->eos, strlen(ctx->eos), false, err);
	if (st == LLM_OK && ctx->year > 0)
		llm_jinja_vars_set_date(v, ctx->year, ctx->month, ctx->day);
	if (st == LLM_OK)
		st = llm_jinja_render(t, v, NULL, out, err);
	llm_jinja_vars_free(v);
	llm_json_free(msgs);
	llm_json_free(tools);
	return st;
}

/* Parse a GGUF file's tokenizer.chat_template (see chat.h). */
LlmStatus
llm_chat_template_load(const LlmGguf *g, const char *name, LlmJinja **out, LlmError *err)
{
	char	   *tmpl = NULL;
	LlmStatus	st;
	char		msg[sizeof(err->msg)];

	*out = NULL;
	if (llm_gguf_get(g, "tokenizer.chat_template") == NULL)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "model \"%s\" has no chat template", name);
	st = llm_gguf_get_str(g, "tokenizer.chat_template", &tmpl, err);
	if (st != LLM_OK)
		return st;
	st = llm_jinja_parse(tmpl, strlen(tmpl), out, err);
	free(tmpl);
	if (st == LLM_OK || st == LLM_ERR_NOMEM)
		return st;
	memcpy(msg, err->msg, sizeof(msg));
	return llm_error_set(err, LLM_ERR_UNSUPPORTED, "model \"%s\": %s", name, msg);
}

/* The text of token id, or "" when there is none. */
const char *
llm_chat_token_text(const LlmTokenizer *t, int32_t id)
{
	const char *s = id >= 0 ? llm_token_text(t, id) : NULL;

	return s != NULL ? s : "";
}

/* Tokenize a continuation to score after a prompt (see engine.h). */
LlmStatus
llm_continuation_tokenize(const LlmModel *m, const char *text, size_t len, int32_t **ids, int *n_ids,
						  LlmError *err)
{
	return llm_tokenize(m->tokenizer, text, len, false, false, ids, n_ids, err);
}

/* Whether model m has a chat template. */
bool
llm_model_has_chat_template(const LlmModel *m)
{
	return llm_gguf_get(m->gguf, "tokenizer.chat_template") != NULL;
}

/* Tokenize a conversation with model m's template (see engine.h). */
LlmStatus
llm_chat_tokenize_messages(const LlmModel *m, const LlmChatRequest *req, int32_t **ids, int *n_ids,
						   LlmError *err)
{
	const LlmTokenizer *t = m->tokenizer;
	LlmChatContext ctx = {llm_chat_token_text(t, llm_tokenizer_bos(t)), llm_chat_token_text(t, llm_tokenizer_eos(t)),
	0, 0, 0};
	LlmJinjaOutput out;
	uint8_t    *plain;
	LlmStatus	st;
	char		msg[sizeof(err->msg)];

	if (m->chat_template == NULL)
	{
		memcpy(err->msg, m->chat_template_error, sizeof(err->msg));
		err->status = m->chat_template_status;
		return m->chat_template_status;
	}
	st = llm_chat_render(m->chat_template, req, &ctx, &out, err);
	if (st == LLM_ERR_UNSUPPORTED)
	{
		memcpy(msg, err->msg, sizeof(msg));
		return llm_error_set(err, st, "model \"%s\": %s", m->info.name, msg);
	}
	if (st != LLM_OK)
		return st;
	/* the template alone writes BOS, as Hugging Face tokenizes a rendered chat */
	plain = calloc(out.len + 1, 1);
	if (plain == NULL)
	{
		llm_jinja_output_free(&out);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory tokenizing a chat");
	}
	for (int i = 0; i < out.n_user; i++)
		memset(plain + out.user[i].off, 1, out.user[i].len);
	st = llm_tokenize_marked(t, out.text, out.len, false, true, plain, ids, n_ids, err);
	free(plain);
	llm_jinja_output_free(&out);
	return st;
}

/* Append s (len bytes) to b as a JSON string literal. */
static char *
json_string(char *b, const char *s, size_t len)
{
	*b++ = '"';
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c == '"' || c == '\\')
		{
			*b++ = '\\';
			*b++ = (char) c;
		}
		else if (c < 0x20)
			b += sprintf(b, "\\u%04x", c);
		else
			*b++ = (char) c;
	}
	*b++ = '"';
	return b;
}

/* Tokenize a request for generation, in the model's chat format when chat is set (see engine.h). */
LlmStatus
llm_chat_tokenize(const LlmModel *m, const char *system, size_t system_len,
				  const char *prompt, size_t len, bool chat,
				  int32_t **ids, int *n_ids, LlmError *err)
{
	const LlmTokenizer *t = m->tokenizer;
	LlmChatRequest req = {0};
	char	   *json;
	char	   *b;
	LlmStatus	st;

	if (!chat)
	{
		if (system != NULL)
			return llm_error_set(err, LLM_ERR_INVALID, "a system prompt needs chat");
		return llm_tokenize(t, prompt, len, llm_tokenizer_add_bos(t), false, ids, n_ids, err);
	}
	/* [{"role":"system","content":S},{"role":"user","content":P}]: at most 6 bytes per input byte */
	json = malloc(64 + 6 * (system_len + len));
	if (json == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory tokenizing a chat");
	b = json;
	b += sprintf(b, "[");
	if (system != NULL)
	{
		b += sprintf(b, "{\"role\":\"system\",\"content\":");
		b = json_string(b, system, system_len);
		b += sprintf(b, "},");
	}
	b += sprintf(b, "{\"role\":\"user\",\"content\":");
	b = json_string(b, prompt, len);
	b += sprintf(b, "}]");
	req.messages = json;
	req.messages_len = (size_t) (b - json);
	req.add_generation_prompt = true;
	req.enable_thinking = -1;
	st = llm_chat_tokenize_messages(m, &req, ids, n_ids, err);
	free(json);
	return st;
}
