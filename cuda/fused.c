/*
 * fuse.c
 *		Fewer, fuller launches for decode: the CUDA backend holds some ops
 *		back for a moment to merge them with the next one.
 *
 * Decode at batch 1 is bound by reading the weights, and at the 8B shape a
 * layer's weights take about 100 microseconds to stream; every launch of a
 * small kernel between them costs a few microseconds of an idle GPU, so
 * launches matter.  The op table calls one op at a time, so the backend
 * fuses by holding back (CudaPending) and looking at what comes next:
 *
 *   matmul(Wq, x), matmul(Wk, x), matmul(Wv, x)  ->  one GEMV job of three
 *   matmul(Wg, x), matmul(Wu, x), glu(g, u -> g) ->  one GEMV job writing act(g) * u
 *   add(x, r), rmsnorm(x -> y)                   ->  one add + RMSNorm kernel
 *   rope(q), rope(k)                             ->  one RoPE kernel
 *
 * Every other op, and every op that does not match, first launches what is
 * held (cuda_flush), so the order of effects on memory never changes.  A
 * merge also checks that the new op reads nothing the held op writes.
 * LLM_CUDA_FUSE=0 turns holding off (for comparison).
 */
#include "backend_cuda.h"

#include <string.h>

/* Launch the held op, if any. */
void
cuda_flush(CudaBackend *cb)
{
	CudaPending *p = &cb->pend;
	CudaPendingKind kind = p->kind;

	p->kind = CUDA_PENDING_NONE;
	if (cb->err_status != LLM_OK)
		return;
	switch (kind)
	{
		case CUDA_PENDING_GEMV:
			cuda_run_gemv(cb, &p->job, p->x, p->n);
			break;
		case CUDA_PENDING_ADD:
			cuda_ok(cb, llm_cuda_add(p->ax, p->ay, p->an, cb->stream), "kernel add");
			break;
		case CUDA_PENDING_ROPE:
			cuda_ok(cb, llm_cuda_rope(p->rx, p->rheads, NULL, 0, p->rpos, p->rn, p->rhd, p->rdim, p->rfreq, p->rneox,
									  cb->stream), "kernel rope");
			break;
		case CUDA_PENDING_NONE:
			break;
	}
}

/* Whether buffer a (of a matmul output) is one of the held job's outputs or its input. */
static bool
touches_job(const CudaPending *p, const float *a)
{
	if (a == p->x)
		return true;
	for (int m = 0; m < p->job.count; m++)
		if (a == p->job.y[m])
			return true;
	return false;
}

/* y = x m^T: join the held job (same input and width, compatible layout), or start one. */
void
cuda_gemv_submit(CudaBackend *cb, const CudaMat *m, const float *x, float *y, int n)
{
	CudaPending *p = &cb->pend;

	if (p->kind == CUDA_PENDING_GEMV && p->x == x && p->n == n && p->job.glu < 0 &&
		p->job.count < CUDA_GEMV_MAX_MATS && llm_cuda_gemv_compatible(&p->job.w[0], m) && !touches_job(p, y))
	{
		p->job.w[p->job.count] = *m;
		p->job.y[p->job.count] = y;
		p->job.count++;
		return;
	}
	cuda_flush(cb);
	memset(&p->job, 0, sizeof(p->job));
	p->job.count = 1;
	p->job.glu = -1;
	p->job.w[0] = *m;
	p->job.y[0] = y;
	p->x = x;
	p->n = n;
	if (cb->fuse)
		p->kind = CUDA_PENDING_GEMV;
	else
		cuda_run_gemv(cb, &p->job, x, n);
}

/* glu(gate, up -> gate) right after the held gate and up matmuls: one job that writes act(gate) * up. */
bool
cuda_glu_fused(CudaBackend *cb, const float *gate, const float *up, float *out, int64_t n, int act)
{
	CudaPending *p = &cb->pend;

	if (p->kind != CUDA_PENDING_GEMV || p->job.count != 2 || p->job.glu >= 0 || p->job.y[0] != gate ||
		p->job.y[1] != up || out != gate || p->job.w[0].rows != p->job.w[1].rows ||
		n != (int64_t) p->n * p->job.w[0].rows)
		return false;
	p->job.glu = act;
	cuda_flush(cb);
	return true;
}

/* x += y, held for the RMSNorm that usually reads x next. */
void
cuda_add_submit(CudaBackend *cb, float *x, const float *y, int64_t n)
{
	CudaPending *p = &cb->pend;

	cuda_flush(cb);
	if (!cb->fuse)
	{
		cuda_ok(cb, llm_cuda_add(x, y, n, cb->stream), "kernel add");
		return;
	}
	p->kind = CUDA_PENDING_ADD;
	p->ax = x;
	p->ay = y;
	p->an = n;
}

/* rmsnorm(x -> y) after the held x += r: both in one kernel. */
bool
cuda_add_rmsnorm_fused(CudaBackend *cb, const float *x, const float *w, float *y, int n, int dim, float eps,
					   bool add_one)
{
	CudaPending *p = &cb->pend;

	if (p->kind != CUDA_PENDING_ADD || p->ax != x || p->an != (int64_t) n * dim || y == p->ay)
		return false;
	p->kind = CUDA_PENDING_NONE;
	cuda_ok(cb, llm_cuda_add_rmsnorm(p->ax, p->ay, w, y, n, dim, eps, add_one, cb->stream), "kernel add_rmsnorm");
	return true;
}

/* RoPE of x: launched with the held RoPE of the same positions and frequencies, else held. */
void
cuda_rope_submit(CudaBackend *cb, float *x, int n_heads, const int32_t *pos, int n, int head_dim, int rope_dim,
				 const float *inv_freq, bool neox)
{
	CudaPending *p = &cb->pend;

	if (p->kind == CUDA_PENDING_ROPE && p->rpos == pos && p->rn == n && p->rhd == head_dim &&
		p->rdim == rope_dim && p->rfreq == inv_freq && p->rneox == neox && p->rx != x)
	{
		p->kind = CUDA_PENDING_NONE;
		cuda_ok(cb, llm_cuda_rope(p->rx, p->rheads, x, n_heads, pos, n, head_dim, rope_dim, inv_freq, neox, cb->stream),
				"kernel rope");
		return;
	}
	cuda_flush(cb);
	if (!cb->fuse)
	{
		cuda_ok(cb, llm_cuda_rope(x, n_heads, NULL, 0, pos, n, head_dim, rope_dim, inv_freq, neox, cb->stream),
				"kernel rope");
		return;
	}
	p->kind = CUDA_PENDING_ROPE;
	p->rx = x;
	p->rheads = n_heads;
	p->rpos = pos;
	p->rn = n;
	p->rhd = head_dim;
	p->rdim = rope_dim;
	p->rfreq = inv_freq;
	p->rneox = neox;
}
