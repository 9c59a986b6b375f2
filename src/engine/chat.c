/*
 * chat.c
 *		Render a system and user turn in a recognised chat format, and
 *		tokenize the rendering for generation (see chat.h).
 *
 * Each family writes what its real templates write with Hugging Face's
 * settings and add_generation_prompt; test/chat_template_test.py holds the
 * comparison with Jinja2.  Contents are trimmed where the family's
 * templates filter them with trim or strip(), which remove the characters
 * Python counts as whitespace.
 */
#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "model.h"
#include "tokenizer.h"

/* Add a part: template text when special, else the caller's text. */
static void
add(LlmChatRendering *r, const char *text, size_t len, bool special)
{
	if (len == 0 || r->n_parts >= LLM_CHAT_MAX_PARTS)
		return;
	r->parts[r->n_parts].text = text;
	r->parts[r->n_parts].len = len;
	r->parts[r->n_parts].special = special;
	r->n_parts++;
}

/* Add template text (a C string). */
static void
lit(LlmChatRendering *r, const char *text)
{
	add(r, text, strlen(text), true);
}

/* Bytes of the Python-whitespace character at s (n bytes left), or 0 when it is none. */
static size_t
space_at(const unsigned char *s, size_t n)
{
	if (n >= 1 && ((*s >= 0x09 && *s <= 0x0d) || *s == ' ' || (*s >= 0x1c && *s <= 0x1f)))
		return 1;
	if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
		return 2;
	if (n >= 3 && s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80)
		return 3;				/* U+1680 */
	if (n >= 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
		return 3;				/* U+2000..U+200A, U+2028, U+2029, U+202F */
	if (n >= 3 && s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f)
		return 3;				/* U+205F */
	if (n >= 3 && s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80)
		return 3;				/* U+3000 */
	return 0;
}

/* Strip Python whitespace from the start (left) and the end (right) of *s, *len. */
static void
strip(const char **s, size_t *len, bool left, bool right)
{
	const unsigned char *b = (const unsigned char *) *s;
	const unsigned char *e = b + *len;

	while (left && b < e)
	{
		size_t		k = space_at(b, (size_t) (e - b));

		if (k == 0)
			break;
		b += k;
	}
	while (right && b < e)
	{
		size_t		k = 0;

		/* the last character: step back over UTF-8 continuation bytes */
		const unsigned char *c = e - 1;

		while (c > b && (*c & 0xc0) == 0x80 && e - c < 3)
			c--;
		k = space_at(c, (size_t) (e - c));
		if (k != (size_t) (e - c))
			break;
		e = c;
	}
	*s = (const char *) b;
	*len = (size_t) (e - b);
}

/* A content part, trimmed when the format trims. */
static void
content(LlmChatRendering *r, const LlmChatFormat *f, const char *s, size_t len)
{
	if (f->trim)
		strip(&s, &len, true, true);
	add(r, s, len, false);
}

/* Render in as format f does with add_generation_prompt (see chat.h). */
LlmStatus
llm_chat_render(const LlmChatFormat *f, const LlmChatInput *in, LlmChatRendering *r, LlmError *err)
{
	const char *sys = in->system;
	size_t		sys_len = in->system_len;
	bool		sys_is_default = false;
	const char *u = in->user;
	size_t		u_len = in->user_len;

	r->n_parts = 0;
	if (f->system == LLM_CHAT_SYSTEM_DROPPED)
		sys = NULL;
	if (sys == NULL && f->default_system != NULL)
	{
		sys = f->default_system;
		sys_len = strlen(sys);
		sys_is_default = true;
	}
	if (in->system != NULL && f->system == LLM_CHAT_SYSTEM_REFUSED)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the model's %s chat template has no place for a system prompt",
							 llm_chat_family_name(f->family));
	if (in->system == NULL && f->needs_system)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "the model's %s chat template writes a default system prompt the engine does not render; give a system prompt",
							 llm_chat_family_name(f->family));
	if (f->bos)
		lit(r, in->bos);

#define SYSTEM_TEXT() add(r, sys, sys_len, sys_is_default)
	switch (f->family)
	{
		case LLM_CHAT_CHATML:
			if (sys != NULL)
			{
				lit(r, "<|im_start|>system\n");
				if (sys_is_default)
					SYSTEM_TEXT();
				else
					content(r, f, sys, sys_len);
				lit(r, "<|im_end|>\n");
			}
			lit(r, "<|im_start|>user\n");
			content(r, f, u, u_len);
			lit(r, "<|im_end|>\n<|im_start|>assistant\n");
			lit(r, f->suffix);
			break;
		case LLM_CHAT_PHI4:
			if (sys != NULL)
			{
				lit(r, "<|im_start|>system<|im_sep|>");
				SYSTEM_TEXT();
				lit(r, "<|im_end|>");
			}
			lit(r, "<|im_start|>user<|im_sep|>");
			add(r, u, u_len, false);
			lit(r, "<|im_end|><|im_start|>assistant<|im_sep|>");
			break;
		case LLM_CHAT_LLAMA3:
			if (f->date != LLM_CHAT_DATE_NONE)
			{
				snprintf(r->buf, sizeof(r->buf), "Cutting Knowledge Date: December 2023\nToday Date: %s\n\n",
						 f->date == LLM_CHAT_DATE_TODAY && in->date != NULL ? in->date : "26 Jul 2024");
				lit(r, "<|start_header_id|>system<|end_header_id|>\n\n");
				lit(r, r->buf);
				if (sys != NULL)
					content(r, f, sys, sys_len);
				lit(r, "<|eot_id|>");
			}
			else if (sys != NULL)
			{
				lit(r, "<|start_header_id|>system<|end_header_id|>\n\n");
				content(r, f, sys, sys_len);
				lit(r, "<|eot_id|>");
			}
			lit(r, "<|start_header_id|>user<|end_header_id|>\n\n");
			content(r, f, u, u_len);
			lit(r, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
			break;
		case LLM_CHAT_GEMMA:
			lit(r, "<start_of_turn>user\n");
			if (sys != NULL)
			{
				SYSTEM_TEXT();
				lit(r, "\n\n");
			}
			content(r, f, u, u_len);
			lit(r, "<end_of_turn>\n<start_of_turn>model\n");
			break;
		case LLM_CHAT_PHI3:
			if (sys != NULL)
			{
				lit(r, "<|system|>\n");
				SYSTEM_TEXT();
				lit(r, "<|end|>\n");
			}
			lit(r, "<|user|>\n");
			add(r, u, u_len, false);
			lit(r, "<|end|>\n<|assistant|>\n");
			break;
		case LLM_CHAT_ZEPHYR:
			if (sys != NULL)
			{
				lit(r, "<|system|>\n");
				SYSTEM_TEXT();
				lit(r, in->eos);
				lit(r, "\n");
			}
			lit(r, "<|user|>\n");
			add(r, u, u_len, false);
			lit(r, in->eos);
			lit(r, "\n<|assistant|>\n");
			break;
		case LLM_CHAT_LLAMA2:
			/* content.strip() of the whole first message, <<SYS>> block included */
			lit(r, "[INST] ");
			if (sys != NULL)
			{
				strip(&u, &u_len, false, true);
				lit(r, "<<SYS>>\n");
				SYSTEM_TEXT();
				lit(r, u_len > 0 ? "\n<</SYS>>\n\n" : "\n<</SYS>>");
				add(r, u, u_len, false);
			}
			else
				content(r, f, u, u_len);
			lit(r, " [/INST]");
			break;
		case LLM_CHAT_MISTRAL_V1:
		case LLM_CHAT_MISTRAL_V0:
		case LLM_CHAT_MISTRAL_V3:
		case LLM_CHAT_MISTRAL_V3_TEKKEN:
			lit(r, f->family == LLM_CHAT_MISTRAL_V1 ? " [INST] " :
				f->family == LLM_CHAT_MISTRAL_V3_TEKKEN ? "[INST]" : "[INST] ");
			if (sys != NULL)
			{
				SYSTEM_TEXT();
				lit(r, "\n\n");
			}
			add(r, u, u_len, false);
			lit(r, f->family == LLM_CHAT_MISTRAL_V1 || f->family == LLM_CHAT_MISTRAL_V0 ? " [/INST]" : "[/INST]");
			break;
		case LLM_CHAT_MISTRAL_V7:
		case LLM_CHAT_MISTRAL_V7_TEKKEN:
			{
				bool		spaced = f->family == LLM_CHAT_MISTRAL_V7;

				if (sys != NULL)
				{
					lit(r, spaced ? "[SYSTEM_PROMPT] " : "[SYSTEM_PROMPT]");
					SYSTEM_TEXT();
					lit(r, "[/SYSTEM_PROMPT]");
				}
				lit(r, spaced ? "[INST] " : "[INST]");
				add(r, u, u_len, false);
				lit(r, "[/INST]");
				break;
			}
		case LLM_CHAT_DEEPSEEK:
			if (sys != NULL)
				SYSTEM_TEXT();
			lit(r, "<｜User｜>");
			add(r, u, u_len, false);
			if (f->end_user_turn)
				lit(r, "<｜end▁of▁sentence｜>");
			lit(r, "<｜Assistant｜>");
			lit(r, f->suffix);
			break;
		case LLM_CHAT_RWKV:
			if (sys != NULL && sys_len > 0)
			{
				lit(r, "System: ");
				SYSTEM_TEXT();
				lit(r, "\n\n");
			}
			lit(r, "User: ");
			content(r, f, u, u_len);
			lit(r, "\n\nAssistant:");
			lit(r, f->suffix);
			break;
		case LLM_CHAT_DEEPSEEK2:
			if (sys != NULL)
			{
				SYSTEM_TEXT();
				lit(r, "\n\n");
			}
			lit(r, "User: ");
			add(r, u, u_len, false);
			lit(r, "\n\nAssistant:");
			break;
		case LLM_CHAT_COMMAND_R:
			if (sys != NULL)
			{
				lit(r, "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>");
				SYSTEM_TEXT();
				lit(r, "<|END_OF_TURN_TOKEN|>");
			}
			lit(r, "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>");
			content(r, f, u, u_len);
			lit(r, "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
			break;
		case LLM_CHAT_GRANITE:
			if (sys != NULL)
			{
				lit(r, "<|start_of_role|>system<|end_of_role|>");
				SYSTEM_TEXT();
				lit(r, "<|end_of_text|>\n");
			}
			lit(r, "<|start_of_role|>user<|end_of_role|>");
			add(r, u, u_len, false);
			lit(r, "<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
			break;
		case LLM_CHAT_VICUNA:
		case LLM_CHAT_VICUNA_ORCA:
			if (sys != NULL)
			{
				if (f->family == LLM_CHAT_VICUNA_ORCA)
					lit(r, "SYSTEM: ");
				SYSTEM_TEXT();
				lit(r, f->family == LLM_CHAT_VICUNA_ORCA ? "\n" : "\n\n");
			}
			lit(r, "USER: ");
			add(r, u, u_len, false);
			lit(r, "\nASSISTANT:");
			break;
		case LLM_CHAT_ALPACA:
			if (sys != NULL)
				SYSTEM_TEXT();
			lit(r, "### Instruction:\n");
			add(r, u, u_len, false);
			lit(r, "\n### Response:\n");
			break;
		case LLM_CHAT_NONE:
			return llm_error_set(err, LLM_ERR_UNSUPPORTED, "no chat format");
	}
#undef SYSTEM_TEXT
	if (r->n_parts >= LLM_CHAT_MAX_PARTS)
		return llm_error_set(err, LLM_ERR_LIMIT, "a chat rendering has more than %d parts", LLM_CHAT_MAX_PARTS);
	return LLM_OK;
}

/* Tokenize parts in order into one new array, BOS first when add_bos. */
static LlmStatus
tokenize_parts(const LlmTokenizer *t, const LlmChatPart *parts, int n_parts, bool add_bos,
			   int32_t **ids, int *n_ids, LlmError *err)
{
	int32_t    *all = NULL;
	int			n_all = 0;

	for (int i = 0; i < n_parts; i++)
	{
		int32_t    *part = NULL;
		int			n_part = 0;
		int32_t    *grown;
		LlmStatus	st = llm_tokenize(t, parts[i].text, parts[i].len, i == 0 && add_bos, parts[i].special,
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

/* The chat format of a GGUF file's tokenizer.chat_template (see chat.h). */
LlmStatus
llm_chat_format_load(const LlmGguf *g, const char *name, LlmChatFormat *f, LlmError *err)
{
	char	   *tmpl = NULL;
	LlmStatus	st;
	char		msg[sizeof(err->msg)];

	memset(f, 0, sizeof(*f));
	if (llm_gguf_get(g, "tokenizer.chat_template") == NULL)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "model \"%s\" has no chat template", name);
	st = llm_gguf_get_str(g, "tokenizer.chat_template", &tmpl, err);
	if (st != LLM_OK)
		return st;
	st = llm_chat_detect(tmpl, strlen(tmpl), f, err);
	free(tmpl);
	if (st != LLM_ERR_UNSUPPORTED)
		return st;
	memcpy(msg, err->msg, sizeof(msg));
	return llm_error_set(err, st, "model \"%s\": %s", name, msg);
}

/* The text of token id, or "" when there is none. */
const char *
llm_chat_token_text(const LlmTokenizer *t, int32_t id)
{
	const char *s = id >= 0 ? llm_token_text(t, id) : NULL;

	return s != NULL ? s : "";
}

/*
 * The text a format's templates write right after an assistant's reply,
 * up to the end of its turn (what the model was trained to say after an
 * answer, and what ends its generation), into out (outsz bytes): "<|im_end|>",
 * "<end_of_turn>", "<|eot_id|>", ..., or the vocabulary's EOS text eos
 * where the template writes eos_token (Llama 2: a space, then EOS).
 * test/chat_template_test.py checks it against Jinja2 for every template.
 */
void
llm_chat_end_of_turn(const LlmChatFormat *f, const char *eos, char *out, size_t outsz)
{
	const char *lit = NULL;

	switch (f->family)
	{
		case LLM_CHAT_CHATML:
		case LLM_CHAT_PHI4:
			lit = "<|im_end|>";
			break;
		case LLM_CHAT_LLAMA3:
			lit = "<|eot_id|>";
			break;
		case LLM_CHAT_GEMMA:
			lit = "<end_of_turn>";
			break;
		case LLM_CHAT_PHI3:
			lit = "<|end|>";
			break;
		case LLM_CHAT_COMMAND_R:
			lit = "<|END_OF_TURN_TOKEN|>";
			break;
		case LLM_CHAT_GRANITE:
			lit = "<|end_of_text|>";
			break;
		case LLM_CHAT_DEEPSEEK:
			lit = "<｜end▁of▁sentence｜>";
			break;
		case LLM_CHAT_ALPACA:
			lit = "\n<|EOT|>";
			break;
		case LLM_CHAT_RWKV:
			lit = "\n\n";
			break;
		case LLM_CHAT_LLAMA2:
			snprintf(out, outsz, " %s", eos);
			return;
		default:
			/* Mistral, DeepSeek V2, Zephyr, Vicuna: eos_token */
			lit = eos;
			break;
	}
	snprintf(out, outsz, "%s", lit);
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

/* Tokenize a request for generation, in the model's chat format when chat is set (see engine.h). */
LlmStatus
llm_chat_tokenize(const LlmModel *m, const char *system, size_t system_len,
				  const char *prompt, size_t len, bool chat,
				  int32_t **ids, int *n_ids, LlmError *err)
{
	const LlmTokenizer *t = m->tokenizer;
	LlmChatPart plain = {prompt, len, false};
	LlmChatFormat f;
	LlmChatInput in = {system, system_len, prompt, len,
	llm_chat_token_text(t, llm_tokenizer_bos(t)), llm_chat_token_text(t, llm_tokenizer_eos(t)), NULL};
	LlmChatRendering r;
	LlmStatus	st;
	char		msg[sizeof(err->msg)];

	if (!chat)
	{
		if (system != NULL)
			return llm_error_set(err, LLM_ERR_INVALID, "a system prompt needs chat");
		return tokenize_parts(t, &plain, 1, llm_tokenizer_add_bos(t), ids, n_ids, err);
	}
	st = llm_chat_format_load(m->gguf, m->info.name, &f, err);
	if (st != LLM_OK)
		return st;
	st = llm_chat_render(&f, &in, &r, err);
	/* the template alone writes BOS, as Hugging Face tokenizes a rendered chat */
	if (st == LLM_OK)
		st = tokenize_parts(t, r.parts, r.n_parts, false, ids, n_ids, err);
	else if (st == LLM_ERR_UNSUPPORTED)
	{
		memcpy(msg, err->msg, sizeof(msg));
		st = llm_error_set(err, st, "model \"%s\": %s", m->info.name, msg);
	}
	llm_chat_format_free(&f);
	return st;
}

/*
 * Tokenize a conversation (see engine.h).  Interim: until the Jinja
 * interpreter renders any conversation, only [system?, user] with the
 * generation prompt, through the family renderer.
 */
LlmStatus
llm_chat_tokenize_messages(const LlmModel *m, const LlmChatRequest *req, int32_t **ids, int *n_ids,
						   LlmError *err)
{
	LlmJson    *msgs = NULL;
	const LlmJson *sys = NULL;
	const LlmJson *user = NULL;
	LlmStatus	st;

	st = llm_json_parse(req->messages, req->messages_len, &msgs, err);
	if (st != LLM_OK)
		return st;
	if (msgs->type == LLM_JSON_ARRAY && msgs->n >= 1 && msgs->n <= 2)
	{
		const LlmJson *last = &msgs->items[msgs->n - 1];
		const LlmJson *first = &msgs->items[0];
		const LlmJson *r;

		r = llm_json_member(last, "role");
		if (r != NULL && r->type == LLM_JSON_STRING && strcmp(r->str, "user") == 0)
			user = llm_json_member(last, "content");
		r = llm_json_member(first, "role");
		if (msgs->n == 2 && r != NULL && r->type == LLM_JSON_STRING && strcmp(r->str, "system") == 0)
			sys = llm_json_member(first, "content");
		if (msgs->n == 2 && (sys == NULL || sys->type != LLM_JSON_STRING))
			user = NULL;
	}
	if (user == NULL || user->type != LLM_JSON_STRING || !req->add_generation_prompt || req->tools != NULL)
		st = llm_error_set(err, LLM_ERR_UNSUPPORTED, "only a system and a user message are supported yet");
	else
		st = llm_chat_tokenize(m, sys ? sys->str : NULL, sys ? sys->len : 0, user->str, user->len, true,
							   ids, n_ids, err);
	llm_json_free(msgs);
	return st;
}
