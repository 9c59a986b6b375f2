/*
 * kv_ops.c
 *		The CPU backend's KV cache writes: storing a step's keys and values
 *		(converted to the cache's type) and the slot moves of an eviction.
 */
#include "cpu/attention.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* Converts n floats to binary16 (llm_fp32_to_fp16's bits). */
typedef void (*Fp16RowFn) (const float *src, uint16_t *dst, int n);

/* n floats to binary16, one at a time. */
static void
fp16_row_ref(const float *src, uint16_t *dst, int n)
{
	for (int d = 0; d < n; d++)
		dst[d] = llm_fp32_to_fp16(src[d]);
}

/* Store one (position, KV head) vector of hd floats at dst in the cache's type; its INT8 scale at *scale. */
static void
store_head(const LlmKvCache *kv, const float *src, uint8_t *dst, float *scale, int hd, Fp16RowFn to_f16)
{
	switch (kv->type)
	{
		case LLM_KV_F32:
			memcpy(dst, src, (size_t) hd * sizeof(float));
			break;
		case LLM_KV_F16:
			to_f16(src, (uint16_t *) dst, hd);
			break;
		case LLM_KV_I8:
			*scale = llm_quantize_i8(src, (int8_t *) dst, hd);
			break;
	}
}

/* Store k and v (n, kv_dim) of layer in the slots of (seq[i], pos[i]), f16 by to_f16. */
static void
kv_store_with(LlmKvCache *kv, int layer, LlmKvSeq *const *seq, const int32_t *pos, const float *k,
			  const float *v, int n, Fp16RowFn to_f16)
{
	int			hd = kv->head_dim;
	size_t		head_bytes = (size_t) hd * kv->elem_size;

	for (int i = 0; i < n; i++)
	{
		LlmKvSeq   *s = seq[i];
		int			slot = pos[i] - s->n_evicted;
		uint8_t    *kd = llm_kv_k_at(kv, s, layer, slot);
		uint8_t    *vd = llm_kv_v_at(kv, s, layer, slot);
		float	   *ks = kv->type == LLM_KV_I8 ? llm_kv_k_scale_at(kv, s, layer, slot) : NULL;
		float	   *vs = kv->type == LLM_KV_I8 ? llm_kv_v_scale_at(kv, s, layer, slot) : NULL;

		for (int h = 0; h < kv->n_kv_heads; h++)
		{
			store_head(kv, k + (size_t) i * kv->kv_dim + (size_t) h * hd, kd + h * head_bytes,
					   ks ? ks + h : NULL, hd, to_f16);
			store_head(kv, v + (size_t) i * kv->kv_dim + (size_t) h * hd, vd + h * head_bytes,
					   vs ? vs + h : NULL, hd, to_f16);
			if (kv->slot_info)
				s->slot_pos[llm_kv_info_index(kv, slot, layer, h)] = pos[i];
			if (kv->scores)
				s->score[llm_kv_info_index(kv, slot, layer, h)] = 0.0f;
		}
	}
}

/* Store k and v (n, kv_dim) of layer in the slots of (seq[i], pos[i]). */
void
llm_cpu_kv_store(LlmBackend *be, LlmKvCache *kv, int layer, LlmKvSeq *const *seq, const int32_t *pos,
				 const float *k, const float *v, int n)
{
	kv_store_with(kv, layer, seq, pos, k, v, n, fp16_row_ref);
}

#if defined(__x86_64__) && defined(__GNUC__)

/*
 * n floats to binary16 by F16C, 8 at a time, rounding to nearest even as
 * llm_fp32_to_fp16 does; a NaN becomes its 0x7e00 (with the sign), not
 * the hardware's payload, so the bits are the scalar ones exactly.
 */
__attribute__((target("avx2,f16c")))
static void
fp16_row_f16c(const float *src, uint16_t *dst, int n)
{
	int			d = 0;

	for (; d + 8 <= n; d += 8)
	{
		__m256		x = _mm256_loadu_ps(src + d);
		__m256i		unord = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
		__m128i		h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m128i		nan = _mm_packs_epi32(_mm256_castsi256_si128(unord), _mm256_extracti128_si256(unord, 1));
		__m128i		canon = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short) 0x8000)), _mm_set1_epi16(0x7e00));

		_mm_storeu_si128((__m128i *) (dst + d), _mm_blendv_epi8(h, canon, nan));
	}
	fp16_row_ref(src + d, dst + d, n - d);
}

/* llm_cpu_kv_store with F16C conversions (the AVX2 and AVX-512 levels). */
void
llm_cpu_kv_store_f16c(LlmBackend *be, LlmKvCache *kv, int layer, LlmKvSeq *const *seq, const int32_t *pos,
					  const float *k, const float *v, int n)
{
	kv_store_with(kv, layer, seq, pos, k, v, n, fp16_row_f16c);
}

#endif

/* Apply n key/value moves between slots of seq. */
void
llm_cpu_kv_move(LlmBackend *be, LlmKvCache *kv, const LlmKvSeq *seq, const LlmKvMove *moves, int n)
{
	size_t		head_bytes = (size_t) kv->head_dim * kv->elem_size;

	for (int i = 0; i < n; i++)
	{
		const LlmKvMove *m = &moves[i];
		size_t		off = (size_t) m->head * head_bytes;

		memcpy((uint8_t *) llm_kv_k_at(kv, seq, m->layer, m->to) + off,
			   (uint8_t *) llm_kv_k_at(kv, seq, m->layer, m->from) + off, head_bytes);
		memcpy((uint8_t *) llm_kv_v_at(kv, seq, m->layer, m->to) + off,
			   (uint8_t *) llm_kv_v_at(kv, seq, m->layer, m->from) + off, head_bytes);
		if (kv->type == LLM_KV_I8)
		{
			llm_kv_k_scale_at(kv, seq, m->layer, m->to)[m->head] = llm_kv_k_scale_at(kv, seq, m->layer, m->from)[m->head];
			llm_kv_v_scale_at(kv, seq, m->layer, m->to)[m->head] = llm_kv_v_scale_at(kv, seq, m->layer, m->from)[m->head];
		}
	}
}
