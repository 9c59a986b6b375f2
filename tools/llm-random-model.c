/*
 * llm-random-model.c
 *		Write a GGUF model of any shape and weight type with random weights,
 *		for tests and benchmarks (no download needed): a Llama by default,
 *		or with --arch one of the other architectures the engine runs, laid
 *		out as llama.cpp's converter writes them (so llama.cpp loads them too
 *		and the golden test can compare the two).
 *
 * The vocabulary is SentencePiece-style: <unk>, <s>, </s>, the 256 byte
 * tokens, then made-up pieces, so every text tokenizes.  Weights are
 * normal(0, 0.02) (outputs of attention and FFN scaled down by depth, as in
 * GPT-2).  The Llama's norms are 1.  The other architectures' Q and K
 * weights are normal(0, 0.08), so that attention is far from uniform (and
 * RoPE, a window or a soft-cap decides the output), their norms are
 * 1 + normal(0, 0.1) and their biases normal(0, 0.5), so that a norm or a
 * bias applied wrongly shows.  F32, F16, BF16, Q8_0 and Q4_0 are those
 * weights quantized; the types the engine cannot quantize to (Q4_1, Q5_0,
 * Q5_1, Q2_K .. Q6_K) are random blocks of about the same spread
 * (random_block), so every weight type has a model to test.
 *
 * --arch: llama; llama31 (Llama 3.1: RoPE base 500000 and the
 * rope_freqs.weight factors llama.cpp's converter computes for rope_type
 * "llama3", factor 8, low/high frequency factors 1 and 4, original context
 * 8192; also --arch llama --rope-scaling llama3); mistral (a Llama with
 * 4 query heads per KV head, RoPE base 1e6, and a sliding-window key that
 * llama.cpp's llama architecture ignores); qwen2 (Q/K/V biases); qwen3
 * (Q/K norms, heads of --head-dim); gemma2 (post-norms, tied output, window
 * 16 on every other layer, soft-caps of 2 on attention and on the output,
 * small enough to bend these scores and logits); phi3 (fused attn_qkv and
 * gate/up, a sliding-window key llama.cpp ignores).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "gguf.h"
#include "quant.h"
#include "quant_blocks.h"
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
	int			head_dim;		/* 0: dim / heads */
	int			type;
	uint64_t	seed;
	bool		tied;
	const char *arch;			/* llama, llama31, mistral, qwen2, qwen3, gemma2, phi3 */
	bool		rope_llama3;	/* Llama 3.1 frequency factors */
} Shape;

/* A standard normal draw (Box-Muller). */
static double
rand_normal(LlmRng *rng)
{
	double		u1 = llm_rng_uniform(rng);
	double		u2 = llm_rng_uniform(rng);

	return sqrt(-2.0 * log(u1 + 1e-300)) * cos(2.0 * M_PI * u2);
}

/* fp16 bits of x times the weights' spread over the quants' own (scale of a block whose weights spread about stddev). */
static uint16_t
fp16_scale(double stddev, double quant_spread)
{
	return llm_fp32_to_fp16((float) (stddev / quant_spread));
}

/*
 * Fill a block of type t (one this tool cannot quantize to: Q4_1, Q5_0,
 * Q5_1 and the K-quants) with random bits, then set its fp16 scales so its
 * weights spread about stddev: the scale is stddev over the typical
 * |quant x sub-block scale| of uniformly random bits, and a minimum (m,
 * dmin) is set near the middle of the range it is taken from, so weights
 * lie about zero.  Not a quantization of anything: random bit patterns the
 * kernels must still multiply exactly like the reference.
 */
static void
random_block(LlmRng *rng, int t, uint8_t *b, size_t bytes, double stddev)
{
	for (size_t i = 0; i < bytes; i++)
		b[i] = (uint8_t) llm_rng_next(rng);
	switch (t)
	{
		case LLM_TYPE_Q4_1:
			((LlmBlockQ4_1 *) b)->d = fp16_scale(stddev, 4.6);
			((LlmBlockQ4_1 *) b)->m = fp16_scale(-stddev * 7.5, 4.6);
			break;
		case LLM_TYPE_Q5_0:
			((LlmBlockQ5_0 *) b)->d = fp16_scale(stddev, 9.2);
			break;
		case LLM_TYPE_Q5_1:
			((LlmBlockQ5_1 *) b)->d = fp16_scale(stddev, 9.2);
			((LlmBlockQ5_1 *) b)->m = fp16_scale(-stddev * 15.5, 9.2);
			break;
		case LLM_TYPE_Q2_K:
			/* d * scale (0..15) * q (0..3) - dmin * min (0..15) */
			((LlmBlockQ2_K *) b)->d = fp16_scale(stddev, 7.5 * 1.1);
			((LlmBlockQ2_K *) b)->dmin = fp16_scale(stddev * 1.5, 1.1);
			break;
		case LLM_TYPE_Q3_K:
			/* d * (scale - 32) * (q - 4) */
			((LlmBlockQ3_K *) b)->d = fp16_scale(stddev, 18.0 * 2.3);
			break;
		case LLM_TYPE_Q4_K:
			/* d * scale (0..63) * q (0..15) - dmin * min (0..63) */
			((LlmBlockQ4_K *) b)->d = fp16_scale(stddev, 31.5 * 4.6);
			((LlmBlockQ4_K *) b)->dmin = fp16_scale(stddev * 7.5, 4.6);
			break;
		case LLM_TYPE_Q5_K:
			((LlmBlockQ5_K *) b)->d = fp16_scale(stddev, 31.5 * 9.2);
			((LlmBlockQ5_K *) b)->dmin = fp16_scale(stddev * 15.5, 9.2);
			break;
		case LLM_TYPE_Q6_K:
			/* d * scale (-128..127) * (q - 32) */
			((LlmBlockQ6_K *) b)->d = fp16_scale(stddev, 64.0 * 18.5);
			break;
	}
}

/* Whether this tool writes type t: quantized from normal weights, or as random blocks. */
static bool
type_writable(int t)
{
	return llm_type_can_quantize(t) || t == LLM_TYPE_Q4_1 || t == LLM_TYPE_Q5_0 || t == LLM_TYPE_Q5_1 ||
		t == LLM_TYPE_Q2_K || t == LLM_TYPE_Q3_K || t == LLM_TYPE_Q4_K || t == LLM_TYPE_Q5_K || t == LLM_TYPE_Q6_K;
}

/* Add a (rows, cols) matrix in type t: its first n_first rows normal(0, std_first), the rest normal(0, stddev). */
static bool
add_matrix_split(LlmGgufWriter *w, LlmRng *rng, const char *name, int cols, int rows, int t, int n_first,
				 double std_first, double stddev)
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
		const LlmTypeTraits *tr = llm_type_traits(t);

		if (!llm_type_can_quantize(t))
		{
			for (int c = 0; c < cols; c += tr->block_size)
				random_block(rng, t, data + (size_t) r * row_bytes + (size_t) (c / tr->block_size) * tr->type_size,
							 tr->type_size, r < n_first ? std_first : stddev);
			continue;
		}
		for (int c = 0; c < cols; c++)
			row[c] = (float) (rand_normal(rng) * (r < n_first ? std_first : stddev));
		llm_quantize_row(t, row, data + (size_t) r * row_bytes, cols);
	}
	llm_gguf_writer_add_tensor(w, name, t, 2, ne, data);
	free(data);
	free(row);
	return true;
}

/* Add a (rows, cols) matrix of normal(0, stddev) weights in type t. */
static bool
add_matrix(LlmGgufWriter *w, LlmRng *rng, const char *name, int cols, int rows, int t, double stddev)
{
	return add_matrix_split(w, rng, name, cols, rows, t, 0, stddev, stddev);
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

/* Add a vector of n values 1 + normal(0, 0.1) (F32): a norm's weights. */
static bool
add_norm(LlmGgufWriter *w, LlmRng *rng, const char *name, int n)
{
	float	   *v = malloc((size_t) n * sizeof(float));
	int64_t		ne[1] = {n};

	if (v == NULL)
		return false;
	for (int i = 0; i < n; i++)
		v[i] = (float) (1.0 + 0.1 * rand_normal(rng));
	llm_gguf_writer_add_tensor(w, name, LLM_TYPE_F32, 1, ne, v);
	free(v);
	return true;
}

/* Add a vector of n values normal(0, stddev) (F32): a bias. */
static bool
add_bias(LlmGgufWriter *w, LlmRng *rng, const char *name, int n, double stddev)
{
	float	   *v = malloc((size_t) n * sizeof(float));
	int64_t		ne[1] = {n};

	if (v == NULL)
		return false;
	for (int i = 0; i < n; i++)
		v[i] = (float) (stddev * rand_normal(rng));
	llm_gguf_writer_add_tensor(w, name, LLM_TYPE_F32, 1, ne, v);
	free(v);
	return true;
}

/*
 * Add rope_freqs.weight (rope_dim / 2 factors) as llama.cpp's converter
 * computes Llama 3.1's (rope_type "llama3": factor 8, low_freq_factor 1,
 * high_freq_factor 4, original_max_position_embeddings 8192).
 */
static bool
add_llama3_rope_freqs(LlmGgufWriter *w, int rope_dim, double base)
{
	float	   *v = malloc((size_t) (rope_dim / 2) * sizeof(float));
	int64_t		ne[1] = {rope_dim / 2};
	const double factor = 8.0,
				low = 1.0,
				high = 4.0,
				old_ctx = 8192.0;

	if (v == NULL)
		return false;
	for (int i = 0; i < rope_dim / 2; i++)
	{
		/* in float, as the converter's torch code computes the frequencies */
		float		freq = 1.0f / powf((float) base, (float) (2 * i) / (float) rope_dim);
		double		wavelen = 2.0 * M_PI / freq;

		if (wavelen < old_ctx / high)
			v[i] = 1.0f;
		else if (wavelen > old_ctx / low)
			v[i] = (float) factor;
		else
		{
			double		smooth = (old_ctx / wavelen - low) / (high - low);

			v[i] = (float) (1.0 / ((1.0 - smooth) / factor + smooth));
		}
	}
	llm_gguf_writer_add_tensor(w, "rope_freqs.weight", LLM_TYPE_F32, 1, ne, v);
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

/* Set the u32 key "<arch>.<suffix>". */
static void
set_arch_u32(LlmGgufWriter *w, const char *arch, const char *suffix, uint32_t v)
{
	char		key[128];

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	llm_gguf_writer_set_u32(w, key, v);
}

/* Set the f32 key "<arch>.<suffix>". */
static void
set_arch_f32(LlmGgufWriter *w, const char *arch, const char *suffix, float v)
{
	char		key[128];

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	llm_gguf_writer_set_f32(w, key, v);
}

/* Build a Llama into w (the original layout of this tool, byte for byte). */
static bool
build_llama(LlmGgufWriter *w, const Shape *s)
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

/*
 * The spread of Q and K weights in build_other: enough for attention scores
 * of a few units, so that attention (and RoPE, the window, the soft-cap)
 * visibly decides the output, where 0.02 leaves it nearly uniform.
 */
#define QK_STD 0.08

/*
 * Build one of the other architectures (--arch, see the top of the file)
 * into w, with the keys and tensor names llama.cpp's converter writes.
 */
static bool
build_other(LlmGgufWriter *w, const Shape *s)
{
	LlmRng		rng;
	const char *arch = s->arch;
	bool		llama = strcmp(arch, "llama31") == 0 || strcmp(arch, "mistral") == 0 ||
		strcmp(arch, "llama") == 0;
	bool		qwen2 = strcmp(arch, "qwen2") == 0;
	bool		qwen3 = strcmp(arch, "qwen3") == 0;
	bool		gemma2 = strcmp(arch, "gemma2") == 0;
	bool		phi3 = strcmp(arch, "phi3") == 0;
	const char *gguf_arch = llama ? "llama" : arch;
	int			hd = s->head_dim > 0 ? s->head_dim : s->dim / s->heads;
	int			q_dim = s->heads * hd;
	int			kv_dim = s->kv_heads * hd;
	double		out_std = 0.02 / sqrt(2.0 * s->layers);
	double		rope_base = strcmp(arch, "mistral") == 0 ? 1e6 : s->rope_llama3 ? 500000.0 : 10000.0;
	bool		tied = s->tied || gemma2;
	char		name[64];

	llm_rng_seed(&rng, s->seed);
	llm_gguf_writer_set_str(w, "general.architecture", gguf_arch);
	/* not "random-phi3": llama.cpp gives a model named phi3 the special tokens of Phi-3's vocabulary */
	snprintf(name, sizeof(name), "random-%s", phi3 ? "phi" : arch);
	llm_gguf_writer_set_str(w, "general.name", name);
	set_arch_u32(w, gguf_arch, "embedding_length", (uint32_t) s->dim);
	set_arch_u32(w, gguf_arch, "block_count", (uint32_t) s->layers);
	set_arch_u32(w, gguf_arch, "attention.head_count", (uint32_t) s->heads);
	set_arch_u32(w, gguf_arch, "attention.head_count_kv", (uint32_t) s->kv_heads);
	set_arch_u32(w, gguf_arch, "feed_forward_length", (uint32_t) s->ffn);
	set_arch_u32(w, gguf_arch, "context_length", (uint32_t) s->ctx);
	set_arch_u32(w, gguf_arch, "rope.dimension_count", (uint32_t) hd);
	set_arch_f32(w, gguf_arch, "rope.freq_base", (float) rope_base);
	set_arch_f32(w, gguf_arch, "attention.layer_norm_rms_epsilon", gemma2 || qwen3 ? 1e-6f : 1e-5f);
	if (hd != s->dim / s->heads)
	{
		set_arch_u32(w, gguf_arch, "attention.key_length", (uint32_t) hd);
		set_arch_u32(w, gguf_arch, "attention.value_length", (uint32_t) hd);
	}
	if (strcmp(arch, "mistral") == 0 || phi3)
		set_arch_u32(w, gguf_arch, "attention.sliding_window", 16);	/* ignored by llama.cpp for both */
	if (gemma2)
	{
		set_arch_u32(w, gguf_arch, "attention.sliding_window", 16);
		set_arch_f32(w, gguf_arch, "attn_logit_softcapping", 2.0f);
		set_arch_f32(w, gguf_arch, "final_logit_softcapping", 2.0f);
	}
	if (!add_vocab(w, s) ||
		!add_matrix(w, &rng, "token_embd.weight", s->dim, s->vocab, s->type, 0.02) ||
		!add_norm(w, &rng, "output_norm.weight", s->dim) ||
		(!tied && !add_matrix(w, &rng, "output.weight", s->dim, s->vocab, s->type, 0.02)) ||
		(s->rope_llama3 && !add_llama3_rope_freqs(w, hd, rope_base)))
		return false;
	for (int l = 0; l < s->layers; l++)
	{
		bool		ok = true;

#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%d." suffix, l), name)
		ok = ok && add_norm(w, &rng, BLK("attn_norm.weight"), s->dim);
		if (phi3)
			ok = ok && add_matrix_split(w, &rng, BLK("attn_qkv.weight"), s->dim, q_dim + 2 * kv_dim, s->type,
										q_dim + kv_dim, QK_STD, 0.02);
		else
			ok = ok && add_matrix(w, &rng, BLK("attn_q.weight"), s->dim, q_dim, s->type, QK_STD) &&
				add_matrix(w, &rng, BLK("attn_k.weight"), s->dim, kv_dim, s->type, QK_STD) &&
				add_matrix(w, &rng, BLK("attn_v.weight"), s->dim, kv_dim, s->type, 0.02);
		if (qwen2)
			ok = ok && add_bias(w, &rng, BLK("attn_q.bias"), q_dim, 0.5) &&
				add_bias(w, &rng, BLK("attn_k.bias"), kv_dim, 0.5) &&
				add_bias(w, &rng, BLK("attn_v.bias"), kv_dim, 0.5);
		if (qwen3)
			ok = ok && add_norm(w, &rng, BLK("attn_q_norm.weight"), hd) &&
				add_norm(w, &rng, BLK("attn_k_norm.weight"), hd);
		ok = ok && add_matrix(w, &rng, BLK("attn_output.weight"), q_dim, s->dim, s->type, out_std);
		if (gemma2)
			ok = ok && add_norm(w, &rng, BLK("post_attention_norm.weight"), s->dim);
		ok = ok && add_norm(w, &rng, BLK("ffn_norm.weight"), s->dim);
		if (phi3)
			ok = ok && add_matrix(w, &rng, BLK("ffn_up.weight"), s->dim, 2 * s->ffn, s->type, 0.02);
		else
			ok = ok && add_matrix(w, &rng, BLK("ffn_gate.weight"), s->dim, s->ffn, s->type, 0.02) &&
				add_matrix(w, &rng, BLK("ffn_up.weight"), s->dim, s->ffn, s->type, 0.02);
		ok = ok && add_matrix(w, &rng, BLK("ffn_down.weight"), s->ffn, s->dim, s->type, out_std);
		if (gemma2)
			ok = ok && add_norm(w, &rng, BLK("post_ffw_norm.weight"), s->dim);
#undef BLK
		if (!ok)
			return false;
	}
	return true;
}

/* Build the whole model into w. */
static bool
build_model(LlmGgufWriter *w, const Shape *s)
{
	if (strcmp(s->arch, "llama") == 0 && !s->rope_llama3 && s->head_dim == 0)
		return build_llama(w, s);
	return build_other(w, s);
}

/* Print usage. */
static void
usage(void)
{
	fprintf(stderr,
			"usage: llm-random-model -o OUT.gguf [--dim 768] [--layers 12] [--heads 12] [--kv-heads HEADS]\n"
			"                        [--ffn 2048] [--vocab 32000] [--ctx 2048] [--type F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|Q2_K..Q6_K]\n"
			"                        [--seed 1] [--tied] [--head-dim N]\n"
			"                        [--arch llama|llama31|mistral|qwen2|qwen3|gemma2|phi3] [--rope-scaling llama3]\n");
}

int
main(int argc, char **argv)
{
	Shape		s = {768, 12, 12, 0, 2048, 32000, 2048, 0, LLM_TYPE_F32, 1, false, "llama", false};
	static const char *const archs[] = {"llama", "llama31", "mistral", "qwen2", "qwen3", "gemma2", "phi3"};
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
		else if (strcmp(opt, "--arch") == 0)
		{
			s.arch = NULL;
			for (size_t a = 0; a < sizeof(archs) / sizeof(archs[0]); a++)
				if (strcmp(archs[a], val) == 0)
					s.arch = archs[a];
			if (s.arch == NULL)
			{
				fprintf(stderr, "llm-random-model: unknown architecture \"%s\"\n", val);
				return 2;
			}
		}
		else if (strcmp(opt, "--rope-scaling") == 0)
		{
			if (strcmp(val, "llama3") != 0)
			{
				fprintf(stderr, "llm-random-model: unknown RoPE scaling \"%s\" (only llama3)\n", val);
				return 2;
			}
			s.rope_llama3 = true;
		}
		else if (strcmp(opt, "--type") == 0)
		{
			s.type = -1;
			for (int t = 0; t < LLM_TYPE_COUNT; t++)
				if (llm_type_traits(t) && strcasecmp(llm_type_traits(t)->name, val) == 0 && type_writable(t))
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
				strcmp(opt, "--ctx") == 0 ? &s.ctx :
				strcmp(opt, "--head-dim") == 0 ? &s.head_dim : NULL;
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
		s.kv_heads = strcmp(s.arch, "mistral") == 0 && s.heads % 4 == 0 ? s.heads / 4 : s.heads;
	if (strcmp(s.arch, "llama31") == 0)
		s.rope_llama3 = true;
	if (s.rope_llama3 && strcmp(s.arch, "llama") != 0 && strcmp(s.arch, "llama31") != 0)
	{
		fprintf(stderr, "llm-random-model: --rope-scaling llama3 is for --arch llama\n");
		return 2;
	}
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
