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
 * collision cannot hand out wrong keys).  The first block's parent is the
 * sequence's partition: sequences share cached blocks only within one
 * partition (0: all sequences), so that one user's prompt cannot tell
 * another what is cached.  Blocks are reference-counted: a
 * new sequence whose prompt starts with cached blocks takes them by
 * reference and starts computing after them.  A block is only ever written
 * by the one sequence that filled it, before it was full and registered;
 * cached blocks are read-only.  A cached block nobody uses is not freed but
 * parked on an LRU list; it is evicted (its hash forgotten) only when the
 * free list is empty.
 *
 * INT8 keys and values.  With LLM_KV_I8 each (position, KV head) vector of
 * head_dim values is stored as int8 q with one float scale (absmax / 127):
 * value = q * scale.  Scales live beside the data, k_scale[l][b][slot][head].
 *
 * Eviction (H2O, Zhang et al. 2023; StreamingLLM, Xiao et al. 2024).  With
 * an eviction policy a sequence's cache is a list of slots rather than of
 * positions.  Until its first eviction slot == position.  Eviction works per
 * layer and per KV head, but every (layer, head) always drops the same
 * number of keys, so all of them hold the same number of slots and share one
 * block table: a sequence that dropped n_evicted positions stores the
 * position p it is now computing in slot p - n_evicted, and holds only the
 * blocks its slots need (real memory back to the pool).  Which position a
 * slot of (layer, head) holds is in slot_pos.  Dropping keys compacts: the
 * kept keys of the slots past the new end move into the freed slots (a
 * short list of LlmKvMove the backend applies), so slot order is not
 * position order after an eviction; attention does not care except for
 * sliding-window layers, which mask by slot_pos.  Keys are stored after
 * RoPE at their original positions and never re-rotated: a query at
 * position p sees each kept key exactly as it would without eviction.
 * Eviction and the prefix cache do not mix (a shared block cannot be
 * compacted by one of its users): the engine turns prefix caching off when
 * it evicts.
 */
#ifndef LLM_KV_H
#define LLM_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "types.h"

/* How to build a pool (llm_kv_init). */
typedef struct LlmKvParams
{
	int			n_layers;
	int			n_kv_heads;
	int			head_dim;
	int			block_size;		/* positions per block */
	int			n_blocks;
	LlmKvType	type;
	bool		prefix_cache;	/* register and reuse full blocks of prompt prefixes */
	bool		slot_info;		/* sequences keep slot_pos (any eviction policy) */
	bool		scores;			/* sequences keep H2O scores (the H2O policy) */
	bool		device_storage; /* keys and values live in the backend's memory, not k / v */
	bool		prefault;		/* write every page of k / v (and their scales) at init */
} LlmKvParams;

typedef struct LlmKvCache
{
	int			n_layers;
	int			n_kv_heads;
	int			head_dim;
	int			kv_dim;			/* n_kv_heads * head_dim */
	int			block_size;		/* positions per block */
	int			n_blocks;
	LlmKvType	type;
	size_t		elem_size;		/* bytes per stored value */
	uint8_t    *k;				/* (n_layers, n_blocks, block_size, kv_dim); NULL with device storage */
	uint8_t    *v;				/* (n_layers, n_blocks, block_size, kv_dim) */
	float	   *k_scale;		/* (n_layers, n_blocks, block_size, n_kv_heads), LLM_KV_I8 only */
	float	   *v_scale;		/* (n_layers, n_blocks, block_size, n_kv_heads), LLM_KV_I8 only */
	bool		slot_info;		/* sequences keep slot_pos */
	bool		scores;			/* sequences keep H2O scores */
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
	int64_t		prefix_evictions;	/* cached blocks reused for other data */
	int64_t		evicted_keys;	/* (position, layer, head) keys dropped by eviction */
} LlmKvCache;

/* One sequence's block table. */
typedef struct LlmKvSeq
{
	int			n_blocks;		/* blocks in the table */
	int			cap;			/* allocated table entries */
	int32_t    *blocks;			/* (cap) block ids */
	int			n_registered;	/* leading blocks known to the prefix cache */
	uint64_t	last_hash;		/* hash of block n_registered - 1 (0 for none) */
	uint64_t	partition;		/* the prefix cache's partition (0: shared by all); release keeps it */

	/* eviction: slot = position - n_evicted (see the top of this file) */
	int			n_evicted;		/* positions dropped from every (layer, KV head) */
	int			info_cap;		/* slots slot_pos and score hold */
	int32_t    *slot_pos;		/* (info_cap, n_layers, n_kv_heads) position in each slot; slot_info */
	float	   *score;			/* (info_cap, n_layers, n_kv_heads) summed attention; scores */
} LlmKvSeq;

/* One key and value of (layer, KV head) moving from slot from to slot to of a sequence. */
typedef struct LlmKvMove
{
	int32_t		layer;
	int32_t		head;
	int32_t		from;
	int32_t		to;
} LlmKvMove;

/* Bytes one block takes across all layers (keys, values and INT8 scales). */
size_t		llm_kv_block_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size, LlmKvType type);

/* Allocate a pool as p describes. */
LlmStatus	llm_kv_init(LlmKvCache *kv, const LlmKvParams *p, LlmError *err);
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

/* Give back seq's blocks past those n_slots slots need (after an eviction). */
void		llm_kv_seq_shrink(LlmKvCache *kv, LlmKvSeq *seq, int n_slots);

/* Blocks that can be had right now: free ones plus unused cached ones. */
int			llm_kv_available(const LlmKvCache *kv);

/*
 * Attach to the empty seq the cached blocks that hold the longest prefix of
 * tokens, reusing at most max_tokens positions (whole blocks).  Returns the
 * number of positions reused (a multiple of block_size).
 */
int			llm_kv_prefix_attach(LlmKvCache *kv, LlmKvSeq *seq, const int32_t *tokens, int max_tokens);

/* How many of the first max_tokens tokens partition's prefix cache holds, in whole blocks (nothing is attached). */
int			llm_kv_prefix_cached(const LlmKvCache *kv, uint64_t partition, const int32_t *tokens, int max_tokens);

/* Register seq's full blocks among its first n_filled positions (tokens are their ids). */
void		llm_kv_prefix_register(LlmKvCache *kv, LlmKvSeq *seq, const int32_t *tokens, int n_filled);

/* Index of slot of seq in layer among the pool's (layer, block, slot) rows. */
static inline size_t
llm_kv_row(const LlmKvCache *kv, const LlmKvSeq *seq, int layer, int slot)
{
	size_t		block = (size_t) seq->blocks[slot / kv->block_size];

	return ((size_t) layer * kv->n_blocks + block) * kv->block_size + slot % kv->block_size;
}

/* Address of the key / value vector (kv_dim values) in slot of seq in layer. */
static inline void *
llm_kv_k_at(const LlmKvCache *kv, const LlmKvSeq *seq, int layer, int slot)
{
	return kv->k + llm_kv_row(kv, seq, layer, slot) * kv->kv_dim * kv->elem_size;
}

static inline void *
llm_kv_v_at(const LlmKvCache *kv, const LlmKvSeq *seq, int layer, int slot)
{
	return kv->v + llm_kv_row(kv, seq, layer, slot) * kv->kv_dim * kv->elem_size;
}

/* Address of the n_kv_heads INT8 scales of the key / value in slot of seq in layer. */
static inline float *
llm_kv_k_scale_at(const LlmKvCache *kv, const LlmKvSeq *seq, int layer, int slot)
{
	return kv->k_scale + llm_kv_row(kv, seq, layer, slot) * kv->n_kv_heads;
}

static inline float *
llm_kv_v_scale_at(const LlmKvCache *kv, const LlmKvSeq *seq, int layer, int slot)
{
	return kv->v_scale + llm_kv_row(kv, seq, layer, slot) * kv->n_kv_heads;
}

/* Index of (slot, layer, head) in a sequence's slot_pos and score. */
static inline size_t
llm_kv_info_index(const LlmKvCache *kv, int slot, int layer, int head)
{
	return ((size_t) slot * kv->n_layers + layer) * kv->n_kv_heads + head;
}

#endif							/* LLM_KV_H */
