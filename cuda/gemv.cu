/*
 * gemv.cu
 *		Matrices times a few vectors, y (n, rows) = x (n, cols) w^T for
 *		n <= CUDA_GEMV_MAX_TOKENS: decode's matmuls, bound by reading the
 *		weights once.
 *
 * Every kernel gives each warp a few whole rows (a "unit") and walks them
 * with coalesced loads, keeping one partial sum per (row, token) in
 * registers, then reduces across the warp with shuffles; the weights are
 * read once for all n tokens (NT, a template bound on n, keeps the
 * accumulators in registers).  One launch (a CudaGemvJob) may cover up to
 * three matrices that share the input -- Q, K and V -- so the small K and V
 * projections ride along with Q instead of each leaving most of the GPU
 * idle for a launch of their own; or a gate and an up matrix, whose warp
 * takes the same rows of both and writes act(gate) * up directly.
 *
 * - Float layouts (F32, F16, BF16): each lane loads 16 bytes of a row at a
 *   time, GEMV_UNROLL loads in flight before the first is used, through the
 *   streaming cache path so that the activations, which every warp re-reads,
 *   stay in L1.  This is the bandwidth-bound kernel of BF16 decode.
 * - Split Q8_0 / Q4_0 (the weights' integers apart from their fp16 scales,
 *   so that they load in aligned 16-byte pieces): the activations are first
 *   quantized to int8 blocks of 32 (quantize_act, as ggml and the CPU
 *   backend do), and the dot products of a block are integer __dp4a's,
 *   scaled once per block; several rows per warp reuse each activation
 *   load.  Q4_0's offset of 8 comes out through the activation block's sum:
 *   sum (q - 8) x = d_x (sum q x_q) - 8 d_x (sum x_q).
 * - Any other ggml type: each lane decodes runs of 32 values (quant.cuh)
 *   and multiplies in float.
 */
#include "common.cuh"
#include "quant.cuh"

#define GEMV_WARPS 8			/* warps per block */
#define GEMV_UNROLL 4			/* 16-byte loads in flight per lane */

/*
 * The rows of one warp: NR of them, from one matrix or (glu) R of the gate
 * and the same R of the up matrix.  Rows past a matrix's end are replaced
 * by a valid one (loads stay in bounds) and not stored.
 */
template <int NR>
struct WarpRows
{
	const uint8_t *p[NR];		/* row start */
	const uint16_t *sc[NR];		/* split layouts: the row's scales */
	int			mat[NR];
	int64_t		row[NR];
	bool		ok[NR];
};

/* This warp's rows under job j with R rows per matrix (NR = R, or 2R with glu); false: no work. */
template <int NR>
static __device__ __forceinline__ bool
warp_rows(const CudaGemvJob &j, WarpRows<NR> &wr)
{
	int64_t		u = (int64_t) blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
	int			m = 0;
	int			r_per = j.glu >= 0 ? NR / 2 : NR;
	int64_t		base;

	if (u >= j.unit0[j.count])
		return false;
	while (m + 1 < j.count && u >= j.unit0[m + 1])
		m++;
	base = (u - j.unit0[m]) * r_per;
#pragma unroll
	for (int r = 0; r < NR; r++)
	{
		int			mat = j.glu >= 0 ? (r < r_per ? 0 : 1) : m;
		int64_t		row = base + (j.glu >= 0 ? r % r_per : r);
		const CudaMat &w = j.w[mat];

		wr.ok[r] = row < w.rows;
		if (!wr.ok[r])
			row = base;
		wr.mat[r] = mat;
		wr.row[r] = row;
		wr.p[r] = w.data + (size_t) row * w.row_bytes;
		wr.sc[r] = w.scales != nullptr ? w.scales + (size_t) row * (w.cols / 32) : nullptr;
	}
	return true;
}

/* Reduce the warp's sums acc (NR rows by NT tokens) and write them (with glu, act(gate) * up and up). */
template <int NT, int NR>
static __device__ __forceinline__ void
gemv_store(const CudaGemvJob &j, const WarpRows<NR> &wr, const float (&acc)[NR][NT], int n)
{
	int			lane = threadIdx.x & 31;
	float		s[NR][NT];

#pragma unroll
	for (int r = 0; r < NR; r++)
#pragma unroll
		for (int t = 0; t < NT; t++)
			s[r][t] = warp_sum(acc[r][t]);
	if (lane != 0)
		return;
#pragma unroll
	for (int t = 0; t < NT; t++)
	{
		if (t >= n)
			break;
		if (j.glu >= 0)
		{
#pragma unroll
			for (int r = 0; r < NR / 2; r++)
				if (wr.ok[r])
				{
					size_t		o = (size_t) t * j.w[0].rows + wr.row[r];
					float		up = s[r + NR / 2][t];

					j.y[0][o] = gate_act(s[r][t], j.glu) * up;
					j.y[1][o] = up;
				}
		}
		else
#pragma unroll
			for (int r = 0; r < NR; r++)
				if (wr.ok[r])
					j.y[wr.mat[r]][(size_t) t * j.w[wr.mat[r]].rows + wr.row[r]] = s[r][t];
	}
}

/* The 4 (F32) or 8 (F16, BF16) values of 16 bytes of a float layout. */
template <int LAYOUT>
static __device__ __forceinline__ void
unpack16(uint4 v, float *f)
{
	uint32_t	w[4] = {v.x, v.y, v.z, v.w};

	if (LAYOUT == CUDA_LAYOUT_F32)
		for (int i = 0; i < 4; i++)
			f[i] = __uint_as_float(w[i]);
	else if (LAYOUT == CUDA_LAYOUT_BF16)
		for (int i = 0; i < 4; i++)
		{
			f[2 * i] = __uint_as_float(w[i] << 16);
			f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
		}
	else
		for (int i = 0; i < 4; i++)
		{
			f[2 * i] = f16_to_f32((uint16_t) (w[i] & 0xffff));
			f[2 * i + 1] = f16_to_f32((uint16_t) (w[i] >> 16));
		}
}

/* acc[r][t] += (the EPV values in w[r]) . (x of token t at vector v), for the warp's NR rows. */
template <int NT, int LAYOUT, int NR>
static __device__ __forceinline__ void
vec_fma(float (&acc)[NR][NT], const uint4 (&w)[NR], const float *__restrict__ x, int64_t cols, int64_t v, int n)
{
	constexpr int EPV = LAYOUT == CUDA_LAYOUT_F32 ? 4 : 8;

#pragma unroll
	for (int t = 0; t < NT; t++)
		if (t < n)
		{
			const float4 *xp = (const float4 *) (x + (size_t) t * cols + v * EPV);
			float		xf[EPV];
			float4		a = xp[0];

			xf[0] = a.x;
			xf[1] = a.y;
			xf[2] = a.z;
			xf[3] = a.w;
			if constexpr (EPV == 8)
			{
				float4		b = xp[1];

				xf[4] = b.x;
				xf[5] = b.y;
				xf[6] = b.z;
				xf[7] = b.w;
			}
#pragma unroll
			for (int r = 0; r < NR; r++)
			{
				float		wf[EPV];
				float		s = 0.0f;

				unpack16<LAYOUT>(w[r], wf);
#pragma unroll
				for (int e = 0; e < EPV; e++)
					s += wf[e] * xf[e];
				acc[r][t] += s;
			}
		}
}

/*
 * Float layouts, 16-byte loads: NR rows per warp.  The main loop issues
 * GEMV_UNROLL loads per row, unconditionally, before using the first; a
 * tail loop takes the rest one at a time.
 */
template <int NT, int LAYOUT, int NR>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_vec(CudaGemvJob j, const float *__restrict__ x, int n)
{
	pdl_wait();
	constexpr int EPV = LAYOUT == CUDA_LAYOUT_F32 ? 4 : 8;	/* values per 16 bytes */
	int			lane = threadIdx.x & 31;
	int64_t		cols = j.w[0].cols;
	int64_t		nv = cols / EPV;
	int64_t		v0 = lane;
	WarpRows<NR> wr;
	float		acc[NR][NT];

	if (!warp_rows(j, wr))
		return;					/* whole warps only: no collective below is missed */
#pragma unroll
	for (int r = 0; r < NR; r++)
#pragma unroll
		for (int t = 0; t < NT; t++)
			acc[r][t] = 0.0f;
	for (; v0 + 32 * (GEMV_UNROLL - 1) < nv; v0 += 32 * GEMV_UNROLL)
	{
		uint4		wv[GEMV_UNROLL][NR];

#pragma unroll
		for (int u = 0; u < GEMV_UNROLL; u++)
#pragma unroll
			for (int r = 0; r < NR; r++)
				wv[u][r] = load_stream16((const uint4 *) wr.p[r] + v0 + 32 * u);
#pragma unroll
		for (int u = 0; u < GEMV_UNROLL; u++)
			vec_fma<NT, LAYOUT, NR>(acc, wv[u], x, cols, v0 + 32 * u, n);
	}
	for (; v0 < nv; v0 += 32)
	{
		uint4		wv[NR];

#pragma unroll
		for (int r = 0; r < NR; r++)
			wv[r] = load_stream16((const uint4 *) wr.p[r] + v0);
		vec_fma<NT, LAYOUT, NR>(acc, wv, x, cols, v0, n);
	}
	pdl_launch_next();
	gemv_store<NT, NR>(j, wr, acc, n);
}

/* Float layouts of any width or alignment, one value per lane at a time. */
template <int NT, int NR>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_scalar(CudaGemvJob j, const float *__restrict__ x, int n)
{
	pdl_wait();
	int			lane = threadIdx.x & 31;
	int			layout = j.w[0].layout;
	int64_t		cols = j.w[0].cols;
	WarpRows<NR> wr;
	float		acc[NR][NT];

	if (!warp_rows(j, wr))
		return;
#pragma unroll
	for (int r = 0; r < NR; r++)
#pragma unroll
		for (int t = 0; t < NT; t++)
			acc[r][t] = 0.0f;
	for (int64_t k = lane; k < cols; k += 32)
#pragma unroll
		for (int r = 0; r < NR; r++)
		{
			float		wv = layout == CUDA_LAYOUT_F32 ? ((const float *) wr.p[r])[k] :
				layout == CUDA_LAYOUT_F16 ? f16_to_f32(((const uint16_t *) wr.p[r])[k]) :
				bf16_to_f32(((const uint16_t *) wr.p[r])[k]);

#pragma unroll
			for (int t = 0; t < NT; t++)
				if (t < n)
					acc[r][t] += wv * x[(size_t) t * cols + k];
		}
	pdl_launch_next();
	gemv_store<NT, NR>(j, wr, acc, n);
}

/* Any ggml block type, decoded 32 values at a time. */
template <int NT, int NR>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_ggml(CudaGemvJob j, const float *__restrict__ x, int n)
{
	pdl_wait();
	int			lane = threadIdx.x & 31;
	int64_t		cols = j.w[0].cols;
	WarpRows<NR> wr;
	float		acc[NR][NT];

	if (!warp_rows(j, wr))
		return;
#pragma unroll
	for (int r = 0; r < NR; r++)
#pragma unroll
		for (int t = 0; t < NT; t++)
			acc[r][t] = 0.0f;
	for (int64_t c = lane; c < cols / 32; c += 32)
#pragma unroll
		for (int r = 0; r < NR; r++)
		{
			float		v[32];

			decode32(j.w[wr.mat[r]], wr.row[r], c, v);
#pragma unroll
			for (int t = 0; t < NT; t++)
				if (t < n)
				{
					const float *xp = x + (size_t) t * cols + c * 32;
					float		s = 0.0f;

					for (int e = 0; e < 32; e++)
						s += v[e] * xp[e];
					acc[r][t] += s;
				}
		}
	pdl_launch_next();
	gemv_store<NT, NR>(j, wr, acc, n);
}

/* Where the parts of n tokens' int8 activations start in xq. */
static __host__ __device__ __forceinline__ void
act_parts(const uint8_t *xq, int n, int64_t cols, const int8_t **q, const float **d, const float **s)
{
	*q = (const int8_t *) xq;
	*d = (const float *) (xq + (size_t) n * cols);
	*s = *d + (size_t) n * (cols / 32);
}

/* Split Q8_0: NR rows per warp, a block of 32 per lane per step, __dp4a on the integers. */
template <int NT, int NR>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_q8(CudaGemvJob j, const uint8_t *__restrict__ xq, int n)
{
	pdl_wait();
	int			lane = threadIdx.x & 31;
	int64_t		cols = j.w[0].cols;
	int64_t		nb = cols / 32;
	const int8_t *aq;
	const float *ad;
	const float *as;
	WarpRows<NR> wr;
	float		acc[NR][NT];

	if (!warp_rows(j, wr))
		return;
	act_parts(xq, n, cols, &aq, &ad, &as);
	(void) as;
#pragma unroll
	for (int r = 0; r < NR; r++)
#pragma unroll
		for (int t = 0; t < NT; t++)
			acc[r][t] = 0.0f;
	for (int64_t b = lane; b < nb; b += 32)
	{
		uint4		wq[NR][2];
		float		wd[NR];

#pragma unroll
		for (int r = 0; r < NR; r++)
		{
			wq[r][0] = load_stream16(wr.p[r] + b * 32);
			wq[r][1] = load_stream16(wr.p[r] + b * 32 + 16);
			wd[r] = f16_to_f32(wr.sc[r][b]);
		}
#pragma unroll
		for (int t = 0; t < NT; t++)
			if (t < n)
			{
				const uint8_t *xp = (const uint8_t *) (aq + (size_t) t * cols + b * 32);
				uint4		x0 = load_ro16(xp);
				uint4		x1 = load_ro16(xp + 16);
				float		dx = ad[(size_t) t * nb + b];

#pragma unroll
				for (int r = 0; r < NR; r++)
				{
					int			s = 0;

					s = __dp4a((int) wq[r][0].x, (int) x0.x, s);
					s = __dp4a((int) wq[r][0].y, (int) x0.y, s);
					s = __dp4a((int) wq[r][0].z, (int) x0.z, s);
					s = __dp4a((int) wq[r][0].w, (int) x0.w, s);
					s = __dp4a((int) wq[r][1].x, (int) x1.x, s);
					s = __dp4a((int) wq[r][1].y, (int) x1.y, s);
					s = __dp4a((int) wq[r][1].z, (int) x1.z, s);
					s = __dp4a((int) wq[r][1].w, (int) x1.w, s);
					acc[r][t] += wd[r] * dx * (float) s;
				}
			}
	}
	pdl_launch_next();
	gemv_store<NT, NR>(j, wr, acc, n);
}

/* The low nibbles of four bytes (values j of a Q4_0 block), as bytes. */
static __device__ __forceinline__ int
nib_lo(uint32_t v)
{
	return (int) (v & 0x0f0f0f0fu);
}

/* The high nibbles of four bytes (values j + 16), as bytes. */
static __device__ __forceinline__ int
nib_hi(uint32_t v)
{
	return (int) ((v >> 4) & 0x0f0f0f0fu);
}

/* Split Q4_0: NR rows per warp, a block of 32 per lane per step. */
template <int NT, int NR>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_q4(CudaGemvJob j, const uint8_t *__restrict__ xq, int n)
{
	pdl_wait();
	int			lane = threadIdx.x & 31;
	int64_t		cols = j.w[0].cols;
	int64_t		nb = cols / 32;
	const int8_t *aq;
	const float *ad;
	const float *as;
	WarpRows<NR> wr;
	float		acc[NR][NT];

	if (!warp_rows(j, wr))
		return;
	act_parts(xq, n, cols, &aq, &ad, &as);
#pragma unroll
	for (int r = 0; r < NR; r++)
#pragma unroll
		for (int t = 0; t < NT; t++)
			acc[r][t] = 0.0f;
	for (int64_t b = lane; b < nb; b += 32)
	{
		uint4		wq[NR];
		float		wd[NR];

#pragma unroll
		for (int r = 0; r < NR; r++)
		{
			wq[r] = load_stream16(wr.p[r] + b * 16);
			wd[r] = f16_to_f32(wr.sc[r][b]);
		}
#pragma unroll
		for (int t = 0; t < NT; t++)
			if (t < n)
			{
				const uint8_t *xp = (const uint8_t *) (aq + (size_t) t * cols + b * 32);
				uint4		x0 = load_ro16(xp);
				uint4		x1 = load_ro16(xp + 16);
				float		dx = ad[(size_t) t * nb + b];
				float		sx = as[(size_t) t * nb + b];

#pragma unroll
				for (int r = 0; r < NR; r++)
				{
					int			s = 0;

					s = __dp4a(nib_lo(wq[r].x), (int) x0.x, s);
					s = __dp4a(nib_lo(wq[r].y), (int) x0.y, s);
					s = __dp4a(nib_lo(wq[r].z), (int) x0.z, s);
					s = __dp4a(nib_lo(wq[r].w), (int) x0.w, s);
					s = __dp4a(nib_hi(wq[r].x), (int) x1.x, s);
					s = __dp4a(nib_hi(wq[r].y), (int) x1.y, s);
					s = __dp4a(nib_hi(wq[r].z), (int) x1.z, s);
					s = __dp4a(nib_hi(wq[r].w), (int) x1.w, s);
					acc[r][t] += wd[r] * (dx * (float) s - 8.0f * sx);
				}
			}
	}
	pdl_launch_next();
	gemv_store<NT, NR>(j, wr, acc, n);
}

/*
 * One block of 32 activations to int8: d = amax / 127, q = round(x / d); a
 * block holding NaN or infinity gets d = NaN, so the NaN reaches y.
 */
__global__ void
quantize_act_kernel(const float *__restrict__ x, int n, int64_t cols, uint8_t *__restrict__ xq)
{
	pdl_wait();
	pdl_launch_next();
	int64_t		nb = cols / 32;
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	const int8_t *q_;
	const float *d_;
	const float *s_;
	const float *xp;
	float		v[32];
	float		amax = 0.0f;
	bool		bad = false;
	float		d;
	float		id;
	int			sum = 0;
	uint32_t	packed[8];

	if (i >= (int64_t) n * nb)
		return;
	act_parts(xq, n, cols, &q_, &d_, &s_);
	xp = x + (i / nb) * cols + (i % nb) * 32;
	for (int k = 0; k < 8; k++)
	{
		float4		a = ((const float4 *) xp)[k];

		v[4 * k] = a.x;
		v[4 * k + 1] = a.y;
		v[4 * k + 2] = a.z;
		v[4 * k + 3] = a.w;
	}
	for (int j = 0; j < 32; j++)
	{
		amax = fmaxf(amax, fabsf(v[j]));
		bad = bad || !(fabsf(v[j]) <= 3.0e38f);
	}
	d = amax / 127.0f;
	id = d != 0.0f ? 1.0f / d : 0.0f;
	for (int k = 0; k < 8; k++)
	{
		uint32_t	word = 0;

		for (int j = 0; j < 4; j++)
		{
			int			q = bad ? 0 : (int) rintf(v[4 * k + j] * id);

			q = q > 127 ? 127 : (q < -127 ? -127 : q);
			sum += q;
			word |= (uint32_t) (uint8_t) (int8_t) q << (8 * j);
		}
		packed[k] = word;
	}
	if (bad)
		d = __int_as_float(0x7fc00000);
	{
		uint4	   *dst = (uint4 *) (q_ + (i / nb) * cols + (i % nb) * 32);

		dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
		dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
	}
	((float *) d_)[i] = d;
	((float *) s_)[i] = d * (float) sum;
}

/* Bytes of the int8 activations of n tokens of cols values (quants, scales, sums). */
size_t
llm_cuda_act_q8_bytes(int n, int64_t cols)
{
	return (size_t) n * cols + 2 * sizeof(float) * (size_t) n * (cols / 32);
}

/* Quantize x (n, cols) to int8 blocks for gemv_q8 / gemv_q4 (x 16-byte aligned). */
cudaError_t
llm_cuda_quantize_act(const float *x, int n, int64_t cols, void *xq, cudaStream_t st)
{
	int64_t		blocks = (int64_t) n * (cols / 32);

	if (cols % 32 != 0 || (uintptr_t) x % 16 != 0)
		return cudaErrorInvalidValue;
	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(xq);
	LLM_LAUNCH(quantize_act_kernel, grid_for(blocks, 128), 128, 0, st, x, n, cols, (uint8_t *) xq);
	return cudaGetLastError();
}

/* Whether a GEMV kernel takes w. */
bool
llm_cuda_gemv_supported(const CudaMat *w)
{
	switch (w->layout)
	{
		case CUDA_LAYOUT_F32:
		case CUDA_LAYOUT_F16:
		case CUDA_LAYOUT_BF16:
			return true;
		case CUDA_LAYOUT_Q8_0R:
		case CUDA_LAYOUT_Q4_0R:
			return w->cols % 32 == 0;
		default:
			return ggml_block_values(w->ggml_type) > 0 && w->cols % ggml_block_values(w->ggml_type) == 0;
	}
}

/* Whether a and b can share a launch. */
bool
llm_cuda_gemv_compatible(const CudaMat *a, const CudaMat *b)
{
	return a->layout == b->layout && a->cols == b->cols &&
		(a->layout != CUDA_LAYOUT_GGML || a->ggml_type == b->ggml_type) &&
		((uintptr_t) a->data % 16 == 0) == ((uintptr_t) b->data % 16 == 0) && a->row_bytes % 16 == b->row_bytes % 16;
}

/* The kernels' shapes. */
enum GemvKind
{
	GEMV_VEC,
	GEMV_SCALAR,
	GEMV_Q8,
	GEMV_Q4,
	GEMV_GGML
};

/* Launch kernel kind with NR rows per warp for at most NT tokens. */
template <int NT, int NR>
static void
gemv_kind(int kind, const CudaGemvJob &j, const float *x, const uint8_t *xq, int n, unsigned blocks,
		  cudaStream_t st)
{
	/* only the shapes llm_cuda_gemv picks are instantiated: Q8 by pairs, Q4 by fours, the rest by 1 or 2 */
	if constexpr (NR == 2)
		if (kind == GEMV_Q8)
		{
			LLM_LAUNCH(LLM_K(gemv_q8<NT, NR>), blocks, GEMV_WARPS * 32, 0, st, j, xq, n);
			return;
		}
	if constexpr (NR == 4)
		if (kind == GEMV_Q4)
		{
			LLM_LAUNCH(LLM_K(gemv_q4<NT, NR>), blocks, GEMV_WARPS * 32, 0, st, j, xq, n);
			return;
		}
	if constexpr (NR <= 2)
		switch (kind)
		{
			case GEMV_VEC:
				if (j.w[0].layout == CUDA_LAYOUT_F32)
					LLM_LAUNCH(LLM_K(gemv_vec<NT, CUDA_LAYOUT_F32, NR>), blocks, GEMV_WARPS * 32, 0, st, j, x, n);
				else if (j.w[0].layout == CUDA_LAYOUT_F16)
					LLM_LAUNCH(LLM_K(gemv_vec<NT, CUDA_LAYOUT_F16, NR>), blocks, GEMV_WARPS * 32, 0, st, j, x, n);
				else
					LLM_LAUNCH(LLM_K(gemv_vec<NT, CUDA_LAYOUT_BF16, NR>), blocks, GEMV_WARPS * 32, 0, st, j, x, n);
				break;
			case GEMV_SCALAR:
				LLM_LAUNCH(LLM_K(gemv_scalar<NT, NR>), blocks, GEMV_WARPS * 32, 0, st, j, x, n);
				break;
			case GEMV_GGML:
				LLM_LAUNCH(LLM_K(gemv_ggml<NT, NR>), blocks, GEMV_WARPS * 32, 0, st, j, x, n);
				break;
			default:
				break;
		}
}

/* Launch with the rows per warp of kind (doubled for a gate/up pair). */
template <int NT>
static void
gemv_rows(int kind, int r_per, const CudaGemvJob &j, const float *x, const uint8_t *xq, int n, unsigned blocks,
		  cudaStream_t st)
{
	int			nr = j.glu >= 0 ? 2 * r_per : r_per;

	if (nr == 1)
		gemv_kind<NT, 1>(kind, j, x, xq, n, blocks, st);
	else if (nr == 2)
		gemv_kind<NT, 2>(kind, j, x, xq, n, blocks, st);
	else
		gemv_kind<NT, 4>(kind, j, x, xq, n, blocks, st);
}

/* Run job for n <= CUDA_GEMV_MAX_TOKENS tokens. */
cudaError_t
llm_cuda_gemv(const CudaGemvJob *job, const float *x, const void *xq, int n, cudaStream_t st)
{
	CudaGemvJob j = *job;
	const CudaMat &w = j.w[0];
	bool		aligned = ((uintptr_t) w.data % 16) == 0 && w.row_bytes % 16 == 0 && ((uintptr_t) x % 16) == 0;
	int			kind;
	int			r_per;			/* rows per warp of each matrix */
	unsigned	blocks;

	if (n < 1 || n > CUDA_GEMV_MAX_TOKENS || j.count < 1 || j.count > CUDA_GEMV_MAX_MATS ||
		(j.glu >= 0 && (j.count != 2 || j.w[1].rows != w.rows)))
		return cudaErrorInvalidValue;
	for (int m = 0; m < j.count; m++)
	{
		if (!llm_cuda_gemv_supported(&j.w[m]) || !llm_cuda_gemv_compatible(&w, &j.w[m]))
			return cudaErrorInvalidValue;
		LLM_CHECK_DEV(j.w[m].data);
		LLM_CHECK_DEV(j.w[m].scales);
		LLM_CHECK_DEV(j.y[m]);
	}
	LLM_CHECK_DEV(x);
	LLM_CHECK_DEV(xq);
	switch (w.layout)
	{
		case CUDA_LAYOUT_F32:
			kind = aligned && w.cols % 4 == 0 ? GEMV_VEC : GEMV_SCALAR;
			r_per = 1;
			break;
		case CUDA_LAYOUT_F16:
		case CUDA_LAYOUT_BF16:
			kind = aligned && w.cols % 8 == 0 ? GEMV_VEC : GEMV_SCALAR;
			r_per = 1;
			break;
		case CUDA_LAYOUT_Q8_0R:
			kind = GEMV_Q8;
			r_per = j.glu >= 0 ? 1 : 2;
			break;
		case CUDA_LAYOUT_Q4_0R:
			kind = GEMV_Q4;
			r_per = j.glu >= 0 ? 2 : 4;
			break;
		default:
			kind = GEMV_GGML;
			r_per = 1;
			break;
	}
	if ((kind == GEMV_Q8 || kind == GEMV_Q4) && xq == nullptr)
		return cudaErrorInvalidValue;
	/* warp units: r_per rows of one matrix (of the gate and the up matrix with glu) */
	j.unit0[0] = 0;
	for (int m = 0; m < j.count; m++)
		j.unit0[m + 1] = j.unit0[m] + (j.glu >= 0 && m == 1 ? 0 : (j.w[m].rows + r_per - 1) / r_per);
	blocks = grid_for(j.unit0[j.count], GEMV_WARPS);
	if (n == 1)
		gemv_rows<1>(kind, r_per, j, x, (const uint8_t *) xq, n, blocks, st);
	else if (n == 2)
		gemv_rows<2>(kind, r_per, j, x, (const uint8_t *) xq, n, blocks, st);
	else if (n <= 4)
		gemv_rows<4>(kind, r_per, j, x, (const uint8_t *) xq, n, blocks, st);
	else
		gemv_rows<8>(kind, r_per, j, x, (const uint8_t *) xq, n, blocks, st);
	return cudaGetLastError();
}
