/*
 * matmul.c
 *		The CUDA backend's matmul op: y (n, rows) = x (n, cols) w^T.
 *
 * Up to CUDA_GEMV_MAX_TOKENS tokens (decode) the work is bound by reading
 * the weights, so own GEMV kernels read each weight once for all tokens, in
 * its stored layout (gemv.cu); for the split Q8_0 / Q4_0 layouts the
 * activations are first quantized to int8 blocks.
 *
 * (Deterministic backends, llm.deterministic, run any number of tokens
 * through the GEMV kernels 8 at a time instead: a token's bits from them
 * do not depend on the other tokens of the launch, cuBLAS's do.)
 *
 * More tokens (prefill, large batches) go to cuBLAS: cublasGemmEx with
 * BF16 operands and FP32 accumulation and output (F32 weights: an FP32
 * GEMM; GPUs before sm_80, which have no BF16 GEMM: weights decoded to
 * float and an FP32 GEMM).  The activations are rounded to BF16 once per call; BF16 weights
 * are used where they lie, any other layout is decoded to BF16 into a
 * scratch buffer, a slab of rows at a time (at most WBF_MAX_BYTES), just
 * before its GEMM.  That costs a write and a read of two bytes per weight
 * per call -- against compute that grows with the tokens, noticeable only
 * for mid-sized batches -- and keeps device memory at the model's stored
 * size, which is why models are quantized at all; a converted BF16 copy
 * would double or quadruple it.
 *
 * cuBLAS is column-major: row-major w (rows, cols) is column-major w^T
 * (cols x rows, ld cols), so y^T (rows x n) = op_T(w^T) (rows x cols) times
 * x^T (cols x n, ld cols), with ldc = rows.
 */
#include "backend_cuda.h"

#include <string.h>

#define WBF_MAX_BYTES ((size_t) 256 << 20)

/*
 * y (n, rows) = x (n, cols) w^T as an FP32 GEMM of w decoded to float,
 * slab by slab: GPUs before sm_80 have no BF16 GEMM.
 */
static void
gemm_fp32_decoded(CudaBackend *cb, const CudaMat *m, const float *x, float *y, int n)
{
	const float one = 1.0f;
	const float zero = 0.0f;
	int64_t		slab = (int64_t) (WBF_MAX_BYTES / ((size_t) m->cols * sizeof(float)));

	if (slab < 1)
		slab = 1;
	for (int64_t r0 = 0; r0 < m->rows; r0 += slab)
	{
		int64_t		nr = m->rows - r0 < slab ? m->rows - r0 : slab;
		float	   *wf = cuda_scratch(cb, &cb->wbf, (size_t) nr * m->cols * sizeof(float), "weights decoded to FP32");

		if (wf == NULL || !cuda_ok(cb, llm_cuda_dequant_f32(m, r0, nr, wf, cb->stream), "kernel dequant_f32") ||
			!cublas_ok(cb, cublasGemmEx(cb->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) nr, n, (int) m->cols, &one,
										wf, CUDA_R_32F, (int) m->cols, x, CUDA_R_32F, (int) m->cols, &zero,
										y + r0, CUDA_R_32F, (int) m->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
					   "cublasGemmEx (FP32, decoded weights)"))
			return;
	}
}

/* y (n, rows) = x (n, cols) w^T with cuBLAS. */
static void
gemm(CudaBackend *cb, const CudaMat *m, const float *x, float *y, int n)
{
	const float one = 1.0f;
	const float zero = 0.0f;
	uint16_t   *xb;
	int64_t		slab;

	if (m->rows > INT32_MAX || m->cols > INT32_MAX)
	{
		cuda_fail(cb, LLM_ERR_UNSUPPORTED, "a weight of %lld x %lld is too large for cuBLAS's int dimensions",
				  (long long) m->rows, (long long) m->cols);
		return;
	}
	if (m->layout != CUDA_LAYOUT_F32 && (cb->cc_major < 8 || cb->force_fp32_gemm))
	{
		gemm_fp32_decoded(cb, m, x, y, n);
		return;
	}
	if (m->layout == CUDA_LAYOUT_F32)
	{
		cublas_ok(cb, cublasGemmEx(cb->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) m->rows, n, (int) m->cols, &one,
								   m->data, CUDA_R_32F, (int) m->cols, x, CUDA_R_32F, (int) m->cols, &zero,
								   y, CUDA_R_32F, (int) m->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
				  "cublasGemmEx (FP32)");
		return;
	}
	xb = cuda_scratch(cb, &cb->act, (size_t) n * m->cols * sizeof(uint16_t), "activations in BF16");
	if (xb == NULL || !cuda_ok(cb, llm_cuda_to_bf16(x, (int64_t) n * m->cols, xb, cb->stream), "kernel to_bf16"))
		return;
	slab = m->layout == CUDA_LAYOUT_BF16 ? m->rows : (int64_t) (WBF_MAX_BYTES / ((size_t) m->cols * 2));
	if (slab < 1)
		slab = 1;
	for (int64_t r0 = 0; r0 < m->rows; r0 += slab)
	{
		int64_t		nr = m->rows - r0 < slab ? m->rows - r0 : slab;
		const void *a = m->data;

		if (m->layout != CUDA_LAYOUT_BF16)
		{
			uint16_t   *wb = cuda_scratch(cb, &cb->wbf, (size_t) nr * m->cols * sizeof(uint16_t),
										  "weights decoded to BF16");

			if (wb == NULL ||
				!cuda_ok(cb, llm_cuda_dequant_bf16(m, r0, nr, wb, cb->stream), "kernel dequant_bf16"))
				return;
			a = wb;
		}
		if (!cublas_ok(cb, cublasGemmEx(cb->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) nr, n, (int) m->cols, &one,
										a, CUDA_R_16BF, (int) m->cols, xb, CUDA_R_16BF, (int) m->cols, &zero,
										y + r0, CUDA_R_32F, (int) m->rows, CUBLAS_COMPUTE_32F,
										CUBLAS_GEMM_DEFAULT), "cublasGemmEx (BF16)"))
			return;
	}
}

/* Run a GEMV job of n <= CUDA_GEMV_MAX_TOKENS tokens: the split layouts' activations are quantized once for all its matrices. */
void
cuda_run_gemv(CudaBackend *cb, const CudaGemvJob *job, const float *x, int n)
{
	const CudaMat *m = &job->w[0];
	void	   *xq = NULL;

	if (cb->err_status != LLM_OK)
		return;
	if (m->layout == CUDA_LAYOUT_Q8_0R || m->layout == CUDA_LAYOUT_Q4_0R)
	{
		xq = cuda_scratch(cb, &cb->act, llm_cuda_act_q8_bytes(n, m->cols), "activations in int8");
		if (xq == NULL || !cuda_ok(cb, llm_cuda_quantize_act(x, n, m->cols, xq, cb->stream), "kernel quantize_act"))
			return;
	}
	cuda_ok(cb, llm_cuda_gemv(job, x, xq, n, cb->stream), "kernel gemv");
}

/* Whether matmuls of n tokens take the GEMV kernels: up to CUDA_GEMV_MAX_TOKENS, or any number when deterministic. */
bool
cuda_gemv_takes(const CudaBackend *cb, int n)
{
	return n <= CUDA_GEMV_MAX_TOKENS || cb->base.deterministic;
}

/*
 * Run a GEMV job of any number of tokens, CUDA_GEMV_MAX_TOKENS at a time:
 * a token's bits from the GEMV kernels do not depend on the other tokens
 * of the launch (test_cuda), so deterministic backends take this for
 * every matmul.
 */
void
cuda_gemv(CudaBackend *cb, const CudaGemvJob *job, const float *x, int n)
{
	CudaGemvJob part = *job;

	for (int t = 0; t < n; t += CUDA_GEMV_MAX_TOKENS)
	{
		for (int i = 0; i < job->count; i++)
			part.y[i] = job->y[i] + (size_t) t * job->w[i].rows;
		cuda_run_gemv(cb, &part, x + (size_t) t * job->w[0].cols,
					  n - t < CUDA_GEMV_MAX_TOKENS ? n - t : CUDA_GEMV_MAX_TOKENS);
	}
}

/* y (n, rows) = x (n, cols) w^T: a GEMV, or cuBLAS for more tokens than it takes. */
void
cuda_matmul(LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n)
{
	CudaBackend *cb = (CudaBackend *) be;
	const CudaMat *m;
	CudaGemvJob job;

	if (cb->err_status != LLM_OK || n < 1 || (m = cuda_mat(cb, w)) == NULL)
		return;
	if (!cuda_gemv_takes(cb, n))
	{
		gemm(cb, m, x, y, n);
		return;
	}
	memset(&job, 0, sizeof(job));
	job.count = 1;
	job.glu = -1;
	job.w[0] = *m;
	job.y[0] = y;
	cuda_gemv(cb, &job, x, n);
}
