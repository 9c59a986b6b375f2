/*
 * draft.h
 *		Drafters for speculative decoding: guesses of a sequence's next
 *		tokens that the engine verifies in one forward pass (engine.c).  A
 *		draft never changes an answer: the engine samples every position as
 *		it would without one and keeps a drafted token only while it equals
 *		the sampled one.  A good draft saves steps; a bad one costs the
 *		extra positions of one step.
 */
#ifndef LLM_DRAFT_H
#define LLM_DRAFT_H

#include <stdint.h>

/* Longest and shortest n-grams prompt lookup matches (the longest found wins). */
#define LLM_DRAFT_NGRAM_MAX 4
#define LLM_DRAFT_NGRAM_MIN 2

/*
 * Prompt lookup: the tokens that followed the latest earlier occurrence of
 * the longest suffix of tokens (n of them: prompt and output so far) of
 * LLM_DRAFT_NGRAM_MIN to LLM_DRAFT_NGRAM_MAX tokens, at most max_draft of
 * them, into out.  Returns how many (0: no match).
 */
int			llm_draft_ngram(const int32_t *tokens, int n, int max_draft, int32_t *out);

/*
 * The same lookup of the suffix of tokens (n of them) in another sequence's
 * tokens (other, n_other: a request of the same statement), any occurrence
 * with a token after it.
 */
int			llm_draft_ngram_other(const int32_t *tokens, int n, const int32_t *other, int n_other, int max_draft,
								  int32_t *out);

#endif							/* LLM_DRAFT_H */
