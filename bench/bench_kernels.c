/*
 * bench_kernels.c
 *		Micro-benchmark of the CPU matmul kernels: GEMV (decode) and GEMM
 *		(prefill) throughput per weight type and SIMD level, through the
 *		backend's matmul op, plus a plain memory read for comparison.
 *
 * Build and run from the repository root (after make, which builds the
 * engine library):
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -march=native -pthread -Isrc/engine \
 *       -o build/bench_kernels bench/bench_kernels.c build/libllmengine.a -lpcre2-8 -lm -lpthread
 *   build/bench_kernels [threads] [rows] [cols] [tokens] [GEMV set MB] [types] [level]
 *
 * Defaults: 2 threads, a 2048 x 768 weight (an FFN matrix of the 134M test
 * model), 128 tokens for GEMM.  For GEMV the weight set is many matrices
 * (64 MB by default) walked in turn, as decode walks a model's layers,
 * so the figure is the one of weights streamed from memory or L3, not L2.
 * Weights of the types the engine cannot quantize to (Q4_1, Q5_0, Q5_1 and
 * the K-quants) are random bytes: the timing does not depend on the values.
 * types: a comma-separated list of type names (default: all); level: avx2
 * or avx512 (default: every level this processor has).  LLM_CPU_AVXVNNI=0
 * runs the AVX2 level's integer kernels without AVX-VNNI on a processor
 * that has it.
 */
#include "backend.h"
#include "cpu/backend_cpu.h"
#include "cpu/cpu_features.h"
#include "cpu/matmul.h"
#include "quant.h"

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

/* Fill n bytes of weight data of type with small random values. */
static void
fill_weight(LlmType type, uint8_t *data, int64_t rows, int64_t cols)
{
	size_t		rb = llm_type_row_size(type, cols);
	float	   *f = malloc((size_t) cols * sizeof(float));
	uint64_t	s = 88172645463325252ull;

	for (int64_t r = 0; r < rows; r++)
	{
		if (!llm_type_can_quantize(type))
		{
			for (size_t i = 0; i < rb; i++)
			{
				s ^= s << 13, s ^= s >> 7, s ^= s << 17;
				data[(size_t) r * rb + i] = (uint8_t) s;
			}
			continue;
		}
		for (int64_t j = 0; j < cols; j++)
		{
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			f[j] = (float) ((s >> 40) * (1.0 / 16777216.0) - 0.5) * 0.1f;
		}
		llm_quantize_row(type, f, data + (size_t) r * rb, cols);
	}
	free(f);
}

/* Plain read bandwidth over n bytes, GB/s. */
static double
read_bandwidth(const uint8_t *p, size_t n)
{
	volatile uint64_t sink;
	uint64_t	acc = 0;
	double		t0 = now();

	for (int rep = 0; rep < 5; rep++)
		for (size_t i = 0; i < n; i += 64)
			acc += p[i];
	sink = acc;
	(void) sink;
	return 5.0 * n / (now() - t0) / 1e9;
}

/* Whether name is in the comma-separated list (NULL: every name). */
static bool
listed(const char *list, const char *name)
{
	size_t		n = strlen(name);

	for (const char *p = list; p != NULL; p = strchr(p, ','), p = p != NULL ? p + 1 : NULL)
		if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
	return list == NULL;
}

/* Benchmark every fast type (or those listed in only) at one level. */
static void
bench_level(LlmBackend *be, LlmCpuIsa isa, int64_t rows, int64_t cols, int n_tok, size_t set_bytes,
			const char *only)
{
	static const LlmType types[] = {
		LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0,
		LLM_TYPE_Q5_1, LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K,
		LLM_TYPE_Q8_0_G, LLM_TYPE_Q4_0_G, LLM_TYPE_SPARSE24, LLM_TYPE_SPARSE24_G
	};
	const LlmBackendOps *ops = llm_cpu_ops_for_isa(isa);
	float	   *x = malloc((size_t) n_tok * cols * sizeof(float));
	float	   *y = malloc((size_t) n_tok * rows * sizeof(float));

	if (ops == NULL || x == NULL || y == NULL)
		return;
	for (size_t i = 0; i < (size_t) n_tok * cols; i++)
		x[i] = (float) ((i * 7919) % 1000) / 1000.0f - 0.5f;
	for (int ti = 0; ti < (int) (sizeof(types) / sizeof(types[0])); ti++)
	{
		LlmType		type = types[ti];
		size_t		rb = llm_type_row_size(type, cols);
		size_t		mat = rb * (size_t) rows;
		int			n_mats = (int) (set_bytes / mat) + 1;
		uint8_t    *data;
		LlmWeight	w = {.name = "bench",.type = type,.cols = cols,.rows = rows,.row_bytes = rb};
		double		t0,
					t_gemv,
					t_gemm;
		int			reps;

		if (cols % llm_type_traits(type)->block_size != 0 || !listed(only, llm_type_traits(type)->name))
			continue;
		data = malloc(mat * (size_t) n_mats);
		if (data == NULL)
			continue;
		fill_weight(type, data, rows, cols);
		for (int m = 1; m < n_mats; m++)
			memcpy(data + m * mat, data, mat);

		/* GEMV: one token, walking all matrices */
		reps = 3;
		for (int m = 0; m < n_mats; m++)
		{
			w.data = data + m * mat;
			ops->matmul(be, &w, x, y, 1);
		}
		t0 = now();
		for (int rep = 0; rep < reps; rep++)
			for (int m = 0; m < n_mats; m++)
			{
				w.data = data + m * mat;
				ops->matmul(be, &w, x, y, 1);
			}
		t_gemv = (now() - t0) / (reps * n_mats);

		/* GEMM: n_tok tokens on one matrix */
		w.data = data;
		ops->matmul(be, &w, x, y, n_tok);
		reps = 0;
		t0 = now();
		do
		{
			ops->matmul(be, &w, x, y, n_tok);
			reps++;
		} while (now() - t0 < 0.3);
		t_gemm = (now() - t0) / reps;

		printf("%-8s %-5s  GEMV %7.1f us %6.1f GB/s   GEMM(%d) %8.1f us %6.1f GMAC/s\n",
			   llm_cpu_isa_name(isa), llm_type_traits(type)->name, t_gemv * 1e6, mat / t_gemv / 1e9, n_tok,
			   t_gemm * 1e6, (double) rows * cols * n_tok / t_gemm / 1e9);
		free(data);
	}
	free(x);
	free(y);
}

/* bench_kernels [threads] [rows] [cols] [tokens] [GEMV set MB] [types, e.g. Q8_0,Q4_K] [level, e.g. avx512] */
int
main(int argc, char **argv)
{
	int			threads = argc > 1 ? atoi(argv[1]) : 2;
	int64_t		rows = argc > 2 ? atoll(argv[2]) : 2048;
	int64_t		cols = argc > 3 ? atoll(argv[3]) : 768;
	int			n_tok = argc > 4 ? atoi(argv[4]) : 128;
	size_t		set_bytes = (size_t) (argc > 5 ? atoi(argv[5]) : 64) << 20;
	const char *only_types = argc > 6 ? argv[6] : NULL;
	const char *only_level = argc > 7 ? argv[7] : NULL;
	LlmBackend *be;
	LlmError	err;
	size_t		nbytes = (size_t) 256 << 20;
	uint8_t    *buf = malloc(nbytes);

	if (buf == NULL || llm_backend_cpu_new(threads, &be, &err) != LLM_OK)
	{
		fprintf(stderr, "bench_kernels: setup failed\n");
		return 1;
	}
	memset(buf, 1, nbytes);
	printf("read bandwidth (1 thread): 256 MB %.1f GB/s, 32 MB %.1f GB/s\n",
		   read_bandwidth(buf, nbytes), read_bandwidth(buf, 32u << 20));
	free(buf);
	printf("%d threads, weight %lld x %lld; AMX tiles %s\n", threads, (long long) rows, (long long) cols,
		   llm_cpu_has_amx() ? "on (Q types, rows of whole groups from 768 columns, 16 tokens and more)"
		   : "off (LLM_CPU_AMX=1 turns them on where the CPU has them)");
	for (int isa = LLM_CPU_ISA_AVX2; isa <= (int) llm_cpu_isa_detect(); isa++)
		if (listed(only_level, llm_cpu_isa_name((LlmCpuIsa) isa)))
			bench_level(be, (LlmCpuIsa) isa, rows, cols, n_tok, set_bytes, only_types);
	llm_backend_free(be);
	return 0;
}
