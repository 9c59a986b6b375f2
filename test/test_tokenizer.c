/*
 * test_tokenizer.c
 *		Tests of the SPM ("llama"), byte-level BPE ("gpt2") and WordPiece
 *		("bert") tokenizers.
 *
 * The reference suites in ../shared/vocab come from llama.cpp: each .inp
 * holds inputs, every one followed by a line "__ggml_vocab_test__" (so an
 * input is the text between two "\n__ggml_vocab_test__\n" separators; the
 * newline before a separator line is not part of the input; the last input
 * may also end the file without one), and line i of the .out holds the ids
 * of input i without BOS.  Both suites must match
 * exactly with either parse_special setting (the BPE ones also with PCRE2's
 * interpreter).  Then: round trips of chosen and random byte strings (the
 * random ones include ill-formed UTF-8), empty input, special tokens,
 * pieces, load errors on synthetic vocabularies built in memory, and a
 * 100 kB timing check.  Pre-tokenizers: every name of tokenizer_pre.c on a
 * synthetic byte-level vocabulary, exact pieces of simple rules, and
 * llama.cpp's ids for every name with the llama-bpe vocabulary
 * (test/data/pre_reference.tsv, from tools/gen_pre_reference.sh).
 * WordPiece: a synthetic BERT vocabulary, its rules one by one and
 * llama.cpp's ids for it (test/data/wpm_reference.tsv, from
 * tools/gen_wpm_reference.sh).  Last, with LLM_TEST_VOCAB naming the folder
 * tools/fetch-vocab.sh unpacks: every vocabulary of llama.cpp's models/
 * (llamacpp_vocabs) loads and passes its suite, or is refused naming what
 * it lacks.  Run from the repository root.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "test.h"
#include "tokenizer.h"
#include "tokenizer_int.h"		/* to force PCRE2's interpreter (t->jit) */

#define SEPARATOR "\n__ggml_vocab_test__\n"

/* Read a whole file into a malloc'd NUL-terminated buffer; NULL on failure. */
static char *
read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *buf;
	long		n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t) n + 1);
	if (buf != NULL && fread(buf, 1, (size_t) n, f) != (size_t) n)
	{
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf != NULL)
	{
		buf[n] = '\0';
		*len = (size_t) n;
	}
	return buf;
}

/* Open the GGUF file at path and load its tokenizer; NULL (and a failed check) on error. */
static LlmTokenizer *
load_path(const char *path, LlmGguf **g)
{
	LlmError	err = {0};
	LlmTokenizer *t = NULL;
	LlmStatus	st;

	st = llm_gguf_open(path, g, &err);
	TEST_CHECK(st == LLM_OK, "open %s: %s", path, err.msg);
	if (st != LLM_OK)
		return NULL;
	st = llm_tokenizer_load(*g, &t, &err);
	TEST_CHECK(st == LLM_OK, "load tokenizer of %s: %s", path, err.msg);
	return st == LLM_OK ? t : NULL;
}

/* load_path for a file of the shared/ folder (name relative to it). */
static LlmTokenizer *
load(const char *name, LlmGguf **g)
{
	char		path[512];

	snprintf(path, sizeof(path), "%s/%s", test_shared_dir(), name);
	return load_path(path, g);
}

/* Tokenize a NUL-terminated string; returns the count, ids in *ids (caller frees). */
static int
tok(const LlmTokenizer *t, const char *s, size_t len, bool bos, bool special, int32_t **ids)
{
	LlmError	err = {0};
	int			n = -1;
	LlmStatus	st = llm_tokenize(t, s, len, bos, special, ids, &n, &err);

	TEST_CHECK(st == LLM_OK, "tokenize: %s", err.msg);
	return st == LLM_OK ? n : -1;
}

/*
 * Whether decode(tokenize(s)) gives s back.  For SPM (spm) the decoded text
 * starts with the space prefix, and a literal U+2581 in s comes back as a
 * space: SentencePiece writes spaces as U+2581, so the two cannot be told
 * apart (SentencePiece itself behaves the same).
 */
static bool
round_trips(const LlmTokenizer *t, const char *s, size_t len, bool spm)
{
	int32_t    *ids = NULL;
	int			n = tok(t, s, len, false, false, &ids);
	char	   *out = NULL;
	char	   *want = malloc(len + 2);
	size_t		olen = 0,
				wlen = 0;
	LlmError	err = {0};
	bool		ok;

	if (n < 0)
	{
		free(want);
		return false;
	}
	if (spm && len > 0)
		want[wlen++] = ' ';
	for (size_t i = 0; i < len;)
	{
		if (spm && i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0)
		{
			want[wlen++] = ' ';
			i += 3;
		}
		else
			want[wlen++] = s[i++];
	}
	ok = llm_detokenize(t, ids, n, &out, &olen, &err) == LLM_OK;
	ok = ok && olen == wlen && memcmp(out, want, wlen) == 0;
	free(ids);
	free(out);
	free(want);
	return ok;
}

/* Run the reference suite dir/vocab (.gguf, .inp, .out); returns the number of inputs that matched. */
static int
run_suite(const char *dir, const char *vocab, bool parse_special, bool no_jit, int *n_total)
{
	char		path[512];
	char	   *inp,
			   *outf;
	size_t		inp_len,
				out_len;
	LlmGguf    *g = NULL;
	LlmTokenizer *t;
	int			n_ok = 0,
				n = 0;
	char	   *pos,
			   *line;

	*n_total = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, vocab);
	t = load_path(path, &g);
	snprintf(path, sizeof(path), "%s/%s.inp", dir, vocab);
	inp = read_file(path, &inp_len);
	snprintf(path, sizeof(path), "%s/%s.out", dir, vocab);
	outf = read_file(path, &out_len);
	TEST_CHECK(inp != NULL && outf != NULL, "read the suite of %s", vocab);
	if (t == NULL || inp == NULL || outf == NULL)
		goto done;
	if (no_jit)
		t->jit = false;

	pos = inp;
	line = outf;
	while (*pos != '\0')
	{
		/* an input ends at the next separator, or at the end of the file */
		char	   *sep = strstr(pos, SEPARATOR);
		char	   *end = sep != NULL ? sep : pos + strlen(pos);
		char	   *eol;
		int32_t    *ids = NULL;
		int			n_ids;
		int32_t		want[1024];
		int			n_want = 0;
		bool		same;

		TEST_CHECK(*line != '\0', "%s: .out has fewer lines than .inp has inputs", vocab);
		if (*line == '\0')
			break;
		eol = strchr(line, '\n');
		if (eol == NULL)
			eol = line + strlen(line);
		else
			*eol++ = '\0';
		for (char *p = line; *p != '\0';)
		{
			char	   *num_end;
			long		v = strtol(p, &num_end, 10);

			if (num_end == p)
				break;
			if (n_want < 1024)
				want[n_want++] = (int32_t) v;
			p = num_end;
		}
		n_ids = tok(t, pos, (size_t) (end - pos), false, parse_special, &ids);
		same = n_ids == n_want && (n_ids == 0 || memcmp(ids, want, (size_t) n_ids * 4) == 0);
		TEST_CHECK(same, "%s input %d (%.*s): %d ids, want %d (first %d vs %d)", vocab, n,
				   (int) (end - pos), pos, n_ids, n_want,
				   n_ids > 0 ? ids[0] : -1, n_want > 0 ? want[0] : -1);
		n_ok += same;
		n++;
		free(ids);
		line = eol;
		if (sep == NULL)
			break;
		pos = sep + strlen(SEPARATOR);
	}
	TEST_CHECK(*line == '\0', "%s: .out has more lines than .inp has inputs", vocab);
	*n_total = n;

done:
	free(inp);
	free(outf);
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	return n_ok;
}

/* Strings every tokenizer must round-trip. */
static const char *const roundtrip_strings[] = {
	"Hello world", "Once upon a time, there was a little girl named Lily.",
	"  leading spaces", "trailing spaces   ", "a  b   c    d", "\t\ttabs\tand\nnewlines\n\n\n",
	"\r\nWindows line\r\n", "caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9", "\303\234ber F\xC3\xBChrer",
	"\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C", /* 你好，世界 */
	"\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF", /* こんにちは */
	"\xF0\x9F\x98\x80\xF0\x9F\x9A\x80 emoji \xF0\x9F\xA6\x99\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
	"\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80", /* Привет мир */
	"\xCE\xB1\xCE\xB2\xCE\xB3 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD8\xB3\xD9\x84\xD8\xA7\xD9\x85",
	"int main(void) { return 0; }\n", "x = 3.14159 * r ** 2  # area", "$$$ !!! ??? ... ---",
	"I'm sure they'll've done it, 'twas", "<s> not special </s> <unk> <|endoftext|>", "\xE2\x96\x81 literal",
	"1234567890 12 345 6789", " ", "\n", "\t", "~", "\x01\x02\x7F control bytes",
};

/* Round trips of chosen strings. */
static void
test_roundtrip_strings(const LlmTokenizer *t, bool spm, const char *name)
{
	for (size_t i = 0; i < sizeof(roundtrip_strings) / sizeof(roundtrip_strings[0]); i++)
		TEST_CHECK(round_trips(t, roundtrip_strings[i], strlen(roundtrip_strings[i]), spm),
				   "%s round trip of \"%s\"", name, roundtrip_strings[i]);
}

/* xorshift64 for reproducible random bytes. */
static uint64_t
rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random byte strings (ill-formed UTF-8 included) never fail and round-trip. */
static void
test_random_bytes(const LlmTokenizer *t, bool spm, const char *name, int count)
{
	static const char *const parts[] = {
		" ", "  ", "a", "e", "the", "\n", "\t", "<s>", "</s>", "<|endoftext|>", "'s", "1",
		"\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\xE2\x96\x81", "\xC3", "\xE4\xBD", "\xF0\x9F",
		"\x80", "\xBF", "\xFF", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x00"
	};
	uint64_t	seed = 0x9E3779B97F4A7C15ull;
	int			n_bad = 0,
				n_fail = 0;

	for (int k = 0; k < count; k++)
	{
		char		buf[256];
		size_t		len = 0;
		size_t		target = rng_next(&seed) % 48;
		int32_t    *ids = NULL;
		int			n;
		LlmError	err = {0};

		while (len < target)
		{
			if (k % 2 == 0)
				buf[len++] = (char) (rng_next(&seed) & 0xFF);
			else
			{
				const char *p = parts[rng_next(&seed) % (sizeof(parts) / sizeof(parts[0]))];
				size_t		pl = strlen(p);

				if (pl == 0)
					pl = 1;		/* the NUL byte */
				memcpy(buf + len, p, pl);
				len += pl;
			}
		}
		if (!round_trips(t, buf, len, spm))
		{
			if (n_bad++ < 3)
				fprintf(stderr, "%s: random string %d (%zu bytes) does not round-trip\n", name, k, len);
		}
		/* with parse_special it must not fail either */
		if (llm_tokenize(t, buf, len, true, true, &ids, &n, &err) != LLM_OK)
			n_fail++;
		free(ids);
	}
	TEST_CHECK(n_bad == 0, "%s: %d of %d random strings do not round-trip", name, n_bad, count);
	TEST_CHECK(n_fail == 0, "%s: %d of %d random strings failed with parse_special", name, n_fail, count);
}

/* Seconds of monotonic time. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 100 kB of text in several shapes tokenizes fast and round-trips. */
static void
test_speed(const LlmTokenizer *t, bool spm, const char *name)
{
	static const char *const unit[] = {
		"The quick brown fox jumps over the lazy dog. \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 1234\n",
		"a", " ", "\xE4\xBD\xA0", "ab ", "\n", "\xFF", "\xE4\xBD", " \xF0\x9F\x98\x80",
	};
	const size_t size = 100 * 1000;
	char	   *buf = malloc(size + 64);

	for (size_t u = 0; u < sizeof(unit) / sizeof(unit[0]); u++)
	{
		size_t		len = 0,
					ul = strlen(unit[u]);
		int32_t    *ids = NULL;
		int			n;
		double		t0,
					dt;

		while (len + ul <= size)
		{
			memcpy(buf + len, unit[u], ul);
			len += ul;
		}
		t0 = now();
		n = tok(t, buf, len, false, false, &ids);
		dt = now() - t0;
		TEST_CHECK(n > 0 && dt < 1.0, "%s: %zu bytes of \"%s\" took %.3f s", name, len, unit[u], dt);
		if (u == 0)
			printf("%s: %zu bytes -> %d tokens in %.3f s\n", name, len, n, dt);
		free(ids);
		TEST_CHECK(round_trips(t, buf, len, spm), "%s: 100 kB of \"%s\" round-trips", name, unit[u]);
	}
	free(buf);
}

/* Whether ids[0..n) equals the list want (terminated by -2). */
static bool
ids_are(const int32_t *ids, int n, const int32_t *want)
{
	int			k = 0;

	while (want[k] != -2)
		k++;
	if (n != k)
		return false;
	for (int i = 0; i < n; i++)
		if (ids[i] != want[i])
			return false;
	return true;
}

/* Whether the pieces of id equal s. */
static bool
piece_is(const LlmTokenizer *t, int32_t id, const char *s, size_t len)
{
	size_t		n;
	const char *p = llm_token_piece(t, id, &n);

	return p != NULL && n == len && memcmp(p, s, len) == 0;
}

/* The llama-spm vocabulary: ids, special tokens, pieces, empty input. */
static void
test_spm(void)
{
	LlmGguf    *g = NULL;
	LlmTokenizer *t = load("vocab/ggml-vocab-llama-spm.gguf", &g);
	int32_t    *ids = NULL;
	int			n;
	char	   *text = NULL;
	size_t		len;
	LlmError	err = {0};
	int32_t		bad[] = {5, 32000};

	if (t == NULL)
		return;
	TEST_CHECK(llm_tokenizer_kind(t) == LLM_TOKENIZER_SPM, "kind");
	TEST_CHECK(llm_tokenizer_n_vocab(t) == 32000, "n_vocab %d", llm_tokenizer_n_vocab(t));
	TEST_CHECK(llm_tokenizer_bos(t) == 1 && llm_tokenizer_eos(t) == 2, "bos/eos");
	TEST_CHECK(llm_tokenizer_add_bos(t), "llama wants BOS");
	TEST_CHECK(llm_tokenizer_is_eog(t, 2) && !llm_tokenizer_is_eog(t, 1) &&
			   !llm_tokenizer_is_eog(t, -1) && !llm_tokenizer_is_eog(t, 32000), "eog");
	TEST_CHECK(llm_tokenizer_find(t, "<s>") == 1 && llm_tokenizer_find(t, "\xE2\x96\x81Hello") == 15043 &&
			   llm_tokenizer_find(t, "no such token") == -1, "find");
	TEST_CHECK(strcmp(llm_token_text(t, 13), "<0x0A>") == 0 && llm_token_text(t, 32000) == NULL, "text");

	/* pieces */
	TEST_CHECK(piece_is(t, 13, "\n", 1) && piece_is(t, 3, "\0", 1), "byte pieces");
	TEST_CHECK(piece_is(t, 15043, " Hello", 6) && piece_is(t, 29871, " ", 1), "text pieces");
	TEST_CHECK(piece_is(t, 0, "", 0) && piece_is(t, 1, "", 0) && piece_is(t, 2, "", 0), "control pieces");
	TEST_CHECK(llm_token_piece(t, -1, &len) == NULL && llm_token_piece(t, 32000, &len) == NULL, "range");
	TEST_CHECK(llm_detokenize(t, bad, 2, &text, &len, &err) == LLM_ERR_INVALID && text == NULL,
			   "detokenize rejects id 32000");

	/* empty input */
	n = tok(t, "", 0, false, false, &ids);
	TEST_CHECK(n == 0 && ids != NULL, "empty: %d tokens", n);
	free(ids);
	n = tok(t, "", 0, true, true, &ids);
	TEST_CHECK(n == 1 && ids[0] == 1, "empty with BOS: %d tokens", n);
	free(ids);
	n = tok(t, "Hello world", 11, true, false, &ids);
	TEST_CHECK(ids_are(ids, n, (const int32_t[]) {1, 15043, 3186, -2}), "BOS Hello world");
	free(ids);

	/* special tokens: matched with parse_special, text without */
	n = tok(t, "<s>Hello world</s>", 18, false, true, &ids);
	TEST_CHECK(ids_are(ids, n, (const int32_t[]) {1, 15043, 3186, 2, -2}), "parse_special <s>...</s>: %d", n);
	free(ids);
	n = tok(t, "Hello<s>world", 13, false, true, &ids);
	TEST_CHECK(ids_are(ids, n, (const int32_t[]) {15043, 1, 3186, -2}),
			   "text after a special token gets the space prefix: %d", n);
	free(ids);
	n = tok(t, "<s></s>", 7, false, true, &ids);
	TEST_CHECK(ids_are(ids, n, (const int32_t[]) {1, 2, -2}), "only special tokens: %d", n);
	free(ids);
	n = tok(t, "<s>Hello world</s>", 18, false, false, &ids);
	TEST_CHECK(n > 4, "without parse_special <s> is text: %d", n);
	for (int i = 0; i < n; i++)
		TEST_CHECK(ids[i] != 1 && ids[i] != 2, "no control token from text (id %d)", ids[i]);
	free(ids);
	TEST_CHECK(round_trips(t, "<s>Hello world</s>", 18, true), "<s> as text round-trips");
	n = tok(t, "<unk>", 5, false, true, &ids);
	TEST_CHECK(n > 1, "unknown tokens are not special: %d", n);
	free(ids);

	test_roundtrip_strings(t, true, "llama-spm");
	test_random_bytes(t, true, "llama-spm", 3000);
	test_speed(t, true, "llama-spm");
	llm_tokenizer_free(t);
	llm_gguf_close(g);
}

/* The gpt-2 vocabulary: ids, special tokens, pieces, empty input. */
static void
test_bpe(void)
{
	LlmGguf    *g = NULL;
	LlmTokenizer *t = load("vocab/ggml-vocab-gpt-2.gguf", &g);
	int32_t    *ids = NULL;
	int			n;
	size_t		len;

	if (t == NULL)
		return;
	TEST_CHECK(llm_tokenizer_kind(t) == LLM_TOKENIZER_BPE, "kind");
	TEST_CHECK(llm_tokenizer_n_vocab(t) == 50257, "n_vocab");
	TEST_CHECK(llm_tokenizer_bos(t) == 50256 && llm_tokenizer_eos(t) == 50256, "bos/eos");
	TEST_CHECK(!llm_tokenizer_add_bos(t), "gpt2 does not want BOS");
	TEST_CHECK(llm_tokenizer_is_eog(t, 50256) && !llm_tokenizer_is_eog(t, 198), "eog");
	TEST_CHECK(llm_tokenizer_find(t, "<|endoftext|>") == 50256, "find");

	TEST_CHECK(piece_is(t, 198, "\n", 1) && piece_is(t, 220, " ", 1), "whitespace pieces");
	TEST_CHECK(piece_is(t, 18435, " Hello", 6) && piece_is(t, 50256, "", 0), "pieces");
	TEST_CHECK(llm_token_piece(t, 50257, &len) == NULL, "range");

	n = tok(t, "", 0, false, false, &ids);
	TEST_CHECK(n == 0, "empty: %d tokens", n);
	free(ids);
	n = tok(t, "", 0, true, false, &ids);
	TEST_CHECK(n == 1 && ids[0] == 50256, "empty with BOS: %d", n);
	free(ids);

	n = tok(t, "Hello<|endoftext|> world", 24, false, true, &ids);
	TEST_CHECK(ids_are(ids, n, (const int32_t[]) {15496, 50256, 995, -2}), "parse_special: %d", n);
	free(ids);
	n = tok(t, "Hello<|endoftext|> world", 24, false, false, &ids);
	TEST_CHECK(n > 3, "without parse_special: %d", n);
	for (int i = 0; i < n; i++)
		TEST_CHECK(ids[i] != 50256, "no control token from text");
	free(ids);

	test_roundtrip_strings(t, false, "gpt-2");
	test_random_bytes(t, false, "gpt-2", 3000);
	TEST_CHECK(t->jit, "the pre-tokenizer is JIT-compiled (PCRE2 without JIT support?)");
	test_speed(t, false, "gpt-2");
	/* the interpreter must be linear too */
	t->jit = false;
	test_speed(t, false, "gpt-2 (PCRE2 interpreter)");
	test_random_bytes(t, false, "gpt-2 (PCRE2 interpreter)", 500);
	llm_tokenizer_free(t);
	llm_gguf_close(g);
}

/* The tokenizer of the real stories260K model. */
static void
test_stories(void)
{
	LlmGguf    *g = NULL;
	LlmTokenizer *t = load("models/stories260K.gguf", &g);
	int32_t    *ids = NULL;
	int			n;
	char	   *text = NULL;
	size_t		len = 0;
	LlmError	err = {0};

	if (t == NULL)
		return;
	TEST_CHECK(llm_tokenizer_n_vocab(t) == 512 && llm_tokenizer_kind(t) == LLM_TOKENIZER_SPM, "stories vocab");
	n = tok(t, "Once upon a time", 16, true, false, &ids);
	TEST_CHECK(n >= 3 && n <= 12 && ids[0] == 1, "Once upon a time: %d tokens", n);
	for (int i = 1; i < n; i++)
		TEST_CHECK(ids[i] >= 3 + 256 && ids[i] < 512, "a text token, not a byte: %d (%s)",
				   ids[i], llm_token_text(t, ids[i]));
	TEST_CHECK(llm_detokenize(t, ids, n, &text, &len, &err) == LLM_OK &&
			   strcmp(text, " Once upon a time") == 0, "decode: \"%s\"", text ? text : "");
	free(text);
	free(ids);
	test_roundtrip_strings(t, true, "stories260K");
	test_random_bytes(t, true, "stories260K", 1000);
	llm_tokenizer_free(t);
	llm_gguf_close(g);
}

/* A tiny GGUF image built in memory. */
typedef struct MemGguf
{
	uint8_t    *buf;
	size_t		len;
	size_t		cap;
	uint64_t	n_kv;
} MemGguf;

/* Append bytes. */
static void
mg_put(MemGguf *m, const void *p, size_t n)
{
	if (m->len + n > m->cap)
	{
		m->cap = (m->len + n) * 2 + 64;
		m->buf = realloc(m->buf, m->cap);
	}
	memcpy(m->buf + m->len, p, n);
	m->len += n;
}

/* Append a little-endian integer of n bytes. */
static void
mg_int(MemGguf *m, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
	{
		uint8_t		b = (uint8_t) (v >> (8 * i));

		mg_put(m, &b, 1);
	}
}

/* Append a GGUF string. */
static void
mg_str(MemGguf *m, const char *s)
{
	mg_int(m, strlen(s), 8);
	mg_put(m, s, strlen(s));
}

/* Append a key and its type. */
static void
mg_key(MemGguf *m, const char *key, uint32_t type)
{
	mg_str(m, key);
	mg_int(m, type, 4);
	m->n_kv++;
}

/* Append a string array value. */
static void
mg_strs(MemGguf *m, const char *key, const char *const *v, int n)
{
	mg_key(m, key, LLM_GGUF_ARRAY);
	mg_int(m, LLM_GGUF_STRING, 4);
	mg_int(m, (uint64_t) n, 8);
	for (int i = 0; i < n; i++)
		mg_str(m, v[i]);
}

/* Append an int32 array value. */
static void
mg_i32s(MemGguf *m, const char *key, const int32_t *v, int n)
{
	mg_key(m, key, LLM_GGUF_ARRAY);
	mg_int(m, LLM_GGUF_INT32, 4);
	mg_int(m, (uint64_t) n, 8);
	for (int i = 0; i < n; i++)
		mg_int(m, (uint32_t) v[i], 4);
}

/* Append a float32 array value. */
static void
mg_f32s(MemGguf *m, const char *key, const float *v, int n)
{
	mg_key(m, key, LLM_GGUF_ARRAY);
	mg_int(m, LLM_GGUF_FLOAT32, 4);
	mg_int(m, (uint64_t) n, 8);
	for (int i = 0; i < n; i++)
		mg_put(m, &v[i], 4);
}

/* Append a uint32 value. */
static void
mg_u32(MemGguf *m, const char *key, uint32_t v)
{
	mg_key(m, key, LLM_GGUF_UINT32);
	mg_int(m, v, 4);
}

/* Append a string value. */
static void
mg_strv(MemGguf *m, const char *key, const char *v)
{
	mg_key(m, key, LLM_GGUF_STRING);
	mg_str(m, v);
}

/* Wrap the key/values in a header and try to load a tokenizer from it. */
static LlmStatus
mg_load(MemGguf *m, LlmGguf **g, LlmTokenizer **t, LlmError *err)
{
	MemGguf		full = {0};
	LlmStatus	st;

	mg_int(&full, LLM_GGUF_MAGIC, 4);
	mg_int(&full, 3, 4);
	mg_int(&full, 0, 8);		/* tensors */
	mg_int(&full, m->n_kv, 8);
	mg_put(&full, m->buf, m->len);
	free(m->buf);
	*m = full;
	*t = NULL;
	st = llm_gguf_open_memory(m->buf, m->len, g, err);
	TEST_CHECK(st == LLM_OK, "synthetic GGUF opens: %s", err->msg);
	if (st != LLM_OK)
		return st;
	return llm_tokenizer_load(*g, t, err);
}

/* Load errors, duplicate texts, unknown-token fallback and EOG texts on synthetic vocabularies. */
static void
test_synthetic(void)
{
	static const char *const toks[] = {
		"<unk>", "<s>", "</s>", "a", "b", "\xE2\x96\x81", "ab", "\342\226\201ab", "a", "<end_of_turn>", "<tag>"
	};
	const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 3, 4};
	const float scores[] = {0, 0, 0, -1, -1, -1, -2, -3, -1, 0, 0};
	MemGguf		m = {0};
	LlmGguf    *g = NULL;
	LlmTokenizer *t = NULL;
	LlmError	err = {0};
	LlmStatus	st;
	int32_t    *ids = NULL;
	int			n;

	/* an unsupported model is named */
	mg_strv(&m, "tokenizer.ggml.model", "t5");
	mg_strs(&m, "tokenizer.ggml.tokens", toks, 11);
	st = mg_load(&m, &g, &t, &err);
	TEST_CHECK(st == LLM_ERR_UNSUPPORTED && strstr(err.msg, "\"t5\"") != NULL && t == NULL,
			   "unsupported model: %s", err.msg);
	llm_gguf_close(g);
	free(m.buf);

	/* counts must agree */
	memset(&m, 0, sizeof(m));
	mg_strv(&m, "tokenizer.ggml.model", "llama");
	mg_strs(&m, "tokenizer.ggml.tokens", toks, 11);
	mg_f32s(&m, "tokenizer.ggml.scores", scores, 10);
	st = mg_load(&m, &g, &t, &err);
	TEST_CHECK(st == LLM_ERR_FORMAT && strstr(err.msg, "scores") != NULL, "score count: %s", err.msg);
	llm_gguf_close(g);
	free(m.buf);

	/* missing tokens; gpt2 without merges */
	memset(&m, 0, sizeof(m));
	mg_strv(&m, "tokenizer.ggml.model", "gpt2");
	st = mg_load(&m, &g, &t, &err);
	TEST_CHECK(st == LLM_ERR_FORMAT && strstr(err.msg, "tokens") != NULL, "no tokens: %s", err.msg);
	llm_gguf_close(g);
	free(m.buf);
	memset(&m, 0, sizeof(m));
	mg_strv(&m, "tokenizer.ggml.model", "gpt2");
	mg_strs(&m, "tokenizer.ggml.tokens", toks, 11);
	st = mg_load(&m, &g, &t, &err);
	TEST_CHECK(st == LLM_ERR_FORMAT && strstr(err.msg, "merges") != NULL, "no merges: %s", err.msg);
	llm_gguf_close(g);
	free(m.buf);

	/* a good one: duplicates, ids out of range, no byte tokens */
	memset(&m, 0, sizeof(m));
	mg_strv(&m, "tokenizer.ggml.model", "llama");
	mg_strs(&m, "tokenizer.ggml.tokens", toks, 11);
	mg_f32s(&m, "tokenizer.ggml.scores", scores, 11);
	mg_i32s(&m, "tokenizer.ggml.token_type", types, 11);
	mg_u32(&m, "tokenizer.ggml.bos_token_id", 1);
	mg_u32(&m, "tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
	mg_u32(&m, "tokenizer.ggml.unknown_token_id", 0);
	st = mg_load(&m, &g, &t, &err);
	TEST_CHECK(st == LLM_OK, "synthetic vocabulary: %s", err.msg);
	if (st == LLM_OK)
	{
		TEST_CHECK(llm_tokenizer_eos(t) == -1 && llm_tokenizer_bos(t) == 1, "0xFFFFFFFF is none");
		TEST_CHECK(llm_tokenizer_find(t, "a") == 3, "duplicate text: first wins");
		TEST_CHECK(llm_tokenizer_is_eog(t, 9) && !llm_tokenizer_is_eog(t, 10), "<end_of_turn> ends generation");
		n = tok(t, "ab a", 4, false, false, &ids);
		TEST_CHECK(ids_are(ids, n, (const int32_t[]) {7, 5, 3, -2}), "merges by score: %d", n);
		free(ids);
		n = tok(t, "abc", 3, false, false, &ids);
		TEST_CHECK(ids_are(ids, n, (const int32_t[]) {7, 0, -2}), "no byte token: unknown: %d", n);
		free(ids);
		n = tok(t, "a<tag>b", 7, false, true, &ids);
		TEST_CHECK(ids_are(ids, n, (const int32_t[]) {5, 3, 10, 5, 4, -2}), "user-defined token: %d", n);
		free(ids);
		TEST_CHECK(piece_is(t, 10, "<tag>", 5) && piece_is(t, 9, "", 0), "user-defined piece");
		/* user-defined tokens are matched without parse_special too (as in llama.cpp), control ones not */
		n = tok(t, "a<tag>b", 7, false, false, &ids);
		TEST_CHECK(ids_are(ids, n, (const int32_t[]) {5, 3, 10, 5, 4, -2}),
				   "user-defined token without parse_special: %d", n);
		free(ids);
		n = tok(t, "<end_of_turn>", 13, false, false, &ids);
		for (int i = 0; i < n; i++)
			TEST_CHECK(ids[i] != 9, "control token from text without parse_special");
		free(ids);
	}
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	free(m.buf);
	llm_tokenizer_free(NULL);

	/* byte-level BPE with a few pre-tokenizers, and without tokenizer.ggml.pre */
	for (int k = 0; k < 4; k++)
	{
		static const char *const pre[] = {"gpt-2", "llama-bpe", "qwen2", NULL};
		static const char *const btoks[] = {"a", "b", "ab", "\xC4\xA0", "\304\240ab", "<|end|>", "\xC3\xBC"};
		static const char *const merges[] = {"a b", "\xC4\xA0 ab"};
		const int32_t btypes[] = {1, 1, 1, 1, 1, 3, 4};

		memset(&m, 0, sizeof(m));
		mg_strv(&m, "tokenizer.ggml.model", "gpt2");
		if (pre[k] != NULL)
			mg_strv(&m, "tokenizer.ggml.pre", pre[k]);
		mg_strs(&m, "tokenizer.ggml.tokens", btoks, 7);
		mg_i32s(&m, "tokenizer.ggml.token_type", btypes, 7);
		mg_strs(&m, "tokenizer.ggml.merges", merges, 2);
		st = mg_load(&m, &g, &t, &err);
		TEST_CHECK(st == LLM_OK, "BPE with pre-tokenizer %s: %s", pre[k] ? pre[k] : "(none)", err.msg);
		if (st == LLM_OK)
		{
			n = tok(t, "ab abc", 6, false, false, &ids);
			TEST_CHECK(ids_are(ids, n, (const int32_t[]) {2, 4, -2}), "%s: ab abc: %d",
					   pre[k] ? pre[k] : "(none)", n);
			free(ids);
			/*
			 * a user-defined token is matched as its text, and its piece is
			 * that text (DeepSeek's "\xC3\xBC"), not the bytes GPT-2's code
			 * points would stand for
			 */
			n = tok(t, "a\xC3\xBC", 3, false, false, &ids);
			TEST_CHECK(ids_are(ids, n, (const int32_t[]) {0, 6, -2}), "%s: user-defined token: %d",
					   pre[k] ? pre[k] : "(none)", n);
			free(ids);
			TEST_CHECK(piece_is(t, 6, "\xC3\xBC", 2), "%s: user-defined piece", pre[k] ? pre[k] : "(none)");
			TEST_CHECK(llm_tokenizer_bos(t) == -1 && llm_tokenizer_is_eog(t, 5), "%s: ids",
					   pre[k] ? pre[k] : "(none)");
		}
		llm_tokenizer_free(t);
		llm_gguf_close(g);
		free(m.buf);
	}

	/* tokenizer.ggml.model "gemma4": BPE with Gemma 4's pre-tokenizer, whatever tokenizer.ggml.pre says */
	{
		static const char *const gtoks[] = {"a", "b", "ab", "\xE2\x96\x81", "\xE2\x96\x81" "ab"};
		static const char *const gmerges[] = {"a b", "\xE2\x96\x81 ab"};

		memset(&m, 0, sizeof(m));
		mg_strv(&m, "tokenizer.ggml.model", "gemma4");
		mg_strv(&m, "tokenizer.ggml.pre", "gpt-2");
		mg_strs(&m, "tokenizer.ggml.tokens", gtoks, 5);
		mg_strs(&m, "tokenizer.ggml.merges", gmerges, 2);
		st = mg_load(&m, &g, &t, &err);
		TEST_CHECK(st == LLM_OK, "gemma4 model: %s", err.msg);
		if (st == LLM_OK)
		{
			TEST_CHECK(llm_tokenizer_kind(t) == LLM_TOKENIZER_BPE && t->pre == llm_pre_find("gemma4")->group &&
					   t->escape_spaces && t->raw_utf8, "gemma4 model: Gemma 4's pre-tokenizer");
			n = tok(t, "ab ab", 5, false, false, &ids);
			TEST_CHECK(ids_are(ids, n, (const int32_t[]) {2, 4, -2}), "gemma4 model: ab ab: %d", n);
			free(ids);
		}
		llm_tokenizer_free(t);
		llm_gguf_close(g);
		free(m.buf);
	}
}

/* GPT-2's bytes_to_unicode of byte b, as UTF-8 into buf; returns buf. */
static const char *
gpt2_byte_symbol(int b, char *buf)
{
	static int	cps[256];
	static bool done = false;
	int			cp;

	if (!done)
	{
		int			extra = 0;

		for (int i = 0; i < 256; i++)
		{
			bool		printable = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174;

			cps[i] = printable ? i : 256 + extra++;
		}
		done = true;
	}
	cp = cps[b];
	if (cp < 0x80)
	{
		buf[0] = (char) cp;
		buf[1] = '\0';
	}
	else
	{
		buf[0] = (char) (0xC0 | (cp >> 6));
		buf[1] = (char) (0x80 | (cp & 0x3F));
		buf[2] = '\0';
	}
	return buf;
}

/*
 * Load a synthetic byte-level BPE vocabulary with tokenizer.ggml.pre = pre
 * (NULL: no key): the 256 GPT-2 byte symbols (ids 0..255), the 256 <0xNN>
 * byte tokens (256..511), "Ġt" "he" "Ġthe" with their merges, <|end|>,
 * "Ġxyz" without merges, "▁" and "\n\n" (raw UTF-8 only).  Every text
 * tokenizes and round-trips with it.
 */
static LlmStatus
load_bpe_with_pre(const char *pre, MemGguf *m, LlmGguf **g, LlmTokenizer **t, LlmError *err)
{
	static char names[512][8];
	const char *toks[519];
	int32_t		types[519];
	static const char *const merges[] = {"\xC4\xA0 t", "h e", "\xC4\xA0t he"};

	for (int b = 0; b < 256; b++)
	{
		toks[b] = gpt2_byte_symbol(b, names[b]);
		types[b] = 1;
		snprintf(names[256 + b], sizeof(names[0]), "<0x%02X>", b);
		toks[256 + b] = names[256 + b];
		types[256 + b] = 6;
	}
	toks[512] = "\xC4\xA0t";
	toks[513] = "he";
	toks[514] = "\xC4\xA0the";
	toks[515] = "<|end|>";
	toks[516] = "\xC4\xA0xyz";
	toks[517] = "\xE2\x96\x81";
	toks[518] = "\n\n";
	types[512] = types[513] = types[514] = types[516] = types[517] = types[518] = 1;
	types[515] = 3;
	memset(m, 0, sizeof(*m));
	mg_strv(m, "tokenizer.ggml.model", "gpt2");
	if (pre != NULL)
		mg_strv(m, "tokenizer.ggml.pre", pre);
	mg_strs(m, "tokenizer.ggml.tokens", toks, 519);
	mg_i32s(m, "tokenizer.ggml.token_type", types, 519);
	mg_strs(m, "tokenizer.ggml.merges", merges, 3);
	return mg_load(m, g, t, err);
}

/* Pieces collected by collect_piece. */
typedef struct Pieces
{
	char		buf[4096];		/* the pieces, each followed by '|' */
	size_t		len;
	int			n;
	size_t		bytes;			/* their total length */
} Pieces;

/* Append one piece (an LlmPieceFn). */
static LlmStatus
collect_piece(void *arg, const char *s, size_t len, LlmError *err)
{
	Pieces	   *p = arg;

	if (p->len + len + 1 < sizeof(p->buf))
	{
		memcpy(p->buf + p->len, s, len);
		p->len += len;
		p->buf[p->len++] = '|';
		p->buf[p->len] = '\0';
	}
	p->n++;
	p->bytes += len;
	return LLM_OK;
}

/* The pre-tokenizer pieces of text, "|" after each, into p. */
static LlmStatus
split(const LlmTokenizer *t, const char *text, Pieces *p)
{
	LlmError	err = {0};
	LlmStatus	st;

	memset(p, 0, sizeof(*p));
	st = llm_bpe_pre_split(t, text, strlen(text), collect_piece, p, &err);
	TEST_CHECK(st == LLM_OK, "split: %s", err.msg);
	return st;
}

/* A text with letters, digits of several lengths, CJK, emoji, punctuation, newlines, contractions. */
static const char mixed_sample[] =
	"Hello, World! I'm sure they'll've DONE it... 'Twas 1 12 123 1234 1234567 3.14159 "
	"\xD9\xA1\xD9\xA2\xD9\xA3 x\xC2\xB2 \t tabs\n\nnew\r\nlines  \n   end "
	"\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x8C\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB"
	"\xE3\x81\xA1\xE3\x81\xAF \xEC\x95\x88\xEB\x85\x95 \xF0\x9F\x98\x80\xF0\x9F\x9A\x80\xF0\x9F\x91\x8D"
	"\xF0\x9F\x8F\xBD na\xC3\xAFve caf\xC3\xA9 \xC2\xBFqu\xC3\xA9? \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2"
	"\xD0\xB5\xD1\x82 \xCE\xB1\xCE\xB2\xCE\xB3 $x+=y^2 <sentinel:12> IMGIMGABZ a\xC2\xA0" "b\xE3\x80\x80"
	"c \xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80 HelloWorld don't WE'LL \xFF\xC3";

/* Every pre-tokenizer in the table compiles and tokenizes the mixed sample. */
static void
test_pre_all(void)
{
	const LlmPreGroup *last = NULL;

	for (int k = 0; k < llm_pre_n_names; k++)
	{
		const LlmPreName *p = &llm_pre_names[k];
		MemGguf		m;
		LlmGguf    *g = NULL;
		LlmTokenizer *t = NULL;
		LlmError	err = {0};
		LlmStatus	st;
		Pieces		pc;

		TEST_CHECK(llm_pre_find(p->name) == p, "%s: found by name", p->name);
		TEST_CHECK(p->group->n_exprs >= 1 && p->group->n_exprs <= LLM_PRE_MAX_EXPRS,
				   "%s: %d expressions", p->name, p->group->n_exprs);
		st = load_bpe_with_pre(p->name, &m, &g, &t, &err);
		TEST_CHECK(st == LLM_OK, "pre-tokenizer %s loads: %s", p->name, err.msg);
		if (st == LLM_OK)
		{
			TEST_CHECK(t->jit, "%s: every expression JIT-compiles", p->name);
			TEST_CHECK(t->ignore_merges == ((p->flags & LLM_PRE_IGNORE_MERGES) != 0) &&
					   t->add_bos == ((p->flags & LLM_PRE_ADD_BOS) != 0) &&
					   t->add_sep == ((p->flags & LLM_PRE_ADD_SEP) != 0) &&
					   t->escape_spaces == ((p->flags & LLM_PRE_ESCAPE_SPACES) != 0) &&
					   t->newlines_whole == ((p->flags & LLM_PRE_NEWLINES_WHOLE) != 0), "%s: flags", p->name);
			/* the pieces cover the text (escaped: each space 2 bytes longer) */
			if (split(t, mixed_sample, &pc) == LLM_OK)
			{
				size_t		want = strlen(mixed_sample);

				if (t->escape_spaces)
					for (const char *c = mixed_sample; *c != '\0'; c++)
						want += *c == ' ' ? 2 : 0;
				TEST_CHECK(pc.bytes == want, "%s: pieces cover the text (%zu of %zu bytes)",
						   p->name, pc.bytes, want);
			}
			if (p->group != last)
			{
				/* once per group: the round trips, with and without JIT */
				TEST_CHECK(round_trips(t, mixed_sample, strlen(mixed_sample), false),
						   "%s: the mixed sample round-trips", p->name);
				/* (raw UTF-8 vocabularies decode a literal U+2581 as a space) */
				if (!t->raw_utf8)
					test_random_bytes(t, false, p->name, 200);
				t->jit = false;
				TEST_CHECK(round_trips(t, mixed_sample, strlen(mixed_sample), false),
						   "%s: the mixed sample round-trips without JIT", p->name);
				last = p->group;
			}
		}
		llm_tokenizer_free(t);
		llm_gguf_close(g);
		free(m.buf);
	}
}

/* Whether the pieces of text under pre are want ("|" after each piece). */
static bool
pieces_are(const char *pre, const char *text, const char *want)
{
	MemGguf		m;
	LlmGguf    *g = NULL;
	LlmTokenizer *t = NULL;
	LlmError	err = {0};
	Pieces		pc;
	bool		ok = false;

	if (load_bpe_with_pre(pre, &m, &g, &t, &err) == LLM_OK)
	{
		for (int jit = 1; jit >= 0; jit--)
		{
			t->jit = t->jit && jit;
			ok = split(t, text, &pc) == LLM_OK && strcmp(pc.buf, want) == 0;
			if (!ok)
			{
				fprintf(stderr, "%s: pieces of \"%s\": \"%s\", want \"%s\"\n", pre ? pre : "(none)",
						text, pc.buf, want);
				break;
			}
		}
	}
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	free(m.buf);
	return ok;
}

/* The exact pieces of pre-tokenizers whose rules are easy to state. */
static void
test_pre_pieces(void)
{
	/* digits: runs (GPT-2), threes (Llama 3), single (Qwen2, StarCoder), threes from the right */
	TEST_CHECK(pieces_are("gpt-2", "a 12345 b", "a| 12345| b|"), "gpt-2 digits");
	TEST_CHECK(pieces_are("llama-bpe", "a 12345 b", "a| |123|45| b|"), "llama3 digits");
	TEST_CHECK(pieces_are("qwen2", "a 123 b", "a| |1|2|3| b|"), "qwen2 digits");
	TEST_CHECK(pieces_are("command-r", " 123 abc", " |1|2|3| abc|"), "command-r: digits, then GPT-2's");
	TEST_CHECK(pieces_are("superbpe", "1234567 123456 12", "1|234|567| |123|456| |12|"),
			   "superbpe: empty matches cut threes from the right");
	TEST_CHECK(pieces_are("afmoe", "1234567", "1|234|567|"), "afmoe digits");
	TEST_CHECK(pieces_are("tiny_aya", "12345", "12|345|"), "tiny_aya digits");
	/* llama.cpp's digit splitter joins "a  " to "12"; the words rule then cuts the spaces */
	TEST_CHECK(pieces_are("afmoe", "a  12", "a| | |12|"), "afmoe joins the text before digits");
	/* several expressions, each over the pieces of the one before */
	TEST_CHECK(pieces_are("deepseek-llm", "abc  123 ", "abc|  |123| |"), "deepseek-llm");
	TEST_CHECK(pieces_are("deepseek-llm", "Hi, you!\n\n\xE4\xBD\xA0\xE5\xA5\xBD 42",
						  "Hi|,| you|!|\n|\n|\xE4\xBD\xA0\xE5\xA5\xBD| |42|"), "deepseek-llm CJK");
	TEST_CHECK(pieces_are("falcon", "a,b 1234", "a|,|b| |123|4|"), "falcon");
	TEST_CHECK(pieces_are(NULL, "a+b=12345", "a|+|b|=|123|45|"), "llama.cpp's default (no key)");
	TEST_CHECK(pieces_are("default", "a+b=12345", "a|+|b|=|123|45|"), "\"default\"");
	TEST_CHECK(pieces_are("deepseek-v3", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E" "abc 1234",
						  "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E|abc| |123|4|"), "deepseek-v3");
	/* contractions and case */
	TEST_CHECK(pieces_are("llama-bpe", "don't", "don|'t|"), "llama3 contraction");
	TEST_CHECK(pieces_are("gpt-4o", "don't HelloWorld", "don't| Hello|World|"), "gpt-4o");
	TEST_CHECK(pieces_are("tekken", "HelloWorld", "Hello|World|"), "tekken case split");
	/* llama.cpp reads \p{Lu} etc. as any letter, so Youtu does not split by case */
	TEST_CHECK(pieces_are("youtu", "HelloWorld it's", "HelloWorld| it's|"), "youtu");
	TEST_CHECK(pieces_are("kimi-k2", "\xE4\xBD\xA0\xE5\xA5\xBDworld 12345",
						  "\xE4\xBD\xA0\xE5\xA5\xBD|world| |123|45|"), "kimi-k2");
	TEST_CHECK(pieces_are("bloom", "Hello, world.", "Hello|,| world|.|"), "bloom");
	/* (its last expression, GPT-2's, cuts the sentinel again) */
	TEST_CHECK(pieces_are("chameleon", "<sentinel:3>x 12", "<|sentinel|:|3|>|x| |1|2|"), "chameleon");
	/* Gemma 4: spaces become U+2581, lines apart */
	TEST_CHECK(pieces_are("gemma4", "a b\n\nc", "a\xE2\x96\x81" "b|\n\n|c|"), "gemma4");
	TEST_CHECK(pieces_are("whitespace", "ab  c", "ab|  |c|"), "whitespace");
	/* ill-formed bytes are a piece of their own */
	TEST_CHECK(pieces_are("llama-bpe", "ab\xFF\xFE" "cd", "ab|\xFF\xFE|cd|"), "ill-formed bytes");
}

/* An unknown tokenizer.ggml.pre is refused, naming it; the table's flags reach the tokenizer. */
static void
test_pre_errors(void)
{
	MemGguf		m;
	LlmGguf    *g = NULL;
	LlmTokenizer *t = NULL;
	LlmError	err = {0};
	LlmStatus	st;
	int32_t    *ids = NULL;
	int			n;

	st = load_bpe_with_pre("no-such-pre", &m, &g, &t, &err);
	TEST_CHECK(st == LLM_ERR_UNSUPPORTED && t == NULL &&
			   strcmp(err.msg, "unknown pre-tokenizer \"no-such-pre\" (tokenizer.ggml.pre)") == 0,
			   "unknown pre: %s", err.msg);
	llm_gguf_close(g);
	free(m.buf);

	/* Llama 3 keeps a whole piece that is a token ("Ġxyz" has no merges); GPT-2 merges */
	for (int k = 0; k < 2; k++)
	{
		st = load_bpe_with_pre(k == 0 ? "llama-bpe" : "gpt-2", &m, &g, &t, &err);
		TEST_CHECK(st == LLM_OK, "load: %s", err.msg);
		if (st == LLM_OK)
		{
			n = tok(t, " xyz the", 8, false, false, &ids);
			/* the byte symbols' ids are their bytes: Ġ is 32 */
			TEST_CHECK(k == 0 ? ids_are(ids, n, (const int32_t[]) {516, 514, -2}) :
					   ids_are(ids, n, (const int32_t[]) {32, 'x', 'y', 'z', 514, -2}),
					   "%s: \" xyz the\": %d ids", k == 0 ? "llama-bpe" : "gpt-2", n);
			free(ids);
		}
		llm_tokenizer_free(t);
		llm_gguf_close(g);
		free(m.buf);
	}

	/* merges may be missing for Kimi K2 only (as in llama.cpp) */
	for (int k = 0; k < 2; k++)
	{
		static const char *const ktoks[] = {"a", "b", "ab"};

		memset(&m, 0, sizeof(m));
		mg_strv(&m, "tokenizer.ggml.model", "gpt2");
		mg_strv(&m, "tokenizer.ggml.pre", k == 0 ? "kimi-k2" : "qwen2");
		mg_strs(&m, "tokenizer.ggml.tokens", ktoks, 3);
		st = mg_load(&m, &g, &t, &err);
		if (k == 0)
		{
			TEST_CHECK(st == LLM_OK, "kimi-k2 without merges: %s", err.msg);
			if (st == LLM_OK)
			{
				/* "ab" is a whole piece and a token, but nothing merges */
				n = tok(t, "ab", 2, false, false, &ids);
				TEST_CHECK(ids_are(ids, n, (const int32_t[]) {0, 1, -2}), "kimi-k2: ab: %d", n);
				free(ids);
			}
		}
		else
			TEST_CHECK(st == LLM_ERR_FORMAT && strstr(err.msg, "merges") != NULL,
					   "qwen2 without merges: %s", err.msg);
		llm_tokenizer_free(t);
		llm_gguf_close(g);
		free(m.buf);
	}

	/* Gemma 4: BPE on raw UTF-8, <0xNN> for what is no token, spaces as U+2581 */
	st = load_bpe_with_pre("gemma4", &m, &g, &t, &err);
	TEST_CHECK(st == LLM_OK, "gemma4: %s", err.msg);
	if (st == LLM_OK)
	{
		n = tok(t, "\xE4\xBD\xA0 a", 5, false, false, &ids);
		TEST_CHECK(ids_are(ids, n, (const int32_t[]) {256 + 0xE4, 256 + 0xBD, 256 + 0xA0, 517, 'a', -2}),
				   "gemma4 bytes: %d", n);
		free(ids);
		TEST_CHECK(round_trips(t, "a b  c\n", 7, false), "gemma4 round trip");
		/* a run of newlines that is a token stays whole (nothing would merge it) */
		n = tok(t, "a\n\nb\n", 5, false, false, &ids);
		TEST_CHECK(ids_are(ids, n, (const int32_t[]) {'a', 518, 'b', 256 + '\n', -2}), "gemma4 newlines: %d", n);
		free(ids);
	}
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	free(m.buf);
}

/* Split a suite's .inp into its inputs (pointers into buf, which is modified); returns the count. */
static int
suite_inputs(char *buf, char **inputs, size_t *lens, int max)
{
	int			n = 0;
	char	   *pos = buf;

	for (;;)
	{
		char	   *sep = strstr(pos, SEPARATOR);

		if (sep == NULL || n == max)
			break;
		inputs[n] = pos;
		lens[n] = (size_t) (sep - pos);
		n++;
		pos = sep + strlen(SEPARATOR);
		if (*pos == '\0')
			break;
	}
	return n;
}

/* Parse the ids of a reference line's third field (up to the newline) into want; returns the count. */
static int
parse_ids(const char *p, int32_t *want, int max)
{
	int			n = 0;

	while (*p != '\n' && *p != '\0')
	{
		char	   *end;
		long		v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (n < max)
			want[n++] = (int32_t) v;
		p = end;
	}
	return n;
}

/* The length of a reference line's first field (the name). */
static size_t
field_len(const char *line)
{
	return strcspn(line, "\t\n");
}

/*
 * Compare the engine (its pre-tokenizer already chosen) with the reference
 * lines of one name, from block on; *n_ok and *n_lines count.
 */
static void
pre_reference_block(const LlmTokenizer *t, const char *name, const char *block,
					char **inputs, const size_t *lens, int n_inputs, int *n_ok, int *n_lines)
{
	size_t		nl = field_len(block);

	for (const char *line = block; strncmp(line, block, nl) == 0 && line[nl] == '\t';)
	{
		const char *f2 = line + nl + 1;
		const char *f3 = strchr(f2, '\t');
		const char *eol = strchr(line, '\n');
		int32_t		want[1024];
		int			n_want;
		int			k = atoi(f2);
		int32_t    *ids = NULL;
		int			n;
		bool		same;

		if (f3 == NULL || eol == NULL)
			break;
		n_want = parse_ids(f3 + 1, want, 1024);
		if (k >= 0 && k < n_inputs)
		{
			n = tok(t, inputs[k], lens[k], false, false, &ids);
			same = n == n_want && (n == 0 || memcmp(ids, want, (size_t) n * sizeof(int32_t)) == 0);
			TEST_CHECK(same, "%s input %d (%.*s): %d ids, want %d", name, k, (int) lens[k], inputs[k],
					   n, n_want);
			*n_ok += same;
			(*n_lines)++;
			free(ids);
		}
		line = eol + 1;
	}
}

/*
 * llama.cpp's ids for the llama-bpe suite's inputs and those of
 * test/data/pre_inputs.inp under every other pre-tokenizer
 * (test/data/pre_reference.tsv, made by tools/gen_pre_reference.sh with
 * llama-tokenize): the llama-bpe vocabulary, its pre-tokenizer swapped for
 * each name in turn.  "name = other" lines reuse other's ids.
 */
static void
test_pre_reference(void)
{
	char		path[512];
	char	   *inp,
			   *extra = NULL,
			   *ref;
	size_t		inp_len,
				extra_len,
				ref_len;
	char	   *inputs[128];
	size_t		lens[128];
	int			n_inputs;
	LlmGguf    *g = NULL;
	LlmTokenizer *t = load("vocab/ggml-vocab-llama-bpe.gguf", &g);
	int			n_lines = 0,
				n_ok = 0,
				n_names = 0;

	snprintf(path, sizeof(path), "%s/vocab/ggml-vocab-llama-bpe.gguf.inp", test_shared_dir());
	inp = read_file(path, &inp_len);
	extra = read_file("test/data/pre_inputs.inp", &extra_len);
	ref = read_file("test/data/pre_reference.tsv", &ref_len);
	TEST_CHECK(inp != NULL && extra != NULL && ref != NULL,
			   "read the inputs and test/data/pre_reference.tsv");
	if (t == NULL || inp == NULL || extra == NULL || ref == NULL)
		goto done;
	/* the suite's inputs, then test/data/pre_inputs.inp's */
	n_inputs = suite_inputs(inp, inputs, lens, 128);
	n_inputs += suite_inputs(extra, inputs + n_inputs, lens + n_inputs, 128 - n_inputs);
	for (const char *line = ref; *line != '\0';)
	{
		size_t		nl = field_len(line);
		char		name[64];
		const char *block = line;
		LlmError	err = {0};

		if (line[0] == '#' || nl == 0 || nl >= sizeof(name) || line[nl] != '\t')
		{
			const char *eol = strchr(line, '\n');

			TEST_CHECK(line[0] == '#', "pre_reference.tsv: a bad line");
			if (eol == NULL)
				break;
			line = eol + 1;
			continue;
		}
		memcpy(name, line, nl);
		name[nl] = '\0';
		if (line[nl + 1] == '=')
		{
			/* "name<TAB>=<TAB>other": other's block, found by its first line */
			const char *other = line + nl + 3;
			size_t		ol = field_len(other);

			block = NULL;
			for (const char *b = ref; block == NULL && *b != '\0';)
			{
				const char *eol = strchr(b, '\n');

				if (field_len(b) == ol && strncmp(b, other, ol) == 0 && b[ol] == '\t' && b[ol + 1] != '=')
					block = b;
				if (eol == NULL)
					break;
				b = eol + 1;
			}
			TEST_CHECK(block != NULL, "pre_reference.tsv: %s refers to a name without ids", name);
		}
		n_names++;
		if (block != NULL)
		{
			TEST_CHECK(llm_bpe_use_pre(t, name, &err) == LLM_OK, "use pre-tokenizer %s: %s", name, err.msg);
			pre_reference_block(t, name, block, inputs, lens, n_inputs, &n_ok, &n_lines);
		}
		/* past this name's lines */
		while (*line != '\0' && strncmp(line, name, nl) == 0 && line[nl] == '\t')
		{
			const char *eol = strchr(line, '\n');

			line = eol != NULL ? eol + 1 : line + strlen(line);
		}
	}
	printf("llama.cpp reference of %d pre-tokenizers: %d/%d\n", n_names, n_ok, n_lines);
	TEST_CHECK(n_names >= 90 && n_ok == n_lines && n_lines == n_names * n_inputs,
			   "pre-tokenizer reference: %d/%d", n_ok, n_lines);

done:
	free(inp);
	free(extra);
	free(ref);
	llm_tokenizer_free(t);
	llm_gguf_close(g);
}

/* Append a bool value. */
static void
mg_bool(MemGguf *m, const char *key, bool v)
{
	mg_key(m, key, LLM_GGUF_BOOL);
	mg_int(m, v ? 1 : 0, 1);
}

/* The normal tokens of the synthetic BERT vocabulary, from id 104 on. */
static const char *const wpm_words[] = {
	"\xE2\x96\x81hello", "\xE2\x96\x81world", "\xE2\x96\x81un", "\xE2\x96\x81unaff", "able", "aff",
	"\xE2\x96\x81" "cafe", "\xE2\x96\x81naive", "\xE2\x96\x81,", "\xE2\x96\x81!", "\xE2\x96\x81'",
	"\xE2\x96\x81t", "\xE2\x96\x81" "don", "\xE2\x96\x81\xE4\xBD\xA0", "\xE2\x96\x81\xE5\xA5\xBD",
	"\xE2\x96\x81" "a", "b", "\xE2\x96\x81" "b", "\xE2\x96\x81" "c", "\xE2\x96\x81$", "\xE2\x96\x81x",
	"\xE2\x96\x81" "e", "\xE2\x96\x81" "caf\xC3\xA9", "\xE2\x96\x81\xCE\xB1\xCE\xB2\xCE\xB3",
	"\xE2\x96\x81Hello", "\xE2\x96\x81" "a\xCC\x81",
};

/*
 * Load a synthetic BERT vocabulary: [PAD] 0, [unused] 1..99, [UNK] 100,
 * [CLS] 101, [SEP] 102, [MASK] 103, then wpm_words; the special ids are
 * llama.cpp's defaults, not written.  lowercase < 0: no normalizer key.
 */
static LlmStatus
load_wpm(int lowercase, MemGguf *m, LlmGguf **g, LlmTokenizer **t, LlmError *err)
{
	static char unused[100][16];
	const int	n_words = (int) (sizeof(wpm_words) / sizeof(wpm_words[0]));
	const char *toks[104 + 32];
	int32_t		types[104 + 32];

	toks[0] = "[PAD]";
	types[0] = 3;
	for (int i = 1; i < 100; i++)
	{
		snprintf(unused[i], sizeof(unused[i]), "[unused%d]", i);
		toks[i] = unused[i];
		types[i] = 5;
	}
	toks[100] = "[UNK]";
	types[100] = 2;
	toks[101] = "[CLS]";
	toks[102] = "[SEP]";
	toks[103] = "[MASK]";
	types[101] = types[102] = types[103] = 3;
	for (int i = 0; i < n_words; i++)
	{
		toks[104 + i] = wpm_words[i];
		types[104 + i] = 1;
	}
	memset(m, 0, sizeof(*m));
	mg_strv(m, "tokenizer.ggml.model", "bert");
	mg_strs(m, "tokenizer.ggml.tokens", toks, 104 + n_words);
	mg_i32s(m, "tokenizer.ggml.token_type", types, 104 + n_words);
	if (lowercase >= 0)
		mg_bool(m, "tokenizer.ggml.normalizer.lowercase", lowercase != 0);
	return mg_load(m, g, t, err);
}

/* The id of word w of wpm_words. */
static int32_t
wpm_id(const char *w)
{
	for (size_t i = 0; i < sizeof(wpm_words) / sizeof(wpm_words[0]); i++)
		if (strcmp(wpm_words[i], w) == 0)
			return 104 + (int32_t) i;
	return -1;
}

/* Whether WordPiece gives text the ids want (-2 ends), without BOS/SEP. */
static bool
wpm_is(const LlmTokenizer *t, const char *text, const int32_t *want)
{
	int32_t    *ids = NULL;
	int			n = tok(t, text, strlen(text), false, false, &ids);
	bool		ok = n >= 0 && ids_are(ids, n, want);

	if (!ok)
	{
		fprintf(stderr, "wordpiece \"%s\":", text);
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %d", ids[i]);
		fprintf(stderr, "\n");
	}
	free(ids);
	return ok;
}

#define W(s) wpm_id("\xE2\x96\x81" s)

/* WordPiece ("bert"): normalization, splitting, longest match, [UNK], [CLS]/[SEP], pieces. */
static void
test_wpm(void)
{
	MemGguf		m;
	LlmGguf    *g = NULL;
	LlmTokenizer *t = NULL;
	LlmError	err = {0};
	LlmStatus	st;
	int32_t    *ids = NULL;
	int			n;
	char	   *text = NULL;
	size_t		len = 0;

	st = load_wpm(-1, &m, &g, &t, &err);
	TEST_CHECK(st == LLM_OK, "BERT vocabulary loads: %s", err.msg);
	if (st != LLM_OK)
	{
		llm_gguf_close(g);
		free(m.buf);
		return;
	}
	TEST_CHECK(llm_tokenizer_kind(t) == LLM_TOKENIZER_WPM, "kind");
	TEST_CHECK(llm_tokenizer_bos(t) == 101 && llm_tokenizer_add_bos(t) && t->unk == 100 &&
			   t->sep == 102 && t->add_sep, "BERT's default ids and flags");
	TEST_CHECK(t->wpm_lowercase && t->wpm_strip_accents, "normalizer defaults");

	/* lower case; whitespace of every kind splits */
	TEST_CHECK(wpm_is(t, "Hello WORLD", (const int32_t[]) {W("hello"), W("world"), -2}), "lower case");
	TEST_CHECK(wpm_is(t, "  hello\t\n\xE3\x80\x80world\xC2\xA0 ", (const int32_t[]) {W("hello"), W("world"), -2}),
			   "whitespace");
	TEST_CHECK(wpm_is(t, "\xCE\x91\xCE\x92\xCE\x93", (const int32_t[]) {W("\xCE\xB1\xCE\xB2\xCE\xB3"), -2}),
			   "Greek lower case");
	/* accents: precomposed letters to their base, combining marks dropped */
	TEST_CHECK(wpm_is(t, "Caf\xC3\xA9 NA\xC3\x8FVE", (const int32_t[]) {W("cafe"), W("naive"), -2}), "accents");
	TEST_CHECK(wpm_is(t, "e\xCC\x81", (const int32_t[]) {W("e"), -2}), "combining mark dropped");
	/* punctuation and ASCII symbols are words of their own */
	TEST_CHECK(wpm_is(t, "hello, world!", (const int32_t[]) {W("hello"), W(","), W("world"), W("!"), -2}),
			   "punctuation");
	TEST_CHECK(wpm_is(t, "don't", (const int32_t[]) {W("don"), W("'"), W("t"), -2}), "apostrophe");
	TEST_CHECK(wpm_is(t, "$x", (const int32_t[]) {W("$"), W("x"), -2}), "ASCII symbol");
	/* CJK ideographs: one word each */
	TEST_CHECK(wpm_is(t, "\xE4\xBD\xA0\xE5\xA5\xBD", (const int32_t[]) {W("\xE4\xBD\xA0"), W("\xE5\xA5\xBD"), -2}),
			   "CJK");
	/* greedy longest match: ▁unaff + able, not ▁un + aff + able */
	TEST_CHECK(wpm_is(t, "unaffable", (const int32_t[]) {W("unaff"), wpm_id("able"), -2}), "longest match");
	TEST_CHECK(wpm_is(t, "unaff unable", (const int32_t[]) {W("unaff"), W("un"), wpm_id("able"), -2}),
			   "longest match 2");
	/* a word that does not fully match is one [UNK]; the others are kept */
	TEST_CHECK(wpm_is(t, "abq hello", (const int32_t[]) {100, W("hello"), -2}), "unknown word");
	TEST_CHECK(wpm_is(t, "ab c", (const int32_t[]) {W("a"), wpm_id("b"), W("c"), -2}), "continuation");
	/* controls, NUL and ill-formed bytes are dropped inside a word */
	TEST_CHECK(wpm_is(t, "a\x01" "b", (const int32_t[]) {W("a"), wpm_id("b"), -2}), "control dropped");
	TEST_CHECK(wpm_is(t, "a\xFF" "b", (const int32_t[]) {W("a"), wpm_id("b"), -2}), "ill-formed dropped");
	TEST_CHECK(wpm_is(t, "", (const int32_t[]) {-2}), "empty");
	TEST_CHECK(wpm_is(t, " \x01 ", (const int32_t[]) {-2}), "nothing left");

	/* [CLS] text [SEP] */
	n = tok(t, "hello", 5, true, false, &ids);
	TEST_CHECK(ids_are(ids, n, (const int32_t[]) {101, W("hello"), 102, -2}), "[CLS] hello [SEP]: %d", n);
	free(ids);
	n = tok(t, "[CLS]hello[SEP]", 15, false, true, &ids);
	TEST_CHECK(ids_are(ids, n, (const int32_t[]) {101, W("hello"), 102, -2}), "parse_special: %d", n);
	free(ids);
	/* decoding: U+2581 is a space, special tokens are empty */
	n = tok(t, "Hello, world unaffable", 22, true, false, &ids);
	TEST_CHECK(n > 0 && llm_detokenize(t, ids, n, &text, &len, &err) == LLM_OK &&
			   strcmp(text, " hello , world unaffable") == 0, "decode: \"%s\"", text ? text : "");
	free(text);
	free(ids);
	TEST_CHECK(piece_is(t, wpm_id("able"), "able", 4) && piece_is(t, 101, "", 0), "pieces");
	/* 100 kB in well under a second */
	{
		static const char unit[] = "Hello, world unaffable caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD xyzzy\n";
		size_t		ul = strlen(unit),
					total = 0;
		char	   *big = malloc(100 * 1000 + ul);
		double		t0,
					dt;

		while (total + ul <= 100 * 1000)
		{
			memcpy(big + total, unit, ul);
			total += ul;
		}
		t0 = now();
		n = tok(t, big, total, false, false, &ids);
		dt = now() - t0;
		printf("wordpiece: %zu bytes -> %d tokens in %.3f s\n", total, n, dt);
		TEST_CHECK(n > 0 && dt < 1.0, "wordpiece: 100 kB took %.3f s", dt);
		free(ids);
		free(big);
	}
	/* random bytes: never an error */
	{
		uint64_t	seed = 12345;
		int			n_fail = 0;

		for (int k = 0; k < 2000; k++)
		{
			char		buf[64];
			size_t		l = rng_next(&seed) % sizeof(buf);

			for (size_t i = 0; i < l; i++)
				buf[i] = (char) (rng_next(&seed) & 0xFF);
			if (llm_tokenize(t, buf, l, true, true, &ids, &n, &err) != LLM_OK)
				n_fail++;
			free(ids);
			ids = NULL;
		}
		TEST_CHECK(n_fail == 0, "wordpiece: %d random strings failed", n_fail);
	}
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	free(m.buf);

	/* without lower case (and so without stripping accents) */
	st = load_wpm(0, &m, &g, &t, &err);
	TEST_CHECK(st == LLM_OK, "BERT vocabulary, cased: %s", err.msg);
	if (st == LLM_OK)
	{
		TEST_CHECK(!t->wpm_lowercase && !t->wpm_strip_accents, "cased normalizer");
		TEST_CHECK(wpm_is(t, "Hello hello", (const int32_t[]) {W("Hello"), W("hello"), -2}), "cased");
		TEST_CHECK(wpm_is(t, "caf\xC3\xA9 Caf\xC3\xA9", (const int32_t[]) {W("caf\xC3\xA9"), 100, -2}),
				   "accents kept");
		TEST_CHECK(wpm_is(t, "a\xCC\x81", (const int32_t[]) {W("a\xCC\x81"), -2}), "combining mark kept");
	}
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	free(m.buf);

	/* the mappings behind the normalizer */
	TEST_CHECK(llm_wpm_lower('A') == 'a' && llm_wpm_lower(0x130) == 'i' && llm_wpm_lower(0x391) == 0x3B1 &&
			   llm_wpm_lower(0x410) == 0x430 && llm_wpm_lower(0x4E00) == 0x4E00, "lower case map");
	TEST_CHECK(llm_wpm_nfd_first(0xE9) == 'e' && llm_wpm_nfd_first(0x1EA5) == 'a' &&
			   llm_wpm_nfd_first(0xAC00) == 0x1100 && llm_wpm_nfd_first('e') == 'e', "NFD map");
}

/*
 * llama.cpp's WordPiece ids (test/data/wpm_reference.tsv, made by
 * tools/gen_wpm_reference.sh with llama-tokenize) for the inputs of the
 * llama-bpe suite, test/data/pre_inputs.inp and test/data/wpm_inputs.inp,
 * with load_wpm's vocabulary, uncased and cased.
 */
static void
test_wpm_reference(void)
{
	char		path[512];
	char	   *files[3] = {NULL, NULL, NULL};
	size_t		flen;
	char	   *ref;
	size_t		ref_len;
	char	   *inputs[160];
	size_t		lens[160];
	int			n_inputs = 0;
	LlmTokenizer *tk[2] = {NULL, NULL};
	LlmGguf    *g[2] = {NULL, NULL};
	MemGguf		m[2];
	LlmError	err = {0};
	int			n_ok = 0,
				n_lines = 0;

	snprintf(path, sizeof(path), "%s/vocab/ggml-vocab-llama-bpe.gguf.inp", test_shared_dir());
	files[0] = read_file(path, &flen);
	files[1] = read_file("test/data/pre_inputs.inp", &flen);
	files[2] = read_file("test/data/wpm_inputs.inp", &flen);
	ref = read_file("test/data/wpm_reference.tsv", &ref_len);
	TEST_CHECK(files[0] && files[1] && files[2] && ref, "read the WordPiece reference and its inputs");
	for (int k = 0; k < 2; k++)
		TEST_CHECK(load_wpm(k == 0 ? -1 : 0, &m[k], &g[k], &tk[k], &err) == LLM_OK, "load_wpm: %s", err.msg);
	if (!files[0] || !files[1] || !files[2] || !ref || !tk[0] || !tk[1])
		goto done;
	for (int f = 0; f < 3; f++)
		n_inputs += suite_inputs(files[f], inputs + n_inputs, lens + n_inputs, 160 - n_inputs);
	for (char *line = ref, *eol; (eol = strchr(line, '\n')) != NULL; line = eol + 1)
	{
		char	   *f2,
				   *f3;
		int			k;
		int32_t		want[1024];
		int			n_want = 0;
		int32_t    *ids = NULL;
		int			n;
		bool		same;
		const LlmTokenizer *t;

		*eol = '\0';
		if (line[0] == '#')
			continue;
		f2 = strchr(line, '\t');
		f3 = f2 != NULL ? strchr(f2 + 1, '\t') : NULL;
		if (f3 == NULL)
			break;
		*f2 = '\0';
		t = strcmp(line, "cased") == 0 ? tk[1] : tk[0];
		k = atoi(f2 + 1);
		for (char *p = f3 + 1; *p != '\0';)
		{
			char	   *end;
			long		v = strtol(p, &end, 10);

			if (end == p)
				break;
			if (n_want < 1024)
				want[n_want++] = (int32_t) v;
			p = end;
		}
		if (k < 0 || k >= n_inputs)
			continue;
		n = tok(t, inputs[k], lens[k], false, false, &ids);
		same = n == n_want && (n == 0 || memcmp(ids, want, (size_t) n * sizeof(int32_t)) == 0);
		TEST_CHECK(same, "wordpiece %s input %d (%.*s): %d ids, want %d", line, k, (int) lens[k], inputs[k],
				   n, n_want);
		n_ok += same;
		n_lines++;
		free(ids);
	}
	printf("llama.cpp WordPiece reference: %d/%d\n", n_ok, n_lines);
	TEST_CHECK(n_lines >= 180 && n_ok == n_lines, "WordPiece reference: %d/%d", n_ok, n_lines);

done:
	for (int k = 0; k < 2; k++)
	{
		llm_tokenizer_free(tk[k]);
		llm_gguf_close(g[k]);
		if (tk[k] != NULL || g[k] != NULL)
			free(m[k].buf);
	}
	for (int f = 0; f < 3; f++)
		free(files[f]);
	free(ref);
}

/* The byte-level BPE reference suites (../shared/vocab/ggml-vocab-NAME.gguf). */
static const char *const bpe_suites[] = {"gpt-2", "llama-bpe", "qwen2", "command-r"};

/*
 * Every vocabulary of llama.cpp's models/ (llama-cpp-python 0.3.36's sdist,
 * unpacked by tools/fetch-vocab.sh): its tokenizer.ggml.model and
 * tokenizer.ggml.pre as the file has them (NULL: no key), the number of
 * inputs of its suite (0: the file has no .inp/.out), and what loading must
 * do: NULL to load (and, with a suite, match every input), else the text
 * the LLM_ERR_UNSUPPORTED message must name (a suite's pre-tokenizer, in
 * quotes).  A file of the folder that is not listed here fails the test, so
 * a newer llama.cpp's vocabulary is looked at before it counts.
 */
typedef struct LlamaCppVocab
{
	const char *name;			/* ggml-vocab-NAME.gguf */
	const char *model;
	const char *pre;
	int			n_inputs;
	const char *refused;
} LlamaCppVocab;

static const LlamaCppVocab llamacpp_vocabs[] = {
	{"aquila", "gpt2", NULL, 0, NULL},
	{"baichuan", "llama", NULL, 0, NULL},
	{"bert-bge", "bert", "bert-bge", 46, NULL},
	{"command-r", "gpt2", "command-r", 46, NULL},
	{"deepseek-coder", "gpt2", "deepseek-coder", 46, NULL},
	{"deepseek-llm", "gpt2", "deepseek-llm", 46, NULL},
	{"falcon", "gpt2", "falcon", 46, NULL},
	{"gemma-4", "gemma4", NULL, 46, NULL},
	{"gpt-2", "gpt2", "gpt-2", 46, NULL},
	{"gpt-neox", "gpt2", NULL, 0, NULL},
	{"llama-bpe", "gpt2", "llama-bpe", 46, NULL},
	{"llama-spm", "llama", "default", 46, NULL},
	{"mpt", "gpt2", "mpt", 46, NULL},
	{"nomic-bert-moe", "t5", "default", 0, "\"t5\""},	/* Unigram (T5's SentencePiece): not implemented */
	{"phi-3", "llama", "default", 46, NULL},
	{"qwen2", "gpt2", "qwen2", 46, NULL},
	{"qwen35", "gpt2", "qwen35", 50, NULL},
	{"refact", "gpt2", "refact", 46, NULL},
	{"starcoder", "gpt2", "starcoder", 46, NULL},
};

/* Whether the string key of g equals want (NULL: the key is absent). */
static bool
gguf_str_is(const LlmGguf *g, const char *key, const char *want)
{
	char	   *v = NULL;
	LlmError	err = {0};
	bool		same;

	if (llm_gguf_get(g, key) == NULL)
		return want == NULL;
	if (want == NULL || llm_gguf_get_str(g, key, &v, &err) != LLM_OK)
		return false;
	same = strcmp(v, want) == 0;
	free(v);
	return same;
}

/* One vocabulary of llamacpp_vocabs in dir: its metadata, then its load or refusal, then its suite. */
static void
test_llamacpp_vocab(const char *dir, const LlamaCppVocab *v)
{
	char		file[128];
	char		path[640];
	LlmGguf    *g = NULL;
	LlmTokenizer *t = NULL;
	LlmError	err = {0};
	LlmStatus	st;
	int			ok,
				total;

	snprintf(file, sizeof(file), "ggml-vocab-%s.gguf", v->name);
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	st = llm_gguf_open(path, &g, &err);
	TEST_CHECK(st == LLM_OK, "open %s: %s", path, err.msg);
	if (st != LLM_OK)
		return;
	TEST_CHECK(gguf_str_is(g, "tokenizer.ggml.model", v->model) && gguf_str_is(g, "tokenizer.ggml.pre", v->pre),
			   "%s: tokenizer.ggml.model / .pre are not \"%s\" / \"%s\"", file, v->model,
			   v->pre != NULL ? v->pre : "(none)");
	st = llm_tokenizer_load(g, &t, &err);
	if (v->refused != NULL)
	{
		TEST_CHECK(st == LLM_ERR_UNSUPPORTED && strstr(err.msg, v->refused) != NULL,
				   "%s must be refused naming %s: status %d, %s", file, v->refused, (int) st,
				   st == LLM_OK ? "loaded" : err.msg);
		printf("llama.cpp %s: %s%s\n", v->name, st == LLM_OK ? "loaded, but must be refused" : "refused: ",
			   st == LLM_OK ? "" : err.msg);
	}
	else
		TEST_CHECK(st == LLM_OK, "load %s: %s", file, err.msg);
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	if (v->refused != NULL || v->n_inputs == 0)
		return;
	/* parse_special off (as llama.cpp made the .out) and on; BPE also with PCRE2's interpreter */
	for (int mode = 0; mode < 3; mode++)
	{
		if (mode == 2 && strcmp(v->model, "gpt2") != 0 && strcmp(v->model, "gemma4") != 0)
			break;
		ok = run_suite(dir, file, mode == 1, mode == 2, &total);
		printf("llama.cpp %s suite (pre %s, %s): %d/%d\n", v->name, v->pre != NULL ? v->pre : "(none)",
			   mode == 0 ? "parse_special=0" : mode == 1 ? "parse_special=1" : "PCRE2 interpreter", ok, total);
		TEST_CHECK(total == v->n_inputs && ok == total, "%s suite, mode %d: %d/%d of %d inputs",
				   v->name, mode, ok, total, v->n_inputs);
	}
}

/*
 * Every vocabulary of llama.cpp's models/ in the folder LLM_TEST_VOCAB
 * (tools/fetch-vocab.sh's; test/run_engine_tests.sh sets it), each as
 * llamacpp_vocabs says, and no file there left out of that table.
 */
static void
test_llamacpp_vocabs(void)
{
	const char *dir = getenv("LLM_TEST_VOCAB");
	const size_t n_vocabs = sizeof(llamacpp_vocabs) / sizeof(llamacpp_vocabs[0]);
	DIR		   *d;
	struct dirent *e;
	int			n_files = 0;

	if (dir == NULL || dir[0] == '\0')
	{
		printf("llama.cpp vocabulary suites: skipped (LLM_TEST_VOCAB is not set; see tools/fetch-vocab.sh)\n");
		return;
	}
	d = opendir(dir);
	TEST_CHECK(d != NULL, "LLM_TEST_VOCAB=%s is not a folder", dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
	{
		const char *n = e->d_name;
		size_t		len = strlen(n);
		bool		known = false;

		if (strncmp(n, "ggml-vocab-", 11) != 0)
			continue;
		n_files++;
		for (size_t i = 0; i < n_vocabs && !known; i++)
		{
			size_t		k = strlen(llamacpp_vocabs[i].name);
			const char *rest = n + 11 + k;

			if (len < 11 + k || strncmp(n + 11, llamacpp_vocabs[i].name, k) != 0)
				continue;
			known = strcmp(rest, ".gguf") == 0 ||
				(llamacpp_vocabs[i].n_inputs > 0 && (strcmp(rest, ".gguf.inp") == 0 || strcmp(rest, ".gguf.out") == 0));
		}
		TEST_CHECK(known, "%s/%s is not in test_tokenizer.c's llamacpp_vocabs", dir, n);
	}
	closedir(d);
	TEST_CHECK(n_files > 0, "no ggml-vocab-* in %s", dir);
	for (size_t i = 0; i < n_vocabs; i++)
		test_llamacpp_vocab(dir, &llamacpp_vocabs[i]);
}

/* Run every tokenizer test. */
int
main(void)
{
	int			total;
	int			ok;
	char		vocab_dir[512];

	snprintf(vocab_dir, sizeof(vocab_dir), "%s/vocab", test_shared_dir());
	for (int special = 0; special <= 1; special++)
	{
		ok = run_suite(vocab_dir, "ggml-vocab-llama-spm.gguf", special, false, &total);
		printf("llama-spm suite (parse_special=%d): %d/%d\n", special, ok, total);
		TEST_CHECK(total == 46 && ok == total, "llama-spm suite %d/%d", ok, total);
	}
	for (size_t v = 0; v < sizeof(bpe_suites) / sizeof(bpe_suites[0]); v++)
	{
		char		path[128];

		snprintf(path, sizeof(path), "ggml-vocab-%s.gguf", bpe_suites[v]);
		for (int mode = 0; mode < 3; mode++)
		{
			/* parse_special off and on with JIT, then PCRE2's interpreter */
			ok = run_suite(vocab_dir, path, mode == 1, mode == 2, &total);
			printf("%s suite (%s): %d/%d\n", bpe_suites[v],
				   mode == 0 ? "parse_special=0" : mode == 1 ? "parse_special=1" : "PCRE2 interpreter",
				   ok, total);
			TEST_CHECK(total == 46 && ok == total, "%s suite, mode %d: %d/%d", bpe_suites[v], mode, ok, total);
		}
	}
	test_spm();
	test_bpe();
	test_stories();
	test_synthetic();
	test_pre_all();
	test_pre_pieces();
	test_pre_errors();
	test_pre_reference();
	test_wpm();
	test_wpm_reference();
	test_llamacpp_vocabs();
	return test_summary("tokenizer");
}
