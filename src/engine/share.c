/*
 * share.c
 *		Virtual times of the groups that share the engine's prompt budget
 *		(the policy is at the top of share.h).
 */
#include "share.h"

#include <stdlib.h>

/* Start a step: every group is absent until llm_shares_enter() says otherwise. */
void
llm_shares_begin(LlmShares *s)
{
	for (int i = 0; i < s->n; i++)
		s->groups[i].present = false;
}

/* The index of group id, marked present; a new one enters at the least virtual time of the others. */
int
llm_shares_enter(LlmShares *s, uint32_t id)
{
	double		least = 0;

	for (int i = 0; i < s->n; i++)
		if (s->groups[i].id == id)
		{
			s->groups[i].present = true;
			return i;
		}
	for (int i = 0; i < s->n; i++)
		if (i == 0 || s->groups[i].vtime < least)
			least = s->groups[i].vtime;
	if (s->n == s->cap)
	{
		int			cap = s->cap > 0 ? 2 * s->cap : 8;
		LlmShareGroup *grown = realloc(s->groups, (size_t) cap * sizeof(LlmShareGroup));

		if (grown == NULL)
			return -1;
		s->groups = grown;
		s->cap = cap;
	}
	s->groups[s->n] = (LlmShareGroup) {.id = id,.vtime = least,.present = true};
	return s->n++;
}

/* Charge group index for tokens prompt tokens at weight (<= 0: 1). */
void
llm_shares_charge(LlmShares *s, int index, float weight, int tokens)
{
	s->groups[index].vtime += tokens / (double) (weight > 0 ? weight : 1);
}

/* End a step: forget the groups that had no prompt to feed. */
void
llm_shares_end(LlmShares *s)
{
	int			kept = 0;

	for (int i = 0; i < s->n; i++)
		if (s->groups[i].present)
			s->groups[kept++] = s->groups[i];
	s->n = kept;
}

/* Free the groups. */
void
llm_shares_free(LlmShares *s)
{
	free(s->groups);
	s->groups = NULL;
	s->n = s->cap = 0;
}
