/*
 * tokenizer_bpe.c
 *		Byte-level BPE (tokenizer.ggml.model = "gpt2").
 *
 * GPT-2's tokenizer (Radford et al. 2019, "Language Models are Unsupervised
 * Multitask Learners", section 2.2) in four steps, on one fragment of text
 * without special tokens:
 *
 * 1. Pre-tokenize: split the text into pieces with the regular expressions
 *    of the pre-tokenizer that tokenizer.ggml.pre names (tokenizer_pre.c;
 *    GPT-2's: contractions, optional space + letters, optional space +
 *    digits, optional space + other symbols, whitespace runs).  PCRE2 runs
 *    them, compiled once per tokenizer with Unicode properties (UTF + UCP),
 *    JIT-compiled when PCRE2 supports it on this machine.
 * 2. Map each byte of a piece to a printable code point (GPT-2's
 *    bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 *    other 68 bytes for U+0100 onwards), so "Ġ" is a space and "Ċ" a newline.
 *    (Pre-tokenizers of SPM-style vocabularies, Gemma 4's, skip this step:
 *    they merge the UTF-8 characters themselves, and a symbol that is no
 *    token falls back to <0xNN> byte tokens.)
 * 3. Split the mapped piece into code points and repeatedly merge the
 *    adjacent pair with the lowest rank in tokenizer.ggml.merges (ties:
 *    leftmost), with a heap and stale-entry checks as in tokenizer_spm.c.
 * 4. Each final symbol is a vocabulary token.  A symbol that is not (only
 *    possible with a vocabulary missing some of the 256 byte symbols or
 *    merge results) falls back to one token per code point, and code points
 *    that are not tokens either are skipped, as llama.cpp does.
 *
 * Several expressions.  Most pre-tokenizers have one expression; some (the
 * DeepSeek ones, Falcon's, StarCoder's, llama.cpp's default) have a list.
 * As in llama.cpp (unicode_regex_split), the first expression cuts the text
 * into its matches and the text between them, the second cuts each of those
 * pieces the same way, and so on; each expression sees one piece as its
 * whole subject, so lookarounds and $ stop at the piece's ends.  An empty
 * match cuts the text there and produces no piece; the next search starts
 * at the same place but must not be empty there (std::regex_iterator's
 * rule), which is how SuperBPE's "(?=(\d{3})+(?!\d))" cuts numbers into
 * threes.  Pieces go straight from the last expression to the merges, by
 * recursion over the list, so one expression is still one pass.
 *
 * llama.cpp's reading of the expressions.  llama.cpp runs the expressions
 * it has no hand-written splitter for through std::regex on a "collapsed"
 * text, every non-ASCII character replaced by one byte standing for its
 * category, and \p{..} by a class of those bytes.  So for it \p{Lu},
 * \p{Ll}, \p{Lt}, \p{Lm} and \p{Lo} all mean any letter (there is one
 * letter byte), and ECMAScript's \d is [0-9] and $ the end of the subject.
 * Expressions without \p{..} it matches with std::wregex on the code points,
 * its non-ASCII whitespace first replaced by U+000B, so a literal U+3000 in
 * a class (DeepSeek's punctuation and CJK classes) never matches there.
 * llm_pre_translate rewrites the expressions to those meanings before
 * PCRE2 compiles them (PCRE2 with UCP would take \d for any decimal digit
 * and \p{Lu} for upper case only; PCRE2_DOLLAR_ENDONLY makes $ the end).
 * Two of llama.cpp's strings name hand-written splitters instead (AFMoE's
 * and Tiny Aya's digits in threes, which also join the text before a run of
 * digits to its first group); llm_pre_split_digits is that splitter.
 * test_tokenizer checks all of this against llama.cpp's own output for
 * every pre-tokenizer (test/data/pre_reference.tsv).  Where the two may
 * still differ, on text those inputs do not have:
 *   - \s: llama.cpp's whitespace is the Unicode White_Space set (tab to
 *     CR, space, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
 *     U+202F, U+205F, U+3000); PCRE2 10.42's \s with UCP is the same plus
 *     U+180E (Mongolian vowel separator, a format character since Unicode
 *     6.3), which llama.cpp counts as neither space nor letter.
 *   - \p{L}, \p{N}, \p{P}, \p{S}, \p{M}: the same general categories,
 *     but from llama.cpp's own tables (unicode-data.cpp) against PCRE2's;
 *     characters assigned in one Unicode version and not the other differ.
 *     llama.cpp's hand-written splitters (GPT-2's, Llama 3's, ...) also
 *     never let a code point without a category into [^\s\p{L}\p{N}]+
 *     (each is a piece of its own); PCRE2 does.
 *   - Kimi K2's hand-written splitter is written as one expression (see
 *     tokenizer_pre.c); its Han blocks are llama.cpp's list.
 *
 * Invalid UTF-8.  The text is cut into maximal runs of well-formed UTF-8
 * and runs of ill-formed bytes.  Each ill-formed run is one piece; each
 * well-formed run is pre-tokenized on its own (the expressions see it as the
 * whole subject), matched with PCRE2_NO_UTF_CHECK since it was just checked.
 * Every byte still maps to a code point in step 2, so any input round-trips
 * byte for byte; llama.cpp instead replaces such bytes with U+FFFD.  (Not
 * PCRE2_MATCH_INVALID_UTF: with it PCRE2's interpreter, used when JIT is
 * unavailable, rescans the rest of the subject at every match, which is
 * quadratic: minutes for a megabyte.)
 *
 * Pre-tokenizers.  Every tokenizer.ggml.pre value of llama.cpp's table is
 * known (tokenizer_pre.c); a value it does not know is refused, as llama.cpp
 * refuses it, and a missing key selects llama.cpp's default pre-tokenizer.
 * Those of llama.cpp's reference suites (models/ggml-vocab-*, each with its
 * own vocabulary: command-r, deepseek-coder, deepseek-llm, falcon, gemma4,
 * gpt-2, llama-bpe, mpt, qwen2, qwen35, refact, starcoder) are checked
 * against them (../shared/vocab, and tools/fetch-vocab.sh's copy of all of
 * them); every name but "whitespace" (which
 * llama-tokenize aborts on) against llama-tokenize's ids with the llama-bpe
 * vocabulary (test/data/pre_reference.tsv); and simple rules piece by piece
 * (test_tokenizer.c).
 */
#include "tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

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

/*
 * Copy and index tokenizer.ggml.merges ("left right" -> rank).  Only with
 * optional may the key be missing (then nothing merges).
 */
static LlmStatus
llm_bpe_load_merges(LlmTokenizer *t, const LlmGguf *g, bool optional, LlmError *err)
{
	const LlmGgufValue *merges;
	LlmStatus	st;
	size_t		size = 0;

	if (optional && llm_gguf_get(g, "tokenizer.ggml.merges") == NULL)
		return llm_strtab_init(&t->merges, 0, err);
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

/* The pre-tokenizer named name (a tokenizer.ggml.pre value), or NULL. */
const LlmPreName *
llm_pre_find(const char *name)
{
	for (int i = 0; i < llm_pre_n_names; i++)
		if (strcmp(llm_pre_names[i].name, name) == 0)
			return &llm_pre_names[i];
	return NULL;
}

/* Non-ASCII White_Space, as the inside of a class (see llm_pre_translate). */
#define LLM_PRE_NONASCII_SPACE "\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
	"\\x{202F}\\x{205F}\\x{3000}"

/* The end of the class that starts at src[i] ('['): the index of its ']', or of the NUL. */
static size_t
llm_pre_class_end(const char *src, size_t i)
{
	i++;
	if (src[i] == '^')
		i++;
	if (src[i] == ']')
		i++;
	for (; src[i] != '\0' && src[i] != ']'; i++)
		if (src[i] == '\\' && src[i + 1] != '\0')
			i++;
	return i;
}

/*
 * Rewrite one of llama.cpp's expressions to what llama.cpp matches with it
 * (this file's header): \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} -> \p{L},
 * \d -> [0-9] (0-9 inside a class).  And in an expression without \p{..}
 * (one llama.cpp matches on the text with its non-ASCII whitespace turned
 * into U+000B), a class with non-ASCII members does not match non-ASCII
 * whitespace: [...] -> (?:(?![ws])[...]).  The result needs at most
 * llm_pre_translate_size(src) bytes.
 */
static void
llm_pre_translate(const char *src, char *dst)
{
	bool		in_class = false;
	bool		close_group = false;	/* a ) is due after this class */
	bool		no_props = strstr(src, "\\p{") == NULL;
	size_t		n = 0;

	for (size_t i = 0; src[i] != '\0'; i++)
	{
		char		c = src[i];

		if (c == '\\' && src[i + 1] != '\0')
		{
			char		e = src[i + 1];

			if (e == 'p' && src[i + 2] == '{' && src[i + 3] == 'L' &&
				src[i + 4] != '\0' && strchr("ultmo", src[i + 4]) != NULL && src[i + 5] == '}')
			{
				memcpy(dst + n, "\\p{L}", 5);
				n += 5;
				i += 5;
				continue;
			}
			if (e == 'd')
			{
				const char *r = in_class ? "0-9" : "[0-9]";

				memcpy(dst + n, r, strlen(r));
				n += strlen(r);
				i++;
				continue;
			}
			dst[n++] = c;
			dst[n++] = e;
			i++;
			continue;
		}
		if (!in_class && c == '[')
		{
			size_t		end = llm_pre_class_end(src, i);
			bool		non_ascii = false;

			for (size_t k = i; k < end; k++)
				non_ascii |= (uint8_t) src[k] >= 0x80;
			if (no_props && non_ascii && src[i + 1] != '^')
			{
				static const char guard[] = "(?:(?![" LLM_PRE_NONASCII_SPACE "])";

				memcpy(dst + n, guard, strlen(guard));
				n += strlen(guard);
				close_group = true;
			}
			in_class = true;
			dst[n++] = c;
			/* a ] right after [ or [^ is a member, not the end */
			if (src[i + 1] == '^')
				dst[n++] = src[++i];
			if (src[i + 1] == ']')
				dst[n++] = src[++i];
			continue;
		}
		dst[n++] = c;
		if (in_class && c == ']')
		{
			in_class = false;
			if (close_group)
				dst[n++] = ')';
			close_group = false;
		}
	}
	dst[n] = '\0';
}

/* The room llm_pre_translate needs for src. */
static size_t
llm_pre_translate_size(const char *src)
{
	size_t		classes = 0;

	for (const char *c = src; *c != '\0'; c++)
		classes += *c == '[';
	return 2 * strlen(src) + classes * (sizeof(LLM_PRE_NONASCII_SPACE) + 16) + 1;
}

/*
 * llama.cpp's own splitter for two expressions (unicode_regex_split_custom:
 * AFMoE's "\p{AFMoE_digits}" and Tiny Aya's "\d{1,3}(?=(?:\d{3})*\b)"):
 * each run of \p{N} is cut into groups of three from the right, and the
 * text before a run joins the run's first group.  LLM_PRE_MODE_DIGITS
 * marks it; the compiled expression then finds the runs.
 */
static const char *const llm_pre_digits_exprs[] = {
	"\\p{AFMoE_digits}", "\\d{1,3}(?=(?:\\d{3})*\\b)"
};

/* Compile the pre-tokenizer's expressions (JIT when every one allows it). */
static LlmStatus
llm_bpe_compile(LlmTokenizer *t, const char *name, LlmError *err)
{
	t->jit = true;
	if (t->pre->n_exprs < 1 || t->pre->n_exprs > LLM_PRE_MAX_EXPRS)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "pre-tokenizer \"%s\" has %d expressions",
							 name, t->pre->n_exprs);
	for (int i = 0; i < t->pre->n_exprs; i++)
	{
		const char *src = t->pre->exprs[i];
		char	   *pattern;
		int			errcode = 0;
		PCRE2_SIZE	erroffset = 0;

		t->re_mode[i] = LLM_PRE_MODE_MATCH;
		for (size_t k = 0; k < sizeof(llm_pre_digits_exprs) / sizeof(llm_pre_digits_exprs[0]); k++)
			if (strcmp(src, llm_pre_digits_exprs[k]) == 0)
			{
				t->re_mode[i] = LLM_PRE_MODE_DIGITS;
				src = "\\p{N}+";
			}
		pattern = malloc(llm_pre_translate_size(src));
		if (pattern == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a pre-tokenizer expression");
		llm_pre_translate(src, pattern);
		t->re[i] = pcre2_compile((PCRE2_SPTR) pattern, PCRE2_ZERO_TERMINATED,
								 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
								 &errcode, &erroffset, NULL);
		free(pattern);
		if (t->re[i] == NULL)
		{
			PCRE2_UCHAR msg[256];

			pcre2_get_error_message(errcode, msg, sizeof(msg));
			return llm_error_set(err, LLM_ERR_UNSUPPORTED,
								 "could not compile expression %d of pre-tokenizer \"%s\" at offset %zu: %s",
								 i + 1, name, (size_t) erroffset, (const char *) msg);
		}
		/* JIT when available; otherwise pcre2_match interprets */
		if (pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE) != 0)
			t->jit = false;
	}
	return LLM_OK;
}

/*
 * Select the pre-tokenizer named name (a tokenizer.ggml.pre value; NULL:
 * the key is missing) and compile it, replacing any selected before.  Sets
 * the flags that come with the name; add_bos and add_sep are defaults that
 * tokenizer.c may override from the file.
 */
LlmStatus
llm_bpe_use_pre(LlmTokenizer *t, const char *name, LlmError *err)
{
	const LlmPreName *p = NULL;
	uint8_t		flags = 0;

	if (name != NULL)
	{
		p = llm_pre_find(name);
		if (p == NULL)
			return llm_error_set(err, LLM_ERR_UNSUPPORTED,
								 "unknown pre-tokenizer \"%s\" (tokenizer.ggml.pre)", name);
		flags = p->flags;
	}
	for (int i = 0; i < LLM_PRE_MAX_EXPRS; i++)
	{
		if (t->re[i] != NULL)
			pcre2_code_free(t->re[i]);
		t->re[i] = NULL;
	}
	/* as in llama.cpp: no tokenizer.ggml.pre is its default pre-tokenizer */
	t->pre = p != NULL ? p->group : llm_pre_group_missing;
	t->ignore_merges = (flags & LLM_PRE_IGNORE_MERGES) != 0;
	t->escape_spaces = (flags & LLM_PRE_ESCAPE_SPACES) != 0;
	t->newlines_whole = (flags & LLM_PRE_NEWLINES_WHOLE) != 0;
	t->raw_utf8 = t->pre->raw_utf8;
	t->add_bos = (flags & LLM_PRE_ADD_BOS) != 0;
	t->add_sep = (flags & LLM_PRE_ADD_SEP) != 0;
	return llm_bpe_compile(t, p != NULL ? p->name : "default", err);
}

/*
 * Set up byte-level BPE: byte table, merges and the pre-tokenizer, which is
 * forced_pre when not NULL (a tokenizer model that implies its own, as
 * llama.cpp's "gemma4" does), else the one tokenizer.ggml.pre names.
 */
LlmStatus
llm_bpe_init(LlmTokenizer *t, const LlmGguf *g, const char *forced_pre, LlmError *err)
{
	char	   *pre = NULL;
	LlmStatus	st;

	llm_bpe_init_bytes(t);
	if (forced_pre != NULL)
	{
		pre = strdup(forced_pre);
		if (pre == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a pre-tokenizer name");
	}
	else if (llm_gguf_get(g, "tokenizer.ggml.pre") != NULL)
	{
		st = llm_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
		if (st != LLM_OK)
			return st;
	}
	/* as llama.cpp allows, Kimi K2's vocabularies may come without merges */
	st = llm_bpe_load_merges(t, g, pre != NULL && strcmp(pre, "kimi-k2") == 0, err);
	if (st == LLM_OK)
		st = llm_bpe_use_pre(t, pre, err);
	free(pre);
	return st;
}

/* Free what llm_bpe_init allocated; safe on an SPM or half-built tokenizer. */
void
llm_bpe_free(LlmTokenizer *t)
{
	for (int i = 0; i < LLM_PRE_MAX_EXPRS; i++)
	{
		if (t->re[i] != NULL)
			pcre2_code_free(t->re[i]);
		t->re[i] = NULL;
	}
	llm_strtab_free(&t->merges);
	free(t->merge_arena);
	t->merge_arena = NULL;
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
	if (t->raw_utf8)
	{
		/* SPM-style vocabularies: <0xNN> for each byte */
		for (size_t i = 0; i < n && st == LLM_OK; i++)
			if (t->byte_token[(uint8_t) text[i]] >= 0)
				st = llm_tokbuf_push(out, t->byte_token[(uint8_t) text[i]], err);
		return st;
	}
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
	bool		all_newlines;
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
	if (!t->raw_utf8)
	{
		const uint16_t *byte_cp = t->byte_cp;

		for (size_t i = 0; i < len; i++)
		{
			uint16_t	cp = byte_cp[(uint8_t) text[i]];

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
	}
	else
	{
		/* or the UTF-8 characters themselves */
		for (size_t i = 0; i < len;)
		{
			size_t		cl = llm_utf8_len((const uint8_t *) text + i, len - i);

			memcpy(s->word + wlen, text + i, cl);
			s->sym[n_sym].prev = n_sym - 1;
			s->sym[n_sym].next = i + cl < len ? n_sym + 1 : -1;
			s->sym[n_sym].off = (uint32_t) wlen;
			s->sym[n_sym].n = (uint32_t) cl;
			wlen += cl;
			i += cl;
			n_sym++;
		}
	}

	all_newlines = t->newlines_whole;
	for (size_t i = 0; all_newlines && i < wlen; i++)
		all_newlines = s->word[i] == '\n';
	if (t->ignore_merges || all_newlines)
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

/* One pre-tokenizer split in progress: the match data and where pieces go. */
typedef struct LlmPreSplit
{
	const LlmTokenizer *t;
	pcre2_match_data *md;
	uint32_t	options;		/* for every pcre2_match */
	int			n_exprs;		/* t->pre->n_exprs */
	LlmPieceFn	fn;
	void	   *arg;
} LlmPreSplit;

static LlmStatus llm_pre_split_piece(LlmPreSplit *c, int i, const char *text, size_t len,
									 LlmError *err);

/* Hand one piece of expression i on: to expression i + 1, or to fn after the last. */
static inline LlmStatus
llm_pre_pass(LlmPreSplit *c, int i, const char *text, size_t len, LlmError *err)
{
	if (i + 1 == c->n_exprs)
		return c->fn(c->arg, text, len, err);
	return llm_pre_split_piece(c, i + 1, text, len, err);
}

/* Match expression i at start; false at no match, with *st set on a failure. */
static bool
llm_pre_match(LlmPreSplit *c, int i, const char *text, size_t len, size_t start, uint32_t options,
			  size_t *m0, size_t *m1, LlmStatus *st, LlmError *err)
{
	const LlmTokenizer *t = c->t;
	int			rc = pcre2_match(t->re[i], (PCRE2_SPTR) text, len, start, options, c->md, NULL);
	PCRE2_SIZE *ov;

	if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
		rc = pcre2_match(t->re[i], (PCRE2_SPTR) text, len, start, options | PCRE2_NO_JIT, c->md, NULL);
	*st = LLM_OK;
	if (rc == PCRE2_ERROR_NOMATCH)
		return false;
	if (rc < 0)
	{
		PCRE2_UCHAR msg[256];

		pcre2_get_error_message(rc, msg, sizeof(msg));
		*st = llm_error_set(err, LLM_ERR_LIMIT, "pre-tokenizer failed at byte %zu: %s",
							start, (const char *) msg);
		return false;
	}
	ov = pcre2_get_ovector_pointer(c->md);
	*m0 = ov[0];
	*m1 = ov[1];
	return true;
}

/*
 * LLM_PRE_MODE_DIGITS over one piece: every run of digits (expression i
 * finds them) in groups of three from the right, the text before the run
 * joined to its first group, as llama.cpp's splitter does.
 */
static LlmStatus
llm_pre_split_digits(LlmPreSplit *c, int i, const char *text, size_t len, LlmError *err)
{
	size_t		start = 0;
	size_t		prev = 0;		/* the first byte not yet in a piece */
	size_t		m0,
				m1;
	LlmStatus	st = LLM_OK;

	while (st == LLM_OK && start < len &&
		   llm_pre_match(c, i, text, len, start, c->options, &m0, &m1, &st, err))
	{
		size_t		n_cp = 0;
		size_t		pos = m0;
		size_t		take;

		for (size_t k = m0; k < m1; k += llm_utf8_len((const uint8_t *) text + k, m1 - k))
			n_cp++;
		take = n_cp % 3 != 0 ? n_cp % 3 : 3;
		while (pos < m1 && st == LLM_OK)
		{
			for (size_t k = 0; k < take && pos < m1; k++)
				pos += llm_utf8_len((const uint8_t *) text + pos, m1 - pos);
			st = llm_pre_pass(c, i, text + prev, pos - prev, err);
			prev = pos;
			take = 3;
		}
		start = m1;
	}
	if (st == LLM_OK && len > prev)
		st = llm_pre_pass(c, i, text + prev, len - prev, err);
	return st;
}

/* Run expression i over one piece; hand its pieces to expression i + 1 (see the header). */
static LlmStatus
llm_pre_split_piece(LlmPreSplit *c, int i, const char *text, size_t len, LlmError *err)
{
	size_t		start = 0;		/* where the next search begins */
	size_t		gap = 0;		/* the first byte not yet in a piece */
	bool		after_empty = false;
	const pcre2_code *re = c->t->re[i];
	LlmStatus	st = LLM_OK;

	if (c->t->re_mode[i] == LLM_PRE_MODE_DIGITS)
		return llm_pre_split_digits(c, i, text, len, err);
	while (start < len && st == LLM_OK)
	{
		uint32_t	options = c->options;
		PCRE2_SIZE *ov;
		size_t		m0,
					m1;
		int			rc;

		/* after an empty match, first a non-empty one at the same place */
		if (after_empty)
			options |= PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
		rc = pcre2_match(re, (PCRE2_SPTR) text, len, start, options, c->md, NULL);
		if (rc == PCRE2_ERROR_NOMATCH)
		{
			if (!after_empty)
				break;
			/* none: search on from the next character */
			after_empty = false;
			start += llm_utf8_len((const uint8_t *) text + start, len - start);
			continue;
		}
		if (rc < 0)
		{
			/* rare (the JIT stack, say): the careful path */
			if (!llm_pre_match(c, i, text, len, start, options, &m0, &m1, &st, err))
			{
				if (st != LLM_OK || !after_empty)
					break;
				after_empty = false;
				start += llm_utf8_len((const uint8_t *) text + start, len - start);
				continue;
			}
		}
		else
		{
			ov = pcre2_get_ovector_pointer(c->md);
			m0 = ov[0];
			m1 = ov[1];
		}
		/* the text between matches is a piece too */
		if (m0 > gap)
			st = llm_pre_pass(c, i, text + gap, m0 - gap, err);
		if (st == LLM_OK && m1 > m0)
			st = llm_pre_pass(c, i, text + m0, m1 - m0, err);
		gap = m1;
		start = m1;
		after_empty = m1 == m0;
	}
	if (st == LLM_OK && len > gap)
		st = llm_pre_pass(c, i, text + gap, len - gap, err);
	return st;
}

/* Whether the byte at s (n left) starts no well-formed UTF-8 sequence. */
static inline bool
llm_utf8_bad(const char *s, size_t n)
{
	return (uint8_t) s[0] >= 0x80 && llm_utf8_len((const uint8_t *) s, n) == 1;
}

/*
 * Cut one text fragment into pre-tokenizer pieces, calling fn on each in
 * order: every well-formed UTF-8 run goes through the expressions, every
 * ill-formed run is one piece.  With escape_spaces the pieces are of the
 * text with its spaces written as U+2581.
 */
LlmStatus
llm_bpe_pre_split(const LlmTokenizer *t, const char *text, size_t len,
				  LlmPieceFn fn, void *arg, LlmError *err)
{
	LlmPreSplit c;
	char	   *escaped = NULL;
	size_t		pos = 0;
	LlmStatus	st = LLM_OK;

	if (len == 0)
		return LLM_OK;
	if (t->escape_spaces)
	{
		size_t		n = 0;

		if (len > SIZE_MAX / 3)
			return llm_error_set(err, LLM_ERR_LIMIT, "text of %zu bytes is too long", len);
		escaped = malloc(3 * len);
		if (escaped == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %zu bytes of text", len);
		for (size_t i = 0; i < len; i++)
		{
			if (text[i] == ' ')
			{
				memcpy(escaped + n, "\xE2\x96\x81", 3);
				n += 3;
			}
			else
				escaped[n++] = text[i];
		}
		text = escaped;
		len = n;
	}
	c.t = t;
	c.md = pcre2_match_data_create(1, NULL);
	c.options = PCRE2_NO_UTF_CHECK | (t->jit ? 0 : PCRE2_NO_JIT);
	c.n_exprs = t->pre->n_exprs;
	c.fn = fn;
	c.arg = arg;
	if (c.md == NULL)
	{
		free(escaped);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a pre-tokenizer match");
	}
	while (pos < len && st == LLM_OK)
	{
		size_t		end = pos;

		while (end < len && !llm_utf8_bad(text + end, len - end))
			end += llm_utf8_len((const uint8_t *) text + end, len - end);
		if (end > pos)
			st = llm_pre_split_piece(&c, 0, text + pos, end - pos, err);
		pos = end;
		while (end < len && llm_utf8_bad(text + end, len - end))
			end++;
		if (st == LLM_OK && end > pos)
			st = fn(arg, text + pos, end - pos, err);
		pos = end;
	}
	pcre2_match_data_free(c.md);
	free(escaped);
	return st;
}

/* What llm_bpe_tokenize hands llm_bpe_pre_split: the state and the output. */
typedef struct LlmBpeCall
{
	LlmBpeState s;
	LlmTokBuf  *out;
} LlmBpeCall;

/* Tokenize one piece (an LlmPieceFn). */
static LlmStatus
llm_bpe_piece_fn(void *arg, const char *text, size_t len, LlmError *err)
{
	LlmBpeCall *call = arg;

	return llm_bpe_piece(&call->s, text, len, call->out, err);
}

/* Tokenize one text fragment with byte-level BPE, appending to out. */
LlmStatus
llm_bpe_tokenize(const LlmTokenizer *t, const char *text, size_t len,
				 LlmTokBuf *out, LlmError *err)
{
	LlmBpeCall	call;
	LlmStatus	st;

	memset(&call, 0, sizeof(call));
	call.s.t = t;
	call.out = out;
	/* 1. pre-tokenize; 2.-4. for each piece */
	st = llm_bpe_pre_split(t, text, len, llm_bpe_piece_fn, &call, err);
	llm_heap_free(&call.s.heap);
	free(call.s.sym);
	free(call.s.word);
	return st;
}
