/*
 * bench_cuda.c
 *		llm-gpu-bench: decode and prefill speed of the CUDA backend on
 *		random-weight Llama models of 1B and 8B shape, in BF16, Q8_0 and
 *		Q4_0, against the HBM roofline.
 *
 * The weights are made on the device (llm_cuda_weight_random): nothing is
 * read from disk or the network, and an 8B model is ready in milliseconds.
 * Each model runs through llm_forward as the engine runs it: prefill of
 * one 512-token prompt in one step; decode steps of one token for 1 and
 * for 64 sequences, each with a context of --ctx positions already in the
 * (F16) KV cache.  Times are host wall clock around whole forward passes,
 * which end with the logits copied to the host; the median of --steps
 * timed steps after warm-up.
 *
 * Roofline: a decode step must read every weight matrix once, so its
 * floor is weight bytes / HBM bandwidth (4.8 TB/s on an H200); the
 * fraction printed is (weight bytes read per step / step time) / 4.8 TB/s.
 * Prefill's fraction is computed the same way (per step of 512 tokens); it
 * is compute-bound, so the fraction is small by nature.
 *
 * Before the models, the GEMV kernels alone on 8B-shaped matrices (the
 * bandwidth each reaches); after them, the 8B BF16 model again without op
 * fusion (BF16*) and without programmatic dependent launch (BF16+), to show
 * what each is worth (LlmBackendOptions; --no-fuse and --no-pdl turn them
 * off for every run).  --tiny runs toy shapes (on the CPU emulator).
 *
 * Writes the table and bench/results/gpu_bench.{csv,json} (--out PREFIX).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_api.h"
#include "forward.h"
#include "kernels.h"
#include "kv.h"
#include "model.h"

#define HBM_BYTES_PER_S 4.8e12
#define BATCH 64

static int	prefill_tokens = 512;	/* --tiny: 16 */

typedef struct Shape
{
	const char *name;
	int			dim;
	int			n_layers;
	int			n_heads;
	int			n_kv_heads;
	int			ffn_dim;
	int			n_vocab;
} Shape;

/* Llama 3.2 1B and Llama 3 8B (untied output here: the 1B reads it once either way). */
static Shape shapes[] = {
	{"1B", 2048, 16, 32, 8, 8192, 128256},
	{"8B", 4096, 32, 32, 8, 14336, 128256},
};

/* --tiny: toy shapes, to run the program itself on the CPU emulator. */
static const Shape tiny_shapes[] = {
	{"1B", 64, 2, 4, 2, 128, 256},
	{"8B", 128, 2, 4, 2, 256, 512},
};

typedef struct Result
{
	const char *shape;
	const char *type;
	double		weight_gb;		/* bytes of every matrix read in a decode step */
	double		prefill_tps;
	double		prefill_frac;
	double		dec1_tps;
	double		dec1_frac;
	double		dec64_tps;
	double		dec64_frac;
	char		error[LLM_ERROR_MSG_LEN];
} Result;

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Order doubles. */
static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* The model: shape s in type t, every matrix random on the device, norms and RoPE on the host. */
typedef struct BenchModel
{
	LlmModel	m;
	uint8_t    *keys;			/* one byte per matrix: its host address is the key */
	float	   *norm;			/* (dim) shared by every norm */
	double		decode_bytes;
} BenchModel;

/* Describe weight w (rows x cols of type) keyed by *key, made random on be. */
static LlmStatus
bench_weight(LlmBackend *be, LlmWeight *w, const char *name, LlmType type, int rows, int cols, uint8_t *key,
			 uint64_t seed, LlmError *err)
{
	w->name = name;
	w->type = type;
	w->rows = rows;
	w->cols = cols;
	w->row_bytes = llm_type_row_size(type, cols);
	w->data = key;
	return llm_cuda_weight_random(be, w, seed, 1.0f / sqrtf((float) cols), err);
}

/* Build the random model of shape s in type t on be. */
static LlmStatus
bench_model(LlmBackend *be, const Shape *s, LlmType t, BenchModel *bm, LlmError *err)
{
	LlmConfig  *c = &bm->m.config;
	LlmWeights *w = &bm->m.weights;
	int			hd = s->dim / s->n_heads;
	size_t		before = llm_cuda_weight_bytes(be);
	LlmStatus	st;
	int			k = 0;

	memset(bm, 0, sizeof(*bm));
	c->arch = LLM_ARCH_LLAMA;
	c->dim = s->dim;
	c->n_layers = s->n_layers;
	c->n_heads = s->n_heads;
	c->n_kv_heads = s->n_kv_heads;
	c->head_dim = hd;
	c->ffn_dim = s->ffn_dim;
	c->n_vocab = s->n_vocab;
	c->n_ctx = 8192;
	c->rope_dim = hd;
	c->rope_base = 500000.0f;
	c->rope_mode = LLM_ROPE_NEOX;
	c->rms_eps = 1e-5f;
	c->act = LLM_ACT_SILU;
	c->attn_scale = 1.0f / sqrtf((float) hd);
	c->embd_scale = 1.0f;
	bm->keys = calloc((size_t) 2 + 7 * s->n_layers, 1);
	bm->norm = malloc((size_t) s->dim * sizeof(float));
	bm->m.rope_inv_freq = malloc((size_t) hd / 2 * sizeof(float));
	w->layers = calloc((size_t) s->n_layers, sizeof(LlmLayerWeights));
	if (!bm->keys || !bm->norm || !bm->m.rope_inv_freq || !w->layers)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the model");
	for (int i = 0; i < s->dim; i++)
		bm->norm[i] = 1.0f;
	for (int i = 0; i < hd / 2; i++)
		bm->m.rope_inv_freq[i] = powf(c->rope_base, -2.0f * i / hd);
	w->output_norm = bm->norm;
	if ((st = bench_weight(be, &w->tok_embd, "token_embd", t, s->n_vocab, s->dim, &bm->keys[k++], 1, err)) ||
		(st = bench_weight(be, &w->output, "output", t, s->n_vocab, s->dim, &bm->keys[k++], 2, err)))
		return st;
	for (int l = 0; l < s->n_layers; l++)
	{
		LlmLayerWeights *lw = &w->layers[l];
		uint64_t	seed = 100 + 10 * (uint64_t) l;

		lw->attn_norm = lw->ffn_norm = bm->norm;
		if ((st = bench_weight(be, &lw->wq, "wq", t, s->n_heads * hd, s->dim, &bm->keys[k++], seed, err)) ||
			(st = bench_weight(be, &lw->wk, "wk", t, s->n_kv_heads * hd, s->dim, &bm->keys[k++], seed + 1, err)) ||
			(st = bench_weight(be, &lw->wv, "wv", t, s->n_kv_heads * hd, s->dim, &bm->keys[k++], seed + 2, err)) ||
			(st = bench_weight(be, &lw->wo, "wo", t, s->dim, s->n_heads * hd, &bm->keys[k++], seed + 3, err)) ||
			(st = bench_weight(be, &lw->w_gate, "gate", t, s->ffn_dim, s->dim, &bm->keys[k++], seed + 4, err)) ||
			(st = bench_weight(be, &lw->w_up, "up", t, s->ffn_dim, s->dim, &bm->keys[k++], seed + 5, err)) ||
			(st = bench_weight(be, &lw->w_down, "down", t, s->dim, s->ffn_dim, &bm->keys[k++], seed + 6, err)))
			return st;
	}
	/* a decode step reads every matrix but the embedding (of which it reads a row) */
	bm->decode_bytes = (double) (llm_cuda_weight_bytes(be) - before) -
		(double) s->n_vocab * llm_type_row_size(t, s->dim);
	return be->ops->prepare(be, &bm->m, err);
}

/* Free the host side of a bench model. */
static void
bench_model_free(BenchModel *bm)
{
	free(bm->keys);
	free(bm->norm);
	free(bm->m.rope_inv_freq);
	free(bm->m.weights.layers);
}

/*
 * Time steps of n_seqs sequences with tokens_per_seq tokens each at
 * positions past .. (past + tokens_per_seq - 1), then past advancing by
 * tokens_per_seq (decode) or not at all (prefill, recomputed in place);
 * the median step time in seconds, or -1 on error.
 */
static double
time_steps(const BenchModel *bm, LlmBackend *be, LlmKvCache *kv, LlmRunState *rs, LlmKvSeq *seqs, int n_seqs,
		   int tokens_per_seq, int past, bool advance, int warmup, int steps, float *logits, LlmError *err)
{
	int			n = n_seqs * tokens_per_seq;
	int32_t    *tok = malloc((size_t) n * sizeof(int32_t));
	int32_t    *pos = malloc((size_t) n * sizeof(int32_t));
	LlmKvSeq  **sq = malloc((size_t) n * sizeof(LlmKvSeq *));
	bool	   *want = malloc((size_t) n * sizeof(bool));
	double	   *t = malloc((size_t) steps * sizeof(double));
	double		med = -1.0;
	int			p = past;

	for (int i = 0; i < warmup + steps; i++)
	{
		LlmBatch	b = {n, tok, pos, sq, want};
		double		t0;

		for (int s = 0; s < n_seqs; s++)
			for (int j = 0; j < tokens_per_seq; j++)
			{
				int			k = s * tokens_per_seq + j;

				tok[k] = (int32_t) ((7919u * (unsigned) (k + 13 * i)) % (unsigned) bm->m.config.n_vocab);
				pos[k] = p + j;
				sq[k] = &seqs[s];
				want[k] = j == tokens_per_seq - 1;
			}
		t0 = now();
		if (llm_forward(&bm->m, be, kv, rs, &b, logits, err) != LLM_OK)
			goto done;
		if (i >= warmup)
			t[i - warmup] = now() - t0;
		if (advance)
			p += tokens_per_seq;
	}
	qsort(t, (size_t) steps, sizeof(double), cmp_double);
	med = t[steps / 2];
done:
	free(tok);
	free(pos);
	free(sq);
	free(want);
	free(t);
	return med;
}

/* Benchmark shape s in type t on a backend with options opt: prefill, decode at batch 1 and BATCH. */
static void
bench_one(const Shape *s, LlmType t, const char *tname, int ctx, int steps, const LlmBackendOptions *opt, Result *r)
{
	LlmBackend *be = NULL;
	BenchModel	bm;
	LlmKvCache	kv = {0};
	LlmRunState rs = {0};
	LlmKvSeq   *seqs = calloc(BATCH, sizeof(LlmKvSeq));
	float	   *logits = malloc((size_t) BATCH * s->n_vocab * sizeof(float));
	LlmError	err;
	int			hd = s->dim / s->n_heads;
	int			per_seq = (ctx + steps + 16 + prefill_tokens + 15) / 16;
	LlmKvParams kp = {
		.n_layers = s->n_layers,.n_kv_heads = s->n_kv_heads,.head_dim = hd,.block_size = 16,
		.n_blocks = BATCH * per_seq + 8,.type = LLM_KV_F16,.device_storage = true,
	};
	double		tp;
	double		t1;
	double		t64;

	memset(r, 0, sizeof(*r));
	memset(&bm, 0, sizeof(bm));
	r->shape = s->name;
	r->type = tname;
	if (llm_backend_new(LLM_DEVICE_CUDA, opt, &be, &err) != LLM_OK)
		goto fail;
	if (bench_model(be, s, t, &bm, &err) != LLM_OK ||
		llm_kv_init(&kv, &kp, &err) != LLM_OK ||
		llm_run_state_init(&rs, &bm.m.config, prefill_tokens > BATCH ? prefill_tokens : BATCH, &err) != LLM_OK)
		goto fail;
	r->weight_gb = bm.decode_bytes / 1e9;
	for (int i = 0; i < BATCH; i++)
		if (llm_kv_seq_reserve(&kv, &seqs[i], (i == 0 ? prefill_tokens : 0) + ctx + steps + 8, &err) != LLM_OK)
			goto fail;

	/* prefill: one prompt of prefill_tokens in one step (recomputed in place each time) */
	if ((tp = time_steps(&bm, be, &kv, &rs, seqs, 1, prefill_tokens, 0, false, 1, 3, logits, &err)) < 0)
		goto fail;
	/* decode: one token for 1, then for BATCH sequences, each past ctx positions */
	if ((t1 = time_steps(&bm, be, &kv, &rs, seqs, 1, 1, ctx, true, 3, steps, logits, &err)) < 0 ||
		(t64 = time_steps(&bm, be, &kv, &rs, seqs, BATCH, 1, ctx, true, 2, steps / 2 + 1, logits, &err)) < 0)
		goto fail;
	r->prefill_tps = prefill_tokens / tp;
	r->prefill_frac = bm.decode_bytes / tp / HBM_BYTES_PER_S;
	r->dec1_tps = 1.0 / t1;
	r->dec1_frac = bm.decode_bytes / t1 / HBM_BYTES_PER_S;
	r->dec64_tps = BATCH / t64;
	r->dec64_frac = bm.decode_bytes / t64 / HBM_BYTES_PER_S;
	goto done;
fail:
	snprintf(r->error, sizeof(r->error), "%s", err.msg);
	fprintf(stderr, "llm-gpu-bench: %s %s: %s\n", s->name, tname, err.msg);
done:
	llm_run_state_free(&rs);
	for (int i = 0; i < BATCH; i++)
	{
		llm_kv_seq_release(&kv, &seqs[i]);
		llm_kv_seq_free(&seqs[i]);
	}
	llm_kv_free(&kv);
	llm_backend_free(be);
	bench_model_free(&bm);
	free(seqs);
	free(logits);
}

/*
 * The GEMV kernels alone on 8B-shaped matrices (each larger than the L2):
 * achieved bandwidth of the weight reads, for tuning.  Prints one line per
 * shape and layout.
 */
static void
gemv_sweep(int shrink)
{
	static const struct
	{
		const char *name;
		int			count;		/* matrices in the job */
		int			glu;
		int64_t		rows[3];
		int64_t		cols;
	}			jobs[] = {
		{"wq 4096x4096", 1, -1, {4096}, 4096},
		{"wq+wk+wv (6144x4096)", 3, -1, {4096, 1024, 1024}, 4096},
		{"gate+up+silu (2x14336x4096)", 2, 0, {14336, 14336}, 4096},
		{"down 4096x14336", 1, -1, {4096}, 14336},
		{"output 128256x4096", 1, -1, {128256}, 4096},
	};
	static const struct
	{
		int			layout;
		const char *name;
		double		bytes_per_value;
	}			layouts[] = {
		{CUDA_LAYOUT_BF16, "BF16", 2.0}, {CUDA_LAYOUT_Q8_0R, "Q8_0", 34.0 / 32}, {CUDA_LAYOUT_Q4_0R, "Q4_0", 18.0 / 32},
	};
	cudaEvent_t e0;
	cudaEvent_t e1;

	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	printf("GEMV kernels alone, one token (weights streamed once; %.1f TB/s = 100%%):\n", HBM_BYTES_PER_S / 1e12);
	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++)
		for (size_t k = 0; k < sizeof(jobs) / sizeof(jobs[0]); k++)
		{
			CudaGemvJob job;
			void	   *mem[3] = {NULL, NULL, NULL};
			float	   *x = NULL;
			float	   *y[3] = {NULL, NULL, NULL};
			void	   *xq = NULL;
			double		bytes = 0.0;
			float		ms = 0.0f;
			bool		ok = true;
			int			reps = 20;

			memset(&job, 0, sizeof(job));
			job.count = jobs[k].count;
			job.glu = jobs[k].glu;
			for (int m = 0; m < job.count && ok; m++)
			{
				CudaMat    *w = &job.w[m];
				size_t		qb;
				size_t		sb;

				w->layout = layouts[l].layout;
				w->rows = jobs[k].rows[m] / shrink;
				w->cols = jobs[k].cols / shrink;
				w->row_bytes = w->layout == CUDA_LAYOUT_BF16 ? (size_t) w->cols * 2 :
					w->layout == CUDA_LAYOUT_Q8_0R ? (size_t) w->cols : (size_t) w->cols / 2;
				qb = ((size_t) w->rows * w->row_bytes + 255) & ~(size_t) 255;
				sb = w->layout == CUDA_LAYOUT_BF16 ? 0 : (size_t) w->rows * (w->cols / 32) * 2;
				ok = cudaMalloc(&mem[m], qb + sb) == cudaSuccess &&
					cudaMalloc((void **) &y[m], (size_t) w->rows * sizeof(float)) == cudaSuccess;
				if (!ok)
					break;
				w->data = mem[m];
				w->scales = sb > 0 ? (const uint16_t *) ((uint8_t *) mem[m] + qb) : NULL;
				job.y[m] = y[m];
				ok = llm_cuda_fill_random(w, 7 + m, 0.02f, 0) == cudaSuccess;
				bytes += (double) w->rows * w->cols * layouts[l].bytes_per_value;
			}
			ok = ok && cudaMalloc((void **) &x, (size_t) job.w[0].cols * sizeof(float)) == cudaSuccess &&
				cudaMemset(x, 0, (size_t) job.w[0].cols * sizeof(float)) == cudaSuccess &&
				cudaMalloc(&xq, llm_cuda_act_q8_bytes(1, job.w[0].cols)) == cudaSuccess &&
				llm_cuda_quantize_act(x, 1, job.w[0].cols, xq, 0) == cudaSuccess;
			for (int i = 0; ok && i < reps + 3; i++)
			{
				if (i == 3)
					cudaEventRecord(e0, 0);
				ok = llm_cuda_gemv(&job, x, xq, 1, 0) == cudaSuccess;
			}
			if (ok)
			{
				cudaEventRecord(e1, 0);
				ok = cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
			}
			if (ok)
				printf("  %-5s %-28s %8.1f us  %6.0f GB/s  %3.0f%%\n", layouts[l].name, jobs[k].name, 1e3 * ms / reps,
					   bytes / (ms / reps * 1e-3) / 1e9, 100.0 * bytes / (ms / reps * 1e-3) / HBM_BYTES_PER_S);
			else
				printf("  %-5s %-28s failed: %s\n", layouts[l].name, jobs[k].name, cudaGetErrorString(cudaGetLastError()));
			for (int m = 0; m < 3; m++)
			{
				cudaFree(mem[m]);
				cudaFree(y[m]);
			}
			cudaFree(x);
			cudaFree(xq);
		}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
}

/* Write the results as CSV and JSON next to prefix. */
static void
write_results(const char *prefix, const Result *r, int n, const char *device, int ctx)
{
	char		path[1024];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s.csv", prefix);
	if ((f = fopen(path, "w")) != NULL)
	{
		fprintf(f, "model,type,weight_gb,prefill_tok_s,prefill_roofline,decode1_tok_s,decode1_roofline,decode64_tok_s,decode64_roofline,error\n");
		for (int i = 0; i < n; i++)
			fprintf(f, "%s,%s,%.3f,%.1f,%.4f,%.1f,%.4f,%.1f,%.4f,%s\n", r[i].shape, r[i].type, r[i].weight_gb,
					r[i].prefill_tps, r[i].prefill_frac, r[i].dec1_tps, r[i].dec1_frac, r[i].dec64_tps,
					r[i].dec64_frac, r[i].error);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s.json", prefix);
	if ((f = fopen(path, "w")) != NULL)
	{
		fprintf(f, "{\"device\": \"%s\", \"hbm_tb_s\": %.1f, \"context\": %d, \"prefill_tokens\": %d, \"batch\": %d, \"results\": [\n",
				device, HBM_BYTES_PER_S / 1e12, ctx, prefill_tokens, BATCH);
		for (int i = 0; i < n; i++)
			fprintf(f, "  {\"model\": \"%s\", \"type\": \"%s\", \"weight_gb\": %.3f, \"prefill_tok_s\": %.1f, \"prefill_roofline\": %.4f, "
					"\"decode1_tok_s\": %.1f, \"decode1_roofline\": %.4f, \"decode64_tok_s\": %.1f, \"decode64_roofline\": %.4f, \"error\": \"%s\"}%s\n",
					r[i].shape, r[i].type, r[i].weight_gb, r[i].prefill_tps, r[i].prefill_frac, r[i].dec1_tps,
					r[i].dec1_frac, r[i].dec64_tps, r[i].dec64_frac, r[i].error, i + 1 < n ? "," : "");
		fprintf(f, "]}\n");
		fclose(f);
	}
}

int
main(int argc, char **argv)
{
	static const struct
	{
		LlmType		t;
		const char *name;
	}			types[] = {{LLM_TYPE_BF16, "BF16"}, {LLM_TYPE_Q8_0, "Q8_0"}, {LLM_TYPE_Q4_0, "Q4_0"}};
	Result		res[10];
	int			n = 0;
	int			ctx = 512;
	int			steps = 20;
	const char *out = "bench/results/gpu_bench";
	const char *only_shape = NULL;
	const char *only_type = NULL;
	bool		sweep = true;
	int			shrink = 1;
	bool		unfused = true;
	LlmBackendOptions opt;
	LlmBackendOptions variant;
	LlmBackend *probe;
	LlmError	err;
	char		device[256];

	llm_backend_options_default(&opt);
	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--ctx") == 0 && i + 1 < argc)
			ctx = atoi(argv[++i]);
		else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc)
			only_shape = argv[++i];
		else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc)
			only_type = argv[++i];
		else if (strcmp(argv[i], "--no-sweep") == 0)
			sweep = false;
		else if (strcmp(argv[i], "--no-unfused") == 0)
			unfused = false;
		else if (strcmp(argv[i], "--no-fuse") == 0)
			opt.fuse = false;
		else if (strcmp(argv[i], "--no-pdl") == 0)
			opt.pdl = false;
		else if (strcmp(argv[i], "--tiny") == 0)
		{
			memcpy(shapes, tiny_shapes, sizeof(shapes));
			prefill_tokens = 16;
			shrink = 64;
		}
		else
		{
			fprintf(stderr, "usage: llm-gpu-bench [--ctx 512] [--steps 20] [--model 1B|8B] [--type BF16|Q8_0|Q4_0] [--out PREFIX] [--no-sweep] [--no-unfused] [--no-fuse] [--no-pdl] [--tiny]\n");
			return 2;
		}
	}
	if (steps < 3)
		steps = 3;
	/* this program links the backend itself: no module to load */
	llm_cuda_module_use(&llm_cuda_module_entry);
	if (llm_cuda_device_count(NULL, 0) == 0)
	{
		printf("SKIP: no CUDA device\n");
		return 0;
	}
	if (llm_backend_new(LLM_DEVICE_CUDA, &opt, &probe, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-gpu-bench: %s\n", err.msg);
		return 1;
	}
	snprintf(device, sizeof(device), "%s", llm_cuda_device_name(probe));
	llm_backend_free(probe);
	if (sweep)
		gemv_sweep(shrink);
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		{
			if ((only_shape && strcmp(only_shape, shapes[s].name) != 0) ||
				(only_type && strcmp(only_type, types[t].name) != 0))
				continue;
			bench_one(&shapes[s], types[t].t, types[t].name, ctx, steps, &opt, &res[n]);
			fprintf(stderr, "llm-gpu-bench: %s %s done\n", shapes[s].name, types[t].name);
			n++;
		}
	/* what fusing launches and programmatic dependent launch buy: the 8B BF16 model without each */
	if (unfused && (!only_shape || strcmp(only_shape, "8B") == 0) && (!only_type || strcmp(only_type, "BF16") == 0))
	{
		variant = opt;
		variant.fuse = false;
		bench_one(&shapes[1], LLM_TYPE_BF16, "BF16*", ctx, steps, &variant, &res[n++]);
		variant = opt;
		variant.pdl = false;
		bench_one(&shapes[1], LLM_TYPE_BF16, "BF16+", ctx, steps, &variant, &res[n++]);
	}
	write_results(out, res, n, device, ctx);
	printf("\n%s, context %d, F16 KV cache; roofline = weight bytes per step / step time / %.1f TB/s%s\n", device,
		   ctx, HBM_BYTES_PER_S / 1e12, unfused ? "; BF16* = no op fusion, BF16+ = no programmatic dependent launch" : "");
	printf("%-5s %-5s %8s | %14s %6s | %14s %6s | %14s %6s\n", "model", "type", "GB/step", "decode b=1 t/s", "roof",
		   "decode b=64 t/s", "roof", "prefill t/s", "roof");
	for (int i = 0; i < n; i++)
		if (res[i].error[0])
			printf("%-5s %-5s  error: %s\n", res[i].shape, res[i].type, res[i].error);
		else
			printf("%-5s %-5s %8.2f | %14.1f %5.0f%% | %14.1f %5.0f%% | %14.0f %5.0f%%\n", res[i].shape, res[i].type,
				   res[i].weight_gb, res[i].dec1_tps, 100 * res[i].dec1_frac, res[i].dec64_tps, 100 * res[i].dec64_frac,
				   res[i].prefill_tps, 100 * res[i].prefill_frac);
	return 0;
}
