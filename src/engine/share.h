/*
 * share.h
 *		Weighted fair shares of the engine among groups of sequences (the
 *		PostgreSQL side's roles).
 *
 * Policy.  Decoding is never rationed: every running sequence feeds its one
 * token each step.  What groups compete for is the step's prompt budget
 * (pace.h) and the KV pool:
 *   - prompt chunks go to groups in order of virtual time, the prompt
 *     tokens a group was fed divided by its weight (least first; within a
 *     group, and between groups at the same time, oldest sequence first),
 *     so a newcomer's prompt starts within a step or two of its admission
 *     however many long prompts another group has running;
 *   - a group enters at the least virtual time of those present, so time
 *     spent idle earns no credit, and leaves when it has no prompt to feed;
 *   - when the KV pool runs dry, the sequence given back is the newest of
 *     the group holding the most blocks per weight (engine.c), never an
 *     older one of the same group than the sequence that needs room.
 * The PostgreSQL side admits sequences into the engine by the same weights
 * (src/fair.c).  The order of work changes no answer: a row's bits do not
 * depend on its batch or its chunking.
 */
#ifndef LLM_SHARE_H
#define LLM_SHARE_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

/* A group with a prompt to feed: its virtual time in prompt tokens per unit of weight. */
typedef struct LlmShareGroup
{
	uint32_t	id;
	double		vtime;
	bool		present;		/* has a prompt to feed this step */
} LlmShareGroup;

/* The groups of one engine. */
typedef struct LlmShares
{
	LlmShareGroup *groups;		/* (n) */
	int			n;
	int			cap;
} LlmShares;

/* Start a step: every group is absent until llm_shares_enter() says otherwise. */
void		llm_shares_begin(LlmShares *s);

/*
 * The index of group id among s's groups, marked present; a new group
 * enters at the least virtual time of the others (0 when none).  -1 when
 * out of memory.
 */
int			llm_shares_enter(LlmShares *s, uint32_t id);

/* Charge group index for tokens prompt tokens at weight (<= 0: 1). */
void		llm_shares_charge(LlmShares *s, int index, float weight, int tokens);

/* End a step: forget the groups that had no prompt to feed. */
void		llm_shares_end(LlmShares *s);

/* Free the groups. */
void		llm_shares_free(LlmShares *s);

#endif							/* LLM_SHARE_H */
