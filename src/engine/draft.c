/*
 * draft.c
 *		Prompt lookup (see draft.h): summaries and extractions copy phrases
 *		of their input, so the tokens that followed the last few tokens the
 *		previous time they occurred are a good guess of what follows now --
 *		in the sequence itself, or in another request of the same statement,
 *		since a table's rows share phrasing.
 *
 * A linear scan from the end: O(n * LLM_DRAFT_NGRAM_MAX) comparisons a
 * step, microseconds for prompts of thousands of tokens.
 */
#include "draft.h"

#include <string.h>

/* Whether the g tokens at a equal the g tokens at b. */
static int
same_tokens(const int32_t *a, const int32_t *b, int g)
{
	return memcmp(a, b, (size_t) g * sizeof(int32_t)) == 0;
}

/*
 * The tokens that follow the latest occurrence of key (g tokens) in hay
 * (hay_n tokens) that has a token after it, at most max_draft, into out;
 * returns how many (0: none).
 */
static int
lookup(const int32_t *hay, int hay_n, const int32_t *key, int g, int max_draft, int32_t *out)
{
	/* an occurrence ending at i - 1, with at least one token after it (i < hay_n) */
	for (int i = hay_n - 1; i >= g; i--)
	{
		int			take;

		if (!same_tokens(hay + i - g, key, g))
			continue;
		take = hay_n - i < max_draft ? hay_n - i : max_draft;
		memcpy(out, hay + i, (size_t) take * sizeof(int32_t));
		return take;
	}
	return 0;
}

/* Prompt lookup: what followed the latest earlier occurrence of the longest matching suffix (draft.h). */
int
llm_draft_ngram(const int32_t *tokens, int n, int max_draft, int32_t *out)
{
	for (int g = LLM_DRAFT_NGRAM_MAX; g >= LLM_DRAFT_NGRAM_MIN; g--)
	{
		int			k;

		if (n <= g || max_draft < 1)
			continue;
		if ((k = lookup(tokens, n, tokens + n - g, g, max_draft, out)) > 0)
			return k;
	}
	return 0;
}

/* Prompt lookup in another sequence's tokens (other, n_other of them) for the suffix of tokens (draft.h). */
int
llm_draft_ngram_other(const int32_t *tokens, int n, const int32_t *other, int n_other, int max_draft, int32_t *out)
{
	for (int g = LLM_DRAFT_NGRAM_MAX; g >= LLM_DRAFT_NGRAM_MIN; g--)
	{
		int			k;

		if (n < g || max_draft < 1)
			continue;
		if ((k = lookup(other, n_other, tokens + n - g, g, max_draft, out)) > 0)
			return k;
	}
	return 0;
}
