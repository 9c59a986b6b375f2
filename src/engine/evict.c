/*
 * evict.c
 *		Which cached keys a sequence over its KV budget drops, and the
 *		compaction that frees their slots (the layout is in kv.h).
 *
 * H2O (Zhang et al., NeurIPS 2023) keeps the "heavy hitters": the keys with
 * the largest attention summed over every query so far (attention adds each
 * softmax probability to the key's score), plus a window of the newest
 * positions (half the budget, as in the paper) and the first few positions,
 * the attention sinks of StreamingLLM (Xiao et al., ICLR 2024).  The sum
 * favours old keys (more queries have seen them); H2O_MEAN ranks by the
 * mean over the queries that saw the key instead.  Decisions
 * are per layer and per KV head; each (layer, head) drops the same number of
 * keys (all hold the same protected positions: every head keeps the sinks,
 * and a position can only leave once it is out of the window), so the slot
 * count and block table stay shared.
 */
#include "evict.h"

#include <stdlib.h>

#include <string.h>

/* The rule of a policy for budget keys with sinks attention sinks (see kv.h); budget 0 = no eviction. */
LlmStatus
llm_evict_rule_make(int budget, int sinks, LlmEvictPolicy policy, LlmEvictRule *r, LlmError *err)
{
	memset(r, 0, sizeof(*r));
	if (budget == 0)
		return LLM_OK;
	r->budget = budget;
	r->sinks = policy == LLM_EVICT_WINDOW ? 0 : sinks;
	r->by_score = policy == LLM_EVICT_H2O || policy == LLM_EVICT_H2O_MEAN;
	r->mean_score = policy == LLM_EVICT_H2O_MEAN;
	r->recent = r->by_score ? budget / 2 : budget - r->sinks;
	if (budget < 0 || sinks < 0 || r->recent < 1 || r->sinks + r->recent > r->budget)
		return llm_error_set(err, LLM_ERR_INVALID,
							 "a KV budget of %d keys cannot hold %d attention sinks and a recent window",
							 budget, sinks);
	return LLM_OK;
}

/* A key that may be dropped. */
typedef struct EvictCandidate
{
	float		score;
	int32_t		pos;
	int32_t		slot;
} EvictCandidate;

/* Order: lower score first, then older position. */
static int
candidate_cmp(const void *pa, const void *pb)
{
	const EvictCandidate *a = pa;
	const EvictCandidate *b = pb;

	if (a->score != b->score)
		return a->score < b->score ? -1 : 1;
	return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Mark the keys of one (layer, KV head) to drop (see kv.h), with cand (n) as scratch; returns how many. */
static int
select_victims(const int32_t *pos, const float *score, size_t stride, int n, int newest_pos,
			   const LlmEvictRule *rule, bool *victim, EvictCandidate *cand)
{
	int			drop = n - rule->budget;
	int			recent_lo = newest_pos - rule->recent + 1;
	int			n_cand = 0;

	memset(victim, 0, (size_t) n * sizeof(bool));
	if (drop <= 0)
		return 0;
	for (int j = 0; j < n; j++)
	{
		int32_t		p = pos[(size_t) j * stride];

		if (p < rule->sinks || p >= recent_lo)
			continue;
		cand[n_cand].score = rule->by_score && score != NULL ? score[(size_t) j * stride] : 0.0f;
		if (rule->mean_score)
			cand[n_cand].score /= (float) (newest_pos - p + 1);
		cand[n_cand].pos = p;
		cand[n_cand].slot = j;
		n_cand++;
	}
	if (drop > n_cand)
		drop = n_cand;
	if (drop == 1)
	{
		/* a decode step drops one key: the least candidate, no sort */
		int			least = 0;

		for (int i = 1; i < n_cand; i++)
			if (candidate_cmp(&cand[i], &cand[least]) < 0)
				least = i;
		victim[cand[least].slot] = true;
		return 1;
	}
	qsort(cand, (size_t) n_cand, sizeof(EvictCandidate), candidate_cmp);
	for (int i = 0; i < drop; i++)
		victim[cand[i].slot] = true;
	return drop;
}

/* Mark the keys of one (layer, KV head) to drop (see evict.h); -1 when out of memory. */
int
llm_kv_evict_select(const int32_t *pos, const float *score, size_t stride, int n,
					int newest_pos, const LlmEvictRule *rule, bool *victim)
{
	EvictCandidate *cand = malloc((size_t) (n > 0 ? n : 1) * sizeof(EvictCandidate));
	int			drop;

	if (cand == NULL)
		return -1;
	drop = select_victims(pos, score, stride, n, newest_pos, rule, victim, cand);
	free(cand);
	return drop;
}

/* Evict seq down to rule->budget slots per (layer, KV head) and list the moves that compact it. */
LlmStatus
llm_kv_seq_evict(LlmKvCache *kv, LlmKvSeq *seq, int n_slots, int newest_pos,
				 const LlmEvictRule *rule, LlmKvMove *moves, int *n_moves, LlmError *err)
{
	size_t		stride = (size_t) kv->n_layers * kv->n_kv_heads;
	int			drop = n_slots - rule->budget;
	bool	   *victim;
	EvictCandidate *cand;

	*n_moves = 0;
	if (drop <= 0)
		return LLM_OK;
	/* with at most budget keys protected every (layer, head) has drop candidates: nothing fails midway */
	if (!kv->slot_info)
		return llm_error_set(err, LLM_ERR_INVALID, "the KV pool keeps no slot positions, which eviction needs");
	if (rule->by_score && !kv->scores)
		return llm_error_set(err, LLM_ERR_INVALID, "the KV pool keeps no attention scores, which H2O eviction needs");
	if (rule->sinks + rule->recent > rule->budget)
		return llm_error_set(err, LLM_ERR_INVALID, "the eviction rule protects %d keys, more than its budget of %d",
							 rule->sinks + rule->recent, rule->budget);
	victim = malloc((size_t) n_slots * sizeof(bool));
	cand = malloc((size_t) n_slots * sizeof(EvictCandidate));
	if (victim == NULL || cand == NULL)
	{
		free(victim);
		free(cand);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory evicting KV entries down to %d", rule->budget);
	}
	for (int l = 0; l < kv->n_layers; l++)
		for (int h = 0; h < kv->n_kv_heads; h++)
		{
			size_t		base = llm_kv_info_index(kv, 0, l, h);
			int			hole = 0;

			select_victims(seq->slot_pos + base, seq->score ? seq->score + base : NULL, stride, n_slots,
						   newest_pos, rule, victim, cand);
			/* kept keys past the new end fill the dropped slots before it, in order */
			for (int from = rule->budget; from < n_slots; from++)
			{
				size_t		src;
				size_t		dst;

				if (victim[from])
					continue;
				while (!victim[hole])
					hole++;
				src = base + (size_t) from * stride;
				dst = base + (size_t) hole * stride;
				seq->slot_pos[dst] = seq->slot_pos[src];
				if (seq->score != NULL)
					seq->score[dst] = seq->score[src];
				moves[(*n_moves)++] = (LlmKvMove) {l, h, from, hole};
				hole++;
			}
		}
	free(victim);
	free(cand);
	seq->n_evicted += drop;
	kv->evicted_keys += (int64_t) drop * kv->n_layers * kv->n_kv_heads;
	return LLM_OK;
}

/* Evict seq down to the rule's budget, apply the moves with be's kv_move and give back the freed blocks. */
LlmStatus
llm_kv_evict_apply(LlmBackend *be, LlmKvCache *kv, LlmKvSeq *seq, int n_slots, int newest_pos,
				   const LlmEvictRule *rule, LlmKvMove *moves, LlmError *err)
{
	int			n_moves;
	LlmStatus	st;

	if (n_slots <= rule->budget)
		return LLM_OK;
	if ((st = llm_kv_seq_evict(kv, seq, n_slots, newest_pos, rule, moves, &n_moves, err)) != LLM_OK)
		return st;
	be->ops->kv_move(be, kv, seq, moves, n_moves);
	llm_kv_seq_shrink(kv, seq, rule->budget);
	return LLM_OK;
}
