/*
 * test_kv.c
 *		The paged KV pool and its prefix cache under random operations:
 *		every block is in exactly one place (free list, LRU list, or held),
 *		reference counts equal the number of tables holding a block, cached
 *		prefixes are found again and never handed out after eviction.
 */
#include <stdlib.h>
#include <string.h>

#include "kv.h"
#include "test.h"

#define N_SEQS 12
#define BLOCK 4
#define N_BLOCKS 48

/* Check the pool's invariants against the sequences' tables. */
static void
check_invariants(const LlmKvCache *kv, LlmKvSeq *seqs, int n_seqs, int step)
{
	int			held[N_BLOCKS] = {0};
	int			where[N_BLOCKS] = {0};	/* 1 free, 2 lru */
	int			n_lru = 0;

	for (int i = 0; i < kv->n_free; i++)
		where[kv->free_list[i]] += 1;
	for (int32_t b = kv->lru_head; b >= 0 && n_lru <= N_BLOCKS; b = kv->lru_next[b], n_lru++)
		where[b] += 2;
	TEST_CHECK(n_lru == kv->n_lru, "step %d: LRU list has %d blocks, counter %d", step, n_lru, kv->n_lru);
	for (int s = 0; s < n_seqs; s++)
		for (int i = 0; i < seqs[s].n_blocks; i++)
			held[seqs[s].blocks[i]]++;
	for (int b = 0; b < N_BLOCKS; b++)
	{
		TEST_CHECK(held[b] == kv->refcount[b], "step %d: block %d held %d times, refcount %d", step, b, held[b], kv->refcount[b]);
		if (held[b] > 0)
			TEST_CHECK(where[b] == 0, "step %d: held block %d is also free/cached (%d)", step, b, where[b]);
		else
			TEST_CHECK(where[b] == 1 || where[b] == 2, "step %d: unheld block %d is nowhere or twice (%d)", step, b, where[b]);
		if (where[b] == 2)
			TEST_CHECK(kv->block_hash[b] != 0, "step %d: cached block %d has no hash", step, b);
		if (where[b] == 1)
			TEST_CHECK(kv->block_hash[b] == 0, "step %d: free block %d still registered", step, b);
	}
}

/* A token stream: a few shared prefixes so that caching has something to find. */
static void
make_tokens(uint64_t *x, int32_t *tokens, int n)
{
	int			family;

	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	family = (int) (*x % 3);
	for (int i = 0; i < n; i++)
		tokens[i] = i < 12 ? family * 100 + i : (int32_t) ((*x >> (i % 32)) % 50);
}

int
main(void)
{
	LlmKvCache	kv;
	LlmKvSeq	seqs[N_SEQS];
	int32_t		tokens[N_SEQS][64];
	int			filled[N_SEQS] = {0};
	bool		started[N_SEQS] = {0};
	LlmError	err;
	uint64_t	x = 42;
	int64_t		reused = 0;		/* positions attach found cached */

	memset(seqs, 0, sizeof(seqs));
	LlmKvParams kp = {
		.n_layers = 2,.n_kv_heads = 2,.head_dim = 4,.block_size = BLOCK,.n_blocks = N_BLOCKS,
		.type = LLM_KV_F32,.prefix_cache = true,
	};

	TEST_CHECK(llm_kv_init(&kv, &kp, &err) == LLM_OK, "init: %s", err.msg);

	for (int step = 0; step < 5000; step++)
	{
		int			s;
		int			op;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		s = (int) (x % N_SEQS);
		op = (int) ((x >> 8) % 4);
		if (op == 0 && !started[s])
		{
			started[s] = true;
			/* start: attach the cached prefix, like the engine's admission */
			make_tokens(&x, tokens[s], 64);
			filled[s] = llm_kv_prefix_attach(&kv, &seqs[s], tokens[s], 40);
			reused += filled[s];
			TEST_CHECK(filled[s] % BLOCK == 0 && filled[s] <= 40, "attach gave %d", filled[s]);
		}
		else if (op <= 2 && started[s] && filled[s] < 64)
		{
			/* grow by a few tokens and register what became full */
			int			want = filled[s] + 1 + (int) ((x >> 16) % 7);

			if (want > 64)
				want = 64;
			if (llm_kv_seq_reserve(&kv, &seqs[s], want, &err) == LLM_OK)
			{
				filled[s] = want;
				llm_kv_prefix_register(&kv, &seqs[s], tokens[s], filled[s]);
			}
			else
				TEST_CHECK(err.status == LLM_ERR_LIMIT, "reserve: %s", err.msg);
		}
		else
		{
			llm_kv_seq_release(&kv, &seqs[s]);
			filled[s] = 0;
			started[s] = false;
		}
		check_invariants(&kv, seqs, N_SEQS, step);
	}
	TEST_CHECK(reused > 0, "no prefix was ever reused");
	TEST_CHECK(kv.prefix_evictions > 0, "no cached block was ever evicted");

	for (int s = 0; s < N_SEQS; s++)
	{
		llm_kv_seq_release(&kv, &seqs[s]);
		llm_kv_seq_free(&seqs[s]);
	}
	TEST_CHECK(kv.n_free + kv.n_lru == N_BLOCKS, "blocks lost: %d free + %d cached of %d", kv.n_free, kv.n_lru, N_BLOCKS);

	/* a registered prefix is found again with the same content only */
	{
		LlmKvSeq	a = {0},
					b = {0},
					c = {0};
		int32_t		t1[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
		int32_t		t2[12] = {1, 2, 3, 4, 5, 6, 7, 9, 9, 10, 11, 12};

		llm_kv_seq_reserve(&kv, &a, 12, &err);
		llm_kv_prefix_register(&kv, &a, t1, 12);
		llm_kv_seq_release(&kv, &a);
		TEST_CHECK(llm_kv_prefix_attach(&kv, &b, t1, 11) == 8, "same prefix should reuse 8 positions");
		TEST_CHECK(llm_kv_prefix_attach(&kv, &c, t2, 11) == 4, "a prefix differing in block 2 should reuse 4");
		llm_kv_seq_release(&kv, &b);
		llm_kv_seq_release(&kv, &c);
		llm_kv_seq_free(&a);
		llm_kv_seq_free(&b);
		llm_kv_seq_free(&c);
	}

	/* a prefix registered in one partition is found in that one only */
	{
		LlmKvSeq	a = {.partition = 7},
					same = {.partition = 7},
					other = {.partition = 8},
					shared = {0};
		int32_t		t[12] = {21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

		llm_kv_seq_reserve(&kv, &a, 12, &err);
		llm_kv_prefix_register(&kv, &a, t, 12);
		llm_kv_seq_release(&kv, &a);
		TEST_CHECK(a.partition == 7, "release should keep the partition");
		TEST_CHECK(llm_kv_prefix_cached(&kv, 7, t, 11) == 8, "partition 7 should hold 8 positions");
		TEST_CHECK(llm_kv_prefix_cached(&kv, 8, t, 11) == 0, "partition 8 should hold none of 7's");
		TEST_CHECK(llm_kv_prefix_cached(&kv, 0, t, 11) == 0, "the shared partition should hold none of 7's");
		TEST_CHECK(llm_kv_prefix_attach(&kv, &same, t, 11) == 8, "the same partition should reuse 8 positions");
		TEST_CHECK(llm_kv_prefix_attach(&kv, &other, t, 11) == 0, "another partition should reuse nothing");
		TEST_CHECK(llm_kv_prefix_attach(&kv, &shared, t, 11) == 0, "the shared partition should reuse nothing");
		llm_kv_seq_release(&kv, &same);
		llm_kv_seq_release(&kv, &other);
		llm_kv_seq_release(&kv, &shared);
		llm_kv_seq_free(&a);
		llm_kv_seq_free(&same);
		llm_kv_seq_free(&other);
		llm_kv_seq_free(&shared);
	}
	llm_kv_free(&kv);
	return test_summary("kv");
}
