/*
 * gptq.h
 *		GPTQ (Frantar et al., ICLR 2023): quantization of a weight matrix
 *		column by column, each column's rounding error pushed onto the
 *		columns not yet quantized through the inverse Hessian of the
 *		layer-wise squared error, H = 2 XᵀX of the matrix's calibration
 *		inputs (calib.h).
 *
 * Offline only (llm-cli quantize --method gptq, through compress.h); the
 * result is stored in the engine's own schemes (INT8 per output channel,
 * INT4 per group of 32 or 128), so the kernels serve it unchanged.
 */
#ifndef LLM_GPTQ_H
#define LLM_GPTQ_H

#include <stdbool.h>
#include <stdint.h>

#include "awq.h"
#include "calib.h"
#include "model.h"

#define LLM_GPTQ_BLOCK 128		/* columns per block of lazy updates (the paper's B) */

/* How GPTQ runs. */
typedef struct LlmGptqOptions
{
	double		damp;			/* λ added to diag H, as a fraction of its mean (0.01) */
	bool		act_order;		/* columns in descending diag H, group scales fixed up front ("static groups") */
} LlmGptqOptions;

/* GPTQ's defaults: damping 0.01, the original column order. */
void		llm_gptq_options_default(LlmGptqOptions *o);

/*
 * The inverse-Hessian factor shared by the matrices of one input: U, upper
 * triangular with (H + λI)⁻¹ = UᵀU in the working column order, H = the
 * sums of x xᵀ of the inputs x / s.
 */
typedef struct LlmGptqFactor
{
	int64_t		cols;
	double	   *u;				/* (cols, cols) upper triangle, working order */
	int64_t    *perm;			/* (cols) original column of working column i */
	const double *xtx;			/* what it was made from, so a caller can reuse it */
	const float *s;
} LlmGptqFactor;

/*
 * Factor xtx (cols, cols; the upper triangle read) with column scales s
 * (cols; AWQ's, the inputs being x / s; NULL for none) into f, ordered by
 * o->act_order.  When H + λI is not positive definite λ grows tenfold, up
 * to four times, then LLM_ERR_INVALID.
 */
LlmStatus	llm_gptq_factor(LlmGptqFactor *f, const double *xtx, const float *s, int64_t cols,
							const LlmGptqOptions *o, LlmError *err);
void		llm_gptq_factor_free(LlmGptqFactor *f);

/*
 * What an OBS sweep (llm_obs_sweep) does at working column i of the weights
 * w (rows, cols; double, working order, updated by the sweep so far),
 * inside the block of columns [i1, i2): write into q (rows) the values the
 * column takes (rounded: GPTQ; zero or kept: SparseGPT, sparsegpt.h).
 */
typedef void (*LlmObsColumnFn) (void *ctx, const double *w, int64_t rows, int64_t i, int64_t i1, int64_t i2,
								double *q);

/*
 * The column sweep GPTQ and SparseGPT share: for each working column i of
 * w (rows, fac->cols; double, working order, updated in place), fn chooses
 * its new values q, and the error (w_i − q) / U_ii is pushed onto the later
 * columns through row i of fac's U, inside the block at once and beyond it
 * once per block of LLM_GPTQ_BLOCK (lazy batch updates).  False when out of
 * memory (w partly updated).
 */
bool		llm_obs_sweep(double *w, int64_t rows, const LlmGptqFactor *fac, LlmObsColumnFn fn, void *ctx);

/*
 * GPTQ one matrix f (rows, cols) whose input has the factor fac: floats
 * replaced in place by their quantized values, on scheme's grids, whose
 * scales (rows, cols / llm_quant_scheme_group) go to scales.
 */
LlmStatus	llm_gptq_matrix(float *f, int64_t rows, int64_t cols, const LlmGptqFactor *fac, LlmQuantScheme scheme,
							const LlmGptqOptions *o, float *scales, LlmError *err);

/* What llm_gptq_quantizer needs: the calibration statistics with x xᵀ, the options, the last factor made. */
typedef struct LlmGptq
{
	const LlmCalib *calib;
	LlmGptqOptions opts;
	LlmGptqFactor factor;		/* reused by the next matrix of the same input and scales */
} LlmGptq;

/*
 * An LlmMatrixQuantizer (awq.h; ctx an LlmGptq): GPTQ matrix k of layer l
 * (float values f, columns scaled by s or NULL) and store it in w in
 * scheme's blocks.
 */
LlmStatus	llm_gptq_quantizer(void *ctx, LlmWeight *w, float *f, int l, int k, const float *s,
							   LlmQuantScheme scheme, LlmError *err);

/*
 * The factor of the input of layer l's matrix k (cols columns, scaled by s
 * or NULL) in g->factor: made with g->opts, or kept when the last one made
 * was of the same input and scales (q, k, v and gate, up share one).
 */
LlmStatus	llm_gptq_factor_of(LlmGptq *g, int l, int k, const float *s, int64_t cols, LlmError *err);

/* GPTQ every float matrix of layer l whose rows fit scheme; the others stay as they are. */
LlmStatus	llm_gptq_quantize_layer(LlmModel *m, int l, LlmQuantScheme scheme, LlmGptq *g, LlmError *err);

#endif							/* LLM_GPTQ_H */
