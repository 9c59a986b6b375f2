/*
 * pace.h
 *		Step pacing: the scheduler sizes prompt chunks so that one engine step
 *		takes about a target time, whatever the prompts' lengths.
 *
 * A step is where the engine can be interrupted: a cancel, a new request
 * or a statement_timeout takes effect between steps, and every decoding
 * sequence waits for the whole step.  max_batch_tokens alone does not bound
 * a step's time, because attention costs grow with the context: 512 tokens
 * of a 20,000-token prompt cost many times 512 tokens of a short one.  So
 * each token is given a cost -- its multiply-adds through the layers plus
 * one unit per key it attends to in each layer (all of them on global
 * layers, at most the window on sliding-window ones) -- and the cost the
 * recent steps ran per second is measured.  A step then takes prompt tokens
 * only while their cost stays within rate * target (at least a minimum
 * chunk of the first prompt), on top of one token of every decoding
 * sequence.  So a step takes at most the decode step plus the target,
 * however long the prompts; decode is never split, since one step of all
 * decoding sequences is what makes batched decode fast.  A prompt alone
 * (nothing else running or waiting) delays no one, and each chunk reads
 * the weights again: its steps take up to LLM_PACE_ALONE_S, so that a
 * cancel still takes effect about that soon.
 *
 * Chunking never changes an answer (the batch-invariance rule), so pacing
 * by measured time keeps every result exact.
 */
#ifndef LLM_PACE_H
#define LLM_PACE_H

#include <stdbool.h>

#include "model.h"

#define LLM_PACE_MIN_CHUNK 32	/* prompt tokens a step always takes, when a prompt waits */
#define LLM_PACE_ALONE_S 0.25	/* a step's target while one sequence runs and none waits (a cancel's delay) */

typedef struct LlmPace
{
	double		dense;			/* cost of one token through every layer's matmuls (multiply-adds) */
	double		per_key;		/* cost of one attended key in one layer (multiply-adds) */
	int			n_global;		/* layers that attend to every key */
	int			n_local;		/* sliding-window layers */
	int			window;			/* their window (positions) */
	double		target_s;		/* seconds a step should take; 0: no pacing */
	double		step_target_s;	/* the step being built's: target_s, or longer when its sequence is alone */
	double		rate;			/* cost per second of recent steps; 0: not measured yet */
	double		step_cost;		/* cost of the step being built */
	double		prompt_cost;	/* of which its prompt tokens */
	double		t0;				/* when that step began (seconds, monotonic) */
} LlmPace;

/* Seconds on the monotonic clock. */
double		llm_pace_now(void);

/* Set p up for model m and a target of step_ms milliseconds a step (0: no pacing). */
void		llm_pace_init(LlmPace *p, const LlmModel *m, int step_ms);

/*
 * Start building a step; alone: one sequence runs and none waits, so no
 * one waits on its steps but a cancel: the target grows to LLM_PACE_ALONE_S.
 */
void		llm_pace_begin(LlmPace *p, bool alone);

/* Count n tokens at positions pos .. pos + n - 1 in the step (prompt tokens when prompt). */
void		llm_pace_add(LlmPace *p, int pos, int n, bool prompt);

/*
 * How many of a prompt's next want tokens (from position pos) the step can
 * still take: all of them without pacing or a measured rate, else those
 * within the step's prompt budget, but at least min(want, LLM_PACE_MIN_CHUNK) when
 * first is set.
 */
int			llm_pace_chunk(const LlmPace *p, int pos, int want, bool first);

/* The step ran: update the measured rate. */
void		llm_pace_end(LlmPace *p);

#endif							/* LLM_PACE_H */
