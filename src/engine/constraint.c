/*
 * constraint.c
 *		Token masks for constrained decoding: the vocabulary trie, the lazy
 *		automaton over grammar states, and the cache of constraints
 *		(constraint.h explains the layers).
 */
#include "constraint.h"

#include <stdlib.h>
#include <string.h>

#include "json_schema.h"

/* An automaton transition not computed yet; a rejected byte is -1. */
#define NEXT_UNKNOWN (-2)

/* Every token's output bytes, as a trie; node 0 is the root (no byte). */
typedef struct LlmVocabTrie
{
	int32_t    *first_child;	/* (n_nodes) */
	int32_t    *next_sibling;	/* (n_nodes) */
	uint8_t    *byte;			/* (n_nodes) the byte that leads to the node */
	int32_t    *first_token;	/* (n_nodes) a token whose bytes end here, or -1 */
	int32_t    *next_token;		/* (n_vocab) the next token with the same bytes, or -1 */
	int			n_nodes;
	int			cap;
	int			max_len;		/* longest token, in bytes */
} LlmVocabTrie;

/* One state of a constraint's automaton. */
typedef struct DfaState
{
	LlmGrammarState st;
	uint64_t	hash;
	int32_t    *next;			/* (256) the state after each byte, -1 or NEXT_UNKNOWN; NULL until needed */
	uint64_t   *mask;			/* (mask_words) once computed, else NULL */
} DfaState;

struct LlmConstraint
{
	LlmGrammarKind kind;
	char	   *text;			/* (len) the key: schema text or choices */
	size_t		len;
	int			refs;
	uint64_t	last_used;
	LlmGrammar *grammar;
	LlmConstraintCache *cache;

	DfaState   *states;			/* (n_states) */
	int			n_states;
	int			states_cap;
	int32_t    *index;			/* (index_cap) open addressing over states by hash, -1 empty */
	int			index_cap;
	size_t		bytes;			/* what the automaton holds now */
	uint64_t	epoch;			/* bumped when the automaton is dropped */
	LlmGrammarState scratch;
	int32_t    *walk_state;		/* (max_len + 1) the trie walk's state per depth */
	int32_t    *walk_child;		/* (max_len + 1) the next child to try per depth */
};

struct LlmConstraintCache
{
	const LlmTokenizer *tok;
	int			n_vocab;
	int			mask_words;
	LlmVocabTrie *trie;			/* built on first use */
	int32_t    *eog;			/* (n_eog) end-of-generation tokens */
	int			n_eog;
	LlmConstraint **items;		/* (n_items) */
	int			n_items;
	int			items_cap;
	uint64_t	clock;
	size_t		budget;			/* bytes an automaton may hold before it is dropped */
	int64_t		n_interned;
	int64_t		n_masks;
};

/* Free a trie. */
static void
trie_free(LlmVocabTrie *t)
{
	if (t == NULL)
		return;
	free(t->first_child);
	free(t->next_sibling);
	free(t->byte);
	free(t->first_token);
	free(t->next_token);
	free(t);
}

/* A new trie node under parent for byte c (-1 when out of memory). */
static int
trie_add_node(LlmVocabTrie *t, int parent, uint8_t c)
{
	int			n = t->n_nodes;

	if (n == t->cap)
	{
		int			cap = t->cap ? 2 * t->cap : 4096;
		int32_t    *fc = realloc(t->first_child, (size_t) cap * sizeof(int32_t));

		if (fc != NULL)
			t->first_child = fc;
		if (fc == NULL || (fc = realloc(t->next_sibling, (size_t) cap * sizeof(int32_t))) == NULL)
			return -1;
		t->next_sibling = fc;
		if ((fc = realloc(t->first_token, (size_t) cap * sizeof(int32_t))) == NULL)
			return -1;
		t->first_token = fc;
		{
			uint8_t    *b = realloc(t->byte, (size_t) cap);

			if (b == NULL)
				return -1;
			t->byte = b;
		}
		t->cap = cap;
	}
	t->first_child[n] = -1;
	t->first_token[n] = -1;
	t->byte[n] = c;
	t->next_sibling[n] = parent >= 0 ? t->first_child[parent] : -1;
	if (parent >= 0)
		t->first_child[parent] = n;
	t->n_nodes++;
	return n;
}

/* Build the trie of tok's tokens that write bytes (end-of-generation and empty tokens are left out). */
static LlmStatus
trie_build(const LlmTokenizer *tok, LlmVocabTrie **out, LlmError *err)
{
	int			n_vocab = llm_tokenizer_n_vocab(tok);
	LlmVocabTrie *t = calloc(1, sizeof(*t));

	if (t == NULL || (t->next_token = malloc((size_t) n_vocab * sizeof(int32_t))) == NULL ||
		trie_add_node(t, -1, 0) != 0)
	{
		trie_free(t);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the vocabulary trie");
	}
	for (int32_t id = 0; id < n_vocab; id++)
	{
		size_t		len = 0;
		const char *p = llm_token_piece(tok, id, &len);
		int			node = 0;

		t->next_token[id] = -1;
		if (p == NULL || len == 0 || llm_tokenizer_is_eog(tok, id))
			continue;
		for (size_t i = 0; i < len; i++)
		{
			int			c = t->first_child[node];

			while (c >= 0 && t->byte[c] != (uint8_t) p[i])
				c = t->next_sibling[c];
			if (c < 0 && (c = trie_add_node(t, node, (uint8_t) p[i])) < 0)
			{
				trie_free(t);
				return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the vocabulary trie");
			}
			node = c;
		}
		t->next_token[id] = t->first_token[node];
		t->first_token[node] = id;
		if ((int) len > t->max_len)
			t->max_len = (int) len;
	}
	*out = t;
	return LLM_OK;
}

/*
 * The grammar whose sentences are the choices (len bytes, each
 * NUL-terminated, the last one perhaps not), one trie over them
 * (llm_grammar_strings_rule()), so that any number of choices keeps the
 * recognizer's stacks within their bound.
 */
static LlmStatus
choices_grammar(const char *text, size_t len, LlmGrammar **out, LlmError *err)
{
	LlmGrammarBuilder *b;
	const char **strs;
	size_t	   *lens;
	int			n = 0;
	size_t		at = 0;
	LlmStatus	st = LLM_OK;

	if (len == 0)
		return llm_error_set(err, LLM_ERR_INVALID, "choices must not be empty");
	/* at most one choice per two bytes (one and its NUL), and one more for an unterminated last one */
	if (len / 2 + 1 > (size_t) INT32_MAX)
		return llm_error_set(err, LLM_ERR_LIMIT, "too many choices");
	strs = malloc((len / 2 + 1) * sizeof(char *));
	lens = malloc((len / 2 + 1) * sizeof(size_t));
	b = llm_grammar_builder_new();
	if (strs == NULL || lens == NULL || b == NULL)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a grammar");
	while (st == LLM_OK && at < len)
	{
		const char *end = memchr(text + at, '\0', len - at);
		size_t		k = end != NULL ? (size_t) (end - (text + at)) : len - at;

		if (k == 0)
			st = llm_error_set(err, LLM_ERR_INVALID, "a choice must not be empty");
		strs[n] = text + at;
		lens[n++] = k;
		at += k + 1;
	}
	if (st == LLM_OK)
	{
		st = llm_grammar_builder_finish(b, llm_grammar_strings_rule(b, strs, lens, n), out, err);
		if (st == LLM_ERR_LIMIT)
			llm_error_set(err, st, "the choices need more than %d grammar elements, about one per byte that "
						  "does not share a prefix with another choice", LLM_GRAMMAR_MAX_ELEMS);
	}
	else
		llm_grammar_builder_free(b);
	free(strs);
	free(lens);
	return st;
}

/* Drop c's automaton (its states and masks); cursors find their states again. */
static void
dfa_clear(LlmConstraint *c)
{
	for (int i = 0; i < c->n_states; i++)
	{
		llm_grammar_state_free(&c->states[i].st);
		free(c->states[i].next);
		free(c->states[i].mask);
	}
	c->n_states = 0;
	c->bytes = 0;
	if (c->index != NULL)
		memset(c->index, -1, (size_t) c->index_cap * sizeof(int32_t));
	c->epoch++;
}

/* Free a constraint. */
static void
constraint_free(LlmConstraint *c)
{
	if (c == NULL)
		return;
	dfa_clear(c);
	free(c->states);
	free(c->index);
	free(c->walk_state);
	free(c->walk_child);
	llm_grammar_state_free(&c->scratch);
	llm_grammar_free(c->grammar);
	free(c->text);
	free(c);
}

/* Rebuild the hash index at twice the size. */
static bool
dfa_grow_index(LlmConstraint *c)
{
	int			cap = c->index_cap ? 2 * c->index_cap : 1024;
	int32_t    *index = malloc((size_t) cap * sizeof(int32_t));

	if (index == NULL)
		return false;
	memset(index, -1, (size_t) cap * sizeof(int32_t));
	for (int i = 0; i < c->n_states; i++)
	{
		size_t		h = (size_t) c->states[i].hash & (size_t) (cap - 1);

		while (index[h] >= 0)
			h = (h + 1) & (size_t) (cap - 1);
		index[h] = i;
	}
	free(c->index);
	c->index = index;
	c->index_cap = cap;
	return true;
}

/* The number of state st in c's automaton, added if new; -1 when out of memory. */
static int
dfa_intern(LlmConstraint *c, const LlmGrammarState *st)
{
	uint64_t	hash = llm_grammar_state_hash(st);
	size_t		h;
	DfaState   *s;

	if (2 * (c->n_states + 1) > c->index_cap && !dfa_grow_index(c))
		return -1;
	for (h = (size_t) hash & (size_t) (c->index_cap - 1); c->index[h] >= 0; h = (h + 1) & (size_t) (c->index_cap - 1))
	{
		s = &c->states[c->index[h]];
		if (s->hash == hash && llm_grammar_state_equal(&s->st, st))
			return c->index[h];
	}
	if (c->n_states == c->states_cap)
	{
		int			cap = c->states_cap ? 2 * c->states_cap : 64;
		DfaState   *states = realloc(c->states, (size_t) cap * sizeof(DfaState));

		if (states == NULL)
			return -1;
		c->states = states;
		c->states_cap = cap;
	}
	s = &c->states[c->n_states];
	memset(s, 0, sizeof(*s));
	if (!llm_grammar_state_copy(&s->st, st))
		return -1;
	s->hash = hash;
	c->index[h] = c->n_states;
	c->bytes += sizeof(DfaState) + (size_t) st->len * sizeof(uint32_t);
	c->cache->n_interned++;
	return c->n_states++;
}

/* The state after byte b from state id (-1: rejected or out of memory). */
static inline int
dfa_next(LlmConstraint *c, int id, uint8_t b)
{
	int32_t		next;

	if (c->states[id].next == NULL)
	{
		int32_t    *row = malloc(256 * sizeof(int32_t));

		if (row == NULL)
			return -1;
		for (int i = 0; i < 256; i++)
			row[i] = NEXT_UNKNOWN;
		c->states[id].next = row;
		c->bytes += 256 * sizeof(int32_t);
	}
	if ((next = c->states[id].next[b]) != NEXT_UNKNOWN)
		return next;
	next = llm_grammar_advance(c->grammar, &c->states[id].st, b, &c->scratch) ? dfa_intern(c, &c->scratch) : -1;
	c->states[id].next[b] = next;	/* states may have moved: index again */
	return next;
}

/* The state number of cur in the present automaton. */
static int
cursor_id(LlmConstraint *c, LlmConstraintCursor *cur)
{
	if (cur->epoch != c->epoch || cur->id < 0)
	{
		cur->id = dfa_intern(c, &cur->state);
		cur->epoch = c->epoch;
	}
	return cur->id;
}

/* Compute the mask of state id by one walk of the trie. */
static bool
dfa_mask(LlmConstraint *c, int id)
{
	const LlmConstraintCache *cache = c->cache;
	const LlmVocabTrie *t = cache->trie;
	uint64_t   *mask = calloc((size_t) cache->mask_words, sizeof(uint64_t));
	int			d = 0;

	if (mask == NULL)
		return false;
	c->walk_state[0] = id;
	c->walk_child[0] = t->first_child[0];
	while (d >= 0)
	{
		int			node = c->walk_child[d];
		int			next;

		if (node < 0)
		{
			d--;
			continue;
		}
		c->walk_child[d] = t->next_sibling[node];
		if ((next = dfa_next(c, c->walk_state[d], t->byte[node])) < 0)
			continue;			/* this byte leaves the grammar: so do all tokens below */
		for (int32_t tok = t->first_token[node]; tok >= 0; tok = t->next_token[tok])
			llm_mask_allow(mask, tok);
		if (t->first_child[node] >= 0)
		{
			d++;
			c->walk_state[d] = next;
			c->walk_child[d] = t->first_child[node];
		}
	}
	if (llm_grammar_accepting(&c->states[id].st))
		for (int i = 0; i < cache->n_eog; i++)
			llm_mask_allow(mask, cache->eog[i]);
	c->states[id].mask = mask;
	c->bytes += (size_t) cache->mask_words * sizeof(uint64_t);
	c->cache->n_masks++;
	return true;
}

/* The tokens allowed at cur. */
LlmStatus
llm_constraint_mask(LlmConstraint *c, LlmConstraintCursor *cur, const uint64_t **mask, LlmError *err)
{
	int			id;

	if (c->bytes > c->cache->budget)
		dfa_clear(c);
	if ((id = cursor_id(c, cur)) < 0 || (c->states[id].mask == NULL && !dfa_mask(c, id)))
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a token mask");
	*mask = c->states[id].mask;
	return LLM_OK;
}

/* Move cur past token t's bytes. */
bool
llm_constraint_advance(LlmConstraint *c, LlmConstraintCursor *cur, int32_t t)
{
	size_t		len = 0;
	const char *p = llm_token_piece(c->cache->tok, t, &len);
	int			id = cursor_id(c, cur);

	if (p == NULL || len == 0 || id < 0)
		return false;
	for (size_t i = 0; i < len && id >= 0; i++)
		id = dfa_next(c, id, (uint8_t) p[i]);
	if (id < 0 || !llm_grammar_state_copy(&cur->state, &c->states[id].st))
		return false;
	cur->id = id;
	return true;
}

/* Whether the output at cur is whole. */
bool
llm_constraint_accepting(const LlmConstraintCursor *cur)
{
	return llm_grammar_accepting(&cur->state);
}

/* Whether it is whole and nothing may follow. */
bool
llm_constraint_complete(const LlmConstraintCursor *cur)
{
	return llm_grammar_complete(&cur->state);
}

/* Put cur at the start of c's grammar. */
LlmStatus
llm_constraint_cursor_init(LlmConstraint *c, LlmConstraintCursor *cur, LlmError *err)
{
	llm_grammar_state_init(&cur->state);
	cur->id = -1;
	cur->epoch = c->epoch;
	return llm_grammar_start(c->grammar, &cur->state, err);
}

/* Free a cursor's state. */
void
llm_constraint_cursor_free(LlmConstraintCursor *cur)
{
	llm_grammar_state_free(&cur->state);
}

/* Make dst (initialised, or freed) a copy of src; false when out of memory. */
bool
llm_constraint_cursor_copy(LlmConstraintCursor *dst, const LlmConstraintCursor *src)
{
	if (!llm_grammar_state_copy(&dst->state, &src->state))
		return false;
	dst->id = src->id;
	dst->epoch = src->epoch;
	return true;
}

/* A new cache. */
LlmStatus
llm_constraint_cache_new(const LlmTokenizer *tok, LlmConstraintCache **out, LlmError *err)
{
	LlmConstraintCache *cache = calloc(1, sizeof(*cache));
	int			n_vocab = llm_tokenizer_n_vocab(tok);

	if (cache == NULL || (cache->eog = malloc((size_t) n_vocab * sizeof(int32_t))) == NULL)
	{
		free(cache);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the constraint cache");
	}
	cache->tok = tok;
	cache->n_vocab = n_vocab;
	cache->mask_words = (n_vocab + 63) / 64;
	cache->budget = LLM_CONSTRAINT_BUDGET_BYTES;
	for (int32_t id = 0; id < n_vocab; id++)
		if (llm_tokenizer_is_eog(tok, id))
			cache->eog[cache->n_eog++] = id;
	*out = cache;
	return LLM_OK;
}

/* Free a cache. */
void
llm_constraint_cache_free(LlmConstraintCache *cache)
{
	if (cache == NULL)
		return;
	for (int i = 0; i < cache->n_items; i++)
		constraint_free(cache->items[i]);
	free(cache->items);
	free(cache->eog);
	trie_free(cache->trie);
	free(cache);
}

/* Free the least recently used unreferenced constraints beyond LLM_CONSTRAINT_CACHE_KEEP. */
static void
cache_trim(LlmConstraintCache *cache)
{
	for (;;)
	{
		int			unused = 0,
					oldest = -1;

		for (int i = 0; i < cache->n_items; i++)
			if (cache->items[i]->refs == 0)
			{
				unused++;
				if (oldest < 0 || cache->items[i]->last_used < cache->items[oldest]->last_used)
					oldest = i;
			}
		if (unused <= LLM_CONSTRAINT_CACHE_KEEP)
			return;
		constraint_free(cache->items[oldest]);
		cache->items[oldest] = cache->items[--cache->n_items];
	}
}

/* Compile (kind, text): a JSON Schema's text, or choices back to back, each NUL-terminated. */
static LlmStatus
grammar_compile(LlmGrammarKind kind, const char *text, size_t len, LlmGrammar **g, LlmError *err)
{
	if (kind == LLM_GRAMMAR_JSON_SCHEMA)
		return llm_json_schema_compile(text, len, g, err);
	if (kind == LLM_GRAMMAR_CHOICES)
		return choices_grammar(text, len, g, err);
	return llm_error_set(err, LLM_ERR_INVALID, "unknown grammar kind %d", (int) kind);
}

/* Compile (kind, text) into a new constraint of cache. */
static LlmStatus
constraint_new(LlmConstraintCache *cache, LlmGrammarKind kind, const char *text, size_t len,
			   LlmConstraint **out, LlmError *err)
{
	LlmConstraint *c;
	LlmGrammar *g = NULL;
	LlmStatus	st = grammar_compile(kind, text, len, &g, err);

	if (st != LLM_OK)
		return st;
	if (cache->trie == NULL && (st = trie_build(cache->tok, &cache->trie, err)) != LLM_OK)
	{
		llm_grammar_free(g);
		return st;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL || (c->text = malloc(len ? len : 1)) == NULL ||
		(c->walk_state = malloc((size_t) (cache->trie->max_len + 1) * sizeof(int32_t))) == NULL ||
		(c->walk_child = malloc((size_t) (cache->trie->max_len + 1) * sizeof(int32_t))) == NULL)
	{
		if (c != NULL)
			c->grammar = g;
		else
			llm_grammar_free(g);
		constraint_free(c);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a constraint");
	}
	memcpy(c->text, text, len);
	c->len = len;
	c->kind = kind;
	c->grammar = g;
	c->cache = cache;
	llm_grammar_state_init(&c->scratch);
	*out = c;
	return LLM_OK;
}

/* The constraint for (kind, text), with one more reference. */
LlmStatus
llm_constraint_get(LlmConstraintCache *cache, LlmGrammarKind kind, const char *text, size_t len,
				   LlmConstraint **out, LlmError *err)
{
	LlmConstraint *c = NULL;
	LlmStatus	st;

	for (int i = 0; i < cache->n_items; i++)
	{
		LlmConstraint *x = cache->items[i];

		if (x->kind == kind && x->len == len && memcmp(x->text, text, len) == 0)
			c = x;
	}
	if (c == NULL)
	{
		if (cache->n_items == cache->items_cap)
		{
			int			cap = cache->items_cap ? 2 * cache->items_cap : 16;
			LlmConstraint **items = realloc(cache->items, (size_t) cap * sizeof(*items));

			if (items == NULL)
				return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the constraint cache");
			cache->items = items;
			cache->items_cap = cap;
		}
		if ((st = constraint_new(cache, kind, text, len, &c, err)) != LLM_OK)
			return st;
		cache->items[cache->n_items++] = c;
	}
	c->refs++;
	c->last_used = ++cache->clock;
	*out = c;
	return LLM_OK;
}

/* Drop a reference. */
void
llm_constraint_put(LlmConstraintCache *cache, LlmConstraint *c)
{
	if (c == NULL)
		return;
	c->refs--;
	cache_trim(cache);
}

/* Set the memory budget of each automaton (tests force rebuilds with a small one). */
void
llm_constraint_cache_set_budget(LlmConstraintCache *cache, size_t bytes)
{
	cache->budget = bytes;
}

/* Counters for benchmarks. */
void
llm_constraint_cache_counts(const LlmConstraintCache *cache, int64_t *states, int64_t *masks)
{
	*states = cache->n_interned;
	*masks = cache->n_masks;
}

/* Check (kind, text) by compiling it and building its start, as llm_engine_add() would. */
static LlmStatus
grammar_check(LlmGrammarKind kind, const char *text, size_t len, LlmError *err)
{
	LlmGrammar *g = NULL;
	LlmStatus	st = grammar_compile(kind, text, len, &g, err);

	if (st == LLM_OK)
	{
		LlmGrammarState s;

		llm_grammar_state_init(&s);
		st = llm_grammar_start(g, &s, err);
		llm_grammar_state_free(&s);
	}
	llm_grammar_free(g);
	return st;
}

/* Check a JSON Schema by compiling it and building its start. */
LlmStatus
llm_json_schema_check(const char *schema, size_t len, LlmError *err)
{
	return grammar_check(LLM_GRAMMAR_JSON_SCHEMA, schema, len, err);
}

/* Check choices as llm_engine_add() compiles them. */
LlmStatus
llm_choices_check(const char *text, size_t len, LlmError *err)
{
	return grammar_check(LLM_GRAMMAR_CHOICES, text, len, err);
}
