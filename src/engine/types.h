/*
 * types.h
 *		Small types shared by the engine's public header (engine.h) and its
 *		internal ones (model.h, kv.h, quant.h): the model handle, the model's
 *		description and the enums of the engine's settings.
 *
 * Nothing here has behaviour; it exists so that internal headers need not
 * include engine.h, and engine.h need not include internal headers.
 */
#ifndef LLM_TYPES_H
#define LLM_TYPES_H

#include <stdint.h>

/* A loaded model; opaque outside the engine (model.h defines it). */
typedef struct LlmModel LlmModel;

/* What a loaded model is, for logs and llm_worker_status(). */
typedef struct LlmModelInfo
{
	char		arch[32];		/* "llama", "gemma3" */
	char		name[128];		/* general.name, or the file name */
	int64_t		n_params;
	int			n_layers;
	int			dim;
	int			n_heads;
	int			n_kv_heads;
	int			n_vocab;
	int			n_ctx;			/* the model's context length */
	char		weight_types[128];	/* e.g. "F32 x 48" or "Q4_K x 100, Q6_K x 12" */
} LlmModelInfo;

/* Own quantization schemes for float weights, at load time or by llm-cli quantize. */
typedef enum LlmQuantScheme
{
	LLM_QUANT_NONE = 0,
	LLM_QUANT_INT8,				/* one scale per output channel (Q8_0 layout) */
	LLM_QUANT_INT4_G32,			/* one scale per 32 inputs (Q4_0 layout) */
	LLM_QUANT_INT4_G128			/* one scale per 128 inputs (Q4_0 layout) */
} LlmQuantScheme;

/* How keys and values are stored in the KV cache. */
typedef enum LlmKvType
{
	LLM_KV_F32,
	LLM_KV_F16,
	LLM_KV_I8					/* int8 with a float scale per (position, KV head) */
} LlmKvType;

/* Which keys a sequence over its KV budget drops (see kv.h). */
typedef enum LlmEvictPolicy
{
	LLM_EVICT_H2O,				/* sinks, the newest half of the budget, and the heavy hitters */
	LLM_EVICT_H2O_MEAN,			/* the same, heavy hitters by mean attention per query since stored */
	LLM_EVICT_STREAMING,		/* sinks and the newest positions (StreamingLLM) */
	LLM_EVICT_WINDOW			/* the newest positions only */
} LlmEvictPolicy;

/* Where the model runs. */
typedef enum LlmDevice
{
	LLM_DEVICE_AUTO,			/* CUDA when built with it and a GPU is visible, else the CPU */
	LLM_DEVICE_CPU,
	LLM_DEVICE_CUDA
} LlmDevice;

#endif							/* LLM_TYPES_H */
