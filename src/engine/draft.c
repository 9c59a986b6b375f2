/*
 * draft.c
 *		Prompt lookup (see draft.h): summaries and extractions copy phrases
 *		of their input, so the tokens that followed the last few tokens the
 *		previous time they occurred are a good guess of what follows now.
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

/* Prompt lookup: what followed the latest earlier occurrence of the longest matching suffix (draft.h). */
int
llm_draft_ngram(const int32_t *tokens, int n, int max_draft, int32_t *out)
{
	for (int g = LLM_DRAFT_NGRAM_MAX; g >= LLM_DRAFT_NGRAM_MIN; g--)
	{
		const int32_t *suffix = tokens + n - g;

		if (n <= g || max_draft < 1)
			continue;
		/* an occurrence ending at i - 1, with at least one token after it (so i < n) */
		for (int i = n - 1; i >= g; i--)
		{
			int			take;

			if (!same_tokens(tokens + i - g, suffix, g))
				continue;
			take = n - i < max_draft ? n - i : max_draft;
			memcpy(out, tokens + i, (size_t) take * sizeof(int32_t));
			return take;
		}
	}
	return 0;
}
