/*
 * chat_detect.c
 *		Recognise a Jinja chat template's family by its signature (chat.h).
 *
 * The rules look for the markers each family writes ("<|im_start|>",
 * "[INST]", ...), most specific first, then read the family's variations
 * from the template: whether it writes bos_token, trims contents, has a
 * place for a system prompt, dates Llama 3's header, what its generation
 * block writes (chat_gen.c), and a default system turn written as one
 * literal.  Templates known to render differently from their family (a
 * fixed preamble in the system turn, tool prompts always written) are
 * refused by name of what differs.
 */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

/* Whether tmpl (len bytes) contains s. */
static bool
has(const char *tmpl, size_t len, const char *s)
{
	size_t		n = strlen(s);

	for (size_t i = 0; i + n <= len; i++)
		if (tmpl[i] == s[0] && memcmp(tmpl + i, s, n) == 0)
			return true;
	return false;
}

/* Templates whose rendering differs from their family's, and what differs. */
static const struct
{
	const char *signature;
	const char *what;
} refused[] = {
	{"ServiceNow", "writes a fixed preamble into the system turn (Apriel)"},
	{"## Metadata", "writes a metadata header into the system turn (SmolLM3)"},
	{"You are a function calling AI model", "always writes a tool-use system prompt (Hermes tool use)"},
	{"<|START_TEXT|>", "writes a fixed preamble into the system turn (Command A)"},
	{"Safety Preamble", "writes a fixed preamble into the system turn (Command R+ tool use)"},
	{"Available functions", "always writes a function-calling system prompt (Functionary)"},
	{"set system_prompt_suffix", "appends a function-calling prompt to the system turn (FireFunction)"},
};

/*
 * A default system turn written as one string literal: the text between
 * open and close (close starting with '<'), with no quote or brace between,
 * the template's "\n" escapes decoded; NULL when the template has none.
 */
static char *
literal_between(const char *tmpl, size_t len, const char *open, const char *close)
{
	size_t		n = strlen(open);
	size_t		c = strlen(close);

	for (size_t i = 0; i + n <= len; i++)
	{
		size_t		j;
		char	   *out;
		size_t		o = 0;

		if (memcmp(tmpl + i, open, n) != 0)
			continue;
		for (j = i + n; j < len; j++)
			if (tmpl[j] == '\'' || tmpl[j] == '"' || tmpl[j] == '{' || tmpl[j] == '<')
				break;
		if (j == i + n || j + c > len || memcmp(tmpl + j, close, c) != 0)
			continue;
		out = malloc(j - (i + n) + 1);
		if (out == NULL)
			return NULL;
		for (size_t q = i + n; q < j; q++)
		{
			if (tmpl[q] == '\\' && q + 1 < j)
			{
				q++;
				out[o++] = tmpl[q] == 'n' ? '\n' : tmpl[q];
			}
			else
				out[o++] = tmpl[q];
		}
		out[o] = '\0';
		return out;
	}
	return NULL;
}

/* The default system turn of a ChatML template, with "\n" escaped or written out. */
static char *
chatml_default_system(const char *tmpl, size_t len)
{
	char	   *s = literal_between(tmpl, len, "<|im_start|>system\\n", "<|im_end|>");

	return s != NULL ? s : literal_between(tmpl, len, "<|im_start|>system\n", "<|im_end|>");
}

/* Read the text after the assistant's header from the generation block into f->suffix. */
static LlmStatus
generation_suffix(const char *tmpl, size_t len, const char *header, LlmChatFormat *f, LlmError *err)
{
	char		gen[256];
	size_t		n = strlen(header);
	LlmStatus	st = llm_chat_generation_text(tmpl, len, gen, sizeof(gen), err);

	if (st != LLM_OK)
		return st;
	if (strncmp(gen, header, n) != 0)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "the chat template's generation prompt \"%s\" does not open with \"%s\"", gen, header);
	if (strlen(gen + n) >= sizeof(f->suffix))
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the chat template's generation prompt is too long");
	strcpy(f->suffix, gen + n);
	return LLM_OK;
}

/* Which of Mistral's [INST] formats (or Llama 2's) tmpl is; NONE when none fits. */
static LlmChatFamily
inst_family(const char *tmpl, size_t len, LlmChatFormat *f)
{
	if (has(tmpl, len, "<<SYS>>"))
	{
		/* Vigogne's default system turn sits in a branch the engine does not evaluate */
		f->needs_system = has(tmpl, len, "true == true");
		return LLM_CHAT_LLAMA2;
	}
	if (has(tmpl, len, "' [INST] '") || has(tmpl, len, "\" [INST] \""))
		return LLM_CHAT_MISTRAL_V1;
	if (has(tmpl, len, "'[INST] '") || has(tmpl, len, "\"[INST] \""))
	{
		if (has(tmpl, len, "' [/INST]'") || has(tmpl, len, "\" [/INST]\""))
		{
			f->system = LLM_CHAT_SYSTEM_REFUSED;
			return has(tmpl, len, "system_message") ? LLM_CHAT_NONE : LLM_CHAT_MISTRAL_V0;
		}
		return LLM_CHAT_MISTRAL_V3;
	}
	if (has(tmpl, len, "'[INST]'") || has(tmpl, len, "\"[INST]\""))
		return LLM_CHAT_MISTRAL_V3_TEKKEN;
	return LLM_CHAT_NONE;
}

/* Recognise the family of a Jinja chat template (see chat.h). */
LlmStatus
llm_chat_detect(const char *tmpl, size_t len, LlmChatFormat *f, LlmError *err)
{
	LlmChatFamily fam = LLM_CHAT_NONE;

	memset(f, 0, sizeof(*f));
	f->system = LLM_CHAT_SYSTEM_TURN;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (has(tmpl, len, refused[i].signature))
			return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the chat template %s", refused[i].what);

	f->bos = has(tmpl, len, "bos_token");
	f->trim = has(tmpl, len, "trim") || has(tmpl, len, "strip()");
	if (has(tmpl, len, "<|im_start|>"))		/* ChatML trims only in Qwen 3.5's way */
		f->trim = has(tmpl, len, "render_content(message.content, false)|trim");
	if (has(tmpl, len, "<|im_start|>"))
		fam = has(tmpl, len, "<|im_sep|>") ? LLM_CHAT_PHI4 : LLM_CHAT_CHATML;
	else if (has(tmpl, len, "<|start_header_id|>"))
	{
		fam = LLM_CHAT_LLAMA3;
		if (has(tmpl, len, "Cutting Knowledge Date: December 2023"))
		{
			if (!has(tmpl, len, "Today Date: "))
				return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the chat template writes an undated knowledge header");
			f->date = has(tmpl, len, "strftime_now") ? LLM_CHAT_DATE_TODAY : LLM_CHAT_DATE_FIXED;
		}
	}
	else if (has(tmpl, len, "<start_of_turn>"))
	{
		fam = LLM_CHAT_GEMMA;
		f->system = has(tmpl, len, "first_user_prefix") ? LLM_CHAT_SYSTEM_FOLD : LLM_CHAT_SYSTEM_REFUSED;
	}
	else if (has(tmpl, len, "[SYSTEM_PROMPT]"))
	{
		fam = has(tmpl, len, "[SYSTEM_PROMPT] ") ? LLM_CHAT_MISTRAL_V7 : LLM_CHAT_MISTRAL_V7_TEKKEN;
		f->needs_system = has(tmpl, len, "default_system_message");
	}
	else if (has(tmpl, len, "[INST]"))
		fam = inst_family(tmpl, len, f);
	else if (has(tmpl, len, "<｜User｜>") && has(tmpl, len, "<｜Assistant｜>"))
		fam = LLM_CHAT_DEEPSEEK;
	else if (has(tmpl, len, "'System: ' + ns.system_prompt"))
		fam = LLM_CHAT_RWKV;
	else if (has(tmpl, len, "'User: ' + message['content']"))
		fam = LLM_CHAT_DEEPSEEK2;
	else if (has(tmpl, len, "<|START_OF_TURN_TOKEN|>"))
		fam = LLM_CHAT_COMMAND_R;
	else if (has(tmpl, len, "<|start_of_role|>"))
	{
		fam = LLM_CHAT_GRANITE;
		/* Granite 3.3 dates its default system turn */
		f->needs_system = has(tmpl, len, "strftime_now");
	}
	else if (has(tmpl, len, "<|end|>") &&
			 (has(tmpl, len, "<|user|>") || has(tmpl, len, "'<|' + message['role'] + '|>'")))
	{
		fam = LLM_CHAT_PHI3;
		if (!has(tmpl, len, "<|system|>") && !has(tmpl, len, "'<|' + message['role'] + '|>'"))
			f->system = LLM_CHAT_SYSTEM_DROPPED;	/* Phi-3 mini and medium */
	}
	else if (has(tmpl, len, "<|user|>") && has(tmpl, len, "eos_token"))
		fam = LLM_CHAT_ZEPHYR;
	else if (has(tmpl, len, "USER: ") && has(tmpl, len, "ASSISTANT:"))
		fam = has(tmpl, len, "SYSTEM: ") ? LLM_CHAT_VICUNA_ORCA : LLM_CHAT_VICUNA;
	else if (has(tmpl, len, "### Instruction:") && has(tmpl, len, "### Response:"))
	{
		fam = LLM_CHAT_ALPACA;
		f->needs_system = has(tmpl, len, "if not ns.found");	/* DeepSeek Coder's default */
	}

	if (fam == LLM_CHAT_NONE)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the chat template is of no family the engine knows");
	f->family = fam;
	if (fam == LLM_CHAT_CHATML)
	{
		LlmStatus	st = generation_suffix(tmpl, len, "<|im_start|>assistant\n", f, err);

		if (st != LLM_OK)
			return st;
		f->default_system = chatml_default_system(tmpl, len);
		/* Nemotron 3 writes an empty system turn when none is given */
		if (f->default_system == NULL && has(tmpl, len, "{{- \"<|im_start|>system\\n\" }}"))
			f->default_system = strdup("");
	}
	else if (fam == LLM_CHAT_GRANITE && !f->needs_system)
	{
		const char *lit;
		size_t		lit_len;

		/* Granite 4.0 */
		if (llm_chat_set_literal(tmpl, len, "g4_default_system_message", strlen("g4_default_system_message"),
								 &lit, &lit_len))
			f->default_system = strndup(lit, lit_len);
	}
	else if (fam == LLM_CHAT_RWKV)
		return generation_suffix(tmpl, len, "Assistant:", f, err);
	else if (fam == LLM_CHAT_DEEPSEEK)
	{
		LlmStatus	st = generation_suffix(tmpl, len, "<｜Assistant｜>", f, err);

		if (st != LLM_OK)
			return st;
		/* llama.cpp's own R1 template ends each user turn with end-of-sentence */
		f->end_user_turn = has(tmpl, len, "'<｜User｜>' + message['content'] + '<｜end▁of▁sentence｜>'");
	}
	return LLM_OK;
}

/* Free what llm_chat_detect() allocated in *f. */
void
llm_chat_format_free(LlmChatFormat *f)
{
	free(f->default_system);
	f->default_system = NULL;
}

/* The family's name: "chatml", "llama3", "gemma", ..., or "none". */
const char *
llm_chat_family_name(LlmChatFamily family)
{
	switch (family)
	{
		case LLM_CHAT_CHATML:
			return "chatml";
		case LLM_CHAT_LLAMA2:
			return "llama2";
		case LLM_CHAT_LLAMA3:
			return "llama3";
		case LLM_CHAT_GEMMA:
			return "gemma";
		case LLM_CHAT_PHI3:
			return "phi3";
		case LLM_CHAT_PHI4:
			return "phi4";
		case LLM_CHAT_MISTRAL_V1:
			return "mistral-v1";
		case LLM_CHAT_MISTRAL_V0:
			return "mistral-v0";
		case LLM_CHAT_MISTRAL_V3:
			return "mistral-v3";
		case LLM_CHAT_MISTRAL_V3_TEKKEN:
			return "mistral-v3-tekken";
		case LLM_CHAT_MISTRAL_V7:
			return "mistral-v7";
		case LLM_CHAT_MISTRAL_V7_TEKKEN:
			return "mistral-v7-tekken";
		case LLM_CHAT_DEEPSEEK:
			return "deepseek";
		case LLM_CHAT_DEEPSEEK2:
			return "deepseek2";
		case LLM_CHAT_COMMAND_R:
			return "command-r";
		case LLM_CHAT_GRANITE:
			return "granite";
		case LLM_CHAT_ZEPHYR:
			return "zephyr";
		case LLM_CHAT_VICUNA:
			return "vicuna";
		case LLM_CHAT_VICUNA_ORCA:
			return "vicuna-orca";
		case LLM_CHAT_ALPACA:
			return "alpaca";
		case LLM_CHAT_RWKV:
			return "rwkv-world";
		case LLM_CHAT_NONE:
			break;
	}
	return "none";
}
