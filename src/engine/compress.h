/*
 * compress.h
 *		Loading a float model compressed by the offline methods that need
 *		calibration text: AWQ scales (awq.h), GPTQ (gptq.h), or both (AWQ's
 *		scaling first, then GPTQ on the scaled matrices); SmoothQuant's
 *		scales (smooth.h) with rounding to nearest; or pruning by Wanda
 *		(prune.h) or SparseGPT (sparsegpt.h) then rounding to nearest.
 *
 * The result lives in memory (llm-cli --calib, the worker's
 * llm.quantize_calib through llm_model_load_with) or is written to a file
 * by llm-cli quantize --calib.
 */
#ifndef LLM_COMPRESS_H
#define LLM_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "gptq.h"
#include "model.h"

/* Pruning before rounding (prune.h, sparsegpt.h). */
typedef enum LlmPrune
{
	LLM_PRUNE_NONE,
	LLM_PRUNE_WANDA_HALF,		/* Wanda, 50% of each row */
	LLM_PRUNE_WANDA_24,			/* Wanda, 2 of every 4 consecutive inputs */
	LLM_PRUNE_SPARSEGPT_HALF,	/* SparseGPT, 50% of each row */
	LLM_PRUNE_SPARSEGPT_24		/* SparseGPT, 2 of every 4 consecutive inputs */
} LlmPrune;

/* Which methods, on what calibration. */
typedef struct LlmCompressOptions
{
	LlmQuantScheme scheme;		/* not NONE */
	bool		awq;			/* AWQ scales */
	bool		gptq;			/* GPTQ instead of rounding to nearest */
	bool		smooth;			/* SmoothQuant's scales instead (neither AWQ nor GPTQ) */
	double		smooth_alpha;	/* its exponent α (0.5) */
	LlmPrune	prune;			/* pruning before rounding to nearest (then no other method; SparseGPT takes gptq_opts.damp) */
	LlmGptqOptions gptq_opts;
	int			max_tokens;		/* calibration tokens used at most (0: LLM_CALIB_MAX_TOKENS) */
	int			n_threads;		/* for the calibration runs (>= 1) */
} LlmCompressOptions;

/* Defaults: AWQ alone, GPTQ's default options, all calibration tokens, 1 thread. */
void		llm_compress_options_default(LlmCompressOptions *o, LlmQuantScheme scheme);

/*
 * Load the float model at path and quantize it with o->scheme and the
 * methods o names, calibrated on text (len bytes, tokenized with BOS, in
 * chunks of LLM_CALIB_CHUNK).  LLM_ERR_INVALID for an empty text, one
 * shorter than a chunk, or no scheme; LLM_ERR_UNSUPPORTED when no layer's
 * weight matrices are float.
 */
LlmStatus	llm_model_load_compressed(const char *path, const LlmCompressOptions *o, const char *text, size_t len,
									  LlmModel **out, LlmError *err);

/* A name for o's methods in messages: "AWQ", "GPTQ", "AWQ+GPTQ", "SmoothQuant", "Wanda 50%", "SparseGPT 2:4"... */
const char *llm_compress_method_name(const LlmCompressOptions *o);

#endif							/* LLM_COMPRESS_H */
