/*
 * grammar.h
 *		Context-free grammars over bytes, and a recognizer that follows one
 *		byte at a time: what constrained decoding (constraint.h) checks each
 *		candidate token against.
 *
 * A grammar is a set of rules; a rule is a list of alternatives; an
 * alternative is a sequence of elements, each one byte out of a set, a
 * reference to a rule, or an any-order group.  The JSON Schema compiler
 * (json_schema.h) and the choices of llm_generate build them with
 * LlmGrammarBuilder.
 *
 * An any-order group is a list of member rules, written each at most once,
 * in any order, with a separator rule between two of them, and with every
 * required member written before the group may end: the members of a JSON
 * object.  A context-free grammar can say this only with a rule per subset
 * of the members (2^n of them), so the recognizer keeps the set itself: a
 * group on a stack is a frame of one bit per member, set once it is
 * written, under a header word naming the group.
 *
 * The recognizer's state is a set of stacks (as in Earley-style or GLR
 * recognizers, and llama.cpp's GBNF sampler).  A stack lists positions in
 * alternatives, innermost last; its top always names a byte set, or the
 * stack is empty, which means the input so far is a whole sentence.
 * Advancing over a byte keeps the stacks whose top set holds the byte,
 * moves each past it and expands rule references until a byte set is on
 * top again.  A reference that ends its alternative replaces its caller
 * instead of stacking on it, so right recursion (repetition) runs in
 * constant depth.  Left recursion is not allowed (the builder's users
 * never write it; the recognizer fails rather than loop).  A group's frame
 * on top expands to one stack per member not yet written (its bit set, the
 * member's rule on top), the separator first when a member was written,
 * and, when every required member is written, the caller going on after
 * the group.  So the stacks that choose a member are as many as the
 * members left, which LLM_GRAMMAR_MAX_MEMBERS bounds well below
 * LLM_GRAMMAR_MAX_STACKS.
 */
#ifndef LLM_GRAMMAR_H
#define LLM_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Bounds of a recognizer state: stacks per state, positions per stack. */
#define LLM_GRAMMAR_MAX_STACKS	256
#define LLM_GRAMMAR_MAX_DEPTH	256
/* Elements a grammar may hold in all (the compiler refuses bigger schemas). */
#define LLM_GRAMMAR_MAX_ELEMS	(1 << 22)
/* Members an any-order group may have (a frame holds one bit per member: at most 4 words and its header). */
#define LLM_GRAMMAR_MAX_MEMBERS 128

typedef struct LlmGrammar LlmGrammar;
typedef struct LlmGrammarBuilder LlmGrammarBuilder;

/* A set of bytes, one bit each. */
typedef struct LlmByteSet
{
	uint64_t	bits[4];
} LlmByteSet;

/* The set of bytes lo..hi (inclusive). */
LlmByteSet	llm_byteset_range(uint8_t lo, uint8_t hi);
/* Add lo..hi to s. */
void		llm_byteset_add(LlmByteSet *s, uint8_t lo, uint8_t hi);

/*
 * A recognizer state: n_stacks stacks back to back in data, each written as
 * its depth and then its words, outermost first: positions in alternatives
 * and the frames of groups (grammar.c).  Compare states with
 * llm_grammar_state_equal(); the layout is canonical (stacks in the order
 * they arose, no duplicates), so equal data means the same state.
 */
typedef struct LlmGrammarState
{
	uint32_t   *data;
	int			len;			/* words used in data */
	int			cap;
	int			n_stacks;
} LlmGrammarState;

/* A new builder (NULL when out of memory). */
LlmGrammarBuilder *llm_grammar_builder_new(void);
/* Free a builder that will not be finished; NULL is allowed. */
void		llm_grammar_builder_free(LlmGrammarBuilder *b);
/* A new rule with no alternatives yet; returns its number. */
int			llm_grammar_rule(LlmGrammarBuilder *b);
/* A new, empty alternative of rule; returns its number for the appends below. */
int			llm_grammar_alt(LlmGrammarBuilder *b, int rule);
/* Append to alternative alt: one byte out of set. */
void		llm_grammar_add_set(LlmGrammarBuilder *b, int alt, const LlmByteSet *set);
/* Append to alternative alt: the n bytes of s, in order. */
void		llm_grammar_add_literal(LlmGrammarBuilder *b, int alt, const char *s, size_t n);
/* Append to alternative alt: a reference to rule. */
void		llm_grammar_add_rule(LlmGrammarBuilder *b, int alt, int rule);
/*
 * Append to alternative alt: an any-order group of the n rules of members
 * (n at most LLM_GRAMMAR_MAX_MEMBERS), each written at most once and in
 * any order, rule sep between two of them, and those with required[i]
 * all written.
 */
void		llm_grammar_add_any_order(LlmGrammarBuilder *b, int alt, const int *members, const bool *required, int n,
									  int sep);
/* A rule of one alternative holding the n bytes of s. */
int			llm_grammar_literal_rule(LlmGrammarBuilder *b, const char *s, size_t n);
/*
 * A rule whose sentences are exactly the n strings strs[i] (lens[i] bytes
 * each; duplicates and the empty string allowed), built as a trie: a rule
 * per branching point with an alternative per distinct next byte, so a
 * state holds a stack per byte that may come next (at most 256), however
 * many strings there are; an alternative per string would hold one per
 * string that fits the bytes so far, and pass LLM_GRAMMAR_MAX_STACKS.
 */
int			llm_grammar_strings_rule(LlmGrammarBuilder *b, const char *const *strs, const size_t *lens, int n);

/*
 * Freeze the rules into a grammar whose sentences are those of rule root;
 * frees the builder whatever happens.  LLM_ERR_NOMEM or LLM_ERR_LIMIT when
 * building ran out of memory or past LLM_GRAMMAR_MAX_ELEMS or
 * LLM_GRAMMAR_MAX_MEMBERS, LLM_ERR_INVALID for a rule without alternatives
 * or a group naming a rule that does not exist.
 */
LlmStatus	llm_grammar_builder_finish(LlmGrammarBuilder *b, int root, LlmGrammar **out, LlmError *err);

void		llm_grammar_free(LlmGrammar *g);

/* State buffers: init to empty, free. */
void		llm_grammar_state_init(LlmGrammarState *s);
void		llm_grammar_state_free(LlmGrammarState *s);
/* Copy src into dst (false when out of memory). */
bool		llm_grammar_state_copy(LlmGrammarState *dst, const LlmGrammarState *src);
bool		llm_grammar_state_equal(const LlmGrammarState *a, const LlmGrammarState *b);
/* A hash of the state's words. */
uint64_t	llm_grammar_state_hash(const LlmGrammarState *s);

/* The state before any byte (LLM_ERR_NOMEM or LLM_ERR_LIMIT when it cannot be built). */
LlmStatus	llm_grammar_start(const LlmGrammar *g, LlmGrammarState *out, LlmError *err);

/*
 * The state after byte c from state from, into to (which must not be
 * from).  False when the grammar does not allow c there (to is then empty),
 * or when the state would pass the bounds above.
 */
bool		llm_grammar_advance(const LlmGrammar *g, const LlmGrammarState *from, uint8_t c,
								LlmGrammarState *to);

/* Whether the bytes so far form a whole sentence. */
bool		llm_grammar_accepting(const LlmGrammarState *s);
/* Whether they do and no byte may follow. */
bool		llm_grammar_complete(const LlmGrammarState *s);

#endif							/* LLM_GRAMMAR_H */
