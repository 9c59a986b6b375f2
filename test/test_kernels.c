/*
 * test_kernels.c
 *		Tests of the CPU backend's fast matmul kernels (src/engine/cpu/matmul*)
 *		against float64 oracles and the scalar reference, at every SIMD level
 *		this processor has.
 *
 * 1. Level selection: names, LLM_CPU_ISA lowering the level, op tables.
 * 2. The SIMD activation quantizers give exactly the bytes of the scalar
 *    ones (quantize_act.c), NaN and infinity included.
 * 3. Every type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K;
 *    the grouped types where the level has them) through the
 *    level's matmul op on a 2-thread backend, over rows {1, 3, 17, 33},
 *    tokens {1, 2, 3, 5, 17} and several column counts, plus larger shapes:
 *    k longer than the kernels' chunks of k, and many rows and tokens that
 *    split into many tasks and quantize on the pool.  Errors
 *    are normalised by S = sum |w_i x_i| (float64):
 *    - float weights: |y - exact| / S <= 1e-5 and |y - ref| / S <= 1e-5,
 *      exact the float64 dot, ref llm_dot_row_ref;
 *    - quantized weights, kernel exactness: against the float64 dot of the
 *      weights with the dequantized int8 activations x' the kernel really
 *      used (the level's own quantizer, checked bit-exact in 2), within
 *      1e-5 of sum |w_i x'_i|: only float rounding remains, so a wrong
 *      quant, scale, offset, lane or block fails by orders of magnitude;
 *    - quantized weights, against the original activations: the error of
 *      each activation is at most half its block's step, amax_b / 254, so
 *      |y - exact| <= sum |w_i| amax_b(i) / 254 (+ 1e-5 S for rounding) --
 *      a proven bound, about 1-1.5% of S for Gaussian activations.  The
 *      largest observed error / S is printed.
 *    Any NaN fails (every check is written as err <= bound).
 * 4. Types without a fast kernel fall back to the reference bit for bit.
 * 5. Q5_0 gives the bits of its exact Q8_0 rewrite (the loader's repack).
 */
#include "backend.h"
#include "cpu/backend_cpu.h"
#include "cpu/cpu_features.h"
#include "cpu/matmul.h"
#include "quant.h"
#include "quant_blocks.h"
#include "test.h"
#include "test_weights.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dequantize one token's quantized activations (format fmt) into xd. */
static void
dequant_acts(LlmActFormat fmt, const uint8_t *row, int64_t k, double *xd)
{
	const int8_t *qs = (const int8_t *) row;
	const float *d = (const float *) (row + llm_act_d_offset(k));
	static const int order[16] = {LLM_Q8KI_ORDER};
	int			bs = fmt == LLM_ACT_Q8 || fmt == LLM_ACT_Q8G ? LLM_QK : LLM_QK_K;

	if (fmt == LLM_ACT_Q8G)
	{
		/* where llm_group_act put each quant: run it on values' indices and on blocks' indices in their group */
		int8_t	   *vi = malloc((size_t) k);
		int8_t	   *bi = malloc((size_t) k);

		for (int64_t j = 0; vi != NULL && bi != NULL && j < k; j++)
		{
			vi[j] = (int8_t) (j % LLM_QK);
			bi[j] = (int8_t) (j / LLM_QK % 16);
		}
		if (vi != NULL && bi != NULL)
		{
			llm_group_act(vi, k / LLM_QK);
			llm_group_act(bi, k / LLM_QK);
			for (int64_t p = 0; p < k; p++)
			{
				int64_t		j = (p / LLM_QK / 16 * 16 + bi[p]) * LLM_QK + vi[p];

				xd[j] = (double) d[j / bs] * qs[p];
			}
		}
		free(vi);
		free(bi);
		return;
	}
	for (int64_t j = 0; j < k; j++)
	{
		/* Q8KI: value 16m + 4s + t of a block is at 64s + 4 order[m] + t (the order is its own inverse) */
		int64_t		at = fmt != LLM_ACT_Q8KI ? j
			: j / LLM_QK_K * LLM_QK_K + 64 * (j % 16 / 4) + 4 * order[j % LLM_QK_K / 16] + j % 4;

		xd[j] = (double) d[j / bs] * qs[at];
	}
}

typedef struct ErrStats
{
	double		max_exact;		/* largest |y - exact| / S */
	double		max_kernel;		/* largest |y - exact'| / S' (quantized activations) */
} ErrStats;

/*
 * One shape of one type through ops->matmul; checks every output as the
 * header describes.  kern gives the level's activation quantizer.
 */
static void
check_matmul(LlmBackend *be, const LlmBackendOps *ops, const LlmMatmulKernels *kern, LlmType type,
			 int64_t rows, int n, int64_t cols, ErrStats *st)
{
	LlmWeight	w;
	float	   *x = malloc((size_t) n * cols * sizeof(float));
	float	   *y = malloc((size_t) n * rows * sizeof(float));
	float	   *wf = malloc((size_t) rows * cols * sizeof(float));
	double	   *xd = malloc((size_t) cols * sizeof(double));
	LlmActFormat fmt = kern->act[type];
	size_t		stride = llm_act_row_bytes(fmt, cols);
	uint8_t    *xq = alloc64(stride);
	const char *tn = llm_type_traits(type)->name;

	if (x == NULL || y == NULL || wf == NULL || xd == NULL || xq == NULL || !make_weight(type, rows, cols, &w))
	{
		TEST_CHECK(false, "out of memory");
		free(x);
		free(y);
		free(wf);
		free(xd);
		free(xq);
		return;
	}
	random_acts(x, n, cols);
	for (int64_t r = 0; r < rows; r++)
		llm_dequant_row(type, w.data + (size_t) r * w.row_bytes, wf + (size_t) r * cols, cols);
	for (size_t i = 0; i < (size_t) n * rows; i++)
		y[i] = NAN;

	ops->matmul(be, &w, x, y, n);

	for (int t = 0; t < n; t++)
	{
		const float *xt = x + (size_t) t * cols;

		if (fmt != LLM_ACT_F32)
		{
			kern->quant[fmt] (xt, cols, xq);
			dequant_acts(fmt, xq, cols, xd);
		}
		for (int64_t r = 0; r < rows; r++)
		{
			const float *wr = wf + (size_t) r * cols;
			double		got = y[(size_t) t * rows + r];
			double		exact = 0.0;
			double		s = 0.0;
			double		err;

			for (int64_t j = 0; j < cols; j++)
			{
				exact += (double) wr[j] * xt[j];
				s += fabs((double) wr[j] * xt[j]);
			}
			err = fabs(got - exact);
			if (s > 0.0 && err / s > st->max_exact)
				st->max_exact = err / s;
			if (fmt == LLM_ACT_F32)
			{
				double		ref = llm_dot_row_ref(type, w.data + (size_t) r * w.row_bytes, xt, cols);

				TEST_CHECK(err <= 1e-5 * s + 1e-30, "%s %s rows %lld n %d cols %lld: y[%d][%lld] = %.9g, exact %.9g",
						   kern->name, tn, (long long) rows, n, (long long) cols, t, (long long) r, got, exact);
				TEST_CHECK(fabs(got - ref) <= 1e-5 * s + 1e-30, "%s %s: y[%d][%lld] = %.9g, reference %.9g",
						   kern->name, tn, t, (long long) r, got, ref);
			}
			else
			{
				int			bs = fmt == LLM_ACT_Q8 || fmt == LLM_ACT_Q8G ? LLM_QK : LLM_QK_K;
				double		exact_q = 0.0;
				double		s_q = 0.0;
				double		bound = 0.0;

				for (int64_t j0 = 0; j0 < cols; j0 += bs)
				{
					double		amax = 0.0;
					double		sw = 0.0;

					for (int64_t j = j0; j < j0 + bs; j++)
					{
						amax = fmax(amax, fabs(xt[j]));
						sw += fabs(wr[j]);
						exact_q += (double) wr[j] * xd[j];
						s_q += fabs((double) wr[j] * xd[j]);
					}
					bound += sw * amax / 254.0;
				}
				TEST_CHECK(fabs(got - exact_q) <= 1e-5 * s_q + 1e-30,
						   "%s %s rows %lld n %d cols %lld: y[%d][%lld] = %.9g, exact on the int8 activations %.9g",
						   kern->name, tn, (long long) rows, n, (long long) cols, t, (long long) r, got, exact_q);
				TEST_CHECK(err <= bound * (1.0 + 1e-6) + 1e-5 * s + 1e-30,
						   "%s %s rows %lld n %d cols %lld: y[%d][%lld] = %.9g, exact %.9g, bound %.3g",
						   kern->name, tn, (long long) rows, n, (long long) cols, t, (long long) r, got, exact, bound);
				if (s_q > 0.0 && fabs(got - exact_q) / s_q > st->max_kernel)
					st->max_kernel = fabs(got - exact_q) / s_q;
			}
		}
	}
	free((void *) w.data);
	free(x);
	free(y);
	free(wf);
	free(xd);
	free(xq);
}

/* The SIMD quantizers of kern give the scalar ones' bytes. */
static void
check_quantizers(const LlmMatmulKernels *kern)
{
	static const int64_t ks[] = {32, 64, 96, 256, 512, 768, 1024};

	for (int c = 0; c < (int) (sizeof(ks) / sizeof(ks[0])); c++)
	{
		int64_t		k = ks[c];
		float	   *x = malloc((size_t) k * sizeof(float));

		if (x == NULL)
			continue;
		for (int fmt = LLM_ACT_Q8; fmt < LLM_ACT_FORMATS; fmt++)
		{
			size_t		bytes = llm_act_row_bytes((LlmActFormat) fmt, k);
			uint8_t    *a = alloc64(bytes);
			uint8_t    *b = alloc64(bytes);

			const bool	blocks32 = fmt == LLM_ACT_Q8 || fmt == LLM_ACT_Q8G;

			if (kern->quant[fmt] == NULL || (!blocks32 && k % LLM_QK_K != 0))
			{
				free(a);
				free(b);
				continue;
			}
			for (int trial = 0; trial < 4 && a != NULL && b != NULL; trial++)
			{
				random_acts(x, 1, k);
				if (trial == 1)
					memset(x, 0, 32 * sizeof(float));	/* an all-zero block */
				if (trial == 2)
					x[k - 1] = NAN;
				if (trial == 3)
				{
					/* halfway cases, rounded to even: each block's amax is 127, so d = 1 */
					for (int64_t j = 0; j < k; j++)
						x[j] = j % 32 == 0 ? 127.0f : (float) (j % 7) - 3.5f;
					x[0] = INFINITY;
				}
				kern->quant[fmt] (x, k, a);
				if (fmt == LLM_ACT_Q8)
					llm_quantize_act_q8_ref(x, k, b);
				else if (fmt == LLM_ACT_Q8G)
					llm_quantize_act_q8g_ref(x, k, b);
				else if (fmt == LLM_ACT_Q8K)
					llm_quantize_act_q8k_ref(x, k, b);
				else
					llm_quantize_act_q8ki_ref(x, k, b);
				TEST_CHECK(memcmp(a, b, (size_t) k) == 0, "%s quantizer %d k %lld trial %d: quants differ",
						   kern->name, fmt, (long long) k, trial);
				{
					int64_t		nd = k / (blocks32 ? LLM_QK : LLM_QK_K);
					const float *da = (const float *) (a + llm_act_d_offset(k));
					const float *db = (const float *) (b + llm_act_d_offset(k));
					bool		same = true;

					for (int64_t i = 0; i < nd; i++)
						same = same && (da[i] == db[i] || (isnan(da[i]) && isnan(db[i])));
					TEST_CHECK(same, "%s quantizer %d k %lld trial %d: scales differ", kern->name, fmt,
							   (long long) k, trial);
				}
				if (blocks32)
					TEST_CHECK(memcmp(a + llm_act_sums_offset(k), b + llm_act_sums_offset(k),
									  sizeof(int32_t) * (size_t) (k / LLM_QK)) == 0,
							   "%s quantizer k %lld trial %d: block sums differ", kern->name, (long long) k, trial);
				if (!blocks32)
					TEST_CHECK(memcmp(a + llm_act_bsums_offset(k), b + llm_act_bsums_offset(k),
									  sizeof(int16_t) * (size_t) (k / 16)) == 0,
							   "%s quantizer k %lld trial %d: block sums differ", kern->name, (long long) k, trial);
				if (trial == 2 || trial == 3)
				{
					const float *da = (const float *) (a + llm_act_d_offset(k));
					int64_t		last = k / (blocks32 ? LLM_QK : LLM_QK_K) - 1;

					TEST_CHECK(isnan(da[trial == 2 ? last : 0]), "%s quantizer: a block with %s must have a NaN scale",
							   kern->name, trial == 2 ? "NaN" : "infinity");
				}
			}
			free(a);
			free(b);
		}
		free(x);
	}
}

/* Every fast type and shape at one level. */
static void
check_level(LlmBackend *be, LlmCpuIsa isa)
{
	/* every level has the first thirteen; the grouped types only some */
	static const LlmType types[] = {
		LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q4_K, LLM_TYPE_Q6_K,
		LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, LLM_TYPE_Q5_K, LLM_TYPE_Q2_K, LLM_TYPE_Q3_K,
		LLM_TYPE_Q8_0_G, LLM_TYPE_Q4_0_G, LLM_TYPE_Q4_1_G, LLM_TYPE_Q5_0_G, LLM_TYPE_Q5_1_G, LLM_TYPE_SPARSE24,
		LLM_TYPE_SPARSE24_G
	};
	static const int64_t rows_list[] = {1, 3, 17, 33};
	static const int n_list[] = {1, 2, 3, 5, 17};
	static const int64_t cols_float[] = {1, 7, 16, 33, 100, 257};
	/* 1 .. 41 blocks: groups of 16 and 8, tails of 1, 2, 3, 4 and 7 (four, two, one) */
	static const int64_t cols_q[] = {32, 64, 96, 224, 544, 640, 800, 1312};
	static const int64_t cols_k[] = {256, 512, 768};
	/* SPARSE24: 1 .. 21 blocks of 64 (grouped: pieces of 8, 4 and the rest) */
	static const int64_t cols_s24[] = {64, 192, 640, 1344};
	const LlmMatmulKernels *kern = llm_matmul_kernels(isa);
	const LlmBackendOps *ops = llm_cpu_ops_for_isa(isa);

	TEST_CHECK(kern != NULL && ops != NULL, "level %s has no kernels", llm_cpu_isa_name(isa));
	if (kern == NULL || ops == NULL)
		return;
	TEST_CHECK(strstr(ops->name, llm_cpu_isa_name(isa)) != NULL, "op table %s for level %s", ops->name,
			   llm_cpu_isa_name(isa));
	check_quantizers(kern);
	for (int ti = 0; ti < (int) (sizeof(types) / sizeof(types[0])); ti++)
	{
		LlmType		type = types[ti];
		const int64_t *cols;
		int			n_cols;
		ErrStats	st = {0, 0};

		TEST_CHECK(kern->gemm[type] != NULL || ti >= 13, "%s has no %s kernel", kern->name,
				   llm_type_traits(type)->name);
		if (kern->gemm[type] == NULL)
			continue;
		if (type == LLM_TYPE_F32 || type == LLM_TYPE_F16 || type == LLM_TYPE_BF16)
			cols = cols_float, n_cols = 6;
		else if (llm_type_traits(type)->block_size == LLM_QK)
			cols = cols_q, n_cols = (int) (sizeof(cols_q) / sizeof(cols_q[0]));
		else if (llm_type_base(type) == LLM_TYPE_SPARSE24)
			cols = cols_s24, n_cols = 4;
		else
			cols = cols_k, n_cols = 3;
		for (int ri = 0; ri < 4; ri++)
			for (int ni = 0; ni < 5; ni++)
				for (int ci = 0; ci < n_cols; ci++)
					check_matmul(be, ops, kern, type, rows_list[ri], n_list[ni], cols[ci], &st);
		/* k longer than the kernels' chunks of k (1024 floats, 64 blocks), odd tails */
		check_matmul(be, ops, kern, type, 6, 9, cols == cols_float ? 2100 : cols == cols_q ? 4128 : cols == cols_s24 ? 8320 : 4352,
					 &st);
		/* many tasks, token groups, quantization on the pool, a heap buffer */
		check_matmul(be, ops, kern, type, 200, 40, cols == cols_k ? 1024 : 1088, &st);
		check_matmul(be, ops, kern, type, 70, 64, 768, &st);
		/* rows of whole groups (48 blocks), many tokens: where AMX is, its tiles */
		if (cols == cols_q)
			check_matmul(be, ops, kern, type, 37, 40, 1536, &st);
		printf("  %-6s %-5s max |y - exact| / S %.2e", kern->name, llm_type_traits(type)->name, st.max_exact);
		if (kern->act[type] != LLM_ACT_F32)
			printf(" (int8 activations; on them %.2e)", st.max_kernel);
		printf("\n");
	}
}

/*
 * A weight of type from gives exactly the floats of the same weight
 * rewritten as type to by rewrite (row by row), at 1 to 64 tokens and for
 * row lengths with groups of 16 and 8 blocks and tails: Q5_0 and its Q8_0
 * rewrite (llm_repack_q8_0: the same integers and scales), which the
 * loader makes where the level has no Q5_0 kernel; Q8_0, Q4_0, Q4_1 and
 * their grouped types (llm_group_row), which the loader makes where the
 * level has their kernels.  The answers must not depend on which.
 */
static void
check_rewrite(LlmBackend *be, const LlmBackendOps *ops, const LlmMatmulKernels *kern, LlmType from, LlmType to,
			  void (*rewrite) (LlmType, const void *, void *, int64_t))
{
	static const int n_list[] = {1, 2, 3, 4, 5, 17, 64};
	static const int64_t cols_list[] = {640, 800, 2048};	/* 20, 25, 64 blocks */
	static const int64_t cols_s24[] = {640, 1344, 2048};	/* SPARSE24: 10, 21, 32 blocks */
	const int64_t rows = 37;

	if (kern->gemm[from] == NULL || kern->gemm[to] == NULL)
		return;
	for (int ci = 0; ci < 3; ci++)
	{
		const int64_t cols = from == LLM_TYPE_SPARSE24 ? cols_s24[ci] : cols_list[ci];
		size_t		rb = llm_type_row_size(to, cols);
		float	   *x = malloc((size_t) 64 * cols * sizeof(float));
		float	   *y1 = malloc((size_t) 64 * rows * sizeof(float));
		float	   *y2 = malloc((size_t) 64 * rows * sizeof(float));
		uint8_t    *data = malloc(rb * rows);
		LlmWeight	w1,
					w2;

		if (x == NULL || y1 == NULL || y2 == NULL || data == NULL || !make_weight(from, rows, cols, &w1))
		{
			TEST_CHECK(false, "out of memory");
			free(x);
			free(y1);
			free(y2);
			free(data);
			return;
		}
		for (int64_t r = 0; r < rows; r++)
			rewrite(from, w1.data + (size_t) r * w1.row_bytes, data + (size_t) r * rb, cols);
		w2 = w1;
		w2.type = to;
		w2.row_bytes = rb;
		w2.data = data;
		random_acts(x, 64, cols);
		for (int i = 0; i < (int) (sizeof(n_list) / sizeof(n_list[0])); i++)
		{
			ops->matmul(be, &w1, x, y1, n_list[i]);
			ops->matmul(be, &w2, x, y2, n_list[i]);
			TEST_CHECK(memcmp(y1, y2, (size_t) n_list[i] * rows * sizeof(float)) == 0,
					   "%s: %s gives the floats of its %s rewrite at %d tokens, %lld columns", kern->name,
					   llm_type_traits(from)->name, llm_type_traits(to)->name, n_list[i], (long long) cols);
		}
		free((void *) w1.data);
		free(x);
		free(y1);
		free(y2);
		free(data);
	}
}

/* Types without a fast kernel at level kern give the reference's floats exactly. */
static void
check_fallback(LlmBackend *be, const LlmBackendOps *ops, const LlmMatmulKernels *kern)
{
	static const LlmType types[] = {LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, LLM_TYPE_Q2_K, LLM_TYPE_Q3_K,
	LLM_TYPE_Q5_K, LLM_TYPE_SPARSE24};

	for (int ti = 0; ti < (int) (sizeof(types) / sizeof(types[0])); ti++)
	{
		if (kern->gemm[types[ti]] != NULL)
			continue;
		LlmWeight	w;
		int			n = 3;
		int64_t		rows = 5,
					cols = 256;
		float	   *x = malloc((size_t) n * cols * sizeof(float));
		float	   *y = malloc((size_t) n * rows * sizeof(float));
		float	   *y_ref = malloc((size_t) n * rows * sizeof(float));

		if (x != NULL && y != NULL && y_ref != NULL && make_weight(types[ti], rows, cols, &w))
		{
			random_acts(x, n, cols);
			ops->matmul(be, &w, x, y, n);
			llm_cpu_ref_ops.matmul(be, &w, x, y_ref, n);
			TEST_CHECK(memcmp(y, y_ref, (size_t) n * rows * sizeof(float)) == 0, "%s: %s falls back to the reference",
					   ops->name, llm_type_traits(types[ti])->name);
			free((void *) w.data);
		}
		free(x);
		free(y);
		free(y_ref);
	}
}

/* Run every check at every level this processor has. */
int
main(void)
{
	test_rng_state = 0x2545f4914f6cdd1dull;
	LlmBackend *be = NULL;
	LlmError	err;
	LlmCpuIsa	best = llm_cpu_isa_detect();

	/* 1. selection: LLM_CPU_ISA lowers the level, never raises it */
	setenv("LLM_CPU_ISA", "scalar", 1);
	TEST_CHECK(llm_cpu_isa() == LLM_CPU_ISA_SCALAR, "LLM_CPU_ISA=scalar gives %s", llm_cpu_isa_name(llm_cpu_isa()));
	TEST_CHECK(strcmp(llm_cpu_select_ops()->name, "cpu-ref") == 0, "scalar level selects %s", llm_cpu_select_ops()->name);
	TEST_CHECK(llm_cpu_ops_for_isa(LLM_CPU_ISA_SCALAR) == &llm_cpu_ref_ops, "the scalar level is the reference");
	for (int i = 0; i < LLM_CPU_ISA_COUNT; i++)
		TEST_CHECK((llm_cpu_ops_for_isa((LlmCpuIsa) i) != NULL) == llm_cpu_isa_supported((LlmCpuIsa) i),
				   "an op table exactly for the supported levels (%s)", llm_cpu_isa_name((LlmCpuIsa) i));
	printf("kernels: processor level %s\n", llm_cpu_isa_name(best));

	if (llm_backend_cpu_new(2, &be, &err) != LLM_OK)
	{
		TEST_CHECK(false, "backend: %s", err.msg);
		return test_summary("kernels");
	}
	for (int isa = LLM_CPU_ISA_AVX2; isa <= (int) best; isa++)
	{
		check_level(be, (LlmCpuIsa) isa);
		if (llm_cpu_ops_for_isa((LlmCpuIsa) isa) != NULL)
		{
			check_fallback(be, llm_cpu_ops_for_isa((LlmCpuIsa) isa), llm_matmul_kernels((LlmCpuIsa) isa));
			const LlmBackendOps *ops = llm_cpu_ops_for_isa((LlmCpuIsa) isa);
			const LlmMatmulKernels *kern = llm_matmul_kernels((LlmCpuIsa) isa);

			check_rewrite(be, ops, kern, LLM_TYPE_Q5_0, LLM_TYPE_Q8_0, llm_repack_q8_0);
			check_rewrite(be, ops, kern, LLM_TYPE_Q8_0, LLM_TYPE_Q8_0_G, llm_group_row);
			check_rewrite(be, ops, kern, LLM_TYPE_Q4_0, LLM_TYPE_Q4_0_G, llm_group_row);
			check_rewrite(be, ops, kern, LLM_TYPE_Q4_1, LLM_TYPE_Q4_1_G, llm_group_row);
			check_rewrite(be, ops, kern, LLM_TYPE_Q5_0, LLM_TYPE_Q5_0_G, llm_group_row);
			check_rewrite(be, ops, kern, LLM_TYPE_Q5_1, LLM_TYPE_Q5_1_G, llm_group_row);
			check_rewrite(be, ops, kern, LLM_TYPE_SPARSE24, LLM_TYPE_SPARSE24_G, llm_group_row);
		}
	}
	llm_backend_free(be);
	return test_summary("kernels");
}
