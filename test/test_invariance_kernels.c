/*
 * test_invariance_kernels.c
 *		The batch-invariance rule at the kernel level: a token's output row of
 *		a matmul has the same bits whatever else is in the call.
 *
 * For every weight type the engine reads, at every CPU level this
 * processor has (the scalar reference included), a matmul of N tokens is
 * the reference; then every sub-range of tokens -- one token (the GEMV),
 * the small-batch tiles, the packed tiles of larger calls, at the start and
 * at the end of the N -- must give each of its tokens exactly the reference
 * row's bytes, on a 1-thread and on a 2-thread backend.  Shapes have row
 * counts that are not multiples of the register tiles and column counts
 * with tails of blocks and of the kernels' chunks of k.
 *
 * The same rule for the other per-token ops: rmsnorm and the activation
 * quantizers (a token's quantized row does not depend on its neighbours).
 * And matmul_multi and matmul_glu, which share one quantization of their
 * input among weights, give each weight its own matmul's bits.
 */
#include "backend.h"
#include "cpu/backend_cpu.h"
#include "cpu/cpu_features.h"
#include "cpu/matmul.h"
#include "quant.h"
#include "test.h"
#include "test_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_REF 40				/* tokens of the reference call */

/* Column counts to try for type (at most 6): block tails, groups of 16 blocks, k chunks, heap buffers. */
static int
cols_for(LlmType type, int64_t *cols)
{
	int			bs = llm_type_traits(type)->block_size;

	if (bs == 1)
	{
		cols[0] = 100, cols[1] = 768, cols[2] = 2100;
		return 3;
	}
	if (bs == 32)
	{
		/* 20, 25, 129, 257 blocks; 24 and 48 (whole groups, which the AMX tiles take where there are some) */
		cols[0] = 640, cols[1] = 800, cols[2] = 4128, cols[3] = 8224, cols[4] = 768, cols[5] = 1536;
		return 6;
	}
	if (llm_type_base(type) == LLM_TYPE_SPARSE24)
	{
		cols[0] = 640, cols[1] = 4160, cols[2] = 8256;	/* 10, 65, 129 blocks: the stack's row and the heap's */
		return 3;
	}
	cols[0] = 256, cols[1] = 768, cols[2] = 4352;	/* 1, 3, 17 super-blocks */
	return 3;
}

/*
 * Each sub-range of tokens of x (N_REF, cols) through ops->matmul on be
 * gives the rows of ref (N_REF, rows) bit for bit; returns the failures.
 */
static int
check_subranges(LlmBackend *be, const LlmBackendOps *ops, const LlmWeight *w, const float *x, const float *ref,
				const char *what)
{
	static const int n_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 33, N_REF};
	float	   *y = malloc((size_t) N_REF * w->rows * sizeof(float));
	int			bad = 0;

	if (y == NULL)
	{
		TEST_CHECK(false, "out of memory");
		return 1;
	}
	for (int ni = 0; ni < (int) (sizeof(n_list) / sizeof(n_list[0])); ni++)
	{
		int			n = n_list[ni];

		for (int t0 = 0; t0 <= N_REF - n; t0 += (N_REF - n > 0 ? N_REF - n : 1))
		{
			bool		same;

			ops->matmul(be, w, x + (size_t) t0 * w->cols, y, n);
			same = memcmp(y, ref + (size_t) t0 * w->rows, (size_t) n * w->rows * sizeof(float)) == 0;
			TEST_CHECK(same, "%s: tokens [%d, %d) of %d differ from the reference call", what, t0, t0 + n, N_REF);
			bad += !same;
		}
	}
	free(y);
	return bad;
}

/* One type at one level: every shape, on both backends. */
static void
check_type(LlmBackend *const *bes, const LlmBackendOps *ops, LlmType type)
{
	static const int64_t rows_list[] = {37, 80};
	int64_t		cols[6];
	int			n_cols = cols_for(type, cols);
	int			bad = 0;

	for (int ri = 0; ri < 2; ri++)
		for (int ci = 0; ci < n_cols; ci++)
		{
			LlmWeight	w;
			float	   *x = malloc((size_t) N_REF * cols[ci] * sizeof(float));
			float	   *ref = malloc((size_t) N_REF * rows_list[ri] * sizeof(float));
			float	   *ref1 = malloc((size_t) N_REF * rows_list[ri] * sizeof(float));
			char		what[128];

			if (x == NULL || ref == NULL || ref1 == NULL || !make_weight(type, rows_list[ri], cols[ci], &w))
			{
				TEST_CHECK(false, "out of memory");
				free(x);
				free(ref);
				free(ref1);
				return;
			}
			random_acts(x, N_REF, cols[ci]);
			ops->matmul(bes[1], &w, x, ref, N_REF);
			ops->matmul(bes[0], &w, x, ref1, N_REF);
			snprintf(what, sizeof(what), "%s %s rows %lld cols %lld", ops->name, llm_type_traits(type)->name,
					 (long long) w.rows, (long long) w.cols);
			TEST_CHECK(memcmp(ref, ref1, (size_t) N_REF * w.rows * sizeof(float)) == 0,
					   "%s: 1 and 2 threads differ", what);
			for (int b = 0; b < 2; b++)
				bad += check_subranges(bes[b], ops, &w, x, ref, what);
			free((void *) w.data);
			free(x);
			free(ref);
			free(ref1);
		}
	printf("  %-10s %-5s %s\n", ops->name, llm_type_traits(type)->name, bad == 0 ? "invariant" : "DIFFERS");
}

/* rmsnorm of a token does not depend on the other tokens of the call. */
static void
check_rmsnorm(LlmBackend *be, const LlmBackendOps *ops)
{
	const int	dim = 640;
	float	   *x = malloc((size_t) N_REF * dim * sizeof(float));
	float	   *g = malloc((size_t) dim * sizeof(float));
	float	   *ref = malloc((size_t) N_REF * dim * sizeof(float));
	float	   *y = malloc((size_t) N_REF * dim * sizeof(float));

	if (x == NULL || g == NULL || ref == NULL || y == NULL)
		TEST_CHECK(false, "out of memory");
	else
	{
		random_acts(x, N_REF, dim);
		for (int i = 0; i < dim; i++)
			g[i] = rng_normal();
		ops->rmsnorm(be, x, g, ref, N_REF, dim, 1e-6f, false);
		for (int t = 0; t < N_REF; t++)
		{
			ops->rmsnorm(be, x + (size_t) t * dim, g, y, 1, dim, 1e-6f, false);
			TEST_CHECK(memcmp(y, ref + (size_t) t * dim, dim * sizeof(float)) == 0,
					   "%s rmsnorm: token %d alone differs", ops->name, t);
		}
	}
	free(x);
	free(g);
	free(ref);
	free(y);
}

/*
 * matmul_multi (and matmul_glu) give every weight the bits of its own
 * matmul, whether the weights share their activations (one type) or not
 * (types whose kernels take different activations), at 1, 5 and N_REF
 * tokens; returns nothing, counts through TEST_CHECK.
 */
static void
check_multi(LlmBackend *be, const LlmBackendOps *ops)
{
	static const LlmType sets[2][3] = {
		{LLM_TYPE_Q4_1, LLM_TYPE_Q4_1, LLM_TYPE_Q4_1},
		{LLM_TYPE_Q4_K, LLM_TYPE_Q6_K, LLM_TYPE_Q8_0},
	};
	static const int64_t rows[3] = {80, 37, 16};
	static const int n_list[] = {1, 5, N_REF};
	const int64_t cols = 768;

	if (ops->matmul_multi == NULL)
		return;
	for (int si = 0; si < 2; si++)
	{
		LlmWeight	w[3];
		const LlmWeight *wp[3] = {&w[0], &w[1], &w[2]};
		float	   *x = malloc((size_t) N_REF * cols * sizeof(float));
		float	   *y[3];
		float	   *ref[3];
		bool		ok = x != NULL;

		for (int i = 0; i < 3; i++)
		{
			y[i] = malloc((size_t) N_REF * rows[i] * sizeof(float));
			ref[i] = malloc((size_t) N_REF * rows[i] * sizeof(float));
			ok = make_weight(sets[si][i], rows[i], cols, &w[i]) && ok && y[i] != NULL && ref[i] != NULL;
		}
		TEST_CHECK(ok, "out of memory");
		if (ok)
		{
			random_acts(x, N_REF, cols);
			for (int ni = 0; ni < (int) (sizeof(n_list) / sizeof(n_list[0])); ni++)
			{
				int			n = n_list[ni];

				for (int i = 0; i < 3; i++)
					ops->matmul(be, &w[i], x, ref[i], n);
				ops->matmul_multi(be, wp, x, y, 3, n);
				for (int i = 0; i < 3; i++)
					TEST_CHECK(memcmp(y[i], ref[i], (size_t) n * rows[i] * sizeof(float)) == 0,
							   "%s matmul_multi: weight %d (%s) of %d tokens differs from its matmul", ops->name,
							   i, llm_type_traits(sets[si][i])->name, n);
				if (ops->matmul_glu != NULL && si == 0)
				{
					/* gate and up of one shape: w[0] and a second weight of its rows */
					LlmWeight	up;
					float	   *ref_up = malloc((size_t) n * rows[0] * sizeof(float));
					float	   *y_up = malloc((size_t) n * rows[0] * sizeof(float));

					if (ref_up != NULL && y_up != NULL && make_weight(sets[si][0], rows[0], cols, &up))
					{
						ops->matmul(be, &up, x, ref_up, n);
						ops->glu(be, ref[0], ref_up, ref[0], (int64_t) n * rows[0], LLM_ACT_SILU);
						ops->matmul_glu(be, &w[0], &up, x, y[0], y_up, n, LLM_ACT_SILU);
						TEST_CHECK(memcmp(y[0], ref[0], (size_t) n * rows[0] * sizeof(float)) == 0,
								   "%s matmul_glu of %d tokens differs from matmul, matmul, glu", ops->name, n);
						free((void *) up.data);
					}
					else
						TEST_CHECK(false, "out of memory");
					free(ref_up);
					free(y_up);
				}
			}
		}
		for (int i = 0; i < 3; i++)
		{
			free((void *) w[i].data);
			free(y[i]);
			free(ref[i]);
		}
		free(x);
	}
	printf("  %-10s matmul_multi, matmul_glu checked\n", ops->name);
}

/* Every type at every level this processor has. */
int
main(void)
{
	static const LlmType types[] = {
		LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q4_1,
		LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K,
		LLM_TYPE_Q8_0_G, LLM_TYPE_Q4_0_G, LLM_TYPE_Q4_1_G, LLM_TYPE_Q5_0_G, LLM_TYPE_Q5_1_G, LLM_TYPE_SPARSE24,
		LLM_TYPE_SPARSE24_G
	};
	LlmBackend *bes[2] = {NULL, NULL};
	LlmError	err;

	test_rng_state = 0x6a09e667f3bcc909ull;
	for (int b = 0; b < 2; b++)
		if (llm_backend_cpu_new(b + 1, &bes[b], &err) != LLM_OK)
		{
			TEST_CHECK(false, "backend: %s", err.msg);
			return test_summary("invariance_kernels");
		}
	for (int isa = LLM_CPU_ISA_SCALAR; isa < LLM_CPU_ISA_COUNT; isa++)
	{
		const LlmBackendOps *ops = llm_cpu_ops_for_isa((LlmCpuIsa) isa);

		if (ops == NULL)
			continue;
		for (int ti = 0; ti < (int) (sizeof(types) / sizeof(types[0])); ti++)
			check_type(bes, ops, types[ti]);
		check_rmsnorm(bes[1], ops);
		check_multi(bes[1], ops);
	}
	llm_backend_free(bes[0]);
	llm_backend_free(bes[1]);
	return test_summary("invariance_kernels");
}
