/*
 * fused.c
 *		The CUDA backend's fused ops (backend.h's optional ops): fewer,
 *		fuller launches for decode.
 *
 * Decode at batch 1 is bound by reading the weights, and at the 8B shape a
 * layer's weights take about 100 microseconds to stream; every launch of a
 * small kernel between them costs a few microseconds of an idle GPU, so
 * launches matter.  The forward pass names the steps that can share one
 * (backend.h's llm_be_*), and these ops run each as:
 *
 *   matmul_multi (Wq, Wk, Wv of x)   ->  one GEMV job of three matrices
 *   matmul_glu (Wg, Wu of x, glu)    ->  one GEMV job writing act(g) * u
 *   add_rmsnorm (x += r, rmsnorm)    ->  one add + RMSNorm kernel
 *   rope_qk (rope of q and of k)     ->  one RoPE kernel
 *
 * Where a fusion does not apply they run the backend's own primitives in
 * the order backend.h gives: more tokens than the GEMV kernels take
 * (cuBLAS; a deterministic backend takes them all, 8 at a time, matmul.c),
 * matrices that cannot share a GEMV launch (layout, block type or width),
 * or buffers that alias.  With fusion off (LlmBackendOptions.fuse) the
 * backend's op table leaves these ops out and the forward pass composes
 * the primitives itself; test_cuda checks both give the same logits.
 */
#include "backend_cuda.h"

#include <string.h>

/* The CUDA backend of be (which must be one). */
static inline CudaBackend *
cuda_of(LlmBackend *be)
{
	return (CudaBackend *) be;
}

/* The GEMV activation code of act: 0 SiLU, 1 GELU. */
static inline int
glu_code(LlmActivation act)
{
	return act == LLM_ACT_SILU ? 0 : 1;
}

/* y[i] = x w[i]^T: one GEMV job when the GEMV kernels take n tokens and the matrices can share it. */
void
cuda_matmul_multi(LlmBackend *be, const LlmWeight *const *w, const float *x, float *const *y, int count, int n)
{
	CudaBackend *cb = cuda_of(be);
	CudaGemvJob job;
	bool		fuse = count >= 1 && count <= CUDA_GEMV_MAX_MATS && cuda_gemv_takes(cb, n);

	if (cb->err_status != LLM_OK || n < 1)
		return;
	memset(&job, 0, sizeof(job));
	job.glu = -1;
	for (int i = 0; fuse && i < count; i++)
	{
		const CudaMat *m = cuda_mat(cb, w[i]);

		if (m == NULL)
			return;
		fuse = (i == 0 || llm_cuda_gemv_compatible(&job.w[0], m)) && y[i] != x;
		for (int j = 0; j < i; j++)
			fuse = fuse && y[i] != y[j];
		job.w[i] = *m;
		job.y[i] = y[i];
	}
	if (!fuse)
	{
		for (int i = 0; i < count; i++)
			cuda_matmul(be, w[i], x, y[i], n);
		return;
	}
	job.count = count;
	cuda_gemv(cb, &job, x, n);
}

/* gate = act(x Wg^T) * (x Wu^T), up scratch: one GEMV job of both, or two matmuls and the glu kernel. */
void
cuda_matmul_glu(LlmBackend *be, const LlmWeight *w_gate, const LlmWeight *w_up, const float *x, float *gate,
				float *up, int n, LlmActivation act)
{
	CudaBackend *cb = cuda_of(be);
	const CudaMat *g;
	const CudaMat *u;
	CudaGemvJob job;

	if (cb->err_status != LLM_OK || n < 1 || (g = cuda_mat(cb, w_gate)) == NULL || (u = cuda_mat(cb, w_up)) == NULL)
		return;
	if (!cuda_gemv_takes(cb, n) || !llm_cuda_gemv_compatible(g, u) || g->rows != u->rows || gate == up ||
		gate == x || up == x)
	{
		cuda_matmul(be, w_gate, x, gate, n);
		cuda_matmul(be, w_up, x, up, n);
		cuda_ok(cb, llm_cuda_glu(gate, up, gate, (int64_t) n * g->rows, glu_code(act), cb->stream), "kernel glu");
		return;
	}
	memset(&job, 0, sizeof(job));
	job.count = 2;
	job.glu = glu_code(act);
	job.w[0] = *g;
	job.w[1] = *u;
	job.y[0] = gate;
	job.y[1] = up;
	cuda_gemv(cb, &job, x, n);
}

/* x += r; y = rmsnorm(x): one kernel (two when y is r, which the sum must not overwrite mid-row). */
void
cuda_add_rmsnorm(LlmBackend *be, float *x, const float *r, const float *w, float *y, int n, int dim, float eps,
				 bool add_one)
{
	CudaBackend *cb = cuda_of(be);
	const float *wd;

	if (cb->err_status != LLM_OK || (wd = cuda_const(cb, w, (size_t) dim)) == NULL)
		return;
	if (y == r)
	{
		if (cuda_ok(cb, llm_cuda_add(x, r, (int64_t) n * dim, cb->stream), "kernel add"))
			cuda_ok(cb, llm_cuda_rmsnorm(x, wd, y, n, dim, eps, add_one, cb->stream), "kernel rmsnorm");
		return;
	}
	cuda_ok(cb, llm_cuda_add_rmsnorm(x, r, wd, y, n, dim, eps, add_one, cb->stream), "kernel add_rmsnorm");
}

/* RoPE of q and k at the same positions: one kernel over both (two when they are the same buffer). */
void
cuda_rope_qk(LlmBackend *be, float *q, int n_heads, float *k, int n_kv_heads, const int32_t *pos, int n,
			 int head_dim, int rope_dim, const float *inv_freq, LlmRopeMode mode)
{
	CudaBackend *cb = cuda_of(be);
	const float *f;
	const int32_t *pos_d;
	bool		neox = mode == LLM_ROPE_NEOX;

	if (cb->err_status != LLM_OK || (f = cuda_const(cb, inv_freq, (size_t) (rope_dim / 2))) == NULL ||
		(pos_d = cuda_step_positions(cb, pos, n)) == NULL)
		return;
	if (q == k)
	{
		if (cuda_ok(cb, llm_cuda_rope(q, n_heads, NULL, 0, pos_d, n, head_dim, rope_dim, f, neox, cb->stream),
					"kernel rope"))
			cuda_ok(cb, llm_cuda_rope(k, n_kv_heads, NULL, 0, pos_d, n, head_dim, rope_dim, f, neox, cb->stream),
					"kernel rope");
		return;
	}
	cuda_ok(cb, llm_cuda_rope(q, n_heads, k, n_kv_heads, pos_d, n, head_dim, rope_dim, f, neox, cb->stream),
			"kernel rope");
}
