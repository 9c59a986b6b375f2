/*
 * test_layer.h
 *		A small random linear layer for the tests of the offline compression
 *		methods (test_gptq.c, test_sparsegpt.c): correlated calibration
 *		inputs, their x xᵀ sums, and the output error ‖(W − Ŵ) X‖² that the
 *		methods minimise.
 */
#ifndef LLM_TEST_LAYER_H
#define LLM_TEST_LAYER_H

#include <stdint.h>
#include <string.h>

#include "test.h"

/* Random inputs x (tokens, cols) with correlated channels: a shared factor plus noise, a few large channels. */
static inline void
test_layer_inputs(float *x, int tokens, int cols)
{
	for (int t = 0; t < tokens; t++)
	{
		float		f1 = test_rng_uniform(-1, 1),
					f2 = test_rng_uniform(-1, 1);

		for (int j = 0; j < cols; j++)
		{
			float		v = (j % 3 == 0 ? f1 : f2) * 0.8f + test_rng_uniform(-0.5f, 0.5f);

			x[t * cols + j] = j % 37 == 0 ? 6.0f * v : v;
		}
	}
}

/* The sums of x xᵀ (cols, cols; upper triangle) of x (tokens, cols). */
static inline void
test_layer_xtx(const float *x, int tokens, int cols, double *xtx)
{
	memset(xtx, 0, sizeof(double) * cols * cols);
	for (int t = 0; t < tokens; t++)
		for (int i = 0; i < cols; i++)
			for (int j = i; j < cols; j++)
				xtx[i * cols + j] += (double) x[t * cols + i] * x[t * cols + j];
}

/* ‖(W − Q) X‖² over all rows of w and q (rows, cols) and tokens of x (tokens, cols). */
static inline double
test_layer_error(const float *w, const float *q, const float *x, int rows, int cols, int tokens)
{
	double		e = 0.0;

	for (int r = 0; r < rows; r++)
		for (int t = 0; t < tokens; t++)
		{
			double		d = 0.0;

			for (int j = 0; j < cols; j++)
				d += ((double) w[r * cols + j] - q[r * cols + j]) * x[t * cols + j];
			e += d * d;
		}
	return e;
}

#endif							/* LLM_TEST_LAYER_H */
