/*
 * model.c
 *		Loading a model from a GGUF file: hyper-parameters from the
 *		architecture's metadata keys, weight tensors checked for shape and
 *		type, and the tokenizer.
 *
 * Weights stay in the mapped file in their stored type; only the small
 * one-dimensional norm vectors are converted to float copies.
 */
#include "chat.h"
#include "model.h"
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM (1 << 20)

/* Read "<arch>.<suffix>" as a positive int within max. */
static LlmStatus
get_arch_int(const LlmGguf *g, const char *arch, const char *suffix, bool required,
			 int def, int max, int *out, LlmError *err)
{
	char		key[128];
	int64_t		v;
	LlmStatus	st;

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	st = llm_gguf_get_i64(g, key, &v, err);
	if (st == LLM_ERR_NOT_FOUND && !required)
	{
		*out = def;
		return LLM_OK;
	}
	if (st == LLM_ERR_NOT_FOUND)
		return llm_error_set(err, LLM_ERR_FORMAT, "missing metadata key \"%s\"", key);
	if (st != LLM_OK)
		return st;
	if (v < 1 || v > max)
		return llm_error_set(err, LLM_ERR_FORMAT, "metadata key \"%s\" is %lld, expected 1 to %d",
							 key, (long long) v, max);
	*out = (int) v;
	return LLM_OK;
}

/* Read "<arch>.<suffix>" as a finite float, or def when absent. */
static LlmStatus
get_arch_float(const LlmGguf *g, const char *arch, const char *suffix, float def,
			   float *out, LlmError *err)
{
	char		key[128];
	LlmStatus	st;

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	st = llm_gguf_get_f32(g, key, out, err);
	if (st == LLM_ERR_NOT_FOUND)
	{
		*out = def;
		return LLM_OK;
	}
	if (st == LLM_OK && !isfinite(*out))
		return llm_error_set(err, LLM_ERR_FORMAT, "metadata key \"%s\" is not finite", key);
	return st;
}

/*
 * RoPE scaling from "<arch>.rope.scaling.*", as llama.cpp reads it: no type
 * means "linear", whose factor f (absent or 0: none) multiplies every angle
 * by 1/f; "none" is none.  Llama 3.1's scaling is no key but a tensor of
 * per-pair frequency factors (rope_freqs.weight, load_weights).  YaRN,
 * LongRoPE and an attention factor other than 1 change more than the
 * angles and are refused.
 */
static LlmStatus
load_rope_scaling(const LlmGguf *g, const char *arch, LlmConfig *c, LlmError *err)
{
	char		key[128];
	char	   *type = NULL;
	float		factor;
	float		attn_factor;
	LlmStatus	st;

	snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
	st = llm_gguf_get_str(g, key, &type, err);
	if (st != LLM_OK && st != LLM_ERR_NOT_FOUND)
		return st;
	if (type != NULL && strcmp(type, "linear") != 0 && strcmp(type, "none") != 0)
	{
		st = llm_error_set(err, LLM_ERR_UNSUPPORTED, "unsupported RoPE scaling \"%s\" (%s) in this %s model",
						   type, key, arch);
		free(type);
		return st;
	}
	c->rope_freq_scale = 1.0f;
	if (type == NULL || strcmp(type, "linear") == 0)
	{
		if ((st = get_arch_float(g, arch, "rope.scaling.factor", 0.0f, &factor, err)))
			goto done;
		if (factor < 0.0f)
		{
			st = llm_error_set(err, LLM_ERR_FORMAT, "metadata key \"%s.rope.scaling.factor\" is negative", arch);
			goto done;
		}
		if (factor != 0.0f)
			c->rope_freq_scale = 1.0f / factor;
	}
	c->rope_freq_scale_local = c->rope_freq_scale;
	if ((st = get_arch_float(g, arch, "rope.scaling.attn_factor", 1.0f, &attn_factor, err)))
		goto done;
	if (attn_factor != 1.0f)
		st = llm_error_set(err, LLM_ERR_UNSUPPORTED,
						   "unsupported RoPE attention factor %g (%s.rope.scaling.attn_factor) in this %s model",
						   attn_factor, arch, arch);
done:
	free(type);
	return st;
}

/* Fill the hyper-parameters shared by all architectures from "<arch>.*" keys. */
static LlmStatus
load_common_config(const LlmGguf *g, const char *arch, LlmConfig *c, LlmError *err)
{
	LlmStatus	st;

	if ((st = get_arch_int(g, arch, "embedding_length", true, 0, MAX_DIM, &c->dim, err)) ||
		(st = get_arch_int(g, arch, "block_count", true, 0, 4096, &c->n_layers, err)) ||
		(st = get_arch_int(g, arch, "attention.head_count", true, 0, 4096, &c->n_heads, err)) ||
		(st = get_arch_int(g, arch, "attention.head_count_kv", false, c->n_heads, 4096, &c->n_kv_heads, err)) ||
		(st = get_arch_int(g, arch, "feed_forward_length", true, 0, MAX_DIM, &c->ffn_dim, err)) ||
		(st = get_arch_int(g, arch, "context_length", false, 2048, 1 << 24, &c->n_ctx, err)) ||
		(st = get_arch_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-5f, &c->rms_eps, err)) ||
		(st = get_arch_float(g, arch, "rope.freq_base", 10000.0f, &c->rope_base, err)))
		return st;
	if (c->n_heads % c->n_kv_heads != 0)
		return llm_error_set(err, LLM_ERR_FORMAT,
							 "%s.attention.head_count (%d) is not a multiple of head_count_kv (%d)",
							 arch, c->n_heads, c->n_kv_heads);
	if ((st = get_arch_int(g, arch, "attention.key_length", false, c->dim / c->n_heads,
						   MAX_DIM, &c->head_dim, err)))
		return st;
	if (c->head_dim * c->n_heads == 0)
		return llm_error_set(err, LLM_ERR_FORMAT, "%s.embedding_length (%d) is smaller than head_count (%d)",
							 arch, c->dim, c->n_heads);
	if ((st = get_arch_int(g, arch, "rope.dimension_count", false, c->head_dim, MAX_DIM, &c->rope_dim, err)))
		return st;
	if (c->rope_dim > c->head_dim || c->rope_dim % 2 != 0)
		return llm_error_set(err, LLM_ERR_FORMAT,
							 "%s.rope.dimension_count (%d) must be even and at most the head width (%d)",
							 arch, c->rope_dim, c->head_dim);
	c->rope_base_local = c->rope_base;
	if ((st = load_rope_scaling(g, arch, c, err)))
		return st;
	if (c->head_dim > 1024)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "%s head width %d exceeds the supported 1024", arch, c->head_dim);
	c->attn_scale = 1.0f / sqrtf((float) c->head_dim);
	c->embd_scale = 1.0f;
	return LLM_OK;
}

/*
 * Which layers are sliding-window ones, as llama.cpp's load_swa_pattern
 * reads "<arch>.attention.sliding_window_pattern": absent, every def-th
 * layer is global (the def-th, 2*def-th, ...), the others windowed; an
 * integer n >= 1 in its place.  A per-layer array (and 0, every layer
 * windowed) is refused: nothing this engine reads writes them for these
 * architectures.
 */
static LlmStatus
load_swa_pattern(const LlmGguf *g, const char *arch, int def, LlmConfig *c, LlmError *err)
{
	char		key[128];
	const LlmGgufValue *v;

	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", arch);
	v = llm_gguf_get(g, key);
	if (v == NULL)
	{
		c->sliding_pattern = def;
		return LLM_OK;
	}
	if (v->type == LLM_GGUF_ARRAY || v->type == LLM_GGUF_STRING || v->type == LLM_GGUF_BOOL ||
		v->type == LLM_GGUF_FLOAT32 || v->type == LLM_GGUF_FLOAT64)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "a per-layer %s in this %s model is not supported", key, arch);
	return get_arch_int(g, arch, "attention.sliding_window_pattern", true, def, 4096, &c->sliding_pattern, err);
}

/* Llama: RMSNorm, adjacent-pair RoPE, GQA, SwiGLU. */
static LlmStatus
load_config_llama(const LlmGguf *g, LlmConfig *c, LlmError *err)
{
	c->arch = LLM_ARCH_LLAMA;
	c->rope_mode = LLM_ROPE_ADJACENT;
	c->act = LLM_ACT_SILU;
	return load_common_config(g, "llama", c, err);
}

/*
 * Gemma 3 (llama.cpp's gemma3 graph, checked against this file's metadata):
 * embeddings scaled by sqrt(dim); RMSNorm with the weights as stored (the
 * GGUF converter already added Gemma's +1); norms before and after attention
 * and FFN; per-head RMSNorm of Q and K; NEOX-style RoPE; GELU(tanh) gated
 * FFN; five sliding-window layers (RoPE base 10000, window
 * gemma3.attention.sliding_window) for every global one (RoPE base
 * gemma3.rope.freq_base); q.k scaled by 1/sqrt(key_length); tied output;
 * logit soft-capping only when the metadata gives it.
 */
static LlmStatus
load_config_gemma3(const LlmGguf *g, LlmConfig *c, LlmError *err)
{
	LlmStatus	st;

	c->arch = LLM_ARCH_GEMMA3;
	c->rope_mode = LLM_ROPE_NEOX;
	c->act = LLM_ACT_GELU_TANH;
	if ((st = load_common_config(g, "gemma3", c, err)) ||
		(st = get_arch_int(g, "gemma3", "attention.sliding_window", false, 0, 1 << 24, &c->sliding_window, err)) ||
		(st = get_arch_float(g, "gemma3", "rope.local.freq_base", 10000.0f, &c->rope_base_local, err)) ||
		(st = get_arch_float(g, "gemma3", "attn_logit_softcapping", 0.0f, &c->attn_softcap, err)) ||
		(st = get_arch_float(g, "gemma3", "final_logit_softcapping", 0.0f, &c->final_softcap, err)))
		return st;
	c->sliding_pattern = 0;
	if (c->sliding_window > 0 && (st = load_swa_pattern(g, "gemma3", 6, c, err)))
		return st;
	c->rope_freq_scale_local = 1.0f;	/* llama.cpp scales only gemma3's global layers */
	c->embd_scale = sqrtf((float) c->dim);
	return LLM_OK;
}

/* Qwen2 / Qwen2.5: Llama with biases on Q, K and V and NEOX-style RoPE. */
static LlmStatus
load_config_qwen2(const LlmGguf *g, LlmConfig *c, LlmError *err)
{
	c->arch = LLM_ARCH_QWEN2;
	c->rope_mode = LLM_ROPE_NEOX;
	c->act = LLM_ACT_SILU;
	return load_common_config(g, "qwen2", c, err);
}

/* Qwen3: Llama with per-head RMSNorm of Q and K before RoPE, NEOX-style RoPE, no biases. */
static LlmStatus
load_config_qwen3(const LlmGguf *g, LlmConfig *c, LlmError *err)
{
	c->arch = LLM_ARCH_QWEN3;
	c->rope_mode = LLM_ROPE_NEOX;
	c->act = LLM_ACT_SILU;
	return load_common_config(g, "qwen3", c, err);
}

/*
 * Gemma 2 (llama.cpp's gemma2 graph): embeddings scaled by sqrt(dim); norms
 * before and after attention and FFN, weights as stored; NEOX RoPE (base
 * gemma2.rope.freq_base_swa on the sliding-window layers, which default to
 * the global base); GELU(tanh) gated FFN; every other layer, the first
 * included (unless gemma2.attention.sliding_window_pattern says otherwise),
 * a sliding window of gemma2.attention.sliding_window (default 4096); attention logits always soft-capped (default 50) and so are the
 * final logits (default 30); q.k scaled by 1/sqrt(key_length), but by
 * 1/sqrt(dim / heads) in the 27B (46 layers); tied output.
 */
static LlmStatus
load_config_gemma2(const LlmGguf *g, LlmConfig *c, LlmError *err)
{
	LlmStatus	st;

	c->arch = LLM_ARCH_GEMMA2;
	c->rope_mode = LLM_ROPE_NEOX;
	c->act = LLM_ACT_GELU_TANH;
	if ((st = load_common_config(g, "gemma2", c, err)) ||
		(st = get_arch_int(g, "gemma2", "attention.sliding_window", false, 4096, 1 << 24, &c->sliding_window, err)) ||
		(st = get_arch_float(g, "gemma2", "rope.freq_base_swa", c->rope_base, &c->rope_base_local, err)) ||
		(st = get_arch_float(g, "gemma2", "attn_logit_softcapping", 50.0f, &c->attn_softcap, err)) ||
		(st = get_arch_float(g, "gemma2", "final_logit_softcapping", 30.0f, &c->final_softcap, err)))
		return st;
	if (c->attn_softcap <= 0.0f || c->final_softcap <= 0.0f)
		return llm_error_set(err, LLM_ERR_FORMAT, "gemma2 soft-capping values must be positive");
	if ((st = load_swa_pattern(g, "gemma2", 2, c, err)))
		return st;
	c->embd_scale = sqrtf((float) c->dim);
	if (c->n_layers == 46)
		c->attn_scale = 1.0f / sqrtf((float) (c->dim / c->n_heads));
	return LLM_OK;
}

/*
 * Phi-3: Llama with Q, K and V fused in one attn_qkv (or apart), gate and
 * up fused in one ffn_up of twice the FFN width (gate first), NEOX RoPE.
 * llama.cpp disables Phi's sliding window (phi3.attention.sliding_window is
 * ignored there, so here too); LongRoPE (rope_factors_long / _short) is
 * refused, as its choice of factors depends on the context size.
 */
static LlmStatus
load_config_phi3(const LlmGguf *g, LlmConfig *c, LlmError *err)
{
	c->arch = LLM_ARCH_PHI3;
	c->rope_mode = LLM_ROPE_NEOX;
	c->act = LLM_ACT_SILU;
	return load_common_config(g, "phi3", c, err);
}

typedef struct ArchEntry
{
	const char *name;
	LlmStatus	(*load_config) (const LlmGguf *g, LlmConfig *c, LlmError *err);
} ArchEntry;

/* The architectures this engine runs, by general.architecture. */
static const ArchEntry arch_table[] = {
	{"llama", load_config_llama},
	{"gemma3", load_config_gemma3},
	{"qwen2", load_config_qwen2},
	{"qwen3", load_config_qwen3},
	{"gemma2", load_config_gemma2},
	{"phi3", load_config_phi3},
};

/* Make buf (w's rows in type) w's data, owned by w; a previously owned copy is freed. */
void
llm_weight_set_owned(LlmWeight *w, LlmType type, void *buf)
{
	free(w->owned);
	w->type = type;
	w->row_bytes = llm_type_row_size(type, w->cols);
	w->data = buf;
	w->owned = buf;
}

/* Replace w by src (w's shape, in type from) quantized with scheme, in a new owned buffer. */
LlmStatus
llm_weight_quantize_from(LlmWeight *w, LlmType from, const void *src, LlmQuantScheme scheme, LlmError *err)
{
	LlmType		to = llm_quant_scheme_type(scheme);
	void	   *dst = malloc(llm_type_row_size(to, w->cols) * (size_t) w->rows);

	if (dst == NULL || !llm_convert_rows(from, src, w->rows, w->cols, to, scheme, dst))
	{
		free(dst);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory quantizing tensor \"%s\" to %s",
							 w->name, llm_quant_scheme_name(scheme));
	}
	llm_weight_set_owned(w, to, dst);
	return LLM_OK;
}

/*
 * What a load has bound so far: every tensor of the file must be used by
 * the architecture's loader, as llama.cpp requires too, so a tensor this
 * engine does not apply (an output bias, an FFN bias, LongRoPE factors) is
 * refused by name rather than silently dropped.
 */
typedef struct ModelLoader
{
	const LlmGguf *g;
	const char *arch;			/* general.architecture, for messages */
	bool	   *used;			/* (g->n_tensors) */
} ModelLoader;

/* Tensor name of the file, marked used; NULL when absent. */
static const LlmGgufTensor *
loader_tensor(ModelLoader *ld, const char *name)
{
	const LlmGgufTensor *t = llm_gguf_tensor(ld->g, name);

	if (t != NULL)
		ld->used[t - ld->g->tensors] = true;
	return t;
}

/*
 * Point w at rows [row0, row0 + rows) of 2-D tensor t (cols x t_rows, in a
 * supported type): the whole matrix, or one part of a fused one (phi3's
 * attn_qkv and ffn_up), which is its rows in place.
 */
static LlmStatus
bind_rows(const LlmGgufTensor *t, int64_t cols, int64_t t_rows, int64_t row0, int64_t rows, LlmWeight *w,
		  LlmError *err)
{
	if (t->ne[0] != cols || t->ne[1] != t_rows || t->ne[2] != 1 || t->ne[3] != 1)
		return llm_error_set(err, LLM_ERR_FORMAT,
							 "tensor \"%s\" has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
							 t->name, (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2],
							 (long long) t->ne[3], (long long) cols, (long long) t_rows);
	w->name = t->name;
	w->type = t->type;
	w->cols = cols;
	w->rows = rows;
	w->row_bytes = llm_type_row_size(t->type, cols);
	w->data = (const uint8_t *) t->data + (size_t) row0 * w->row_bytes;
	w->owned = NULL;
	return LLM_OK;
}

/* Point w at tensor name, checking it is a 2-D matrix of rows x cols in a supported type. */
static LlmStatus
bind_matrix(ModelLoader *ld, const char *name, int64_t cols, int64_t rows, LlmWeight *w, LlmError *err)
{
	const LlmGgufTensor *t = loader_tensor(ld, name);

	if (t == NULL)
		return llm_error_set(err, LLM_ERR_FORMAT, "missing tensor \"%s\"", name);
	return bind_rows(t, cols, rows, 0, rows, w, err);
}

/* A 1-D tensor of n values converted to a new float array (*out); absent and optional gives NULL. */
static LlmStatus
load_vector(ModelLoader *ld, const char *name, int64_t n, bool required, float **out, LlmError *err)
{
	const LlmGgufTensor *t = loader_tensor(ld, name);
	float	   *v;

	*out = NULL;
	if (t == NULL)
		return required ? llm_error_set(err, LLM_ERR_FORMAT, "missing tensor \"%s\"", name) : LLM_OK;
	if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
		return llm_error_set(err, LLM_ERR_FORMAT, "tensor \"%s\" has shape [%lld, %lld], expected [%lld]",
							 name, (long long) t->ne[0], (long long) t->ne[1], (long long) n);
	v = malloc((size_t) n * sizeof(float));
	if (v == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for tensor \"%s\"", name);
	llm_dequant_row(t->type, t->data, v, n);
	*out = v;
	return LLM_OK;
}

/*
 * Bind layer l's Q, K and V: one fused attn_qkv (rows q, then k, then v:
 * llama.cpp's layout) when the file has it, else three matrices; then the
 * optional biases of Q, K and V (llama.cpp takes them for every
 * architecture here; Qwen2 has them).  A fused bias is refused.
 */
static LlmStatus
load_qkv(ModelLoader *ld, const LlmConfig *c, int l, LlmLayerWeights *lw, LlmError *err)
{
	char		name[96];
	int64_t		q_dim = (int64_t) c->n_heads * c->head_dim;
	int64_t		kv_dim = (int64_t) c->n_kv_heads * c->head_dim;
	const LlmGgufTensor *qkv;
	LlmStatus	st;

#define TNAME(suffix) (snprintf(name, sizeof(name), "blk.%d." suffix, l), name)
	if ((qkv = loader_tensor(ld, TNAME("attn_qkv.weight"))) != NULL)
	{
		int64_t		rows = q_dim + 2 * kv_dim;

		if (llm_gguf_tensor(ld->g, TNAME("attn_qkv.bias")) != NULL)
			return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the fused Q/K/V bias \"%s\" of this %s model is not supported",
								 name, ld->arch);
		if ((st = bind_rows(qkv, c->dim, rows, 0, q_dim, &lw->wq, err)) ||
			(st = bind_rows(qkv, c->dim, rows, q_dim, kv_dim, &lw->wk, err)) ||
			(st = bind_rows(qkv, c->dim, rows, q_dim + kv_dim, kv_dim, &lw->wv, err)))
			return st;
	}
	else if ((st = bind_matrix(ld, TNAME("attn_q.weight"), c->dim, q_dim, &lw->wq, err)) ||
			 (st = bind_matrix(ld, TNAME("attn_k.weight"), c->dim, kv_dim, &lw->wk, err)) ||
			 (st = bind_matrix(ld, TNAME("attn_v.weight"), c->dim, kv_dim, &lw->wv, err)))
		return st;
	if ((st = load_vector(ld, TNAME("attn_q.bias"), q_dim, false, &lw->bq, err)) ||
		(st = load_vector(ld, TNAME("attn_k.bias"), kv_dim, false, &lw->bk, err)) ||
		(st = load_vector(ld, TNAME("attn_v.bias"), kv_dim, false, &lw->bv, err)))
		return st;
#undef TNAME
	if ((lw->bq == NULL) != (lw->bk == NULL) || (lw->bq == NULL) != (lw->bv == NULL))
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "layer %d of this %s model has a bias on some of Q, K and V but not all", l, ld->arch);
	return LLM_OK;
}

/* Bind layer l's gate and up: two matrices, or phi3's one ffn_up of twice the width, gate rows first. */
static LlmStatus
load_gate_up(ModelLoader *ld, const LlmConfig *c, int l, LlmLayerWeights *lw, LlmError *err)
{
	char		name[96];
	const LlmGgufTensor *up;
	LlmStatus	st;

#define TNAME(suffix) (snprintf(name, sizeof(name), "blk.%d." suffix, l), name)
	if (c->arch == LLM_ARCH_PHI3)
	{
		if ((up = loader_tensor(ld, TNAME("ffn_up.weight"))) == NULL)
			return llm_error_set(err, LLM_ERR_FORMAT, "missing tensor \"%s\"", name);
		if ((st = bind_rows(up, c->dim, 2 * (int64_t) c->ffn_dim, 0, c->ffn_dim, &lw->w_gate, err)))
			return st;
		return bind_rows(up, c->dim, 2 * (int64_t) c->ffn_dim, c->ffn_dim, c->ffn_dim, &lw->w_up, err);
	}
	if ((st = bind_matrix(ld, TNAME("ffn_gate.weight"), c->dim, c->ffn_dim, &lw->w_gate, err)))
		return st;
	return bind_matrix(ld, TNAME("ffn_up.weight"), c->dim, c->ffn_dim, &lw->w_up, err);
#undef TNAME
}

/* Bind every tensor of layer l. */
static LlmStatus
load_layer(ModelLoader *ld, const LlmConfig *c, int l, LlmLayerWeights *lw, LlmError *err)
{
	char		name[96];
	int64_t		q_dim = (int64_t) c->n_heads * c->head_dim;
	bool		head_norms = c->arch == LLM_ARCH_GEMMA3 || c->arch == LLM_ARCH_QWEN3;
	bool		post_norms = c->arch == LLM_ARCH_GEMMA3 || c->arch == LLM_ARCH_GEMMA2;
	LlmStatus	st;

#define TNAME(suffix) (snprintf(name, sizeof(name), "blk.%d." suffix, l), name)
	if ((st = load_vector(ld, TNAME("attn_norm.weight"), c->dim, true, &lw->attn_norm, err)) ||
		(st = load_qkv(ld, c, l, lw, err)) ||
		(st = bind_matrix(ld, TNAME("attn_output.weight"), q_dim, c->dim, &lw->wo, err)) ||
		(st = load_vector(ld, TNAME("ffn_norm.weight"), c->dim, true, &lw->ffn_norm, err)) ||
		(st = load_gate_up(ld, c, l, lw, err)) ||
		(st = bind_matrix(ld, TNAME("ffn_down.weight"), c->ffn_dim, c->dim, &lw->w_down, err)))
		return st;
	if (head_norms &&
		((st = load_vector(ld, TNAME("attn_q_norm.weight"), c->head_dim, true, &lw->q_norm, err)) ||
		 (st = load_vector(ld, TNAME("attn_k_norm.weight"), c->head_dim, true, &lw->k_norm, err))))
		return st;
	if (post_norms &&
		((st = load_vector(ld, TNAME("post_attention_norm.weight"), c->dim, true, &lw->post_attn_norm, err)) ||
		 (st = load_vector(ld, TNAME("post_ffw_norm.weight"), c->dim, true, &lw->post_ffn_norm, err))))
		return st;
#undef TNAME
	lw->is_local = c->sliding_pattern > 0 && (l + 1) % c->sliding_pattern != 0;
	return LLM_OK;
}

/*
 * Per-pair inverse frequencies base^(-2i/rope_dim) * scale / factor[i],
 * i < rope_dim/2 (factor NULL: 1), as ggml's rope divides the angle by
 * the frequency factor and multiplies it by the linear scale.
 */
static float *
rope_inv_freq_new(int rope_dim, float base, float scale, const float *factor)
{
	float	   *f = malloc((size_t) (rope_dim / 2) * sizeof(float));

	if (f == NULL)
		return NULL;
	for (int i = 0; i < rope_dim / 2; i++)
	{
		f[i] = (float) pow((double) base, -2.0 * i / rope_dim);
		if (factor != NULL)
			f[i] /= factor[i];
		f[i] *= scale;
	}
	return f;
}

/*
 * Llama 3.1's RoPE frequency factors (rope_freqs.weight, rope_dim / 2
 * values, each > 0) into *out, or NULL when the file has none.  Only the
 * llama architecture takes them (as in llama.cpp); elsewhere the unused
 * tensor is refused later.
 */
static LlmStatus
load_rope_factors(ModelLoader *ld, const LlmConfig *c, float **out, LlmError *err)
{
	LlmStatus	st;

	*out = NULL;
	if (c->arch != LLM_ARCH_LLAMA)
		return LLM_OK;
	if ((st = load_vector(ld, "rope_freqs.weight", c->rope_dim / 2, false, out, err)) || *out == NULL)
		return st;
	for (int i = 0; i < c->rope_dim / 2; i++)
		if (!((*out)[i] > 0.0f) || !isfinite((*out)[i]))
		{
			double		bad = (*out)[i];

			free(*out);
			*out = NULL;
			return llm_error_set(err, LLM_ERR_FORMAT, "tensor \"rope_freqs.weight\" has factor %g at %d, expected > 0",
								 bad, i);
		}
	return LLM_OK;
}

/* Refuse a file with a tensor no loader step used, naming it and the feature it suggests. */
static LlmStatus
check_all_used(const ModelLoader *ld, LlmError *err)
{
	for (uint64_t i = 0; i < ld->g->n_tensors; i++)
	{
		const char *name = ld->g->tensors[i].name;

		if (ld->used[i])
			continue;
		if (strncmp(name, "rope_factors_", 13) == 0)
			return llm_error_set(err, LLM_ERR_UNSUPPORTED,
								 "LongRoPE scaling (tensor \"%s\") of this %s model is not supported", name, ld->arch);
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "tensor \"%s\" of this %s model is not used by this engine (an unsupported variant)",
							 name, ld->arch);
	}
	return LLM_OK;
}

/* Count matrix w under the type the model holds it in (quantized at load) rather than the type the file stores. */
static void
count_served_type(const LlmGguf *g, const LlmWeight *w, int *counts)
{
	const LlmGgufTensor *t = llm_gguf_tensor(g, w->name);

	if (t != NULL && t->type != w->type)
	{
		counts[t->type]--;
		counts[w->type]++;
	}
}

/* Describe the model's weight types as "Q4_K x 100, Q6_K x 12" into buf (ones quantized at load included). */
static void
describe_weight_types(const LlmModel *m, char *buf, size_t len)
{
	const LlmGguf *g = m->gguf;
	const LlmWeights *w = &m->weights;
	int			counts[LLM_TYPE_COUNT] = {0};
	size_t		used = 0;

	buf[0] = '\0';
	for (uint64_t i = 0; i < g->n_tensors; i++)
		counts[g->tensors[i].type]++;
	count_served_type(g, &w->tok_embd, counts);
	if (w->output.name != w->tok_embd.name)
		count_served_type(g, &w->output, counts);
	for (int l = 0; l < m->config.n_layers; l++)
	{
		for (int i = 0; i < LLM_LAYER_MATRICES; i++)
		{
			const LlmWeight *lm = llm_layer_matrix_const(&w->layers[l], i);

			/* a fused tensor's parts (phi3) are one tensor of the file: count its first part only */
			if (i > 0 && lm->name == llm_layer_matrix_const(&w->layers[l], i - 1)->name)
				continue;
			count_served_type(g, lm, counts);
		}
	}
	for (int t = 0; t < LLM_TYPE_COUNT && used < len; t++)
	{
		if (counts[t] == 0)
			continue;
		used += (size_t) snprintf(buf + used, len - used, "%s%s x %d", used ? ", " : "",
								  llm_type_traits(t)->name, counts[t]);
	}
}

/* Fill m->info for logs and status views. */
static void
fill_info(LlmModel *m, const char *arch, const char *path)
{
	LlmModelInfo *info = &m->info;
	const LlmConfig *c = &m->config;
	char	   *name = NULL;
	int64_t		n_params = 0;

	snprintf(info->arch, sizeof(info->arch), "%s", arch);
	if (llm_gguf_get_str(m->gguf, "general.name", &name, NULL) == LLM_OK)
		snprintf(info->name, sizeof(info->name), "%s", name);
	else
	{
		const char *slash = strrchr(path, '/');

		snprintf(info->name, sizeof(info->name), "%s", slash ? slash + 1 : path);
	}
	free(name);
	for (uint64_t i = 0; i < m->gguf->n_tensors; i++)
	{
		const LlmGgufTensor *t = &m->gguf->tensors[i];

		n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
	}
	info->n_params = n_params;
	info->n_layers = c->n_layers;
	info->dim = c->dim;
	info->n_heads = c->n_heads;
	info->n_kv_heads = c->n_kv_heads;
	info->n_vocab = c->n_vocab;
	info->n_ctx = c->n_ctx;
	describe_weight_types(m, info->weight_types, sizeof(info->weight_types));
}

/* Bind weights and tokenizer once the config is known (arch: general.architecture, for messages). */
static LlmStatus
load_weights(LlmModel *m, const char *arch, LlmError *err)
{
	const LlmGguf *g = m->gguf;
	LlmConfig  *c = &m->config;
	LlmWeights *w = &m->weights;
	ModelLoader ld = {g, arch, calloc(g->n_tensors + 1, sizeof(bool))};
	const LlmGgufTensor *embd = loader_tensor(&ld, "token_embd.weight");
	float	   *rope_factors = NULL;
	LlmStatus	st;

	if (ld.used == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory");
	if (embd == NULL)
	{
		st = llm_error_set(err, LLM_ERR_FORMAT, "missing tensor \"token_embd.weight\"");
		goto done;
	}
	if (embd->ne[1] < 1 || embd->ne[1] > (1 << 24))
	{
		st = llm_error_set(err, LLM_ERR_FORMAT, "tensor \"token_embd.weight\" has %lld rows", (long long) embd->ne[1]);
		goto done;
	}
	c->n_vocab = (int) embd->ne[1];
	if ((st = bind_matrix(&ld, "token_embd.weight", c->dim, c->n_vocab, &w->tok_embd, err)) ||
		(st = load_vector(&ld, "output_norm.weight", c->dim, true, &w->output_norm, err)))
		goto done;
	/* gemma2's output is always the embedding (llama.cpp loads no output.weight there: one is refused as unused) */
	if (c->arch != LLM_ARCH_GEMMA2 && llm_gguf_tensor(g, "output.weight") != NULL)
	{
		if ((st = bind_matrix(&ld, "output.weight", c->dim, c->n_vocab, &w->output, err)))
			goto done;
	}
	else
		w->output = w->tok_embd;	/* tied embeddings */

	w->layers = calloc((size_t) c->n_layers, sizeof(LlmLayerWeights));
	if (w->layers == NULL)
	{
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %d layers", c->n_layers);
		goto done;
	}
	for (int l = 0; l < c->n_layers; l++)
		if ((st = load_layer(&ld, c, l, &w->layers[l], err)))
			goto done;

	if ((st = load_rope_factors(&ld, c, &rope_factors, err)) ||
		(st = check_all_used(&ld, err)))
		goto done;
	m->rope_inv_freq = rope_inv_freq_new(c->rope_dim, c->rope_base, c->rope_freq_scale, rope_factors);
	m->rope_inv_freq_local = rope_inv_freq_new(c->rope_dim, c->rope_base_local, c->rope_freq_scale_local, NULL);
	if (m->rope_inv_freq == NULL || m->rope_inv_freq_local == NULL)
	{
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for RoPE tables");
		goto done;
	}

	if ((st = llm_tokenizer_load(g, &m->tokenizer, err)))
		goto done;
	if (llm_tokenizer_n_vocab(m->tokenizer) > c->n_vocab)
	{
		st = llm_error_set(err, LLM_ERR_FORMAT, "the tokenizer has %d tokens but token_embd.weight only %d rows",
						   llm_tokenizer_n_vocab(m->tokenizer), c->n_vocab);
		goto done;
	}
done:
	free(rope_factors);
	free(ld.used);
	return st;
}

/* Whether matrix w is stored as floats that can take the scheme. */
static bool
weight_quantizable(const LlmWeight *w, LlmQuantScheme scheme)
{
	return (w->type == LLM_TYPE_F32 || w->type == LLM_TYPE_F16 || w->type == LLM_TYPE_BF16) &&
		llm_quant_scheme_fits(scheme, w->cols);
}

/* Convert one float matrix (F32, F16, BF16) to the scheme in a new owned buffer; others are left alone. */
static LlmStatus
quantize_weight(LlmWeight *w, LlmQuantScheme scheme, LlmError *err)
{
	if (!weight_quantizable(w, scheme))
		return LLM_OK;
	return llm_weight_quantize_from(w, w->type, w->data, scheme, err);
}

/* Whether every matrix of layer lw is stored as floats (see model.h). */
bool
llm_layer_is_float(const LlmLayerWeights *lw)
{
	for (int i = 0; i < LLM_LAYER_MATRICES; i++)
	{
		LlmType		t = llm_layer_matrix_const(lw, i)->type;

		if (t != LLM_TYPE_F32 && t != LLM_TYPE_F16 && t != LLM_TYPE_BF16)
			return false;
	}
	return true;
}

/*
 * Quantize every float weight matrix of m with the scheme (own INT8 / INT4),
 * offering each layer to layer_fn first (see model.h).
 */
LlmStatus
llm_model_quantize(LlmModel *m, LlmQuantScheme scheme, LlmLayerQuantizer layer_fn, void *ctx, LlmError *err)
{
	LlmWeights *w = &m->weights;
	bool		tied = w->output.data == w->tok_embd.data;
	LlmStatus	st;

	if (scheme == LLM_QUANT_NONE)
		return LLM_OK;
	if ((st = quantize_weight(&w->tok_embd, scheme, err)))
		return st;
	if (tied)
		w->output = w->tok_embd;
	else if ((st = quantize_weight(&w->output, scheme, err)))
		return st;
	for (int l = 0; l < m->config.n_layers; l++)
	{
		LlmLayerWeights *lw = &w->layers[l];
		bool		done = false;

		if (layer_fn != NULL && (st = layer_fn(ctx, m, l, scheme, &done, err)))
			return st;
		for (int i = 0; !done && i < LLM_LAYER_MATRICES; i++)
			if ((st = quantize_weight(llm_layer_matrix(lw, i), scheme, err)))
				return st;
	}
	describe_weight_types(m, m->info.weight_types, sizeof(m->info.weight_types));
	return LLM_OK;
}

/* Load a GGUF model (weights stay mapped, in their stored types). */
LlmStatus
llm_model_load(const char *path, LlmModel **out, LlmError *err)
{
	return llm_model_load_quantized(path, LLM_QUANT_NONE, out, err);
}

/* Load a GGUF model, quantizing its float weight matrices with scheme. */
LlmStatus
llm_model_load_quantized(const char *path, LlmQuantScheme scheme, LlmModel **out, LlmError *err)
{
	LlmModel   *m;
	char	   *arch = NULL;
	const ArchEntry *entry = NULL;
	LlmStatus	st;

	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory");
	if ((st = llm_gguf_open(path, &m->gguf, err)))
		goto fail;
	st = llm_gguf_get_str(m->gguf, "general.architecture", &arch, err);
	if (st == LLM_ERR_NOT_FOUND)
		st = llm_error_set(err, LLM_ERR_FORMAT, "missing metadata key \"general.architecture\"");
	if (st)
		goto fail;
	for (size_t i = 0; i < sizeof(arch_table) / sizeof(arch_table[0]); i++)
		if (strcmp(arch_table[i].name, arch) == 0)
			entry = &arch_table[i];
	if (entry == NULL)
	{
		st = llm_error_set(err, LLM_ERR_UNSUPPORTED, "unsupported model architecture \"%s\"", arch);
		goto fail;
	}
	if ((st = entry->load_config(m->gguf, &m->config, err)) ||
		(st = load_weights(m, arch, err)) ||
		(st = llm_model_quantize(m, scheme, NULL, NULL, err)))
		goto fail;
	fill_info(m, arch, path);
	free(arch);
	/* a template the interpreter refuses fails chat requests, not the load */
	{
		LlmError	terr;

		m->chat_template_status = llm_chat_template_load(m->gguf, m->info.name, &m->chat_template, &terr);
		memcpy(m->chat_template_error, terr.msg, sizeof(terr.msg));
		if (m->chat_template_status == LLM_ERR_NOMEM)
		{
			llm_error_set(err, LLM_ERR_NOMEM, "%s", terr.msg);
			llm_model_free(m);
			return LLM_ERR_NOMEM;
		}
	}
	*out = m;
	return LLM_OK;

fail:
	free(arch);
	llm_model_free(m);
	return st;
}

/* Free a model and unmap its file; NULL is allowed. */
void
llm_model_free(LlmModel *m)
{
	if (m == NULL)
		return;
	if (m->weights.layers != NULL)
	{
		for (int l = 0; l < m->config.n_layers; l++)
		{
			LlmLayerWeights *lw = &m->weights.layers[l];

			for (int i = 0; i < LLM_LAYER_MATRICES; i++)
				free(llm_layer_matrix(lw, i)->owned);
			free(lw->attn_norm);
			free(lw->bq);
			free(lw->bk);
			free(lw->bv);
			free(lw->ffn_norm);
			free(lw->q_norm);
			free(lw->k_norm);
			free(lw->post_attn_norm);
			free(lw->post_ffn_norm);
		}
		free(m->weights.layers);
	}
	if (m->weights.output.owned != m->weights.tok_embd.owned)
		free(m->weights.output.owned);
	free(m->weights.tok_embd.owned);
	free(m->weights.output_norm);
	free(m->rope_inv_freq);
	free(m->rope_inv_freq_local);
	llm_tokenizer_free(m->tokenizer);
	llm_jinja_free(m->chat_template);
	llm_gguf_close(m->gguf);
	free(m);
}

/* What a loaded model is. */
const LlmModelInfo *
llm_model_info(const LlmModel *m)
{
	return &m->info;
}

/* The model's tokenizer. */
const LlmTokenizer *
llm_model_tokenizer(const LlmModel *m)
{
	return m->tokenizer;
}
