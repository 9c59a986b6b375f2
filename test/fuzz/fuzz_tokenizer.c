/*
 * fuzz_tokenizer.c
 *		libFuzzer target: arbitrary bytes tokenized by every kind of
 *		vocabulary, and decoded back.
 *
 * The vocabularies are real files loaded once at start-up: SentencePiece
 * (stories260K, llama-spm), byte-level BPE with four pre-tokenizers (gpt-2,
 * llama-bpe, qwen2, command-r) and WordPiece (the synthetic BERT vocabulary
 * of tools/gen_wpm_vocab.py, which test/fuzz/run.sh writes; path in
 * LLM_FUZZ_WPM).  Each input is tokenized by each of them twice:
 *  - as plain text (no BOS, special tokens not parsed): it must succeed with
 *    ids in range, and decode back to the input where the tokenizer promises
 *    that (as test_tokenizer's round trips assert): byte-level BPE exactly;
 *    SentencePiece with its space prefix and U+2581 read as a space;
 *    WordPiece normalizes, so only the ids are checked;
 *  - with BOS and special tokens parsed: ids in range, every piece known.
 * A vocabulary whose file is missing is skipped with a note; none at all is
 * an error.
 */
#include <unistd.h>

#include "fuzz.h"
#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_int.h"		/* raw_utf8: whether a BPE vocabulary round-trips bytes */

#define FUZZ_MAX_VOCABS 8

typedef struct FuzzVocab
{
	const char *name;
	LlmGguf    *gguf;
	LlmTokenizer *tok;
} FuzzVocab;

static FuzzVocab vocabs[FUZZ_MAX_VOCABS];
static int	n_vocabs;

/* Load the vocabulary of file path under name; a missing file is skipped. */
static void
load_vocab(const char *name, const char *path)
{
	FuzzVocab  *v = &vocabs[n_vocabs];
	LlmError	err;

	if (access(path, R_OK) != 0)
	{
		fprintf(stderr, "fuzz_tokenizer: %s not found, skipped\n", path);
		return;
	}
	if (llm_gguf_open(path, &v->gguf, &err) != LLM_OK || llm_tokenizer_load(v->gguf, &v->tok, &err) != LLM_OK)
	{
		fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.msg);
		exit(1);
	}
	v->name = name;
	n_vocabs++;
}

/* Load every vocabulary once. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const files[][2] = {
		{"stories260K", "models/stories260K.gguf"},
		{"llama-spm", "vocab/ggml-vocab-llama-spm.gguf"},
		{"gpt-2", "vocab/ggml-vocab-gpt-2.gguf"},
		{"llama-bpe", "vocab/ggml-vocab-llama-bpe.gguf"},
		{"qwen2", "vocab/ggml-vocab-qwen2.gguf"},
		{"command-r", "vocab/ggml-vocab-command-r.gguf"},
	};
	const char *wpm = getenv("LLM_FUZZ_WPM");
	char		path[1024];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		load_vocab(files[i][0], fuzz_path(path, sizeof(path), fuzz_shared_dir(), files[i][1]));
	load_vocab("wordpiece", wpm != NULL ? wpm : "build/fuzz/wpm.gguf");
	if (n_vocabs == 0)
	{
		fprintf(stderr, "fuzz_tokenizer: no vocabulary found (set LLM_SHARED)\n");
		exit(1);
	}
	return 0;
}

/* What decoding text's tokens must give for v, into want; false when v promises nothing. */
static bool
expected_text(const FuzzVocab *v, const uint8_t *s, size_t len, char *want, size_t *wlen)
{
	LlmTokenizerKind kind = llm_tokenizer_kind(v->tok);
	size_t		n = 0;

	if (kind == LLM_TOKENIZER_WPM || (kind == LLM_TOKENIZER_BPE && v->tok->raw_utf8))
		return false;
	if (kind == LLM_TOKENIZER_SPM && len > 0)
		want[n++] = ' ';
	for (size_t i = 0; i < len;)
	{
		if (kind == LLM_TOKENIZER_SPM && i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0)
		{
			want[n++] = ' ';
			i += 3;
		}
		else
			want[n++] = (char) s[i++];
	}
	*wlen = n;
	return true;
}

/* Tokenize the input with v as plain text and as a prompt with special tokens; check both. */
static void
fuzz_vocab(const FuzzVocab *v, const uint8_t *data, size_t size, char *want)
{
	const LlmTokenizer *t = v->tok;
	int			n_vocab = llm_tokenizer_n_vocab(t);

	for (int special = 0; special <= 1; special++)
	{
		int32_t    *ids = NULL;
		int			n = -1;
		char	   *out = NULL;
		size_t		olen = 0;
		size_t		wlen = 0;
		LlmError	err;
		LlmStatus	st;

		st = llm_tokenize(t, (const char *) data, size, special, special, &ids, &n, &err);
		FUZZ_CHECK(st == LLM_OK, "%s: tokenize (special %d) failed: %s", v->name, special, err.msg);
		FUZZ_CHECK(n >= 0 && (n == 0 || ids != NULL), "%s: %d ids", v->name, n);
		for (int i = 0; i < n; i++)
		{
			size_t		plen;

			FUZZ_CHECK(ids[i] >= 0 && ids[i] < n_vocab, "%s: id %d of %d", v->name, ids[i], n_vocab);
			FUZZ_CHECK(llm_token_piece(t, ids[i], &plen) != NULL, "%s: no piece for id %d", v->name, ids[i]);
		}
		st = llm_detokenize(t, ids, n, &out, &olen, &err);
		FUZZ_CHECK(st == LLM_OK && out != NULL && out[olen] == '\0', "%s: detokenize failed: %s", v->name,
				   err.msg);
		if (!special && expected_text(v, data, size, want, &wlen))
			FUZZ_CHECK(olen == wlen && memcmp(out, want, wlen) == 0,
					   "%s: %zu bytes decode to %zu bytes, not to the %zu expected", v->name, size, olen, wlen);
		free(out);
		free(ids);
	}
}

/* One input: every vocabulary in turn. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *want = malloc(size + 1);

	if (want == NULL)
		return 0;
	for (int i = 0; i < n_vocabs; i++)
		fuzz_vocab(&vocabs[i], data, size, want);
	free(want);
	return 0;
}
