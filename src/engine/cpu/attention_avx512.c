/*
 * attention_avx512.c
 *		AVX-512 vector kernels of attention (see cpu/attention.h): 16 floats
 *		a step, f16 keys and values widened with vcvtph2ps, int8 ones with
 *		vpmovsxbd, the tail masked.
 */
#include "cpu/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,f16c,fma")
#endif

#include <immintrin.h>

#include <math.h>
#include <string.h>

#include "cpu/exp_avx512.h"

/* 16 stored values from p + d (f32, f16 or int8), masked to the first n. */
static inline __attribute__((always_inline)) __m512
load16(const void *p, int d, int n, LlmKvType type)
{
	__mmask16	m = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);

	if (type == LLM_KV_F32)
		return _mm512_maskz_loadu_ps(m, (const float *) p + d);
	if (type == LLM_KV_F16)
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *) p + d));
	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, (const int8_t *) p + d)));
}

#define SLICES 8				/* 16-float slices of a head kept in registers at once (128 floats) */

#define KERN static inline __attribute__((always_inline))

/*
 * The sum of a's 16 lanes by halving: lanes i + (i + 8), then + 4, then
 * + 2, then + 1 (the tree of GCC's _mm512_reduce_add_ps, written out so
 * that every compiler gives these bits).
 */
KERN float
sum16(__m512 a)
{
	__m256		h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
	__m128		q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));

	q = _mm_add_ps(q, _mm_permute_ps(q, _MM_SHUFFLE(1, 0, 3, 2)));
	return _mm_cvtss_f32(_mm_add_ps(q, _mm_permute_ps(q, _MM_SHUFFLE(2, 3, 0, 1))));
}

/* sum16 of a[0..3] as the four lanes of one vector: the same tree, so the same bits, in 14 instructions, not 28. */
KERN __m128
sum16x4_lanes(const __m512 *a)
{
	/* halves: a0 and a1 in one vector, a2 and a3 in another (lanes i + (i + 8)) */
	__m512		s01 = _mm512_add_ps(_mm512_shuffle_f32x4(a[0], a[1], _MM_SHUFFLE(1, 0, 1, 0)),
									_mm512_shuffle_f32x4(a[0], a[1], _MM_SHUFFLE(3, 2, 3, 2)));
	__m512		s23 = _mm512_add_ps(_mm512_shuffle_f32x4(a[2], a[3], _MM_SHUFFLE(1, 0, 1, 0)),
									_mm512_shuffle_f32x4(a[2], a[3], _MM_SHUFFLE(3, 2, 3, 2)));
	/* quarters: 128-bit lane u holds a_u's lanes i + (i + 4) */
	__m512		t = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
								  _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));

	t = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
	t = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
	return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
																		 12, 8, 4, 0), t));
}

/* sum16 of a[0..3] into s[0..3] (sum16x4_lanes). */
KERN void
sum16x4(const __m512 *a, float *s)
{
	_mm_storeu_ps(s, sum16x4_lanes(a));
}

/*
 * s_j = q . k_j: per key, 16 lanes of FMAs over the head in order, then
 * sum16.  Four keys at a time, so four independent chains hide the FMA
 * latency, summed by sum16x4; each key's operations are those of one key
 * alone.  Inlined for each storage type, so the chains stay in registers.
 */
KERN void
scores_typed(const float *q, const uint8_t *k, size_t stride, int nt, int hd, const LlmKvType type, float *s)
{
	int			j = 0;

	for (; j + 4 <= nt; j += 4)
	{
		__m512		sum[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};

#pragma GCC unroll 16
		for (int d = 0; d < hd; d += 16)
		{
			__m512		qv = load16(q, d, hd - d, LLM_KV_F32);

#pragma GCC unroll 4
			for (int u = 0; u < 4; u++)
				sum[u] = _mm512_fmadd_ps(qv, load16(k + (size_t) (j + u) * stride, d, hd - d, type), sum[u]);
		}
		sum16x4(sum, s + j);
	}
	for (; j < nt; j++)
	{
		__m512		sum = _mm512_setzero_ps();

		for (int d = 0; d < hd; d += 16)
			sum = _mm512_fmadd_ps(load16(q, d, hd - d, LLM_KV_F32), load16(k + (size_t) j * stride, d, hd - d, type), sum);
		s[j] = sum16(sum);
	}
}

/*
 * Call F(HD) with HD the head width hd as a constant for the usual widths
 * (64, 128, 256), so the kernels' loops over a head unroll with no masks;
 * the same operations in the same order as with hd at run time.
 */
#define WITH_HEAD_WIDTH(hd, F) \
	do { \
		if ((hd) == 64) \
			F(64); \
		else if ((hd) == 128) \
			F(128); \
		else if ((hd) == 256) \
			F(256); \
		else \
			F(hd); \
	} while (0)

/*
 * The dot products of NQ heads (q: NQ rows of HD floats) with the four keys
 * kp[0..3] (HD values of type each), as 16-lane partial sums: sum[h][u]
 * for head h and key u, each key's slice widened once for all the heads.
 */
KERN void
dot4_heads(const float *q, const uint8_t *const *kp, const int HD, const LlmKvType type, const int NQ,
		   __m512 (*sum)[4])
{
	__m512		acc[4][4];		/* in registers: sum may be the caller's memory */

#pragma GCC unroll 4
	for (int h = 0; h < NQ; h++)
#pragma GCC unroll 4
		for (int u = 0; u < 4; u++)
			acc[h][u] = _mm512_setzero_ps();
#pragma GCC unroll 16
	for (int d = 0; d < HD; d += 16)
	{
		__m512		kv[4];

#pragma GCC unroll 4
		for (int u = 0; u < 4; u++)
			kv[u] = load16(kp[u], d, HD - d, type);
#pragma GCC unroll 4
		for (int h = 0; h < NQ; h++)
		{
			__m512		qv = load16(q + (size_t) h * HD, d, HD - d, LLM_KV_F32);

#pragma GCC unroll 4
			for (int u = 0; u < 4; u++)
				acc[h][u] = _mm512_fmadd_ps(qv, kv[u], acc[h][u]);
		}
	}
#pragma GCC unroll 4
	for (int h = 0; h < NQ; h++)
#pragma GCC unroll 4
		for (int u = 0; u < 4; u++)
			sum[h][u] = acc[h][u];
}

/*
 * scores_typed for NQ heads (q: NQ rows of hd) against the same keys, into
 * s (NQ, nt): each key's slice widened once for the NQ heads, and each
 * head's FMAs and sums those scores_typed gives it.
 */
KERN void
scores_heads_typed(const float *q, const uint8_t *k, size_t stride, int nt, int hd, const LlmKvType type, float *s,
				   const int NQ)
{
	int			j = 0;

	for (; j + 4 <= nt; j += 4)
	{
		const uint8_t *kp[4] = {k + (size_t) j * stride, k + (size_t) (j + 1) * stride,
		k + (size_t) (j + 2) * stride, k + (size_t) (j + 3) * stride};
		__m512		sum[4][4];

		dot4_heads(q, kp, hd, type, NQ, sum);
#pragma GCC unroll 4
		for (int h = 0; h < NQ; h++)
			sum16x4(sum[h], s + (size_t) h * nt + j);
	}
	for (; j < nt; j++)
	{
		__m512		sum[4];

#pragma GCC unroll 4
		for (int h = 0; h < NQ; h++)
			sum[h] = _mm512_setzero_ps();
		for (int d = 0; d < hd; d += 16)
		{
			__m512		kv = load16(k + (size_t) j * stride, d, hd - d, type);

#pragma GCC unroll 4
			for (int h = 0; h < NQ; h++)
				sum[h] = _mm512_fmadd_ps(load16(q + (size_t) h * hd, d, hd - d, LLM_KV_F32), kv, sum[h]);
		}
#pragma GCC unroll 4
		for (int h = 0; h < NQ; h++)
			s[(size_t) h * nt + j] = sum16(sum[h]);
	}
}

/* scores_heads_typed for nq (1 to LLM_ATTN_MAX_HEADS) heads; one head: scores_typed. */
KERN void
scores_heads_nq(const float *q, int nq, const uint8_t *k, size_t stride, int nt, int hd, const LlmKvType type, float *s)
{
	if (nq == 4)
		scores_heads_typed(q, k, stride, nt, hd, type, s, 4);
	else if (nq == 3)
		scores_heads_typed(q, k, stride, nt, hd, type, s, 3);
	else if (nq == 2)
		scores_heads_typed(q, k, stride, nt, hd, type, s, 2);
	else
		scores_typed(q, k, stride, nt, hd, type, s);
}

/* scores_heads_nq for one storage type, the usual head widths as constants. */
KERN void
scores_heads_type(const float *q, int nq, const uint8_t *k, size_t stride, int nt, int hd, const LlmKvType type, float *s)
{
#define SCORES(HD) scores_heads_nq(q, nq, k, stride, nt, HD, type, s)
	WITH_HEAD_WIDTH(hd, SCORES);
#undef SCORES
}

/* s (nq, nt) = q_h . k_j for nq heads, each as avx512_scores gives it. */
static void
avx512_scores_heads(const float *q, int nq, const uint8_t *k, size_t stride, int nt, int hd, LlmKvType type, float *s)
{
	if (type == LLM_KV_F32)
		scores_heads_type(q, nq, k, stride, nt, hd, LLM_KV_F32, s);
	else if (type == LLM_KV_F16)
		scores_heads_type(q, nq, k, stride, nt, hd, LLM_KV_F16, s);
	else
		scores_heads_type(q, nq, k, stride, nt, hd, LLM_KV_I8, s);
}

/* s_j = q . k_j: avx512_scores_heads for one head. */
static void
avx512_scores(const float *q, const uint8_t *k, size_t stride, int nt, int hd, LlmKvType type, float *s)
{
	avx512_scores_heads(q, 1, k, stride, nt, hd, type, s);
}

/* acc *= c. */
static void
avx512_scale(float *acc, float c, int hd)
{
	__m512		vc = _mm512_set1_ps(c);

	for (int d = 0; d < hd; d += 16)
	{
		int			n = hd - d;
		__mmask16	m = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);

		_mm512_mask_storeu_ps(acc + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + d), vc));
	}
}

/*
 * acc += sum_j w_j v_j: up to SLICES 16-float slices of acc in registers,
 * the keys in order for each (so each element adds w_j v_j[d] in order of
 * j, whatever the head's width), the slices' chains independent.  Inlined
 * for each storage type and slice count, so the slices stay in registers.
 */
KERN void
accum_slices(float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd, int d0,
			 const LlmKvType type, const int ns)
{
	__m512		a[SLICES];

#pragma GCC unroll 8
	for (int u = 0; u < ns; u++)
		a[u] = load16(acc, d0 + 16 * u, hd - d0 - 16 * u, LLM_KV_F32);
	for (int j = 0; j < nt; j++)
	{
		__m512		wj = _mm512_set1_ps(w[j]);
		const uint8_t *vj = v + (size_t) j * stride;

#pragma GCC unroll 8
		for (int u = 0; u < ns; u++)
			a[u] = _mm512_fmadd_ps(wj, load16(vj, d0 + 16 * u, hd - d0 - 16 * u, type), a[u]);
	}
#pragma GCC unroll 8
	for (int u = 0; u < ns; u++)
	{
		int			n = hd - d0 - 16 * u;

		_mm512_mask_storeu_ps(acc + d0 + 16 * u, n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1), a[u]);
	}
}

/* accum_slices over the head, SLICES at a time, for one storage type. */
KERN void
accum_typed(float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd, const LlmKvType type)
{
	for (int d0 = 0; d0 < hd; d0 += 16 * SLICES)
	{
		int			ns = (hd - d0 + 15) / 16 < SLICES ? (hd - d0 + 15) / 16 : SLICES;

		/* the usual heads: 64 (4 slices), 128 and more (8); other widths by the general count */
		if (ns == 4)
			accum_slices(acc, w, v, stride, nt, hd, d0, type, 4);
		else if (ns == SLICES)
			accum_slices(acc, w, v, stride, nt, hd, d0, type, SLICES);
		else
			for (int u = 0; u < ns; u++)
				accum_slices(acc, w, v, stride, nt, hd, d0 + 16 * u, type, 1);
	}
}

/*
 * accum_slices for NQ heads (acc and w: NQ rows) against the same values:
 * NS slices of each head in registers, each value slice widened once for
 * the NQ heads; each element adds w_j v_j[d] in order of j, as alone.
 */
KERN void
accum_heads_slices(float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd, int d0,
				   const LlmKvType type, const int NQ, const int NS)
{
	__m512		a[4][4];

#pragma GCC unroll 4
	for (int h = 0; h < NQ; h++)
#pragma GCC unroll 4
		for (int u = 0; u < NS; u++)
			a[h][u] = load16(acc + (size_t) h * hd, d0 + 16 * u, hd - d0 - 16 * u, LLM_KV_F32);
	for (int j = 0; j < nt; j++)
	{
		const uint8_t *vj = v + (size_t) j * stride;
		__m512		vv[4];

#pragma GCC unroll 4
		for (int u = 0; u < NS; u++)
			vv[u] = load16(vj, d0 + 16 * u, hd - d0 - 16 * u, type);
#pragma GCC unroll 4
		for (int h = 0; h < NQ; h++)
		{
			__m512		wj = _mm512_set1_ps(w[(size_t) h * nt + j]);

#pragma GCC unroll 4
			for (int u = 0; u < NS; u++)
				a[h][u] = _mm512_fmadd_ps(wj, vv[u], a[h][u]);
		}
	}
#pragma GCC unroll 4
	for (int h = 0; h < NQ; h++)
#pragma GCC unroll 4
		for (int u = 0; u < NS; u++)
		{
			int			n = hd - d0 - 16 * u;

			_mm512_mask_storeu_ps(acc + (size_t) h * hd + d0 + 16 * u,
								  n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1), a[h][u]);
		}
}

/* accum_heads_slices over the head for NQ heads: 4 slices at a time, then one. */
KERN void
accum_heads_typed(float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd, const LlmKvType type,
				  const int NQ)
{
	int			d0 = 0;

	for (; d0 + 64 <= hd; d0 += 64)
		accum_heads_slices(acc, w, v, stride, nt, hd, d0, type, NQ, 4);
	for (; d0 < hd; d0 += 16)
		accum_heads_slices(acc, w, v, stride, nt, hd, d0, type, NQ, 1);
}

/* accum_heads_typed for nq (1 to LLM_ATTN_MAX_HEADS) heads; one head: accum_typed. */
KERN void
accum_heads_nq(float *acc, int nq, const float *w, const uint8_t *v, size_t stride, int nt, int hd,
			   const LlmKvType type)
{
	if (nq == 4)
		accum_heads_typed(acc, w, v, stride, nt, hd, type, 4);
	else if (nq == 3)
		accum_heads_typed(acc, w, v, stride, nt, hd, type, 3);
	else if (nq == 2)
		accum_heads_typed(acc, w, v, stride, nt, hd, type, 2);
	else
		accum_typed(acc, w, v, stride, nt, hd, type);
}

/* accum_heads_nq for one storage type, the usual head widths as constants. */
KERN void
accum_heads_type(float *acc, int nq, const float *w, const uint8_t *v, size_t stride, int nt, int hd,
				 const LlmKvType type)
{
#define ACCUM(HD) accum_heads_nq(acc, nq, w, v, stride, nt, HD, type)
	WITH_HEAD_WIDTH(hd, ACCUM);
#undef ACCUM
}

/* acc (nq, hd) += sum_j w[h * nt + j] v_j for nq heads, each as avx512_accum gives it. */
static void
avx512_accum_heads(float *acc, int nq, const float *w, const uint8_t *v, size_t stride, int nt, int hd, LlmKvType type)
{
	if (type == LLM_KV_F32)
		accum_heads_type(acc, nq, w, v, stride, nt, hd, LLM_KV_F32);
	else if (type == LLM_KV_F16)
		accum_heads_type(acc, nq, w, v, stride, nt, hd, LLM_KV_F16);
	else
		accum_heads_type(acc, nq, w, v, stride, nt, hd, LLM_KV_I8);
}

/* acc += sum_j w_j v_j: avx512_accum_heads for one head. */
static void
avx512_accum(float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd, LlmKvType type)
{
	avx512_accum_heads(acc, 1, w, v, stride, nt, hd, type);
}

/* s_j = exp(s_j - m), 16 at a time (the tail masked); their sum, lanes then _mm512_reduce_add_ps. */
static float
avx512_exp_sum(float *s, int nt, float m)
{
	__m512		vm = _mm512_set1_ps(m);
	__m512		sum = _mm512_setzero_ps();

	for (int j = 0; j < nt; j += 16)
	{
		int			n = nt - j;
		__mmask16	mk = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);
		__m512		e = llm_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), vm));

		e = _mm512_maskz_mov_ps(mk, e);
		_mm512_mask_storeu_ps(s + j, mk, e);
		sum = _mm512_add_ps(sum, e);
	}
	return _mm512_reduce_add_ps(sum);
}

/*
 * The fused tile (LlmAttnKernels.tile): the steps attention.c takes with
 * the kernels above, with the same operations in the same order, but the
 * scores kept in vectors from the dot products to the weights, the
 * rescaling of the accumulators folded into the pass that adds the values,
 * and no call between the steps.  Each key's dot product is scores_heads'
 * (FMAs over the head in order, the sum16 tree, four keys at a time), the
 * maximum is exact whatever its order, exp_sum's vectors and sum are
 * these, and every accumulator element adds w_j v_j[d] in order of j
 * after its one multiplication by the correction: so the bits are those
 * of the steps, which test_attention checks.
 */

/* Ask for the n bytes from p, a cache line at a time (the line of the last byte too, where p is not aligned). */
KERN void
prefetch_bytes(const uint8_t *p, const size_t n)
{
#pragma GCC unroll 16
	for (size_t b = 0; b < n; b += 64)
		_mm_prefetch((const char *) p + b, _MM_HINT_T0);
	_mm_prefetch((const char *) p + n - 1, _MM_HINT_T0);
}

/*
 * The NQ heads' scores of the 16 keys from j0 into sv[h] (lane u: key
 * j0 + u); lanes at or past nt are left 0 and a group of four keys that
 * runs past nt reads key j0 again for the missing ones, so nothing past
 * the tile is read.
 */
KERN void
tile_scores16(const LlmAttnTile *t, int j0, const int HD, const LlmKvType type, const int NQ, __m512 *sv)
{
#pragma GCC unroll 4
	for (int h = 0; h < NQ; h++)
		sv[h] = _mm512_setzero_ps();
#pragma GCC unroll 1
	for (int g = 0; g < 4; g++)
	{
		const uint8_t *kp[4];
		__m512		sum[4][4];

		if (j0 + 4 * g >= t->nt)
			break;
#pragma GCC unroll 4
		for (int u = 0; u < 4; u++)
		{
			int			j = j0 + 4 * g + u;

			kp[u] = t->k + (size_t) (j < t->nt ? j : j0) * t->stride;
			/* the next tile's key j, spread over this tile's work rather than asked for at once */
			if (j < t->next_nt)
				prefetch_bytes(t->next_k + (size_t) j * t->stride, (size_t) HD * (type == LLM_KV_F32 ? 4 : type == LLM_KV_F16 ? 2 : 1));
		}
		dot4_heads(t->q, kp, HD, type, NQ, sum);
#pragma GCC unroll 4
		for (int h = 0; h < NQ; h++)
			sv[h] = _mm512_mask_broadcast_f32x4(sv[h], (__mmask16) (0xfu << (4 * g)), sum16x4_lanes(sum[h]));
	}
}

/* INT8: the scales of the (up to 16) slots from j0 of lanes m, from p (slot j's at p[j * stride]). */
KERN __m512
tile_slot_scales(const float *p, size_t stride, int j0, __mmask16 m)
{
	__m512i		idx = _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32(j0),
														  _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
																		   3, 2, 1, 0)),
										 _mm512_set1_epi32((int) stride));

	return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, p, 4);
}

/*
 * The accumulators of the NQ heads, slices [d0, d0 + 16 NS) of each: times
 * corr[h], then plus w[h][j] v_j for every slot j in order.
 */
KERN void
tile_accum_slices(const LlmAttnTile *t, LlmAttnHead *hs, const float *corr, const float (*w)[LLM_ATTN_TILE],
				  int d0, const int HD, const LlmKvType type, const int NQ, const int NS)
{
	__m512		a[4][4];

#pragma GCC unroll 4
	for (int h = 0; h < NQ; h++)
#pragma GCC unroll 4
		for (int u = 0; u < NS; u++)
			a[h][u] = _mm512_mul_ps(load16(hs[h].acc, d0 + 16 * u, HD - d0 - 16 * u, LLM_KV_F32),
									_mm512_set1_ps(corr[h]));
	for (int j = 0; j < t->nt; j++)
	{
		const uint8_t *vj = t->v + (size_t) j * t->stride;
		__m512		vv[4];

		if (d0 == 0 && j < t->next_nt)
			prefetch_bytes(t->next_v + (size_t) j * t->stride, (size_t) HD * (type == LLM_KV_F32 ? 4 : type == LLM_KV_F16 ? 2 : 1));

#pragma GCC unroll 4
		for (int u = 0; u < NS; u++)
			vv[u] = load16(vj, d0 + 16 * u, HD - d0 - 16 * u, type);
#pragma GCC unroll 4
		for (int h = 0; h < NQ; h++)
		{
			__m512		wj = _mm512_set1_ps(w[h][j]);

#pragma GCC unroll 4
			for (int u = 0; u < NS; u++)
				a[h][u] = _mm512_fmadd_ps(wj, vv[u], a[h][u]);
		}
	}
#pragma GCC unroll 4
	for (int h = 0; h < NQ; h++)
#pragma GCC unroll 4
		for (int u = 0; u < NS; u++)
		{
			int			n = HD - d0 - 16 * u;

			_mm512_mask_storeu_ps(hs[h].acc + d0 + 16 * u, n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1),
								  a[h][u]);
		}
}

/*
 * The fused tile for NQ heads of width HD and one storage type.  A head
 * whose every slot so far is masked is left as it is: its weights are 0
 * and its correction 1, which leave its accumulators (all +0) as they are.
 */
KERN void
tile_typed(const LlmAttnTile *t, LlmAttnHead *hs, const int HD, const LlmKvType type, const int NQ)
{
	__m512		sc[LLM_ATTN_MAX_HEADS][LLM_ATTN_TILE / 16];	/* (head, chunk of 16 slots) scaled scores */
	float		w[LLM_ATTN_MAX_HEADS][LLM_ATTN_TILE] __attribute__((aligned(64)));	/* (head, slot) weights */
	float		corr[LLM_ATTN_MAX_HEADS];
	int			n_chunks = (t->nt + 15) / 16;

	for (int c = 0; c < n_chunks; c++)
	{
		int			n = t->nt - 16 * c;
		__mmask16	valid = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);
		__mmask16	keep = valid & (__mmask16) ~(t->masked >> (16 * c));
		__m512		sv[4];
		__m512		ks = _mm512_setzero_ps();

		tile_scores16(t, 16 * c, HD, type, NQ, sv);
		if (type == LLM_KV_I8)
			ks = tile_slot_scales(t->k_scale, t->scale_stride, 16 * c, valid);
#pragma GCC unroll 4
		for (int h = 0; h < NQ; h++)
		{
			__m512		x = sv[h];

			if (type == LLM_KV_I8)
				x = _mm512_mul_ps(x, ks);
			x = _mm512_mul_ps(x, _mm512_set1_ps(t->scale));
			if (t->softcap > 0.0f)
			{
				float		f[16];

				_mm512_storeu_ps(f, x);
				for (int j = 0; j < n && j < 16; j++)
					f[j] = t->softcap * tanhf(f[j] / t->softcap);
				x = _mm512_loadu_ps(f);
			}
			sc[h][c] = _mm512_mask_blend_ps(keep, _mm512_set1_ps(-INFINITY), x);
		}
	}
#pragma GCC unroll 4
	for (int h = 0; h < NQ; h++)
	{
		__m512		mx = _mm512_set1_ps(-INFINITY);
		float		m_new;
		__m512		vm,
					sum = _mm512_setzero_ps();

		for (int c = 0; c < n_chunks; c++)
			mx = _mm512_max_ps(mx, sc[h][c]);
		m_new = _mm512_reduce_max_ps(mx);
		if (hs[h].m > m_new)
			m_new = hs[h].m;
		if (m_new == -INFINITY)
		{
			/* every slot so far masked: nothing to add */
			corr[h] = 1.0f;
			memset(w[h], 0, sizeof(w[h]));
			continue;
		}
		/* rescale what was accumulated under the old maximum (the accumulators: in tile_accum_slices) */
		corr[h] = expf(hs[h].m - m_new);
		hs[h].l *= corr[h];
		hs[h].m = m_new;
		/* this tile's weights: exp_sum's */
		vm = _mm512_set1_ps(m_new);
		for (int c = 0; c < n_chunks; c++)
		{
			int			n = t->nt - 16 * c;
			__mmask16	valid = n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1);
			__m512		e = _mm512_maskz_mov_ps(valid, llm_exp16(_mm512_sub_ps(sc[h][c], vm)));

			sum = _mm512_add_ps(sum, e);
			if (type == LLM_KV_I8)
				e = _mm512_mul_ps(e, tile_slot_scales(t->v_scale, t->scale_stride, 16 * c, valid));
			_mm512_store_ps(w[h] + 16 * c, e);
		}
		hs[h].l += _mm512_reduce_add_ps(sum);
	}
	{
		int			d0 = 0;

		for (; d0 + 64 <= HD; d0 += 64)
			tile_accum_slices(t, hs, corr, (const float (*)[LLM_ATTN_TILE]) w, d0, HD, type, NQ, 4);
		for (; d0 < HD; d0 += 16)
			tile_accum_slices(t, hs, corr, (const float (*)[LLM_ATTN_TILE]) w, d0, HD, type, NQ, 1);
	}
}

/* tile_typed for nq (1 to LLM_ATTN_MAX_HEADS) heads. */
KERN void
tile_nq(const LlmAttnTile *t, LlmAttnHead *hs, const int HD, const LlmKvType type)
{
	if (t->nq == 4)
		tile_typed(t, hs, HD, type, 4);
	else if (t->nq == 3)
		tile_typed(t, hs, HD, type, 3);
	else if (t->nq == 2)
		tile_typed(t, hs, HD, type, 2);
	else
		tile_typed(t, hs, HD, type, 1);
}

/* tile_nq for one storage type, the usual head widths as constants. */
KERN void
tile_type(const LlmAttnTile *t, LlmAttnHead *hs, const LlmKvType type)
{
#define TILE(HD) tile_nq(t, hs, HD, type)
	WITH_HEAD_WIDTH(t->hd, TILE);
#undef TILE
}

/* One tile of attention for nq heads, fused (see above). */
static void
avx512_tile(const LlmAttnTile *t, LlmAttnHead *hs)
{
	if (t->type == LLM_KV_F32)
		tile_type(t, hs, LLM_KV_F32);
	else if (t->type == LLM_KV_F16)
		tile_type(t, hs, LLM_KV_F16);
	else
		tile_type(t, hs, LLM_KV_I8);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const LlmAttnKernels llm_attn_kernels_avx512 = {"avx512", avx512_scores, avx512_scale, avx512_accum, avx512_exp_sum,
	avx512_scores_heads, avx512_accum_heads, avx512_tile};

#else

const LlmAttnKernels llm_attn_kernels_avx512 = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

#endif
