/*
 * test_activation.c
 *		Tests of the GLU's element-wise kernels (cpu/activation.h): the
 *		scalar reference and every SIMD level's against a float64 oracle,
 *		and each level bit for bit against itself whatever the range.
 *
 * 1. Accuracy, over gate values swept densely through [-40, 40] and at
 *    random up to +-1e4, for SiLU g / (1 + e^-g) and GELU 0.5 g (1 +
 *    tanh(u)), taken in float64 as g / (1 + e^-z) with z = g or 2u (the
 *    same function, without tanh's cancellation):
 *    - a fast kernel: |y - exact| <= (1e-6 + 4e-7 |z|) |exact| + 1e-36
 *      (below 1e-36 the output may be 0: e^-z overflows for z < -88.7):
 *      its exp and division add a few 1e-7, and z rounded to float moves
 *      e^-z by up to about 3.6e-7 |z| relative (so GELU's error grows to
 *      about 3e-5 where its output is 1e-20 and below);
 *    - the reference: the same plus 1.2e-7 |g| |up|, since libm's 1 +
 *      tanhf(u) rounds to float's step near -1 and keeps no relative
 *      accuracy once g is below about -4.
 * 2. Special values agree with the reference's class: NaN gives NaN,
 *    +-infinity, 0 and -0, and huge gates (g^3 overflows) keep their sign.
 * 3. Invariance: a level's output for an element does not depend on the
 *    range it is computed in: 4099 elements at once through the backend's
 *    op on 2 threads equal one at a time and ranges of every length 1-40
 *    at every offset, bit for bit.
 */
#include "backend.h"
#include "cpu/backend_cpu.h"
#include "cpu/activation.h"
#include "cpu/cpu_features.h"
#include "cpu/matmul.h"
#include "model.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SWEEP 4099

/* The sigmoid's argument z of act(g) = g / (1 + e^-z), in float64: g, or GELU's 2u. */
static double
act_arg(double g, LlmActivation act)
{
	return act == LLM_ACT_SILU ? g : 2.0 * 0.7978845608028654 * (g + 0.044715 * g * g * g);
}

/* Check range's outputs over gates and ups against the oracle (slack: the reference's allowance). */
static void
check_accuracy(const char *name, LlmGluRange range, LlmActivation act, bool reference)
{
	float	   *g = malloc(N_SWEEP * sizeof(float));
	float	   *u = malloc(N_SWEEP * sizeof(float));
	float	   *y = malloc(N_SWEEP * sizeof(float));
	double		worst = 0;
	int			bad = 0;

	for (int i = 0; i < N_SWEEP; i++)
	{
		g[i] = i < 3000 ? -40.0f + 80.0f * i / 2999.0f : test_rng_uniform(-1e4f, 1e4f);
		u[i] = test_rng_uniform(-3.0f, 3.0f);
	}
	range(g, u, y, N_SWEEP, act);
	for (int i = 0; i < N_SWEEP; i++)
	{
		double		z = act_arg(g[i], act);
		double		e = g[i] / (1.0 + exp(-z)) * u[i];
		double		err = fabs(y[i] - e);
		double		bound = (1e-6 + 4e-7 * fabs(z)) * fabs(e) + 1e-36 + (reference ? 1.2e-7 * fabs(g[i] * u[i]) : 0);

		if (!(err <= bound))
			bad++;
		if (err / bound > worst)
			worst = err / bound;
	}
	TEST_CHECK(bad == 0, "%s %s: %d of %d outputs outside the bound", name, act == LLM_ACT_SILU ? "silu" : "gelu", bad,
			   N_SWEEP);
	/* the bound is relative where the output is large, absolute where it is tiny */
	printf("  %-10s %-4s largest error %.2f of its bound\n", name, act == LLM_ACT_SILU ? "silu" : "gelu", worst);
	free(g);
	free(u);
	free(y);
}

/* NaN, infinities, zeros and huge gates: the same class as the reference's output. */
static void
check_special(const char *name, LlmGluRange range, LlmActivation act)
{
	const float gs[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e20f, -1e20f, 3e38f, -3e38f, 1e-40f, -1e-40f};
	const int	n = (int) (sizeof(gs) / sizeof(gs[0]));
	float		ones[16],
				y[16],
				yr[16];

	for (int i = 0; i < n; i++)
		ones[i] = 1.0f;
	range(gs, ones, y, n, act);
	llm_glu_range_ref(gs, ones, yr, n, act);
	for (int i = 0; i < n; i++)
	{
		bool		same_class = isnan(y[i]) ? isnan(yr[i])
			: !isnan(yr[i]) && signbit(y[i]) == signbit(yr[i]) && isinf(y[i]) == isinf(yr[i]) &&
			(y[i] == 0) == (yr[i] == 0);

		TEST_CHECK(same_class, "%s %s(%g): %g, the reference %g", name, act == LLM_ACT_SILU ? "silu" : "gelu",
				   (double) gs[i], (double) y[i], (double) yr[i]);
	}
}

/* The op on 2 threads, single elements and every short range at every offset: the same bits. */
static void
check_invariance(const char *name, LlmBackend *be, const LlmBackendOps *ops, LlmGluRange range, LlmActivation act)
{
	float	   *g = malloc(N_SWEEP * sizeof(float));
	float	   *u = malloc(N_SWEEP * sizeof(float));
	float	   *all = malloc(N_SWEEP * sizeof(float));
	float	   *part = malloc(N_SWEEP * sizeof(float));
	int			diff = 0;

	for (int i = 0; i < N_SWEEP; i++)
	{
		g[i] = test_rng_uniform(-12.0f, 12.0f);
		u[i] = test_rng_uniform(-3.0f, 3.0f);
	}
	ops->glu(be, g, u, all, N_SWEEP, act);
	for (int i = 0; i < N_SWEEP; i++)
		range(g + i, u + i, part + i, 1, act);
	diff += memcmp(all, part, N_SWEEP * sizeof(float)) != 0;
	for (int len = 1; len <= 40; len++)
		for (int off = 0; off + len <= 200; off += len)
		{
			range(g + off, u + off, part + off, len, act);
			diff += memcmp(all + off, part + off, (size_t) len * sizeof(float)) != 0;
		}
	TEST_CHECK(diff == 0, "%s %s: %d ranges differ from the whole", name, act == LLM_ACT_SILU ? "silu" : "gelu", diff);
	free(g);
	free(u);
	free(all);
	free(part);
}

/* Every check for the reference and the levels this processor has. */
int
main(void)
{
	LlmBackend *be = NULL;
	LlmError	err;
	const LlmActivation acts[] = {LLM_ACT_SILU, LLM_ACT_GELU_TANH};

	if (llm_backend_cpu_new(2, &be, &err) != LLM_OK)
	{
		TEST_CHECK(false, "backend: %s", err.msg);
		return test_summary("activation");
	}
	for (int a = 0; a < 2; a++)
	{
		check_accuracy("reference", llm_glu_range_ref, acts[a], true);
		check_invariance("reference", be, &llm_cpu_ref_ops, llm_glu_range_ref, acts[a]);
		if (llm_glu_range_avx512 != NULL && llm_cpu_isa_supported(LLM_CPU_ISA_AVX512))
		{
			const LlmBackendOps *ops = llm_cpu_ops_for_isa(LLM_CPU_ISA_AVX512);

			TEST_CHECK(ops->glu != llm_cpu_ref_ops.glu, "the AVX-512 level has its own GLU");
			check_accuracy("avx512", llm_glu_range_avx512, acts[a], false);
			check_special("avx512", llm_glu_range_avx512, acts[a]);
			check_invariance("avx512", be, ops, llm_glu_range_avx512, acts[a]);
		}
	}
	llm_backend_free(be);
	return test_summary("activation");
}
