/*
 * kv.h
 *		The paged KV cache: one pool of fixed-size blocks shared by all
 *		sequences, each sequence holding a block table.
 *
 * Block b of layer l keeps the keys (and, in a parallel array, the values)
 * of block_size consecutive positions of one sequence:
 *   k[l][b][slot][kv_dim], kv_dim = n_kv_heads * head_dim,
 * so the key of position p of a sequence is in block table[p / block_size],
 * slot p % block_size.  Keys are stored after RoPE, at their original
 * positions.
 *
 * Prefix caching.  A full block is known by a hash of (its parent block's
 * hash, its token ids), so equal hashes mean equal prefixes up to and
 * including the block (the token ids are kept too, and compared, so a hash
 * collision cannot hand out wrong keys).  Blocks are reference-counted: a
 * new sequence whose prompt starts with cached blocks takes them by
 * reference and starts computing after them.  A block is only ever written
 * by the one sequence that filled it, before it was full and registered;
 * cached blocks are read-only.  A cached block nobody uses is not freed but
 * parked on an LRU list; it is evicted (its hash forgotten) only when the
 * free list is empty.
 */
#ifndef LLM_KV_H
#define LLM_KV_H

#include <stdbool.h>
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

	/* prefix cache */
	bool		prefix_cache;	/* whether full blocks are registered and reused */
	uint64_t   *block_hash;		/* (n_blocks) hash of a registered block, else 0 */
	int32_t    *block_tokens;	/* (n_blocks, block_size) token ids of registered blocks */
	int32_t    *lru_prev;		/* (n_blocks) LRU list of unused registered blocks */
	int32_t    *lru_next;		/* (n_blocks) */
	int32_t		lru_head;		/* least recently used, evicted first; -1 when empty */
	int32_t		lru_tail;
	int			n_lru;
	int32_t    *table;			/* (table_cap) open addressing: block ids, -1 empty, -2 deleted */
	uint32_t	table_cap;		/* a power of two >= 2 * n_blocks */
	uint32_t	table_deleted;	/* tombstones in table */
	int64_t		prefix_hit_tokens;	/* tokens served from cached blocks */
	int64_t		prefix_evictions;	/* cached blocks reused for other data */
} LlmKvCache;

/* One sequence's block table. */
typedef struct LlmKvSeq
{
	int			n_blocks;		/* blocks in the table */
	int			cap;			/* allocated table entries */
	int32_t    *blocks;			/* (cap) block ids */
	int			n_registered;	/* leading blocks known to the prefix cache */
	uint64_t	last_hash;		/* hash of block n_registered - 1 (0 for none) */
} LlmKvSeq;

/* Bytes one block takes across all layers (keys and values). */
size_t		llm_kv_block_bytes(int n_layers, int kv_dim, int block_size, LlmKvType type);

/* Allocate a pool of n_blocks blocks, with or without prefix caching. */
LlmStatus	llm_kv_init(LlmKvCache *kv, int n_layers, int kv_dim, int block_size, int n_blocks,
						LlmKvType type, bool prefix_cache, LlmError *err);
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

/* Blocks that can be had right now: free ones plus unused cached ones. */
int			llm_kv_available(const LlmKvCache *kv);

/*
 * Attach to the empty seq the cached blocks that hold the longest prefix of
 * tokens, reusing at most max_tokens positions (whole blocks).  Returns the
 * number of positions reused (a multiple of block_size).
 */
int			llm_kv_prefix_attach(LlmKvCache *kv, LlmKvSeq *seq, const int32_t *tokens, int max_tokens);

/* Register seq's full blocks among its first n_filled positions (tokens are their ids). */
void		llm_kv_prefix_register(LlmKvCache *kv, LlmKvSeq *seq, const int32_t *tokens, int n_filled);

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
