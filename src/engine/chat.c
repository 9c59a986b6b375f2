/*
 * chat.c
 *		Chat templates written in C, one per supported family (see chat.h).
 */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

#include "model.h"

/* One piece of a template: text, and whether special tokens in it are recognised. */
typedef struct ChatPart
{
	const char *text;
	size_t		len;
	bool		special;
} ChatPart;

/* The chat format of model m, chosen from its architecture and vocabulary. */
LlmChatTemplate
llm_chat_template(const LlmModel *m)
{
	const LlmTokenizer *t = m->tokenizer;

	if (m->config.arch == LLM_ARCH_GEMMA3 || llm_tokenizer_find(t, "<start_of_turn>") >= 0)
		return LLM_CHAT_GEMMA;
	if (llm_tokenizer_find(t, "<|start_header_id|>") >= 0 && llm_tokenizer_find(t, "<|eot_id|>") >= 0)
		return LLM_CHAT_LLAMA3;
	return LLM_CHAT_NONE;
}

/* "gemma", "llama3" or "none". */
const char *
llm_chat_template_name(LlmChatTemplate t)
{
	switch (t)
	{
		case LLM_CHAT_GEMMA:
			return "gemma";
		case LLM_CHAT_LLAMA3:
			return "llama3";
		case LLM_CHAT_NONE:
			break;
	}
	return "none";
}

/* Tokenize parts in order into one new array, BOS first when the vocabulary wants it. */
static LlmStatus
tokenize_parts(const LlmTokenizer *t, const ChatPart *parts, int n_parts, int32_t **ids, int *n_ids, LlmError *err)
{
	int32_t    *all = NULL;
	int			n_all = 0;

	for (int i = 0; i < n_parts; i++)
	{
		int32_t    *part = NULL;
		int			n_part = 0;
		int32_t    *grown;
		LlmStatus	st = llm_tokenize(t, parts[i].text, parts[i].len, i == 0 && llm_tokenizer_add_bos(t), parts[i].special,
									  &part, &n_part, err);

		if (st != LLM_OK)
		{
			free(all);
			return st;
		}
		grown = realloc(all, (size_t) (n_all + n_part + 1) * sizeof(int32_t));
		if (grown == NULL)
		{
			free(all);
			free(part);
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory tokenizing the prompt");
		}
		all = grown;
		memcpy(all + n_all, part, (size_t) n_part * sizeof(int32_t));
		n_all += n_part;
		free(part);
	}
	*ids = all;
	*n_ids = n_all;
	return LLM_OK;
}

#define PART(s, special) {s, sizeof(s) - 1, special}

/* Tokenize prompt for generation, wrapped in the model's chat format when chat is set. */
LlmStatus
llm_chat_tokenize(const LlmModel *m, const char *prompt, size_t len, bool chat,
				  int32_t **ids, int *n_ids, LlmError *err)
{
	LlmChatTemplate tmpl = chat ? llm_chat_template(m) : LLM_CHAT_NONE;
	ChatPart	user = {prompt, len, false};

	if (!chat)
		return tokenize_parts(m->tokenizer, &user, 1, ids, n_ids, err);
	switch (tmpl)
	{
		case LLM_CHAT_GEMMA:
			{
				ChatPart	parts[] = {PART("<start_of_turn>user\n", true), user,
				PART("<end_of_turn>\n<start_of_turn>model\n", true)};

				return tokenize_parts(m->tokenizer, parts, 3, ids, n_ids, err);
			}
		case LLM_CHAT_LLAMA3:
			{
				ChatPart	parts[] = {PART("<|start_header_id|>user<|end_header_id|>\n\n", true), user,
				PART("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", true)};

				return tokenize_parts(m->tokenizer, parts, 3, ids, n_ids, err);
			}
		case LLM_CHAT_NONE:
			break;
	}
	return llm_error_set(err, LLM_ERR_UNSUPPORTED, "model \"%s\" has no chat template", m->info.name);
}
