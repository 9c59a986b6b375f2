/*
 * grammar.c
 *		Byte grammars: the builder, the frozen form, and the recognizer
 *		(grammar.h explains the stacks).
 *
 * Frozen form: every alternative's elements back to back in elems, each
 * alternative closed by an END element; a rule's alternatives start at
 * alt_pos[alt_first[r]] .. alt_pos[alt_first[r + 1] - 1].  An element is
 * (index << 2) | kind, the index naming a byte set, a rule or a group.
 *
 * A stack's words are positions in elems, below 2^31, and the frames of
 * groups: GROUP_WORDS(n) words of bits, one per member (member i is bit
 * i % 32 of word i / 32), under a header word FRAME_BIT | group << 1 |
 * after_sep, after_sep saying that the separator is written and a member
 * must follow.  Only the top word is ever read as an element, and a frame
 * is never left on top of a state's stack, so a position and a header
 * cannot be confused.
 */
#include "grammar.h"

#include <stdlib.h>
#include <string.h>

#define ELEM_END	0u
#define ELEM_SET	1u
#define ELEM_RULE	2u
#define ELEM_GROUP	3u
#define ELEM_KIND(e)	((e) & 3u)
#define ELEM_INDEX(e)	((e) >> 2)

/* Rule references expanded in a row, without a byte between, before the recognizer gives up. */
#define EXPAND_MAX_LEVELS 64

#define FRAME_BIT		0x80000000u
#define GROUP_WORDS(n)	(((n) + 31) / 32)
#define GROUP_MAX_WORDS GROUP_WORDS(LLM_GRAMMAR_MAX_MEMBERS)

/* An any-order group (grammar.h). */
typedef struct Group
{
	int			first;			/* its member rules are members[first .. first + n) */
	int			n;
	int			sep;			/* the separator's rule */
	uint32_t	required[GROUP_MAX_WORDS];	/* bit i % 32 of word i / 32: member i must be written */
} Group;

/* An alternative being built. */
typedef struct BuildAlt
{
	int			rule;
	uint32_t   *elems;
	int			n;
	int			cap;
} BuildAlt;

struct LlmGrammarBuilder
{
	int			n_rules;
	int		   *rule_n_alts;	/* (n_rules) */
	int			rules_cap;
	BuildAlt   *alts;			/* (n_alts) */
	int			n_alts;
	int			alts_cap;
	LlmByteSet *sets;			/* (n_sets) */
	int			n_sets;
	int			sets_cap;
	int			single_set[256];	/* the set holding only byte c, or -1 */
	Group	   *groups;			/* (n_groups) */
	int			n_groups;
	int			groups_cap;
	int		   *members;		/* (n_members) the groups' member rules, back to back */
	int			n_members;
	int			members_cap;
	size_t		n_elems;
	bool		nomem;
	bool		too_big;
	bool		too_many_members;
};

struct LlmGrammar
{
	uint32_t   *elems;
	int		   *alt_pos;		/* (n_alts) where each alternative starts in elems, by rule */
	int		   *alt_first;		/* (n_rules + 1) */
	LlmByteSet *sets;
	Group	   *groups;
	int		   *members;
	int			root;
};

/* Grow *p (of *cap items of size sz) to hold n items; false when out of memory. */
static bool
grow(void **p, int *cap, int n, size_t sz)
{
	int			ncap;
	void	   *q;

	if (n <= *cap)
		return true;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < n)
		ncap *= 2;
	if ((q = realloc(*p, (size_t) ncap * sz)) == NULL)
		return false;
	*p = q;
	*cap = ncap;
	return true;
}

/* The set of bytes lo..hi. */
LlmByteSet
llm_byteset_range(uint8_t lo, uint8_t hi)
{
	LlmByteSet	s = {{0, 0, 0, 0}};

	llm_byteset_add(&s, lo, hi);
	return s;
}

/* Add lo..hi to s. */
void
llm_byteset_add(LlmByteSet *s, uint8_t lo, uint8_t hi)
{
	for (int c = lo; c <= hi; c++)
		s->bits[c >> 6] |= (uint64_t) 1 << (c & 63);
}

/* Whether s holds c. */
static inline bool
byteset_has(const LlmByteSet *s, uint8_t c)
{
	return (s->bits[c >> 6] >> (c & 63)) & 1;
}

/* A new builder. */
LlmGrammarBuilder *
llm_grammar_builder_new(void)
{
	LlmGrammarBuilder *b = calloc(1, sizeof(*b));

	if (b != NULL)
		memset(b->single_set, -1, sizeof(b->single_set));
	return b;
}

/* Free a builder. */
void
llm_grammar_builder_free(LlmGrammarBuilder *b)
{
	if (b == NULL)
		return;
	for (int i = 0; i < b->n_alts; i++)
		free(b->alts[i].elems);
	free(b->alts);
	free(b->rule_n_alts);
	free(b->sets);
	free(b->groups);
	free(b->members);
	free(b);
}

/* A new rule. */
int
llm_grammar_rule(LlmGrammarBuilder *b)
{
	if (!grow((void **) &b->rule_n_alts, &b->rules_cap, b->n_rules + 1, sizeof(int)))
	{
		b->nomem = true;
		return 0;
	}
	b->rule_n_alts[b->n_rules] = 0;
	return b->n_rules++;
}

/* A new alternative of rule. */
int
llm_grammar_alt(LlmGrammarBuilder *b, int rule)
{
	if (b->nomem || rule < 0 || rule >= b->n_rules)
		return -1;
	if (!grow((void **) &b->alts, &b->alts_cap, b->n_alts + 1, sizeof(BuildAlt)))
	{
		b->nomem = true;
		return -1;
	}
	memset(&b->alts[b->n_alts], 0, sizeof(BuildAlt));
	b->alts[b->n_alts].rule = rule;
	b->rule_n_alts[rule]++;
	return b->n_alts++;
}

/* Append element e to alternative alt. */
static void
builder_push(LlmGrammarBuilder *b, int alt, uint32_t e)
{
	BuildAlt   *a;

	if (b->nomem || alt < 0)
		return;
	if (++b->n_elems > LLM_GRAMMAR_MAX_ELEMS)
	{
		b->too_big = true;
		return;
	}
	a = &b->alts[alt];
	if (!grow((void **) &a->elems, &a->cap, a->n + 1, sizeof(uint32_t)))
	{
		b->nomem = true;
		return;
	}
	a->elems[a->n++] = e;
}

/* The number of a set equal to s, added if new (-1 when out of memory). */
static int
builder_set(LlmGrammarBuilder *b, const LlmByteSet *s)
{
	for (int i = 0; i < b->n_sets; i++)
		if (memcmp(&b->sets[i], s, sizeof(*s)) == 0)
			return i;
	if (!grow((void **) &b->sets, &b->sets_cap, b->n_sets + 1, sizeof(LlmByteSet)))
	{
		b->nomem = true;
		return -1;
	}
	b->sets[b->n_sets] = *s;
	return b->n_sets++;
}

/* Append one byte out of set to alt. */
void
llm_grammar_add_set(LlmGrammarBuilder *b, int alt, const LlmByteSet *set)
{
	int			i = builder_set(b, set);

	if (i >= 0)
		builder_push(b, alt, ((uint32_t) i << 2) | ELEM_SET);
}

/* Append the bytes of s to alt. */
void
llm_grammar_add_literal(LlmGrammarBuilder *b, int alt, const char *s, size_t n)
{
	for (size_t k = 0; k < n; k++)
	{
		uint8_t		c = (uint8_t) s[k];

		if (b->single_set[c] < 0)
		{
			LlmByteSet	one = llm_byteset_range(c, c);

			b->single_set[c] = builder_set(b, &one);
			if (b->single_set[c] < 0)
				return;
		}
		builder_push(b, alt, ((uint32_t) b->single_set[c] << 2) | ELEM_SET);
	}
}

/* Append a reference to rule to alt. */
void
llm_grammar_add_rule(LlmGrammarBuilder *b, int alt, int rule)
{
	builder_push(b, alt, ((uint32_t) rule << 2) | ELEM_RULE);
}

/* Append an any-order group of the member rules to alt. */
void
llm_grammar_add_any_order(LlmGrammarBuilder *b, int alt, const int *members, const bool *required, int n, int sep)
{
	Group	   *gr;

	if (b->nomem || alt < 0)
		return;
	if (n < 0 || n > LLM_GRAMMAR_MAX_MEMBERS)
	{
		b->too_many_members = true;
		return;
	}
	if (!grow((void **) &b->groups, &b->groups_cap, b->n_groups + 1, sizeof(Group)) ||
		!grow((void **) &b->members, &b->members_cap, b->n_members + n, sizeof(int)))
	{
		b->nomem = true;
		return;
	}
	gr = &b->groups[b->n_groups];
	memset(gr, 0, sizeof(*gr));
	gr->first = b->n_members;
	gr->n = n;
	gr->sep = sep;
	for (int i = 0; i < n; i++)
	{
		b->members[b->n_members++] = members[i];
		if (required[i])
			gr->required[i / 32] |= (uint32_t) 1 << (i % 32);
	}
	builder_push(b, alt, ((uint32_t) b->n_groups++ << 2) | ELEM_GROUP);
}

/* Whether rule is one of b's rules. */
static bool
builder_has_rule(const LlmGrammarBuilder *b, int rule)
{
	return rule >= 0 && rule < b->n_rules;
}

/* A rule of one literal. */
int
llm_grammar_literal_rule(LlmGrammarBuilder *b, const char *s, size_t n)
{
	int			r = llm_grammar_rule(b);

	llm_grammar_add_literal(b, llm_grammar_alt(b, r), s, n);
	return r;
}

/* One string of llm_grammar_strings_rule(). */
typedef struct TrieString
{
	const char *s;
	size_t		len;
} TrieString;

/* A trie node still to build: rule, for strings[lo .. hi), which share their first depth bytes. */
typedef struct TrieWork
{
	int			rule;
	int			lo;
	int			hi;
	size_t		depth;
} TrieWork;

/* qsort order of TrieStrings: bytewise, a prefix before what extends it. */
static int
trie_string_cmp(const void *pa, const void *pb)
{
	const TrieString *a = pa;
	const TrieString *b = pb;
	int			c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);

	if (c != 0)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

/*
 * A rule for exactly the strings: sorted and deduplicated, so the strings
 * under a trie node are a run of them, and a node's bytes shared by its
 * whole run are one literal up to the next branching point.  Built from a
 * list of pending nodes rather than by recursion, since strings such as
 * "a", "aa", "aaa", ... nest a node per string.
 */
int
llm_grammar_strings_rule(LlmGrammarBuilder *b, const char *const *strs, const size_t *lens, int n)
{
	TrieString *ts;
	TrieWork   *work = NULL;
	int			n_work = 0,
				work_cap = 0,
				m = 0;
	int			root = llm_grammar_rule(b);

	if (b->nomem)
		return root;
	if ((ts = malloc((size_t) (n > 0 ? n : 1) * sizeof(TrieString))) == NULL)
	{
		b->nomem = true;
		return root;
	}
	for (int i = 0; i < n; i++)
		ts[i] = (TrieString) {strs[i], lens[i]};
	qsort(ts, (size_t) n, sizeof(TrieString), trie_string_cmp);
	for (int i = 0; i < n; i++)
		if (m == 0 || trie_string_cmp(&ts[m - 1], &ts[i]) != 0)
			ts[m++] = ts[i];
	if (m > 0 && grow((void **) &work, &work_cap, 1, sizeof(TrieWork)))
		work[n_work++] = (TrieWork) {root, 0, m, 0};
	else if (m > 0)
		b->nomem = true;
	while (n_work > 0 && !b->nomem && !b->too_big)
	{
		TrieWork	w = work[--n_work];
		int			i = w.lo;

		/* the string that ends here (one, after deduplication, and first in the run) */
		if (ts[i].len == w.depth)
		{
			llm_grammar_alt(b, w.rule);
			i++;
		}
		while (i < w.hi)
		{
			uint8_t		c = (uint8_t) ts[i].s[w.depth];
			int			j = i + 1;
			size_t		end = w.depth + 1;
			int			alt;

			while (j < w.hi && (uint8_t) ts[j].s[w.depth] == c)
				j++;
			/* the run's common prefix is its first and last strings' */
			while (end < ts[i].len && end < ts[j - 1].len && ts[i].s[end] == ts[j - 1].s[end])
				end++;
			alt = llm_grammar_alt(b, w.rule);
			llm_grammar_add_literal(b, alt, ts[i].s + w.depth, end - w.depth);
			if (j - i > 1)
			{
				int			child = llm_grammar_rule(b);

				llm_grammar_add_rule(b, alt, child);
				if (!grow((void **) &work, &work_cap, n_work + 1, sizeof(TrieWork)))
				{
					b->nomem = true;
					break;
				}
				work[n_work++] = (TrieWork) {child, i, j, end};
			}
			i = j;
		}
	}
	free(work);
	free(ts);
	return root;
}

/* Freeze the rules into a grammar. */
LlmStatus
llm_grammar_builder_finish(LlmGrammarBuilder *b, int root, LlmGrammar **out, LlmError *err)
{
	LlmGrammar *g;
	int		   *fill;
	size_t		pos = 0;
	LlmStatus	st = LLM_OK;

	if (b == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a grammar");
	if (b->nomem)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a grammar");
	else if (b->too_big)
		st = llm_error_set(err, LLM_ERR_LIMIT, "the grammar would need more than %d elements", LLM_GRAMMAR_MAX_ELEMS);
	else if (b->too_many_members)
		st = llm_error_set(err, LLM_ERR_LIMIT, "an any-order group may have at most %d members",
						   LLM_GRAMMAR_MAX_MEMBERS);
	else if (!builder_has_rule(b, root))
		st = llm_error_set(err, LLM_ERR_INVALID, "the grammar has no rule %d", root);
	for (int r = 0; st == LLM_OK && r < b->n_rules; r++)
		if (b->rule_n_alts[r] == 0)
			st = llm_error_set(err, LLM_ERR_INVALID, "grammar rule %d has no alternatives", r);
	for (int i = 0; st == LLM_OK && i < b->n_members; i++)
		if (!builder_has_rule(b, b->members[i]))
			st = llm_error_set(err, LLM_ERR_INVALID, "a group's member names no rule (%d)", b->members[i]);
	for (int i = 0; st == LLM_OK && i < b->n_groups; i++)
		if (!builder_has_rule(b, b->groups[i].sep))
			st = llm_error_set(err, LLM_ERR_INVALID, "a group's separator names no rule (%d)", b->groups[i].sep);
	if (st != LLM_OK)
	{
		llm_grammar_builder_free(b);
		return st;
	}

	g = calloc(1, sizeof(*g));
	fill = calloc((size_t) b->n_rules + 1, sizeof(int));
	if (g != NULL)
	{
		g->elems = malloc((b->n_elems + (size_t) b->n_alts) * sizeof(uint32_t));
		g->alt_pos = malloc((size_t) (b->n_alts ? b->n_alts : 1) * sizeof(int));
		g->alt_first = calloc((size_t) b->n_rules + 1, sizeof(int));
		g->sets = malloc((size_t) (b->n_sets ? b->n_sets : 1) * sizeof(LlmByteSet));
		g->groups = malloc((size_t) (b->n_groups ? b->n_groups : 1) * sizeof(Group));
		g->members = malloc((size_t) (b->n_members ? b->n_members : 1) * sizeof(int));
	}
	if (g == NULL || fill == NULL || g->elems == NULL || g->alt_pos == NULL || g->alt_first == NULL ||
		g->sets == NULL || g->groups == NULL || g->members == NULL)
	{
		free(fill);
		llm_grammar_free(g);
		llm_grammar_builder_free(b);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a grammar");
	}
	/* alternatives grouped by rule, each in the order it was added */
	for (int r = 0; r < b->n_rules; r++)
		g->alt_first[r + 1] = g->alt_first[r] + b->rule_n_alts[r];
	for (int i = 0; i < b->n_alts; i++)
	{
		const BuildAlt *a = &b->alts[i];

		g->alt_pos[g->alt_first[a->rule] + fill[a->rule]++] = (int) pos;
		if (a->n > 0)
			memcpy(g->elems + pos, a->elems, (size_t) a->n * sizeof(uint32_t));
		pos += (size_t) a->n;
		g->elems[pos++] = ELEM_END;
	}
	if (b->n_sets > 0)
		memcpy(g->sets, b->sets, (size_t) b->n_sets * sizeof(LlmByteSet));
	if (b->n_groups > 0)
		memcpy(g->groups, b->groups, (size_t) b->n_groups * sizeof(Group));
	if (b->n_members > 0)
		memcpy(g->members, b->members, (size_t) b->n_members * sizeof(int));
	g->root = root;
	free(fill);
	llm_grammar_builder_free(b);
	*out = g;
	return LLM_OK;
}

/* Free a grammar. */
void
llm_grammar_free(LlmGrammar *g)
{
	if (g == NULL)
		return;
	free(g->elems);
	free(g->alt_pos);
	free(g->alt_first);
	free(g->sets);
	free(g->groups);
	free(g->members);
	free(g);
}

/* Initialise an empty state buffer. */
void
llm_grammar_state_init(LlmGrammarState *s)
{
	memset(s, 0, sizeof(*s));
}

/* Free a state buffer. */
void
llm_grammar_state_free(LlmGrammarState *s)
{
	free(s->data);
	memset(s, 0, sizeof(*s));
}

/* Copy src into dst. */
bool
llm_grammar_state_copy(LlmGrammarState *dst, const LlmGrammarState *src)
{
	if (!grow((void **) &dst->data, &dst->cap, src->len, sizeof(uint32_t)))
		return false;
	if (src->len > 0)
		memcpy(dst->data, src->data, (size_t) src->len * sizeof(uint32_t));
	dst->len = src->len;
	dst->n_stacks = src->n_stacks;
	return true;
}

/* Whether a and b are the same state. */
bool
llm_grammar_state_equal(const LlmGrammarState *a, const LlmGrammarState *b)
{
	return a->len == b->len && a->n_stacks == b->n_stacks &&
		(a->len == 0 || memcmp(a->data, b->data, (size_t) a->len * sizeof(uint32_t)) == 0);
}

/* A hash of the state's words (FNV-1a over 32-bit words, then a final mix). */
uint64_t
llm_grammar_state_hash(const LlmGrammarState *s)
{
	uint64_t	h = 1469598103934665603ull;

	for (int i = 0; i < s->len; i++)
		h = (h ^ s->data[i]) * 1099511628211ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* Add stack (depth d) to state s unless s has it; false when past the bounds or out of memory. */
static bool
state_emit(LlmGrammarState *s, const uint32_t *stack, int d)
{
	int			at = 0;

	for (int i = 0; i < s->n_stacks; i++)
	{
		int			sd = (int) s->data[at];

		if (sd == d && memcmp(s->data + at + 1, stack, (size_t) d * sizeof(uint32_t)) == 0)
			return true;
		at += sd + 1;
	}
	if (s->n_stacks >= LLM_GRAMMAR_MAX_STACKS ||
		!grow((void **) &s->data, &s->cap, s->len + d + 1, sizeof(uint32_t)))
		return false;
	s->data[s->len] = (uint32_t) d;
	if (d > 0)
		memcpy(s->data + s->len + 1, stack, (size_t) d * sizeof(uint32_t));
	s->len += d + 1;
	s->n_stacks++;
	return true;
}

static bool expand(const LlmGrammar *g, uint32_t *stack, int d, LlmGrammarState *out, int level);

/* Expand stack (depth d; NULL when 0) with each alternative of rule r on top, adding the resulting stacks to out. */
static bool
expand_rule(const LlmGrammar *g, const uint32_t *stack, int d, int r, LlmGrammarState *out, int level)
{
	if (d >= LLM_GRAMMAR_MAX_DEPTH)
		return false;
	for (int a = g->alt_first[r]; a < g->alt_first[r + 1]; a++)
	{
		uint32_t	copy[LLM_GRAMMAR_MAX_DEPTH];

		if (d > 0)
			memcpy(copy, stack, (size_t) d * sizeof(uint32_t));
		copy[d] = (uint32_t) g->alt_pos[a];
		if (!expand(g, copy, d + 1, out, level + 1))
			return false;
	}
	return true;
}

/*
 * Expand stack (depth d, the caller's copy, which this may change) with a
 * group's frame on top: each member not yet written (after the separator
 * once one is), then the group's end when every required member is.
 */
static bool
expand_frame(const LlmGrammar *g, uint32_t *stack, int d, LlmGrammarState *out, int level)
{
	uint32_t	header = stack[d - 1];
	const Group *gr = &g->groups[(header & ~FRAME_BIT) >> 1];
	int			w = GROUP_WORDS(gr->n);
	uint32_t   *written = stack + d - 1 - w;
	bool		any = false,
				all = true,
				done = true;

	for (int i = 0; i < gr->n; i++)
	{
		bool		bit = (written[i / 32] >> (i % 32)) & 1;

		any |= bit;
		all &= bit;
		done &= bit || !((gr->required[i / 32] >> (i % 32)) & 1);
	}
	if ((header & 1) == 0 && any && !all)
	{
		/* between two members: the separator, then a member */
		stack[d - 1] = header | 1;
		if (!expand_rule(g, stack, d, gr->sep, out, level))
			return false;
		stack[d - 1] = header;
	}
	else if (!all)
		for (int i = 0; i < gr->n; i++)
		{
			uint32_t	bit = (uint32_t) 1 << (i % 32);

			if (written[i / 32] & bit)
				continue;
			written[i / 32] |= bit;
			stack[d - 1] = header & ~1u;
			if (!expand_rule(g, stack, d, g->members[gr->first + i], out, level))
				return false;
			written[i / 32] &= ~bit;
			stack[d - 1] = header;
		}
	if ((header & 1) != 0 || !done)
		return true;
	return expand(g, stack, d - 1 - w, out, level + 1);
}

/*
 * Expand stack (depth d, which this may change: the caller's copy) until a
 * byte set is on top, adding each resulting stack to out.
 */
static bool
expand(const LlmGrammar *g, uint32_t *stack, int d, LlmGrammarState *out, int level)
{
	if (level > EXPAND_MAX_LEVELS)
		return false;
	for (;;)
	{
		uint32_t	e;

		if (d == 0)
			return state_emit(out, stack, 0);
		if (stack[d - 1] & FRAME_BIT)
			return expand_frame(g, stack, d, out, level);
		e = g->elems[stack[d - 1]];
		if (ELEM_KIND(e) == ELEM_END)
		{
			d--;				/* the alternative is done: back to its caller */
			continue;
		}
		if (ELEM_KIND(e) == ELEM_SET)
			return state_emit(out, stack, d);

		/* a rule or a group: its caller goes on after it (unless nothing follows) */
		if (ELEM_KIND(g->elems[stack[d - 1] + 1]) == ELEM_END)
			d--;
		else
			stack[d - 1]++;
		if (ELEM_KIND(e) == ELEM_RULE)
			return expand_rule(g, stack, d, (int) ELEM_INDEX(e), out, level);

		/* a group: its frame on top, no member written yet */
		{
			int			w = GROUP_WORDS(g->groups[ELEM_INDEX(e)].n);

			if (d + w + 1 > LLM_GRAMMAR_MAX_DEPTH)
				return false;
			memset(stack + d, 0, (size_t) w * sizeof(uint32_t));
			stack[d + w] = FRAME_BIT | (ELEM_INDEX(e) << 1);
			d += w + 1;
		}
	}
}

/* The state before any byte. */
LlmStatus
llm_grammar_start(const LlmGrammar *g, LlmGrammarState *out, LlmError *err)
{
	out->len = 0;
	out->n_stacks = 0;
	if (!expand_rule(g, NULL, 0, g->root, out, 0))
	{
		bool		wide = out->n_stacks >= LLM_GRAMMAR_MAX_STACKS;

		out->len = 0;
		out->n_stacks = 0;
		if (wide)
			return llm_error_set(err, LLM_ERR_LIMIT,
								 "the value may begin in more than %d ways at once, more than the recognizer follows",
								 LLM_GRAMMAR_MAX_STACKS);
		return llm_error_set(err, LLM_ERR_LIMIT, "the grammar's start nests its rules too deeply");
	}
	return LLM_OK;
}

/* The state after byte c. */
bool
llm_grammar_advance(const LlmGrammar *g, const LlmGrammarState *from, uint8_t c, LlmGrammarState *to)
{
	int			at = 0;

	to->len = 0;
	to->n_stacks = 0;
	for (int i = 0; i < from->n_stacks; i++)
	{
		int			d = (int) from->data[at];
		const uint32_t *stack = from->data + at + 1;

		at += d + 1;
		if (d == 0 || !byteset_has(&g->sets[ELEM_INDEX(g->elems[stack[d - 1]])], c))
			continue;
		{
			uint32_t	copy[LLM_GRAMMAR_MAX_DEPTH];

			memcpy(copy, stack, (size_t) d * sizeof(uint32_t));
			copy[d - 1]++;		/* past the byte */
			if (!expand(g, copy, d, to, 0))
			{
				to->len = 0;
				to->n_stacks = 0;
				return false;
			}
		}
	}
	return to->n_stacks > 0;
}

/* Whether the bytes so far form a sentence. */
bool
llm_grammar_accepting(const LlmGrammarState *s)
{
	int			at = 0;

	for (int i = 0; i < s->n_stacks; i++)
	{
		if (s->data[at] == 0)
			return true;
		at += (int) s->data[at] + 1;
	}
	return false;
}

/* Whether they do and nothing may follow. */
bool
llm_grammar_complete(const LlmGrammarState *s)
{
	return s->n_stacks == 1 && s->data[0] == 0;
}
