/*
 * attention.h
 *		Fused attention over the paged KV cache for the CPU backend: one
 *		algorithm (tiled online softmax, cpu/attention.c) over small vector
 *		kernels chosen per SIMD level.
 */
#ifndef LLM_CPU_ATTENTION_H
#define LLM_CPU_ATTENTION_H

#include "backend.h"

/* Stored KV value i at p (in the cache's type; int8 before its scale) as a float. */
static inline float
llm_kv_value(const void *p, int i, LlmKvType type)
{
	if (type == LLM_KV_F32)
		return ((const float *) p)[i];
	if (type == LLM_KV_F16)
		return llm_fp16_to_fp32(((const uint16_t *) p)[i]);
	return (float) ((const int8_t *) p)[i];
}

/*
 * The vector work of attention for one head over a run of nt consecutive
 * slots of one KV block: key/value j (hd values in the cache's type)
 * starts stride bytes after key/value j - 1.  INT8 values are used as they
 * are stored; the caller applies their scales (to the scores, and to the
 * weights before accumulating values).
 */
#define LLM_ATTN_MAX_HEADS 4		/* query heads scores_heads and accum_heads take at once */
#define LLM_ATTN_TILE 64			/* slots of one KV block taken at once, at most */

/* One query head's online-softmax state over the slots seen so far. */
typedef struct LlmAttnHead
{
	float		m;				/* the largest scaled score (-infinity: none yet) */
	float		l;				/* sum of exp(s - m) */
	float	   *acc;			/* (hd) sum of exp(s - m) * v */
} LlmAttnHead;

/*
 * A tile for the fused kernel: nt slots of one KV block against the nq
 * query heads of one KV head.  INT8 keys and values carry their scales
 * (key j's at k_scale[j * scale_stride]); masked slots (bit j) lie outside
 * a sliding window and take no weight.
 */
typedef struct LlmAttnTile
{
	const float *q;				/* (nq, hd) the heads' queries */
	int			nq;				/* 1 .. LLM_ATTN_MAX_HEADS */
	int			hd;
	const uint8_t *k;			/* key j: hd values of type at k + j * stride */
	const uint8_t *v;			/* value j: at v + j * stride */
	size_t		stride;
	int			nt;				/* 1 .. LLM_ATTN_TILE */
	LlmKvType	type;
	const float *k_scale;		/* LLM_KV_I8 only */
	const float *v_scale;
	size_t		scale_stride;
	float		scale;			/* multiplies q . k */
	float		softcap;		/* 0: off */
	uint64_t	masked;			/* bit j: slot j takes no weight */
	/* the same heads' keys and values in the next tile, to prefetch as this one is read (next_nt 0: none) */
	const uint8_t *next_k;
	const uint8_t *next_v;
	int			next_nt;
} LlmAttnTile;

typedef struct LlmAttnKernels
{
	const char *name;
	/* s (nt) = q (hd) . k_j */
	void		(*scores) (const float *q, const uint8_t *k, size_t stride, int nt, int hd,
						   LlmKvType type, float *s);
	/* acc (hd) *= c */
	void		(*scale) (float *acc, float c, int hd);
	/* acc (hd) += sum_j w_j * v_j */
	void		(*accum) (float *acc, const float *w, const uint8_t *v, size_t stride, int nt, int hd,
						  LlmKvType type);
	/* s_j = exp(s_j - m) for j < nt (s_j -infinity: exactly 0); returns their sum */
	float		(*exp_sum) (float *s, int nt, float m);

	/*
	 * Optional, for 1 to LLM_ATTN_MAX_HEADS query heads that share a KV
	 * head (NULL: the kernels above, one head at a time).  Each head's
	 * results must be the bits the one-head kernel gives it; the keys and
	 * values are just read once.
	 */
	/* s (nq, nt): row h = q_h . k_j, q (nq, hd) the heads' queries */
	void		(*scores_heads) (const float *q, int nq, const uint8_t *k, size_t stride, int nt, int hd,
								 LlmKvType type, float *s);
	/* acc (nq, hd): row h += sum_j w[h * nt + j] * v_j */
	void		(*accum_heads) (float *acc, int nq, const float *w, const uint8_t *v, size_t stride, int nt, int hd,
								LlmKvType type);

	/*
	 * Optional: a whole tile fused (scores, online-softmax update of the
	 * heads' states hs (nq), weighted values), giving exactly the bits the
	 * kernels above give through attention.c's steps, with the scores kept
	 * in registers.  NULL: those steps.
	 */
	void		(*tile) (const LlmAttnTile *t, LlmAttnHead *hs);
} LlmAttnKernels;

/* The scalar exp_sum (expf, summed in order), also the AVX2 level's. */
float		llm_attn_exp_sum_ref(float *s, int nt, float m);

extern const LlmAttnKernels llm_attn_kernels_ref;
extern const LlmAttnKernels llm_attn_kernels_avx2;	/* name NULL when not compiled in */
extern const LlmAttnKernels llm_attn_kernels_avx512;

/*
 * Attention of a batch (see LlmAttnArgs) with kernels k, spread over the
 * backend's threads.  With H2O scores, a sequence's tokens must be
 * consecutive in the batch (one task owns a sequence's scores).
 */
void		llm_cpu_attention(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a,
							  const LlmAttnKernels *k);

/* The CPU backend's KV writes (cpu/kv_ops.c): the kv_store and kv_move ops. */
void		llm_cpu_kv_store(LlmBackend *be, LlmKvCache *kv, int layer, LlmKvSeq *const *seq,
							 const int32_t *pos, const float *k, const float *v, int n);
void		llm_cpu_kv_move(LlmBackend *be, LlmKvCache *kv, const LlmKvSeq *seq, const LlmKvMove *moves,
							int n);
#if defined(__x86_64__) && defined(__GNUC__)
/* llm_cpu_kv_store converting f16 by F16C (same bits), for the AVX2 and AVX-512 levels. */
void		llm_cpu_kv_store_f16c(LlmBackend *be, LlmKvCache *kv, int layer, LlmKvSeq *const *seq,
								  const int32_t *pos, const float *k, const float *v, int n);
#endif

#endif							/* LLM_CPU_ATTENTION_H */
