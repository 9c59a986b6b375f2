/*
 * calib.h
 *		Calibration statistics of a float model's matmul inputs, gathered by
 *		running it over a text, for the offline compression methods that
 *		need them (AWQ, awq.c; GPTQ, gptq.c).
 *
 * The statistics are taken through an LlmObserver (forward.h), so the
 * forward pass does not know them.  Per layer and per matmul input (the
 * four of LlmMatmulInput) they are the sums and maxima of |x| and the sums of x² per channel, the first
 * LLM_CALIB_SAMPLES token rows, and, when asked for, the sums of x xᵀ (the
 * Hessian of the layer-wise squared error, up to a factor 2).
 */
#ifndef LLM_CALIB_H
#define LLM_CALIB_H

#include <stdbool.h>
#include <stddef.h>

#include "forward.h"
#include "model.h"

#define LLM_CALIB_CHUNK 256		/* tokens per calibration chunk (a fresh sequence each) */
#define LLM_CALIB_MAX_TOKENS 4096	/* calibration tokens used at most */
#define LLM_CALIB_SAMPLES 64	/* token rows kept of each matmul input, for the error search */

/* The statistics of the four matmul inputs of every layer, over n_tokens calibration tokens. */
typedef struct LlmCalib
{
	int64_t		n_tokens;
	int			width[4];		/* channels of each LlmMatmulInput: dim, n_heads * head_dim, dim, ffn_dim */
	double	   *abs_sum[4];		/* (n_layers, width) sums of |x| per channel */
	float	   *abs_max[4];		/* (n_layers, width) max |x| per channel */
	double	   *sq_sum[4];		/* (n_layers, width) sums of x² per channel */
	float	   *samples[4];		/* (n_layers, LLM_CALIB_SAMPLES, width) the first token rows */
	double	   *xtx[4];			/* (n_layers, width, width) sums of x xᵀ (upper triangle), or NULL */
	double	   *scratch;		/* (width, rows) one call's input in double, transposed; for xtx */
	size_t		scratch_len;
	bool		failed;			/* an allocation in the observer failed */
} LlmCalib;

/* Allocate zeroed statistics for the model's shape, with the x xᵀ sums when hessians. */
LlmStatus	llm_calib_init(LlmCalib *c, const LlmConfig *cfg, bool hessians, LlmError *err);
void		llm_calib_free(LlmCalib *c);

/* Run the model over n tokens in chunks of chunk (BOS first in each), gathering c. */
LlmStatus	llm_calib_run(const LlmModel *m, const int32_t *tokens, int n, int chunk, int n_threads,
						  LlmCalib *c, LlmError *err);

/*
 * Tokenize text (len bytes, BOS first) and run the float model m over its
 * first max_tokens tokens (at most LLM_CALIB_MAX_TOKENS; 0 for that many)
 * in chunks of LLM_CALIB_CHUNK, gathering c (initialised by the caller).
 * LLM_ERR_INVALID for a text shorter than one chunk; what names the method
 * in messages ("AWQ").
 */
LlmStatus	llm_calib_text(const LlmModel *m, const char *text, size_t len, int max_tokens, int n_threads,
						   const char *what, LlmCalib *c, LlmError *err);

/* The mean |x| per channel (width) of input which of layer l. */
void		llm_calib_mean_abs(const LlmCalib *c, int l, LlmMatmulInput which, double *out);

/* The norm ‖X_j‖₂ over the calibration tokens per channel (width) of input which of layer l. */
void		llm_calib_norm(const LlmCalib *c, int l, LlmMatmulInput which, double *out);

/* The max |x| per channel (width) of input which of layer l. */
const float *llm_calib_max_abs(const LlmCalib *c, int l, LlmMatmulInput which);

/* The sums of x xᵀ (width, width), upper triangle, of input which of layer l; NULL without hessians. */
const double *llm_calib_xtx(const LlmCalib *c, int l, LlmMatmulInput which);

/* The first token rows (LLM_CALIB_SAMPLES, width) of input which of layer l. */
const float *llm_calib_samples(const LlmCalib *c, int l, LlmMatmulInput which);

/* The input that layer matrix k (llm_layer_matrix's order) multiplies. */
LlmMatmulInput llm_calib_input_of(int k);

/* A float copy (rows, cols) of a weight matrix; NULL when out of memory. */
float	   *llm_weight_to_float(const LlmWeight *w);

#endif							/* LLM_CALIB_H */
