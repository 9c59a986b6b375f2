/*
 * smooth.h
 *		SmoothQuant's per-input-channel scales (Xiao et al., ICML 2023):
 *		s_j = max|X_j|^α / max|W_j|^(1−α) moves activation range into the
 *		weights, so an activation quantized per token loses less to its
 *		outlier channels.  The scales fold like AWQ's (awq.h:
 *		llm_scale_cols, llm_unscale_norm).
 */
#ifndef LLM_SMOOTH_H
#define LLM_SMOOTH_H

#include <stdint.h>

#include "calib.h"
#include "model.h"

/*
 * s (n) = xmax^alpha / wmax^(1 - alpha) per channel, xmax the calibration
 * max |x| and wmax the max |w| of the channel's weight column (over every
 * matrix that shares the input); 1 where either is 0.
 */
void		llm_smooth_scales(const float *xmax, const float *wmax, int64_t n, double alpha, float *s);

/* wmax (cols) = max over the rows of f (rows, cols) of |f| per column, folded into wmax's values. */
void		llm_col_abs_max(const float *f, int64_t rows, int64_t cols, float *wmax);

/*
 * Quantize layer l's matrices (all float) with scheme after SmoothQuant's
 * scales with exponent alpha on the two inputs that a norm produces (q, k, v
 * and gate, up; max|X| from c), folded into those norms; wo and down are
 * quantized as they are.
 */
LlmStatus	llm_smooth_quantize_layer(LlmModel *m, int l, LlmQuantScheme scheme, const LlmCalib *c, double alpha,
									  LlmError *err);

#endif							/* LLM_SMOOTH_H */
