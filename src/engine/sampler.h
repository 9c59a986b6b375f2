/*
 * sampler.h
 *		Choosing the next token from logits.
 *
 * Order of operations, as in llama.cpp's default chain: repetition penalty on
 * the logits of recent tokens, then (unless greedy) temperature, top-k,
 * softmax, top-p, min-p, and a draw from the renormalised distribution with
 * the sampler's own seeded RNG.  temperature == 0 means greedy (argmax, the
 * lowest id on ties).
 */
#ifndef LLM_SAMPLER_H
#define LLM_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

typedef struct LlmSamplerParams
{
	float		temperature;	/* 0 = greedy */
	int			top_k;			/* 0 = off */
	float		top_p;			/* 1 = off; in (0, 1] */
	float		min_p;			/* 0 = off; in [0, 1] */
	float		repeat_penalty; /* 1 = off; > 0 */
	int			repeat_last_n;	/* tokens looked back for the penalty */
	uint64_t	seed;
} LlmSamplerParams;

/* Defaults: greedy, filters off, seed 0. */
void		llm_sampler_params_default(LlmSamplerParams *p);

/* Check parameter ranges; LLM_ERR_INVALID with a message naming the parameter. */
LlmStatus	llm_sampler_params_check(const LlmSamplerParams *p, LlmError *err);

/* A token with its logit and, after softmax, its probability. */
typedef struct LlmCandidate
{
	int32_t		id;
	float		logit;
	float		p;
} LlmCandidate;

/* A working list of candidates; sorted says whether it is by descending logit. */
typedef struct LlmCandidates
{
	LlmCandidate *data;
	int			n;
	bool		sorted;
} LlmCandidates;

/* The filters, usable alone (tests check each keeps exactly the right tokens). */
void		llm_cand_softmax(LlmCandidates *c);		/* sorts, fills p */
void		llm_cand_top_k(LlmCandidates *c, int k);	/* keeps the k highest (ties by id) */
void		llm_cand_top_p(LlmCandidates *c, float p);	/* smallest prefix with mass >= p (at least 1) */
void		llm_cand_min_p(LlmCandidates *c, float min_p);	/* keeps p >= min_p * max p */

/* Seeded pseudo-random numbers (xoshiro256** seeded by splitmix64). */
typedef struct LlmRng
{
	uint64_t	s[4];
} LlmRng;

void		llm_rng_seed(LlmRng *r, uint64_t seed);
uint64_t	llm_rng_next(LlmRng *r);
double		llm_rng_uniform(LlmRng *r);	/* in [0, 1) */

typedef struct LlmSampler
{
	LlmSamplerParams params;
	LlmRng		rng;
	int			n_vocab;
	LlmCandidate *buf;			/* (n_vocab) scratch */
} LlmSampler;

/* Prepare a sampler for a vocabulary of n_vocab tokens. */
LlmStatus	llm_sampler_init(LlmSampler *s, const LlmSamplerParams *p, int n_vocab, LlmError *err);
void		llm_sampler_free(LlmSampler *s);

/*
 * Choose the next token from logits (n_vocab, modified in place by the
 * penalty), given the sequence's tokens so far (prompt and generated).
 */
int32_t		llm_sampler_sample(LlmSampler *s, float *logits,
							   const int32_t *history, int n_history);

/*
 * log softmax(logits)[t] over n_vocab logits: the maximum, then the sum of
 * exp(l - max) by cpu/exp_sum.h's function for the process's SIMD level,
 * in a fixed order, so the same logits give the same bits.  NaN logits
 * count as -infinity.
 */
float		llm_logprob(const float *logits, int n_vocab, int32_t t);

#endif							/* LLM_SAMPLER_H */
