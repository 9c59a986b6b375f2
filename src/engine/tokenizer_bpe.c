/*
 * tokenizer_bpe.c
 *		Byte-level BPE (tokenizer.ggml.model = "gpt2").
 *
 * GPT-2's tokenizer (Radford et al. 2019, "Language Models are Unsupervised
 * Multitask Learners", section 2.2) in four steps, on one fragment of text
 * without special tokens:
 *
 * 1. Pre-tokenize: split the text into pieces with a regular expression
 *    (GPT-2's: contractions, optional space + letters, optional space +
 *    digits, optional space + other symbols, whitespace runs).  PCRE2 runs
 *    it, compiled once per tokenizer with Unicode properties (UTF + UCP),
 *    JIT-compiled when PCRE2 supports it on this machine.
 * 2. Map each byte of a piece to a printable code point (GPT-2's
 *    bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 *    other 68 bytes for U+0100 onwards), so "Ġ" is a space and "Ċ" a newline.
 * 3. Split the mapped piece into code points and repeatedly merge the
 *    adjacent pair with the lowest rank in tokenizer.ggml.merges (ties:
 *    leftmost), with a heap and stale-entry checks as in tokenizer_spm.c.
 * 4. Each final symbol is a vocabulary token.  A symbol that is not (only
 *    possible with a vocabulary missing some of the 256 byte symbols or
 *    merge results) falls back to one token per code point, and code points
 *    that are not tokens either are skipped, as llama.cpp does.
 *
 * Invalid UTF-8.  The text is cut into maximal runs of well-formed UTF-8
 * and runs of ill-formed bytes.  Each ill-formed run is one piece; each
 * well-formed run is pre-tokenized on its own (the expression sees it as the
 * whole subject), matched with PCRE2_NO_UTF_CHECK since it was just checked.
 * Every byte still maps to a code point in step 2, so any input round-trips
 * byte for byte; llama.cpp instead replaces such bytes with U+FFFD.  (Not
 * PCRE2_MATCH_INVALID_UTF: with it PCRE2's interpreter, used when JIT is
 * unavailable, rescans the rest of the subject at every match, which is
 * quadratic: minutes for a megabyte.)
 *
 * Pre-tokenizers.  tokenizer.ggml.pre selects the expression: "llama-bpe"
 * (Llama 3, which also keeps a whole piece that is a token without merging)
 * and "qwen2" have their own; any other value uses GPT-2's.  Only GPT-2's is
 * checked against reference output (../shared/vocab).
 */
#include "tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

static const char llm_re_gpt2[] =
"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char llm_re_llama3[] =
"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
"|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char llm_re_qwen2[] =
"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
"|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Fill GPT-2's bytes_to_unicode table and its inverse. */
static void
llm_bpe_init_bytes(LlmTokenizer *t)
{
	int			extra = 0;

	for (int cp = 0; cp < (int) (sizeof(t->cp_byte) / sizeof(t->cp_byte[0])); cp++)
		t->cp_byte[cp] = -1;
	for (int b = 0; b < 256; b++)
	{
		bool		printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
		int			cp = printable ? b : 256 + extra++;

		t->byte_cp[b] = (uint16_t) cp;
		t->cp_byte[cp] = (int16_t) b;
	}
}

/* Copy and index tokenizer.ggml.merges ("left right" -> rank). */
static LlmStatus
llm_bpe_load_merges(LlmTokenizer *t, const LlmGguf *g, LlmError *err)
{
	const LlmGgufValue *merges;
	LlmStatus	st;
	size_t		size = 0;

	st = llm_gguf_get_arr(g, "tokenizer.ggml.merges", LLM_GGUF_STRING, &merges, err);
	if (st == LLM_ERR_NOT_FOUND)
		return llm_error_set(err, LLM_ERR_FORMAT, "tokenizer.ggml.merges is missing");
	if (st != LLM_OK)
		return st;
	if (merges->arr_len > INT32_MAX / 4)
		return llm_error_set(err, LLM_ERR_LIMIT, "tokenizer.ggml.merges has %llu entries",
							 (unsigned long long) merges->arr_len);
	for (uint64_t i = 0; i < merges->arr_len; i++)
	{
		if (merges->arr_items[i].str.len > UINT32_MAX / 2)
			return llm_error_set(err, LLM_ERR_FORMAT, "tokenizer.ggml.merges[%llu] is too long",
								 (unsigned long long) i);
		size += merges->arr_items[i].str.len + 1;
	}
	t->merge_arena = malloc(size + 1);
	if (t->merge_arena == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %llu merges",
							 (unsigned long long) merges->arr_len);
	st = llm_strtab_init(&t->merges, (uint32_t) merges->arr_len, err);
	if (st != LLM_OK)
		return st;
	size = 0;
	for (uint64_t i = 0; i < merges->arr_len; i++)
	{
		const LlmGgufStr *s = &merges->arr_items[i].str;

		if (s->len > 0)
			memcpy(t->merge_arena + size, s->ptr, s->len);
		t->merge_arena[size + s->len] = '\0';
		/* a repeated merge keeps its first (lowest) rank */
		(void) llm_strtab_insert(&t->merges, t->merge_arena + size, (uint32_t) s->len, (int32_t) i);
		size += s->len + 1;
	}
	return LLM_OK;
}

/* Set up byte-level BPE: byte table, merges and the pre-tokenizer expression. */
LlmStatus
llm_bpe_init(LlmTokenizer *t, const LlmGguf *g, LlmError *err)
{
	const char *pattern = llm_re_gpt2;
	char	   *pre = NULL;
	int			errcode = 0;
	PCRE2_SIZE	erroffset = 0;
	LlmStatus	st;

	llm_bpe_init_bytes(t);
	st = llm_bpe_load_merges(t, g, err);
	if (st != LLM_OK)
		return st;

	t->pre = LLM_PRE_GPT2;
	if (llm_gguf_get(g, "tokenizer.ggml.pre") != NULL)
	{
		st = llm_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
		if (st != LLM_OK)
			return st;
		if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0 ||
			strcmp(pre, "llama-v3") == 0)
		{
			t->pre = LLM_PRE_LLAMA3;
			pattern = llm_re_llama3;
			t->ignore_merges = true;
		}
		else if (strcmp(pre, "qwen2") == 0)
		{
			t->pre = LLM_PRE_QWEN2;
			pattern = llm_re_qwen2;
		}
		free(pre);
	}

	t->re = pcre2_compile((PCRE2_SPTR) pattern, PCRE2_ZERO_TERMINATED,
						  PCRE2_UTF | PCRE2_UCP,
						  &errcode, &erroffset, NULL);
	if (t->re == NULL)
	{
		PCRE2_UCHAR msg[256];

		pcre2_get_error_message(errcode, msg, sizeof(msg));
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "could not compile the pre-tokenizer expression at offset %zu: %s",
							 (size_t) erroffset, (const char *) msg);
	}
	/* JIT when available; otherwise pcre2_match interprets */
	t->jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0;
	return LLM_OK;
}

/* Free what llm_bpe_init allocated; safe on an SPM or half-built tokenizer. */
void
llm_bpe_free(LlmTokenizer *t)
{
	if (t->re != NULL)
		pcre2_code_free(t->re);
	t->re = NULL;
	llm_strtab_free(&t->merges);
	free(t->merge_arena);
	t->merge_arena = NULL;
}

/* Decode one valid UTF-8 character of length n into its code point. */
static uint32_t
llm_utf8_decode(const uint8_t *s, size_t n)
{
	switch (n)
	{
		case 1:
			return s[0];
		case 2:
			return ((uint32_t) (s[0] & 0x1F) << 6) | (s[1] & 0x3F);
		case 3:
			return ((uint32_t) (s[0] & 0x0F) << 12) | ((uint32_t) (s[1] & 0x3F) << 6) | (s[2] & 0x3F);
		default:
			return ((uint32_t) (s[0] & 0x07) << 18) | ((uint32_t) (s[1] & 0x3F) << 12) |
				((uint32_t) (s[2] & 0x3F) << 6) | (s[3] & 0x3F);
	}
}

/*
 * Map a token's text back to bytes via the inverse of bytes_to_unicode;
 * characters outside the table (and ill-formed bytes) are copied as they
 * are.  dst needs len bytes; returns the length written.
 */
size_t
llm_bpe_decode_text(const LlmTokenizer *t, const char *s, size_t len, char *dst)
{
	size_t		n = 0;
	const int	ncp = (int) (sizeof(t->cp_byte) / sizeof(t->cp_byte[0]));

	for (size_t i = 0; i < len;)
	{
		size_t		cl = llm_utf8_len((const uint8_t *) s + i, len - i);
		uint32_t	cp = llm_utf8_decode((const uint8_t *) s + i, cl);

		if ((cl > 1 || (uint8_t) s[i] < 0x80) && cp < (uint32_t) ncp && t->cp_byte[cp] >= 0)
			dst[n++] = (char) t->cp_byte[cp];
		else
		{
			memcpy(dst + n, s + i, cl);
			n += cl;
		}
		i += cl;
	}
	return n;
}

/* Scratch buffers of one BPE call, reused across its pieces. */
typedef struct LlmBpeState
{
	const LlmTokenizer *t;
	char	   *word;			/* the mapped piece */
	size_t		word_cap;
	LlmSymbol  *sym;
	size_t		sym_cap;
	LlmBigramHeap heap;
} LlmBpeState;

/* Queue the pair (left, right) when a merge rule joins them. */
static LlmStatus
llm_bpe_try_pair(LlmBpeState *s, int32_t left, int32_t right, LlmError *err)
{
	LlmBigram	b;
	int32_t		rank;
	const LlmSymbol *l,
			   *r;

	if (left < 0 || right < 0)
		return LLM_OK;
	l = &s->sym[left];
	r = &s->sym[right];
	rank = llm_strtab_find_pair(&s->t->merges, s->word + l->off, l->n, ' ', s->word + r->off, r->n);
	if (rank < 0)
		return LLM_OK;
	b.prio = -(double) rank;
	b.left = left;
	b.right = right;
	b.size = l->n + r->n;
	return llm_heap_push(&s->heap, &b, err);
}

/* Emit the token(s) of one final symbol (see step 4 above). */
static LlmStatus
llm_bpe_emit(const LlmTokenizer *t, const char *text, size_t n, LlmTokBuf *out, LlmError *err)
{
	int32_t		id = llm_tokenizer_lookup(t, text, n);
	LlmStatus	st = LLM_OK;

	if (id >= 0)
		return llm_tokbuf_push(out, id, err);
	for (size_t i = 0; i < n && st == LLM_OK;)
	{
		size_t		cl = llm_utf8_len((const uint8_t *) text + i, n - i);

		id = llm_tokenizer_lookup(t, text + i, cl);
		if (id >= 0)
			st = llm_tokbuf_push(out, id, err);
		i += cl;
	}
	return st;
}

/* Tokenize one pre-tokenized piece: map its bytes, merge by rank, emit. */
static LlmStatus
llm_bpe_piece(LlmBpeState *s, const char *text, size_t len, LlmTokBuf *out, LlmError *err)
{
	const LlmTokenizer *t = s->t;
	size_t		wlen = 0;
	int32_t		n_sym = 0;
	LlmBigram	b;
	LlmStatus	st = LLM_OK;

	if (len == 0)
		return LLM_OK;
	if (2 * len > s->word_cap)
	{
		char	   *w = realloc(s->word, 2 * len);

		if (w == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a piece of %zu bytes", len);
		s->word = w;
		s->word_cap = 2 * len;
	}
	if (len > s->sym_cap)
	{
		LlmSymbol  *sym = realloc(s->sym, len * sizeof(LlmSymbol));

		if (sym == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a piece of %zu bytes", len);
		s->sym = sym;
		s->sym_cap = len;
	}

	/* 2. bytes to code points (all below U+0800: one or two bytes each) */
	for (size_t i = 0; i < len; i++)
	{
		uint16_t	cp = t->byte_cp[(uint8_t) text[i]];

		s->sym[n_sym].prev = n_sym - 1;
		s->sym[n_sym].next = i + 1 < len ? n_sym + 1 : -1;
		s->sym[n_sym].off = (uint32_t) wlen;
		if (cp < 0x80)
		{
			s->word[wlen++] = (char) cp;
			s->sym[n_sym].n = 1;
		}
		else
		{
			s->word[wlen++] = (char) (0xC0 | (cp >> 6));
			s->word[wlen++] = (char) (0x80 | (cp & 0x3F));
			s->sym[n_sym].n = 2;
		}
		n_sym++;
	}

	if (t->ignore_merges)
	{
		int32_t		id = llm_tokenizer_lookup(t, s->word, wlen);

		if (id >= 0)
			return llm_tokbuf_push(out, id, err);
	}

	/* 3. merge the lowest-ranked pair while any merge applies */
	s->heap.n = 0;
	for (int32_t i = 1; i < n_sym && st == LLM_OK; i++)
		st = llm_bpe_try_pair(s, i - 1, i, err);
	while (st == LLM_OK && llm_heap_pop(&s->heap, &b))
	{
		LlmSymbol  *l = &s->sym[b.left];
		LlmSymbol  *r = &s->sym[b.right];

		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			s->sym[r->next].prev = b.left;
		st = llm_bpe_try_pair(s, l->prev, b.left, err);
		if (st == LLM_OK)
			st = llm_bpe_try_pair(s, b.left, l->next, err);
	}

	/* 4. emit */
	for (int32_t i = 0; st == LLM_OK && i >= 0; i = s->sym[i].next)
		st = llm_bpe_emit(t, s->word + s->sym[i].off, s->sym[i].n, out, err);
	return st;
}

/* Pre-tokenize one run of well-formed UTF-8 and tokenize its pieces. */
static LlmStatus
llm_bpe_run(LlmBpeState *s, pcre2_match_data *md, const char *text, size_t len,
			LlmTokBuf *out, LlmError *err)
{
	const LlmTokenizer *t = s->t;
	uint32_t	options = PCRE2_NO_UTF_CHECK | (t->jit ? 0 : PCRE2_NO_JIT);
	size_t		start = 0;
	LlmStatus	st = LLM_OK;

	while (start < len && st == LLM_OK)
	{
		PCRE2_SIZE *ov;
		int			rc = pcre2_match(t->re, (PCRE2_SPTR) text, len, start, options, md, NULL);

		if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
			rc = pcre2_match(t->re, (PCRE2_SPTR) text, len, start, options | PCRE2_NO_JIT, md, NULL);
		if (rc == PCRE2_ERROR_NOMATCH)
			return llm_bpe_piece(s, text + start, len - start, out, err);
		if (rc < 0)
		{
			PCRE2_UCHAR msg[256];

			pcre2_get_error_message(rc, msg, sizeof(msg));
			return llm_error_set(err, LLM_ERR_LIMIT, "pre-tokenizer failed at byte %zu: %s",
								 start, (const char *) msg);
		}
		ov = pcre2_get_ovector_pointer(md);
		/* text no alternative matched (none of our expressions leaves any) */
		if (ov[0] > start)
			st = llm_bpe_piece(s, text + start, ov[0] - start, out, err);
		if (st != LLM_OK)
			break;
		if (ov[1] > ov[0])
		{
			st = llm_bpe_piece(s, text + ov[0], ov[1] - ov[0], out, err);
			start = ov[1];
		}
		else if (ov[0] < len)
		{
			/* an empty match (none of our expressions has one): take a character */
			size_t		cl = llm_utf8_len((const uint8_t *) text + ov[0], len - ov[0]);

			st = llm_bpe_piece(s, text + ov[0], cl, out, err);
			start = ov[0] + cl;
		}
		else
			break;
	}
	return st;
}

/* Whether the byte at s (n left) starts no well-formed UTF-8 sequence. */
static inline bool
llm_utf8_bad(const char *s, size_t n)
{
	return (uint8_t) s[0] >= 0x80 && llm_utf8_len((const uint8_t *) s, n) == 1;
}

/* Tokenize one text fragment with byte-level BPE, appending to out. */
LlmStatus
llm_bpe_tokenize(const LlmTokenizer *t, const char *text, size_t len,
				 LlmTokBuf *out, LlmError *err)
{
	LlmBpeState s = {0};
	pcre2_match_data *md;
	size_t		pos = 0;
	LlmStatus	st = LLM_OK;

	if (len == 0)
		return LLM_OK;
	md = pcre2_match_data_create_from_pattern(t->re, NULL);
	if (md == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a pre-tokenizer match");
	s.t = t;

	/* 1. pre-tokenize each well-formed run; each ill-formed run is a piece */
	while (pos < len && st == LLM_OK)
	{
		size_t		end = pos;

		while (end < len && !llm_utf8_bad(text + end, len - end))
			end += llm_utf8_len((const uint8_t *) text + end, len - end);
		if (end > pos)
			st = llm_bpe_run(&s, md, text + pos, end - pos, out, err);
		pos = end;
		while (end < len && llm_utf8_bad(text + end, len - end))
			end++;
		if (st == LLM_OK && end > pos)
			st = llm_bpe_piece(&s, text + pos, end - pos, out, err);
		pos = end;
	}

	pcre2_match_data_free(md);
	llm_heap_free(&s.heap);
	free(s.sym);
	free(s.word);
	return st;
}
