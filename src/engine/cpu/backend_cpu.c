/*
 * backend_cpu.c
 *		The CPU backend: its creation, and the op table of each SIMD level --
 *		the scalar reference's ops (ops_ref.c) with the level's matmul,
 *		attention, GLU and RMSNorm kernels in their place, and a prepare op
 *		that copies the weights into the layouts those kernels read
 *		(weights.c).
 */
#include "cpu/activation.h"
#include "cpu/attention.h"
#include "cpu/backend_cpu.h"
#include "cpu/matmul.h"
#include "cpu/norm.h"

#include <pthread.h>
#include <stdlib.h>

static LlmBackendOps isa_ops[LLM_CPU_ISA_COUNT];
static pthread_once_t isa_ops_once = PTHREAD_ONCE_INIT;

/* The prepare op of the AVX2 level: the copies its kernels read. */
static LlmStatus
prepare_avx2(LlmBackend *be, const LlmModel *m, LlmError *err)
{
	return llm_cpu_weights_prepare(be, m, &llm_matmul_kernels_avx2, err);
}

/* The prepare op of the AVX-512 level: the copies its kernels read. */
static LlmStatus
prepare_avx512(LlmBackend *be, const LlmModel *m, LlmError *err)
{
	return llm_cpu_weights_prepare(be, m, &llm_matmul_kernels_avx512, err);
}

/* The matmul op of the AVX2 level. */
static void
matmul_avx2(LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n)
{
	llm_cpu_matmul(be, &llm_matmul_kernels_avx2, w, x, y, n);
}

/* The matmul op of the AVX-512 level. */
static void
matmul_avx512(LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n)
{
	llm_cpu_matmul(be, &llm_matmul_kernels_avx512, w, x, y, n);
}

/* The matmul_multi op of the AVX2 level. */
static void
matmul_multi_avx2(LlmBackend *be, const LlmWeight *const *w, const float *x, float *const *y, int count, int n)
{
	llm_cpu_matmul_multi(be, &llm_matmul_kernels_avx2, w, x, y, count, n);
}

/* The matmul_multi op of the AVX-512 level. */
static void
matmul_multi_avx512(LlmBackend *be, const LlmWeight *const *w, const float *x, float *const *y, int count, int n)
{
	llm_cpu_matmul_multi(be, &llm_matmul_kernels_avx512, w, x, y, count, n);
}

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

/* The rmsnorm op of the AVX-512 level. */
static void
rmsnorm_avx512(LlmBackend *be, const float *x, const float *w, float *y, int n, int dim, float eps, bool add_one)
{
	LlmNormArgs a = {(float *) x, NULL, w, y, n, dim, eps, add_one};

	llm_cpu_rmsnorm(be, &a, llm_norm_rows_avx512);
}

/* The add_rmsnorm op of the AVX-512 level. */
static void
add_rmsnorm_avx512(LlmBackend *be, float *x, const float *r, const float *w, float *y, int n, int dim, float eps,
				   bool add_one)
{
	LlmNormArgs a = {x, r, w, y, n, dim, eps, add_one};

	llm_cpu_rmsnorm(be, &a, llm_norm_rows_avx512);
}

/* gate and up as one matmul_multi on the kernels of level isa, then that level's glu op. */
static void
matmul_glu_run(LlmBackend *be, LlmCpuIsa isa, const LlmWeight *w_gate, const LlmWeight *w_up, const float *x,
			   float *gate, float *up, int n, LlmActivation act)
{
	const LlmWeight *w[2] = {w_gate, w_up};
	float	   *y[2] = {gate, up};

	llm_cpu_matmul_multi(be, llm_matmul_kernels(isa), w, x, y, 2, n);
	isa_ops[isa].glu(be, gate, up, gate, (int64_t) n * w_gate->rows, act);
}

/* The matmul_glu op of the AVX2 level. */
static void
matmul_glu_avx2(LlmBackend *be, const LlmWeight *w_gate, const LlmWeight *w_up, const float *x, float *gate,
				float *up, int n, LlmActivation act)
{
	matmul_glu_run(be, LLM_CPU_ISA_AVX2, w_gate, w_up, x, gate, up, n, act);
}

/* The matmul_glu op of the AVX-512 level. */
static void
matmul_glu_avx512(LlmBackend *be, const LlmWeight *w_gate, const LlmWeight *w_up, const float *x, float *gate,
				  float *up, int n, LlmActivation act)
{
	matmul_glu_run(be, LLM_CPU_ISA_AVX512, w_gate, w_up, x, gate, up, n, act);
}

/* Build the op tables: the reference's, with the prepare, matmul, attention, GLU and (AVX-512) RMSNorm of each level. */
static void
build_isa_ops(void)
{
	isa_ops[LLM_CPU_ISA_SCALAR] = llm_cpu_ref_ops;
	isa_ops[LLM_CPU_ISA_AVX2] = llm_cpu_ref_ops;
	isa_ops[LLM_CPU_ISA_AVX2].name = "cpu-avx2";
	isa_ops[LLM_CPU_ISA_AVX2].prepare = prepare_avx2;
	isa_ops[LLM_CPU_ISA_AVX2].matmul = matmul_avx2;
	isa_ops[LLM_CPU_ISA_AVX2].matmul_multi = matmul_multi_avx2;
	isa_ops[LLM_CPU_ISA_AVX2].matmul_glu = matmul_glu_avx2;
	if (llm_attn_kernels_avx2.name != NULL)
		isa_ops[LLM_CPU_ISA_AVX2].attention = attention_avx2;
	isa_ops[LLM_CPU_ISA_AVX512] = llm_cpu_ref_ops;
	isa_ops[LLM_CPU_ISA_AVX512].name = "cpu-avx512";
	isa_ops[LLM_CPU_ISA_AVX512].prepare = prepare_avx512;
	isa_ops[LLM_CPU_ISA_AVX512].matmul = matmul_avx512;
	isa_ops[LLM_CPU_ISA_AVX512].matmul_multi = matmul_multi_avx512;
	isa_ops[LLM_CPU_ISA_AVX512].matmul_glu = matmul_glu_avx512;
	if (llm_attn_kernels_avx512.name != NULL)
		isa_ops[LLM_CPU_ISA_AVX512].attention = attention_avx512;
	if (llm_glu_range_avx512 != NULL)
		isa_ops[LLM_CPU_ISA_AVX512].glu = glu_avx512;
	if (llm_norm_rows_avx512 != NULL)
	{
		isa_ops[LLM_CPU_ISA_AVX512].rmsnorm = rmsnorm_avx512;
		isa_ops[LLM_CPU_ISA_AVX512].add_rmsnorm = add_rmsnorm_avx512;
	}
#if defined(__x86_64__) && defined(__GNUC__)
	isa_ops[LLM_CPU_ISA_AVX2].kv_store = llm_cpu_kv_store_f16c;
	isa_ops[LLM_CPU_ISA_AVX512].kv_store = llm_cpu_kv_store_f16c;
#endif
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

/* Create a CPU backend with n_threads compute threads, on this process's SIMD level. */
LlmStatus
llm_backend_cpu_new(int n_threads, LlmBackend **out, LlmError *err)
{
	CpuBackend *cb = calloc(1, sizeof(*cb));
	LlmStatus	st;

	if (cb == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the backend");
	if ((st = llm_pool_new(n_threads, &cb->base.pool, err)))
	{
		free(cb);
		return st;
	}
	cb->pool_owned = true;
	cb->base.ops = llm_cpu_select_ops();
	*out = &cb->base;
	return LLM_OK;
}

/* Create a CPU backend computing on another backend's pool (backend_cpu.h). */
LlmStatus
llm_backend_cpu_new_on(LlmPool *pool, LlmBackend **out, LlmError *err)
{
	CpuBackend *cb = calloc(1, sizeof(*cb));

	if (cb == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the backend");
	cb->base.pool = pool;
	cb->base.ops = llm_cpu_select_ops();
	*out = &cb->base;
	return LLM_OK;
}
