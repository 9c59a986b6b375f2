/*
 * kv.c
 *		The paged KV pool: a free list of fixed-size blocks with reference
 *		counts, and per-sequence block tables (see kv.h).
 */
#include "kv.h"

#include <stdlib.h>
#include <string.h>

/* Bytes per stored value of a KV type. */
static size_t
kv_elem_size(LlmKvType type)
{
	return type == LLM_KV_F16 ? 2 : 4;
}

/* Bytes one block takes across all layers (keys and values). */
size_t
llm_kv_block_bytes(int n_layers, int kv_dim, int block_size, LlmKvType type)
{
	return 2 * (size_t) n_layers * (size_t) block_size * (size_t) kv_dim * kv_elem_size(type);
}

/* Allocate a pool of n_blocks blocks. */
LlmStatus
llm_kv_init(LlmKvCache *kv, int n_layers, int kv_dim, int block_size, int n_blocks,
			LlmKvType type, LlmError *err)
{
	size_t		bytes;

	memset(kv, 0, sizeof(*kv));
	if (block_size < 1 || block_size > 4096 || n_blocks < 1)
		return llm_error_set(err, LLM_ERR_INVALID, "invalid KV pool: %d blocks of %d tokens",
							 n_blocks, block_size);
	kv->n_layers = n_layers;
	kv->kv_dim = kv_dim;
	kv->block_size = block_size;
	kv->n_blocks = n_blocks;
	kv->type = type;
	kv->elem_size = kv_elem_size(type);
	bytes = llm_kv_block_bytes(n_layers, kv_dim, block_size, type) / 2 * (size_t) n_blocks;
	kv->k = malloc(bytes);
	kv->v = malloc(bytes);
	kv->refcount = calloc((size_t) n_blocks, sizeof(int32_t));
	kv->free_list = malloc((size_t) n_blocks * sizeof(int32_t));
	if (kv->k == NULL || kv->v == NULL || kv->refcount == NULL || kv->free_list == NULL)
	{
		llm_kv_free(kv);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a KV pool of %d blocks (%zu MB)",
							 n_blocks, 2 * bytes >> 20);
	}
	/* lowest block ids are handed out first */
	for (int i = 0; i < n_blocks; i++)
		kv->free_list[i] = n_blocks - 1 - i;
	kv->n_free = n_blocks;
	return LLM_OK;
}

/* Free the pool; safe on a zeroed struct. */
void
llm_kv_free(LlmKvCache *kv)
{
	free(kv->k);
	free(kv->v);
	free(kv->refcount);
	free(kv->free_list);
	memset(kv, 0, sizeof(*kv));
}

/* Blocks a sequence needs to hold n_tokens positions. */
int
llm_kv_blocks_for(const LlmKvCache *kv, int n_tokens)
{
	return (n_tokens + kv->block_size - 1) / kv->block_size;
}

/* Grow seq's table so it holds n_tokens positions; LLM_ERR_LIMIT (nothing taken) when the pool is short. */
LlmStatus
llm_kv_seq_reserve(LlmKvCache *kv, LlmKvSeq *seq, int n_tokens, LlmError *err)
{
	int			need = llm_kv_blocks_for(kv, n_tokens);

	if (need <= seq->n_blocks)
		return LLM_OK;
	if (need - seq->n_blocks > kv->n_free)
		return llm_error_set(err, LLM_ERR_LIMIT, "KV pool exhausted: %d blocks needed, %d free",
							 need - seq->n_blocks, kv->n_free);
	if (need > seq->cap)
	{
		int			cap = seq->cap ? seq->cap : 8;
		int32_t    *blocks;

		while (cap < need)
			cap *= 2;
		blocks = realloc(seq->blocks, (size_t) cap * sizeof(int32_t));
		if (blocks == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a block table");
		seq->blocks = blocks;
		seq->cap = cap;
	}
	while (seq->n_blocks < need)
	{
		int32_t		b = kv->free_list[--kv->n_free];

		kv->refcount[b] = 1;
		seq->blocks[seq->n_blocks++] = b;
	}
	return LLM_OK;
}

/* Give back all of seq's blocks (a shared block returns to the pool when its last user lets go). */
void
llm_kv_seq_release(LlmKvCache *kv, LlmKvSeq *seq)
{
	for (int i = 0; i < seq->n_blocks; i++)
	{
		int32_t		b = seq->blocks[i];

		if (--kv->refcount[b] == 0)
			kv->free_list[kv->n_free++] = b;
	}
	seq->n_blocks = 0;
}

/* Free the table itself (after release). */
void
llm_kv_seq_free(LlmKvSeq *seq)
{
	free(seq->blocks);
	memset(seq, 0, sizeof(*seq));
}
