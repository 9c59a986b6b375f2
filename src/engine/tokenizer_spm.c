/*
 * tokenizer_spm.c
 *		SentencePiece-style BPE (tokenizer.ggml.model = "llama").
 *
 * The algorithm is SentencePiece's BPE encoder as llama.cpp runs it
 * (llm_tokenizer_spm), on one fragment of text without special tokens:
 *
 * 1. Escape: optionally put a space in front, then write every space as
 *    U+2581 "▁".
 * 2. Split into symbols, one per UTF-8 character.  A byte that does not
 *    start a well-formed sequence is a symbol of its own, so any bytes are
 *    accepted.  (llama.cpp trusts the lead byte's length; the two agree on
 *    valid UTF-8.)
 * 3. Put every adjacent pair whose concatenation is a vocabulary token into
 *    a max-heap keyed by that token's score (ties: leftmost pair first).
 *    Pop the best pair; if either side changed since it was queued (its
 *    length is no longer what was recorded) skip it, else merge right into
 *    left in the linked list and queue the new symbol's pairs with its two
 *    neighbours.  Every merge makes a vocabulary token, so when the heap is
 *    empty each symbol of two or more characters is a token.  O(n log n).
 * 4. Emit each symbol's token; a character that is not in the vocabulary
 *    becomes its bytes' tokens <0xNN> (byte fallback), or one unknown token
 *    when some byte has no token (or nothing when there is no unknown token).
 *
 * llama.cpp also keeps a table of the pairs each merge came from, to split a
 * symbol that is not a token back into smaller ones ("resegment"); as step 3
 * notes, such a symbol is always a single character, so that path never
 * runs and is omitted here.  Merges consider only text tokens (normal and
 * user-defined), never control, unknown, unused or byte tokens.
 */
#include "tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

/* Scratch state of one SPM call. */
typedef struct LlmSpmState
{
	const LlmTokenizer *t;
	const char *buf;			/* the escaped text */
	LlmSymbol  *sym;
	LlmBigramHeap heap;
} LlmSpmState;

/* Queue the pair (left, right) when their concatenation is a token. */
static LlmStatus
llm_spm_try_pair(LlmSpmState *s, int32_t left, int32_t right, LlmError *err)
{
	LlmBigram	b;
	int32_t		id;
	uint32_t	size;

	if (left < 0 || right < 0)
		return LLM_OK;
	size = s->sym[left].n + s->sym[right].n;
	id = llm_tokenizer_lookup(s->t, s->buf + s->sym[left].off, size);
	if (id < 0)
		return LLM_OK;
	b.prio = s->t->score[id];
	b.left = left;
	b.right = right;
	b.size = size;
	return llm_heap_push(&s->heap, &b, err);
}

/* Emit the tokens of one final symbol (a token, or its bytes by fallback). */
static LlmStatus
llm_spm_emit(const LlmTokenizer *t, const char *text, uint32_t n, LlmTokBuf *out, LlmError *err)
{
	int32_t		id = llm_tokenizer_lookup(t, text, n);
	LlmStatus	st = LLM_OK;
	bool		all_bytes = true;

	if (id >= 0)
		return llm_tokbuf_push(out, id, err);
	for (uint32_t i = 0; i < n; i++)
		if (t->byte_token[(uint8_t) text[i]] < 0)
			all_bytes = false;
	if (!all_bytes)
		return t->unk >= 0 ? llm_tokbuf_push(out, t->unk, err) : LLM_OK;
	for (uint32_t i = 0; i < n && st == LLM_OK; i++)
		st = llm_tokbuf_push(out, t->byte_token[(uint8_t) text[i]], err);
	return st;
}

/* Tokenize one text fragment with SentencePiece BPE, appending to out. */
LlmStatus
llm_spm_tokenize(const LlmTokenizer *t, const char *text, size_t len,
				 bool space_prefix, LlmTokBuf *out, LlmError *err)
{
	LlmSpmState s = {0};
	char	   *buf;
	size_t		blen = 0;
	int32_t		n_sym = 0;
	LlmBigram	b;
	LlmStatus	st = LLM_OK;

	if (len == 0 && !space_prefix)
		return LLM_OK;

	/* 1. escape */
	buf = malloc(3 * (len + 1));
	if (buf == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %zu bytes of text", len);
	if (space_prefix)
	{
		memcpy(buf, "\xE2\x96\x81", 3);
		blen = 3;
	}
	for (size_t i = 0; i < len; i++)
	{
		if (text[i] == ' ')
		{
			memcpy(buf + blen, "\xE2\x96\x81", 3);
			blen += 3;
		}
		else
			buf[blen++] = text[i];
	}

	/* 2. one symbol per character */
	s.t = t;
	s.buf = buf;
	s.sym = malloc(blen * sizeof(LlmSymbol));
	if (s.sym == NULL)
	{
		free(buf);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %zu symbols", blen);
	}
	for (size_t off = 0; off < blen; n_sym++)
	{
		size_t		n = llm_utf8_len((const uint8_t *) buf + off, blen - off);

		s.sym[n_sym].prev = n_sym - 1;
		s.sym[n_sym].next = off + n < blen ? n_sym + 1 : -1;
		s.sym[n_sym].off = (uint32_t) off;
		s.sym[n_sym].n = (uint32_t) n;
		off += n;
	}

	/* 3. merge the best pair while any pair is a token */
	for (int32_t i = 1; i < n_sym && st == LLM_OK; i++)
		st = llm_spm_try_pair(&s, i - 1, i, err);
	while (st == LLM_OK && llm_heap_pop(&s.heap, &b))
	{
		LlmSymbol  *l = &s.sym[b.left];
		LlmSymbol  *r = &s.sym[b.right];

		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			s.sym[r->next].prev = b.left;
		st = llm_spm_try_pair(&s, l->prev, b.left, err);
		if (st == LLM_OK)
			st = llm_spm_try_pair(&s, b.left, l->next, err);
	}

	/* 4. emit */
	for (int32_t i = 0; st == LLM_OK && i >= 0 && n_sym > 0; i = s.sym[i].next)
		st = llm_spm_emit(t, buf + s.sym[i].off, s.sym[i].n, out, err);

	llm_heap_free(&s.heap);
	free(s.sym);
	free(buf);
	return st;
}
