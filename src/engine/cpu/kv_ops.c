/*
 * kv_ops.c
 *		The CPU backend's KV cache writes: storing a step's keys and values
 *		(converted to the cache's type) and the slot moves of an eviction.
 */
#include "cpu/attention.h"

#include <string.h>

/* Store one (position, KV head) vector of hd floats at dst in the cache's type; its INT8 scale at *scale. */
static void
store_head(const LlmKvCache *kv, const float *src, uint8_t *dst, float *scale, int hd)
{
	switch (kv->type)
	{
		case LLM_KV_F32:
			memcpy(dst, src, (size_t) hd * sizeof(float));
			break;
		case LLM_KV_F16:
			for (int d = 0; d < hd; d++)
				((uint16_t *) dst)[d] = llm_fp32_to_fp16(src[d]);
			break;
		case LLM_KV_I8:
			*scale = llm_quantize_i8(src, (int8_t *) dst, hd);
			break;
	}
}

/* Store k and v (n, kv_dim) of layer in the slots of (seq[i], pos[i]). */
void
llm_cpu_kv_store(LlmBackend *be, LlmKvCache *kv, int layer, LlmKvSeq *const *seq, const int32_t *pos,
				 const float *k, const float *v, int n)
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
					   ks ? ks + h : NULL, hd);
			store_head(kv, v + (size_t) i * kv->kv_dim + (size_t) h * hd, vd + h * head_bytes,
					   vs ? vs + h : NULL, hd);
			if (kv->slot_info)
				s->slot_pos[llm_kv_info_index(kv, slot, layer, h)] = pos[i];
			if (kv->scores)
				s->score[llm_kv_info_index(kv, slot, layer, h)] = 0.0f;
		}
	}
}

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
