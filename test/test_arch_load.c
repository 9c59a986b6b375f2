/*
 * test_arch_load.c
 *		Loading the architectures beyond llama: what each loader reads (the
 *		defaults llama.cpp uses, fused tensors bound in place, RoPE scaling
 *		folded into the frequency table), and the variants it refuses at
 *		load with a message naming them (a tensor it does not use, YaRN,
 *		LongRoPE, a bias on only some of Q, K and V).
 *
 * The models are small random ones from bin/llm-random-model (run from the
 * repository root after make), rewritten with one change each through the
 * GGUF writer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"
#include "gguf.h"
#include "model.h"

#define DIR "build/arch-load-models"
#define SHAPE "--dim 128 --layers 2 --heads 4 --kv-heads 2 --ffn 256 --vocab 512 --ctx 256 --seed 3"

/* Write a random model of arch (llm-random-model's --arch) to path; false on failure. */
static bool
make_model(const char *arch, const char *path)
{
	char		cmd[512];

	snprintf(cmd, sizeof(cmd), "bin/llm-random-model -o %s --arch %s " SHAPE, path, arch);
	return system(cmd) == 0;
}

/*
 * Copy the GGUF file src to dst, leaving out key skip_key and tensor
 * skip_tensor (either NULL), then setting str key set_key = set_val and
 * adding an F32 vector tensor add_tensor of add_n values 1 (either NULL).
 */
static bool
rewrite(const char *src, const char *dst, const char *skip_key, const char *skip_tensor, const char *set_key,
		const char *set_val, const char *add_tensor, int add_n)
{
	LlmGguf    *g = NULL;
	LlmGgufWriter *w = llm_gguf_writer_new();
	LlmError	err;
	float	   *ones = NULL;
	bool		ok;

	if (w == NULL || llm_gguf_open(src, &g, &err) != LLM_OK)
	{
		llm_gguf_writer_free(w);
		return false;
	}
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (skip_key == NULL || strcmp(g->kv[i].key, skip_key) != 0)
			llm_gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
	if (set_key != NULL)
		llm_gguf_writer_set_str(w, set_key, set_val);
	for (uint64_t i = 0; i < g->n_tensors; i++)
	{
		const LlmGgufTensor *t = &g->tensors[i];

		if (skip_tensor == NULL || strcmp(t->name, skip_tensor) != 0)
			llm_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
	}
	if (add_tensor != NULL && (ones = malloc((size_t) add_n * sizeof(float))) != NULL)
	{
		int64_t		ne[1] = {add_n};

		for (int i = 0; i < add_n; i++)
			ones[i] = 1.0f;
		llm_gguf_writer_add_tensor(w, add_tensor, LLM_TYPE_F32, 1, ne, ones);
	}
	ok = llm_gguf_writer_save(w, dst, &err) == LLM_OK;
	free(ones);
	llm_gguf_writer_free(w);
	llm_gguf_close(g);
	return ok;
}

/* Copy the GGUF file src to dst with u32 key (or, with n_arr > 0, an i32 array of n_arr values val) set. */
static bool
rewrite_int(const char *src, const char *dst, const char *key, uint32_t val, int n_arr)
{
	LlmGguf    *g = NULL;
	LlmGgufWriter *w = llm_gguf_writer_new();
	LlmError	err;
	int32_t		arr[64];
	bool		ok;

	if (w == NULL || n_arr > 64 || llm_gguf_open(src, &g, &err) != LLM_OK)
	{
		llm_gguf_writer_free(w);
		return false;
	}
	for (uint64_t i = 0; i < g->n_kv; i++)
		llm_gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
	for (int i = 0; i < n_arr; i++)
		arr[i] = (int32_t) val;
	if (n_arr > 0)
		llm_gguf_writer_set_arr_i32(w, key, arr, (uint64_t) n_arr);
	else
		llm_gguf_writer_set_u32(w, key, val);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		llm_gguf_writer_add_tensor(w, g->tensors[i].name, g->tensors[i].type, g->tensors[i].n_dims,
								   g->tensors[i].ne, g->tensors[i].data);
	ok = llm_gguf_writer_save(w, dst, &err) == LLM_OK;
	llm_gguf_writer_free(w);
	llm_gguf_close(g);
	return ok;
}

/* Check that loading path fails with status want and a message containing what. */
static void
check_refused(const char *path, LlmStatus want, const char *what)
{
	LlmModel   *m = NULL;
	LlmError	err = {0};
	LlmStatus	st = llm_model_load(path, &m, &err);

	TEST_CHECK(st == want && strstr(err.msg, what) != NULL, "%s: status %d, message \"%s\", expected %d with \"%s\"",
			   path, (int) st, err.msg, (int) want, what);
	llm_model_free(m);
}

/* Load path; NULL (with a failed check) when it does not load. */
static LlmModel *
load(const char *path)
{
	LlmModel   *m = NULL;
	LlmError	err;

	if (llm_model_load(path, &m, &err) != LLM_OK)
	{
		TEST_CHECK(false, "load %s: %s", path, err.msg);
		return NULL;
	}
	return m;
}

/* What each architecture's loader reads. */
static void
test_configs(void)
{
	LlmModel   *m;

	if ((m = load(DIR "/qwen2.gguf")) != NULL)
	{
		TEST_CHECK(m->config.arch == LLM_ARCH_QWEN2 && m->config.rope_mode == LLM_ROPE_NEOX, "qwen2 config");
		TEST_CHECK(m->weights.layers[1].bq && m->weights.layers[1].bk && m->weights.layers[1].bv, "qwen2 biases");
		llm_model_free(m);
	}
	if ((m = load(DIR "/qwen3.gguf")) != NULL)
	{
		TEST_CHECK(m->config.arch == LLM_ARCH_QWEN3 && m->config.rope_mode == LLM_ROPE_NEOX &&
				   m->weights.layers[0].q_norm && m->weights.layers[0].k_norm && !m->weights.layers[0].bq,
				   "qwen3 config");
		llm_model_free(m);
	}
	if ((m = load(DIR "/gemma2.gguf")) != NULL)
	{
		const LlmConfig *c = &m->config;

		TEST_CHECK(c->arch == LLM_ARCH_GEMMA2 && c->sliding_window == 16 && c->attn_softcap == 2.0f &&
				   c->final_softcap == 2.0f && m->weights.layers[0].is_local && !m->weights.layers[1].is_local &&
				   m->weights.output.data == m->weights.tok_embd.data && m->weights.layers[0].post_attn_norm,
				   "gemma2 config");
		llm_model_free(m);
	}
	/* gemma2 without its optional keys: llama.cpp's defaults (window 4096, soft-caps 50 and 30) */
	if (rewrite(DIR "/gemma2.gguf", DIR "/gemma2-defaults.gguf", "gemma2.attention.sliding_window", NULL, NULL, NULL,
				NULL, 0) &&
		rewrite(DIR "/gemma2-defaults.gguf", DIR "/gemma2-defaults2.gguf", "gemma2.attn_logit_softcapping", NULL,
				NULL, NULL, NULL, 0) &&
		rewrite(DIR "/gemma2-defaults2.gguf", DIR "/gemma2-defaults3.gguf", "gemma2.final_logit_softcapping", NULL,
				NULL, NULL, NULL, 0) &&
		(m = load(DIR "/gemma2-defaults3.gguf")) != NULL)
	{
		TEST_CHECK(m->config.sliding_window == 4096 && m->config.attn_softcap == 50.0f &&
				   m->config.final_softcap == 30.0f, "gemma2 defaults");
		llm_model_free(m);
	}
	/* gemma2.attention.sliding_window_pattern n: every n-th layer global, as llama.cpp's set_swa_pattern */
	if (rewrite_int(DIR "/gemma2.gguf", DIR "/gemma2-pattern1.gguf", "gemma2.attention.sliding_window_pattern", 1, 0) &&
		(m = load(DIR "/gemma2-pattern1.gguf")) != NULL)
	{
		TEST_CHECK(!m->weights.layers[0].is_local && !m->weights.layers[1].is_local, "gemma2 pattern 1: all global");
		llm_model_free(m);
	}
	if (rewrite_int(DIR "/gemma2.gguf", DIR "/gemma2-pattern-arr.gguf", "gemma2.attention.sliding_window_pattern", 1, 2))
		check_refused(DIR "/gemma2-pattern-arr.gguf", LLM_ERR_UNSUPPORTED, "sliding_window_pattern");
	if ((m = load(DIR "/phi3.gguf")) != NULL)
	{
		const LlmLayerWeights *lw = &m->weights.layers[1];
		const LlmGgufTensor *qkv = llm_gguf_tensor(m->gguf, "blk.1.attn_qkv.weight");
		const LlmGgufTensor *up = llm_gguf_tensor(m->gguf, "blk.1.ffn_up.weight");

		/* the parts are rows of the fused tensors, in place: q, k, v; gate, then up */
		TEST_CHECK(qkv && lw->wq.data == qkv->data && lw->wk.data == lw->wq.data + lw->wq.rows * lw->wq.row_bytes &&
				   lw->wv.data == lw->wk.data + lw->wk.rows * lw->wk.row_bytes &&
				   lw->wq.rows == 128 && lw->wk.rows == 64 && lw->wv.rows == 64, "phi3 fused Q/K/V");
		TEST_CHECK(up && lw->w_gate.data == up->data && lw->w_up.data == lw->w_gate.data + 256 * lw->w_gate.row_bytes &&
				   lw->w_gate.rows == 256 && lw->w_up.rows == 256, "phi3 fused gate/up");
		TEST_CHECK(m->config.sliding_window == 0, "phi3's sliding window is ignored, as in llama.cpp");
		llm_model_free(m);
	}
}

/* RoPE scaling: Llama 3.1's factors and a linear factor divide the frequencies; YaRN and LongRoPE are refused. */
static void
test_rope_scaling(void)
{
	LlmModel   *plain = load(DIR "/llama.gguf");
	LlmModel   *m;
	LlmGgufWriter *w;
	LlmGguf    *g = NULL;
	LlmError	err;

	if (plain == NULL)
		return;
	if ((m = load(DIR "/llama31.gguf")) != NULL)
	{
		const LlmGgufTensor *t = llm_gguf_tensor(m->gguf, "rope_freqs.weight");
		float		base = m->config.rope_base;
		bool		ok = t != NULL && base == 500000.0f;

		for (int i = 0; ok && i < m->config.rope_dim / 2; i++)
		{
			float		want = (float) pow((double) base, -2.0 * i / m->config.rope_dim) / ((const float *) t->data)[i];

			ok = fabsf(m->rope_inv_freq[i] - want) <= 1e-6f * want;
		}
		TEST_CHECK(ok, "llama31: the inverse frequencies are divided by rope_freqs.weight");
		llm_model_free(m);
	}
	/* linear: rope.scaling.factor 4 quarters every frequency (a float key, so written here) */
	w = llm_gguf_writer_new();
	if (w != NULL && llm_gguf_open(DIR "/llama.gguf", &g, &err) == LLM_OK)
	{
		for (uint64_t i = 0; i < g->n_kv; i++)
			llm_gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
		llm_gguf_writer_set_str(w, "llama.rope.scaling.type", "linear");
		llm_gguf_writer_set_f32(w, "llama.rope.scaling.factor", 4.0f);
		for (uint64_t i = 0; i < g->n_tensors; i++)
			llm_gguf_writer_add_tensor(w, g->tensors[i].name, g->tensors[i].type, g->tensors[i].n_dims,
									   g->tensors[i].ne, g->tensors[i].data);
		TEST_CHECK(llm_gguf_writer_save(w, DIR "/llama-linear.gguf", &err) == LLM_OK, "%s", err.msg);
		if ((m = load(DIR "/llama-linear.gguf")) != NULL)
		{
			bool		ok = true;

			for (int i = 0; i < m->config.rope_dim / 2; i++)
				ok = ok && fabsf(m->rope_inv_freq[i] - plain->rope_inv_freq[i] * 0.25f) <= 1e-7f * plain->rope_inv_freq[i];
			TEST_CHECK(ok, "linear RoPE scaling 4 quarters the frequencies");
			llm_model_free(m);
		}
	}
	llm_gguf_close(g);
	llm_gguf_writer_free(w);
	llm_model_free(plain);

	if (rewrite(DIR "/llama.gguf", DIR "/llama-yarn.gguf", NULL, NULL, "llama.rope.scaling.type", "yarn", NULL, 0))
		check_refused(DIR "/llama-yarn.gguf", LLM_ERR_UNSUPPORTED, "yarn");
	if (rewrite(DIR "/phi3.gguf", DIR "/phi3-longrope.gguf", NULL, NULL, NULL, NULL, "rope_factors_long.weight", 16))
		check_refused(DIR "/phi3-longrope.gguf", LLM_ERR_UNSUPPORTED, "LongRoPE");
	if (rewrite(DIR "/phi3.gguf", DIR "/phi3-longrope2.gguf", NULL, NULL, "phi3.rope.scaling.type", "longrope", NULL, 0))
		check_refused(DIR "/phi3-longrope2.gguf", LLM_ERR_UNSUPPORTED, "longrope");
	/* rope_freqs.weight belongs to llama only (llama.cpp loads it for no other architecture here) */
	if (rewrite(DIR "/qwen3.gguf", DIR "/qwen3-freqs.gguf", NULL, NULL, NULL, NULL, "rope_freqs.weight", 16))
		check_refused(DIR "/qwen3-freqs.gguf", LLM_ERR_UNSUPPORTED, "rope_freqs.weight");
}

/* Variants that are refused by name: an unused tensor, biases on some of Q, K, V only. */
static void
test_refusals(void)
{
	if (rewrite(DIR "/llama.gguf", DIR "/llama-outbias.gguf", NULL, NULL, NULL, NULL, "output.bias", 512))
		check_refused(DIR "/llama-outbias.gguf", LLM_ERR_UNSUPPORTED, "output.bias");
	if (rewrite(DIR "/llama.gguf", DIR "/llama-ffnbias.gguf", NULL, NULL, NULL, NULL, "blk.0.ffn_down.bias", 128))
		check_refused(DIR "/llama-ffnbias.gguf", LLM_ERR_UNSUPPORTED, "blk.0.ffn_down.bias");
	if (rewrite(DIR "/qwen2.gguf", DIR "/qwen2-nokbias.gguf", NULL, "blk.1.attn_k.bias", NULL, NULL, NULL, 0))
		check_refused(DIR "/qwen2-nokbias.gguf", LLM_ERR_UNSUPPORTED, "layer 1");
	if (rewrite(DIR "/gemma2.gguf", DIR "/gemma2-output.gguf", NULL, NULL, NULL, NULL, "output.weight", 4))
		check_refused(DIR "/gemma2-output.gguf", LLM_ERR_UNSUPPORTED, "output.weight");
	if (rewrite(DIR "/qwen3.gguf", DIR "/qwen3-noqnorm.gguf", NULL, "blk.0.attn_q_norm.weight", NULL, NULL, NULL, 0))
		check_refused(DIR "/qwen3-noqnorm.gguf", LLM_ERR_FORMAT, "attn_q_norm");
}

int
main(void)
{
	static const char *const archs[] = {"llama", "llama31", "qwen2", "qwen3", "gemma2", "phi3"};
	bool		made = true;

	(void) mkdir(DIR, 0755);
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
	{
		char		path[256];

		snprintf(path, sizeof(path), DIR "/%s.gguf", archs[i]);
		made = made && make_model(archs[i], path);
	}
	TEST_CHECK(made, "bin/llm-random-model failed (run from the repository root after make)");
	if (made)
	{
		test_configs();
		test_rope_scaling();
		test_refusals();
	}
	return test_summary("test_arch_load");
}
