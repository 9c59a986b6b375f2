/*
 * model.c
 *		Loading a model from a GGUF file: hyper-parameters from the
 *		architecture's metadata keys, weight tensors checked for shape and
 *		type, and the tokenizer.
 *
 * Weights stay in the mapped file in their stored type; only the small
 * one-dimensional norm vectors are converted to float copies.
 */
#include "model.h"
#include "backend.h"
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
	if (c->head_dim > 1024)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "%s head width %d exceeds the supported 1024", arch, c->head_dim);
	c->attn_scale = 1.0f / sqrtf((float) c->head_dim);
	c->embd_scale = 1.0f;
	return LLM_OK;
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
	c->sliding_pattern = c->sliding_window > 0 ? 6 : 0;
	c->embd_scale = sqrtf((float) c->dim);
	return LLM_OK;
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

/* Point w at tensor name, checking it is a 2-D matrix of rows x cols in a supported type. */
static LlmStatus
bind_matrix(const LlmGguf *g, const char *name, int64_t cols, int64_t rows, LlmWeight *w, LlmError *err)
{
	const LlmGgufTensor *t = llm_gguf_tensor(g, name);

	if (t == NULL)
		return llm_error_set(err, LLM_ERR_FORMAT, "missing tensor \"%s\"", name);
	if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
		return llm_error_set(err, LLM_ERR_FORMAT,
							 "tensor \"%s\" has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
							 name, (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2],
							 (long long) t->ne[3], (long long) cols, (long long) rows);
	w->name = t->name;
	w->type = t->type;
	w->cols = cols;
	w->rows = rows;
	w->row_bytes = llm_type_row_size(t->type, cols);
	w->data = t->data;
	w->owned = NULL;
	if (llm_type_repacks_to_q8_0(t->type) && !llm_cpu_has_kernel(t->type))
	{
		/* no fast CPU kernel for this type here: the same integers and scales as Q8_0 (the same bits) */
		size_t		row_bytes = llm_type_row_size(LLM_TYPE_Q8_0, cols);
		uint8_t    *q8 = malloc(row_bytes * (size_t) rows);

		if (q8 == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory repacking tensor \"%s\"", name);
		for (int64_t r = 0; r < rows; r++)
			llm_repack_q8_0(t->type, w->data + (size_t) r * w->row_bytes, q8 + (size_t) r * row_bytes, cols);
		llm_weight_set_owned(w, LLM_TYPE_Q8_0, q8);
	}
	return LLM_OK;
}

/* A 1-D tensor of n values converted to a new float array (*out); absent and optional gives NULL. */
static LlmStatus
load_vector(const LlmGguf *g, const char *name, int64_t n, bool required, float **out, LlmError *err)
{
	const LlmGgufTensor *t = llm_gguf_tensor(g, name);
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

/* Bind every tensor of layer l. */
static LlmStatus
load_layer(const LlmGguf *g, const LlmConfig *c, int l, LlmLayerWeights *lw, LlmError *err)
{
	char		name[96];
	int64_t		q_dim = (int64_t) c->n_heads * c->head_dim;
	int64_t		kv_dim = (int64_t) c->n_kv_heads * c->head_dim;
	bool		gemma = c->arch == LLM_ARCH_GEMMA3;
	LlmStatus	st;

#define TNAME(suffix) (snprintf(name, sizeof(name), "blk.%d." suffix, l), name)
	if ((st = load_vector(g, TNAME("attn_norm.weight"), c->dim, true, &lw->attn_norm, err)) ||
		(st = bind_matrix(g, TNAME("attn_q.weight"), c->dim, q_dim, &lw->wq, err)) ||
		(st = bind_matrix(g, TNAME("attn_k.weight"), c->dim, kv_dim, &lw->wk, err)) ||
		(st = bind_matrix(g, TNAME("attn_v.weight"), c->dim, kv_dim, &lw->wv, err)) ||
		(st = bind_matrix(g, TNAME("attn_output.weight"), q_dim, c->dim, &lw->wo, err)) ||
		(st = load_vector(g, TNAME("ffn_norm.weight"), c->dim, true, &lw->ffn_norm, err)) ||
		(st = bind_matrix(g, TNAME("ffn_gate.weight"), c->dim, c->ffn_dim, &lw->w_gate, err)) ||
		(st = bind_matrix(g, TNAME("ffn_up.weight"), c->dim, c->ffn_dim, &lw->w_up, err)) ||
		(st = bind_matrix(g, TNAME("ffn_down.weight"), c->ffn_dim, c->dim, &lw->w_down, err)) ||
		(st = load_vector(g, TNAME("attn_q_norm.weight"), c->head_dim, gemma, &lw->q_norm, err)) ||
		(st = load_vector(g, TNAME("attn_k_norm.weight"), c->head_dim, gemma, &lw->k_norm, err)) ||
		(st = load_vector(g, TNAME("post_attention_norm.weight"), c->dim, gemma, &lw->post_attn_norm, err)) ||
		(st = load_vector(g, TNAME("post_ffw_norm.weight"), c->dim, gemma, &lw->post_ffn_norm, err)))
		return st;
#undef TNAME
	lw->is_local = c->sliding_pattern > 0 && (l + 1) % c->sliding_pattern != 0;
	return LLM_OK;
}

/* Per-pair inverse frequencies base^(-2i/rope_dim), i < rope_dim/2. */
static float *
rope_inv_freq_new(int rope_dim, float base)
{
	float	   *f = malloc((size_t) (rope_dim / 2) * sizeof(float));

	if (f == NULL)
		return NULL;
	for (int i = 0; i < rope_dim / 2; i++)
		f[i] = (float) pow((double) base, -2.0 * i / rope_dim);
	return f;
}

/* Count matrix w under the type it is served in rather than the type the file stores. */
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

/* Describe the served weight types as "Q4_K x 100, Q6_K x 12" into buf (repacked and quantized ones included). */
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
			count_served_type(g, llm_layer_matrix_const(&w->layers[l], i), counts);
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

/* Bind weights and tokenizer once the config is known. */
static LlmStatus
load_weights(LlmModel *m, LlmError *err)
{
	const LlmGguf *g = m->gguf;
	LlmConfig  *c = &m->config;
	LlmWeights *w = &m->weights;
	const LlmGgufTensor *embd = llm_gguf_tensor(g, "token_embd.weight");
	LlmStatus	st;

	if (embd == NULL)
		return llm_error_set(err, LLM_ERR_FORMAT, "missing tensor \"token_embd.weight\"");
	if (embd->ne[1] < 1 || embd->ne[1] > (1 << 24))
		return llm_error_set(err, LLM_ERR_FORMAT, "tensor \"token_embd.weight\" has %lld rows",
							 (long long) embd->ne[1]);
	c->n_vocab = (int) embd->ne[1];
	if ((st = bind_matrix(g, "token_embd.weight", c->dim, c->n_vocab, &w->tok_embd, err)) ||
		(st = load_vector(g, "output_norm.weight", c->dim, true, &w->output_norm, err)))
		return st;
	if (llm_gguf_tensor(g, "output.weight") != NULL)
	{
		if ((st = bind_matrix(g, "output.weight", c->dim, c->n_vocab, &w->output, err)))
			return st;
	}
	else
		w->output = w->tok_embd;	/* tied embeddings */

	w->layers = calloc((size_t) c->n_layers, sizeof(LlmLayerWeights));
	if (w->layers == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for %d layers", c->n_layers);
	for (int l = 0; l < c->n_layers; l++)
		if ((st = load_layer(g, c, l, &w->layers[l], err)))
			return st;

	m->rope_inv_freq = rope_inv_freq_new(c->rope_dim, c->rope_base);
	m->rope_inv_freq_local = rope_inv_freq_new(c->rope_dim, c->rope_base_local);
	if (m->rope_inv_freq == NULL || m->rope_inv_freq_local == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for RoPE tables");

	if ((st = llm_tokenizer_load(g, &m->tokenizer, err)))
		return st;
	if (llm_tokenizer_n_vocab(m->tokenizer) > c->n_vocab)
		return llm_error_set(err, LLM_ERR_FORMAT, "the tokenizer has %d tokens but token_embd.weight only %d rows",
							 llm_tokenizer_n_vocab(m->tokenizer), c->n_vocab);
	return LLM_OK;
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
		(st = load_weights(m, err)) ||
		(st = llm_model_quantize(m, scheme, NULL, NULL, err)))
		goto fail;
	fill_info(m, arch, path);
	free(arch);
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
