/*
 * backend_cuda.c
 *		The CUDA backend: creating and destroying it, its op table, error
 *		recording, sync, memory, and the small ops (norms, RoPE, activations,
 *		adds, soft cap, gathers, argmax, softmax).  The matmul, weights,
 *		attention and staging live in their own files; the essay on memory,
 *		ordering and errors is in backend_cuda.h.
 */
#include "backend_cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const LlmBackendOps cuda_ops;
static const LlmBackendOps cuda_ops_unfused;

/* Record the first error: "<what> failed: <CUDA's message>". */
bool
cuda_ok(CudaBackend *cb, cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return true;
	if (cb->err_status == LLM_OK)
	{
		cb->err_status = e == cudaErrorMemoryAllocation ? LLM_ERR_NOMEM : LLM_ERR_BACKEND;
		snprintf(cb->err_msg, sizeof(cb->err_msg), "%s failed: %s", what, cudaGetErrorString(e));
	}
	return false;
}

/* Record the first cuBLAS error. */
bool
cublas_ok(CudaBackend *cb, cublasStatus_t s, const char *what)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return true;
	if (cb->err_status == LLM_OK)
	{
		cb->err_status = s == CUBLAS_STATUS_ALLOC_FAILED ? LLM_ERR_NOMEM : LLM_ERR_BACKEND;
		snprintf(cb->err_msg, sizeof(cb->err_msg), "%s failed: %s", what, cublasGetStatusString(s));
	}
	return false;
}

/* Record a failure that is not a CUDA call's. */
void
cuda_fail(CudaBackend *cb, LlmStatus st, const char *fmt,...)
{
	va_list		ap;

	if (cb->err_status != LLM_OK)
		return;
	cb->err_status = st;
	va_start(ap, fmt);
	vsnprintf(cb->err_msg, sizeof(cb->err_msg), fmt, ap);
	va_end(ap);
}

/* Grow scratch s to bytes: the old buffer is freed only once the stream no longer uses it. */
void *
cuda_scratch(CudaBackend *cb, CudaScratch *s, size_t bytes, const char *what)
{
	char		call[128];

	if (bytes <= s->bytes)
		return s->p;
	if (s->p != NULL)
	{
		if (!cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize"))
			return NULL;
		cudaFree(s->p);
		s->p = NULL;
		s->bytes = 0;
	}
	bytes += bytes / 4;			/* room to grow a little without another round */
	snprintf(call, sizeof(call), "cudaMalloc of %zu MB for %s", (bytes >> 20) + 1, what);
	if (!cuda_ok(cb, cudaMalloc(&s->p, bytes), call))
	{
		s->p = NULL;
		return NULL;
	}
	s->bytes = bytes;
	return s->p;
}

/* The CUDA backend of be (which must be one). */
static inline CudaBackend *
cuda_of(LlmBackend *be)
{
	return (CudaBackend *) be;
}

/* Whether ops should run: no error recorded since the last sync. */
static inline bool
live(CudaBackend *cb)
{
	return cb->err_status == LLM_OK;
}

/* ---- memory ---- */

/* Device memory for activations; NULL when out of memory (nothing recorded: the caller reports it). */
static void *
cuda_alloc(LlmBackend *be, size_t bytes)
{
	void	   *p = NULL;

	if (cudaMalloc(&p, bytes > 0 ? bytes : 1) != cudaSuccess)
	{
		cudaGetLastError();		/* an allocation failure is not sticky: clear it */
		return NULL;
	}
	return p;
}

/* Free device memory from cuda_alloc (after the work using it). */
static void
cuda_free(LlmBackend *be, void *p)
{
	CudaBackend *cb = cuda_of(be);

	if (p == NULL)
		return;
	cudaStreamSynchronize(cb->stream);
	cuda_ok(cb, cudaFree(p), "cudaFree");
}

/* Device to host, complete on return. */
static void
cuda_to_host(LlmBackend *be, void *dst, const void *src, size_t bytes)
{
	CudaBackend *cb = cuda_of(be);

	if (!live(cb) || bytes == 0)
		return;
	if (cuda_ok(cb, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cb->stream), "cudaMemcpyAsync (device to host)"))
		cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize");
}

/* Host to device, in stream order; src may be reused on return. */
static void
cuda_to_device(LlmBackend *be, void *dst, const void *src, size_t bytes)
{
	CudaBackend *cb = cuda_of(be);

	if (!live(cb) || bytes == 0)
		return;
	if (cuda_ok(cb, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cb->stream), "cudaMemcpyAsync (host to device)"))
		cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize");
}

/* Wait for the stream; apply the step's H2O sums; report and forget the first error. */
static LlmStatus
cuda_sync(LlmBackend *be, LlmError *err)
{
	CudaBackend *cb = cuda_of(be);
	LlmStatus	st;

	cuda_ok(cb, cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize (an earlier kernel failed)");
	cuda_stage_reset(cb);
	st = cb->err_status;
	if (st != LLM_OK)
		llm_error_set(err, st, "CUDA backend: %s", cb->err_msg);
	cb->err_status = LLM_OK;
	cb->err_msg[0] = '\0';
	return st;
}

/* ---- the small ops ---- */

/* Token embeddings: rows ids of w, times scale. */
static void
cuda_get_rows(LlmBackend *be, const LlmWeight *w, const int32_t *ids, int n, float scale, float *out)
{
	CudaBackend *cb = cuda_of(be);
	const CudaMat *m;
	const int32_t *ids_d;

	if (!live(cb) || (m = cuda_mat(cb, w)) == NULL || (ids_d = cuda_upload_i32(cb, ids, (size_t) n)) == NULL)
		return;
	cuda_ok(cb, llm_cuda_get_rows(m, ids_d, n, scale, out, cb->stream), "kernel get_rows");
}

/* RMSNorm of n rows of dim. */
static void
cuda_rmsnorm(LlmBackend *be, const float *x, const float *w, float *y, int n, int dim, float eps, bool add_one)
{
	CudaBackend *cb = cuda_of(be);
	const float *wd;

	if (live(cb) && (wd = cuda_const(cb, w, (size_t) dim)) != NULL)
		cuda_ok(cb, llm_cuda_rmsnorm(x, wd, y, n, dim, eps, add_one, cb->stream), "kernel rmsnorm");
}

/* RoPE on n tokens. */
static void
cuda_rope(LlmBackend *be, float *x, const int32_t *pos, int n, int n_heads, int head_dim, int rope_dim,
		  const float *inv_freq, LlmRopeMode mode)
{
	CudaBackend *cb = cuda_of(be);
	const float *f;
	const int32_t *pos_d;

	if (!live(cb) || (f = cuda_const(cb, inv_freq, (size_t) (rope_dim / 2))) == NULL ||
		(pos_d = cuda_step_positions(cb, pos, n)) == NULL)
		return;
	cuda_ok(cb, llm_cuda_rope(x, n_heads, NULL, 0, pos_d, n, head_dim, rope_dim, f, mode == LLM_ROPE_NEOX, cb->stream),
			"kernel rope");
}

/* out = act(gate) * up. */
static void
cuda_glu(LlmBackend *be, const float *gate, const float *up, float *out, int64_t n, LlmActivation act)
{
	CudaBackend *cb = cuda_of(be);

	if (live(cb))
		cuda_ok(cb, llm_cuda_glu(gate, up, out, n, act == LLM_ACT_SILU ? 0 : 1, cb->stream), "kernel glu");
}

/* x += y. */
static void
cuda_add(LlmBackend *be, float *x, const float *y, int64_t n)
{
	CudaBackend *cb = cuda_of(be);

	if (live(cb))
		cuda_ok(cb, llm_cuda_add(x, y, n, cb->stream), "kernel add");
}

/* x (n, width) += b (host, width) on every row. */
static void
cuda_add_bias(LlmBackend *be, float *x, const float *b, int n, int width)
{
	CudaBackend *cb = cuda_of(be);
	const float *bd;

	if (live(cb) && (bd = cuda_const(cb, b, (size_t) width)) != NULL)
		cuda_ok(cb, llm_cuda_add_bias(x, bd, n, width, cb->stream), "kernel add_bias");
}

/* Rows idx (host) of x. */
static void
cuda_gather_rows(LlmBackend *be, const float *x, const int32_t *idx, int n, int width, float *out)
{
	CudaBackend *cb = cuda_of(be);
	const int32_t *idx_d;

	if (!live(cb) || (idx_d = cuda_upload_i32(cb, idx, (size_t) n)) == NULL)
		return;
	cuda_ok(cb, llm_cuda_gather_rows(x, idx_d, n, width, out, cb->stream), "kernel gather_rows");
}

/* x = cap * tanh(x / cap). */
static void
cuda_softcap(LlmBackend *be, float *x, int64_t n, float cap)
{
	CudaBackend *cb = cuda_of(be);

	if (live(cb))
		cuda_ok(cb, llm_cuda_softcap(x, n, cap, cb->stream), "kernel softcap");
}

/* Argmax of each row, to host memory (complete on return). */
static void
cuda_argmax(LlmBackend *be, const float *x, int n, int width, int32_t *out)
{
	CudaBackend *cb = cuda_of(be);
	int32_t    *d;

	if (!live(cb) || n < 1 || (d = cuda_scratch(cb, &cb->act, (size_t) n * sizeof(int32_t), "argmax")) == NULL)
		return;
	if (cuda_ok(cb, llm_cuda_argmax(x, n, width, d, cb->stream), "kernel argmax"))
		cuda_to_host(be, out, d, (size_t) n * sizeof(int32_t));
}

/* Softmax of each row in place. */
static void
cuda_softmax(LlmBackend *be, float *x, int n, int width)
{
	CudaBackend *cb = cuda_of(be);

	if (live(cb))
		cuda_ok(cb, llm_cuda_softmax(x, n, width, cb->stream), "kernel softmax");
}

/* ---- life ---- */

/* Free everything the backend holds on the device, then the backend. */
static void
cuda_destroy(LlmBackend *be)
{
	CudaBackend *cb = cuda_of(be);

	if (cb->stream != NULL)
		cudaStreamSynchronize(cb->stream);
	cuda_weights_free(cb);
	cuda_kv_free(cb);
	cudaFree(cb->act.p);
	cudaFree(cb->wbf.p);
	cudaFree(cb->work.p);
	cuda_stage_free(cb);
	free(cb->step.tok_h);
	free(cb->step.runs_h);
	if (cb->cublas != NULL)
		cublasDestroy(cb->cublas);
	if (cb->stream != NULL)
		cudaStreamDestroy(cb->stream);
	free(cb);
}

/* The number of CUDA devices visible; 0 when none or no driver, and then why (why may be NULL). */
int
llm_cuda_device_count(char *why, size_t why_len)
{
	int			n = 0;
	cudaError_t e;

	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess)
	{
		cudaGetLastError();
		if (why != NULL)
			snprintf(why, why_len, "CUDA finds no device: %s", cudaGetErrorString(e));
		return 0;
	}
	if (n == 0 && why != NULL)
		snprintf(why, why_len, "CUDA finds no device");
	return n;
}

/* Create the CUDA backend on GPU opt->device_index with options opt: stream, cuBLAS handle, kernel limits. */
LlmStatus
llm_backend_cuda_new(const LlmBackendOptions *opt, LlmBackend **out, LlmError *err)
{
	CudaBackend *cb;
	struct cudaDeviceProp prop;
	int			n = 0;
	cudaError_t e;

	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess || n < 1)
	{
		cudaGetLastError();
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "no CUDA device is visible (%s)",
							 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
	}
	if (opt->device_index < 0 || opt->device_index >= n)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "there is no GPU number %d: %d %s visible",
							 opt->device_index, n, n == 1 ? "is" : "are");
	cb = calloc(1, sizeof(*cb));
	if (cb == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the CUDA backend");
	cb->base.ops = opt->fuse ? &cuda_ops : &cuda_ops_unfused;
	cb->base.device_storage = true;
	cb->base.device_memory = true;
	cb->base.deterministic = opt->deterministic;
	cb->device = opt->device_index;
	cb->force_fp32_gemm = opt->fp32_gemm;
	if (!cuda_ok(cb, cudaSetDevice(cb->device), "cudaSetDevice") ||
		!cuda_ok(cb, cudaGetDeviceProperties(&prop, cb->device), "cudaGetDeviceProperties") ||
		!cuda_ok(cb, cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
		!cublas_ok(cb, cublasCreate(&cb->cublas), "cublasCreate") ||
		!cublas_ok(cb, cublasSetStream(cb->cublas, cb->stream), "cublasSetStream") ||
		!cuda_ok(cb, llm_cuda_attn_init(), "cudaFuncSetAttribute (attention shared memory)"))
	{
		LlmStatus	st = llm_error_set(err, cb->err_status, "could not start the CUDA backend: %s", cb->err_msg);

		cuda_destroy(&cb->base);
		return st;
	}
	snprintf(cb->device_name, sizeof(cb->device_name), "%s", prop.name);
	cb->sm_count = prop.multiProcessorCount;
	cb->cc_major = prop.major;
	/* Hopper's programmatic dependent launch hides most of the gap between kernels, where it works */
	llm_cuda_set_pdl(prop.major >= 9 && opt->pdl);
	if (llm_cuda_pdl_on() && llm_cuda_pdl_probe(cb->stream) != cudaSuccess)
	{
		cudaGetLastError();
		llm_cuda_set_pdl(false);
	}
	*out = &cb->base;
	return LLM_OK;
}

/* Whether be is the CUDA backend. */
bool
llm_cuda_is_backend(const LlmBackend *be)
{
	return be != NULL && (be->ops == &cuda_ops || be->ops == &cuda_ops_unfused);
}

/* The device's name. */
const char *
llm_cuda_device_name(const LlmBackend *be)
{
	return llm_cuda_is_backend(be) ? ((const CudaBackend *) be)->device_name : "";
}

/* The primitives, shared by both op tables. */
#define CUDA_PRIMITIVE_OPS \
	.name = "cuda", \
	.prepare = cuda_prepare, \
	.matmul = cuda_matmul, \
	.get_rows = cuda_get_rows, \
	.rmsnorm = cuda_rmsnorm, \
	.rope = cuda_rope, \
	.kv_store = cuda_kv_store, \
	.attention = cuda_attention, \
	.kv_move = cuda_kv_move, \
	.glu = cuda_glu, \
	.add = cuda_add, \
	.add_bias = cuda_add_bias, \
	.alloc = cuda_alloc, \
	.free = cuda_free, \
	.to_host = cuda_to_host, \
	.to_device = cuda_to_device, \
	.gather_rows = cuda_gather_rows, \
	.softcap = cuda_softcap, \
	.argmax = cuda_argmax, \
	.softmax = cuda_softmax, \
	.sync = cuda_sync, \
	.destroy = cuda_destroy

/* With fusion: the fused ops of fused.c. */
static const LlmBackendOps cuda_ops = {
	CUDA_PRIMITIVE_OPS,
	.matmul_multi = cuda_matmul_multi,
	.matmul_glu = cuda_matmul_glu,
	.add_rmsnorm = cuda_add_rmsnorm,
	.rope_qk = cuda_rope_qk,
};

/* Without: the forward pass composes the primitives (backend.c). */
static const LlmBackendOps cuda_ops_unfused = {
	CUDA_PRIMITIVE_OPS,
};
