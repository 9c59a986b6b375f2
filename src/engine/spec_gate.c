/*
 * spec_gate.c
 *		The cost model of a step's drafts (spec_gate.h).
 */
#include "spec_gate.h"

#define PRIOR_WEIGHT 2.0		/* verifications the engine's rate counts for in a sequence's */
#define COST_DECAY 0.9			/* weight of older measurements in the costs' moving averages */

/* Start a step of n_decoding decoding tokens on a backend whose knee is knee tokens. */
void
llm_spec_gate_begin(LlmSpecGate *g, int n_decoding, double knee)
{
	g->yield = n_decoding;
	g->cost = knee + n_decoding;
}

/* How many of up to k drafted tokens at chance rate each (after the previous) are worth feeding. */
int
llm_spec_gate_worth(const LlmSpecGate *g, double rate, int k)
{
	double		yield = g->yield;
	double		cost = g->cost;
	double		p = 1.0;
	int			n = 0;

	while (n < k)
	{
		p *= rate;
		if (p <= yield / cost)
			break;
		yield += p;
		cost += 1.0;
		n++;
	}
	return n;
}

/* The bar a step's next drafted token must clear: its chance of acceptance must exceed this. */
double
llm_spec_gate_bar(const LlmSpecGate *g)
{
	return g->yield / g->cost;
}

/* Count n drafted tokens of which expected are expected to be accepted into the step. */
void
llm_spec_gate_add(LlmSpecGate *g, int n, double expected)
{
	g->yield += expected;
	g->cost += n;
}

/* Count n_certain forced tokens and then n drafted ones at chance rate each into the step. */
void
llm_spec_gate_take(LlmSpecGate *g, int n_certain, double rate, int n)
{
	double		p = 1.0;
	double		expected = n_certain;

	for (int i = 0; i < n; i++)
	{
		p *= rate;
		expected += p;
	}
	llm_spec_gate_add(g, n_certain + n, expected);
}

/* The chance that a drafted token of seq is accepted after its predecessors were, given all's rate. */
double
llm_spec_rate(const LlmSpecRate *seq, const LlmSpecRate *all)
{
	/* the engine's, as if it had seen two hits and one miss */
	double		prior = (all->hits + 2.0) / (all->hits + all->misses + 3.0);

	return (seq->hits + PRIOR_WEIGHT * prior) / (seq->hits + seq->misses + PRIOR_WEIGHT);
}

/* Note a verification of drafted (not forced) tokens of which accepted were, decaying older ones by decay. */
void
llm_spec_rate_note(LlmSpecRate *r, int drafted, int accepted, float decay)
{
	if (drafted <= 0)
		return;
	r->hits = r->hits * decay + (float) accepted;
	r->misses = r->misses * decay + (accepted < drafted ? 1.0f : 0.0f);
}

/* Decay r's verifications by decay without a new one: a sequence that drafts nothing drifts back to the prior. */
void
llm_spec_rate_forget(LlmSpecRate *r, float decay)
{
	r->hits *= decay;
	r->misses *= decay;
}

/* A moving average's next value: x where it had none yet. */
static double
moving(double avg, double x)
{
	return avg > 0 ? COST_DECAY * avg + (1 - COST_DECAY) * x : x;
}

/* Note a decode step of n_fed tokens that took seconds, on a backend whose knee is knee tokens. */
void
llm_spec_costs_step(LlmSpecCosts *c, double seconds, int n_fed, double knee)
{
	if (seconds > 0 && n_fed > 0)
		c->unit_s = moving(c->unit_s, seconds / (knee + n_fed));
}

/* Note passes draft-model passes that took seconds in all, and read_tokens caught up on in read_seconds. */
void
llm_spec_costs_passes(LlmSpecCosts *c, double seconds, int passes, double read_seconds, int read_tokens)
{
	if (seconds > 0 && passes > 0)
		c->pass_s = moving(c->pass_s, seconds / passes);
	if (read_seconds > 0 && read_tokens > 0)
		c->read_s = moving(c->read_s, read_seconds / read_tokens);
}

/*
 * The bar a drafted token must clear when it needs a draft-model pass of
 * its own: the token costs its row and the pass, 1 + pass_s / unit_s
 * units, and, where the draft model has unread tokens of the sequence to
 * read first (its prompt, the first time), their reading spread over the
 * steps the sequence may have left; its chance must beat that many times
 * the step's yield per unit.  An unmeasured pass counts as nothing, an
 * unmeasured token read as a unit (as the target would read it): without
 * that, a batch of new sequences would each have its prompt read by the
 * draft model, before any reading was timed, for drafts that a busy step
 * then hardly keeps.
 */
double
llm_spec_gate_bar_drafted(const LlmSpecGate *g, const LlmSpecCosts *c, int unread, int remaining)
{
	double		pass_units = c->unit_s > 0 ? c->pass_s / c->unit_s : 0;
	double		read_unit = c->unit_s > 0 && c->read_s > 0 ? c->read_s / c->unit_s : 1.0;
	double		read_units = unread > 0 ? unread * read_unit / (remaining > 1 ? remaining : 1) : 0;

	return (1 + pass_units + read_units) * llm_spec_gate_bar(g);
}
