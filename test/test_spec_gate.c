/*
 * test_spec_gate.c
 *		The cost model of a step's drafts (spec_gate.h): a lone sequence
 *		drafts far when its drafts are accepted, a full batch drafts only
 *		near-certain tokens, forced tokens raise the bar for the rest, and
 *		the acceptance estimate follows hits and misses.
 */
#include <math.h>

#include "spec_gate.h"
#include "test.h"

/* How many drafts a sequence at rate gets in a step of n decoding tokens, knee 6. */
static int
worth(int n, double rate, int k)
{
	LlmSpecGate g;

	llm_spec_gate_begin(&g, n, 6.0);
	return llm_spec_gate_worth(&g, rate, k);
}

/* The gate: more drafts the fewer decoders and the likelier the drafts. */
static void
test_gate(void)
{
	LlmSpecGate g;
	int			n;

	TEST_CHECK(worth(1, 0.9, 16) >= 6, "a lone sequence at 0.9 drafts far, got %d", worth(1, 0.9, 16));
	TEST_CHECK(worth(1, 0.9, 3) == 3, "no more than asked, got %d", worth(1, 0.9, 3));
	TEST_CHECK(worth(1, 0.5, 16) >= 1 && worth(1, 0.5, 16) < worth(1, 0.9, 16),
			   "a lone sequence at 0.5 drafts less: %d", worth(1, 0.5, 16));
	TEST_CHECK(worth(1, 0.1, 16) == 0, "drafts that are rarely accepted are not worth a row, got %d",
			   worth(1, 0.1, 16));
	TEST_CHECK(worth(16, 0.5, 16) == 0, "16 decoders: a coin flip is not worth a row, got %d", worth(16, 0.5, 16));
	TEST_CHECK(worth(64, 0.9, 16) == 0, "64 decoders: 0.9 is not enough, got %d", worth(64, 0.9, 16));
	TEST_CHECK(worth(64, 0.99, 16) >= 1, "64 decoders: 0.99 is, got %d", worth(64, 0.99, 16));

	/* each draft taken raises the bar for the next sequence's */
	llm_spec_gate_begin(&g, 4, 6.0);
	TEST_CHECK(llm_spec_gate_worth(&g, 0.45, 1) == 1, "4 decoders, knee 6: a draft at 0.45 is worth a row");
	n = llm_spec_gate_worth(&g, 0.8, 16);
	llm_spec_gate_take(&g, 0, 0.8, n);
	TEST_CHECK(n == 3 && llm_spec_gate_worth(&g, 0.45, 1) == 0,
			   "after another's 3 drafts at 0.8 (got %d), it is not", n);

	/* forced tokens are certain: they count at full yield */
	llm_spec_gate_begin(&g, 1, 6.0);
	llm_spec_gate_take(&g, 5, 0.5, 0);
	TEST_CHECK(g.yield == 6.0 && g.cost == 12.0, "5 forced tokens: yield 6, cost 12, got %g, %g", g.yield, g.cost);
}

/* The acceptance estimate: a prior from all sequences, then the sequence's own, recent rounds first. */
static void
test_rate(void)
{
	LlmSpecRate all = {0};
	LlmSpecRate seq = {0};
	double		r;

	TEST_CHECK(fabs(llm_spec_rate(&seq, &all) - 2.0 / 3) < 1e-9, "nothing seen: 2/3, got %g", llm_spec_rate(&seq, &all));
	for (int i = 0; i < 10; i++)
		llm_spec_rate_note(&all, 8, 8, 0.95f);
	r = llm_spec_rate(&seq, &all);
	TEST_CHECK(r > 0.95, "every draft accepted everywhere: a new sequence starts high, got %g", r);
	for (int i = 0; i < 5; i++)
		llm_spec_rate_note(&seq, 4, 0, 0.7f);
	TEST_CHECK(llm_spec_rate(&seq, &all) < 0.45, "its own misses bring it down, got %g", llm_spec_rate(&seq, &all));
	for (int i = 0; i < 8; i++)
		llm_spec_rate_note(&seq, 4, 4, 0.7f);
	TEST_CHECK(llm_spec_rate(&seq, &all) > 0.9, "and recent hits up again, got %g", llm_spec_rate(&seq, &all));
	llm_spec_rate_note(&seq, 0, 0, 0.7f);
	TEST_CHECK(llm_spec_rate(&seq, &all) > 0.9, "a round with nothing drafted changes nothing");
	for (int i = 0; i < 5; i++)
		llm_spec_rate_note(&seq, 4, 0, 0.7f);
	for (int i = 0; i < 50; i++)
		llm_spec_rate_forget(&seq, 0.9f);
	TEST_CHECK(fabs(llm_spec_rate(&seq, &all) - llm_spec_rate(&(LlmSpecRate) {0}, &all)) < 0.02,
			   "50 steps without drafts: back near the prior, got %g", llm_spec_rate(&seq, &all));
	seq = (LlmSpecRate) {0};
	llm_spec_rate_note(&seq, 4, 2, 1.0f);
	TEST_CHECK(seq.hits == 2 && seq.misses == 1, "2 of 4 accepted: 2 hits, 1 miss, got %g, %g", seq.hits, seq.misses);
}

/* The draft model's bar: its pass and the reading of a sequence's unread tokens, measured, raise it. */
static void
test_bar_drafted(void)
{
	LlmSpecGate g;
	LlmSpecCosts c = {0};
	double		bar;

	llm_spec_gate_begin(&g, 4, 4.0);
	bar = llm_spec_gate_bar(&g);
	TEST_CHECK(llm_spec_gate_bar_drafted(&g, &c, 0, 64) == bar, "an unmeasured pass counts as nothing");
	TEST_CHECK(fabs(llm_spec_gate_bar_drafted(&g, &c, 128, 64) - 3 * bar) < 1e-12,
			   "an unmeasured token read counts as a unit: 128 over 64 steps, 2 units, got %g",
			   llm_spec_gate_bar_drafted(&g, &c, 128, 64));
	llm_spec_costs_step(&c, 0.008, 4, 4.0);	/* 1 ms a unit */
	llm_spec_costs_passes(&c, 0.0005, 1, 0.1, 100);	/* a pass 0.5 ms, a token read 1 ms */
	TEST_CHECK(fabs(c.unit_s - 0.001) < 1e-12 && fabs(c.pass_s - 0.0005) < 1e-12 && fabs(c.read_s - 0.001) < 1e-12,
			   "measured: unit %g s, pass %g s, read %g s a token", c.unit_s, c.pass_s, c.read_s);
	TEST_CHECK(fabs(llm_spec_gate_bar_drafted(&g, &c, 0, 64) - 1.5 * bar) < 1e-12,
			   "a pass of half a unit: a token costs 1.5 units, got bar %g for %g", llm_spec_gate_bar_drafted(&g, &c, 0, 64), bar);
	TEST_CHECK(fabs(llm_spec_gate_bar_drafted(&g, &c, 64, 64) - 2.5 * bar) < 1e-12,
			   "64 unread tokens over 64 steps left: a unit more, got %g", llm_spec_gate_bar_drafted(&g, &c, 64, 64));
	TEST_CHECK(llm_spec_gate_bar_drafted(&g, &c, 64, 64) > 1.0,
			   "4 decoders: no chance pays for reading a 64-token prompt for 64 tokens");
	TEST_CHECK(llm_spec_gate_bar_drafted(&g, &c, 64, 1) > llm_spec_gate_bar_drafted(&g, &c, 64, 64),
			   "the fewer steps left, the dearer the reading");
	llm_spec_gate_begin(&g, 1, 4.0);
	TEST_CHECK(llm_spec_gate_bar_drafted(&g, &c, 64, 64) < 2.0 / 3,
			   "alone, the prior chance does, got bar %g", llm_spec_gate_bar_drafted(&g, &c, 64, 64));
}

int
main(void)
{
	test_gate();
	test_rate();
	test_bar_drafted();
	return test_summary("test_spec_gate");
}
