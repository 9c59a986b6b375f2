/*
 * chat.h
 *		Chat templates: wrap a user's prompt in the model's chat format so an
 *		instruction gets an answer rather than a continuation.
 *
 * The template's own markers are tokenized with special tokens recognised
 * (<start_of_turn> becomes its control token); the user's text never is,
 * so a prompt cannot forge a turn.
 */
#ifndef LLM_CHAT_H
#define LLM_CHAT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

typedef enum LlmChatTemplate
{
	LLM_CHAT_NONE,				/* the model has no chat format */
	LLM_CHAT_GEMMA,				/* <start_of_turn>user ... <end_of_turn> */
	LLM_CHAT_LLAMA3				/* <|start_header_id|>user<|end_header_id|> ... <|eot_id|> */
} LlmChatTemplate;

/* The chat format of model m, chosen from its architecture and vocabulary. */
LlmChatTemplate llm_chat_template(const LlmModel *m);

/* "gemma", "llama3" or "none". */
const char *llm_chat_template_name(LlmChatTemplate t);

/* llm_chat_tokenize(), which wraps a prompt in the template, is in engine.h. */

#endif							/* LLM_CHAT_H */
