/*
 * test_h2o.c
 *		KV eviction (evict.c): the victims chosen against a brute-force
 *		reference; on the real stories260K model, step by step, that every
 *		(layer, KV head) keeps exactly the budget, never drops a sink or the
 *		recent window, drops exactly the lowest-scored keys, and that the
 *		compaction moves each key and value with its position and score;
 *		no block leaks; with a budget at least the sequence length, logits
 *		and generated text bit-identical to eviction off; the engine serving
 *		long generations under a budget in a pool too small without one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/backend_cpu.h"
#include "engine.h"
#include "evict.h"
#include "forward.h"
#include "kv.h"
#include "model.h"
#include "test.h"

static LlmModel *model;

/* A random 64-bit number (xorshift). */
static uint64_t
next_rand(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

/* The score a rule ranks key j by: its summed attention, or the mean over the queries since it was stored. */
static float
rank_score(const LlmEvictRule *r, const float *score, const int32_t *pos, int j, int newest)
{
	if (!r->by_score)
		return 0.0f;
	return r->mean_score ? score[j] / (float) (newest - pos[j] + 1) : score[j];
}

/* Whether key (score a, position pa) goes before (score b, position pb): lower score, then older. */
static bool
goes_first(float a, int32_t pa, float b, int32_t pb)
{
	return a < b || (a == b && pa < pb);
}

/*
 * The brute-force victims of one (layer, head): a key goes when it is not
 * protected and fewer than the number to drop of the other candidates go
 * before it.  Returns how many it marked.
 */
static int
brute_force_victims(const int32_t *pos, const float *score, int n, int newest, const LlmEvictRule *r,
					bool *victim)
{
	int			n_cand = 0;
	int			drop;
	int			marked = 0;

	for (int j = 0; j < n; j++)
		if (pos[j] >= r->sinks && pos[j] <= newest - r->recent)
			n_cand++;
	drop = n - r->budget < n_cand ? n - r->budget : n_cand;
	for (int j = 0; j < n; j++)
	{
		int			before = 0;

		victim[j] = false;
		if (drop <= 0 || pos[j] < r->sinks || pos[j] > newest - r->recent)
			continue;
		for (int i = 0; i < n; i++)
			if (i != j && pos[i] >= r->sinks && pos[i] <= newest - r->recent &&
				goes_first(rank_score(r, score, pos, i, newest), pos[i], rank_score(r, score, pos, j, newest), pos[j]))
				before++;
		victim[j] = before < drop;
		marked += victim[j];
	}
	return marked;
}

/* llm_kv_evict_select against the brute force on random sets with many tied scores. */
static void
test_select(void)
{
	uint64_t	x = 99;

	for (int trial = 0; trial < 3000; trial++)
	{
		int			n = 1 + (int) (next_rand(&x) % 120);
		int			newest = n - 1 + (int) (next_rand(&x) % 50);
		LlmEvictRule r = {
			.budget = 1 + (int) (next_rand(&x) % (n + 4)),
			.sinks = (int) (next_rand(&x) % 6),
			.by_score = next_rand(&x) % 4 != 0,
			.mean_score = next_rand(&x) % 2 == 0,
		};
		int32_t		pos[200];
		float		score[200];
		bool		victim[200];
		bool		expect[200];
		bool		taken[200] = {0};
		int			got;
		int			want;

		r.recent = 1 + (int) (next_rand(&x) % r.budget);
		/* distinct positions in [0, newest], the newest always held */
		pos[0] = newest;
		taken[newest] = true;
		for (int j = 1; j < n; j++)
		{
			int			p;

			do
				p = (int) (next_rand(&x) % (newest + 1));
			while (taken[p]);
			taken[p] = true;
			pos[j] = p;
		}
		for (int j = 0; j < n; j++)
			score[j] = (float) (next_rand(&x) % 7) * 0.25f;	/* few values: many ties */
		got = llm_kv_evict_select(pos, score, 1, n, newest, &r, victim);
		want = brute_force_victims(pos, score, n, newest, &r, expect);
		TEST_CHECK(got == want, "trial %d: %d victims, brute force %d", trial, got, want);
		for (int j = 0; j < n; j++)
		{
			TEST_CHECK(victim[j] == expect[j], "trial %d: slot %d (position %d, score %g) %s", trial, j,
					   pos[j], score[j], victim[j] ? "dropped but should stay" : "kept but should go");
			TEST_CHECK(!victim[j] || (pos[j] >= r.sinks && pos[j] <= newest - r.recent),
					   "trial %d: a protected key was dropped", trial);
		}
	}
}

/* The index of the largest of n logits. */
static int32_t
argmax(const float *x, int n)
{
	int32_t		best = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/*
 * One sequence on stories260K, one token a step (prompt, then greedy), with
 * eviction by rule after every step, checking the invariants of the file
 * header at every step against a shadow copy of every key ever stored.
 */
static void
test_model_steps(LlmKvType type, const LlmEvictRule *rule, const char *what)
{
	const LlmConfig *c = &model->config;
	int			n_steps = 150;
	int			lh = c->n_layers * c->n_kv_heads;
	int			hd = c->head_dim;
	size_t		head_bytes;
	LlmKvParams kp = {
		.n_layers = c->n_layers,.n_kv_heads = c->n_kv_heads,.head_dim = hd,.block_size = 8,
		.n_blocks = 64,.type = type,.slot_info = true,.scores = rule->by_score,
	};
	LlmKvCache	kv;
	LlmKvSeq	seq = {0};
	LlmKvSeq   *seqp = &seq;
	LlmBackend *be;
	LlmRunState rs;
	LlmError	err;
	int			n_prompt;
	int32_t    *prompt = test_tokenize(model, "Once upon a time, there was a little girl named Lily.", &n_prompt);
	float	   *logits = malloc((size_t) c->n_vocab * sizeof(float));
	uint8_t    *shadow;			/* (n_steps, n_layers, n_kv_heads, head_bytes) each position's stored key */
	float	   *old_score = malloc((size_t) (rule->budget + 1) * lh * sizeof(float));
	int32_t    *old_pos = malloc((size_t) (rule->budget + 1) * lh * sizeof(int32_t));
	LlmKvMove  *moves = malloc((size_t) lh * sizeof(LlmKvMove));
	int32_t		token = prompt[0];
	bool		ok = true;

	TEST_CHECK(llm_kv_init(&kv, &kp, &err) == LLM_OK, "%s: kv: %s", what, err.msg);
	TEST_CHECK(llm_backend_cpu_new(1, &be, &err) == LLM_OK, "backend: %s", err.msg);
	TEST_CHECK(llm_run_state_init(&rs, c, 1, &err) == LLM_OK, "run state: %s", err.msg);
	head_bytes = (size_t) hd * kv.elem_size;
	shadow = malloc((size_t) n_steps * lh * head_bytes);
	for (int p = 0; p < n_steps && ok; p++)
	{
		bool		want = true;
		int			slot = p - seq.n_evicted;
		int			n_slots = slot + 1;
		LlmBatch	b = {1, &token, &p, &seqp, &want};
		bool		victim[512];

		ok = llm_kv_seq_reserve(&kv, &seq, n_slots, &err) == LLM_OK &&
			llm_forward(model, be, &kv, &rs, &b, logits, &err) == LLM_OK;
		TEST_CHECK(ok, "%s: step %d: %s", what, p, err.msg);
		if (!ok)
			break;
		for (int l = 0; l < c->n_layers; l++)
			for (int h = 0; h < c->n_kv_heads; h++)
				memcpy(shadow + (((size_t) p * c->n_layers + l) * c->n_kv_heads + h) * head_bytes,
					   (uint8_t *) llm_kv_k_at(&kv, &seq, l, slot) + h * head_bytes, head_bytes);
		memcpy(old_score, seq.score ? seq.score : old_score, seq.score ? (size_t) n_slots * lh * sizeof(float) : 0);
		memcpy(old_pos, seq.slot_pos, (size_t) n_slots * lh * sizeof(int32_t));

		TEST_CHECK(llm_kv_evict_apply(be, &kv, &seq, n_slots, p, rule, moves, &err) == LLM_OK,
				   "%s: evict: %s", what, err.msg);
		if (n_slots > rule->budget)
			n_slots = rule->budget;
		TEST_CHECK(seq.n_blocks == llm_kv_blocks_for(&kv, n_slots), "%s: step %d: %d blocks held for %d slots",
				   what, p, seq.n_blocks, n_slots);
		TEST_CHECK(p + 1 - seq.n_evicted == n_slots, "%s: step %d: %d evicted", what, p, seq.n_evicted);

		/* every (layer, head): the kept positions are exactly the brute force's, with their keys and scores */
		for (int l = 0; l < c->n_layers; l++)
			for (int h = 0; h < c->n_kv_heads; h++)
			{
				int32_t		pos_before[512];
				float		score_before[512];
				bool		kept[512] = {0};
				int			n_before = slot + 1;	/* slots before the eviction */

				for (int j = 0; j < n_before; j++)
				{
					pos_before[j] = old_pos[llm_kv_info_index(&kv, j, l, h)];
					score_before[j] = seq.score ? old_score[llm_kv_info_index(&kv, j, l, h)] : 0.0f;
				}
				brute_force_victims(pos_before, score_before, n_before, p, rule, victim);
				for (int j = 0; j < n_before; j++)
					if (!victim[j])
						kept[pos_before[j]] = true;
				for (int j = 0; j < n_slots; j++)
				{
					int32_t		q = seq.slot_pos[llm_kv_info_index(&kv, j, l, h)];
					const uint8_t *k = (const uint8_t *) llm_kv_k_at(&kv, &seq, l, j) + h * head_bytes;

					TEST_CHECK(q >= 0 && q <= p && kept[q], "%s: step %d, layer %d, head %d: slot %d holds position %d, not one the brute force keeps",
							   what, p, l, h, j, q);
					if (q < 0 || q > p)
						continue;
					kept[q] = false;	/* each kept position once */
					TEST_CHECK(memcmp(k, shadow + (((size_t) q * c->n_layers + l) * c->n_kv_heads + h) * head_bytes,
									  head_bytes) == 0,
							   "%s: step %d, layer %d, head %d: slot %d does not hold position %d's key",
							   what, p, l, h, j, q);
					for (int i = 0; seq.score && i < n_before; i++)
						if (pos_before[i] == q)
							TEST_CHECK(seq.score[llm_kv_info_index(&kv, j, l, h)] == score_before[i],
									   "%s: the score of position %d did not move with it", what, q);
				}
				for (int q = 0; q <= p; q++)
					TEST_CHECK(!kept[q], "%s: step %d, layer %d, head %d: position %d should be kept but is gone",
							   what, p, l, h, q);
				/* sinks and the recent window are always there */
				for (int q = 0; q <= p; q++)
					if (q < rule->sinks || q > p - rule->recent)
					{
						bool		found = false;

						for (int j = 0; j < n_slots; j++)
							found |= seq.slot_pos[llm_kv_info_index(&kv, j, l, h)] == q;
						TEST_CHECK(found, "%s: step %d: protected position %d was dropped", what, p, q);
					}
			}
		token = p + 1 < n_prompt ? prompt[p + 1] : argmax(logits, c->n_vocab);
	}
	llm_kv_seq_release(&kv, &seq);
	TEST_CHECK(kv.n_free == kv.n_blocks, "%s: %d of %d blocks leaked", what, kv.n_blocks - kv.n_free, kv.n_blocks);
	llm_kv_seq_free(&seq);
	llm_kv_free(&kv);
	llm_run_state_free(&rs);
	llm_backend_free(be);
	free(prompt);
	free(logits);
	free(shadow);
	free(old_score);
	free(old_pos);
	free(moves);
}

typedef struct LogitLog
{
	int			n_vocab;
	int			chunk;
	float	   *logits;			/* (n_chunks, chunk, n_vocab) */
} LogitLog;

/* Keep the logits of position j of chunk c. */
static void
log_logits(void *ctx, int c, int j, const int32_t *tokens, const float *logits)
{
	LogitLog   *log = ctx;

	memcpy(log->logits + ((size_t) c * log->chunk + j) * log->n_vocab, logits, (size_t) log->n_vocab * sizeof(float));
}

/* With a budget at least the chunk, every logit is bit-identical to no eviction (H2O scores kept or not). */
static void
test_budget_identity(const int32_t *tokens, int n_chunks, int chunk)
{
	const LlmConfig *c = &model->config;
	size_t		n = (size_t) n_chunks * chunk * c->n_vocab;
	LogitLog	off = {c->n_vocab, chunk, calloc(n, sizeof(float))};
	LogitLog	big = {c->n_vocab, chunk, calloc(n, sizeof(float))};
	LlmEvictRule none = {0};
	LlmEvictRule h2o = {.budget = chunk,.sinks = 4,.recent = chunk / 2,.by_score = true};
	LlmError	err;

	TEST_CHECK(llm_forward_chunks_evicting(model, tokens, n_chunks, chunk, 2, LLM_KV_F32, &none, log_logits,
										   &off, &err) == LLM_OK, "chunks: %s", err.msg);
	TEST_CHECK(llm_forward_chunks_evicting(model, tokens, n_chunks, chunk, 2, LLM_KV_F32, &h2o, log_logits,
										   &big, &err) == LLM_OK, "chunks: %s", err.msg);
	TEST_CHECK(memcmp(off.logits, big.logits, n * sizeof(float)) == 0,
			   "a budget of the whole chunk changed the logits");
	free(off.logits);
	free(big.logits);
}

/* Make an engine: f32 KV, blocks of 8, the given pool size and budget. */
static LlmEngine *
make_engine(int max_seqs, size_t kv_bytes, int budget, LlmEvictPolicy policy)
{
	LlmEngineConfig c;
	LlmEngine  *e = NULL;
	LlmError	err;

	llm_engine_config_default(&c);
	c.max_seqs = max_seqs;
	c.max_batch_tokens = 64;
	c.kv_cache_bytes = kv_bytes;
	c.kv_block_size = 8;
	c.n_ctx = 512;
	c.prefix_cache = false;
	c.kv_budget = budget;
	c.evict_policy = policy;
	if (llm_engine_new(model, &c, &e, &err) != LLM_OK)
	{
		fprintf(stderr, "engine: %s\n", err.msg);
		exit(1);
	}
	return e;
}

/* Run n requests (prompts cycling) of max_tokens each to the end; texts[i] gets a copy; returns the most running at once. */
static int
serve(LlmEngine *e, int n, int max_tokens, char **texts)
{
	static const char *prompts[] = {"Once upon a time", "Lily and Ben", "The cat sat on", "The sun"};
	int64_t		ids[64];
	int			most = 0;
	LlmEngineStats st;
	LlmResult	r;
	LlmError	err;

	for (int i = 0; i < n; i++)
	{
		LlmRequest	q;
		int			len;
		int32_t    *p = test_tokenize(model, prompts[i % 4], &len);

		llm_request_default(&q);
		q.prompt = p;
		q.n_prompt = len;
		q.max_tokens = max_tokens;
		q.ignore_eos = true;
		TEST_CHECK(llm_engine_add(e, &q, &ids[i], &err) == LLM_OK, "add: %s", err.msg);
		free(p);
	}
	while (llm_engine_busy(e))
	{
		TEST_CHECK(llm_engine_step(e, &err) == LLM_OK, "step: %s", err.msg);
		llm_engine_stats(e, &st);
		most = st.n_running > most ? st.n_running : most;
	}
	for (int i = 0; i < n; i++)
		texts[i] = NULL;
	while (llm_engine_poll(e, &r))
		for (int i = 0; i < n; i++)
			if (r.id == ids[i])
			{
				TEST_CHECK(r.reason == LLM_FINISH_LENGTH && r.n_generated == max_tokens,
						   "request %d finished %s after %d tokens", i, llm_finish_reason_name(r.reason), r.n_generated);
				texts[i] = strdup(r.text);
			}
	for (int i = 0; i < n; i++)
		llm_engine_release(e, ids[i]);
	llm_engine_stats(e, &st);
	TEST_CHECK(st.kv_blocks_used == 0, "%d KV blocks leaked", st.kv_blocks_used);
	return most;
}

/*
 * The engine: a budget at least the length generates the same text as no
 * budget; a small budget serves long generations in a pool that holds
 * fewer sequences without one, running more of them at once; a budget too
 * small for the sinks and the window is refused.
 */
static void
test_engine(void)
{
	char	   *plain[8];
	char	   *budgeted[8];
	LlmEngine  *e;
	LlmEngineConfig c;
	LlmError	err;
	LlmEngineStats st;
	int64_t		preempted_plain;
	int			most_budget;
	size_t		per_pos;

	/* the KV bytes of one position in the pool, of the default type */
	llm_engine_config_default(&c);
	per_pos = llm_kv_block_bytes(model->config.n_layers, model->config.n_kv_heads, model->config.head_dim, 8,
								 c.kv_type) / 8;

	e = make_engine(8, per_pos * 8 * 300, 0, LLM_EVICT_H2O);
	serve(e, 8, 200, plain);
	llm_engine_free(e);
	e = make_engine(8, per_pos * 8 * 300, 400, LLM_EVICT_H2O);
	serve(e, 8, 200, budgeted);
	llm_engine_free(e);
	for (int i = 0; i < 8; i++)
	{
		TEST_CHECK(plain[i] && budgeted[i] && strcmp(plain[i], budgeted[i]) == 0,
				   "request %d: a budget above the length changed the text", i);
		free(plain[i]);
		free(budgeted[i]);
	}

	/*
	 * A pool of 4 * 300 positions: 8 sequences of 300 tokens need twice
	 * that without eviction (the newest are preempted and recompute), and
	 * 8 * (64 + one step) with a budget of 64: all run to the end at once.
	 */
	e = make_engine(8, per_pos * 4 * 300, 0, LLM_EVICT_H2O);
	serve(e, 8, 290, plain);
	llm_engine_stats(e, &st);
	preempted_plain = st.preemptions;
	llm_engine_free(e);
	e = make_engine(8, per_pos * 4 * 300, 64, LLM_EVICT_H2O);
	most_budget = serve(e, 8, 290, budgeted);
	llm_engine_stats(e, &st);
	TEST_CHECK(st.evicted_keys > 0, "no key was evicted");
	llm_engine_free(e);
	TEST_CHECK(most_budget == 8 && st.preemptions == 0 && preempted_plain > 0,
			   "with a budget of 64: %d running at once, %lld preemptions; without: %lld preemptions",
			   most_budget, (long long) st.preemptions, (long long) preempted_plain);
	for (int i = 0; i < 8; i++)
	{
		free(plain[i]);
		free(budgeted[i]);
	}
	e = make_engine(4, per_pos * 4 * 300, 64, LLM_EVICT_STREAMING);
	serve(e, 4, 200, plain);
	llm_engine_free(e);
	for (int i = 0; i < 4; i++)
		free(plain[i]);

	llm_engine_config_default(&c);
	c.kv_budget = 6;			/* 4 sinks + a window of 3 > 6 */
	e = NULL;
	TEST_CHECK(llm_engine_new(model, &c, &e, &err) == LLM_ERR_INVALID && e == NULL,
			   "a budget of 6 with 4 sinks was accepted");
}

/* Each way eviction can refuse gets its own status and message, and changes nothing. */
static void
test_evict_refusals(void)
{
	LlmKvParams kp = {.n_layers = 1,.n_kv_heads = 1,.head_dim = 4,.block_size = 4,.n_blocks = 4,.type = LLM_KV_F32};
	LlmEvictRule h2o = {.budget = 4,.sinks = 1,.recent = 2,.by_score = true};
	LlmEvictRule greedy = {.budget = 4,.sinks = 3,.recent = 2,.by_score = false};
	LlmKvMove	moves[8];
	LlmKvCache	kv;
	LlmKvSeq	seq = {0};
	LlmError	err;
	int			n_moves;

	/* no slot positions kept */
	TEST_CHECK(llm_kv_init(&kv, &kp, &err) == LLM_OK, "kv: %s", err.msg);
	llm_kv_seq_reserve(&kv, &seq, 8, &err);
	TEST_CHECK(llm_kv_seq_evict(&kv, &seq, 8, 7, &h2o, moves, &n_moves, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "slot positions") != NULL && seq.n_evicted == 0,
			   "eviction without slot positions: %s", err.msg);
	llm_kv_seq_release(&kv, &seq);
	llm_kv_seq_free(&seq);
	llm_kv_free(&kv);

	/* positions but no scores, for H2O; a rule protecting more than its budget */
	kp.slot_info = true;
	TEST_CHECK(llm_kv_init(&kv, &kp, &err) == LLM_OK, "kv: %s", err.msg);
	llm_kv_seq_reserve(&kv, &seq, 8, &err);
	TEST_CHECK(llm_kv_seq_evict(&kv, &seq, 8, 7, &h2o, moves, &n_moves, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "attention scores") != NULL && seq.n_evicted == 0,
			   "H2O eviction without scores: %s", err.msg);
	TEST_CHECK(llm_kv_seq_evict(&kv, &seq, 8, 7, &greedy, moves, &n_moves, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "protects 5 keys") != NULL && seq.n_evicted == 0,
			   "a rule protecting 5 keys of 4: %s", err.msg);
	llm_kv_seq_release(&kv, &seq);
	llm_kv_seq_free(&seq);
	llm_kv_free(&kv);
}

int
main(void)
{
	char		path[1024];
	LlmError	err;
	LlmEvictRule h2o = {.budget = 24,.sinks = 4,.recent = 12,.by_score = true};
	LlmEvictRule streaming = {.budget = 20,.sinks = 4,.recent = 16,.by_score = false};
	LlmEvictRule window = {.budget = 16,.sinks = 0,.recent = 16,.by_score = false};
	int32_t    *tokens;
	int			n_tokens;

	test_select();
	test_evict_refusals();
	snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
	if (llm_model_load(path, &model, &err) != LLM_OK)
	{
		fprintf(stderr, "could not load %s: %s\n", path, err.msg);
		return 1;
	}
	test_model_steps(LLM_KV_F32, &h2o, "h2o f32");
	h2o.mean_score = true;
	test_model_steps(LLM_KV_F32, &h2o, "h2o mean f32");
	h2o.mean_score = false;
	test_model_steps(LLM_KV_I8, &h2o, "h2o int8");
	test_model_steps(LLM_KV_F16, &streaming, "streaming f16");
	test_model_steps(LLM_KV_F32, &window, "window f32");
	tokens = test_tokenize(model, "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. "
					  "One day, she saw a big red ball in the park and ran to get it.", &n_tokens);
	test_budget_identity(tokens, n_tokens / 24, 24);
	free(tokens);
	test_engine();
	llm_model_free(model);
	return test_summary("h2o");
}
