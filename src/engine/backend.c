/*
 * backend.c
 *		What every backend shares: the options' defaults, teardown, and
 *		llm_be_*, the forward pass's way to the optional fused ops -- a
 *		backend's own, or the primitives composed in the order the op
 *		table's comments give (the CPU backend has none, so its bits are the
 *		primitives').  Choosing a backend for a device is device.c's.
 */
#include "backend.h"

#include <string.h>

/* Defaults: 1 thread, not deterministic, fusion and programmatic dependent launch on, no CUDA module. */
void
llm_backend_options_default(LlmBackendOptions *o)
{
	memset(o, 0, sizeof(*o));
	o->n_threads = 1;
	o->fuse = true;
	o->pdl = true;
}

/* y[i] = x w[i]^T for i < count: be's matmul_multi, else one matmul after another. */
void
llm_be_matmul_multi(LlmBackend *be, const LlmWeight *const *w, const float *x, float *const *y, int count, int n)
{
	if (be->ops->matmul_multi != NULL)
	{
		be->ops->matmul_multi(be, w, x, y, count, n);
		return;
	}
	for (int i = 0; i < count; i++)
		be->ops->matmul(be, w[i], x, y[i], n);
}

/* gate = act(x Wg^T) * (x Wu^T), up scratch: be's matmul_glu, else two matmuls and glu. */
void
llm_be_matmul_glu(LlmBackend *be, const LlmWeight *w_gate, const LlmWeight *w_up, const float *x, float *gate,
				  float *up, int n, LlmActivation act)
{
	if (be->ops->matmul_glu != NULL)
	{
		be->ops->matmul_glu(be, w_gate, w_up, x, gate, up, n, act);
		return;
	}
	be->ops->matmul(be, w_gate, x, gate, n);
	be->ops->matmul(be, w_up, x, up, n);
	be->ops->glu(be, gate, up, gate, (int64_t) n * w_gate->rows, act);
}

/* x += r; y = rmsnorm(x): be's add_rmsnorm, else add and rmsnorm. */
void
llm_be_add_rmsnorm(LlmBackend *be, float *x, const float *r, const float *w, float *y, int n, int dim, float eps,
				   bool add_one)
{
	if (be->ops->add_rmsnorm != NULL)
	{
		be->ops->add_rmsnorm(be, x, r, w, y, n, dim, eps, add_one);
		return;
	}
	be->ops->add(be, x, r, (int64_t) n * dim);
	be->ops->rmsnorm(be, x, w, y, n, dim, eps, add_one);
}

/* RoPE of q and k at the same positions: be's rope_qk, else rope of q, then of k. */
void
llm_be_rope_qk(LlmBackend *be, float *q, int n_heads, float *k, int n_kv_heads, const int32_t *pos, int n,
			   int head_dim, int rope_dim, const float *inv_freq, LlmRopeMode mode)
{
	if (be->ops->rope_qk != NULL)
	{
		be->ops->rope_qk(be, q, n_heads, k, n_kv_heads, pos, n, head_dim, rope_dim, inv_freq, mode);
		return;
	}
	be->ops->rope(be, q, pos, n, n_heads, head_dim, rope_dim, inv_freq, mode);
	be->ops->rope(be, k, pos, n, n_kv_heads, head_dim, rope_dim, inv_freq, mode);
}

/* Free any backend through its destroy op; NULL is allowed. */
void
llm_backend_free(LlmBackend *be)
{
	if (be != NULL)
		be->ops->destroy(be);
}
