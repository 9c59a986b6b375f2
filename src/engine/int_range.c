/*
 * int_range.c
 *		Integer ranges as grammar rules (int_range.h explains the split).
 *
 * Magnitudes are uint64_t, so that of INT64_MIN (2^63) fits; digit strings
 * are written with leading zeros to the length at hand, which a length's
 * lowest bound (10^(d-1), or 0 for one digit) keeps out of the sentences.
 */
#include "int_range.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MAX_DIGITS 20			/* of a uint64_t */

/* The number of decimal digits of v (1 for 0). */
static int
n_digits(uint64_t v)
{
	int			d = 1;

	while (v >= 10)
	{
		v /= 10;
		d++;
	}
	return d;
}

/* 10^e, for e at most 19. */
static uint64_t
pow10_u64(int e)
{
	uint64_t	p = 1;

	while (e-- > 0)
		p *= 10;
	return p;
}

/* Append to alternative a n bytes, each a digit lo..hi. */
static void
add_digits(LlmGrammarBuilder *b, int a, char lo, char hi, int n)
{
	LlmByteSet	s = llm_byteset_range((uint8_t) lo, (uint8_t) hi);

	for (int i = 0; i < n; i++)
		llm_grammar_add_set(b, a, &s);
}

/* Whether the n digits at s are all c. */
static bool
all_digit(const char *s, int n, char c)
{
	for (int i = 0; i < n; i++)
		if (s[i] != c)
			return false;
	return true;
}

/*
 * A rule for the n-digit strings from x to y (x <= y, digit strings of
 * length n, leading zeros allowed): their shared prefix, then the three
 * parts int_range.h names, those of them not empty.
 */
static int
digits_between(LlmGrammarBuilder *b, const char *x, const char *y, int n)
{
	char		nines[MAX_DIGITS],
				zeros[MAX_DIGITS];
	int			r = llm_grammar_rule(b);
	int			i = 0,
				a;
	bool		x_low,
				y_high;
	char		mid_lo,
				mid_hi;

	while (i < n && x[i] == y[i])
		i++;
	if (i == n)
	{
		llm_grammar_add_literal(b, llm_grammar_alt(b, r), x, (size_t) n);
		return r;
	}
	memset(nines, '9', sizeof(nines));
	memset(zeros, '0', sizeof(zeros));
	/* x's rest all zeros, or y's all nines: its first digit joins the middle part */
	x_low = all_digit(x + i + 1, n - i - 1, '0');
	y_high = all_digit(y + i + 1, n - i - 1, '9');
	mid_lo = (char) (x[i] + (x_low ? 0 : 1));
	mid_hi = (char) (y[i] - (y_high ? 0 : 1));
	if (!x_low)
	{
		a = llm_grammar_alt(b, r);
		llm_grammar_add_literal(b, a, x, (size_t) i + 1);
		llm_grammar_add_rule(b, a, digits_between(b, x + i + 1, nines, n - i - 1));
	}
	if (mid_lo <= mid_hi)
	{
		a = llm_grammar_alt(b, r);
		llm_grammar_add_literal(b, a, x, (size_t) i);
		add_digits(b, a, mid_lo, mid_hi, 1);
		add_digits(b, a, '0', '9', n - i - 1);
	}
	if (!y_high)
	{
		a = llm_grammar_alt(b, r);
		llm_grammar_add_literal(b, a, y, (size_t) i + 1);
		llm_grammar_add_rule(b, a, digits_between(b, zeros, y + i + 1, n - i - 1));
	}
	return r;
}

/* A rule for the magnitudes lo..hi (lo <= hi), no leading zeros: one alternative per number of digits. */
static int
magnitudes(LlmGrammarBuilder *b, uint64_t lo, uint64_t hi)
{
	int			r = llm_grammar_rule(b);
	int			d_lo = n_digits(lo);
	int			d_hi = n_digits(hi);

	for (int d = d_lo; d <= d_hi; d++)
	{
		char		x[MAX_DIGITS + 1],
					y[MAX_DIGITS + 1];
		uint64_t	first = d == d_lo ? lo : pow10_u64(d - 1);
		uint64_t	last = d == d_hi ? hi : pow10_u64(d) - 1;

		snprintf(x, sizeof(x), "%0*" PRIu64, d, first);
		snprintf(y, sizeof(y), "%0*" PRIu64, d, last);
		llm_grammar_add_rule(b, llm_grammar_alt(b, r), digits_between(b, x, y, d));
	}
	return r;
}

/* The magnitude of a negative v (2^63 for INT64_MIN). */
static uint64_t
magnitude_of_negative(int64_t v)
{
	return (uint64_t) (-(v + 1)) + 1;
}

/* The integers lo..hi: "-" and the negative ones' magnitudes, and the others'. */
int
llm_int_range_rule(LlmGrammarBuilder *b, int64_t lo, int64_t hi)
{
	int			r = llm_grammar_rule(b);

	if (lo < 0)
	{
		int			a = llm_grammar_alt(b, r);

		llm_grammar_add_literal(b, a, "-", 1);
		llm_grammar_add_rule(b, a, magnitudes(b, hi < 0 ? magnitude_of_negative(hi) : 1, magnitude_of_negative(lo)));
	}
	if (hi >= 0)
		llm_grammar_add_rule(b, llm_grammar_alt(b, r), magnitudes(b, lo > 0 ? (uint64_t) lo : 0, (uint64_t) hi));
	return r;
}
