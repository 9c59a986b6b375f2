/*
 * compress.c
 *		A float model compressed with calibration (see compress.h): load,
 *		calibrate (calib.c), then quantize each layer with AWQ (awq.c),
 *		GPTQ (gptq.c), AWQ then GPTQ, or SmoothQuant (smooth.c), or prune
 *		it (Wanda, prune.c; SparseGPT, sparsegpt.c) and round it to
 *		nearest, through llm_model_quantize's layer hook; the embedding
 *		and output matrix are rounded to nearest.
 */
#include "compress.h"

#include "engine.h"
#include "prune.h"
#include "smooth.h"

#include <string.h>

/* Defaults: AWQ alone, GPTQ's default options, all calibration tokens, 1 thread. */
void
llm_compress_options_default(LlmCompressOptions *o, LlmQuantScheme scheme)
{
	memset(o, 0, sizeof(*o));
	o->scheme = scheme;
	o->awq = true;
	o->smooth_alpha = 0.5;
	llm_gptq_options_default(&o->gptq_opts);
	o->n_threads = 1;
}

/* A name for o's methods in messages. */
const char *
llm_compress_method_name(const LlmCompressOptions *o)
{
	static const char *const prune[] = {NULL, "Wanda 50%", "Wanda 2:4", "SparseGPT 50%", "SparseGPT 2:4"};

	if (o->prune != LLM_PRUNE_NONE)
		return prune[o->prune];
	return o->smooth ? "SmoothQuant" : o->awq && o->gptq ? "AWQ+GPTQ" : o->gptq ? "GPTQ" : "AWQ";
}

/* What the layer hook needs. */
typedef struct CompressCtx
{
	const LlmCompressOptions *o;
	LlmGptq		gptq;
} CompressCtx;

/* llm_model_quantize's layer hook: layers whose matrices are all float go through o's methods. */
static LlmStatus
compress_layer(void *ctx, LlmModel *m, int l, LlmQuantScheme scheme, bool *done, LlmError *err)
{
	CompressCtx *cc = ctx;

	*done = llm_layer_is_float(&m->weights.layers[l]);
	if (!*done)
		return LLM_OK;
	if (cc->o->prune != LLM_PRUNE_NONE)
	{
		bool		sparsegpt = cc->o->prune == LLM_PRUNE_SPARSEGPT_HALF || cc->o->prune == LLM_PRUNE_SPARSEGPT_24;
		bool		pattern24 = cc->o->prune == LLM_PRUNE_WANDA_24 || cc->o->prune == LLM_PRUNE_SPARSEGPT_24;

		*done = false;			/* pruned to F32 copies, then rounded matrix by matrix */
		return llm_prune_layer(m, l, cc->gptq.calib, sparsegpt ? &cc->gptq : NULL, pattern24, err);
	}
	if (cc->o->smooth)
		return llm_smooth_quantize_layer(m, l, scheme, cc->gptq.calib, cc->o->smooth_alpha, err);
	if (cc->o->awq)
		return llm_awq_quantize_layer(m, l, scheme, cc->gptq.calib, cc->o->gptq ? llm_gptq_quantizer : NULL,
									  &cc->gptq, err);
	return llm_gptq_quantize_layer(m, l, scheme, &cc->gptq, err);
}

/* Calibrate the float model m on text and quantize it as o says. */
static LlmStatus
compress_model(LlmModel *m, const LlmCompressOptions *o, const char *text, size_t len, LlmError *err)
{
	LlmCalib	calib;
	CompressCtx cc = {o, {.calib = &calib, .opts = o->gptq_opts}};
	bool		sparsegpt = o->prune == LLM_PRUNE_SPARSEGPT_HALF || o->prune == LLM_PRUNE_SPARSEGPT_24;
	bool		any_float = false;
	LlmStatus	st;

	if (sparsegpt)
		cc.gptq.opts.act_order = false; /* its masks are of consecutive columns in the original order */

	for (int l = 0; l < m->config.n_layers; l++)
		any_float |= llm_layer_is_float(&m->weights.layers[l]);
	if (!any_float)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "%s needs float weight matrices (F32, F16 or BF16), but the model's are %s",
							 llm_compress_method_name(o), m->info.weight_types);
	if ((st = llm_calib_init(&calib, &m->config, o->gptq || sparsegpt, err)))
		return st;
	if (!(st = llm_calib_text(m, text, len, o->max_tokens, o->n_threads, llm_compress_method_name(o), &calib, err)))
		st = llm_model_quantize(m, o->scheme, compress_layer, &cc, err);
	llm_gptq_factor_free(&cc.gptq.factor);
	llm_calib_free(&calib);
	return st;
}

/* Load the float model at path and quantize it as o says (see compress.h). */
LlmStatus
llm_model_load_compressed(const char *path, const LlmCompressOptions *o, const char *text, size_t len,
						  LlmModel **out, LlmError *err)
{
	LlmModel   *m = NULL;
	LlmStatus	st;

	if (o->scheme == LLM_QUANT_NONE)
		return llm_error_set(err, LLM_ERR_INVALID, "%s needs a quantization scheme (int8, int4_g32 or int4_g128)",
							 llm_compress_method_name(o));
	if (text == NULL || len == 0)
		return llm_error_set(err, LLM_ERR_INVALID, "the calibration text is empty");
	if ((st = llm_model_load_quantized(path, LLM_QUANT_NONE, &m, err)))
		return st;
	if ((st = compress_model(m, o, text, len, err)))
	{
		llm_model_free(m);
		return st;
	}
	*out = m;
	return LLM_OK;
}
