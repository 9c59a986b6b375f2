/*
 * smooth.c
 *		SmoothQuant's scales (see smooth.h).
 */
#include "smooth.h"

#include <math.h>

/* s = xmax^alpha / wmax^(1 - alpha) per channel; 1 where either is 0. */
void
llm_smooth_scales(const float *xmax, const float *wmax, int64_t n, double alpha, float *s)
{
	for (int64_t j = 0; j < n; j++)
		s[j] = xmax[j] > 0.0f && wmax[j] > 0.0f ?
			(float) (pow(xmax[j], alpha) / pow(wmax[j], 1.0 - alpha)) : 1.0f;
}

/* Fold the max |f| of each column of f (rows, cols) into wmax. */
void
llm_col_abs_max(const float *f, int64_t rows, int64_t cols, float *wmax)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < cols; j++)
			wmax[j] = fmaxf(wmax[j], fabsf(f[r * cols + j]));
}
