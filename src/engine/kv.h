/*
 * kv.h
 *		The paged KV cache: one pool of fixed-size blocks shared by all
 *		sequences, each sequence holding a block table.
 *
 * Block b of layer l keeps the keys (and, in a parallel array, the values)
 * of block_size consecutive positions of one sequence:
 *   k[l][b][slot][kv_dim], kv_dim = n_kv_heads * head_dim,
 * so the key of position p of a sequence is in block table[p / block_size],
 * slot p % block_size.  Blocks are reference-counted so that sequences may
 * share them (prefix caching); a block is written only while its count is 1.
 * Keys are stored after RoPE, at their original positions.
 */
#ifndef LLM_KV_H
#define LLM_KV_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "status.h"

typedef struct LlmKvCache
{
	int			n_layers;
	int			kv_dim;			/* n_kv_heads * head_dim */
	int			block_size;		/* positions per block */
	int			n_blocks;
	LlmKvType	type;
	size_t		elem_size;		/* bytes per stored value */
	uint8_t    *k;				/* (n_layers, n_blocks, block_size, kv_dim) */
	uint8_t    *v;				/* (n_layers, n_blocks, block_size, kv_dim) */
	int32_t    *refcount;		/* (n_blocks) */
	int32_t    *free_list;		/* (n_blocks) stack of free block ids */
	int			n_free;
} LlmKvCache;

/* One sequence's block table. */
typedef struct LlmKvSeq
{
	int			n_blocks;		/* blocks in the table */
	int			cap;			/* allocated table entries */
	int32_t    *blocks;			/* (cap) block ids */
} LlmKvSeq;

/* Bytes one block takes across all layers (keys and values). */
size_t		llm_kv_block_bytes(int n_layers, int kv_dim, int block_size, LlmKvType type);

/* Allocate a pool of n_blocks blocks. */
LlmStatus	llm_kv_init(LlmKvCache *kv, int n_layers, int kv_dim, int block_size, int n_blocks,
						LlmKvType type, LlmError *err);
void		llm_kv_free(LlmKvCache *kv);

/* Blocks a sequence needs to hold n_tokens positions. */
int			llm_kv_blocks_for(const LlmKvCache *kv, int n_tokens);

/*
 * Grow seq's table so it holds n_tokens positions.  LLM_ERR_LIMIT (nothing
 * taken) when the pool has too few free blocks.
 */
LlmStatus	llm_kv_seq_reserve(LlmKvCache *kv, LlmKvSeq *seq, int n_tokens, LlmError *err);

/* Give back all of seq's blocks (a shared block returns to the pool when its last user lets go). */
void		llm_kv_seq_release(LlmKvCache *kv, LlmKvSeq *seq);

/* Free the table itself (after release). */
void		llm_kv_seq_free(LlmKvSeq *seq);

/* Address of the key / value vector (kv_dim values) of position pos of seq in layer. */
static inline void *
llm_kv_k_at(const LlmKvCache *kv, const LlmKvSeq *seq, int layer, int pos)
{
	size_t		block = (size_t) seq->blocks[pos / kv->block_size];
	size_t		idx = (((size_t) layer * kv->n_blocks + block) * kv->block_size + pos % kv->block_size);

	return kv->k + idx * kv->kv_dim * kv->elem_size;
}

static inline void *
llm_kv_v_at(const LlmKvCache *kv, const LlmKvSeq *seq, int layer, int pos)
{
	size_t		block = (size_t) seq->blocks[pos / kv->block_size];
	size_t		idx = (((size_t) layer * kv->n_blocks + block) * kv->block_size + pos % kv->block_size);

	return kv->v + idx * kv->kv_dim * kv->elem_size;
}

#endif							/* LLM_KV_H */
