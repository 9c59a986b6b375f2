/*
 * model.h
 *		The model as three plain structs, as in llama2.c: hyper-parameters
 *		(LlmConfig), weights (LlmWeights, pointing into the mapped GGUF file in
 *		their stored types) and, in forward.h, the run state.
 */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "jinja.h"
#include "quant.h"
#include "tokenizer.h"
#include "types.h"

typedef enum LlmArch
{
	LLM_ARCH_LLAMA,				/* also Mistral, whose GGUF files say "llama" */
	LLM_ARCH_GEMMA3,
	LLM_ARCH_QWEN2,
	LLM_ARCH_QWEN3,
	LLM_ARCH_GEMMA2,
	LLM_ARCH_PHI3
} LlmArch;

typedef enum LlmRopeMode
{
	LLM_ROPE_ADJACENT,			/* rotate (x[2i], x[2i+1]): GGUF's llama layout */
	LLM_ROPE_NEOX				/* rotate (x[i], x[i + rope_dim/2]) */
} LlmRopeMode;

typedef enum LlmActivation
{
	LLM_ACT_SILU,				/* SwiGLU: silu(gate) * up */
	LLM_ACT_GELU_TANH			/* GeGLU: gelu_tanh(gate) * up */
} LlmActivation;

typedef struct LlmConfig
{
	LlmArch		arch;
	int			dim;			/* embedding width */
	int			n_layers;
	int			n_heads;		/* query heads */
	int			n_kv_heads;		/* key/value heads (GQA) */
	int			head_dim;		/* width of one head */
	int			ffn_dim;		/* hidden width of the FFN */
	int			n_vocab;
	int			n_ctx;			/* trained context length */
	int			rope_dim;		/* leading dims of each head that are rotated */
	float		rope_base;		/* global layers */
	float		rope_base_local;	/* sliding-window layers (gemma2, gemma3) */
	float		rope_freq_scale;	/* linear RoPE scaling: angles times this (1 = none) */
	float		rope_freq_scale_local;	/* the same on sliding-window layers */
	LlmRopeMode rope_mode;
	float		rms_eps;
	LlmActivation act;
	float		attn_scale;		/* multiplies q.k (1/sqrt(head_dim) unless the model says) */
	float		embd_scale;		/* multiplies the token embedding (1, or sqrt(dim) in gemma3) */
	bool		norm_add_one;	/* RMSNorm weight used as (1 + w) */
	int			sliding_window; /* 0 = none */
	int			sliding_pattern;	/* every n-th layer is global (gemma3: 6), 0 = all global */
	float		attn_softcap;	/* 0 = off */
	float		final_softcap;	/* 0 = off */
} LlmConfig;

/* A weight matrix in its stored type: rows of cols values. */
typedef struct LlmWeight
{
	const char *name;
	LlmType		type;
	int64_t		cols;			/* ne[0]: input width */
	int64_t		rows;			/* ne[1]: output width */
	size_t		row_bytes;
	const uint8_t *data;		/* (rows, row_bytes), in the map or in owned */
	void	   *owned;			/* a repacked copy the model frees, else NULL */
} LlmWeight;

typedef struct LlmLayerWeights
{
	float	   *attn_norm;		/* (dim) */
	LlmWeight	wq;				/* (n_heads * head_dim, dim); phi3: rows of its fused attn_qkv */
	LlmWeight	wk;				/* (n_kv_heads * head_dim, dim) */
	LlmWeight	wv;				/* (n_kv_heads * head_dim, dim) */
	float	   *bq;				/* (n_heads * head_dim) Q bias (qwen2), else NULL */
	float	   *bk;				/* (n_kv_heads * head_dim) K bias, else NULL */
	float	   *bv;				/* (n_kv_heads * head_dim) V bias, else NULL */
	LlmWeight	wo;				/* (dim, n_heads * head_dim) */
	float	   *q_norm;			/* (head_dim) gemma3, qwen3, else NULL */
	float	   *k_norm;			/* (head_dim) gemma3, qwen3, else NULL */
	float	   *post_attn_norm; /* (dim) gemma2, gemma3, else NULL */
	float	   *ffn_norm;		/* (dim) */
	LlmWeight	w_gate;			/* (ffn_dim, dim); phi3: the first half of its fused ffn_up */
	LlmWeight	w_up;			/* (ffn_dim, dim); phi3: the second half */
	LlmWeight	w_down;			/* (dim, ffn_dim) */
	float	   *post_ffn_norm;	/* (dim) gemma2, gemma3, else NULL */
	bool		is_local;		/* sliding-window layer */
} LlmLayerWeights;

/* How many matrices a layer has (llm_layer_matrix's order: q, k, v, o, gate, up, down). */
#define LLM_LAYER_MATRICES 7

/* Matrix i (< LLM_LAYER_MATRICES) of layer lw: the one list every loop over a layer's matrices walks. */
static inline LlmWeight *
llm_layer_matrix(LlmLayerWeights *lw, int i)
{
	LlmWeight  *m[LLM_LAYER_MATRICES] = {&lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down};

	return m[i];
}

/* llm_layer_matrix of a layer read only. */
static inline const LlmWeight *
llm_layer_matrix_const(const LlmLayerWeights *lw, int i)
{
	return llm_layer_matrix((LlmLayerWeights *) lw, i);
}

/* Whether every matrix of layer lw is stored as floats (F32, F16, BF16), as AWQ needs. */
bool		llm_layer_is_float(const LlmLayerWeights *lw);

typedef struct LlmWeights
{
	LlmWeight	tok_embd;		/* (n_vocab, dim) */
	float	   *output_norm;	/* (dim) */
	LlmWeight	output;			/* (n_vocab, dim); the embedding when tied */
	LlmLayerWeights *layers;	/* (n_layers) */
} LlmWeights;

struct LlmModel
{
	LlmGguf    *gguf;
	LlmConfig	config;
	LlmWeights	weights;
	LlmTokenizer *tokenizer;
	LlmModelInfo info;
	float	   *rope_inv_freq;	/* (rope_dim / 2) global layers, freq factors and scaling applied */
	float	   *rope_inv_freq_local;	/* (rope_dim / 2) sliding-window layers */
	LlmJinja   *chat_template;	/* tokenizer.chat_template parsed, or NULL: */
	LlmStatus	chat_template_status;	/* why not (no template, or one the interpreter refuses) */
	char		chat_template_error[LLM_ERROR_MSG_LEN];
};

/* Make buf (w's rows in type) w's data, owned by w; a previously owned copy is freed. */
void		llm_weight_set_owned(LlmWeight *w, LlmType type, void *buf);

/* Replace w by src (w's shape, in type from) quantized with scheme, in a new owned buffer. */
LlmStatus	llm_weight_quantize_from(LlmWeight *w, LlmType from, const void *src, LlmQuantScheme scheme,
									 LlmError *err);

/*
 * A way to quantize layer l of m with scheme other than matrix by matrix
 * (AWQ's, awq.c): sets *done when it did; else the plain way follows.
 */
typedef LlmStatus (*LlmLayerQuantizer) (void *ctx, LlmModel *m, int l, LlmQuantScheme scheme, bool *done,
										LlmError *err);

/*
 * Quantize m's float weight matrices with scheme: each layer first offered
 * to layer_fn (with ctx) when given, else, or when it declines, matrix by
 * matrix; the embedding and output matrix plainly.
 */
LlmStatus	llm_model_quantize(LlmModel *m, LlmQuantScheme scheme, LlmLayerQuantizer layer_fn, void *ctx,
							   LlmError *err);

#endif							/* LLM_MODEL_H */
