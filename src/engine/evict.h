/*
 * evict.h
 *		Eviction of a sequence's cached keys over its KV budget (H2O,
 *		StreamingLLM, a window): the rule, the choice of victims, and the
 *		compaction the backend applies.  The slot layout it works on is
 *		described in kv.h; evict.c has the algorithm.
 */
#ifndef LLM_EVICT_H
#define LLM_EVICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "kv.h"

/* Which keys a sequence keeps when it holds more than budget slots (see llm_kv_evict_select). */
typedef struct LlmEvictRule
{
	int			budget;			/* slots kept per (layer, KV head) */
	int			sinks;			/* positions 0 .. sinks-1 are never dropped */
	int			recent;			/* nor the newest recent positions */
	bool		by_score;		/* drop the lowest score first (H2O), else the oldest */
	bool		mean_score;		/* by_score: the score over the queries that saw the key, not the sum */
} LlmEvictRule;

/*
 * The rule of policy for a budget of budget keys with sinks attention sinks:
 * H2O keeps the sinks, the newest budget / 2 positions and the heavy
 * hitters (H2O_MEAN ranks them by mean instead of summed attention);
 * StreamingLLM the sinks and the newest budget - sinks; a window the newest
 * budget.  budget 0 gives the empty rule (no eviction).
 * LLM_ERR_INVALID when the budget cannot hold what the policy protects.
 */
LlmStatus	llm_evict_rule_make(int budget, int sinks, LlmEvictPolicy policy, LlmEvictRule *r, LlmError *err);

/*
 * Choose the keys one (layer, KV head) drops: of its n slots, whose
 * positions are pos[j * stride] and scores score[j * stride] (NULL: all
 * equal), mark in victim (n) the n - rule->budget that are neither sinks nor
 * among the rule->recent newest positions (newest = the highest position
 * the sequence holds, newest_pos), lowest score first (with mean_score,
 * score / (newest_pos - position + 1), the queries that saw the key), older
 * first among equals.  Returns how many were marked (0 when n <= budget; fewer than
 * n - budget when the rule protects too many), -1 when out of memory.
 */
int			llm_kv_evict_select(const int32_t *pos, const float *score, size_t stride, int n,
								int newest_pos, const LlmEvictRule *rule, bool *victim);

/*
 * Evict seq (holding n_slots slots; its newest position is newest_pos) down
 * to rule->budget slots in every (layer, KV head): choose victims, update
 * slot_pos and score, and write to *moves (*n_moves) the key/value moves
 * that compact the kept keys into the first budget slots.  The caller
 * applies the moves to the stored keys and values (the backend's kv_move),
 * then calls llm_kv_seq_shrink.  moves must hold n_layers * n_kv_heads *
 * (n_slots - budget) entries.  Nothing changes on an error: LLM_ERR_INVALID
 * when the pool keeps no slot positions, or no scores and the rule ranks by
 * them, or when the rule protects more keys than the budget; LLM_ERR_NOMEM
 * when out of memory.
 */
LlmStatus	llm_kv_seq_evict(LlmKvCache *kv, LlmKvSeq *seq, int n_slots, int newest_pos,
							 const LlmEvictRule *rule, LlmKvMove *moves, int *n_moves, LlmError *err);

/*
 * The whole eviction of seq (holding n_slots slots, newest position
 * newest_pos) down to rule->budget: llm_kv_seq_evict, the moves applied by
 * be's kv_move, llm_kv_seq_shrink.  moves and errors as for
 * llm_kv_seq_evict.
 */
LlmStatus	llm_kv_evict_apply(LlmBackend *be, LlmKvCache *kv, LlmKvSeq *seq, int n_slots, int newest_pos,
							   const LlmEvictRule *rule, LlmKvMove *moves, LlmError *err);

#endif							/* LLM_EVICT_H */
