/*
 * test_exp_sum.c
 *		Tests of the log-softmax's sum of exps (cpu/exp_sum.h) and of
 *		llm_logprob over it: every SIMD level against a float64 oracle, and
 *		bit for bit against itself wherever the row lies.
 *
 * 1. Accuracy: rows of 1 to 262,144 logits (Gemma's vocabulary), spread
 *    over [-30, 30] and [-1e4, 1e4] with NaN and -infinity among them:
 *    the reference within 1e-12 relative of the oracle (libm's exp in
 *    double, the sums in double), a fast level within 1e-6 relative
 *    (llm_exp16's few 1e-7, x - max rounded to float); so a
 *    log-probability moves by at most 1e-6 between levels.
 * 2. Special rows: all NaN or -infinity but one gives exactly 1 (exp(0));
 *    a single logit gives 1; a logit of +infinity gives NaN, as in the
 *    reference.
 * 3. Invariance: a row's sum is the same bits at any alignment in memory,
 *    and llm_logprob of each token of a row is the same bits read from a
 *    copy at another offset.
 */
#include "cpu/cpu_features.h"
#include "cpu/exp_sum.h"
#include "sampler.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROW 262144

/* The oracle: exp in double of each non-NaN x - max, summed in long double. */
static double
oracle_sum(const float *x, int n, float max)
{
	long double sum = 0;

	for (int i = 0; i < n; i++)
		if (!isnan(x[i]))
			sum += expl((long double) x[i] - max);
	return (double) sum;
}

/* The largest non-NaN value of x (-infinity when none). */
static float
row_max(const float *x, int n)
{
	float		m = -INFINITY;

	for (int i = 0; i < n; i++)
		if (x[i] > m)
			m = x[i];
	return m;
}

/* Fill x (n) with logits in [-spread, spread], a few NaN and -infinity among them. */
static void
fill_row(float *x, int n, float spread)
{
	for (int i = 0; i < n; i++)
	{
		uint64_t	r = test_rng_next() % 1000;

		x[i] = r == 0 ? NAN : r == 1 ? -INFINITY : test_rng_uniform(-spread, spread);
	}
}

/* Check f against the oracle on rows of many lengths, within rel relative. */
static void
check_accuracy(const char *name, LlmExpSum f, double rel)
{
	static const int lengths[] = {1, 2, 15, 16, 17, 31, 33, 100, 1000, 4099, 49152, 151936, 262144};
	float	   *x = malloc(MAX_ROW * sizeof(float));
	double		worst = 0;

	for (int l = 0; l < (int) (sizeof(lengths) / sizeof(lengths[0])); l++)
		for (int s = 0; s < 2; s++)
		{
			int			n = lengths[l];
			float		max;
			double		got;
			double		want;
			double		err;

			fill_row(x, n, s == 0 ? 30.0f : 1e4f);
			x[n / 2] = 5.0f;	/* at least one finite logit */
			max = row_max(x, n);
			got = f(x, n, max);
			want = oracle_sum(x, n, max);
			err = fabs(got - want) / want;
			worst = err > worst ? err : worst;
			TEST_CHECK(err <= rel, "%s: n %d spread %d: %.17g against %.17g (%.3g relative)",
					   name, n, s, got, want, err);
		}
	printf("%s: worst relative error %.3g (allowed %.3g)\n", name, worst, rel);
	free(x);
}

/* Special rows: one finite logit among NaN and -infinity; one logit; +infinity. */
static void
check_special(const char *name, LlmExpSum f)
{
	float		x[37];

	for (int i = 0; i < 37; i++)
		x[i] = i % 2 ? NAN : -INFINITY;
	x[20] = 3.5f;
	TEST_CHECK(f(x, 37, 3.5f) == 1.0, "%s: one finite logit gives %.17g", name, f(x, 37, 3.5f));
	TEST_CHECK(f(x + 20, 1, 3.5f) == 1.0, "%s: a single logit", name);
	x[3] = INFINITY;
	TEST_CHECK(isnan(f(x, 37, INFINITY)) == isnan(llm_exp_sum_ref(x, 37, INFINITY)),
			   "%s: +infinity as the reference", name);
}

/* The same row at every alignment gives the same sum; llm_logprob the same from a copy. */
static void
check_invariance(const char *name, LlmExpSum f)
{
	int			n = 49152 + 7;
	float	   *row = malloc(n * sizeof(float));
	float	   *buf = malloc((n + 16) * sizeof(float));
	float		max;
	double		first;

	fill_row(row, n, 20.0f);
	max = row_max(row, n);
	first = f(row, n, max);
	for (int off = 0; off < 16; off++)
	{
		double		again;

		memcpy(buf + off, row, n * sizeof(float));
		again = f(buf + off, n, max);
		TEST_CHECK(memcmp(&again, &first, sizeof(double)) == 0, "%s: offset %d: %.17g against %.17g",
				   name, off, again, first);
	}
	for (int t = 0; t < n; t += 977)
	{
		float		a = llm_logprob(row, n, t);
		float		b = llm_logprob(buf + 15, n, t);

		TEST_CHECK(memcmp(&a, &b, sizeof(float)) == 0 || (isnan(a) && isnan(b)),
				   "%s: llm_logprob of token %d moved: %.9g against %.9g", name, t, a, b);
	}
	free(row);
	free(buf);
}

int
main(void)
{
	check_accuracy("reference", llm_exp_sum_ref, 1e-12);
	check_special("reference", llm_exp_sum_ref);
	check_invariance("reference", llm_exp_sum_ref);
	if (llm_exp_sum_avx512 != NULL && llm_cpu_isa_supported(LLM_CPU_ISA_AVX512))
	{
		check_accuracy("avx512", llm_exp_sum_avx512, 1e-6);
		check_special("avx512", llm_exp_sum_avx512);
		check_invariance("avx512", llm_exp_sum_avx512);
	}
	else
		printf("avx512: not on this processor, skipped\n");
	return test_summary("test_exp_sum");
}
