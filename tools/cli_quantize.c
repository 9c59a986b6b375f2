/*
 * cli_quantize.c
 *		llm-cli quantize IN OUT TYPE [--calib TEXT [--method M] ...]: rewrite a
 *		GGUF file with its weight matrices in another type (F32, F16, BF16,
 *		Q8_0, Q4_0) or one of the engine's own schemes (INT8 per output
 *		channel, INT4 per group of 32 or 128 inputs; stored as Q8_0 / Q4_0
 *		blocks, so any GGUF reader can load the result).  Metadata is copied
 *		verbatim; one-dimensional tensors (norms) and matrices whose rows do
 *		not divide into groups keep their type.  SPARSE24 (2:4 pruning, the
 *		engine's own type: only llm reads it) prunes the layers' matrices
 *		only: the embedding and the output matrix keep their type (quantize
 *		to INT8 first for an all-int8 file).
 *
 * With --calib (a scheme only) the model is loaded compressed with that
 * text (llm_model_load_compressed: AWQ scales, GPTQ, AWQ then GPTQ, or
 * SmoothQuant's scales, by --method; --act-order, --damp, --alpha and
 * --calib-tokens tune GPTQ, SmoothQuant and the calibration; --prune
 * wanda|wanda24|sparsegpt|sparsegpt24 prunes to 50% or 2:4 before rounding
 * instead, SparseGPT with --damp) and written as the engine then serves it:
 * every matrix the quantization replaced, in its new type, and every norm
 * the scales were folded into, as F32 (the exact values the forward pass
 * uses, so the file computes what the in-memory model computes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "cli.h"
#include "cli_common.h"
#include "cli_options.h"
#include "gguf.h"
#include "quant.h"

/* The type called name, or -1. */
static int
type_by_name(const char *name)
{
	for (int t = 0; t < LLM_TYPE_COUNT; t++)
	{
		const LlmTypeTraits *tr = llm_type_traits(t);

		if (llm_type_is_file_type(t) && strcasecmp(tr->name, name) == 0)
			return t;
	}
	return -1;
}

/* Whether 2:4 pruning may take tensor name: a layer's matrix, not the embedding or the output. */
static bool
prunable(const char *name)
{
	return strncmp(name, "blk.", 4) == 0;
}

/* Convert one tensor to type (or, with a scheme, to the scheme's type) into a new buffer (*out); false when out of memory. */
static bool
convert_tensor(const LlmGgufTensor *t, LlmType type, LlmQuantScheme scheme, void **out)
{
	int64_t		rows = t->ne[1] * t->ne[2] * t->ne[3];
	void	   *dst = malloc(llm_type_row_size(type, t->ne[0]) * (size_t) rows);

	if (dst == NULL || !llm_convert_rows(t->type, t->data, rows, t->ne[0], type, scheme, dst))
	{
		free(dst);
		return false;
	}
	*out = dst;
	return true;
}

/* The model's weight matrix bound to tensor t, or NULL. */
static const LlmWeight *
model_matrix(const LlmModel *m, const LlmGgufTensor *t)
{
	const LlmWeights *w = &m->weights;

	if (strcmp(t->name, w->tok_embd.name) == 0)
		return &w->tok_embd;
	if (strcmp(t->name, w->output.name) == 0)
		return &w->output;
	for (int l = 0; l < m->config.n_layers; l++)
	{
		for (int i = 0; i < LLM_LAYER_MATRICES; i++)
			if (strcmp(t->name, llm_layer_matrix_const(&w->layers[l], i)->name) == 0)
				return llm_layer_matrix_const(&w->layers[l], i);
	}
	return NULL;
}

/* The model's float copy of the norm vector loaded from tensor t, or NULL. */
static const float *
model_vector(const LlmModel *m, const LlmGgufTensor *t)
{
	char		name[96];

	if (strcmp(t->name, "output_norm.weight") == 0)
		return m->weights.output_norm;
	for (int l = 0; l < m->config.n_layers; l++)
	{
		const LlmLayerWeights *lw = &m->weights.layers[l];
		const struct
		{
			const char *suffix;
			const float *v;
		}			vecs[] = {{"attn_norm", lw->attn_norm}, {"ffn_norm", lw->ffn_norm},
						  {"attn_q_norm", lw->q_norm}, {"attn_k_norm", lw->k_norm},
						  {"post_attention_norm", lw->post_attn_norm}, {"post_ffw_norm", lw->post_ffn_norm}};

		for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++)
		{
			snprintf(name, sizeof(name), "blk.%d.%s.weight", l, vecs[i].suffix);
			if (vecs[i].v != NULL && strcmp(t->name, name) == 0)
				return vecs[i].v;
		}
	}
	return NULL;
}

/* Whether the float vector v differs from what tensor t (ne[0] values) holds; *oom when out of memory. */
static bool
vector_changed(const LlmGgufTensor *t, const float *v, bool *oom)
{
	float	   *file = malloc((size_t) t->ne[0] * sizeof(float));
	bool		changed;

	if (file == NULL)
	{
		*oom = true;
		return false;
	}
	llm_dequant_row(t->type, t->data, file, t->ne[0]);
	changed = memcmp(file, v, (size_t) t->ne[0] * sizeof(float)) != 0;
	free(file);
	return changed;
}

/*
 * Write in.gguf compressed as co says with the text at calib to out.gguf:
 * the replaced matrices and the rescaled norms from the loaded model, every
 * other tensor and all metadata as in the file.
 */
static int
quantize_calibrated(const char *in, const char *out, const LlmCompressOptions *co, const char *calib)
{
	LlmModel   *m = NULL;
	LlmGgufWriter *w = NULL;
	const LlmGguf *g;
	LlmError	err;
	char	   *text;
	size_t		len = 0;
	int			n_quantized = 0,
				n_rescaled = 0;
	bool		oom = false;
	LlmStatus	st;

	if ((text = cli_read_calib(calib, &len)) == NULL)
		return 1;
	st = llm_model_load_compressed(in, co, text, len, &m, &err);
	free(text);
	if (st != LLM_OK)
	{
		fprintf(stderr, "llm-cli quantize: could not quantize \"%s\" with %s: %s\n", in,
				llm_compress_method_name(co), err.msg);
		return 1;
	}
	g = m->gguf;
	if ((w = llm_gguf_writer_new()) == NULL)
		oom = true;
	for (uint64_t i = 0; !oom && i < g->n_kv; i++)
		llm_gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
	for (uint64_t i = 0; !oom && i < g->n_tensors; i++)
	{
		const LlmGgufTensor *t = &g->tensors[i];
		const LlmWeight *mw = t->n_dims >= 2 ? model_matrix(m, t) : NULL;
		const float *v = t->n_dims == 1 ? model_vector(m, t) : NULL;
		bool		was_float = t->type == LLM_TYPE_F32 || t->type == LLM_TYPE_F16 || t->type == LLM_TYPE_BF16;

		/* a float matrix served from a copy was quantized or rescaled (others are at most repacked) */
		if (mw != NULL && mw->data != t->data && was_float &&
			(mw->type != t->type || memcmp(mw->data, t->data, t->size) != 0))
		{
			llm_gguf_writer_add_tensor(w, t->name, mw->type, t->n_dims, t->ne, mw->data);
			if (mw->type != t->type)
				n_quantized++;
			else
				n_rescaled++;
		}
		else if (v != NULL && vector_changed(t, v, &oom))
		{
			llm_gguf_writer_add_tensor(w, t->name, LLM_TYPE_F32, t->n_dims, t->ne, v);
			n_rescaled++;
		}
		else
			llm_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
	}
	if (oom)
		fprintf(stderr, "llm-cli quantize: out of memory\n");
	else if ((st = llm_gguf_writer_save(w, out, &err)) != LLM_OK)
		fprintf(stderr, "llm-cli quantize: %s\n", err.msg);
	else
		fprintf(stderr, "llm-cli quantize: %d of %llu tensors converted to %s with %s, %d rescaled in their type\n",
				n_quantized, (unsigned long long) g->n_tensors, llm_quant_scheme_name(co->scheme),
				llm_compress_method_name(co), n_rescaled);
	llm_gguf_writer_free(w);
	llm_model_free(m);
	return oom || st != LLM_OK ? 1 : 0;
}

/* Parse --method M into co: awq, gptq, awq+gptq or smoothquant; false (with a message) for others. */
static bool
parse_method(const char *name, LlmCompressOptions *co)
{
	co->awq = strcasecmp(name, "awq") == 0 || strcasecmp(name, "awq+gptq") == 0;
	co->gptq = strcasecmp(name, "gptq") == 0 || strcasecmp(name, "awq+gptq") == 0;
	co->smooth = strcasecmp(name, "smoothquant") == 0;
	if (!co->awq && !co->gptq && !co->smooth)
		fprintf(stderr, "llm-cli quantize: unknown method \"%s\" (awq, gptq, awq+gptq, smoothquant)\n", name);
	return co->awq || co->gptq || co->smooth;
}

/*
 * llm-cli quantize IN OUT TYPE [--calib TEXT [--method awq|gptq|awq+gptq|smoothquant]
 * [--act-order] [--damp X] [--alpha A] [--prune wanda|wanda24|sparsegpt|sparsegpt24] [--calib-tokens N] [--threads N]].
 */
int
cli_quantize(int argc, char **argv)
{
	LlmGguf    *g = NULL;
	LlmGgufWriter *w = NULL;
	LlmError	err;
	int			type;
	LlmQuantScheme scheme = LLM_QUANT_NONE;
	LlmCompressOptions co;
	const char *calib = NULL;
	long		n;
	int			n_converted = 0;
	int			rc = 1;

	llm_compress_options_default(&co, LLM_QUANT_NONE);
	if (argc < 4)
	{
		fprintf(stderr, "usage: llm-cli quantize IN.gguf OUT.gguf TYPE [--calib TEXT [--method awq|gptq|awq+gptq|smoothquant] "
				"[--act-order] [--damp X] [--alpha A] [--prune wanda|wanda24|sparsegpt|sparsegpt24] [--calib-tokens N] [--threads N]]\n");
		return 2;
	}
	for (int i = 4; i < argc; i++)
	{
		const char *opt = argv[i];

		if (strcmp(opt, "--act-order") == 0)
		{
			co.gptq_opts.act_order = true;
			continue;
		}
		if (i + 1 >= argc)
		{
			fprintf(stderr, "llm-cli quantize: option \"%s\" needs a value\n", opt);
			return 2;
		}
		if (strcmp(opt, "--calib") == 0)
			calib = argv[++i];
		else if (strcmp(opt, "--method") == 0)
		{
			if (!parse_method(argv[++i], &co))
				return 2;
		}
		else if (strcmp(opt, "--damp") == 0)
		{
			if (!cli_parse_float(opt, argv[++i], &co.gptq_opts.damp))
				return 2;
			if (!(co.gptq_opts.damp > 0.0))
			{
				fprintf(stderr, "llm-cli quantize: --damp must be positive\n");
				return 2;
			}
		}
		else if (strcmp(opt, "--prune") == 0)
		{
			i++;
			if (strcmp(argv[i], "wanda") == 0)
				co.prune = LLM_PRUNE_WANDA_HALF;
			else if (strcmp(argv[i], "wanda24") == 0)
				co.prune = LLM_PRUNE_WANDA_24;
			else if (strcmp(argv[i], "sparsegpt") == 0)
				co.prune = LLM_PRUNE_SPARSEGPT_HALF;
			else if (strcmp(argv[i], "sparsegpt24") == 0)
				co.prune = LLM_PRUNE_SPARSEGPT_24;
			else
			{
				fprintf(stderr, "llm-cli quantize: unknown pruning \"%s\" (wanda, wanda24, sparsegpt, sparsegpt24)\n",
						argv[i]);
				return 2;
			}
		}
		else if (strcmp(opt, "--alpha") == 0)
		{
			if (!cli_parse_float(opt, argv[++i], &co.smooth_alpha))
				return 2;
		}
		else if (strcmp(opt, "--threads") == 0)
		{
			if (!cli_parse_int(opt, argv[++i], 1, 1024, &n))
				return 2;
			co.n_threads = (int) n;
		}
		else if (strcmp(opt, "--calib-tokens") == 0)
		{
			if (!cli_parse_int(opt, argv[++i], LLM_CALIB_CHUNK, LLM_CALIB_MAX_TOKENS, &n))
				return 2;
			co.max_tokens = (int) n;
		}
		else
		{
			fprintf(stderr, "llm-cli quantize: unknown option \"%s\"\n", opt);
			return 2;
		}
	}
	type = type_by_name(argv[3]);
	if (llm_quant_scheme_parse(argv[3], &scheme) && scheme != LLM_QUANT_NONE)
		type = llm_quant_scheme_type(scheme);
	else if (type < 0 || !llm_type_can_quantize(type))
	{
		fprintf(stderr, "llm-cli quantize: unsupported target type \"%s\" (supported: F32, F16, BF16, Q8_0, Q4_0, SPARSE24, INT8, INT4_G32, INT4_G128)\n", argv[3]);
		return 2;
	}
	if (calib != NULL && scheme == LLM_QUANT_NONE)
	{
		fprintf(stderr, "llm-cli quantize: --calib needs TYPE INT8, INT4_G32 or INT4_G128, not \"%s\"\n", argv[3]);
		return 2;
	}
	if (calib != NULL)
	{
		co.scheme = scheme;
		return quantize_calibrated(argv[1], argv[2], &co, calib);
	}
	if (llm_gguf_open(argv[1], &g, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli quantize: %s\n", err.msg);
		return 1;
	}
	if ((w = llm_gguf_writer_new()) == NULL)
		goto oom;
	for (uint64_t i = 0; i < g->n_kv; i++)
		llm_gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
	for (uint64_t i = 0; i < g->n_tensors; i++)
	{
		const LlmGgufTensor *t = &g->tensors[i];
		bool		convert = t->n_dims >= 2 &&
			(scheme != LLM_QUANT_NONE ? llm_quant_scheme_fits(scheme, t->ne[0]) :
			 (int) t->type != type && t->ne[0] % llm_type_traits(type)->block_size == 0) &&
			!(type == LLM_TYPE_SPARSE24 && !prunable(t->name));

		if (convert)
		{
			void	   *data;

			if (!convert_tensor(t, type, scheme, &data))
				goto oom;
			llm_gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, data);
			free(data);
			n_converted++;
		}
		else
			llm_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
	}
	if (llm_gguf_writer_save(w, argv[2], &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli quantize: %s\n", err.msg);
		goto done;
	}
	fprintf(stderr, "llm-cli quantize: %d of %llu tensors converted to %s\n", n_converted,
			(unsigned long long) g->n_tensors,
			scheme != LLM_QUANT_NONE ? llm_quant_scheme_name(scheme) : llm_type_traits(type)->name);
	rc = 0;
	goto done;

oom:
	fprintf(stderr, "llm-cli quantize: out of memory\n");
done:
	llm_gguf_writer_free(w);
	llm_gguf_close(g);
	return rc;
}
