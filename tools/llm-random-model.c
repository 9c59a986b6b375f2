/*
 * llm-random-model.c
 *		Write a GGUF Llama model of any shape and weight type with random
 *		weights, for tests and benchmarks (no download needed).
 *
 * The vocabulary is SentencePiece-style: <unk>, <s>, </s>, the 256 byte
 * tokens, then made-up pieces, so every text tokenizes.  Weights are
 * normal(0, 0.02) (outputs of attention and FFN scaled down by depth, as in
 * GPT-2), norms are 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "gguf.h"
#include "quant.h"
#include "sampler.h"

typedef struct Shape
{
	int			dim,
				layers,
				heads,
				kv_heads,
				ffn,
				vocab,
				ctx;
	int			type;
	uint64_t	seed;
	bool		tied;
} Shape;

/* A standard normal draw (Box-Muller). */
static double
rand_normal(LlmRng *rng)
{
	double		u1 = llm_rng_uniform(rng);
	double		u2 = llm_rng_uniform(rng);

	return sqrt(-2.0 * log(u1 + 1e-300)) * cos(2.0 * M_PI * u2);
}

/* Add a (rows, cols) matrix of normal(0, stddev) weights in type t. */
static bool
add_matrix(LlmGgufWriter *w, LlmRng *rng, const char *name, int cols, int rows, int t, double stddev)
{
	size_t		row_bytes = llm_type_row_size(t, cols);
	uint8_t    *data = malloc(row_bytes * (size_t) rows);
	float	   *row = malloc((size_t) cols * sizeof(float));
	int64_t		ne[2] = {cols, rows};

	if (data == NULL || row == NULL)
	{
		free(data);
		free(row);
		return false;
	}
	for (int r = 0; r < rows; r++)
	{
		for (int c = 0; c < cols; c++)
			row[c] = (float) (rand_normal(rng) * stddev);
		llm_quantize_row(t, row, data + (size_t) r * row_bytes, cols);
	}
	llm_gguf_writer_add_tensor(w, name, t, 2, ne, data);
	free(data);
	free(row);
	return true;
}

/* Add a vector of n ones (F32). */
static bool
add_ones(LlmGgufWriter *w, const char *name, int n)
{
	float	   *v = malloc((size_t) n * sizeof(float));
	int64_t		ne[1] = {n};

	if (v == NULL)
		return false;
	for (int i = 0; i < n; i++)
		v[i] = 1.0f;
	llm_gguf_writer_add_tensor(w, name, LLM_TYPE_F32, 1, ne, v);
	free(v);
	return true;
}

/* Add a SentencePiece-style vocabulary of s->vocab tokens. */
static bool
add_vocab(LlmGgufWriter *w, const Shape *s)
{
	char	  **tokens = calloc((size_t) s->vocab, sizeof(char *));
	float	   *scores = calloc((size_t) s->vocab, sizeof(float));
	int32_t    *types = calloc((size_t) s->vocab, sizeof(int32_t));
	static const char letters[] = "etaoinshrdlucmfwypvbgkjqxz";
	bool		ok = tokens && scores && types;

	for (int i = 0; ok && i < s->vocab; i++)
	{
		char		buf[32];

		if (i == 0)
			snprintf(buf, sizeof(buf), "<unk>"), types[i] = 2;
		else if (i == 1)
			snprintf(buf, sizeof(buf), "<s>"), types[i] = 3;
		else if (i == 2)
			snprintf(buf, sizeof(buf), "</s>"), types[i] = 3;
		else if (i < 3 + 256)
			snprintf(buf, sizeof(buf), "<0x%02X>", i - 3), types[i] = 6;
		else
		{
			/* "▁" + a made-up word, unique by construction from the index */
			int			n = i - 259;
			int			len = 3;

			memcpy(buf, "\xe2\x96\x81", 3);
			do
			{
				buf[len++] = letters[n % 26];
				n /= 26;
			} while (n > 0 && len < 30);
			buf[len] = '\0';
			types[i] = 1;
			scores[i] = -(float) i;
		}
		ok = (tokens[i] = strdup(buf)) != NULL;
	}
	if (ok)
	{
		llm_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
		llm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *) tokens, (uint64_t) s->vocab);
		llm_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t) s->vocab);
		llm_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t) s->vocab);
		llm_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
		llm_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
		llm_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
	}
	for (int i = 0; tokens && i < s->vocab; i++)
		free(tokens[i]);
	free(tokens);
	free(scores);
	free(types);
	return ok;
}

/* Build the whole model into w. */
static bool
build_model(LlmGgufWriter *w, const Shape *s)
{
	LlmRng		rng;
	int			hd = s->dim / s->heads;
	double		out_std = 0.02 / sqrt(2.0 * s->layers);
	char		name[64];

	llm_rng_seed(&rng, s->seed);
	llm_gguf_writer_set_str(w, "general.architecture", "llama");
	llm_gguf_writer_set_str(w, "general.name", "random-llama");
	llm_gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t) s->dim);
	llm_gguf_writer_set_u32(w, "llama.block_count", (uint32_t) s->layers);
	llm_gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t) s->heads);
	llm_gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t) s->kv_heads);
	llm_gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t) s->ffn);
	llm_gguf_writer_set_u32(w, "llama.context_length", (uint32_t) s->ctx);
	llm_gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t) hd);
	llm_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
	llm_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
	if (!add_vocab(w, s) ||
		!add_matrix(w, &rng, "token_embd.weight", s->dim, s->vocab, s->type, 0.02) ||
		!add_ones(w, "output_norm.weight", s->dim) ||
		(!s->tied && !add_matrix(w, &rng, "output.weight", s->dim, s->vocab, s->type, 0.02)))
		return false;
	for (int l = 0; l < s->layers; l++)
	{
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%d." suffix, l), name)
		if (!add_ones(w, BLK("attn_norm.weight"), s->dim) ||
			!add_matrix(w, &rng, BLK("attn_q.weight"), s->dim, s->heads * hd, s->type, 0.02) ||
			!add_matrix(w, &rng, BLK("attn_k.weight"), s->dim, s->kv_heads * hd, s->type, 0.02) ||
			!add_matrix(w, &rng, BLK("attn_v.weight"), s->dim, s->kv_heads * hd, s->type, 0.02) ||
			!add_matrix(w, &rng, BLK("attn_output.weight"), s->heads * hd, s->dim, s->type, out_std) ||
			!add_ones(w, BLK("ffn_norm.weight"), s->dim) ||
			!add_matrix(w, &rng, BLK("ffn_gate.weight"), s->dim, s->ffn, s->type, 0.02) ||
			!add_matrix(w, &rng, BLK("ffn_up.weight"), s->dim, s->ffn, s->type, 0.02) ||
			!add_matrix(w, &rng, BLK("ffn_down.weight"), s->ffn, s->dim, s->type, out_std))
			return false;
#undef BLK
	}
	return true;
}

/* Print usage. */
static void
usage(void)
{
	fprintf(stderr,
			"usage: llm-random-model -o OUT.gguf [--dim 768] [--layers 12] [--heads 12] [--kv-heads HEADS]\n"
			"                        [--ffn 2048] [--vocab 32000] [--ctx 2048] [--type F32|F16|BF16|Q8_0|Q4_0]\n"
			"                        [--seed 1] [--tied]\n");
}

int
main(int argc, char **argv)
{
	Shape		s = {768, 12, 12, 0, 2048, 32000, 2048, LLM_TYPE_F32, 1, false};
	const char *out = NULL;
	LlmGgufWriter *w;
	LlmError	err;
	long		v;

	for (int i = 1; i < argc; i++)
	{
		const char *opt = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		int		   *field = NULL;

		if (strcmp(opt, "--tied") == 0)
		{
			s.tied = true;
			continue;
		}
		if (val == NULL)
		{
			usage();
			return 2;
		}
		i++;
		if (strcmp(opt, "-o") == 0)
			out = val;
		else if (strcmp(opt, "--type") == 0)
		{
			s.type = -1;
			for (int t = 0; t < LLM_TYPE_COUNT; t++)
				if (llm_type_traits(t) && strcasecmp(llm_type_traits(t)->name, val) == 0 && llm_type_can_quantize(t))
					s.type = t;
			if (s.type < 0)
			{
				fprintf(stderr, "llm-random-model: unsupported type \"%s\"\n", val);
				return 2;
			}
		}
		else if (strcmp(opt, "--seed") == 0)
		{
			if (!cli_parse_int(opt, val, 0, __LONG_MAX__, &v))
				return 2;
			s.seed = (uint64_t) v;
		}
		else
		{
			field = strcmp(opt, "--dim") == 0 ? &s.dim :
				strcmp(opt, "--layers") == 0 ? &s.layers :
				strcmp(opt, "--heads") == 0 ? &s.heads :
				strcmp(opt, "--kv-heads") == 0 ? &s.kv_heads :
				strcmp(opt, "--ffn") == 0 ? &s.ffn :
				strcmp(opt, "--vocab") == 0 ? &s.vocab :
				strcmp(opt, "--ctx") == 0 ? &s.ctx : NULL;
			if (field == NULL)
			{
				usage();
				return 2;
			}
			if (!cli_parse_int(opt, val, 1, 1 << 20, &v))
				return 2;
			*field = (int) v;
		}
	}
	if (s.kv_heads == 0)
		s.kv_heads = s.heads;
	if (out == NULL || s.vocab < 260 || s.dim % s.heads != 0 || s.heads % s.kv_heads != 0 ||
		s.dim % llm_type_traits(s.type)->block_size != 0 || s.ffn % llm_type_traits(s.type)->block_size != 0)
	{
		fprintf(stderr, "llm-random-model: need -o, vocab >= 260, dim divisible by heads, heads by kv-heads, "
				"and dim and ffn by the type's block size\n");
		return 2;
	}
	w = llm_gguf_writer_new();
	if (w == NULL || !build_model(w, &s))
	{
		fprintf(stderr, "llm-random-model: out of memory\n");
		llm_gguf_writer_free(w);
		return 1;
	}
	if (llm_gguf_writer_save(w, out, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-random-model: %s\n", err.msg);
		llm_gguf_writer_free(w);
		return 1;
	}
	llm_gguf_writer_free(w);
	return 0;
}
