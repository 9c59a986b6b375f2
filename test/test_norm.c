/*
 * test_norm.c
 *		Tests of the RMSNorm rows (cpu/norm.h): every SIMD level bit for bit
 *		against the scalar reference, which is itself checked against a
 *		float64 oracle within a stated tolerance.
 *
 * 1. Accuracy: the reference's output against float64's x / sqrt(mean(x^2)
 *    + eps) * w, within 1e-5 relative to the row's largest output (a sum of
 *    dim float squares rounds by at most about dim * 6e-8).
 * 2. Identity: each level's rows (and the fused residual add, x += r
 *    first) give exactly the reference's bits for x and y, over row counts
 *    1 .. 40 (whole groups of sixteen and tails) and widths with and
 *    without a tail of 16, with weights w and 1 + w, on rows of zeros,
 *    huge values and random values.
 * 3. Invariance: a row's output does not depend on the rows computed with
 *    it: each row alone equals the row in a call of 40.
 */
#include "backend.h"
#include "cpu/cpu_features.h"
#include "cpu/norm.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 40

/* Fill n values of x: random normal-ish in [-s, s), or one class of special row. */
static void
fill(float *x, size_t n, float s, int kind)
{
	for (size_t i = 0; i < n; i++)
		x[i] = kind == 1 ? 0.0f : kind == 2 ? 1e18f * test_rng_uniform(-1.0f, 1.0f) : s * test_rng_uniform(-1.0f, 1.0f);
}

/* One shape: n rows of dim, add_one, with or without a residual, against the reference and the oracle. */
static void
check_shape(LlmNormRows rows, const char *name, int n, int dim, bool add_one, bool residual, int kind)
{
	size_t		sz = (size_t) n * dim;
	float	   *x0 = malloc(sz * sizeof(float));
	float	   *r = malloc(sz * sizeof(float));
	float	   *w = malloc((size_t) dim * sizeof(float));
	float	   *xa = malloc(sz * sizeof(float));
	float	   *xb = malloc(sz * sizeof(float));
	float	   *ya = malloc(sz * sizeof(float));
	float	   *yb = malloc(sz * sizeof(float));
	LlmNormArgs a = {xa, residual ? r : NULL, w, ya, n, dim, 1e-6f, add_one};
	LlmNormArgs b = {xb, residual ? r : NULL, w, yb, n, dim, 1e-6f, add_one};

	fill(x0, sz, 3.0f, kind);
	fill(r, sz, 1.0f, 0);
	fill(w, (size_t) dim, 1.0f, 0);
	memcpy(xa, x0, sz * sizeof(float));
	memcpy(xb, x0, sz * sizeof(float));
	llm_norm_rows_ref(&a, 0, n);
	rows(&b, 0, n);
	TEST_CHECK(memcmp(xa, xb, sz * sizeof(float)) == 0 && memcmp(ya, yb, sz * sizeof(float)) == 0,
			   "%s: %d rows of %d, add_one %d, residual %d, kind %d: not the reference's bits", name, n, dim,
			   add_one, residual, kind);
	/* each row alone: the same bits as in the call of n */
	for (int i = 0; i < n; i++)
	{
		float		yi[1024];
		float		xi[1024];
		LlmNormArgs c = {xi, residual ? r + (size_t) i * dim : NULL, w, yi, 1, dim, 1e-6f, add_one};

		memcpy(xi, x0 + (size_t) i * dim, (size_t) dim * sizeof(float));
		rows(&c, 0, 1);
		TEST_CHECK(memcmp(yi, yb + (size_t) i * dim, (size_t) dim * sizeof(float)) == 0,
				   "%s: row %d of %d alone differs (dim %d)", name, i, n, dim);
	}
	/* the reference against float64 (random rows; huge ones overflow the float sum of squares by design) */
	for (int i = 0; i < n && kind == 0; i++)
	{
		double		ss = 0.0,
					top = 0.0,
					err = 0.0;
		const float *xr = xa + (size_t) i * dim;

		for (int j = 0; j < dim; j++)
			ss += (double) xr[j] * xr[j];
		for (int j = 0; j < dim; j++)
		{
			double		e = xr[j] / sqrt(ss / dim + 1e-6) * (add_one ? 1.0 + w[j] : w[j]);

			top = fmax(top, fabs(e));
			err = fmax(err, fabs(e - ya[(size_t) i * dim + j]));
		}
		TEST_CHECK(err <= 1e-5 * top, "reference: row %d of %d: error %g of %g", i, dim, err, top);
	}
	free(x0);
	free(r);
	free(w);
	free(xa);
	free(xb);
	free(ya);
	free(yb);
}

int
main(void)
{
	int			dims[] = {8, 16, 64, 100, 256, 576, 640, 1024};

	for (int isa = LLM_CPU_ISA_SCALAR; isa <= (int) llm_cpu_isa_detect(); isa++)
	{
		LlmNormRows rows = isa == LLM_CPU_ISA_AVX512 ? llm_norm_rows_avx512 :
			isa == LLM_CPU_ISA_SCALAR ? llm_norm_rows_ref : NULL;
		const char *name = llm_cpu_isa_name((LlmCpuIsa) isa);

		if (rows == NULL)
			continue;
		for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++)
			for (int n = 1; n <= MAX_ROWS; n += n < 17 ? 1 : 23)
				for (int kind = 0; kind < 3; kind++)
				{
					check_shape(rows, name, n, dims[d], n % 2 == 0, n % 3 == 0, kind);
					if (n == 16)
						check_shape(rows, name, n, dims[d], true, true, kind);
				}
	}
	return test_summary("norm");
}
