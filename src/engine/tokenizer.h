/*
 * tokenizer.h
 *		Tokenizers described by GGUF metadata.
 *
 * tokenizer.ggml.model = "llama": SentencePiece-style BPE.  The text gets the
 * leading-space convention (a space in front, spaces written as U+2581), then
 * adjacent symbols are merged greedily by the highest vocabulary score;
 * pieces not in the vocabulary fall back to byte tokens <0xNN>.
 *
 * tokenizer.ggml.model = "gpt2": byte-level BPE.  The text is split by the
 * regular expressions of the pre-tokenizer tokenizer.ggml.pre names (any of
 * llama.cpp's; PCRE2, Unicode-aware), each piece mapped byte by byte to
 * printable code points, then merged by merge rank (tokenizer.ggml.merges).
 * tokenizer.ggml.model = "gemma4" is the same with Gemma 4's pre-tokenizer,
 * whatever tokenizer.ggml.pre says (as llama.cpp reads it).
 *
 * tokenizer.ggml.model = "bert": WordPiece.  The text is lower-cased and
 * stripped of accents, split at whitespace and around punctuation and CJK
 * characters, and each word, written with a leading U+2581, is cut into the
 * longest vocabulary tokens from the left; a word that cannot be is [UNK].
 *
 * User-defined tokens (token type 4) are always matched as whole strings in
 * the input, as in llama.cpp; control tokens (type 3) only when
 * parse_special is set, otherwise they are text.
 */
#ifndef LLM_TOKENIZER_H
#define LLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "status.h"

typedef struct LlmTokenizer LlmTokenizer;

typedef enum LlmTokenizerKind
{
	LLM_TOKENIZER_SPM,			/* "llama" */
	LLM_TOKENIZER_BPE,			/* "gpt2" */
	LLM_TOKENIZER_WPM			/* "bert" (WordPiece) */
} LlmTokenizerKind;

/* Build a tokenizer from a GGUF file's tokenizer.ggml.* metadata. */
LlmStatus	llm_tokenizer_load(const LlmGguf *g, LlmTokenizer **out, LlmError *err);

/* Free a tokenizer; NULL is allowed. */
void		llm_tokenizer_free(LlmTokenizer *t);

/*
 * Tokenize len bytes of text (any bytes: invalid UTF-8 is handled, never
 * crashes).  With add_bos, BOS is put first when the vocabulary has one,
 * and SEP last when it asks for one (tokenizer.ggml.add_sep_token: BERT's
 * [CLS] text [SEP]).
 * *ids is a new malloc'd array of *n_ids tokens.
 */
LlmStatus	llm_tokenize(const LlmTokenizer *t, const char *text, size_t len,
						 bool add_bos, bool parse_special,
						 int32_t **ids, int *n_ids, LlmError *err);

/*
 * llm_tokenize() where control tokens are recognised (parse_special) only
 * outside the bytes marked in plain (len bytes, non-zero: plain text; NULL:
 * none); user-defined tokens are matched everywhere, as always.  Plain text
 * is tokenized together with the text around it: a chat rendering whose
 * user text must never become control tokens, split only where the
 * template's own control tokens stand, as Hugging Face splits it.
 */
LlmStatus	llm_tokenize_marked(const LlmTokenizer *t, const char *text, size_t len,
								bool add_bos, bool parse_special, const uint8_t *plain,
								int32_t **ids, int *n_ids, LlmError *err);

/*
 * The bytes that token id stands for in output text: "▁" becomes a space,
 * <0xNN> the byte NN, GPT-2 code points their bytes; control tokens are
 * empty.  *len gets the length; returns NULL for an id out of range.
 */
const char *llm_token_piece(const LlmTokenizer *t, int32_t id, size_t *len);

/* Concatenate the pieces of n ids into a new malloc'd NUL-terminated string. */
LlmStatus	llm_detokenize(const LlmTokenizer *t, const int32_t *ids, int n,
						   char **text, size_t *len, LlmError *err);

/* The vocabulary's text of token id (as stored), or NULL when out of range. */
const char *llm_token_text(const LlmTokenizer *t, int32_t id);

int			llm_tokenizer_n_vocab(const LlmTokenizer *t);
LlmTokenizerKind llm_tokenizer_kind(const LlmTokenizer *t);
int32_t		llm_tokenizer_bos(const LlmTokenizer *t);	/* -1 when none */
int32_t		llm_tokenizer_eos(const LlmTokenizer *t);	/* -1 when none */
/* Whether the model wants BOS in front of a prompt (tokenizer.ggml.add_bos_token; default: SPM, WordPiece and some pre-tokenizers yes). */
bool		llm_tokenizer_add_bos(const LlmTokenizer *t);
/* Whether id ends generation (EOS, EOT, or another end-of-generation token). */
bool		llm_tokenizer_is_eog(const LlmTokenizer *t, int32_t id);
/* The id of a token whose text is exactly s, or -1. */
int32_t		llm_tokenizer_find(const LlmTokenizer *t, const char *s);

#endif							/* LLM_TOKENIZER_H */
