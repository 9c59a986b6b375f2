/*
 * chat.h
 *		Chat templates: wrap a user's prompt (and a system prompt) in the
 *		model's chat format so an instruction gets an answer rather than a
 *		continuation.
 *
 * A model's format comes from its tokenizer.chat_template, a Jinja template.
 * The engine does not run Jinja: it recognises the template's family by its
 * signature (chat_detect.c), as llama.cpp does, and renders that family with
 * its own C code (chat.c).  What a family's templates vary in (a BOS first,
 * trimmed contents, a system prompt refused or folded into the user's turn,
 * what follows the assistant's header) is read from the template as flags.
 * A template no rule recognises is refused, never guessed; so is chat on a
 * model without a template.  test/chat_template_test.py renders real
 * templates with Jinja2 beside llm-cli template and compares the bytes.
 *
 * The rendering is a list of parts.  The template's own text is tokenized
 * with special tokens recognised (<|im_start|> becomes its control token);
 * the system and user texts never are, so a prompt cannot forge a turn.
 */
#ifndef LLM_CHAT_H
#define LLM_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "gguf.h"
#include "tokenizer.h"

typedef enum LlmChatFamily
{
	LLM_CHAT_NONE,				/* the model has no chat template */
	LLM_CHAT_CHATML,			/* <|im_start|>role\n ... <|im_end|>\n (Qwen, SmolLM, Hermes) */
	LLM_CHAT_LLAMA2,			/* [INST] <<SYS>>\n...\n<</SYS>>\n\n ... [/INST] */
	LLM_CHAT_LLAMA3,			/* <|start_header_id|>role<|end_header_id|>\n\n ... <|eot_id|> */
	LLM_CHAT_GEMMA,				/* <start_of_turn>user\n ... <end_of_turn>\n (Gemma 1, 2, 3) */
	LLM_CHAT_PHI3,				/* <|user|>\n ... <|end|>\n (Phi-3, Phi-3.5) */
	LLM_CHAT_PHI4,				/* <|im_start|>user<|im_sep|> ... <|im_end|> */
	LLM_CHAT_MISTRAL_V1,		/* " [INST] " ... " [/INST]" */
	LLM_CHAT_MISTRAL_V0,		/* "[INST] " ... " [/INST]", no system prompt (Mistral 7B v0.1/v0.2) */
	LLM_CHAT_MISTRAL_V3,		/* "[INST] " ... "[/INST]" */
	LLM_CHAT_MISTRAL_V3_TEKKEN, /* "[INST]" ... "[/INST]" (Nemo) */
	LLM_CHAT_MISTRAL_V7,		/* "[SYSTEM_PROMPT] " ... "[/SYSTEM_PROMPT][INST] " ... "[/INST]" */
	LLM_CHAT_MISTRAL_V7_TEKKEN, /* "[SYSTEM_PROMPT]" ... "[/SYSTEM_PROMPT][INST]" ... "[/INST]" */
	LLM_CHAT_DEEPSEEK,			/* system <｜User｜> ... <｜Assistant｜> (V3, R1 and its distills) */
	LLM_CHAT_DEEPSEEK2,			/* system\n\nUser: ...\n\nAssistant: */
	LLM_CHAT_COMMAND_R,			/* <|START_OF_TURN_TOKEN|><|USER_TOKEN|> ... <|END_OF_TURN_TOKEN|> */
	LLM_CHAT_GRANITE,			/* <|start_of_role|>user<|end_of_role|> ... <|end_of_text|>\n */
	LLM_CHAT_ZEPHYR,			/* <|user|>\n ... EOS\n<|assistant|>\n */
	LLM_CHAT_VICUNA,			/* system\n\nUSER: ...\nASSISTANT: */
	LLM_CHAT_VICUNA_ORCA,		/* SYSTEM: ...\nUSER: ...\nASSISTANT: */
	LLM_CHAT_ALPACA,			/* system### Instruction:\n...\n### Response:\n (DeepSeek Coder) */
	LLM_CHAT_RWKV				/* System: ...\n\nUser: ...\n\nAssistant: (RWKV World) */
} LlmChatFamily;

/* How a system prompt is handled by the template. */
typedef enum LlmChatSystem
{
	LLM_CHAT_SYSTEM_TURN,		/* a turn of its own */
	LLM_CHAT_SYSTEM_FOLD,		/* written before the first user turn's text */
	LLM_CHAT_SYSTEM_REFUSED,	/* the template raises: the engine refuses it too */
	LLM_CHAT_SYSTEM_DROPPED		/* the template ignores it: so does the engine (Phi-3 mini) */
} LlmChatSystem;

/* Llama 3.1+'s "Cutting Knowledge Date" system header. */
typedef enum LlmChatDate
{
	LLM_CHAT_DATE_NONE,			/* no dated header */
	LLM_CHAT_DATE_FIXED,		/* "Today Date: " + date_string, default "26 Jul 2024" */
	LLM_CHAT_DATE_TODAY			/* strftime_now("%d %b %Y"): the request's date, else "26 Jul 2024" */
} LlmChatDate;

#define LLM_CHAT_MAX_SUFFIX 64

/* A recognised chat format: a family and the variations of its templates. */
typedef struct LlmChatFormat
{
	LlmChatFamily family;
	bool		bos;			/* the rendering starts with bos_token */
	bool		trim;			/* contents are trimmed (Jinja's trim, Python's strip) */
	LlmChatSystem system;
	LlmChatDate date;
	char	   *default_system; /* malloc'd; the system turn used when none is given, or NULL */
	bool		end_user_turn;	/* DeepSeek: <｜end▁of▁sentence｜> closes the user's turn */
	bool		needs_system;	/* the template has a default system prompt the engine cannot render */
	char		suffix[LLM_CHAT_MAX_SUFFIX];	/* text after the assistant's header (<think>\n) */
} LlmChatFormat;

/* One piece of a rendering: text, and whether special tokens in it are recognised. */
typedef struct LlmChatPart
{
	const char *text;
	size_t		len;
	bool		special;
} LlmChatPart;

#define LLM_CHAT_MAX_PARTS 24

/* A rendered conversation: parts pointing into the format, the inputs and buf. */
typedef struct LlmChatRendering
{
	LlmChatPart parts[LLM_CHAT_MAX_PARTS];
	int			n_parts;
	char		buf[64];		/* the Llama 3 date line */
} LlmChatRendering;

/* One request's conversation: an optional system prompt and the user's text. */
typedef struct LlmChatInput
{
	const char *system;			/* NULL: none */
	size_t		system_len;
	const char *user;
	size_t		user_len;
	const char *bos;			/* the vocabulary's BOS and EOS text ("" when none) */
	const char *eos;
	const char *date;			/* strftime_now's "01 Dec 2026", or NULL: "26 Jul 2024" */
} LlmChatInput;

/*
 * Recognise the family of a Jinja chat template (len bytes); fills *f,
 * whose default_system the caller frees with llm_chat_format_free().
 * LLM_ERR_UNSUPPORTED, with what was not recognised, when no rule fits.
 */
LlmStatus	llm_chat_detect(const char *tmpl, size_t len, LlmChatFormat *f, LlmError *err);

/* Free what llm_chat_detect() allocated in *f. */
void		llm_chat_format_free(LlmChatFormat *f);

/*
 * Render in as format f does with add_generation_prompt: the parts of the
 * prompt, pointing into in, f and *r.  LLM_ERR_UNSUPPORTED when the template
 * refuses the conversation (a system prompt it has no place for).
 */
LlmStatus	llm_chat_render(const LlmChatFormat *f, const LlmChatInput *in, LlmChatRendering *r,
							LlmError *err);

/*
 * The text a template's generation block writes (chat_gen.c): the literals
 * of the block after "if add_generation_prompt", evaluated with the few
 * conditions such blocks test (enable_thinking, thinking).  *out gets at
 * most outsz - 1 bytes.  LLM_ERR_UNSUPPORTED when the block holds anything
 * else.
 */
LlmStatus	llm_chat_generation_text(const char *tmpl, size_t len, char *out, size_t outsz,
									 LlmError *err);

/*
 * The chat format of GGUF g's tokenizer.chat_template, by llm_chat_detect();
 * LLM_ERR_UNSUPPORTED naming the model (name) when it has none or no rule
 * recognises it.
 */
LlmStatus	llm_chat_format_load(const LlmGguf *g, const char *name, LlmChatFormat *f, LlmError *err);

/* The text of token id in t (BOS, EOS), or "" when there is none. */
const char *llm_chat_token_text(const LlmTokenizer *t, int32_t id);

/*
 * The literal a tag "{%- set NAME = 'literal' -%}" of template tmpl gives
 * name (name_len bytes): *lit points into tmpl, *lit_len bytes.  False when
 * no such tag sets it to one plain literal (escapes, concatenation).
 */
bool		llm_chat_set_literal(const char *tmpl, size_t len, const char *name, size_t name_len,
								 const char **lit, size_t *lit_len);

/*
 * The text format f's templates write right after an assistant's reply, to
 * the end of its turn ("<|im_end|>", "<end_of_turn>", ..., or eos where they
 * write eos_token), into out (outsz bytes).
 */
void		llm_chat_end_of_turn(const LlmChatFormat *f, const char *eos, char *out, size_t outsz);

/* The family's name: "chatml", "llama3", "gemma", ..., or "none". */
const char *llm_chat_family_name(LlmChatFamily family);

/* llm_chat_tokenize(), which renders and tokenizes a request, is in engine.h. */

#endif							/* LLM_CHAT_H */
