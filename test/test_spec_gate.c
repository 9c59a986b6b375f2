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

int
main(void)
{
	test_gate();
	test_rate();
	return test_summary("test_spec_gate");
}
