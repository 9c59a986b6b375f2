/*
 * draft_model.h
 *		A small model drafting for a larger one (speculative decoding with a
 *		draft model, config.speculative = LLM_SPEC_DRAFT): it reads each
 *		drafting sequence's tokens into KV of its own and proposes the next
 *		ones greedily, several sequences a pass.  The engine verifies the
 *		drafts as it verifies any (engine.c), so the draft model changes no
 *		answer: it only decides how many tokens a step may keep.
 *
 * The draft model must have the target's vocabulary, token for token.  It
 * runs on a backend of its own on the same device (on the CPU, over the
 * target backend's threads), over a paged KV pool of its own.
 */
#ifndef LLM_DRAFT_MODEL_H
#define LLM_DRAFT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "engine.h"
#include "kv.h"
#include "model.h"

typedef struct LlmDraftModel LlmDraftModel;

/* A sequence's state in the draft model: its keys and values, of its first n_past tokens. */
typedef struct LlmDraftSeq
{
	LlmKvSeq	kv;
	int			n_past;
} LlmDraftSeq;

/*
 * One sequence's request to draft: tokens (n of them; the last is not yet
 * fed to the draft model) and up to max_draft tokens to propose into out,
 * each while the draft model's chance that the run so far is right (the
 * product of its proposals' probabilities) stays above min_chance.
 */
typedef struct LlmDraftJob
{
	LlmDraftSeq *seq;
	const int32_t *tokens;
	int			n;
	int			max_draft;
	int32_t    *out;
	double		min_chance;		/* 0: propose max_draft */
	int			n_out;			/* set: tokens proposed */
	double		chance;			/* set: the chance of the whole run */
	double		expected;		/* set: tokens of it expected to be accepted (the sum of its prefixes' chances) */
} LlmDraftJob;

/*
 * A drafter for target on draft (which the caller keeps loaded), for up to
 * cfg->max_seqs sequences of cfg's context, on a backend of its own beside
 * the target's (beside, which must outlive it): on the CPU, computing on
 * beside's threads; on a GPU, a backend made with bo (the engine's
 * options).  LLM_ERR_INVALID naming the difference when the vocabularies
 * differ.
 */
LlmStatus	llm_draft_model_new(const LlmModel *target, const LlmModel *draft, const LlmEngineConfig *cfg,
								const LlmBackendOptions *bo, LlmBackend *beside, LlmDraftModel **out, LlmError *err);
void		llm_draft_model_free(LlmDraftModel *d);

/*
 * Propose for n jobs at once: each sequence's unfed tokens are read (its KV
 * reserved first: a job whose KV the pool cannot hold proposes nothing),
 * then up to max_draft tokens are chosen greedily, a pass each, the longest
 * job setting the number of passes; a job stops at the first proposal that
 * would bring its chance below min_chance.  *t: the passes of one token a
 * job it ran and their time, and apart from them, the tokens of passes
 * that caught up on more (a prompt) and theirs.
 */
typedef struct LlmDraftTiming
{
	int			passes;
	double		seconds;
	int			read_tokens;
	double		read_seconds;
} LlmDraftTiming;

LlmStatus	llm_draft_model_propose(LlmDraftModel *d, LlmDraftJob *jobs, int n, LlmDraftTiming *t, LlmError *err);

/* After verification: keep the keys of the first n_kept tokens (those the sequence now holds). */
void		llm_draft_seq_keep(LlmDraftModel *d, LlmDraftSeq *s, int n_kept);

/* Give back all of s's keys (the sequence finished or was preempted). */
void		llm_draft_seq_release(LlmDraftModel *d, LlmDraftSeq *s);

#endif							/* LLM_DRAFT_MODEL_H */
