/*
 * awq.h
 *		Activation-aware weight quantization (AWQ, Lin et al., MLSys 2024):
 *		the per-layer scale search and folding.
 *
 * AWQ sits beside the model and the forward pass, which do not know it:
 * its statistics come from calibration runs (calib.h) and it quantizes
 * the layers through llm_model_quantize's layer hook (model.h), set up by
 * llm_model_load_compressed() (compress.h).  The PostgreSQL worker does
 * not include this header: it loads through llm_model_load_with() in
 * engine.h.
 */
#ifndef LLM_AWQ_H
#define LLM_AWQ_H

#include "calib.h"
#include "model.h"

/*
 * The last step of a layer's quantization, for matrix k (llm_layer_matrix's
 * order) of layer l: replace w by its float values f (rows, cols), whose
 * columns were multiplied by s (cols; NULL: not scaled), quantized with
 * scheme.  GPTQ's (gptq.h) is one; without one, rounding to nearest.
 */
typedef LlmStatus (*LlmMatrixQuantizer) (void *ctx, LlmWeight *w, float *f, int l, int k, const float *s,
										 LlmQuantScheme scheme, LlmError *err);

/*
 * Quantize layer l's seven matrices (all float) with scheme after choosing,
 * per group of matrices that share an input, the per-input-channel scale
 * s = mean|x|^alpha (alpha on a grid; alpha 0 is plain quantization) that
 * minimises the activation-weighted quantization error, and folding 1/s
 * into what produces the input: attention and FFN norms for q/k/v and
 * gate/up, v's rows for the output projection, up's rows for down.  The
 * scaled matrices are quantized by fn (with fn_ctx) when given, else
 * rounded to nearest.
 */
LlmStatus	llm_awq_quantize_layer(LlmModel *m, int l, LlmQuantScheme scheme, const LlmCalib *c,
								   LlmMatrixQuantizer fn, void *fn_ctx, LlmError *err);

/* Scale the columns of f (rows, cols) by s. */
void		llm_scale_cols(float *f, int64_t rows, int64_t cols, const float *s);

/* Divide a norm weight (n) by s, as the model uses it: w, or 1 + w when add_one. */
void		llm_unscale_norm(float *w, int64_t n, const float *s, bool add_one);

#endif							/* LLM_AWQ_H */
