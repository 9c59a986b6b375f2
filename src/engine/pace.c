/*
 * pace.c
 *		Step pacing: a cost per token and the measured rate (see pace.h).
 */
#include "pace.h"

#include <time.h>

/* Seconds on the monotonic clock. */
double
llm_pace_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Set p up for model m and a target of step_ms milliseconds a step. */
void
llm_pace_init(LlmPace *p, const LlmModel *m, int step_ms)
{
	const LlmConfig *c = &m->config;
	double		q_dim = (double) c->n_heads * c->head_dim;
	double		kv_dim = (double) c->n_kv_heads * c->head_dim;

	/* wq, wk, wv, wo; gate, up, down */
	p->dense = c->n_layers * (c->dim * (2.0 * q_dim + 2.0 * kv_dim) + 3.0 * c->dim * (double) c->ffn_dim);
	p->per_key = 2.0 * q_dim;	/* q . k and p v over every query head */
	p->n_local = 0;
	for (int l = 0; l < c->n_layers; l++)
		p->n_local += m->weights.layers[l].is_local;
	p->n_global = c->n_layers - p->n_local;
	p->window = c->sliding_window;
	p->target_s = step_ms > 0 ? step_ms / 1000.0 : 0.0;
	p->step_target_s = p->target_s;
	p->rate = 0.0;
	p->step_cost = 0.0;
	p->prompt_cost = 0.0;
	p->t0 = 0.0;
}

/* The cost of one token at position pos. */
static double
token_cost(const LlmPace *p, int pos)
{
	double		keys = pos + 1.0;
	double		local = p->window > 0 && keys > p->window ? p->window : keys;

	return p->dense + p->per_key * (p->n_global * keys + p->n_local * local);
}

/* Start building a step (alone: a longer target, pace.h). */
void
llm_pace_begin(LlmPace *p, bool alone)
{
	p->step_target_s = alone && p->target_s > 0.0 && p->target_s < LLM_PACE_ALONE_S ? LLM_PACE_ALONE_S : p->target_s;
	p->step_cost = 0.0;
	p->prompt_cost = 0.0;
	p->t0 = llm_pace_now();
}

/* Count n tokens at positions pos .. pos + n - 1 in the step. */
void
llm_pace_add(LlmPace *p, int pos, int n, bool prompt)
{
	double		cost = 0.0;

	for (int j = 0; j < n; j++)
		cost += token_cost(p, pos + j);
	p->step_cost += cost;
	if (prompt)
		p->prompt_cost += cost;
}

/* How many of a prompt's next want tokens the step can still take. */
int
llm_pace_chunk(const LlmPace *p, int pos, int want, bool first)
{
	double		budget;
	double		cost = p->prompt_cost;
	int			n = 0;
	int			min_take = first ? (want < LLM_PACE_MIN_CHUNK ? want : LLM_PACE_MIN_CHUNK) : 0;

	if (p->step_target_s <= 0.0 || p->rate <= 0.0)
		return want;
	budget = p->rate * p->step_target_s;
	while (n < want)
	{
		double		c = token_cost(p, pos + n);

		if (n >= min_take && cost + c > budget)
			break;
		cost += c;
		n++;
	}
	return n;
}

/* The step ran: update the measured rate (a moving average over steps). */
void
llm_pace_end(LlmPace *p)
{
	double		dt = llm_pace_now() - p->t0;
	double		r;

	if (p->step_cost <= 0.0 || dt <= 0.0)
		return;
	r = p->step_cost / dt;
	p->rate = p->rate > 0.0 ? 0.7 * p->rate + 0.3 * r : r;
}
