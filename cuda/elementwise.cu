/*
 * elementwise.cu
 *		The small ops between the matmuls: RMSNorm, RoPE, the gated
 *		activations (SwiGLU, GeGLU), residual and bias adds, the logits' soft
 *		cap and gathering rows; and two fusions of them (fused.c): a residual
 *		add with the RMSNorm that reads its sum, and RoPE of Q and K in one
 *		launch.  Each follows its scalar reference in cpu/ops_ref.c
 *		expression for expression (RMSNorm's sum of squares is a tree here,
 *		so only it rounds differently).
 */
#include "common.cuh"

/* One row of RMSNorm per block: y = x * (1 / sqrt(mean(x^2) + eps)) * w (or * (1 + w)). */
__global__ void
rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w, float *y, int dim, float eps,
			   bool add_one)
{
	pdl_wait();
	pdl_launch_next();
	__shared__ float red[32];
	const float *xr = x + (size_t) blockIdx.x * dim;
	float	   *yr = y + (size_t) blockIdx.x * dim;
	float		ss = 0.0f;
	float		inv;

	for (int j = threadIdx.x; j < dim; j += blockDim.x)
		ss += xr[j] * xr[j];
	ss = block_sum(ss, red);
	inv = 1.0f / sqrtf(ss / dim + eps);
	for (int j = threadIdx.x; j < dim; j += blockDim.x)
		yr[j] = xr[j] * inv * (add_one ? 1.0f + w[j] : w[j]);
}

/* y (n, dim) = rmsnorm of each row of x; y may be x. */
cudaError_t
llm_cuda_rmsnorm(const float *x, const float *w, float *y, int n, int dim, float eps, bool add_one,
				 cudaStream_t st)
{
	int			threads = dim >= 1024 ? 256 : (dim >= 256 ? 128 : 32);

	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(w);
	LLM_CHECK_DEV(y);
	if (n < 1)
		return cudaSuccess;
	LLM_LAUNCH(rmsnorm_kernel, n, threads, 0, st, x, w, y, dim, eps, add_one);
	return cudaGetLastError();
}

/* x (n, dim) += r, then y = rmsnorm(x): one row per block. */
__global__ void
add_rmsnorm_kernel(float *x, const float *__restrict__ r, const float *__restrict__ w, float *y, int dim, float eps,
				   bool add_one)
{
	pdl_wait();
	pdl_launch_next();
	__shared__ float red[32];
	float	   *xr = x + (size_t) blockIdx.x * dim;
	const float *rr = r + (size_t) blockIdx.x * dim;
	float	   *yr = y + (size_t) blockIdx.x * dim;
	float		ss = 0.0f;
	float		inv;

	for (int j = threadIdx.x; j < dim; j += blockDim.x)
	{
		float		v = xr[j] + rr[j];

		xr[j] = v;
		ss += v * v;
	}
	ss = block_sum(ss, red);
	inv = 1.0f / sqrtf(ss / dim + eps);
	for (int j = threadIdx.x; j < dim; j += blockDim.x)
		yr[j] = xr[j] * inv * (add_one ? 1.0f + w[j] : w[j]);
}

/* x += r, y = rmsnorm(x), rows of dim. */
cudaError_t
llm_cuda_add_rmsnorm(float *x, const float *r, const float *w, float *y, int n, int dim, float eps, bool add_one,
					 cudaStream_t st)
{
	int			threads = dim >= 1024 ? 256 : (dim >= 256 ? 128 : 32);

	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(r);
	LLM_CHECK_DEV(w);
	LLM_CHECK_DEV(y);
	if (n < 1)
		return cudaSuccess;
	LLM_LAUNCH(add_rmsnorm_kernel, n, threads, 0, st, x, r, w, y, dim, eps, add_one);
	return cudaGetLastError();
}

/* One (token, frequency k, head) rotation of RoPE; heads past n_heads are x2's. */
__global__ void
rope_kernel(float *x, int n_heads, float *x2, int n_heads2, const int32_t *__restrict__ pos, int n, int head_dim,
			int half, const float *__restrict__ inv_freq, bool neox)
{
	pdl_wait();
	pdl_launch_next();
	int			all = n_heads + n_heads2;
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	int			h;
	int			k;
	int64_t		t;
	float		angle;
	float		c;
	float		s;
	float	   *v;
	int			a;
	int			b;
	float		x0;
	float		x1;

	if (i >= (int64_t) n * half * all)
		return;
	h = (int) (i % all);
	k = (int) ((i / all) % half);
	t = i / ((int64_t) all * half);
	angle = (float) pos[t] * inv_freq[k];
	c = cosf(angle);
	s = sinf(angle);
	v = h < n_heads ? x + ((size_t) t * n_heads + h) * head_dim : x2 + ((size_t) t * n_heads2 + h - n_heads) * head_dim;
	a = neox ? k : 2 * k;
	b = neox ? k + half : 2 * k + 1;
	x0 = v[a];
	x1 = v[b];
	v[a] = x0 * c - x1 * s;
	v[b] = x0 * s + x1 * c;
}

/* Rotate the first rope_dim values of each head of x (and of x2) by pos. */
cudaError_t
llm_cuda_rope(float *x, int n_heads, float *x2, int n_heads2, const int32_t *pos, int n, int head_dim, int rope_dim,
			  const float *inv_freq, bool neox, cudaStream_t st)
{
	int64_t		items = (int64_t) n * (rope_dim / 2) * (n_heads + n_heads2);

	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(x2);
	LLM_CHECK_DEV(pos);
	LLM_CHECK_DEV(inv_freq);
	if (items < 1)
		return cudaSuccess;
	LLM_LAUNCH(rope_kernel, grid_for(items, 256), 256, 0, st, x, n_heads, x2, n_heads2, pos, n, head_dim,
			   rope_dim / 2, inv_freq, neox);
	return cudaGetLastError();
}

/* out = act(gate) * up, element-wise. */
__global__ void
glu_kernel(const float *gate, const float *up, float *out, int64_t n, int act)
{
	pdl_wait();
	pdl_launch_next();
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
	{
		out[i] = gate_act(gate[i], act) * up[i];
	}
}

/* Blocks for an element-wise kernel over n values (grid-stride beyond that). */
static unsigned
elem_blocks(int64_t n)
{
	int64_t		b = (n + 255) / 256;

	return (unsigned) (b > 8192 ? 8192 : (b < 1 ? 1 : b));
}

/* out (n) = act(gate) * up. */
cudaError_t
llm_cuda_glu(const float *gate, const float *up, float *out, int64_t n, int act, cudaStream_t st)
{
	LLM_CHECK_DEV(gate);
	LLM_CHECK_DEV(up);
	LLM_CHECK_DEV(out);
	LLM_LAUNCH(glu_kernel, elem_blocks(n), 256, 0, st, gate, up, out, n, act);
	return cudaGetLastError();
}

/* x += y, element-wise. */
__global__ void
add_kernel(float *x, const float *y, int64_t n)
{
	pdl_wait();
	pdl_launch_next();
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
		x[i] += y[i];
}

/* x (n) += y (n). */
cudaError_t
llm_cuda_add(float *x, const float *y, int64_t n, cudaStream_t st)
{
	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(y);
	LLM_LAUNCH(add_kernel, elem_blocks(n), 256, 0, st, x, y, n);
	return cudaGetLastError();
}

/* x (n, width) += b on every row, element-wise: one add per element, as the reference does it. */
__global__ void
add_bias_kernel(float *x, const float *__restrict__ b, int64_t total, int width)
{
	pdl_wait();
	pdl_launch_next();
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < total;
		 i += (int64_t) gridDim.x * blockDim.x)
		x[i] += b[i % width];
}

/* x (n, width) += b (width) on every row (qwen2's Q/K/V biases). */
cudaError_t
llm_cuda_add_bias(float *x, const float *b, int n, int width, cudaStream_t st)
{
	int64_t		total = (int64_t) n * width;

	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(b);
	if (total < 1)
		return cudaSuccess;
	LLM_LAUNCH(add_bias_kernel, elem_blocks(total), 256, 0, st, x, b, total, width);
	return cudaGetLastError();
}

/* x = cap * tanh(x / cap), element-wise. */
__global__ void
softcap_kernel(float *x, int64_t n, float cap)
{
	pdl_wait();
	pdl_launch_next();
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
		x[i] = cap * tanhf(x[i] / cap);
}

/* x (n) = cap * tanh(x / cap). */
cudaError_t
llm_cuda_softcap(float *x, int64_t n, float cap, cudaStream_t st)
{
	LLM_CHECK_DEV(x);
	LLM_LAUNCH(softcap_kernel, elem_blocks(n), 256, 0, st, x, n, cap);
	return cudaGetLastError();
}

/* Row idx[blockIdx.x] of x to row blockIdx.x of out. */
__global__ void
gather_rows_kernel(const float *__restrict__ x, const int32_t *__restrict__ idx, int width, float *__restrict__ out)
{
	pdl_wait();
	pdl_launch_next();
	const float *src = x + (size_t) idx[blockIdx.x] * width;
	float	   *dst = out + (size_t) blockIdx.x * width;

	for (int j = threadIdx.x; j < width; j += blockDim.x)
		dst[j] = src[j];
}

/* out (n, width) = rows idx[i] of x. */
cudaError_t
llm_cuda_gather_rows(const float *x, const int32_t *idx, int n, int width, float *out, cudaStream_t st)
{
	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(idx);
	LLM_CHECK_DEV(out);
	if (n < 1)
		return cudaSuccess;
	LLM_LAUNCH(gather_rows_kernel, n, 256, 0, st, x, idx, width, out);
	return cudaGetLastError();
}
