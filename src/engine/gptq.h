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
 * GPTQ one matrix f (rows, cols), floats replaced in place by their
 * quantized values (on scheme's grids; scales (rows, cols /
 * llm_quant_scheme_group) receives the grids' scales), given xtx (cols,
 * cols), the sums of x xᵀ of its inputs (upper triangle read), and s
 * (cols), the scales f's columns were multiplied by (AWQ's; NULL for
 * none), so the inputs are x / s.  When H + λI is not positive definite λ
 * grows tenfold, up to four times, then LLM_ERR_INVALID.
 */
LlmStatus	llm_gptq_matrix(float *f, int64_t rows, int64_t cols, const double *xtx, const float *s,
							LlmQuantScheme scheme, const LlmGptqOptions *o, float *scales, LlmError *err);

/* What llm_gptq_quantizer needs: the calibration statistics with x xᵀ, and the options. */
typedef struct LlmGptq
{
	const LlmCalib *calib;
	LlmGptqOptions opts;
} LlmGptq;

/*
 * An LlmMatrixQuantizer (awq.h; ctx an LlmGptq): GPTQ matrix k of layer l
 * (float values f, columns scaled by s or NULL) and store it in w in
 * scheme's blocks.
 */
LlmStatus	llm_gptq_quantizer(void *ctx, LlmWeight *w, float *f, int l, int k, const float *s,
							   LlmQuantScheme scheme, LlmError *err);

/* GPTQ every float matrix of layer l whose rows fit scheme; the others stay as they are. */
LlmStatus	llm_gptq_quantize_layer(LlmModel *m, int l, LlmQuantScheme scheme, const LlmGptq *g, LlmError *err);

#endif							/* LLM_GPTQ_H */
