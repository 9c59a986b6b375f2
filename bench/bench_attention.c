/*
 * bench_attention.c
 *		Micro-benchmark of the CPU attention over the paged KV cache in the
 *		shape of batched decode: B sequences of ctx positions each, one query
 *		token per sequence, every layer in turn (as a decode step walks them),
 *		for each SIMD level's kernels.
 *
 * Build and run from the repository root:
 *   make build/bench_attention
 *   build/bench_attention [threads] [seqs] [ctx] [heads] [kv_heads] [head_dim] [layers] [f16|f32|int8] [level]
 *
 * Defaults: 2 threads, 64 sequences of 160 positions, the 134M test
 * model's attention (12 heads, 12 KV heads, head width 64, 12 layers), f16.
 * Prints the time of one step's attention, the nanoseconds per query head
 * and position, and the KV bytes read per second.
 */
#include "backend.h"
#include "cpu/backend_cpu.h"
#include "cpu/attention.h"
#include "cpu/cpu_features.h"
#include "kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on a monotonic clock. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A uniform float in [-1, 1) from an xorshift state. */
static float
frand(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return (float) ((*s >> 40) * (1.0 / 8388608.0) - 1.0);
}

int
main(int argc, char **argv)
{
	int			threads = argc > 1 ? atoi(argv[1]) : 2;
	int			n_seq = argc > 2 ? atoi(argv[2]) : 64;
	int			ctx = argc > 3 ? atoi(argv[3]) : 160;
	int			n_heads = argc > 4 ? atoi(argv[4]) : 12;
	int			n_kv_heads = argc > 5 ? atoi(argv[5]) : 12;
	int			hd = argc > 6 ? atoi(argv[6]) : 64;
	int			n_layers = argc > 7 ? atoi(argv[7]) : 12;
	const char *tname = argc > 8 ? argv[8] : "f16";
	const char *only_level = argc > 9 ? argv[9] : NULL;
	LlmKvType	type = strcmp(tname, "f32") == 0 ? LLM_KV_F32 : strcmp(tname, "int8") == 0 ? LLM_KV_I8 : LLM_KV_F16;
	const LlmAttnKernels *sets[] = {&llm_attn_kernels_ref, &llm_attn_kernels_avx2, &llm_attn_kernels_avx512};
	int			bs = 16;
	int			kv_dim = n_kv_heads * hd;
	LlmKvParams kp = {
		.n_layers = n_layers,.n_kv_heads = n_kv_heads,.head_dim = hd,.block_size = bs,
		.n_blocks = n_seq * ((ctx + bs - 1) / bs),.type = type,.prefault = true,
	};
	LlmBackend *be;
	LlmKvCache	kv;
	LlmError	err;
	LlmKvSeq   *seq = calloc((size_t) n_seq, sizeof(LlmKvSeq));
	LlmKvSeq  **seqs = malloc((size_t) n_seq * sizeof(LlmKvSeq *));
	int32_t    *pos = malloc((size_t) n_seq * sizeof(int32_t));
	float	   *q = malloc((size_t) n_seq * n_heads * hd * sizeof(float));	/* (n_seq, n_heads * hd) */
	float	   *out = malloc((size_t) n_seq * n_heads * hd * sizeof(float));
	float	   *krow = malloc((size_t) kv_dim * sizeof(float));
	float	   *vrow = malloc((size_t) kv_dim * sizeof(float));
	uint64_t	s = 88172645463325252ull;
	LlmAttnArgs a = {
		.n = n_seq,.q = q,.out = out,.seq = seqs,.pos = pos,.n_heads = n_heads,.n_kv_heads = n_kv_heads,
		.head_dim = hd,.scale = 1.0f / 8.0f,
	};

	if (llm_backend_cpu_new(threads, &be, &err) != LLM_OK || llm_kv_init(&kv, &kp, &err) != LLM_OK)
	{
		fprintf(stderr, "bench_attention: %s\n", err.msg);
		return 1;
	}
	/* the sequences' blocks interleaved in the pool, as sequences that grew together hold them */
	for (int p = 0; p < ctx; p += bs)
		for (int i = 0; i < n_seq; i++)
			if (llm_kv_seq_reserve(&kv, &seq[i], p + bs < ctx ? p + bs : ctx, &err) != LLM_OK)
			{
				fprintf(stderr, "bench_attention: %s\n", err.msg);
				return 1;
			}
	for (int i = 0; i < n_seq; i++)
	{
		seqs[i] = &seq[i];
		pos[i] = ctx - 1;
		for (int l = 0; l < n_layers; l++)
			for (int32_t p = 0; p < ctx; p++)
			{
				for (int d = 0; d < kv_dim; d++)
				{
					krow[d] = frand(&s);
					vrow[d] = frand(&s);
				}
				llm_cpu_kv_store(be, &kv, l, &seqs[i], &p, krow, vrow, 1);
			}
	}
	for (size_t j = 0; j < (size_t) n_seq * n_heads * hd; j++)
		q[j] = frand(&s);
	printf("%d threads, %d sequences x %d positions, %d heads / %d KV heads of %d, %d layers, %s KV (%.1f MB)\n",
		   threads, n_seq, ctx, n_heads, n_kv_heads, hd, n_layers, tname,
		   (double) n_seq * ctx * n_layers * kv_dim * 2 * kv.elem_size / 1e6);
	for (int run = 2 * LLM_CPU_ISA_AVX2; run <= 2 * (int) llm_cpu_isa_detect() + 1; run++)
	{
		/* each level as it runs, then (with a fused tile) through the separate steps */
		LlmAttnKernels steps = *sets[run / 2];
		const LlmAttnKernels *k = run % 2 == 0 ? sets[run / 2] : &steps;
		double		best = 1e30;

		steps.tile = NULL;
		if (k->name == NULL || (run % 2 == 1 && sets[run / 2]->tile == NULL) ||
			(only_level != NULL && strcmp(only_level, k->name) != 0))
			continue;
		for (int rep = 0; rep < 15; rep++)
		{
			double		t0 = now();

			for (int l = 0; l < n_layers; l++)
				llm_cpu_attention(be, &kv, l, &a, k);
			if (now() - t0 < best)
				best = now() - t0;
		}
		printf("%-7s %-5s step %8.3f ms  %6.2f ns per head and position  %6.1f GB/s of KV\n", k->name,
			   run % 2 == 0 ? "" : "steps", best * 1e3,
			   best * 1e9 / ((double) n_seq * n_layers * n_heads * ctx),
			   (double) n_seq * ctx * n_layers * kv_dim * 2 * kv.elem_size / best / 1e9);
	}
	for (int i = 0; i < n_seq; i++)
	{
		llm_kv_seq_release(&kv, &seq[i]);
		llm_kv_seq_free(&seq[i]);
	}
	llm_kv_free(&kv);
	llm_backend_free(be);
	return 0;
}
