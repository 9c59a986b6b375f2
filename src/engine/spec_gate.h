/*
 * spec_gate.h
 *		Which drafted tokens a step feeds: a cost model of speculative
 *		decoding, so that drafting never makes batched decoding slower.
 *
 * A decode step costs about t0 + c * n for n fed tokens: t0 reads the
 * weights once, c is one token's compute.  Their ratio, the knee
 * (t0 / c, in tokens), is where compute starts to cost as much as the
 * reads; this Xeon measured about 5 for SmolLM2-135M and 8 for Gemma 3
 * 270M (bench/results/spec_knee.md).  In units of c, a step of n
 * decoding tokens and d drafts costs knee + n + d and yields n plus the
 * drafts that will be accepted.  A draft is worth feeding only if its
 * chance of acceptance p beats what the step yields per unit now:
 * p > yield / cost.  Adding it raises that ratio, so later drafts must do
 * better: a lone sequence drafts far, 64 decoding ones almost never.
 *
 * A drafted token's chance is rate^i for the i-th of a draft, where rate
 * is the chance that a draft token is accepted after its predecessors
 * were: the hits (accepted drafts) over hits and misses (verifications
 * that rejected one) of the sequence, decayed so recent rounds count
 * most, and drawn toward the engine's rate over all sequences (itself
 * drawn toward 2/3 while it has seen little).  A sequence's steps without
 * a draft decay its verifications too, so one that stopped drafting after
 * misses tries again later.  Tokens a grammar forces are certain (p = 1).
 *
 * None of this changes an answer: drafts are only verified, so it moves
 * speed alone.
 */
#ifndef LLM_SPEC_GATE_H
#define LLM_SPEC_GATE_H

/*
 * Default knees: the CPU's measured (above); a GPU's is far higher, since
 * it has thousands of lanes to fill (not measured yet: no device was lent).
 */
#define LLM_SPEC_KNEE_CPU 4.0
#define LLM_SPEC_KNEE_GPU 64.0

/* Recent verifications of a sequence's drafts (or of all sequences'), decayed. */
typedef struct LlmSpecRate
{
	float		hits;			/* drafted tokens accepted (forced ones not counted) */
	float		misses;			/* verifications that rejected a drafted token */
} LlmSpecRate;

/* A step's drafts so far, in units of one token's compute. */
typedef struct LlmSpecGate
{
	double		yield;			/* tokens the step is expected to produce */
	double		cost;			/* what it costs: knee + tokens fed */
} LlmSpecGate;

/*
 * What a draft model's passes cost beside the target's steps, measured:
 * a pass is worth its price only where its drafts would be accepted often
 * enough, so a draft model as slow as its target (both small, both in
 * cache) drafts little, and one far faster drafts far.
 */
typedef struct LlmSpecCosts
{
	double		unit_s;			/* seconds of one unit (one token's compute) in the target's decode steps */
	double		pass_s;			/* seconds of one draft-model pass */
	double		read_s;			/* seconds per token the draft model reads to catch up on a sequence */
} LlmSpecCosts;

/* Note a decode step of n_fed tokens that took seconds, on a backend whose knee is knee tokens. */
void		llm_spec_costs_step(LlmSpecCosts *c, double seconds, int n_fed, double knee);

/* Note passes draft-model passes that took seconds in all, and read_tokens caught up on in read_seconds. */
void		llm_spec_costs_passes(LlmSpecCosts *c, double seconds, int passes, double read_seconds, int read_tokens);

/*
 * The bar a drafted token must clear when it needs a draft-model pass of
 * its own, for a sequence whose last unread tokens the draft model must
 * read first and which may decode remaining more: its chance must exceed
 * this.
 */
double		llm_spec_gate_bar_drafted(const LlmSpecGate *g, const LlmSpecCosts *c, int unread, int remaining);

/* Start a step of n_decoding decoding tokens on a backend whose knee is knee tokens. */
void		llm_spec_gate_begin(LlmSpecGate *g, int n_decoding, double knee);

/* How many of up to k drafted tokens at chance rate each (after the previous) are worth feeding. */
int			llm_spec_gate_worth(const LlmSpecGate *g, double rate, int k);

/* The bar a step's next drafted token must clear: its chance of acceptance must exceed this. */
double		llm_spec_gate_bar(const LlmSpecGate *g);

/* Count n drafted tokens of which expected are expected to be accepted into the step. */
void		llm_spec_gate_add(LlmSpecGate *g, int n, double expected);

/* Count n_certain forced tokens and then n drafted ones at chance rate each into the step. */
void		llm_spec_gate_take(LlmSpecGate *g, int n_certain, double rate, int n);

/* The chance that a drafted token of seq is accepted after its predecessors were, given all's rate. */
double		llm_spec_rate(const LlmSpecRate *seq, const LlmSpecRate *all);

/* Note a verification of drafted (not forced) tokens of which accepted were, decaying older ones by decay. */
void		llm_spec_rate_note(LlmSpecRate *r, int drafted, int accepted, float decay);

/* Decay r's verifications by decay without a new one: a sequence that drafts nothing drifts back to the prior. */
void		llm_spec_rate_forget(LlmSpecRate *r, float decay);

#endif							/* LLM_SPEC_GATE_H */
