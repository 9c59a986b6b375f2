/*
 * awq.h
 *		Activation-aware weight quantization (AWQ, Lin et al., MLSys 2024):
 *		calibration statistics, the per-layer scale search and folding, and
 *		loading a model quantized that way.
 *
 * AWQ sits beside the model and the forward pass, which do not know it:
 * it watches the calibration runs through an LlmObserver (forward.h) and
 * quantizes the layers through llm_model_quantize's layer hook (model.h).
 * The PostgreSQL worker does not include this header: it loads through
 * llm_model_load_with() in engine.h.
 */
#ifndef LLM_AWQ_H
#define LLM_AWQ_H

#include <stddef.h>

#include "model.h"

#define LLM_AWQ_CHUNK 256		/* tokens per calibration chunk (a fresh sequence each) */
#define LLM_AWQ_MAX_TOKENS 4096 /* calibration tokens used at most */

#define LLM_CALIB_SAMPLES 64	/* token rows kept of each matmul input, for the error search */

/*
 * Sums of |activation| per input channel of each layer's matmuls, gathered
 * over n_tokens calibration tokens.
 */
typedef struct LlmCalib
{
	int64_t		n_tokens;
	double	   *attn_in;		/* (n_layers, dim) into wq, wk, wv */
	double	   *wo_in;			/* (n_layers, n_heads * head_dim) into wo */
	double	   *ffn_in;			/* (n_layers, dim) into w_gate, w_up */
	double	   *down_in;		/* (n_layers, ffn_dim) into w_down */
	/* the first LLM_CALIB_SAMPLES token rows seen at each of the four inputs */
	float	   *attn_x;			/* (n_layers, LLM_CALIB_SAMPLES, dim) */
	float	   *wo_x;			/* (n_layers, LLM_CALIB_SAMPLES, n_heads * head_dim) */
	float	   *ffn_x;			/* (n_layers, LLM_CALIB_SAMPLES, dim) */
	float	   *down_x;			/* (n_layers, LLM_CALIB_SAMPLES, ffn_dim) */
} LlmCalib;

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
LlmStatus	llm_awq_quantize_layer(LlmModel *m, int l, LlmQuantScheme scheme, const LlmCalib *c,
								   LlmError *err);

/*
 * Load the float model at path and quantize it with scheme (not NONE) and
 * AWQ scales calibrated on text (len bytes; tokenized with BOS, at most
 * LLM_AWQ_MAX_TOKENS tokens in chunks of LLM_AWQ_CHUNK, on n_threads).
 * LLM_ERR_INVALID for an empty text or one shorter than a chunk,
 * LLM_ERR_UNSUPPORTED when no layer's weight matrices are float; the
 * changed norms and matrices are what llm-cli quantize --calib writes.
 */
LlmStatus	llm_model_load_awq(const char *path, LlmQuantScheme scheme, const char *text, size_t len,
							   int n_threads, LlmModel **out, LlmError *err);

#endif							/* LLM_AWQ_H */
