/*
 * test_gptq.c
 *		Tests of GPTQ (gptq.h) and its linear algebra (linalg.h).
 *
 * 1. Cholesky of a known 3 x 3 matrix gives its known factor, the inverse
 *    it gives times the matrix is the identity, and a matrix that is not
 *    positive definite is refused.
 * 2. On a random matrix W and correlated random inputs X, GPTQ's output
 *    error ‖(W − Q) X‖ is below rounding to nearest's for INT8, INT4 g32
 *    and g128, in the original order and with act-order, and its values
 *    stored with llm_quantize_row_scheme_scaled decode back exactly.
 * 3. The factor: UᵀU times H + λI (inputs scaled, act-order) is the identity.
 * 4. Damping: a Hessian of rank 1 (one input repeated) still factors.
 */
#include "gptq.h"
#include "linalg.h"
#include "quant.h"
#include "test.h"
#include "test_layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 64
#define COLS 256
#define TOKENS 512

/* Cholesky of a known matrix, the inverse, and a refusal. */
static void
test_cholesky(void)
{
	/* A = L Lᵀ with L = [[2,0,0],[6,1,0],[-8,5,3]] */
	double		a[9] = {4, 12, -16, 12, 37, -43, -16, -43, 98};
	const double l[9] = {2, 0, 0, 6, 1, 0, -8, 5, 3};
	double		orig[9];
	double		inv[9];
	double		bad[4] = {1, 2, 2, 1};

	memcpy(orig, a, sizeof(a));
	TEST_CHECK(llm_cholesky(a, 3), "cholesky refused a positive-definite matrix");
	for (int i = 0; i < 9; i++)
		TEST_CHECK(fabs(a[i] - l[i]) < 1e-12, "L[%d] = %g, want %g", i, a[i], l[i]);
	llm_cholesky_inverse(a, 3, inv);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
		{
			double		s = 0.0;

			for (int k = 0; k < 3; k++)
				s += orig[i * 3 + k] * inv[k * 3 + j];
			TEST_CHECK(fabs(s - (i == j)) < 1e-9, "(A A⁻¹)[%d][%d] = %g", i, j, s);
		}
	TEST_CHECK(!llm_cholesky(bad, 2), "cholesky accepted an indefinite matrix");
}

/* GPTQ's factor U of a small random Hessian with column scales and act-order: UᵀU (H + λI) = I. */
static void
test_factor(void)
{
	enum
	{
		N = 6
	};
	double		xtx[N * N] = {0},
				h[N * N];
	float		s[N];
	double		mean = 0.0;
	LlmGptqOptions o;
	LlmGptqFactor fac = {0};
	LlmError	err;

	for (int t = 0; t < 20; t++)
	{
		double		x[N];

		for (int j = 0; j < N; j++)
			x[j] = test_rng_uniform(-1, 1) * (j + 1);
		for (int i = 0; i < N; i++)
			for (int j = i; j < N; j++)
				xtx[i * N + j] += x[i] * x[j];
	}
	for (int j = 0; j < N; j++)
		s[j] = test_rng_uniform(0.5f, 2.0f);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			h[i * N + j] = (i <= j ? xtx[i * N + j] : xtx[j * N + i]) / ((double) s[i] * s[j]);
	for (int j = 0; j < N; j++)
		mean += h[j * N + j] / N;
	for (int j = 0; j < N; j++)
		h[j * N + j] += 0.01 * mean;
	llm_gptq_options_default(&o);
	o.act_order = true;
	TEST_CHECK(llm_gptq_factor(&fac, xtx, s, N, &o, &err) == LLM_OK, "factor: %s", err.msg);
	for (int i = 1; i < N; i++)
		TEST_CHECK(h[fac.perm[i - 1] * (N + 1)] >= h[fac.perm[i] * (N + 1)], "act-order not descending at %d", i);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
		{
			double		p = 0.0;

			for (int k = 0; k < N; k++)
			{
				double		a = 0.0;	/* (UᵀU)[i][k] */

				for (int m = 0; m < N; m++)
					a += fac.u[m * N + i] * fac.u[m * N + k];
				p += a * h[fac.perm[k] * N + fac.perm[j]];
			}
			TEST_CHECK(fabs(p - (i == j)) < 1e-9, "(UᵀU H)[%d][%d] = %g", i, j, p);
		}
	for (int i = 0; i < N; i++)
		for (int j = 0; j < i; j++)
			TEST_CHECK(fac.u[i * N + j] == 0.0, "U[%d][%d] = %g below the diagonal", i, j, fac.u[i * N + j]);
	llm_gptq_factor_free(&fac);
}

/* GPTQ against rounding to nearest for one scheme and order. */
static void
test_gptq_beats_rtn(LlmQuantScheme s, bool act_order, const float *w, const float *x, const double *xtx)
{
	LlmType		type = llm_quant_scheme_type(s);
	size_t		rb = llm_type_row_size(type, COLS);
	float	   *rtn = malloc(sizeof(float) * ROWS * COLS);
	float	   *q = malloc(sizeof(float) * ROWS * COLS);
	float	   *back = malloc(sizeof(float) * COLS);
	float	   *scales = malloc(sizeof(float) * ROWS * COLS);
	uint8_t    *blk = malloc(rb);
	LlmGptqOptions o;
	LlmGptqFactor fac = {0};
	LlmError	err;
	double		e_rtn,
				e_gptq;
	int			mismatch = 0;

	for (int r = 0; r < ROWS; r++)
	{
		llm_quantize_row_scheme(s, w + r * COLS, blk, COLS);
		llm_dequant_row(type, blk, rtn + r * COLS, COLS);
	}
	llm_gptq_options_default(&o);
	o.act_order = act_order;
	memcpy(q, w, sizeof(float) * ROWS * COLS);
	TEST_CHECK(llm_gptq_factor(&fac, xtx, NULL, COLS, &o, &err) == LLM_OK, "factor: %s", err.msg);
	TEST_CHECK(llm_gptq_matrix(q, ROWS, COLS, &fac, s, &o, scales, &err) == LLM_OK, "gptq: %s", err.msg);
	llm_gptq_factor_free(&fac);
	e_rtn = test_layer_error(w, rtn, x, ROWS, COLS, TOKENS);
	e_gptq = test_layer_error(w, q, x, ROWS, COLS, TOKENS);
	printf("  %s%s: output error RTN %.4g, GPTQ %.4g (%.2fx)\n", llm_quant_scheme_name(s),
		   act_order ? " act-order" : "", e_rtn, e_gptq, e_rtn / e_gptq);
	TEST_CHECK(e_gptq < 0.8 * e_rtn, "%s act_order %d: GPTQ error %g not below RTN's %g",
			   llm_quant_scheme_name(s), act_order, e_gptq, e_rtn);
	/* stored with its scales, every value decodes back exactly */
	for (int r = 0; r < ROWS; r++)
	{
		llm_quantize_row_scheme_scaled(s, q + r * COLS, scales + r * (COLS / llm_quant_scheme_group(s, COLS)), blk, COLS);
		llm_dequant_row(type, blk, back, COLS);
		for (int j = 0; j < COLS; j++)
			mismatch += back[j] != q[r * COLS + j];
	}
	TEST_CHECK(mismatch == 0, "%s: %d values moved when stored", llm_quant_scheme_name(s), mismatch);
	free(rtn);
	free(q);
	free(back);
	free(scales);
	free(blk);
}

/* A rank-1 Hessian (every input channel the same) factors once damped. */
static void
test_damping(const float *w)
{
	double	   *xtx = calloc(COLS * COLS, sizeof(double));
	float	   *q = malloc(sizeof(float) * ROWS * COLS);
	float	   *scales = malloc(sizeof(float) * ROWS * COLS);
	LlmGptqOptions o;
	LlmGptqFactor fac = {0};
	LlmError	err;

	for (int i = 0; i < COLS * COLS; i++)
		xtx[i] = 3.0;
	llm_gptq_options_default(&o);
	memcpy(q, w, sizeof(float) * ROWS * COLS);
	TEST_CHECK(llm_gptq_factor(&fac, xtx, NULL, COLS, &o, &err) == LLM_OK, "rank-1 Hessian: %s", err.msg);
	TEST_CHECK(llm_gptq_matrix(q, ROWS, COLS, &fac, LLM_QUANT_INT4_G32, &o, scales, &err) == LLM_OK,
			   "rank-1 Hessian: %s", err.msg);
	llm_gptq_factor_free(&fac);
	free(xtx);
	free(q);
	free(scales);
}

int
main(void)
{
	float	   *w = malloc(sizeof(float) * ROWS * COLS);
	float	   *x = malloc(sizeof(float) * TOKENS * COLS);
	double	   *xtx = malloc(sizeof(double) * COLS * COLS);
	const LlmQuantScheme schemes[] = {LLM_QUANT_INT8, LLM_QUANT_INT4_G32, LLM_QUANT_INT4_G128};

	test_cholesky();
	test_factor();
	for (int i = 0; i < ROWS * COLS; i++)
		w[i] = test_rng_uniform(-1, 1) * test_rng_uniform(0.2f, 1.0f);
	test_layer_inputs(x, TOKENS, COLS);
	test_layer_xtx(x, TOKENS, COLS, xtx);
	for (int s = 0; s < 3; s++)
		for (int a = 0; a < 2; a++)
			test_gptq_beats_rtn(schemes[s], a, w, x, xtx);
	test_damping(w);
	free(w);
	free(x);
	free(xtx);
	return test_summary("test_gptq");
}
