/*
 * model_load.c
 *		llm_model_load_with(): one load call for engine.h's callers, over
 *		the plain, quantizing and AWQ loaders (model.c, compress.c).
 */
#include "engine.h"

#include <string.h>

#include "compress.h"

/* Load option defaults: stored types, no calibration text, 1 thread. */
void
llm_model_load_options_default(LlmModelLoadOptions *o)
{
	memset(o, 0, sizeof(*o));
	o->quantize = LLM_QUANT_NONE;
	o->n_threads = 1;
}

/* Load a GGUF model as o says: quantized, with AWQ scales when calibration text is given. */
LlmStatus
llm_model_load_with(const char *path, const LlmModelLoadOptions *o, LlmModel **out, LlmError *err)
{
	if (o->calib_text != NULL)
	{
		LlmCompressOptions co;

		llm_compress_options_default(&co, o->quantize);
		co.n_threads = o->n_threads;
		return llm_model_load_compressed(path, &co, o->calib_text, o->calib_len, out, err);
	}
	return llm_model_load_quantized(path, o->quantize, out, err);
}
