/*
 * kv.c
 *		The paged KV pool: a free list of fixed-size blocks with reference
 *		counts, per-sequence block tables, and the prefix cache (see kv.h).
 *
 * A block is in exactly one of three places: the free list (refcount 0,
 * not registered), the LRU list (refcount 0, registered: its keys and
 * values still describe a known prefix), or in use (refcount > 0, in one or
 * more block tables).  Allocation takes from the free list first and evicts
 * the least recently used cached block only when that is empty.
 */
#include "kv.h"

#include <stdlib.h>
#include <string.h>

#define TABLE_EMPTY (-1)
#define TABLE_DELETED (-2)

/* Bytes per stored value of a KV type. */
static size_t
kv_elem_size(LlmKvType type)
{
	return type == LLM_KV_F32 ? 4 : type == LLM_KV_F16 ? 2 : 1;
}

/* Bytes one block takes across all layers (keys, values and INT8 scales). */
size_t
llm_kv_block_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size, LlmKvType type)
{
	size_t		per_pos = (size_t) n_kv_heads * head_dim * kv_elem_size(type);

	if (type == LLM_KV_I8)
		per_pos += (size_t) n_kv_heads * sizeof(float);
	return 2 * (size_t) n_layers * (size_t) block_size * per_pos;
}

/* Write every page of the host pool's keys, values and scales, so that no later step takes their first faults. */
static void
prefault_pool(LlmKvCache *kv, size_t rows)
{
	memset(kv->k, 0, rows * kv->kv_dim * kv->elem_size);
	memset(kv->v, 0, rows * kv->kv_dim * kv->elem_size);
	if (kv->k_scale != NULL)
	{
		memset(kv->k_scale, 0, rows * kv->n_kv_heads * sizeof(float));
		memset(kv->v_scale, 0, rows * kv->n_kv_heads * sizeof(float));
	}
}

/* Allocate a pool as p describes. */
LlmStatus
llm_kv_init(LlmKvCache *kv, const LlmKvParams *p, LlmError *err)
{
	size_t		rows = (size_t) p->n_layers * p->n_blocks * p->block_size;
	size_t		bytes;
	bool		ok;

	memset(kv, 0, sizeof(*kv));
	if (p->block_size < 1 || p->block_size > 4096 || p->n_blocks < 1 || p->n_blocks > (1 << 28))
		return llm_error_set(err, LLM_ERR_INVALID, "invalid KV pool: %d blocks of %d tokens",
							 p->n_blocks, p->block_size);
	if (p->n_layers < 1 || p->n_kv_heads < 1 || p->head_dim < 1)
		return llm_error_set(err, LLM_ERR_INVALID, "invalid KV shape: %d layers, %d heads of %d",
							 p->n_layers, p->n_kv_heads, p->head_dim);
	if (p->prefix_cache && p->slot_info)
		return llm_error_set(err, LLM_ERR_INVALID, "a KV pool cannot both cache prefixes and evict");
	kv->n_layers = p->n_layers;
	kv->n_kv_heads = p->n_kv_heads;
	kv->head_dim = p->head_dim;
	kv->kv_dim = p->n_kv_heads * p->head_dim;
	kv->block_size = p->block_size;
	kv->n_blocks = p->n_blocks;
	kv->type = p->type;
	kv->elem_size = kv_elem_size(p->type);
	kv->prefix_cache = p->prefix_cache;
	kv->slot_info = p->slot_info || p->scores;
	kv->scores = p->scores;
	kv->lru_head = kv->lru_tail = -1;
	bytes = llm_kv_block_bytes(p->n_layers, p->n_kv_heads, p->head_dim, p->block_size, p->type) / 2 *
		(size_t) p->n_blocks;
	ok = true;
	if (!p->device_storage)
	{
		kv->k = malloc(rows * kv->kv_dim * kv->elem_size);
		kv->v = malloc(rows * kv->kv_dim * kv->elem_size);
		ok = kv->k && kv->v;
		if (ok && p->type == LLM_KV_I8)
		{
			kv->k_scale = malloc(rows * kv->n_kv_heads * sizeof(float));
			kv->v_scale = malloc(rows * kv->n_kv_heads * sizeof(float));
			ok = kv->k_scale && kv->v_scale;
		}
		if (ok && p->prefault)
			prefault_pool(kv, rows);
	}
	kv->refcount = calloc((size_t) p->n_blocks, sizeof(int32_t));
	kv->free_list = malloc((size_t) p->n_blocks * sizeof(int32_t));
	ok = ok && kv->refcount && kv->free_list;
	if (ok && p->prefix_cache)
	{
		kv->table_cap = 16;
		while (kv->table_cap < 2 * (uint32_t) p->n_blocks)
			kv->table_cap *= 2;
		kv->block_hash = calloc((size_t) p->n_blocks, sizeof(uint64_t));
		kv->block_tokens = malloc((size_t) p->n_blocks * p->block_size * sizeof(int32_t));
		kv->lru_prev = malloc((size_t) p->n_blocks * sizeof(int32_t));
		kv->lru_next = malloc((size_t) p->n_blocks * sizeof(int32_t));
		kv->table = malloc((size_t) kv->table_cap * sizeof(int32_t));
		ok = kv->block_hash && kv->block_tokens && kv->lru_prev && kv->lru_next && kv->table;
		for (uint32_t i = 0; ok && i < kv->table_cap; i++)
			kv->table[i] = TABLE_EMPTY;
	}
	if (!ok)
	{
		llm_kv_free(kv);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a KV pool of %d blocks (%zu MB)",
							 p->n_blocks, 2 * bytes >> 20);
	}
	/* lowest block ids are handed out first */
	for (int i = 0; i < p->n_blocks; i++)
		kv->free_list[i] = p->n_blocks - 1 - i;
	kv->n_free = p->n_blocks;
	return LLM_OK;
}

/* Free the pool; safe on a zeroed struct. */
void
llm_kv_free(LlmKvCache *kv)
{
	free(kv->k);
	free(kv->v);
	free(kv->k_scale);
	free(kv->v_scale);
	free(kv->refcount);
	free(kv->free_list);
	free(kv->block_hash);
	free(kv->block_tokens);
	free(kv->lru_prev);
	free(kv->lru_next);
	free(kv->table);
	memset(kv, 0, sizeof(*kv));
}

/* Blocks a sequence needs to hold n_tokens positions. */
int
llm_kv_blocks_for(const LlmKvCache *kv, int n_tokens)
{
	return (n_tokens + kv->block_size - 1) / kv->block_size;
}

/* Blocks that can be had right now: free ones plus unused cached ones. */
int
llm_kv_available(const LlmKvCache *kv)
{
	return kv->n_free + kv->n_lru;
}

/* Hash of a block: its parent's hash and its token ids; never 0 (0 means unregistered). */
static uint64_t
block_hash(uint64_t parent, const int32_t *tokens, int n)
{
	uint64_t	h = parent ^ 0x9e3779b97f4a7c15ull;

	for (int i = 0; i < n; i++)
	{
		h ^= (uint32_t) tokens[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h ? h : 1;
}

/* Unlink block b from the LRU list. */
static void
lru_remove(LlmKvCache *kv, int32_t b)
{
	int32_t		p = kv->lru_prev[b];
	int32_t		n = kv->lru_next[b];

	if (p >= 0)
		kv->lru_next[p] = n;
	else
		kv->lru_head = n;
	if (n >= 0)
		kv->lru_prev[n] = p;
	else
		kv->lru_tail = p;
	kv->n_lru--;
}

/* Append block b to the LRU list as the most recently used. */
static void
lru_push(LlmKvCache *kv, int32_t b)
{
	kv->lru_prev[b] = kv->lru_tail;
	kv->lru_next[b] = -1;
	if (kv->lru_tail >= 0)
		kv->lru_next[kv->lru_tail] = b;
	else
		kv->lru_head = b;
	kv->lru_tail = b;
	kv->n_lru++;
}

/* The registered block holding exactly (hash, tokens), or -1. */
static int32_t
table_find(const LlmKvCache *kv, uint64_t hash, const int32_t *tokens)
{
	uint32_t	mask = kv->table_cap - 1;

	for (uint32_t i = 0, slot = (uint32_t) hash & mask; i < kv->table_cap; i++, slot = (slot + 1) & mask)
	{
		int32_t		b = kv->table[slot];

		if (b == TABLE_EMPTY)
			return -1;
		if (b >= 0 && kv->block_hash[b] == hash &&
			memcmp(kv->block_tokens + (size_t) b * kv->block_size, tokens,
				   (size_t) kv->block_size * sizeof(int32_t)) == 0)
			return b;
	}
	return -1;
}

/* Rebuild the table from the registered blocks, dropping tombstones. */
static void
table_rebuild(LlmKvCache *kv)
{
	uint32_t	mask = kv->table_cap - 1;

	for (uint32_t i = 0; i < kv->table_cap; i++)
		kv->table[i] = TABLE_EMPTY;
	kv->table_deleted = 0;
	for (int32_t b = 0; b < kv->n_blocks; b++)
	{
		uint32_t	slot;

		if (kv->block_hash[b] == 0)
			continue;
		for (slot = (uint32_t) kv->block_hash[b] & mask; kv->table[slot] != TABLE_EMPTY; slot = (slot + 1) & mask)
			;
		kv->table[slot] = b;
	}
}

/* Put registered block b in the table. */
static void
table_insert(LlmKvCache *kv, int32_t b)
{
	uint32_t	mask = kv->table_cap - 1;
	uint32_t	slot;

	for (slot = (uint32_t) kv->block_hash[b] & mask; kv->table[slot] >= 0; slot = (slot + 1) & mask)
		;
	if (kv->table[slot] == TABLE_DELETED)
		kv->table_deleted--;
	kv->table[slot] = b;
}

/* Take registered block b out of the table and forget its hash. */
static void
table_remove(LlmKvCache *kv, int32_t b)
{
	uint32_t	mask = kv->table_cap - 1;

	for (uint32_t i = 0, slot = (uint32_t) kv->block_hash[b] & mask; i < kv->table_cap; i++, slot = (slot + 1) & mask)
		if (kv->table[slot] == b)
		{
			kv->table[slot] = TABLE_DELETED;
			kv->table_deleted++;
			break;
		}
	kv->block_hash[b] = 0;
	/* too many tombstones make lookups long: rebuild now and then */
	if (kv->table_deleted > kv->table_cap / 4)
		table_rebuild(kv);
}

/* A block for new data: a free one, else the least recently used cached one; -1 when none. */
static int32_t
take_block(LlmKvCache *kv)
{
	int32_t		b;

	if (kv->n_free > 0)
		return kv->free_list[--kv->n_free];
	if (kv->lru_head < 0)
		return -1;
	b = kv->lru_head;
	lru_remove(kv, b);
	table_remove(kv, b);
	kv->prefix_evictions++;
	return b;
}

/* Make room for need entries in seq's table. */
static bool
seq_grow(LlmKvSeq *seq, int need)
{
	int			cap = seq->cap ? seq->cap : 8;
	int32_t    *blocks;

	if (need <= seq->cap)
		return true;
	while (cap < need)
		cap *= 2;
	blocks = realloc(seq->blocks, (size_t) cap * sizeof(int32_t));
	if (blocks == NULL)
		return false;
	seq->blocks = blocks;
	seq->cap = cap;
	return true;
}

/* Make room for n_slots slots in seq's slot_pos and score (when the pool keeps them). */
static bool
seq_grow_info(const LlmKvCache *kv, LlmKvSeq *seq, int n_slots)
{
	size_t		per_slot = (size_t) kv->n_layers * kv->n_kv_heads;
	int			cap = seq->info_cap ? seq->info_cap : 64;

	if (!kv->slot_info || n_slots <= seq->info_cap)
		return true;
	while (cap < n_slots)
		cap *= 2;
	{
		int32_t    *pos = realloc(seq->slot_pos, (size_t) cap * per_slot * sizeof(int32_t));

		if (pos == NULL)
			return false;
		seq->slot_pos = pos;
	}
	if (kv->scores)
	{
		float	   *score = realloc(seq->score, (size_t) cap * per_slot * sizeof(float));

		if (score == NULL)
			return false;
		seq->score = score;
	}
	seq->info_cap = cap;
	return true;
}

/* Grow seq's table so it holds n_tokens positions; LLM_ERR_LIMIT (nothing taken) when the pool is short. */
LlmStatus
llm_kv_seq_reserve(LlmKvCache *kv, LlmKvSeq *seq, int n_tokens, LlmError *err)
{
	int			need = llm_kv_blocks_for(kv, n_tokens);

	if (need <= seq->n_blocks)
		return LLM_OK;
	if (need - seq->n_blocks > llm_kv_available(kv))
		return llm_error_set(err, LLM_ERR_LIMIT, "KV pool exhausted: %d blocks needed, %d available",
							 need - seq->n_blocks, llm_kv_available(kv));
	if (!seq_grow(seq, need) || !seq_grow_info(kv, seq, need * kv->block_size))
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for a block table");
	while (seq->n_blocks < need)
	{
		int32_t		b = take_block(kv);

		kv->refcount[b] = 1;
		seq->blocks[seq->n_blocks++] = b;
	}
	return LLM_OK;
}

/* Drop one reference to block b: when it was the last, an unused registered block goes to the LRU list, another to the free list. */
static void
put_block(LlmKvCache *kv, int32_t b)
{
	if (--kv->refcount[b] > 0)
		return;
	if (kv->prefix_cache && kv->block_hash[b] != 0)
		lru_push(kv, b);
	else
		kv->free_list[kv->n_free++] = b;
}

/* Give back all of seq's blocks. */
void
llm_kv_seq_release(LlmKvCache *kv, LlmKvSeq *seq)
{
	for (int i = 0; i < seq->n_blocks; i++)
		put_block(kv, seq->blocks[i]);
	seq->n_blocks = 0;
	seq->n_registered = 0;
	seq->last_hash = 0;
	seq->n_evicted = 0;
}

/* Free the table itself (after release). */
void
llm_kv_seq_free(LlmKvSeq *seq)
{
	free(seq->blocks);
	free(seq->slot_pos);
	free(seq->score);
	memset(seq, 0, sizeof(*seq));
}

/* Give back seq's blocks past those n_slots slots need. */
void
llm_kv_seq_shrink(LlmKvCache *kv, LlmKvSeq *seq, int n_slots)
{
	int			keep = llm_kv_blocks_for(kv, n_slots);

	while (seq->n_blocks > keep)
		put_block(kv, seq->blocks[--seq->n_blocks]);
	if (seq->n_registered > seq->n_blocks)
		seq->n_registered = seq->n_blocks;
}

/* Attach to the empty seq the cached blocks of the longest prefix of tokens (at most max_tokens positions). */
int
llm_kv_prefix_attach(LlmKvCache *kv, LlmKvSeq *seq, const int32_t *tokens, int max_tokens)
{
	int			bs = kv->block_size;
	int			n_full = max_tokens / bs;

	if (!kv->prefix_cache || seq->n_blocks != 0 || n_full == 0 || !seq_grow(seq, n_full))
		return 0;
	for (int i = 0; i < n_full; i++)
	{
		uint64_t	h = block_hash(i == 0 ? seq->partition : seq->last_hash, tokens + (size_t) i * bs, bs);
		int32_t		b = table_find(kv, h, tokens + (size_t) i * bs);

		if (b < 0)
			break;
		if (kv->refcount[b]++ == 0)
			lru_remove(kv, b);
		seq->blocks[seq->n_blocks++] = b;
		seq->n_registered++;
		seq->last_hash = h;
	}
	return seq->n_blocks * bs;
}

/* How many of the first max_tokens tokens partition's prefix cache holds, in whole blocks (nothing is attached). */
int
llm_kv_prefix_cached(const LlmKvCache *kv, uint64_t partition, const int32_t *tokens, int max_tokens)
{
	int			bs = kv->block_size;
	uint64_t	h = partition;
	int			n = 0;

	if (!kv->prefix_cache)
		return 0;
	while (n < max_tokens / bs)
	{
		h = block_hash(h, tokens + (size_t) n * bs, bs);
		if (table_find(kv, h, tokens + (size_t) n * bs) < 0)
			break;
		n++;
	}
	return n * bs;
}

/* Register seq's full blocks among its first n_filled positions. */
void
llm_kv_prefix_register(LlmKvCache *kv, LlmKvSeq *seq, const int32_t *tokens, int n_filled)
{
	int			bs = kv->block_size;
	int			n_full = n_filled / bs < seq->n_blocks ? n_filled / bs : seq->n_blocks;

	if (!kv->prefix_cache)
		return;
	for (int i = seq->n_registered; i < n_full; i++)
	{
		const int32_t *bt = tokens + (size_t) i * bs;
		uint64_t	h = block_hash(i == 0 ? seq->partition : seq->last_hash, bt, bs);
		int32_t		b = seq->blocks[i];

		/* a block with the same content already cached stays the one found; this one is private */
		if (kv->block_hash[b] == 0 && table_find(kv, h, bt) < 0)
		{
			kv->block_hash[b] = h;
			memcpy(kv->block_tokens + (size_t) b * bs, bt, (size_t) bs * sizeof(int32_t));
			table_insert(kv, b);
		}
		seq->n_registered++;
		seq->last_hash = h;
	}
}
