/*
 * tokenizer_int.h
 *		Private structures of the tokenizers (tokenizer.c, tokenizer_spm.c,
 *		tokenizer_bpe.c, tokenizer_pre.c, tokenizer_wpm.c).
 *
 * The tokenizer owns copies of every string it uses (token texts, pieces,
 * merges), so it outlives the GGUF file it was loaded from.  After loading
 * it is read-only: llm_tokenize may run in several threads at once on one
 * tokenizer, each call allocating its own scratch memory.
 */
#ifndef LLM_TOKENIZER_INT_H
#define LLM_TOKENIZER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer.h"
#include "utf8.h"

/* Token types, numbered as in tokenizer.ggml.token_type. */
typedef enum LlmTokenType
{
	LLM_TOKEN_TYPE_UNDEFINED = 0,
	LLM_TOKEN_TYPE_NORMAL = 1,
	LLM_TOKEN_TYPE_UNKNOWN = 2,
	LLM_TOKEN_TYPE_CONTROL = 3,
	LLM_TOKEN_TYPE_USER_DEFINED = 4,
	LLM_TOKEN_TYPE_UNUSED = 5,
	LLM_TOKEN_TYPE_BYTE = 6
} LlmTokenType;

/* The most expressions one pre-tokenizer applies in turn. */
#define LLM_PRE_MAX_EXPRS 8

/* Flags of a tokenizer.ggml.pre value (llama.cpp sets them per name). */
#define LLM_PRE_IGNORE_MERGES	0x01	/* a whole piece that is a token is kept */
#define LLM_PRE_ADD_BOS			0x02	/* add_bos_token defaults to true */
#define LLM_PRE_ADD_SEP			0x04	/* add_sep_token defaults to true */
#define LLM_PRE_ESCAPE_SPACES	0x08	/* spaces become U+2581 before the split */
#define LLM_PRE_NEWLINES_WHOLE	0x10	/* a piece of newlines that is a token is kept (Gemma 4) */

/* A pre-tokenizer: expressions applied in order (tokenizer_pre.c). */
typedef struct LlmPreGroup
{
	const char *name;			/* llama.cpp's pre type, lower case */
	const char *const *exprs;	/* (n_exprs) llama.cpp's expressions, in order */
	int			n_exprs;
	bool		raw_utf8;		/* BPE on the UTF-8 text, not GPT-2's byte code points */
} LlmPreGroup;

/* One tokenizer.ggml.pre value and what it selects. */
typedef struct LlmPreName
{
	const char *name;
	const LlmPreGroup *group;
	uint8_t		flags;			/* LLM_PRE_* */
} LlmPreName;

/* How a pre-tokenizer expression cuts a piece. */
typedef enum LlmPreMode
{
	LLM_PRE_MODE_MATCH,			/* matches and the gaps between them */
	LLM_PRE_MODE_DIGITS			/* llama.cpp's digits-in-threes splitter (AFMoE, Tiny Aya) */
} LlmPreMode;

/* Called with each piece of a split (len > 0). */
typedef LlmStatus (*LlmPieceFn) (void *arg, const char *s, size_t len, LlmError *err);

/* One slot of an open-addressing string table. */
typedef struct LlmStrTabSlot
{
	const char *key;			/* NULL: empty slot */
	uint32_t	len;
	uint32_t	hash;
	int32_t		value;
} LlmStrTabSlot;

/* A string -> int32 hash table with linear probing; keys are not copied. */
typedef struct LlmStrTab
{
	LlmStrTabSlot *slots;		/* (cap) */
	uint32_t	cap;			/* a power of two, at least twice n */
	uint32_t	n;
} LlmStrTab;

/* A growable array of token ids: the output of one llm_tokenize call. */
typedef struct LlmTokBuf
{
	int32_t    *ids;			/* (cap) */
	int			n;
	int			cap;
} LlmTokBuf;

/* A symbol in a doubly linked chain over a text buffer (both algorithms). */
typedef struct LlmSymbol
{
	int32_t		prev;			/* index of the previous live symbol, or -1 */
	int32_t		next;			/* index of the next live symbol, or -1 */
	uint32_t	off;			/* byte offset into the text */
	uint32_t	n;				/* byte length; 0 once merged into its left neighbour */
} LlmSymbol;

/* A candidate merge of two adjacent symbols. */
typedef struct LlmBigram
{
	double		prio;			/* higher pops first (SPM: score; BPE: -rank) */
	int32_t		left;			/* symbol indexes */
	int32_t		right;
	uint32_t	size;			/* left.n + right.n when queued; stale if it changed */
} LlmBigram;

/* A binary max-heap of bigrams: highest prio first, then leftmost. */
typedef struct LlmBigramHeap
{
	LlmBigram  *items;			/* (cap) */
	size_t		n;
	size_t		cap;
} LlmBigramHeap;

/*
 * Tokens matched as whole strings in the input: ids sorted by first byte,
 * then longest first; start[b] .. start[b + 1] are those starting with b.
 */
typedef struct LlmSpecialIndex
{
	int32_t    *ids;			/* (n) */
	int			n;
	int32_t		start[257];
} LlmSpecialIndex;

struct LlmTokenizer
{
	LlmTokenizerKind kind;
	int32_t		n_vocab;

	/* the vocabulary, as stored */
	char	   *text_arena;		/* all token texts, each NUL-terminated */
	const char **text;			/* (n_vocab) into text_arena */
	uint32_t   *text_len;		/* (n_vocab) */
	float	   *score;			/* (n_vocab) SPM merge priority; 0 when absent */
	uint8_t    *type;			/* (n_vocab) LlmTokenType */
	LlmStrTab	vocab;			/* text -> first id with that text */

	/* output bytes of each token, computed at load */
	char	   *piece_arena;
	const char **piece;			/* (n_vocab) into piece_arena */
	uint32_t   *piece_len;		/* (n_vocab) */

	/* special ids (-1: none) and flags */
	int32_t		bos;
	int32_t		eos;
	int32_t		unk;
	int32_t		pad;
	int32_t		sep;			/* BERT's [SEP] (RoBERTa's </s>), or -1 */
	bool		add_bos;		/* tokenizer.ggml.add_bos_token (model's wish) */
	bool		add_sep;		/* tokenizer.ggml.add_sep_token: SEP after the text */
	bool		add_space_prefix;	/* SPM: prepend a space to text at the start */
	uint8_t    *eog;			/* (n_vocab) 1 when the token ends generation */

	/* tokens matched as whole strings in the input (tokenizer.c) */
	LlmSpecialIndex special;	/* control and user-defined: with parse_special */
	LlmSpecialIndex user;		/* user-defined only: without it */

	/* SPM and raw BPE: the token for each byte (<0xNN>, else the one-byte text), or -1 */
	int32_t		byte_token[256];

	/* BPE */
	char	   *merge_arena;	/* copies of the merge strings */
	LlmStrTab	merges;			/* "left right" -> rank */
	const LlmPreGroup *pre;		/* the pre-tokenizer (tokenizer.ggml.pre) */
	pcre2_code *re[LLM_PRE_MAX_EXPRS];	/* (pre->n_exprs) its expressions, compiled once */
	uint8_t		re_mode[LLM_PRE_MAX_EXPRS];	/* (pre->n_exprs) LlmPreMode of each */
	bool		jit;			/* every re is JIT-compiled (else PCRE2 interprets them) */
	bool		ignore_merges;	/* a whole pre-token that is in the vocabulary is kept */
	bool		raw_utf8;		/* merge UTF-8 characters, not GPT-2 byte code points */
	bool		escape_spaces;	/* spaces become U+2581 before pre-tokenizing */
	bool		newlines_whole;	/* a newline run that is a token is kept whole */
	uint16_t	byte_cp[256];	/* GPT-2 bytes_to_unicode: byte -> code point */
	int16_t		cp_byte[324];	/* its inverse for code points < 324, else -1 */

	/* WordPiece */
	pcre2_code *wpm_re;			/* classifies the characters of the text */
	bool		wpm_jit;		/* wpm_re is JIT-compiled */
	bool		wpm_lowercase;	/* tokenizer.ggml.normalizer.lowercase */
	bool		wpm_strip_accents;	/* tokenizer.ggml.normalizer.strip_accents */
	uint32_t	max_token_len;	/* the longest token text, in bytes */
};

/* tokenizer.c: shared helpers */
uint32_t	llm_str_hash(const char *s, size_t len);
LlmStatus	llm_strtab_init(LlmStrTab *tab, uint32_t n_expected, LlmError *err);
void		llm_strtab_free(LlmStrTab *tab);
bool		llm_strtab_insert(LlmStrTab *tab, const char *key, uint32_t len, int32_t value);
int32_t		llm_strtab_find(const LlmStrTab *tab, const char *key, size_t len);
int32_t		llm_strtab_find_pair(const LlmStrTab *tab, const char *a, size_t alen,
									char sep, const char *b, size_t blen);
LlmStatus	llm_tokbuf_push(LlmTokBuf *buf, int32_t id, LlmError *err);
LlmStatus	llm_heap_push(LlmBigramHeap *h, const LlmBigram *b, LlmError *err);
bool		llm_heap_pop(LlmBigramHeap *h, LlmBigram *out);
void		llm_heap_free(LlmBigramHeap *h);
int32_t		llm_tokenizer_lookup(const LlmTokenizer *t, const char *s, size_t len);

/* tokenizer_spm.c */
LlmStatus	llm_spm_tokenize(const LlmTokenizer *t, const char *text, size_t len,
								  bool space_prefix, LlmTokBuf *out, LlmError *err);

/* tokenizer_bpe.c */
LlmStatus	llm_bpe_init(LlmTokenizer *t, const LlmGguf *g, const char *forced_pre, LlmError *err);
void		llm_bpe_free(LlmTokenizer *t);
LlmStatus	llm_bpe_tokenize(const LlmTokenizer *t, const char *text, size_t len,
								  LlmTokBuf *out, LlmError *err);
size_t		llm_bpe_decode_text(const LlmTokenizer *t, const char *s, size_t len, char *dst);
const LlmPreName *llm_pre_find(const char *name);
LlmStatus	llm_bpe_use_pre(LlmTokenizer *t, const char *name, LlmError *err);
LlmStatus	llm_bpe_pre_split(const LlmTokenizer *t, const char *text, size_t len,
							  LlmPieceFn fn, void *arg, LlmError *err);

/* tokenizer_wpm.c */
LlmStatus	llm_wpm_init(LlmTokenizer *t, const LlmGguf *g, LlmError *err);
void		llm_wpm_free(LlmTokenizer *t);
LlmStatus	llm_wpm_tokenize(const LlmTokenizer *t, const char *text, size_t len,
							  LlmTokBuf *out, LlmError *err);
uint32_t	llm_wpm_lower(uint32_t cp);
uint32_t	llm_wpm_nfd_first(uint32_t cp);

/* tokenizer_pre.c */
extern const LlmPreName llm_pre_names[];
extern const int llm_pre_n_names;
extern const LlmPreGroup *const llm_pre_group_missing;

#endif							/* LLM_TOKENIZER_INT_H */
