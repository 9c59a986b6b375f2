/*
 * constraint.h
 *		Constrained decoding: which tokens keep a sequence's output inside a
 *		grammar, as a bit mask over the vocabulary, computed fast enough to
 *		run at every step.
 *
 * Three layers:
 *
 *   - LlmVocabTrie: every token's output bytes in a trie, built once per
 *     vocabulary.  A mask is one walk of the trie beside the grammar's
 *     recognizer, which prunes a subtree at its first rejected byte, so
 *     tokens that share a prefix share its work.
 *
 *   - LlmConstraint: one grammar bound to the trie, with a deterministic
 *     automaton built lazily over the recognizer's states (each state
 *     interned once, its transitions filled in as the walks need them) and
 *     each state's mask kept once computed.  Sequences that reach the same
 *     state (rows that share a schema, all positions inside a free string)
 *     reuse its mask, so after the first rows a mask costs a lookup.  The
 *     automaton is dropped and rebuilt when it outgrows its memory budget;
 *     masks depend only on the state, so nothing an answer sees changes.
 *
 *   - LlmConstraintCache: the engine's constraints by their kind and text,
 *     shared by every sequence that asks for the same grammar, each one
 *     compiled once; a few unused ones are kept for the next requests.
 *
 * A sequence follows its grammar with an LlmConstraintCursor, which holds
 * its own copy of the recognizer state, so a rebuilt automaton loses it
 * nothing.  None of this is thread-safe: the engine's thread owns it.
 */
#ifndef LLM_CONSTRAINT_H
#define LLM_CONSTRAINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "grammar.h"
#include "tokenizer.h"

typedef struct LlmConstraint LlmConstraint;
typedef struct LlmConstraintCache LlmConstraintCache;

/* Memory one constraint's automaton and masks may take before it is rebuilt. */
#define LLM_CONSTRAINT_BUDGET_BYTES ((size_t) 64 << 20)
/* Unused constraints a cache keeps. */
#define LLM_CONSTRAINT_CACHE_KEEP 8

/* A sequence's place in its grammar. */
typedef struct LlmConstraintCursor
{
	LlmGrammarState state;
	int			id;				/* the state's number in the automaton of epoch */
	uint64_t	epoch;
} LlmConstraintCursor;

/* Whether token mask (bit t of word t / 64, as llm_constraint_mask() gives it) allows token t. */
static inline bool
llm_mask_allows(const uint64_t *mask, int32_t t)
{
	return (mask[t >> 6] >> (t & 63)) & 1;
}

/* The one token of n_vocab that mask allows, or -1 when it allows none or several. */
static inline int32_t
llm_mask_single(const uint64_t *mask, int n_vocab)
{
	int32_t		only = -1;

	for (int w = 0; w * 64 < n_vocab; w++)
	{
		if (mask[w] == 0)
			continue;
		if (only >= 0 || (mask[w] & (mask[w] - 1)) != 0)
			return -1;
		only = w * 64 + __builtin_ctzll(mask[w]);
	}
	return only;
}

/* Allow token t in mask. */
static inline void
llm_mask_allow(uint64_t *mask, int32_t t)
{
	mask[t >> 6] |= (uint64_t) 1 << (t & 63);
}

/* A new, empty cache for the vocabulary of tok (the trie is built on first use). */
LlmStatus	llm_constraint_cache_new(const LlmTokenizer *tok, LlmConstraintCache **out, LlmError *err);
/* Free a cache and every constraint in it; NULL is allowed.  No cursor may be in use. */
void		llm_constraint_cache_free(LlmConstraintCache *cache);

/*
 * The constraint for (kind, text, len), compiled on first use, with one
 * more reference; LLM_ERR_INVALID or LLM_ERR_UNSUPPORTED for a grammar that
 * cannot be compiled (the message says why).
 */
LlmStatus	llm_constraint_get(LlmConstraintCache *cache, LlmGrammarKind kind, const char *text, size_t len,
							   LlmConstraint **out, LlmError *err);
/* Drop a reference from llm_constraint_get(). */
void		llm_constraint_put(LlmConstraintCache *cache, LlmConstraint *c);

/* Put cur at the start of c's grammar. */
LlmStatus	llm_constraint_cursor_init(LlmConstraint *c, LlmConstraintCursor *cur, LlmError *err);
void		llm_constraint_cursor_free(LlmConstraintCursor *cur);
/* Make dst (initialised with llm_grammar_state_init, or freed) a copy of src; false when out of memory. */
bool		llm_constraint_cursor_copy(LlmConstraintCursor *dst, const LlmConstraintCursor *src);

/*
 * The tokens allowed at cur: (n_vocab) bits in 64-bit words, bit t of word
 * t / 64 for token t; end-of-generation tokens are allowed exactly when the
 * output so far is whole.  Valid until the next call on c.
 */
LlmStatus	llm_constraint_mask(LlmConstraint *c, LlmConstraintCursor *cur, const uint64_t **mask, LlmError *err);

/* Move cur past token t's bytes; false when t is not allowed there. */
bool		llm_constraint_advance(LlmConstraint *c, LlmConstraintCursor *cur, int32_t t);

/* Whether the output at cur is a whole sentence; and whether, besides, nothing may follow. */
bool		llm_constraint_accepting(const LlmConstraintCursor *cur);
bool		llm_constraint_complete(const LlmConstraintCursor *cur);

/* Set the memory budget of each automaton (default LLM_CONSTRAINT_BUDGET_BYTES). */
void		llm_constraint_cache_set_budget(LlmConstraintCache *cache, size_t bytes);

/* Counters: automaton states interned and masks computed since the cache was made (benchmarks). */
void		llm_constraint_cache_counts(const LlmConstraintCache *cache, int64_t *states, int64_t *masks);

#endif							/* LLM_CONSTRAINT_H */
