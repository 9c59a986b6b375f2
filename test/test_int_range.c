/*
 * test_int_range.c
 *		Integer ranges of JSON Schema (minimum, maximum and the exclusive
 *		ones) against a scalar reference: for edge-case and random ranges,
 *		every integer in windows around the bounds, zero and the powers of
 *		ten, random ones far away and strings past int64, the recognizer
 *		must accept exactly the integers in the range, follow exactly the
 *		prefixes some integer in the range has, and refuse every other next
 *		byte, with its stacks bounded.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json_schema.h"
#include "test.h"

#define WINDOW 25				/* integers each side of a point of interest */
#define MAX_TEXT 64
#define MAX_STACKS_SEEN 64		/* the most stacks a state may hold (int_range.h: about 20 a side) */

/* The bytes tried after each prefix (all that could extend a number, and some that never may). */
static const char next_bytes[] = "0123456789-+.eE ,}";

static int	most_stacks;

/* Sign and magnitude of an integer written in decimal; big when past 19 digits or 2^64. */
typedef struct Num
{
	bool		neg;
	bool		big;
	uint64_t	mag;
} Num;

/* The bounds a schema gives: lo..hi, a side without its has_ flag not given. */
typedef struct Bounds
{
	bool		has_lo;
	int64_t		lo;
	bool		has_hi;
	int64_t		hi;
} Bounds;

/* The magnitude of v (2^63 for INT64_MIN). */
static uint64_t
magnitude(int64_t v)
{
	return v < 0 ? (uint64_t) (-(v + 1)) + 1 : (uint64_t) v;
}

/* The magnitudes of closed range r on the side of sign neg, as lo..hi; false when none. */
static bool
side(const Bounds *r, bool neg, uint64_t *lo, uint64_t *hi)
{
	if (neg)
	{
		if (r->lo >= 0)
			return false;
		*lo = r->hi < 0 ? magnitude(r->hi) : 1;
		*hi = magnitude(r->lo);
	}
	else
	{
		if (r->hi < 0)
			return false;
		*lo = r->lo > 0 ? (uint64_t) r->lo : 0;
		*hi = (uint64_t) r->hi;
	}
	return true;
}

/* Parse n bytes of digits at p into *num (big past 2^64); false when not all digits or none. */
static bool
parse_digits(const char *p, size_t n, Num *num)
{
	num->mag = 0;
	num->big = false;
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
	{
		if (p[i] < '0' || p[i] > '9')
			return false;
		if (num->mag > (UINT64_MAX - 9) / 10)
			num->big = true;
		else
			num->mag = num->mag * 10 + (uint64_t) (p[i] - '0');
	}
	return true;
}

/* Reference: whether the n bytes at p are exactly an integer of r, as JSON writes it. */
static bool
ref_member(const Bounds *r, const char *p, size_t n)
{
	Num			num;
	uint64_t	lo,
				hi;

	num.neg = n > 0 && p[0] == '-';
	if (!parse_digits(p + num.neg, n - num.neg, &num))
		return false;
	if (p[num.neg] == '0' && (n - num.neg > 1 || num.neg))
		return false;			/* a leading zero, or "-0" */
	if (!side(r, num.neg, &lo, &hi))
		return false;
	return !num.big && num.mag >= lo && num.mag <= hi;
}

/* Reference: whether some integer of r, as JSON writes it, starts with the n bytes at p. */
static bool
ref_viable(const Bounds *r, const char *p, size_t n)
{
	Num			num;
	uint64_t	lo,
				hi,
				scale = 1;

	if (n == 0)
		return true;
	num.neg = p[0] == '-';
	if (!side(r, num.neg, &lo, &hi))
		return false;
	if (n == (size_t) num.neg)
		return true;			/* "-" alone: the side has some integer */
	if (!parse_digits(p + num.neg, n - num.neg, &num))
		return false;
	if (p[num.neg] == '0')
		return ref_member(r, p, n);	/* "0" cannot go on */
	if (num.big)
		return false;
	/* the integers with these digits and m more: mag * 10^m .. mag * 10^m + 10^m - 1 */
	for (int m = 0; m <= 19; m++, scale *= 10)
	{
		uint64_t	first,
					last;

		if (num.mag > UINT64_MAX / scale || (first = num.mag * scale) > hi)
			break;
		last = first > UINT64_MAX - (scale - 1) ? UINT64_MAX : first + (scale - 1);
		if (last >= lo)
			return true;
	}
	return false;
}

/*
 * Follow text with g beside the reference: after each prefix, that the
 * state accepts iff the prefix is an integer of r, and that each byte of
 * next_bytes is taken iff some integer of r starts with prefix + byte.
 */
static void
check_text(const LlmGrammar *g, const Bounds *r, const char *label, const char *text)
{
	LlmGrammarState a,
				b;
	char		buf[MAX_TEXT + 2];
	size_t		n = strlen(text);
	bool		alive;

	llm_grammar_state_init(&a);
	llm_grammar_state_init(&b);
	alive = llm_grammar_start(g, &a, NULL) == LLM_OK;
	TEST_CHECK(alive, "%s: start", label);
	for (size_t i = 0; alive && i <= n; i++)
	{
		memcpy(buf, text, i);
		if (a.n_stacks > most_stacks)
			most_stacks = a.n_stacks;
		TEST_CHECK(llm_grammar_accepting(&a) == ref_member(r, buf, i), "%s: \"%.*s\" accepted %d, in range %d",
				   label, (int) i, buf, llm_grammar_accepting(&a), ref_member(r, buf, i));
		for (const char *c = next_bytes; *c != '\0'; c++)
		{
			bool		took = llm_grammar_advance(g, &a, (uint8_t) *c, &b);

			buf[i] = *c;
			TEST_CHECK(took == ref_viable(r, buf, i + 1), "%s: \"%.*s\" taken %d, viable %d", label, (int) i + 1, buf,
					   took, ref_viable(r, buf, i + 1));
		}
		if (i < n)
		{
			LlmGrammarState t;

			alive = llm_grammar_advance(g, &a, (uint8_t) text[i], &b);
			t = a;
			a = b;
			b = t;
		}
	}
	llm_grammar_state_free(&a);
	llm_grammar_state_free(&b);
}

/* c + k, or false when it passes int64's ends. */
static bool
add_checked(int64_t c, int64_t k, int64_t *out)
{
	if ((k > 0 && c > INT64_MAX - k) || (k < 0 && c < INT64_MIN - k))
		return false;
	*out = c + k;
	return true;
}

/* Check every integer within WINDOW of c. */
static void
check_window(const LlmGrammar *g, const Bounds *r, const char *label, int64_t c)
{
	for (int64_t k = -WINDOW; k <= WINDOW; k++)
	{
		int64_t		v;
		char		text[MAX_TEXT];

		if (!add_checked(c, k, &v))
			continue;
		snprintf(text, sizeof(text), "%" PRId64, v);
		check_text(g, r, label, text);
	}
}

/* A random integer: of any size, or of a random number of digits, so that small ones come up too. */
static int64_t
random_int(void)
{
	uint64_t	x = test_rng_next();
	int			digits = (int) (test_rng_next() % 19) + 1;
	uint64_t	mod = 1;

	if (test_rng_next() % 2 == 0)
		return (int64_t) x;
	while (digits-- > 0)
		mod *= 10;
	return (int64_t) (x % mod) * (test_rng_next() % 2 ? -1 : 1);
}

/* Texts no range may take whole, and some past int64. */
static const char *const odd_texts[] = {
	"", "-", "--1", "+1", "00", "-0", "-00", "01", "-01", "1.0", "1e3", " 1", "1 ", "0x1",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
	"18446744073709551616", "99999999999999999999", "123456789012345678901234567890",
	"-100000000000000000000", NULL
};

/*
 * Write v as the text of a bound that rounds inward to it, in one of
 * several forms; sets *keyword.  form 0: v; 1: v.0; 2: v * 10 e-1;
 * 3: v -+ 0.5 (inclusive); 4: v -+ 1 (exclusive); 5: v -+ 0.5 (exclusive),
 * where v -+ 1 is an int64.
 */
static void
bound_text(char *out, size_t size, int64_t v, bool lower, int form, const char **keyword)
{
	bool		exclusive;
	int64_t		w;

	/* v -+ 0.5 exclusive is v -+ 1 rounded inward, which must be an int64 too */
	if (form == 5 && (lower ? v == INT64_MIN : v == INT64_MAX))
		form = 3;
	exclusive = form >= 4;
	*keyword = lower ? (exclusive ? "exclusiveMinimum" : "minimum") : (exclusive ? "exclusiveMaximum" : "maximum");
	if (form == 1)
		snprintf(out, size, "%" PRId64 ".0", v);
	else if (form == 2)
		snprintf(out, size, v == 0 ? "0e5" : "%" PRId64 "0e-1", v);
	else if (form == 3 || form == 5)
	{
		/* lower: v - 0.5 (v rounds up from it), upper: v + 0.5 */
		bool		neg = lower ? v <= 0 : v < 0;
		uint64_t	whole = lower ? (v > 0 ? (uint64_t) v - 1 : magnitude(v)) : (v >= 0 ? (uint64_t) v : magnitude(v) - 1);

		snprintf(out, size, "%s%" PRIu64 ".5", neg ? "-" : "", whole);
	}
	else if (form == 4 && add_checked(v, lower ? -1 : 1, &w))
		snprintf(out, size, "%" PRId64, w);
	else
	{
		*keyword = lower ? "minimum" : "maximum";
		snprintf(out, size, "%" PRId64, v);
	}
}

/* Compile range r as an integer schema, bounds written in random forms (NULL on error, counted). */
static LlmGrammar *
compile_range(const Bounds *r, char *schema, size_t size)
{
	char		lo[MAX_TEXT],
				hi[MAX_TEXT];
	const char *lo_kw,
			   *hi_kw;
	LlmGrammar *g = NULL;
	LlmError	err;
	size_t		at;

	bound_text(lo, sizeof(lo), r->lo, true, (int) (test_rng_next() % 6), &lo_kw);
	bound_text(hi, sizeof(hi), r->hi, false, (int) (test_rng_next() % 6), &hi_kw);
	at = (size_t) snprintf(schema, size, "{\"type\":\"integer\"");
	if (r->has_lo)
		at += (size_t) snprintf(schema + at, size - at, ",\"%s\":%s", lo_kw, lo);
	if (r->has_hi)
		at += (size_t) snprintf(schema + at, size - at, ",\"%s\":%s", hi_kw, hi);
	/* a looser bound beside the tighter one, which must not matter */
	if (r->has_lo && r->lo > INT64_MIN + 10 && strcmp(lo_kw, "minimum") != 0)
		at += (size_t) snprintf(schema + at, size - at, ",\"minimum\":%" PRId64, r->lo - 10);
	snprintf(schema + at, size - at, "}");
	TEST_CHECK(llm_json_schema_compile(schema, strlen(schema), &g, &err) == LLM_OK, "%s: %s", schema, err.msg);
	return g;
}

/*
 * The range a schema's bounds mean: a side not given ends where a plain
 * integer's 16 digits do, or at int64's end when the other bound lies past
 * them.
 */
static Bounds
schema_range(const Bounds *given)
{
	const int64_t open_end = INT64_C(9999999999999999);
	Bounds		r = *given;

	if (!r.has_hi)
		r.hi = r.lo > open_end ? INT64_MAX : open_end;
	if (!r.has_lo)
		r.lo = r.hi < -open_end ? INT64_MIN : -open_end;
	r.has_lo = r.has_hi = true;
	return r;
}

/* Check range r against the reference at every point of interest and at random. */
static void
check_range(const Bounds *given)
{
	char		schema[256];
	LlmGrammar *g = compile_range(given, schema, sizeof(schema));
	Bounds closed = schema_range(given);
	const Bounds *r = &closed;
	int64_t		points[10];
	int			n_points = 0;

	if (g == NULL)
		return;
	points[n_points++] = 0;
	if (r->has_lo)
		points[n_points++] = r->lo;
	if (r->has_hi)
		points[n_points++] = r->hi;
	/* where the bounds' digit counts change */
	for (int side = 0; side < 2; side++)
	{
		int64_t		v = side == 0 ? r->lo : r->hi;

		if ((side == 0 ? r->has_lo : r->has_hi) && v > INT64_MIN / 10 && v < INT64_MAX / 10)
		{
			int64_t		p = 1;

			while (p <= (v < 0 ? -v : v) && p < INT64_MAX / 10)
				p *= 10;
			points[n_points++] = v < 0 ? -p : p;
		}
	}
	for (int i = 0; i < n_points; i++)
		check_window(g, r, schema, points[i]);
	for (int i = 0; i < 40; i++)
	{
		char		text[MAX_TEXT];

		snprintf(text, sizeof(text), "%" PRId64, random_int());
		check_text(g, r, schema, text);
	}
	for (int i = 0; odd_texts[i] != NULL; i++)
		check_text(g, r, schema, odd_texts[i]);
	llm_grammar_free(g);
}

/* A random bound: small, near a power of ten, near int64's ends, or anywhere. */
static int64_t
random_bound(void)
{
	int64_t		small = (int64_t) (test_rng_next() % 7) - 3;

	switch (test_rng_next() % 7)
	{
		case 0:
			return (int64_t) (test_rng_next() % 61) - 30;
		case 1:
			return (int64_t) (test_rng_next() % 2001) - 1000;
		case 2:
			{
				int64_t		p = 1;

				for (int k = (int) (test_rng_next() % 19); k > 0; k--)
					p *= 10;
				return (test_rng_next() % 2 ? p : -p) + small;
			}
		case 3:
			return INT64_MAX - (int64_t) (test_rng_next() % 20);
		case 4:
			return INT64_MIN + (int64_t) (test_rng_next() % 20);
		case 5:
			return 0;
		default:
			return random_int();
	}
}

/* Ranges chosen for their edges, then random ones. */
static void
test_ranges(void)
{
	static const Bounds edges[] = {
		{true, 0, true, 0}, {true, 5, true, 5}, {true, -5, true, -5}, {true, 1, true, 5}, {true, 0, true, 9},
		{true, 10, true, 99}, {true, 100, true, 999}, {true, -99, true, -10}, {true, -1, true, 0}, {true, -1, true, 1},
		{true, -1000000, true, 1000000000}, {true, 19, true, 7251}, {true, -7251, true, -19}, {true, 99, true, 100},
		{true, INT64_MIN, true, INT64_MAX}, {true, INT64_MIN, true, INT64_MIN}, {true, INT64_MAX, true, INT64_MAX},
		{true, INT64_MIN, true, -1}, {true, 0, true, INT64_MAX}, {true, 1000000000000000000, true, INT64_MAX},
		{true, 0, false, 0}, {true, 1, false, 0}, {true, 100, false, 0}, {true, -10, false, 0},
		{true, INT64_MAX, false, 0}, {true, INT64_MIN, false, 0},
		{false, 0, true, 0}, {false, 0, true, -1}, {false, 0, true, 10}, {false, 0, true, -100},
		{false, 0, true, INT64_MIN}, {false, 0, true, INT64_MAX},
	};
	int			n_random = 200;

	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		check_range(&edges[i]);
	for (int i = 0; i < n_random; i++)
	{
		Bounds r = {true, random_bound(), true, random_bound()};
		uint64_t	open = test_rng_next() % 6;

		if (r.lo > r.hi)
		{
			int64_t		t = r.lo;

			r.lo = r.hi;
			r.hi = t;
		}
		r.has_lo = open != 0;
		r.has_hi = open != 1;
		check_range(&r);
	}
	TEST_CHECK(most_stacks <= MAX_STACKS_SEEN, "at most %d stacks in a state (%d)", MAX_STACKS_SEEN, most_stacks);
	printf("int ranges: at most %d stacks in a state\n", most_stacks);
}

int
main(void)
{
	test_ranges();
	return test_summary("test_int_range");
}
