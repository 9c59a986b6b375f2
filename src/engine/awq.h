/*
 * awq.h
 *		Activation-aware weight quantization (AWQ, Lin et al., MLSys 2024):
 *		calibration statistics and the per-layer scale search and folding.
 */
#ifndef LLM_AWQ_H
#define LLM_AWQ_H

#include "forward.h"
#include "model.h"

/* Allocate zeroed statistics for the model's shape. */
LlmStatus	llm_calib_init(LlmCalib *c, const LlmConfig *cfg, LlmError *err);
void		llm_calib_free(LlmCalib *c);

/* Run the model over the whole chunks of n tokens (BOS first in each), summing activations into c. */
LlmStatus	llm_awq_calibrate(const LlmModel *m, const int32_t *tokens, int n, int chunk, int n_threads,
							  LlmCalib *c, LlmError *err);

/*
 * Quantize layer l's seven matrices (all float) with scheme after choosing,
 * per group of matrices that share an input, the per-input-channel scale
 * s = mean|x|^alpha (alpha on a grid; alpha 0 is plain quantization) that
 * minimises the activation-weighted quantization error, and folding 1/s
 * into what produces the input: attention and FFN norms for q/k/v and
 * gate/up, v's rows for the output projection, up's rows for down.
 */
LlmStatus	llm_awq_quantize_layer(LlmModel *m, int l, LlmQuantScheme scheme, const LlmCalib *c, LlmError *err);

#endif							/* LLM_AWQ_H */
