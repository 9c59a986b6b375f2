/*
 * test_sparsegpt.c
 *		Tests of SparseGPT (sparsegpt.h) on a random layer W (ROWS, COLS)
 *		with correlated calibration inputs X (TOKENS, COLS), one input never
 *		nonzero:
 *
 * 1. The pattern: 50% leaves exactly COLS / 2 zeros in every row, 2:4
 *    exactly 2 in every 4 consecutive weights; the dead input is pruned
 *    in every row.
 * 2. The output error ‖(W − Ŵ) X‖² is below Wanda's (|w| · ‖X_j‖) and
 *    below magnitude pruning's (|w|) at the same pattern, by a margin, on
 *    the calibration inputs and on held-out inputs of the same kind.
 * 3. Determinism: a second run gives the same bits (SparseGPT runs on one
 *    thread, so there is no thread count to vary).
 * 4. A factor in act-order is refused (the 2:4 groups are of original
 *    columns).
 */
#include "prune.h"
#include "sparsegpt.h"
#include "test.h"
#include "test_layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 32
#define COLS 256				/* two blocks of LLM_GPTQ_BLOCK: the lazy update between them is used */
#define TOKENS 512
#define DEAD 5					/* the input channel that is always zero */
#define MARGIN 0.8				/* SparseGPT's error at most this share of the others' */

/* The zeros of p (ROWS, COLS) in columns [j0, j0 + n) of row r. */
static int
zeros_in(const float *p, int r, int j0, int n)
{
	int			z = 0;

	for (int j = j0; j < j0 + n; j++)
		z += p[r * COLS + j] == 0.0f;
	return z;
}

/* SparseGPT against Wanda and magnitude pruning in one pattern. */
static void
test_pattern(bool pattern24, const float *w, const float *x, const float *held, const double *xtx,
			 const LlmGptqFactor *fac)
{
	float	   *p = malloc(sizeof(float) * ROWS * COLS);
	float	   *again = malloc(sizeof(float) * ROWS * COLS);
	float	   *wanda = malloc(sizeof(float) * ROWS * COLS);
	float	   *mag = malloc(sizeof(float) * ROWS * COLS);
	double		xnorm[COLS],
				ones[COLS];
	double		e_sgpt,
				e_wanda,
				e_mag;
	LlmError	err;
	const char *name = pattern24 ? "2:4" : "50%";

	memcpy(p, w, sizeof(float) * ROWS * COLS);
	TEST_CHECK(llm_sparsegpt_matrix(p, ROWS, COLS, fac, pattern24, &err) == LLM_OK, "%s: %s", name, err.msg);
	for (int r = 0; r < ROWS; r++)
	{
		if (pattern24)
			for (int j0 = 0; j0 < COLS; j0 += 4)
				TEST_CHECK(zeros_in(p, r, j0, 4) == 2, "2:4 row %d group %d: %d zeros", r, j0 / 4,
						   zeros_in(p, r, j0, 4));
		else
			TEST_CHECK(zeros_in(p, r, 0, COLS) == COLS / 2, "50%% row %d: %d zeros", r, zeros_in(p, r, 0, COLS));
		TEST_CHECK(p[r * COLS + DEAD] == 0.0f, "%s row %d: the dead input kept %g", name, r, p[r * COLS + DEAD]);
	}

	/* the same bits again */
	memcpy(again, w, sizeof(float) * ROWS * COLS);
	TEST_CHECK(llm_sparsegpt_matrix(again, ROWS, COLS, fac, pattern24, &err) == LLM_OK, "%s rerun", name);
	TEST_CHECK(memcmp(p, again, sizeof(float) * ROWS * COLS) == 0, "%s: a second run differs", name);

	for (int j = 0; j < COLS; j++)
	{
		xnorm[j] = sqrt(xtx[j * COLS + j]);
		ones[j] = 1.0;
	}
	memcpy(wanda, w, sizeof(float) * ROWS * COLS);
	memcpy(mag, w, sizeof(float) * ROWS * COLS);
	TEST_CHECK(llm_prune_wanda(wanda, ROWS, COLS, xnorm, pattern24), "wanda");
	TEST_CHECK(llm_prune_wanda(mag, ROWS, COLS, ones, pattern24), "magnitude");
	e_sgpt = test_layer_error(w, p, x, ROWS, COLS, TOKENS);
	e_wanda = test_layer_error(w, wanda, x, ROWS, COLS, TOKENS);
	e_mag = test_layer_error(w, mag, x, ROWS, COLS, TOKENS);
	printf("  %s: output error magnitude %.4g, Wanda %.4g, SparseGPT %.4g (%.2fx below Wanda)\n", name, e_mag,
		   e_wanda, e_sgpt, e_wanda / e_sgpt);
	TEST_CHECK(e_sgpt < MARGIN * e_wanda, "%s: SparseGPT error %g not below Wanda's %g", name, e_sgpt, e_wanda);
	TEST_CHECK(e_sgpt < MARGIN * e_mag, "%s: SparseGPT error %g not below magnitude's %g", name, e_sgpt, e_mag);
	e_sgpt = test_layer_error(w, p, held, ROWS, COLS, TOKENS);
	e_wanda = test_layer_error(w, wanda, held, ROWS, COLS, TOKENS);
	e_mag = test_layer_error(w, mag, held, ROWS, COLS, TOKENS);
	printf("  %s held out: magnitude %.4g, Wanda %.4g, SparseGPT %.4g (%.2fx below Wanda)\n", name, e_mag,
		   e_wanda, e_sgpt, e_wanda / e_sgpt);
	TEST_CHECK(e_sgpt < MARGIN * e_wanda, "%s held out: SparseGPT error %g not below Wanda's %g", name, e_sgpt,
			   e_wanda);
	TEST_CHECK(e_sgpt < MARGIN * e_mag, "%s held out: SparseGPT error %g not below magnitude's %g", name, e_sgpt,
			   e_mag);
	free(p);
	free(again);
	free(wanda);
	free(mag);
}

/* A factor made in act-order is refused. */
static void
test_act_order(const float *w, const double *xtx)
{
	float	   *p = malloc(sizeof(float) * ROWS * COLS);
	LlmGptqOptions o;
	LlmGptqFactor fac = {0};
	LlmError	err;

	llm_gptq_options_default(&o);
	o.act_order = true;
	memcpy(p, w, sizeof(float) * ROWS * COLS);
	TEST_CHECK(llm_gptq_factor(&fac, xtx, NULL, COLS, &o, &err) == LLM_OK, "act-order factor: %s", err.msg);
	TEST_CHECK(llm_sparsegpt_matrix(p, ROWS, COLS, &fac, true, &err) == LLM_ERR_INVALID,
			   "SparseGPT took an act-order factor");
	TEST_CHECK(memcmp(p, w, sizeof(float) * ROWS * COLS) == 0, "a refused matrix was changed");
	llm_gptq_factor_free(&fac);
	free(p);
}

int
main(void)
{
	float	   *w = malloc(sizeof(float) * ROWS * COLS);
	float	   *x = malloc(sizeof(float) * TOKENS * COLS);
	float	   *held = malloc(sizeof(float) * TOKENS * COLS);
	double	   *xtx = malloc(sizeof(double) * COLS * COLS);
	LlmGptqOptions o;
	LlmGptqFactor fac = {0};
	LlmError	err;

	for (int i = 0; i < ROWS * COLS; i++)
		w[i] = test_rng_uniform(-1, 1) * test_rng_uniform(0.2f, 1.0f);
	test_layer_inputs(x, TOKENS, COLS);
	test_layer_inputs(held, TOKENS, COLS);
	for (int t = 0; t < TOKENS; t++)
		x[t * COLS + DEAD] = held[t * COLS + DEAD] = 0.0f;
	test_layer_xtx(x, TOKENS, COLS, xtx);
	llm_gptq_options_default(&o);
	TEST_CHECK(llm_gptq_factor(&fac, xtx, NULL, COLS, &o, &err) == LLM_OK, "factor: %s", err.msg);
	test_pattern(false, w, x, held, xtx, &fac);
	test_pattern(true, w, x, held, xtx, &fac);
	llm_gptq_factor_free(&fac);
	test_act_order(w, xtx);
	free(w);
	free(x);
	free(held);
	free(xtx);
	return test_summary("test_sparsegpt");
}
