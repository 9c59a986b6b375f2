/*
 * chat.h
 *		Chat templates: render a conversation in the model's chat format so
 *		that an instruction gets an answer rather than a continuation.
 *
 * A model's format is its tokenizer.chat_template, a Jinja2 program.  The
 * engine runs it with its own interpreter (jinja.h), as transformers does
 * with Jinja2: messages, tools, add_generation_prompt, bos_token,
 * eos_token, enable_thinking where given, raise_exception and
 * strftime_now (a fixed date).  test/chat_template_test.py compares the
 * renderings with Jinja2's on every real template in the repository.
 *
 * The rendering records which bytes came from the messages and tools; the
 * tokenizer recognises control tokens (<|im_start|>) only in the template's
 * own text, so a message cannot forge a turn.
 */
#ifndef LLM_CHAT_H
#define LLM_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "gguf.h"
#include "jinja.h"
#include "tokenizer.h"

/* What a template is given besides the conversation. */
typedef struct LlmChatContext
{
	const char *bos;			/* bos_token: the vocabulary's BOS text, "" when none */
	const char *eos;			/* eos_token */
	int			year,			/* strftime_now's date; year 0: 26 Jul 2024 */
				month,
				day;
} LlmChatContext;

/*
 * Render conversation req with template t into *out (free it with
 * llm_jinja_output_free); the bytes from the messages and tools are in
 * out->user.  LLM_ERR_INVALID for messages that are not a non-empty array
 * of objects with a role among system, user, assistant and tool, tools that
 * are not an array, or a template that raises; LLM_ERR_UNSUPPORTED for
 * what the interpreter does not implement.
 */
LlmStatus	llm_chat_render(const LlmJinja *t, const LlmChatRequest *req, const LlmChatContext *ctx,
							LlmJinjaOutput *out, LlmError *err);

/*
 * GGUF g's tokenizer.chat_template, parsed into *out; LLM_ERR_UNSUPPORTED
 * naming the model (name) when it has none or it cannot be parsed.
 */
LlmStatus	llm_chat_template_load(const LlmGguf *g, const char *name, LlmJinja **out, LlmError *err);

/* The text of token id in t (BOS, EOS), or "" when there is none. */
const char *llm_chat_token_text(const LlmTokenizer *t, int32_t id);

/* llm_chat_tokenize() and llm_chat_tokenize_messages(), which render and tokenize a request, are in engine.h. */

#endif							/* LLM_CHAT_H */
