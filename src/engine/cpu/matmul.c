/*
 * matmul.c
 *		The CPU backend's matmul op on the fast kernels, and the op tables
 *		of each SIMD level (see matmul.h).
 *
 * One call, y (n, rows) = x (n, cols) times w transposed:
 *
 * 1. For a quantized weight type, x is quantized to int8 blocks once, into
 *    a buffer of n rows (on the stack when small, else malloc'd for the
 *    call); with many tokens the rows are spread over the pool.
 * 2. The outputs are cut into tasks of a chunk of rows by a group of
 *    tokens; the pool hands tasks out dynamically.  A kernel walks its
 *    chunk a register tile of rows at a time and, for each tile, all of the
 *    group's tokens, so a weight row is read from memory once per call and
 *    then reused from L1 for every token (prefill; the AVX-512 kernels
 *    first unpack the tile's rows into the form their inner loop wants),
 *    while the group's activations stay in L2.  With one token (decode)
 *    the same split is a row-parallel GEMV.
 *
 * Types without a fast kernel at a level (AVX2: Q4_1, Q5_0, Q5_1, Q2_K,
 * Q3_K and Q5_K), and any
 * call whose buffer cannot be allocated, use the scalar reference.
 */
#include "cpu/activation.h"
#include "cpu/attention.h"
#include "cpu/matmul.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TASKS_PER_THREAD 4		/* tasks handed out per thread, for balance */
#define MIN_ROWS_PER_TASK 16
#define ACT_GROUP_BYTES (512 * 1024)	/* activations of one task's token group */
#define STACK_ACT_BYTES (32 * 1024)
#define QUANT_TOKENS_PER_TASK 8
#define QUANT_PARALLEL_MIN 16	/* quantize on the pool from this many tokens */
#define INLINE_MAX_MACS 131072	/* smaller matmuls run on the caller: waking the pool costs more */

typedef struct MatmulJob
{
	LlmGemmFn	gemm;
	LlmGemmArgs args;
	int			n;				/* tokens */
	int64_t		rows;
	int64_t		rows_per_task;
	int			n_row_tasks;
	int			tokens_per_task;
	LlmActQuantFn quant;		/* NULL for float activations */
	const float *x;				/* (n, cols) the caller's activations */
	uint8_t    *xq;				/* (n, args.x_stride) their quantized form */
} MatmulJob;

/* Quantize one chunk of tokens' activations. */
static void
quant_task(void *arg, int chunk)
{
	MatmulJob  *j = arg;
	int			t0 = chunk * QUANT_TOKENS_PER_TASK;
	int			t1 = t0 + QUANT_TOKENS_PER_TASK < j->n ? t0 + QUANT_TOKENS_PER_TASK : j->n;

	for (int t = t0; t < t1; t++)
		j->quant(j->x + (size_t) t * j->args.k, j->args.k, j->xq + (size_t) t * j->args.x_stride);
}

/* One task: a chunk of rows for a group of tokens. */
static void
gemm_task(void *arg, int i)
{
	MatmulJob  *j = arg;
	int			rt = i % j->n_row_tasks;
	int			tt = i / j->n_row_tasks;
	int64_t		r0 = (int64_t) rt * j->rows_per_task;
	int64_t		r1 = r0 + j->rows_per_task < j->rows ? r0 + j->rows_per_task : j->rows;
	int			t0 = tt * j->tokens_per_task;
	int			t1 = t0 + j->tokens_per_task < j->n ? t0 + j->tokens_per_task : j->n;

	j->gemm(&j->args, r0, r1, t0, t1);
}

/* y (n, rows) = x (n, cols) times w transposed, on the kernels k. */
static void
matmul_run(LlmBackend *be, const LlmMatmulKernels *kern, const LlmWeight *w, const float *x, float *y, int n)
{
	_Alignas(64) uint8_t stack_buf[STACK_ACT_BYTES];
	const LlmTypeTraits *tr = llm_type_traits(w->type);
	int			nth = llm_pool_size(be->pool);
	LlmActFormat fmt;
	MatmulJob	j;
	uint8_t    *heap_buf = NULL;
	int64_t		target;
	int			n_tok_tasks;

	if (kern == NULL || tr == NULL || kern->gemm[w->type] == NULL || n < 1 ||
		w->cols % tr->block_size != 0 || w->rows < 1)
	{
		llm_cpu_ref_ops.matmul(be, w, x, y, n);
		return;
	}
	memset(&j, 0, sizeof(j));
	fmt = kern->act[w->type];
	j.gemm = kern->gemm[w->type];
	j.n = n;
	j.rows = w->rows;
	j.x = x;
	j.args.w = w->data;
	j.args.row_bytes = w->row_bytes;
	j.args.k = w->cols;
	j.args.y = y;
	j.args.ldy = w->rows;
	j.args.x_stride = llm_act_row_bytes(fmt, w->cols);

	/* 1. activations in the kernel's format */
	if (fmt == LLM_ACT_F32)
	{
		j.args.x = (const uint8_t *) x;
		j.args.x_stride = (size_t) w->cols * sizeof(float);
	}
	else
	{
		size_t		bytes = j.args.x_stride * (size_t) n;

		j.quant = kern->quant[fmt];
		if (bytes <= sizeof(stack_buf))
			j.xq = stack_buf;
		else if ((heap_buf = aligned_alloc(64, bytes)) != NULL)
			j.xq = heap_buf;
		else
		{
			llm_cpu_ref_ops.matmul(be, w, x, y, n);
			return;
		}
		j.args.x = j.xq;
		if (n >= QUANT_PARALLEL_MIN && nth > 1)
			llm_pool_run(be->pool, (n + QUANT_TOKENS_PER_TASK - 1) / QUANT_TOKENS_PER_TASK, quant_task, &j);
		else
			for (int c = 0; c * QUANT_TOKENS_PER_TASK < n; c++)
				quant_task(&j, c);
	}

	/* 2. tasks: token groups whose activations fit in L2, row chunks for balance; tiny ones inline */
	j.tokens_per_task = (int) (ACT_GROUP_BYTES / j.args.x_stride);
	if (j.tokens_per_task < 8)
		j.tokens_per_task = 8;
	if (j.tokens_per_task > n)
		j.tokens_per_task = n;
	n_tok_tasks = (n + j.tokens_per_task - 1) / j.tokens_per_task;
	target = (int64_t) nth * TASKS_PER_THREAD / n_tok_tasks;
	if (target < 1)
		target = 1;
	j.rows_per_task = (w->rows + target - 1) / target;
	j.rows_per_task = (j.rows_per_task + MIN_ROWS_PER_TASK - 1) / MIN_ROWS_PER_TASK * MIN_ROWS_PER_TASK;
	j.n_row_tasks = (int) ((w->rows + j.rows_per_task - 1) / j.rows_per_task);
	if ((double) w->rows * (double) w->cols * n < INLINE_MAX_MACS)
		j.gemm(&j.args, 0, w->rows, 0, n);
	else
		llm_pool_run(be->pool, j.n_row_tasks * n_tok_tasks, gemm_task, &j);
	free(heap_buf);
}

/* The matmul op of the AVX2 level. */
static void
matmul_avx2(LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n)
{
	matmul_run(be, &llm_matmul_kernels_avx2, w, x, y, n);
}

/* The matmul op of the AVX-512 level. */
static void
matmul_avx512(LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n)
{
	matmul_run(be, &llm_matmul_kernels_avx512, w, x, y, n);
}

static LlmBackendOps isa_ops[LLM_CPU_ISA_COUNT];
static pthread_once_t isa_ops_once = PTHREAD_ONCE_INIT;

/* The attention op of the AVX2 level. */
static void
attention_avx2(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a)
{
	llm_cpu_attention(be, kv, layer, a, &llm_attn_kernels_avx2);
}

/* The attention op of the AVX-512 level. */
static void
attention_avx512(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a)
{
	llm_cpu_attention(be, kv, layer, a, &llm_attn_kernels_avx512);
}

/* The GLU op of the AVX-512 level. */
static void
glu_avx512(LlmBackend *be, const float *gate, const float *up, float *out, int64_t n, LlmActivation act)
{
	llm_cpu_glu(be, gate, up, out, n, act, llm_glu_range_avx512);
}

/* Build the op tables: the reference's, with the matmul, attention and GLU of each level. */
static void
build_isa_ops(void)
{
	isa_ops[LLM_CPU_ISA_SCALAR] = llm_cpu_ref_ops;
	isa_ops[LLM_CPU_ISA_AVX2] = llm_cpu_ref_ops;
	isa_ops[LLM_CPU_ISA_AVX2].name = "cpu-avx2";
	isa_ops[LLM_CPU_ISA_AVX2].matmul = matmul_avx2;
	if (llm_attn_kernels_avx2.name != NULL)
		isa_ops[LLM_CPU_ISA_AVX2].attention = attention_avx2;
	isa_ops[LLM_CPU_ISA_AVX512] = llm_cpu_ref_ops;
	isa_ops[LLM_CPU_ISA_AVX512].name = "cpu-avx512";
	isa_ops[LLM_CPU_ISA_AVX512].matmul = matmul_avx512;
	if (llm_attn_kernels_avx512.name != NULL)
		isa_ops[LLM_CPU_ISA_AVX512].attention = attention_avx512;
	if (llm_glu_range_avx512 != NULL)
		isa_ops[LLM_CPU_ISA_AVX512].glu = glu_avx512;
#if defined(__x86_64__) && defined(__GNUC__)
	isa_ops[LLM_CPU_ISA_AVX2].kv_store = llm_cpu_kv_store_f16c;
	isa_ops[LLM_CPU_ISA_AVX512].kv_store = llm_cpu_kv_store_f16c;
#endif
}

/* The kernels of level isa; NULL for scalar or a level this processor lacks. */
const LlmMatmulKernels *
llm_matmul_kernels(LlmCpuIsa isa)
{
	if (isa == LLM_CPU_ISA_SCALAR || !llm_cpu_isa_supported(isa))
		return NULL;
	if (isa == LLM_CPU_ISA_AVX2)
		return llm_matmul_kernels_avx2.name != NULL ? &llm_matmul_kernels_avx2 : NULL;
	return llm_matmul_kernels_avx512.name != NULL ? &llm_matmul_kernels_avx512 : NULL;
}

/* The backend op table of level isa (llm_cpu_ref_ops for scalar); NULL if the processor lacks it. */
const LlmBackendOps *
llm_cpu_ops_for_isa(LlmCpuIsa isa)
{
	if (isa == LLM_CPU_ISA_SCALAR)
		return &llm_cpu_ref_ops;
	if (llm_matmul_kernels(isa) == NULL)
		return NULL;
	pthread_once(&isa_ops_once, build_isa_ops);
	return &isa_ops[isa];
}

/* Whether the kernels of this process's level (llm_cpu_isa()) have a gemm for type. */
bool
llm_cpu_has_kernel(LlmType type)
{
	const LlmMatmulKernels *k = llm_matmul_kernels(llm_cpu_isa());

	return k != NULL && type >= 0 && type < LLM_TYPE_COUNT && k->gemm[type] != NULL;
}

/* The op table for this process: the level of llm_cpu_isa(). */
const LlmBackendOps *
llm_cpu_select_ops(void)
{
	const LlmBackendOps *ops = llm_cpu_ops_for_isa(llm_cpu_isa());

	return ops != NULL ? ops : &llm_cpu_ref_ops;
}
