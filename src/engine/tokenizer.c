/*
 * tokenizer.c
 *		Loading a tokenizer from GGUF metadata, special tokens, pieces and
 *		detokenization; helpers shared by the two algorithms.
 *
 * Loading copies tokenizer.ggml.tokens into one arena and indexes it with an
 * open-addressing hash table (text -> first id with that text: duplicate
 * strings are tolerated and the first wins).  The bytes each token stands
 * for in output text (its "piece") are computed once here, so detokenizing
 * is a concatenation.  The algorithms live in tokenizer_spm.c ("llama"),
 * tokenizer_bpe.c ("gpt2", with the pre-tokenizers of tokenizer_pre.c) and
 * tokenizer_wpm.c ("bert").
 *
 * Special tokens.  The input is scanned left to right and at each position
 * the longest matched token text starting there (if any) is emitted as that
 * token; the text between such matches is tokenized on its own.  (llama.cpp
 * instead partitions by one token at a time, longest first; the two agree
 * unless the texts overlap.)  User-defined tokens are always matched, as in
 * llama.cpp and Hugging Face's tokenizers (added tokens are split off before
 * the model sees the text): MPT's runs of spaces, Gemma 3's runs of
 * newlines.  Control tokens are matched only with parse_special; without it
 * the merge algorithms never produce control, unknown, unused or byte
 * tokens from text, so "<s>" typed by a user stays the characters < s > and
 * round-trips.
 *
 * SPM space prefix.  As in current llama.cpp, with add_space_prefix a space
 * is put in front of every text fragment that starts the input or follows a
 * special token: "<s>Hello" with parse_special gives <s> ▁Hello, as
 * SentencePiece does for the text after a special token.
 *
 * Which parse_special setting produced the reference suites
 * (llama.cpp's ggml-vocab-*.gguf.out)?  Off (its test-tokenizer-0); their
 * inputs contain no control token text, so both settings give the same
 * ids, and test_tokenizer.c checks both.
 */
#include "tokenizer_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define LLM_TOKENIZER_MAX_VOCAB (1 << 24)
#define LLM_TOKENIZER_MAX_TOKEN_LEN (1u << 20)

/* Texts that end generation when a vocabulary has them. */
static const char *const llm_eog_texts[] = {
	"<|endoftext|>", "<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|end|>"
};

/* FNV-1a hash of len bytes. */
uint32_t
llm_str_hash(const char *s, size_t len)
{
	uint32_t	h = 2166136261u;

	for (size_t i = 0; i < len; i++)
	{
		h ^= (uint8_t) s[i];
		h *= 16777619u;
	}
	return h;
}

/* Continue an FNV-1a hash over more bytes. */
static uint32_t
llm_str_hash_more(uint32_t h, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		h ^= (uint8_t) s[i];
		h *= 16777619u;
	}
	return h;
}

/* Allocate an empty table for up to n_expected keys (it never grows). */
LlmStatus
llm_strtab_init(LlmStrTab *tab, uint32_t n_expected, LlmError *err)
{
	uint32_t	cap = 16;

	memset(tab, 0, sizeof(*tab));
	while (cap < 2 * (uint64_t) n_expected + 1)
	{
		if (cap >= (1u << 30))
			return llm_error_set(err, LLM_ERR_LIMIT, "tokenizer table of %u entries is too large",
								 n_expected);
		cap <<= 1;
	}
	tab->slots = calloc(cap, sizeof(LlmStrTabSlot));
	if (tab->slots == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a tokenizer table of %u entries",
							 n_expected);
	tab->cap = cap;
	return LLM_OK;
}

/* Free a table's slots; the keys belong to the caller. */
void
llm_strtab_free(LlmStrTab *tab)
{
	free(tab->slots);
	memset(tab, 0, sizeof(*tab));
}

/*
 * Insert key -> value unless key is present (then the first value stays);
 * returns whether it was inserted.  The table must have room (see init).
 */
bool
llm_strtab_insert(LlmStrTab *tab, const char *key, uint32_t len, int32_t value)
{
	uint32_t	h = llm_str_hash(key, len);
	uint32_t	mask = tab->cap - 1;

	if (tab->n + 1 >= tab->cap)
		return false;
	for (uint32_t i = h & mask;; i = (i + 1) & mask)
	{
		LlmStrTabSlot *s = &tab->slots[i];

		if (s->key == NULL)
		{
			s->key = key;
			s->len = len;
			s->hash = h;
			s->value = value;
			tab->n++;
			return true;
		}
		if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
			return false;
	}
}

/* The value of key, or -1. */
int32_t
llm_strtab_find(const LlmStrTab *tab, const char *key, size_t len)
{
	uint32_t	h;
	uint32_t	mask = tab->cap - 1;

	if (tab->cap == 0 || len > UINT32_MAX)
		return -1;
	h = llm_str_hash(key, len);
	for (uint32_t i = h & mask;; i = (i + 1) & mask)
	{
		const LlmStrTabSlot *s = &tab->slots[i];

		if (s->key == NULL)
			return -1;
		if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
			return s->value;
	}
}

/* The value of the string a, sep, b (without building it), or -1. */
int32_t
llm_strtab_find_pair(const LlmStrTab *tab, const char *a, size_t alen,
					 char sep, const char *b, size_t blen)
{
	uint32_t	h;
	uint32_t	mask = tab->cap - 1;
	size_t		len = alen + 1 + blen;

	if (tab->cap == 0 || len > UINT32_MAX)
		return -1;
	h = llm_str_hash_more(llm_str_hash_more(llm_str_hash(a, alen), &sep, 1), b, blen);
	for (uint32_t i = h & mask;; i = (i + 1) & mask)
	{
		const LlmStrTabSlot *s = &tab->slots[i];

		if (s->key == NULL)
			return -1;
		if (s->hash == h && s->len == len &&
			memcmp(s->key, a, alen) == 0 && s->key[alen] == sep &&
			memcmp(s->key + alen + 1, b, blen) == 0)
			return s->value;
	}
}

/* Append one id to buf, growing it. */
LlmStatus
llm_tokbuf_push(LlmTokBuf *buf, int32_t id, LlmError *err)
{
	if (buf->n == buf->cap)
	{
		int			cap = buf->cap < 64 ? 64 : buf->cap;
		int32_t    *ids;

		if (cap > INT_MAX / 2)
			return llm_error_set(err, LLM_ERR_LIMIT, "text has too many tokens");
		cap *= 2;
		ids = realloc(buf->ids, (size_t) cap * sizeof(int32_t));
		if (ids == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %d tokens", cap);
		buf->ids = ids;
		buf->cap = cap;
	}
	buf->ids[buf->n++] = id;
	return LLM_OK;
}

/* Whether bigram a pops before b: higher prio, then leftmost. */
static inline bool
llm_bigram_before(const LlmBigram *a, const LlmBigram *b)
{
	return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

/* Push a bigram onto the heap. */
LlmStatus
llm_heap_push(LlmBigramHeap *h, const LlmBigram *b, LlmError *err)
{
	size_t		i;

	if (h->n == h->cap)
	{
		size_t		cap = h->cap < 64 ? 64 : h->cap * 2;
		LlmBigram  *items = realloc(h->items, cap * sizeof(LlmBigram));

		if (items == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %zu merge candidates", cap);
		h->items = items;
		h->cap = cap;
	}
	i = h->n++;
	while (i > 0)
	{
		size_t		parent = (i - 1) / 2;

		if (!llm_bigram_before(b, &h->items[parent]))
			break;
		h->items[i] = h->items[parent];
		i = parent;
	}
	h->items[i] = *b;
	return LLM_OK;
}

/* Pop the best bigram into *out; false when the heap is empty. */
bool
llm_heap_pop(LlmBigramHeap *h, LlmBigram *out)
{
	LlmBigram	last;
	size_t		i = 0;

	if (h->n == 0)
		return false;
	*out = h->items[0];
	last = h->items[--h->n];
	for (;;)
	{
		size_t		c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && llm_bigram_before(&h->items[c + 1], &h->items[c]))
			c++;
		if (!llm_bigram_before(&h->items[c], &last))
			break;
		h->items[i] = h->items[c];
		i = c;
	}
	if (h->n > 0)
		h->items[i] = last;
	return true;
}

/* Free a heap's storage. */
void
llm_heap_free(LlmBigramHeap *h)
{
	free(h->items);
	memset(h, 0, sizeof(*h));
}

/* Whether merges may produce a token of this type from text. */
static inline bool
llm_token_type_is_text(uint8_t type)
{
	return type != LLM_TOKEN_TYPE_CONTROL && type != LLM_TOKEN_TYPE_UNKNOWN &&
		type != LLM_TOKEN_TYPE_UNUSED && type != LLM_TOKEN_TYPE_BYTE;
}

/* The text token whose text is s (len bytes), or -1: what the merge algorithms look up. */
int32_t
llm_tokenizer_lookup(const LlmTokenizer *t, const char *s, size_t len)
{
	int32_t		id = llm_strtab_find(&t->vocab, s, len);

	if (id < 0 || !llm_token_type_is_text(t->type[id]))
		return -1;
	return id;
}

/* Read an optional token id: absent -> def; negative, 0xFFFFFFFF or out of range -> -1. */
static LlmStatus
llm_tokenizer_get_id(const LlmGguf *g, const char *key, int32_t n_vocab, int32_t def,
					 int32_t *out, LlmError *err)
{
	int64_t		v;
	LlmStatus	st;

	*out = def;
	if (llm_gguf_get(g, key) == NULL)
		return LLM_OK;
	st = llm_gguf_get_i64(g, key, &v, err);
	if (st != LLM_OK)
		return st;
	*out = (v >= 0 && v < n_vocab) ? (int32_t) v : -1;
	return LLM_OK;
}

/* Read an optional bool: absent -> def. */
static LlmStatus
llm_tokenizer_get_flag(const LlmGguf *g, const char *key, bool def, bool *out, LlmError *err)
{
	*out = def;
	if (llm_gguf_get(g, key) == NULL)
		return LLM_OK;
	return llm_gguf_get_bool(g, key, out, err);
}

/* A special token's sort key: first byte, then longest first, then lowest id. */
typedef struct LlmSpecialKey
{
	uint8_t		first;
	uint32_t	len;
	int32_t		id;
} LlmSpecialKey;

/* qsort comparator of LlmSpecialKey. */
static int
llm_special_cmp(const void *pa, const void *pb)
{
	const LlmSpecialKey *a = pa;
	const LlmSpecialKey *b = pb;

	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	return a->id < b->id ? -1 : (a->id > b->id);
}

/* Whether token id is matched as a whole string: user-defined always, control with parse_special. */
static bool
llm_tokenizer_is_matched(const LlmTokenizer *t, int32_t id, bool parse_special)
{
	return t->text_len[id] > 0 && (t->type[id] == LLM_TOKEN_TYPE_USER_DEFINED ||
								   (parse_special && t->type[id] == LLM_TOKEN_TYPE_CONTROL));
}

/* Index the tokens llm_tokenize matches as whole strings with or without parse_special. */
static LlmStatus
llm_tokenizer_index_special(LlmTokenizer *t, LlmSpecialIndex *idx, bool parse_special, LlmError *err)
{
	LlmSpecialKey *keys;
	int			n = 0;

	for (int32_t id = 0; id < t->n_vocab; id++)
		n += llm_tokenizer_is_matched(t, id, parse_special);
	keys = malloc(((size_t) n + 1) * sizeof(LlmSpecialKey));
	idx->ids = malloc(((size_t) n + 1) * sizeof(int32_t));
	if (keys == NULL || idx->ids == NULL)
	{
		free(keys);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %d special tokens", n);
	}
	n = 0;
	for (int32_t id = 0; id < t->n_vocab; id++)
		if (llm_tokenizer_is_matched(t, id, parse_special))
		{
			keys[n].first = (uint8_t) t->text[id][0];
			keys[n].len = t->text_len[id];
			keys[n].id = id;
			n++;
		}
	qsort(keys, (size_t) n, sizeof(LlmSpecialKey), llm_special_cmp);
	memset(idx->start, 0, sizeof(idx->start));
	for (int i = 0; i < n; i++)
	{
		idx->ids[i] = keys[i].id;
		idx->start[keys[i].first + 1]++;
	}
	for (int b = 0; b < 256; b++)
		idx->start[b + 1] += idx->start[b];
	idx->n = n;
	free(keys);
	return LLM_OK;
}

/* Find SPM's byte tokens: <0xNN>, else the one-byte text. */
static void
llm_tokenizer_index_bytes(LlmTokenizer *t)
{
	for (int b = 0; b < 256; b++)
	{
		char		name[8];
		char		one = (char) b;
		int32_t		id;

		snprintf(name, sizeof(name), "<0x%02X>", b);
		id = llm_strtab_find(&t->vocab, name, 6);
		if (id < 0)
			id = llm_strtab_find(&t->vocab, &one, 1);
		t->byte_token[b] = id;
	}
}

/* Parse "<0xNN>" into its byte; -1 when text is not of that form. */
static int
llm_parse_byte_token(const char *s, size_t len)
{
	int			v = 0;

	if (len != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>')
		return -1;
	for (int i = 3; i < 5; i++)
	{
		char		c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else
			return -1;
	}
	return v;
}

/* SPM: text with every U+2581 replaced by a space, into dst; returns its length. */
static size_t
llm_spm_unescape(const char *s, size_t len, char *dst)
{
	size_t		n = 0;

	for (size_t i = 0; i < len;)
	{
		if (i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0)
		{
			dst[n++] = ' ';
			i += 3;
		}
		else
			dst[n++] = s[i++];
	}
	return n;
}

/*
 * Compute every token's piece (no piece is longer than its text).  SPM,
 * WordPiece and BPE on raw UTF-8 (Gemma 4's): byte tokens give their byte,
 * normal tokens their text with U+2581 as a space; byte-level BPE: GPT-2
 * code points back to bytes.  User-defined tokens are their text as it is,
 * in every kind (as in llama.cpp: llama.cpp's converter stores them so, and
 * they are matched in the input as that text; DeepSeek's "ü" is the text
 * "ü", not the byte 0xFC that GPT-2's code point would stand for).
 * Control, unknown and unused tokens are empty.
 */
static LlmStatus
llm_tokenizer_make_pieces(LlmTokenizer *t, size_t arena_size, LlmError *err)
{
	size_t		pos = 0;

	t->piece_arena = malloc(arena_size);
	t->piece = malloc((size_t) t->n_vocab * sizeof(char *));
	t->piece_len = malloc((size_t) t->n_vocab * sizeof(uint32_t));
	if (t->piece_arena == NULL || t->piece == NULL || t->piece_len == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %d token pieces", t->n_vocab);
	for (int32_t id = 0; id < t->n_vocab; id++)
	{
		const char *s = t->text[id];
		size_t		len = t->text_len[id];
		char	   *dst = t->piece_arena + pos;
		size_t		n = 0;
		uint8_t		type = t->type[id];

		if (type == LLM_TOKEN_TYPE_CONTROL || type == LLM_TOKEN_TYPE_UNKNOWN ||
			type == LLM_TOKEN_TYPE_UNUSED)
			n = 0;
		else if (type == LLM_TOKEN_TYPE_USER_DEFINED)
		{
			memcpy(dst, s, len);
			n = len;
		}
		else if (t->kind != LLM_TOKENIZER_BPE || t->raw_utf8)
		{
			int			byte = type == LLM_TOKEN_TYPE_BYTE ? llm_parse_byte_token(s, len) : -1;

			if (byte >= 0)
			{
				dst[0] = (char) byte;
				n = 1;
			}
			else
				n = llm_spm_unescape(s, len, dst);
		}
		else
			n = llm_bpe_decode_text(t, s, len, dst);
		dst[n] = '\0';
		t->piece[id] = dst;
		t->piece_len[id] = (uint32_t) n;
		pos += n + 1;
	}
	return LLM_OK;
}

/* Mark the tokens that end generation. */
static LlmStatus
llm_tokenizer_mark_eog(LlmTokenizer *t, const LlmGguf *g, LlmError *err)
{
	static const char *const keys[] = {
		"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"
	};

	t->eog = calloc((size_t) t->n_vocab, 1);
	if (t->eog == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %d tokens", t->n_vocab);
	if (t->eos >= 0)
		t->eog[t->eos] = 1;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
	{
		int32_t		id;
		LlmStatus	st = llm_tokenizer_get_id(g, keys[i], t->n_vocab, -1, &id, err);

		if (st != LLM_OK)
			return st;
		if (id >= 0)
			t->eog[id] = 1;
	}
	for (size_t i = 0; i < sizeof(llm_eog_texts) / sizeof(llm_eog_texts[0]); i++)
	{
		int32_t		id = llm_strtab_find(&t->vocab, llm_eog_texts[i], strlen(llm_eog_texts[i]));

		if (id >= 0)
			t->eog[id] = 1;
	}
	return LLM_OK;
}

/* Copy the vocabulary (texts, scores, types) and index it. */
static LlmStatus
llm_tokenizer_load_vocab(LlmTokenizer *t, const LlmGguf *g, size_t *arena_size, LlmError *err)
{
	const LlmGgufValue *tokens;
	const LlmGgufValue *v;
	LlmStatus	st;
	size_t		size = 0;

	st = llm_gguf_get_arr(g, "tokenizer.ggml.tokens", LLM_GGUF_STRING, &tokens, err);
	if (st == LLM_ERR_NOT_FOUND)
		return llm_error_set(err, LLM_ERR_FORMAT, "tokenizer.ggml.tokens is missing");
	if (st != LLM_OK)
		return st;
	if (tokens->arr_len == 0)
		return llm_error_set(err, LLM_ERR_FORMAT, "tokenizer.ggml.tokens is empty");
	if (tokens->arr_len > LLM_TOKENIZER_MAX_VOCAB)
		return llm_error_set(err, LLM_ERR_LIMIT, "tokenizer.ggml.tokens has %llu entries, more than %d",
							 (unsigned long long) tokens->arr_len, LLM_TOKENIZER_MAX_VOCAB);
	t->n_vocab = (int32_t) tokens->arr_len;
	for (int32_t id = 0; id < t->n_vocab; id++)
	{
		if (tokens->arr_items[id].str.len > LLM_TOKENIZER_MAX_TOKEN_LEN)
			return llm_error_set(err, LLM_ERR_FORMAT, "tokenizer.ggml.tokens[%d] is %llu bytes long",
								 id, (unsigned long long) tokens->arr_items[id].str.len);
		size += tokens->arr_items[id].str.len + 1;
	}

	t->text_arena = malloc(size);
	t->text = malloc((size_t) t->n_vocab * sizeof(char *));
	t->text_len = malloc((size_t) t->n_vocab * sizeof(uint32_t));
	t->score = calloc((size_t) t->n_vocab, sizeof(float));
	t->type = malloc((size_t) t->n_vocab);
	if (t->text_arena == NULL || t->text == NULL || t->text_len == NULL ||
		t->score == NULL || t->type == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a vocabulary of %d tokens",
							 t->n_vocab);
	size = 0;
	for (int32_t id = 0; id < t->n_vocab; id++)
	{
		const LlmGgufStr *s = &tokens->arr_items[id].str;

		if (s->len > 0)
			memcpy(t->text_arena + size, s->ptr, s->len);
		t->text_arena[size + s->len] = '\0';
		t->text[id] = t->text_arena + size;
		t->text_len[id] = (uint32_t) s->len;
		size += s->len + 1;
	}
	*arena_size = size;

	/* scores: optional, float array of the same length */
	v = llm_gguf_get(g, "tokenizer.ggml.scores");
	if (v != NULL)
	{
		if (v->type != LLM_GGUF_ARRAY ||
			(v->arr_type != LLM_GGUF_FLOAT32 && v->arr_type != LLM_GGUF_FLOAT64))
			return llm_error_set(err, LLM_ERR_FORMAT, "tokenizer.ggml.scores is not an array of floats");
		if (v->arr_len != tokens->arr_len)
			return llm_error_set(err, LLM_ERR_FORMAT,
								 "tokenizer.ggml.scores has %llu entries but tokenizer.ggml.tokens has %d",
								 (unsigned long long) v->arr_len, t->n_vocab);
		for (int32_t id = 0; id < t->n_vocab; id++)
			t->score[id] = (float) llm_gguf_arr_float(v, (uint64_t) id);
	}

	/* token types: optional, integers of the same length; normal when absent */
	memset(t->type, LLM_TOKEN_TYPE_NORMAL, (size_t) t->n_vocab);
	v = llm_gguf_get(g, "tokenizer.ggml.token_type");
	if (v != NULL)
	{
		bool		is_int = v->type == LLM_GGUF_ARRAY &&
			(v->arr_type <= LLM_GGUF_INT32 || v->arr_type == LLM_GGUF_UINT64 ||
			 v->arr_type == LLM_GGUF_INT64);

		if (!is_int)
			return llm_error_set(err, LLM_ERR_FORMAT,
								 "tokenizer.ggml.token_type is not an array of integers");
		if (v->arr_len != tokens->arr_len)
			return llm_error_set(err, LLM_ERR_FORMAT,
								 "tokenizer.ggml.token_type has %llu entries but tokenizer.ggml.tokens has %d",
								 (unsigned long long) v->arr_len, t->n_vocab);
		for (int32_t id = 0; id < t->n_vocab; id++)
		{
			int64_t		ty = llm_gguf_arr_int(v, (uint64_t) id);

			if (ty < LLM_TOKEN_TYPE_UNDEFINED || ty > LLM_TOKEN_TYPE_BYTE)
				return llm_error_set(err, LLM_ERR_FORMAT, "tokenizer.ggml.token_type[%d] is %lld",
									 id, (long long) ty);
			t->type[id] = (uint8_t) ty;
		}
	}

	st = llm_strtab_init(&t->vocab, (uint32_t) t->n_vocab, err);
	if (st != LLM_OK)
		return st;
	for (int32_t id = 0; id < t->n_vocab; id++)
		(void) llm_strtab_insert(&t->vocab, t->text[id], t->text_len[id], id);
	return LLM_OK;
}

/* Build a tokenizer from a GGUF file's tokenizer.ggml.* metadata. */
LlmStatus
llm_tokenizer_load(const LlmGguf *g, LlmTokenizer **out, LlmError *err)
{
	LlmTokenizer *t;
	char	   *model = NULL;
	size_t		arena_size = 0;
	LlmStatus	st;
	LlmTokenizerKind kind;
	const char *forced_pre = NULL;
	bool		spm,
				wpm;

	if (g == NULL || out == NULL)
		return llm_error_set(err, LLM_ERR_INVALID, "llm_tokenizer_load needs a file and a result pointer");
	*out = NULL;
	st = llm_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
	if (st == LLM_ERR_NOT_FOUND)
		return llm_error_set(err, LLM_ERR_FORMAT, "tokenizer.ggml.model is missing");
	if (st != LLM_OK)
		return st;
	if (strcmp(model, "llama") == 0)
		kind = LLM_TOKENIZER_SPM;
	else if (strcmp(model, "gpt2") == 0)
		kind = LLM_TOKENIZER_BPE;
	else if (strcmp(model, "gemma4") == 0)
	{
		/* as in llama.cpp: BPE with Gemma 4's pre-tokenizer, whatever tokenizer.ggml.pre says */
		kind = LLM_TOKENIZER_BPE;
		forced_pre = "gemma4";
	}
	else if (strcmp(model, "bert") == 0)
		kind = LLM_TOKENIZER_WPM;
	else
	{
		st = llm_error_set(err, LLM_ERR_UNSUPPORTED, "unsupported tokenizer model \"%s\"", model);
		free(model);
		return st;
	}
	free(model);
	spm = kind == LLM_TOKENIZER_SPM;
	wpm = kind == LLM_TOKENIZER_WPM;

	t = calloc(1, sizeof(LlmTokenizer));
	if (t == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a tokenizer");
	t->kind = kind;

	/* defaults as in llama.cpp: SPM <unk> <s> </s>; BERT [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102 */
	st = llm_tokenizer_load_vocab(t, g, &arena_size, err);
	if (st == LLM_OK)
		st = llm_tokenizer_get_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab,
								  spm && t->n_vocab > 1 ? 1 : wpm && t->n_vocab > 101 ? 101 : -1,
								  &t->bos, err);
	if (st == LLM_OK)
		st = llm_tokenizer_get_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab,
								  spm && t->n_vocab > 2 ? 2 : -1, &t->eos, err);
	if (st == LLM_OK)
		st = llm_tokenizer_get_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab,
								  spm ? 0 : wpm && t->n_vocab > 100 ? 100 : -1, &t->unk, err);
	if (st == LLM_OK)
		st = llm_tokenizer_get_id(g, "tokenizer.ggml.seperator_token_id", t->n_vocab,
								  wpm && t->n_vocab > 102 ? 102 : -1, &t->sep, err);
	if (st == LLM_OK)
		st = llm_tokenizer_get_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab,
								  wpm ? 0 : -1, &t->pad, err);
	/* the pre-tokenizer (BPE) may change the defaults of the flags */
	if (st == LLM_OK && kind == LLM_TOKENIZER_BPE)
		st = llm_bpe_init(t, g, forced_pre, err);
	if (st == LLM_OK && wpm)
		st = llm_wpm_init(t, g, err);
	if (st == LLM_OK)
		st = llm_tokenizer_get_flag(g, "tokenizer.ggml.add_bos_token", spm || wpm || t->add_bos,
									&t->add_bos, err);
	if (st == LLM_OK)
		st = llm_tokenizer_get_flag(g, "tokenizer.ggml.add_sep_token", wpm || t->add_sep,
									&t->add_sep, err);
	if (st == LLM_OK)
		st = llm_tokenizer_get_flag(g, "tokenizer.ggml.add_space_prefix", spm,
									&t->add_space_prefix, err);
	if (st == LLM_OK)
		st = llm_tokenizer_index_special(t, &t->special, true, err);
	if (st == LLM_OK)
		st = llm_tokenizer_index_special(t, &t->user, false, err);
	if (st == LLM_OK)
		st = llm_tokenizer_make_pieces(t, arena_size, err);
	if (st == LLM_OK)
		st = llm_tokenizer_mark_eog(t, g, err);
	if (st != LLM_OK)
	{
		llm_tokenizer_free(t);
		return st;
	}
	if (spm || t->raw_utf8)
		llm_tokenizer_index_bytes(t);
	else
		for (int b = 0; b < 256; b++)
			t->byte_token[b] = -1;
	*out = t;
	return LLM_OK;
}

/* Free a tokenizer; NULL is allowed. */
void
llm_tokenizer_free(LlmTokenizer *t)
{
	if (t == NULL)
		return;
	llm_bpe_free(t);
	llm_wpm_free(t);
	llm_strtab_free(&t->vocab);
	free(t->text_arena);
	free(t->text);
	free(t->text_len);
	free(t->score);
	free(t->type);
	free(t->piece_arena);
	free(t->piece);
	free(t->piece_len);
	free(t->eog);
	free(t->special.ids);
	free(t->user.ids);
	free(t);
}

/* The longest token of idx whose text starts s (len > 0 bytes), or -1; *mlen gets its length. */
static int32_t
llm_tokenizer_match_special(const LlmTokenizer *t, const LlmSpecialIndex *idx,
							const char *s, size_t len, size_t *mlen)
{
	uint8_t		b = (uint8_t) s[0];

	for (int32_t i = idx->start[b]; i < idx->start[b + 1]; i++)
	{
		int32_t		id = idx->ids[i];
		size_t		n = t->text_len[id];

		if (n <= len && memcmp(s, t->text[id], n) == 0)
		{
			*mlen = n;
			return id;
		}
	}
	return -1;
}

/* Tokenize one fragment of plain text (no special tokens in it). */
static LlmStatus
llm_tokenize_fragment(const LlmTokenizer *t, const char *text, size_t len, bool after_special,
					  LlmTokBuf *out, LlmError *err)
{
	if (t->kind == LLM_TOKENIZER_SPM)
		return llm_spm_tokenize(t, text, len, t->add_space_prefix && after_special, out, err);
	if (t->kind == LLM_TOKENIZER_WPM)
		return llm_wpm_tokenize(t, text, len, out, err);
	return llm_bpe_tokenize(t, text, len, out, err);
}

/* Tokenize len bytes of text; see tokenizer.h and this file's header. */
LlmStatus
llm_tokenize(const LlmTokenizer *t, const char *text, size_t len,
			 bool add_bos, bool parse_special,
			 int32_t **ids, int *n_ids, LlmError *err)
{
	return llm_tokenize_marked(t, text, len, add_bos, parse_special, NULL, ids, n_ids, err);
}

/* Tokenize text, special tokens recognised outside the plain bytes only (see tokenizer.h). */
LlmStatus
llm_tokenize_marked(const LlmTokenizer *t, const char *text, size_t len,
					bool add_bos, bool parse_special, const uint8_t *plain,
					int32_t **ids, int *n_ids, LlmError *err)
{
	LlmTokBuf	buf = {0};
	LlmStatus	st = LLM_OK;
	bool		after_special = true;
	size_t		frag = 0;
	const LlmSpecialIndex *idx;

	if (t == NULL || ids == NULL || n_ids == NULL || (text == NULL && len > 0))
		return llm_error_set(err, LLM_ERR_INVALID, "llm_tokenize needs a tokenizer, text and result pointers");
	*ids = NULL;
	*n_ids = 0;
	if (len > (size_t) INT32_MAX / 4)
		return llm_error_set(err, LLM_ERR_LIMIT, "text of %zu bytes is too long to tokenize", len);

	idx = parse_special ? &t->special : &t->user;
	if (add_bos && t->bos >= 0)
		st = llm_tokbuf_push(&buf, t->bos, err);
	if (st == LLM_OK && (idx->n > 0 || (plain != NULL && t->user.n > 0)))
	{
		size_t		pos = 0;

		while (pos < len && st == LLM_OK)
		{
			size_t		mlen = 0;
			/* in plain text (user text of a chat) only user-defined tokens, never control ones */
			const LlmSpecialIndex *here = (plain != NULL && plain[pos]) ? &t->user : idx;
			int32_t		id = llm_tokenizer_match_special(t, here, text + pos, len - pos, &mlen);

			/* a control token's text that runs into plain text is not one */
			if (id >= 0 && here != &t->user && plain != NULL && memchr(plain + pos, 1, mlen) != NULL)
				id = llm_tokenizer_match_special(t, &t->user, text + pos, len - pos, &mlen);
			if (id < 0)
			{
				pos++;
				continue;
			}
			if (pos > frag)
				st = llm_tokenize_fragment(t, text + frag, pos - frag, after_special, &buf, err);
			if (st == LLM_OK)
				st = llm_tokbuf_push(&buf, id, err);
			after_special = true;
			pos += mlen;
			frag = pos;
		}
	}
	if (st == LLM_OK && len > frag)
		st = llm_tokenize_fragment(t, text + frag, len - frag, after_special, &buf, err);
	/* BERT-style vocabularies close the text with [SEP] */
	if (st == LLM_OK && add_bos && t->add_sep && t->sep >= 0)
		st = llm_tokbuf_push(&buf, t->sep, err);
	if (st == LLM_OK && buf.ids == NULL)
	{
		/* no tokens: still hand back an array, so callers may always free it */
		buf.ids = malloc(sizeof(int32_t));
		if (buf.ids == NULL)
			st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for tokens");
	}
	if (st != LLM_OK)
	{
		free(buf.ids);
		return st;
	}
	*ids = buf.ids;
	*n_ids = buf.n;
	return LLM_OK;
}

/* The bytes that token id stands for in output text; NULL when out of range. */
const char *
llm_token_piece(const LlmTokenizer *t, int32_t id, size_t *len)
{
	if (t == NULL || id < 0 || id >= t->n_vocab)
	{
		if (len != NULL)
			*len = 0;
		return NULL;
	}
	if (len != NULL)
		*len = t->piece_len[id];
	return t->piece[id];
}

/* Concatenate the pieces of n ids into a new malloc'd NUL-terminated string. */
LlmStatus
llm_detokenize(const LlmTokenizer *t, const int32_t *ids, int n,
			   char **text, size_t *len, LlmError *err)
{
	size_t		total = 0;
	char	   *s;

	if (t == NULL || text == NULL || n < 0 || (ids == NULL && n > 0))
		return llm_error_set(err, LLM_ERR_INVALID, "llm_detokenize needs a tokenizer, ids and a result pointer");
	*text = NULL;
	if (len != NULL)
		*len = 0;
	for (int i = 0; i < n; i++)
	{
		if (ids[i] < 0 || ids[i] >= t->n_vocab)
			return llm_error_set(err, LLM_ERR_INVALID, "token id %d is out of range (vocabulary of %d)",
								 ids[i], t->n_vocab);
		total += t->piece_len[ids[i]];
	}
	s = malloc(total + 1);
	if (s == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %zu bytes of text", total);
	total = 0;
	for (int i = 0; i < n; i++)
	{
		memcpy(s + total, t->piece[ids[i]], t->piece_len[ids[i]]);
		total += t->piece_len[ids[i]];
	}
	s[total] = '\0';
	*text = s;
	if (len != NULL)
		*len = total;
	return LLM_OK;
}

/* The vocabulary's text of token id (as stored), or NULL when out of range. */
const char *
llm_token_text(const LlmTokenizer *t, int32_t id)
{
	if (t == NULL || id < 0 || id >= t->n_vocab)
		return NULL;
	return t->text[id];
}

/* The number of tokens in the vocabulary. */
int
llm_tokenizer_n_vocab(const LlmTokenizer *t)
{
	return t != NULL ? t->n_vocab : 0;
}

/* Which algorithm the tokenizer uses. */
LlmTokenizerKind
llm_tokenizer_kind(const LlmTokenizer *t)
{
	return t->kind;
}

/* The BOS id, or -1. */
int32_t
llm_tokenizer_bos(const LlmTokenizer *t)
{
	return t != NULL ? t->bos : -1;
}

/* The EOS id, or -1. */
int32_t
llm_tokenizer_eos(const LlmTokenizer *t)
{
	return t != NULL ? t->eos : -1;
}

/* Whether the model asks for BOS in front of a prompt (tokenizer.ggml.add_bos_token). */
bool
llm_tokenizer_add_bos(const LlmTokenizer *t)
{
	return t != NULL && t->add_bos && t->bos >= 0;
}

/* Whether id ends generation. */
bool
llm_tokenizer_is_eog(const LlmTokenizer *t, int32_t id)
{
	return t != NULL && id >= 0 && id < t->n_vocab && t->eog[id] != 0;
}

/* The id of a token whose text is exactly s (the first such), or -1. */
int32_t
llm_tokenizer_find(const LlmTokenizer *t, const char *s)
{
	if (t == NULL || s == NULL)
		return -1;
	return llm_strtab_find(&t->vocab, s, strlen(s));
}
