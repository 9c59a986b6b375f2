/*
 * matmul.c
 *		The CPU backend's matmul on the fast kernels of a SIMD level (see
 *		matmul.h); backend_cpu.c puts it in each level's op table.
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
 * matmul_multi (Q, K and V) and matmul_glu (gate and up) quantize their
 * shared input once and hand every weight's tasks to the pool in one run.
 *
 * Each weight is read in the backend's copy where it has one (weights.c).
 *
 * Every level has a kernel for every weight type; a call whose buffer
 * cannot be allocated uses the scalar reference.
 */
#include "cpu/backend_cpu.h"
#include "cpu/matmul.h"
#include "cpu/matmul_amx.h"

#include <stdlib.h>
#include <string.h>

#define TASKS_PER_THREAD 4		/* tasks handed out per thread, for balance */
#define MIN_ROWS_PER_TASK 16
#define ACT_GROUP_BYTES (512 * 1024)	/* activations of one task's token group */
#define STACK_ACT_BYTES (32 * 1024)
#define QUANT_TOKENS_PER_TASK 8
#define QUANT_PARALLEL_MIN 16	/* quantize on the pool from this many tokens */
#define INLINE_MAX_MACS 131072	/* smaller matmuls run on the caller: waking the pool costs more */
#define MATMUL_MULTI_MAX 3		/* weights one matmul_multi shares its activations with (Q, K, V) */

typedef struct MatmulJob
{
	LlmGemmFn	gemm;
	LlmGemmArgs args;
	int			n;				/* tokens */
	int64_t		rows;
	int64_t		rows_per_task;
	int			n_row_tasks;
	int			tokens_per_task;
	int			n_tasks;		/* n_row_tasks * token groups */
	LlmActFormat fmt;			/* of the activations the gemm takes */
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

/*
 * The kernels for a call of n tokens on w at level kern: the AVX-512
 * level's AMX tiles where the processor grants them and they take w -- its
 * type, rows of whole groups of blocks (matmul_amx.h), from
 * LLM_AMX_MIN_BLOCKS to LLM_AMX_MAX_BLOCKS of them -- from
 * LLM_AMX_MIN_TOKENS tokens on; else kern.
 */
static const LlmMatmulKernels *
call_kernels(const LlmMatmulKernels *kern, const LlmWeight *w, int n)
{
	_Static_assert(LLM_AMX_MIN_BLOCKS >= 16, "the AMX tiles need a whole group of 16 blocks (LlmAmxRows)");
	const LlmMatmulKernels *amx = &llm_matmul_kernels_avx512_amx;
	const int64_t nb = w->cols / LLM_QK;

	if (kern != &llm_matmul_kernels_avx512 || n < LLM_AMX_MIN_TOKENS || amx->gemm[w->type] == NULL ||
		w->cols % LLM_QK != 0 || llm_group_blocks(nb) != nb || nb < LLM_AMX_MIN_BLOCKS || nb > LLM_AMX_MAX_BLOCKS ||
		!llm_cpu_has_amx())
		return kern;
	return amx;
}

/*
 * Set up j for y (n, rows) = x (n, cols) times w transposed on kernels
 * kern (or their AMX tiles, call_kernels), all but the activations: false
 * when kern has no fast gemm for w (then the scalar reference runs it).
 */
static bool
job_init(MatmulJob *j, const LlmMatmulKernels *kern, const LlmWeight *w, float *y, int n, int nth)
{
	const LlmTypeTraits *tr = llm_type_traits(w->type);
	LlmActFormat fmt;
	int64_t		target;
	int			n_tok_tasks;

	if (kern != NULL)
		kern = call_kernels(kern, w, n);
	if (kern == NULL || tr == NULL || kern->gemm[w->type] == NULL || n < 1 ||
		w->cols % tr->block_size != 0 || w->rows < 1)
		return false;
	memset(j, 0, sizeof(*j));
	fmt = kern->act[w->type];
	j->fmt = fmt;
	j->gemm = kern->gemm[w->type];
	j->quant = fmt == LLM_ACT_F32 ? NULL : kern->quant[fmt];
	j->n = n;
	j->rows = w->rows;
	j->args.w = w->data;
	j->args.row_bytes = w->row_bytes;
	j->args.k = w->cols;
	j->args.y = y;
	j->args.ldy = w->rows;
	j->args.x_stride = fmt == LLM_ACT_F32 ? (size_t) w->cols * sizeof(float) : llm_act_row_bytes(fmt, w->cols);

	/* tasks: token groups whose activations fit in L2, row chunks for balance */
	j->tokens_per_task = (int) (ACT_GROUP_BYTES / j->args.x_stride);
	if (j->tokens_per_task < 8)
		j->tokens_per_task = 8;
	if (j->tokens_per_task > n)
		j->tokens_per_task = n;
	n_tok_tasks = (n + j->tokens_per_task - 1) / j->tokens_per_task;
	target = (int64_t) nth * TASKS_PER_THREAD / n_tok_tasks;
	if (target < 1)
		target = 1;
	j->rows_per_task = (w->rows + target - 1) / target;
	j->rows_per_task = (j->rows_per_task + MIN_ROWS_PER_TASK - 1) / MIN_ROWS_PER_TASK * MIN_ROWS_PER_TASK;
	j->n_row_tasks = (int) ((w->rows + j->rows_per_task - 1) / j->rows_per_task);
	j->n_tasks = j->n_row_tasks * n_tok_tasks;
	return true;
}

/*
 * Point j's activations at x, quantized first (into stack_buf when it
 * fits, else a buffer returned in *heap_buf for the caller to free) when
 * the kernel takes int8: false when that buffer cannot be had.
 */
static bool
job_activations(LlmBackend *be, MatmulJob *j, const float *x, uint8_t *stack_buf, uint8_t **heap_buf)
{
	size_t		bytes = j->args.x_stride * (size_t) j->n;

	*heap_buf = NULL;
	j->x = x;
	if (j->quant == NULL)
	{
		j->args.x = (const uint8_t *) x;
		return true;
	}
	if (bytes <= STACK_ACT_BYTES)
		j->xq = stack_buf;
	else if ((*heap_buf = aligned_alloc(64, bytes)) != NULL)
		j->xq = *heap_buf;
	else
		return false;
	j->args.x = j->xq;
	if (j->n >= QUANT_PARALLEL_MIN && llm_pool_size(be->pool) > 1)
		llm_pool_run(be->pool, (j->n + QUANT_TOKENS_PER_TASK - 1) / QUANT_TOKENS_PER_TASK, quant_task, j);
	else
		for (int c = 0; c * QUANT_TOKENS_PER_TASK < j->n; c++)
			quant_task(j, c);
	return true;
}

/* The jobs of one pool run: task i is task i - first[w] of jobs[w]. */
typedef struct MatmulRun
{
	MatmulJob  *jobs;
	int			n_jobs;
	int			first[MATMUL_MULTI_MAX + 1];
} MatmulRun;

/* One task of a run of several jobs. */
static void
run_task(void *arg, int i)
{
	MatmulRun  *r = arg;
	int			w = 0;

	while (i >= r->first[w + 1])
		w++;
	gemm_task(&r->jobs[w], i - r->first[w]);
}

/* Run the gemms of jobs[0..n_jobs), activations set: tiny ones inline, else all their tasks in one pool run. */
static void
jobs_run(LlmBackend *be, MatmulJob *jobs, int n_jobs)
{
	MatmulRun	r = {jobs, n_jobs, {0}};
	double		macs = 0;

	for (int w = 0; w < n_jobs; w++)
	{
		r.first[w + 1] = r.first[w] + jobs[w].n_tasks;
		macs += (double) jobs[w].rows * (double) jobs[w].args.k * jobs[w].n;
	}
	if (macs < INLINE_MAX_MACS)
		for (int w = 0; w < n_jobs; w++)
			jobs[w].gemm(&jobs[w].args, 0, jobs[w].rows, 0, jobs[w].n);
	else if (n_jobs == 1)
		llm_pool_run(be->pool, jobs[0].n_tasks, gemm_task, &jobs[0]);
	else
		llm_pool_run(be->pool, r.first[n_jobs], run_task, &r);
}

/* y (n, rows) = x (n, cols) times w transposed, on the kernels kern; w is the backend's copy. */
static void
matmul_run(LlmBackend *be, const LlmMatmulKernels *kern, const LlmWeight *w, const float *x, float *y, int n)
{
	_Alignas(64) uint8_t stack_buf[STACK_ACT_BYTES];
	MatmulJob	j;
	uint8_t    *heap_buf;

	if (!job_init(&j, kern, w, y, n, llm_pool_size(be->pool)) || !job_activations(be, &j, x, stack_buf, &heap_buf))
	{
		llm_cpu_matmul_ref(be, w, x, y, n);
		return;
	}
	jobs_run(be, &j, 1);
	free(heap_buf);
}

/* y (n, rows) = x (n, cols) times w transposed, on the kernels kern and be's copy of w. */
void
llm_cpu_matmul(LlmBackend *be, const LlmMatmulKernels *kern, const LlmWeight *w, const float *x, float *y, int n)
{
	matmul_run(be, kern, llm_cpu_weight(be, w), x, y, n);
}

/*
 * y[i] = x w[i]^T for i < count (Q, K and V; gate and up), on the kernels
 * kern and be's copies of the weights: when every weight has a fast gemm
 * taking the same activations, x is quantized once and every weight's
 * tasks go to the pool together (one wake-up, one barrier); else one
 * matmul after another.  Each output is the gemm's, as matmul_run gives it.
 */
void
llm_cpu_matmul_multi(LlmBackend *be, const LlmMatmulKernels *kern, const LlmWeight *const *w, const float *x,
					 float *const *y, int count, int n)
{
	_Alignas(64) uint8_t stack_buf[STACK_ACT_BYTES];
	MatmulJob	jobs[MATMUL_MULTI_MAX];
	uint8_t    *heap_buf;
	bool		shared = count <= MATMUL_MULTI_MAX;

	for (int i = 0; i < count && shared; i++)
		shared = job_init(&jobs[i], kern, llm_cpu_weight(be, w[i]), y[i], n, llm_pool_size(be->pool)) &&
			jobs[i].fmt == jobs[0].fmt && w[i]->cols == w[0]->cols;
	if (!shared || !job_activations(be, &jobs[0], x, stack_buf, &heap_buf))
	{
		for (int i = 0; i < count; i++)
			llm_cpu_matmul(be, kern, w[i], x, y[i], n);
		return;
	}
	for (int i = 1; i < count; i++)
	{
		jobs[i].x = x;
		jobs[i].xq = jobs[0].xq;
		jobs[i].args.x = jobs[0].args.x;
	}
	jobs_run(be, jobs, count);
	free(heap_buf);
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
