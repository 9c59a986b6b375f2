/*
 * attention.cu
 *		Fused attention over the paged KV cache (the device twin of
 *		cpu/attention.c, same semantics: GQA, soft cap, sliding window with
 *		slot_pos masking after eviction, F32 / F16 / INT8 keys and values,
 *		H2O score sums).
 *
 * Two kernels share the online softmax (Milakov & Gimelshein 2018; Dao et
 * al. 2022): keys and values come through the sequence's block table a tile
 * of 32 slots at a time into shared memory (converted to float, INT8 times
 * its scale), scores for the tile, then the running maximum m, sum l and
 * accumulator are rescaled and the tile's values added.
 *
 * - Decode (one query token, all query heads of one KV head per block) is
 *   split-K flash decoding (Dao et al. 2023): the token's visible slots are
 *   cut into n_splits ranges, one block each, so a few long sequences
 *   still fill the GPU; each range leaves (m, l, acc) and a combine kernel
 *   merges them, weighting each by exp(m_s - M).
 * - Prefill (a tile of consecutive tokens of one sequence, all query heads
 *   of one KV head per block) loads each key tile once for every row of the
 *   tile -- a (token, head) pair -- with each warp owning a few rows: lane j
 *   scores key j of the tile against the warp's rows, the warp's shuffles
 *   give the row's maximum and sum, and each lane then accumulates its
 *   columns of the values.  Rows mask keys outside their own visible range
 *   (the causal mask within the tile).
 *
 * H2O: with ml set, both kernels leave each (token, head)'s final m and l,
 * and a third kernel recomputes every visible key's scores to sum
 * exp(s - m) / l over the run's tokens and the group's heads, one thread per
 * key slot; the host adds these sums to the sequences' scores after the
 * step, where cpu/attention.c adds the same probabilities one by one.
 */
#include "common.cuh"

#define ATTN_T 32				/* key slots per tile (one per lane) */
#define DEC_THREADS 128
#define PF_THREADS 256
#define PF_WARPS (PF_THREADS / 32)
#define SCORE_THREADS 128
#define ATTN_MAX_SMEM (64 * 1024)	/* the most any instance asks for: within sm_75's limit */

/* The slots token i sees, as cpu/attention.c's visible_slots. */
struct Visible
{
	int			lo;
	int			hi;
	bool		mask;			/* check positions against the window (after an eviction) */
	int			win_lo;			/* first position inside the window */
	int			spos_off;		/* the token's rows in a.spos */
};

/* What token i sees. */
static __device__ __forceinline__ Visible
visible(const CudaAttn &a, int i)
{
	const int32_t *t = a.tok + (size_t) i * CUDA_TOK_FIELDS;
	int			pos = t[CUDA_TOK_POS];
	Visible		v;

	v.lo = 0;
	v.hi = t[CUDA_TOK_SLOT];
	v.mask = false;
	v.win_lo = pos - a.window + 1;
	v.spos_off = a.spos_off != nullptr ? a.spos_off[i] : -1;
	if (a.window > 0 && v.win_lo > 0)
	{
		if (t[CUDA_TOK_EVICTED] == 0)
			v.lo = v.win_lo;
		else
			v.mask = v.spos_off >= 0;
	}
	return v;
}

/* Score of a key from its dot product: scale, soft cap, window mask. */
static __device__ __forceinline__ float
transform(const CudaAttn &a, const Visible &v, float dot, int slot, int g)
{
	float		s = dot * a.scale;

	if (a.softcap > 0.0f)
		s = a.softcap * tanhf(s / a.softcap);
	if (v.mask && a.spos[v.spos_off + (size_t) slot * a.n_kv_heads + g] < v.win_lo)
		s = -INFINITY;
	return s;
}

/* Row of slot in the pool for a token of the sequence whose facts are t. */
static __device__ __forceinline__ int64_t
slot_row(const CudaAttn &a, const int32_t *t, int slot)
{
	int64_t		blk = a.blocks[t[CUDA_TOK_TABLE] + slot / a.kv.block_size];

	return ((int64_t) a.layer * a.kv.n_blocks + blk) * a.kv.block_size + slot % a.kv.block_size;
}

/* Stored value d of a head vector at p (before an INT8 scale). */
static __device__ __forceinline__ float
kv_value(const uint8_t *p, int d, int type)
{
	if (type == 0)
		return ((const float *) p)[d];
	if (type == 1)
		return f16_to_f32(((const uint16_t *) p)[d]);
	return (float) ((const int8_t *) p)[d];
}

/*
 * Load into tile (ATTN_T rows of ld floats) head g's keys or values (base:
 * kv.k or kv.v, scales: kv.k_scale or kv.v_scale) of slots s0 .. s0 + count
 * - 1 of the sequence of token facts t; rows past count are zeros.  Every
 * thread of the block takes part.
 */
static __device__ void
load_tile(const CudaAttn &a, const uint8_t *base, const float *scales, const int32_t *t, int g, int s0,
		  int count, float *tile, int ld)
{
	const CudaKv &kv = a.kv;
	int			hd = kv.head_dim;
	int			es = kv.elem_size;

	if ((hd * es) % 16 == 0)
	{
		int			cpk = hd * es / 16;	/* 16-byte pieces per head vector */
		int			vpc = 16 / es;	/* values per piece */

		for (int c = threadIdx.x; c < ATTN_T * cpk; c += blockDim.x)
		{
			int			jj = c / cpk;
			int			part = c % cpk;
			float	   *dst = tile + jj * ld + part * vpc;

			if (jj < count)
			{
				int64_t		row = slot_row(a, t, s0 + jj);
				uint4		raw = load_ro16(base + ((size_t) row * kv.kv_dim + (size_t) g * hd) * es + part * 16);
				float		sc = kv.type == 2 ? scales[(size_t) row * kv.n_kv_heads + g] : 1.0f;
				const uint8_t *b = (const uint8_t *) &raw;

				for (int e = 0; e < vpc; e++)
					dst[e] = kv_value(b, e, kv.type) * sc;
			}
			else
				for (int e = 0; e < vpc; e++)
					dst[e] = 0.0f;
		}
	}
	else
		for (int c = threadIdx.x; c < ATTN_T * hd; c += blockDim.x)
		{
			int			jj = c / hd;
			int			d = c % hd;

			if (jj < count)
			{
				int64_t		row = slot_row(a, t, s0 + jj);
				float		sc = kv.type == 2 ? scales[(size_t) row * kv.n_kv_heads + g] : 1.0f;

				tile[jj * ld + d] = kv_value(base + ((size_t) row * kv.kv_dim + (size_t) g * hd) * es, d, kv.type) * sc;
			}
			else
				tile[jj * ld + d] = 0.0f;
		}
}

/* Shared memory of the decode kernel for a group of heads of width hd. */
static size_t
dec_smem(int group, int hd)
{
	return sizeof(float) * ((size_t) group * hd + (size_t) ATTN_T * (hd + 1) + (size_t) group * ATTN_T + 3 * group);
}

/*
 * Split-K decode: block (token dec[x / n_kv_heads], KV head x % n_kv_heads,
 * range blockIdx.y).  Thread t accumulates outputs t, t + 128, ... of the
 * group's (head, dim) pairs: P of them.
 */
template <int P>
__global__ void __launch_bounds__(DEC_THREADS)
attn_decode_kernel(CudaAttn a)
{
	pdl_wait();
	LLM_DYN_SMEM(smem);
	int			hd = a.head_dim;
	int			group = a.n_heads / a.n_kv_heads;
	int			ld = hd + 1;
	float	   *qs = (float *) smem;	/* (group, hd) */
	float	   *kvt = qs + group * hd;	/* (ATTN_T, ld) */
	float	   *ss = kvt + ATTN_T * ld; /* (group, ATTN_T) scores, then weights */
	float	   *ms = ss + group * ATTN_T;	/* (group) running max */
	float	   *ls = ms + group;	/* (group) running sum */
	float	   *cs = ls + group;	/* (group) this tile's correction */
	int			di = blockIdx.x / a.n_kv_heads;
	int			g = blockIdx.x % a.n_kv_heads;
	int			split = blockIdx.y;
	int			i = a.dec[di];
	const int32_t *t = a.tok + (size_t) i * CUDA_TOK_FIELDS;
	Visible		vis = visible(a, i);
	int			chunk = (vis.hi - vis.lo + 1 + a.n_splits - 1) / a.n_splits;
	int			k0 = vis.lo + split * chunk;
	int			k1 = imin(vis.hi, k0 + chunk - 1);
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;
	float		acc[P];

	for (int idx = threadIdx.x; idx < group * hd; idx += DEC_THREADS)
		qs[idx] = a.q[((size_t) i * a.n_heads + (size_t) g * group) * hd + idx];
	for (int gi = threadIdx.x; gi < group; gi += DEC_THREADS)
	{
		ms[gi] = -INFINITY;
		ls[gi] = 0.0f;
	}
#pragma unroll
	for (int p = 0; p < P; p++)
		acc[p] = 0.0f;
	__syncthreads();

	for (int s0 = k0; s0 <= k1; s0 += ATTN_T)
	{
		int			cnt = imin(ATTN_T, k1 - s0 + 1);

		/* this tile's scores */
		load_tile(a, a.kv.k, a.kv.k_scale, t, g, s0, cnt, kvt, ld);
		__syncthreads();
		for (int idx = threadIdx.x; idx < group * ATTN_T; idx += DEC_THREADS)
		{
			int			gi = idx / ATTN_T;
			int			jj = idx % ATTN_T;
			float		s = -INFINITY;

			if (jj < cnt)
			{
				float		dot = 0.0f;

				for (int d = 0; d < hd; d++)
					dot += qs[gi * hd + d] * kvt[jj * ld + d];
				s = transform(a, vis, dot, s0 + jj, g);
			}
			ss[idx] = s;
		}
		__syncthreads();

		/* online softmax, a warp per head: new maximum, weights, rescaled sum */
		for (int gi = warp; gi < group; gi += DEC_THREADS / 32)
		{
			float		s = ss[gi * ATTN_T + lane];
			float		m_old = ms[gi];
			float		m_new = fmaxf(m_old, warp_max(s));
			float		p = m_new == -INFINITY ? 0.0f : expf(s - m_new);
			float		corr = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
			float		psum = warp_sum(p);

			ss[gi * ATTN_T + lane] = p;
			__syncwarp();		/* every lane has read ms[gi] and ls[gi] */
			if (lane == 0)
			{
				ls[gi] = ls[gi] * corr + psum;
				ms[gi] = m_new;
				cs[gi] = corr;
			}
		}
		__syncthreads();

		/* the tile's values, weighted */
		load_tile(a, a.kv.v, a.kv.v_scale, t, g, s0, cnt, kvt, ld);
		__syncthreads();
#pragma unroll
		for (int p = 0; p < P; p++)
		{
			int			idx = threadIdx.x + p * DEC_THREADS;

			if (idx < group * hd)
			{
				int			gi = idx / hd;
				int			d = idx % hd;
				float		sum = 0.0f;

				for (int jj = 0; jj < cnt; jj++)
					sum += ss[gi * ATTN_T + jj] * kvt[jj * ld + d];
				acc[p] = acc[p] * cs[gi] + sum;
			}
		}
		__syncthreads();
	}

	pdl_launch_next();

	/* the result, or this range's part of it */
#pragma unroll
	for (int p = 0; p < P; p++)
	{
		int			idx = threadIdx.x + p * DEC_THREADS;

		if (idx < group * hd)
		{
			int			gi = idx / hd;
			int			d = idx % hd;
			int			h = g * group + gi;

			if (a.n_splits == 1)
			{
				a.out[((size_t) i * a.n_heads + h) * hd + d] = acc[p] / ls[gi];
				if (a.ml != nullptr && d == 0)
				{
					a.ml[((size_t) i * a.n_heads + h) * 2] = ms[gi];
					a.ml[((size_t) i * a.n_heads + h) * 2 + 1] = ls[gi];
				}
			}
			else
			{
				float	   *pp = a.part + (((size_t) di * a.n_heads + h) * a.n_splits + split) * (hd + 2);

				pp[d] = acc[p];
				if (d == 0)
				{
					pp[hd] = ms[gi];
					pp[hd + 1] = ls[gi];
				}
			}
		}
	}
}

/* Merge the split ranges of (token dec[x / n_heads], head x % n_heads). */
__global__ void
attn_combine_kernel(CudaAttn a)
{
	pdl_wait();
	pdl_launch_next();
	int			hd = a.head_dim;
	int			di = blockIdx.x / a.n_heads;
	int			h = blockIdx.x % a.n_heads;
	int			i = a.dec[di];
	const float *pp = a.part + ((size_t) di * a.n_heads + h) * a.n_splits * (hd + 2);
	float		m = -INFINITY;
	float		l = 0.0f;

	for (int s = 0; s < a.n_splits; s++)
		m = fmaxf(m, pp[s * (hd + 2) + hd]);
	for (int s = 0; s < a.n_splits; s++)
	{
		float		ms = pp[s * (hd + 2) + hd];

		if (ms != -INFINITY)
			l += expf(ms - m) * pp[s * (hd + 2) + hd + 1];
	}
	for (int d = threadIdx.x; d < hd; d += blockDim.x)
	{
		float		o = 0.0f;

		for (int s = 0; s < a.n_splits; s++)
		{
			float		ms = pp[s * (hd + 2) + hd];

			if (ms != -INFINITY)
				o += expf(ms - m) * pp[s * (hd + 2) + d];
		}
		a.out[((size_t) i * a.n_heads + h) * hd + d] = o / l;
	}
	if (a.ml != nullptr && threadIdx.x == 0)
	{
		a.ml[((size_t) i * a.n_heads + h) * 2] = m;
		a.ml[((size_t) i * a.n_heads + h) * 2 + 1] = l;
	}
}

/* Rows (token, head pairs) a prefill tile holds: 8 warps of RW rows. */
template <int DK>
struct PrefillShape
{
	static const int RW = DK >= 8 ? 2 : 4;	/* rows per warp */
	static const int ROWS = PF_WARPS * RW;
};

/* Shared memory of the prefill kernel for head width hd and ROWS rows. */
static size_t
pf_smem(int rows, int hd)
{
	return sizeof(float) * ((size_t) rows * hd + (size_t) ATTN_T * (hd + 1) + (size_t) rows * ATTN_T);
}

/*
 * Prefill: block (tile blockIdx.x of consecutive tokens of one sequence, KV
 * head blockIdx.y).  Row r is token first + r / group, head g * group + r %
 * group; warp w owns rows w, w + 8, ...; lane j scores key j of a tile and
 * accumulates dims j, j + 32, ... (DK of them, head_dim <= 32 DK).
 */
template <int DK>
__global__ void __launch_bounds__(PF_THREADS)
attn_prefill_kernel(CudaAttn a)
{
	pdl_wait();
	constexpr int RW = PrefillShape<DK>::RW;
	constexpr int ROWS = PrefillShape<DK>::ROWS;
	LLM_DYN_SMEM(smem);
	int			hd = a.head_dim;
	int			group = a.n_heads / a.n_kv_heads;
	int			ld = hd + 1;
	float	   *qs = (float *) smem;	/* (ROWS, hd) */
	float	   *kvt = qs + ROWS * hd;	/* (ATTN_T, ld) */
	float	   *ps = kvt + ATTN_T * ld; /* (ROWS, ATTN_T) weights */
	int			first = a.tiles[blockIdx.x * 2];
	int			count = a.tiles[blockIdx.x * 2 + 1];
	int			g = blockIdx.y;
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;
	const int32_t *t0 = a.tok + (size_t) first * CUDA_TOK_FIELDS;
	int			n_rows = count * group;
	int			lo_min = 0x7fffffff;
	int			hi_max = -1;
	Visible		vis[RW];
	float		m[RW];
	float		l[RW];
	float		corr[RW];
	float		acc[RW][DK];

	/* the tile's queries, each row's view, the union of the rows' slots */
	for (int idx = threadIdx.x; idx < ROWS * hd; idx += PF_THREADS)
	{
		int			r = idx / hd;
		int			d = idx % hd;

		qs[idx] = r < n_rows ?
			a.q[((size_t) (first + r / group) * a.n_heads + (size_t) g * group + r % group) * hd + d] : 0.0f;
	}
	for (int k = 0; k < count; k++)
	{
		Visible		v = visible(a, first + k);

		lo_min = imin(lo_min, v.lo);
		hi_max = imax(hi_max, v.hi);
	}
#pragma unroll
	for (int k = 0; k < RW; k++)
	{
		int			r = warp + PF_WARPS * k;

		vis[k] = visible(a, first + (r < n_rows ? r / group : 0));
		m[k] = -INFINITY;
		l[k] = 0.0f;
		corr[k] = 1.0f;
#pragma unroll
		for (int kd = 0; kd < DK; kd++)
			acc[k][kd] = 0.0f;
	}
	__syncthreads();

	for (int s0 = lo_min; s0 <= hi_max; s0 += ATTN_T)
	{
		int			cnt = imin(ATTN_T, hi_max - s0 + 1);
		int			slot = s0 + lane;

		/* scores of key lane against the warp's rows, and each row's online softmax */
		load_tile(a, a.kv.k, a.kv.k_scale, t0, g, s0, cnt, kvt, ld);
		__syncthreads();
#pragma unroll
		for (int k = 0; k < RW; k++)
		{
			int			r = warp + PF_WARPS * k;
			float		s = -INFINITY;
			float		m_new;
			float		p;

			if (r < n_rows && lane < cnt && slot >= vis[k].lo && slot <= vis[k].hi)
			{
				float		dot = 0.0f;

				for (int d = 0; d < hd; d++)
					dot += qs[r * hd + d] * kvt[lane * ld + d];
				s = transform(a, vis[k], dot, slot, g);
			}
			m_new = fmaxf(m[k], warp_max(s));
			p = m_new == -INFINITY ? 0.0f : expf(s - m_new);
			corr[k] = m_new == -INFINITY ? 1.0f : expf(m[k] - m_new);
			l[k] = l[k] * corr[k] + warp_sum(p);
			m[k] = m_new;
			ps[r * ATTN_T + lane] = p;
		}
		__syncthreads();

		/* the tile's values into each row's accumulator */
		load_tile(a, a.kv.v, a.kv.v_scale, t0, g, s0, cnt, kvt, ld);
		__syncthreads();
#pragma unroll
		for (int k = 0; k < RW; k++)
		{
			int			r = warp + PF_WARPS * k;

#pragma unroll
			for (int kd = 0; kd < DK; kd++)
			{
				int			d = lane + 32 * kd;
				float		sum = 0.0f;

				if (d < hd)
					for (int jj = 0; jj < cnt; jj++)
						sum += ps[r * ATTN_T + jj] * kvt[jj * ld + d];
				acc[k][kd] = acc[k][kd] * corr[k] + sum;
			}
		}
		__syncthreads();
	}

	pdl_launch_next();
#pragma unroll
	for (int k = 0; k < RW; k++)
	{
		int			r = warp + PF_WARPS * k;
		int			i = first + r / group;
		int			h = g * group + r % group;

		if (r >= n_rows)
			continue;
#pragma unroll
		for (int kd = 0; kd < DK; kd++)
		{
			int			d = lane + 32 * kd;

			if (d < hd)
				a.out[((size_t) i * a.n_heads + h) * hd + d] = acc[k][kd] / l[k];
		}
		if (a.ml != nullptr && lane == 0)
		{
			a.ml[((size_t) i * a.n_heads + h) * 2] = m[k];
			a.ml[((size_t) i * a.n_heads + h) * 2 + 1] = l[k];
		}
	}
}

/*
 * H2O sums: thread per slot j of run blockIdx.z, KV head blockIdx.y: the
 * softmax probability of key j summed over the run's tokens and the group's
 * query heads (0 where no token sees it).
 */
__global__ void
attn_scores_kernel(CudaAttn a)
{
	pdl_wait();
	pdl_launch_next();
	const int32_t *run = a.runs + (size_t) blockIdx.z * 4;
	int			first = run[0];
	int			count = run[1];
	int			width = run[3];
	int			g = blockIdx.y;
	int			j = blockIdx.x * blockDim.x + threadIdx.x;
	int			hd = a.head_dim;
	int			group = a.n_heads / a.n_kv_heads;
	const int32_t *t0 = a.tok + (size_t) first * CUDA_TOK_FIELDS;
	const uint8_t *kp;
	float		ks;
	float		sum = 0.0f;

	if (j >= width)
		return;
	{
		int64_t		row = slot_row(a, t0, j);

		kp = a.kv.k + ((size_t) row * a.kv.kv_dim + (size_t) g * hd) * a.kv.elem_size;
		ks = a.kv.type == 2 ? a.kv.k_scale[(size_t) row * a.n_kv_heads + g] : 1.0f;
	}
	for (int k = 0; k < count; k++)
	{
		int			i = first + k;
		Visible		vis = visible(a, i);

		if (j < vis.lo || j > vis.hi)
			continue;
		for (int gi = 0; gi < group; gi++)
		{
			int			h = g * group + gi;
			const float *q = a.q + ((size_t) i * a.n_heads + h) * hd;
			const float *ml = a.ml + ((size_t) i * a.n_heads + h) * 2;
			float		dot = 0.0f;
			float		s;

			for (int d = 0; d < hd; d++)
				dot += q[d] * (kv_value(kp, d, a.kv.type) * ks);
			s = transform(a, vis, dot, j, g);
			if (s != -INFINITY)
				sum += expf(s - ml[0]) / ml[1];
		}
	}
	a.delta[run[2] + (size_t) g * width + j] = sum;
}

/* Rows per prefill block for head width hd (0: too wide). */
static int
pf_rows(int hd)
{
	return hd <= 64 ? PrefillShape<2>::ROWS : hd <= 128 ? PrefillShape<4>::ROWS : hd <= 256 ? PrefillShape<8>::ROWS : 0;
}

/* Tokens per prefill tile for a group of query heads per KV head (0: use the decode kernel). */
int
llm_cuda_attn_tile_tokens(int group, int head_dim)
{
	int			rows = pf_rows(head_dim);

	return group >= 1 && rows >= group ? rows / group : 0;
}

/* Accumulators per decode thread for a group of heads of width hd: a power of two, 0 if too many. */
static int
dec_regs(int group, int hd)
{
	int			need = (group * hd + DEC_THREADS - 1) / DEC_THREADS;
	int			p = 1;

	while (p < need)
		p *= 2;
	return p <= 32 ? p : 0;
}

/* Whether the kernels take this head width and group. */
bool
llm_cuda_attn_supported(int head_dim, int group)
{
	return head_dim >= 1 && head_dim <= 256 && group >= 1 && dec_regs(group, head_dim) > 0 &&
		dec_smem(group, head_dim) <= ATTN_MAX_SMEM;
}

/* Allow every attention kernel its shared memory. */
cudaError_t
llm_cuda_attn_init(void)
{
#ifndef LLM_CUDA_EMU
	const void *kernels[] = {
		(const void *) attn_decode_kernel<1>, (const void *) attn_decode_kernel<2>,
		(const void *) attn_decode_kernel<4>, (const void *) attn_decode_kernel<8>,
		(const void *) attn_decode_kernel<16>, (const void *) attn_decode_kernel<32>,
		(const void *) attn_prefill_kernel<2>, (const void *) attn_prefill_kernel<4>,
		(const void *) attn_prefill_kernel<8>,
	};

	for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++)
	{
		cudaError_t e = cudaFuncSetAttribute(kernels[k], cudaFuncAttributeMaxDynamicSharedMemorySize,
											 ATTN_MAX_SMEM);

		if (e != cudaSuccess)
			return e;
	}
#endif
	return cudaSuccess;
}

/* Launch the decode kernel with P accumulators per thread. */
static void
launch_decode(const CudaAttn &a, int p, size_t smem, cudaStream_t st)
{
	dim3		grid(a.n_dec * a.n_kv_heads, a.n_splits);

	switch (p)
	{
		case 1:
			LLM_LAUNCH(attn_decode_kernel<1>, grid, DEC_THREADS, smem, st, a);
			break;
		case 2:
			LLM_LAUNCH(attn_decode_kernel<2>, grid, DEC_THREADS, smem, st, a);
			break;
		case 4:
			LLM_LAUNCH(attn_decode_kernel<4>, grid, DEC_THREADS, smem, st, a);
			break;
		case 8:
			LLM_LAUNCH(attn_decode_kernel<8>, grid, DEC_THREADS, smem, st, a);
			break;
		case 16:
			LLM_LAUNCH(attn_decode_kernel<16>, grid, DEC_THREADS, smem, st, a);
			break;
		default:
			LLM_LAUNCH(attn_decode_kernel<32>, grid, DEC_THREADS, smem, st, a);
			break;
	}
}

/* One layer's attention: decode and prefill kernels, the split combine, the H2O sums. */
cudaError_t
llm_cuda_attention(const CudaAttn *a, cudaStream_t st)
{
	int			group = a->n_heads / a->n_kv_heads;
	int			hd = a->head_dim;
	cudaError_t e;

	if (!llm_cuda_attn_supported(hd, group))
		return cudaErrorInvalidValue;
	LLM_CHECK_DEV(a->kv.k);
	LLM_CHECK_DEV(a->kv.v);
	LLM_CHECK_DEV(a->kv.k_scale);
	LLM_CHECK_DEV(a->kv.v_scale);
	LLM_CHECK_DEV(a->q);
	LLM_CHECK_DEV(a->out);
	LLM_CHECK_DEV(a->tok);
	LLM_CHECK_DEV(a->blocks);
	LLM_CHECK_DEV(a->spos_off);
	LLM_CHECK_DEV(a->spos);
	LLM_CHECK_DEV(a->dec);
	LLM_CHECK_DEV(a->part);
	LLM_CHECK_DEV(a->tiles);
	LLM_CHECK_DEV(a->ml);
	LLM_CHECK_DEV(a->runs);
	LLM_CHECK_DEV(a->delta);
	if (a->n_dec > 0)
	{
		launch_decode(*a, dec_regs(group, hd), dec_smem(group, hd), st);
		if ((e = cudaGetLastError()) != cudaSuccess)
			return e;
		if (a->n_splits > 1)
		{
			LLM_LAUNCH(attn_combine_kernel, a->n_dec * a->n_heads, 128, 0, st, *a);
			if ((e = cudaGetLastError()) != cudaSuccess)
				return e;
		}
	}
	if (a->n_tiles > 0)
	{
		dim3		grid(a->n_tiles, a->n_kv_heads);

		if (hd <= 64)
			LLM_LAUNCH(attn_prefill_kernel<2>, grid, PF_THREADS, pf_smem(pf_rows(hd), hd), st, *a);
		else if (hd <= 128)
			LLM_LAUNCH(attn_prefill_kernel<4>, grid, PF_THREADS, pf_smem(pf_rows(hd), hd), st, *a);
		else
			LLM_LAUNCH(attn_prefill_kernel<8>, grid, PF_THREADS, pf_smem(pf_rows(hd), hd), st, *a);
		if ((e = cudaGetLastError()) != cudaSuccess)
			return e;
	}
	if (a->ml != nullptr && a->n_runs > 0)
	{
		dim3		grid(grid_for(a->max_width, SCORE_THREADS), a->n_kv_heads, a->n_runs);

		LLM_LAUNCH(attn_scores_kernel, grid, SCORE_THREADS, 0, st, *a);
		if ((e = cudaGetLastError()) != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}
