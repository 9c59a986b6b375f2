/*
 * test_invariance_engine.c
 *		The batch-invariance rule end to end: a request's generated tokens,
 *		the bits of each token's log-probability (which depends on every
 *		logit of the step) and its text depend only on (model, prompt,
 *		parameters, seed).
 *
 * For each model, 16 requests -- a shared prefix of more than two KV
 * blocks, then a different question each; every other one sampled at
 * temperature 0.9 with its own seed, the rest greedy -- run first each
 * alone (one sequence, prefix cache off, 2 threads): the reference.  Then
 * all 16 together, and every result must equal its reference bit for bit:
 *
 *   - at most 2, 5 and 16 sequences at once (the prefix then comes from the
 *     prefix cache: checked by its hit counter);
 *   - steps of 1, 7 and 64 tokens (prompts prefilled in chunks, decode
 *     sharing steps with other prompts' chunks);
 *   - mixed with two long prompts being prefilled;
 *   - in a KV pool too small for all, so sequences are preempted and
 *     recomputed (checked by the preemption counter);
 *   - on one thread;
 *   - after the model is loaded again.
 *
 * Models: stories260K, then every file named in LLM_TEST_MODELS (spaces
 * between; "PATH@int8", "PATH@int4", "PATH@int4_g32" load it quantized by the
 * engine's own schemes).  test/run_engine_tests.sh passes random models of
 * every type llm-random-model writes, the engine's own SPARSE24 (the F32
 * one pruned by llm-cli quantize), and the real Gemma 3 270M (Q4_K,
 * Q6_K, Q8_0, Q5_0 repacked) and SmolLM2-135M (Q4_1).
 */
#include "backend.h"
#include "cpu/backend_cpu.h"
#include "engine.h"
#include "kv.h"
#include "model.h"
#include "quant.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_REQ 16
#define N_NEW 12				/* new tokens per request */

static const char *prefix =
"You are a careful assistant. Read the question, think about what the person really wants to know, "
"and answer in one short, friendly sentence that a child could understand. Question: ";

static const char *questions[N_REQ] = {
	"Why is the sky blue?", "What do cats like to eat?", "How far away is the moon?",
	"Why do leaves fall in autumn?", "What is a rainbow made of?", "How do birds fly?",
	"Why does ice float on water?", "What makes thunder so loud?", "How do fish breathe?",
	"Why do we need to sleep?", "What is the biggest animal?", "How does a seed grow into a tree?",
	"Why is the sea salty?", "What do bees make?", "How many legs does a spider have?",
	"Where does the sun go at night?",
};

/* One request's outcome. */
typedef struct Outcome
{
	int			n;				/* generated tokens */
	int32_t		tokens[N_NEW];
	float		logprobs[N_NEW];
	char	   *text;
	LlmFinishReason reason;
} Outcome;

/* How the requests run together. */
typedef struct Scenario
{
	const char *name;
	int			max_seqs;
	int			max_batch_tokens;
	int			n_threads;
	int			pool_tokens;	/* KV pool in tokens (0: the default) */
	int			n_long;			/* long prompts added first */
	int			spec_step;		/* speculative decoding in steps of this many tokens; 0: off */
	bool		draft;			/* with a draft model (the model itself); else prompt lookup */
} Scenario;

static int32_t *req_ids[N_REQ];
static int	req_n[N_REQ];
static int32_t *long_ids;
static int	long_n;

/* An engine on m for scenario sc (f32 KV, blocks of 16). */
static LlmEngine *
make_engine(LlmModel *m, const Scenario *sc, bool prefix_cache)
{
	const LlmConfig *mc = &m->config;
	LlmEngineConfig c;
	LlmEngine  *e = NULL;
	LlmError	err;

	llm_engine_config_default(&c);
	c.n_threads = sc->n_threads;
	c.max_seqs = sc->max_seqs;
	c.max_batch_tokens = sc->max_batch_tokens;
	c.n_ctx = mc->n_ctx < 1024 ? mc->n_ctx : 1024;
	c.prefix_cache = prefix_cache;
	if (sc->spec_step > 0)
	{
		c.speculative = sc->draft ? LLM_SPEC_DRAFT : LLM_SPEC_NGRAM;
		c.draft_model = m;		/* the model drafts for itself: a vocabulary it shares, a drafter to test */
		c.spec_step_drafts = sc->spec_step;
		c.spec_knee_tokens = 1e6;	/* drafts are always worth it: every path runs */
	}
	if (sc->pool_tokens > 0)
		c.kv_cache_bytes = llm_kv_block_bytes(mc->n_layers, mc->n_kv_heads, mc->head_dim, c.kv_block_size, c.kv_type) *
			(size_t) ((sc->pool_tokens + c.kv_block_size - 1) / c.kv_block_size);
	if (llm_engine_new(m, &c, &e, &err) != LLM_OK)
	{
		TEST_CHECK(false, "engine for %s: %s", sc->name, err.msg);
		return NULL;
	}
	return e;
}

/* Stop strings of two requests, and the choices (NUL-separated) of two constrained ones. */
static const char *const stops[] = {" the", "."};
static const char choices[] = "the sky\0a big blue whale\0the sun and the moon";
static const char schema[] = "{\"type\": \"object\", \"properties\": {\"answer\": {\"enum\": [\"yes\", \"no\"]}}, "
"\"required\": [\"answer\"]}";

/*
 * Queue request i (or a long prompt for i < 0); returns its id.  Every
 * other one samples (its own seed); some have a repetition penalty, stop
 * strings, choices or a JSON Schema (whose keys the grammar forces).
 */
static int64_t
add_request(LlmEngine *e, int i)
{
	LlmRequest	r;
	LlmError	err;
	int64_t		id = -1;

	llm_request_default(&r);
	r.prompt = i >= 0 ? req_ids[i] : long_ids;
	r.n_prompt = i >= 0 ? req_n[i] : long_n;
	r.max_tokens = N_NEW;
	r.logprobs = true;
	r.draft_group = 7;			/* one statement's requests: prompt lookup searches the others' too */
	if (i >= 0 && i % 2 == 1)
	{
		r.temperature = 0.9f;
		r.top_p = 0.95f;
		r.seed = 1000 + (uint64_t) i;
	}
	if (i >= 0 && i % 4 == 2)
		r.repeat_penalty = 1.3f;
	if (i == 6 || i == 9)
	{
		r.stop = stops;
		r.n_stop = 2;
	}
	if (i == 10 || i == 13)
	{
		r.grammar = LLM_GRAMMAR_CHOICES;
		r.grammar_text = choices;
		r.grammar_len = sizeof(choices);
	}
	if (i == 14 || i == 15)
	{
		r.grammar = LLM_GRAMMAR_JSON_SCHEMA;
		r.grammar_text = schema;
		r.grammar_len = strlen(schema);
	}
	TEST_CHECK(llm_engine_add(e, &r, &id, &err) == LLM_OK, "add: %s", err.msg);
	return id;
}

/* Run the scenario's requests (all of them, or only request `only`) to the end into out; false on failure. */
static bool
run(LlmEngine *e, const Scenario *sc, int only, Outcome *out, LlmEngineStats *stats)
{
	int64_t		ids[N_REQ];
	LlmResult	r;
	LlmError	err;
	int			steps = 0;

	for (int l = 0; l < sc->n_long; l++)
		add_request(e, -1);
	for (int i = 0; i < N_REQ; i++)
		ids[i] = only < 0 || only == i ? add_request(e, i) : -1;
	while (llm_engine_busy(e))
		if (llm_engine_step(e, &err) != LLM_OK || ++steps > 200000)
		{
			TEST_CHECK(false, "%s: step failed: %s", sc->name, err.msg);
			return false;
		}
	while (llm_engine_poll(e, &r))
		for (int i = 0; i < N_REQ; i++)
			if (r.id == ids[i])
			{
				out[i].n = r.n_generated;
				memcpy(out[i].tokens, r.tokens, (size_t) r.n_generated * sizeof(int32_t));
				memcpy(out[i].logprobs, r.logprobs, (size_t) r.n_generated * sizeof(float));
				out[i].text = strdup(r.text);
				out[i].reason = r.reason;
			}
	llm_engine_stats(e, stats);
	return true;
}

/* Whether two outcomes are the same bits. */
static bool
same_outcome(const Outcome *a, const Outcome *b)
{
	return a->n == b->n && a->reason == b->reason && a->text != NULL && b->text != NULL &&
		memcmp(a->tokens, b->tokens, (size_t) a->n * sizeof(int32_t)) == 0 &&
		memcmp(a->logprobs, b->logprobs, (size_t) a->n * sizeof(float)) == 0 && strcmp(a->text, b->text) == 0;
}

/* Free the outcomes' texts. */
static void
free_outcomes(Outcome *o)
{
	for (int i = 0; i < N_REQ; i++)
	{
		free(o[i].text);
		o[i].text = NULL;
	}
}

/* Tokenize the requests (and the long prompt) for model m. */
static void
tokenize_requests(LlmModel *m)
{
	char		buf[1024];
	char	   *longp = malloc(16384);
	size_t		len = 0;

	for (int i = 0; i < N_REQ; i++)
	{
		snprintf(buf, sizeof(buf), "%s%s", prefix, questions[i]);
		req_ids[i] = test_tokenize(m, buf, &req_n[i]);
	}
	/* the long prompt: every question after the prefix, until about 300 tokens */
	len = (size_t) snprintf(longp, 16384, "%s", prefix);
	for (int i = 0; i < 3 * N_REQ; i++)
	{
		len += (size_t) snprintf(longp + len, 16384 - len, "%s ", questions[i % N_REQ]);
		long_ids = test_tokenize(m, longp, &long_n);
		if (long_n >= 300)
			break;
		free(long_ids);
		long_ids = NULL;
	}
	if (long_ids == NULL)
		long_ids = test_tokenize(m, longp, &long_n);
	free(longp);
}

/* Free what tokenize_requests made. */
static void
free_requests(void)
{
	for (int i = 0; i < N_REQ; i++)
		free(req_ids[i]);
	free(long_ids);
	long_ids = NULL;
}

/* Load path (quantized by scheme) or fail the test. */
static LlmModel *
load(const char *path, LlmQuantScheme scheme)
{
	LlmModel   *m = NULL;
	LlmError	err;

	if (llm_model_load_quantized(path, scheme, &m, &err) != LLM_OK)
	{
		TEST_CHECK(false, "load %s: %s", path, err.msg);
		return NULL;
	}
	return m;
}

/* The whole matrix on one model. */
static void
check_model(const char *label, const char *path, LlmQuantScheme scheme)
{
	const Scenario ref_sc = {"alone", 1, 512, 2, 0, 0, 0, false};
	Outcome		ref[N_REQ];
	Outcome		got[N_REQ];
	LlmEngineStats st;
	LlmModel   *m = load(path, scheme);
	int			pool;
	int			n_bad_total = 0;

	if (m == NULL)
		return;
	tokenize_requests(m);
	memset(ref, 0, sizeof(ref));
	memset(got, 0, sizeof(got));

	/* the reference: each request alone */
	for (int i = 0; i < N_REQ; i++)
	{
		LlmEngine  *e = make_engine(m, &ref_sc, false);

		if (e == NULL || !run(e, &ref_sc, i, ref, &st))
			goto done;
		llm_engine_free(e);
		TEST_CHECK(ref[i].text != NULL && ref[i].n > 0, "%s: request %d alone generated nothing", label, i);
	}

	/*
	 * The model kept its file's layout (or its own INT8/INT4, quantized at
	 * load), and the CPU backend serves the matrices its level has grouped
	 * kernels for from grouped copies (whose bits test_kernels checks): the
	 * engines above ran on those.
	 */
	{
		const LlmWeight *wq = &m->weights.layers[0].wq;
		LlmType		grouped = llm_type_grouped(wq->type);
		LlmBackend *be = NULL;
		LlmError	err;

		TEST_CHECK(llm_type_base(wq->type) == wq->type, "%s: the model holds %s as %s, a CPU backend's type", label,
				   wq->name, llm_type_traits(wq->type)->name);
		if (llm_backend_cpu_new(1, &be, &err) == LLM_OK && be->ops->prepare != NULL &&
			be->ops->prepare(be, m, &err) == LLM_OK)
			TEST_CHECK(grouped == LLM_TYPE_COUNT || !llm_cpu_has_kernel(grouped) ||
					   llm_group_blocks(wq->cols / 32) == 0 || llm_cpu_weight(be, wq)->type == grouped,
					   "%s: the CPU backend serves %s matrices grouped", label, llm_type_traits(wq->type)->name);
		llm_backend_free(be);
	}

	/* a pool of about 3 requests' worth of blocks */
	pool = 3 * (req_n[N_REQ - 1] + N_NEW + 32);
	{
		const Scenario scenarios[] = {
			{"2 at once", 2, 512, 2, 0, 0, 0, false},
			{"5 at once", 5, 512, 2, 0, 0, 0, false},
			{"16 at once", 16, 512, 2, 0, 0, 0, false},
			{"steps of 1 token", 16, 1, 2, 0, 0, 0, false},
			{"steps of 7 tokens", 16, 7, 2, 0, 0, 0, false},
			{"steps of 64 tokens", 16, 64, 2, 0, 0, 0, false},
			{"with two long prefills", 18, 64, 2, 0, 2, 0, false},
			{"preempted", 16, 512, 2, pool, 0, 0, false},
			{"1 thread", 16, 512, 1, 0, 0, 0, false},
			{"speculative, one at a time", 1, 512, 2, 0, 0, 16, false},
			{"speculative, 5 at once", 5, 512, 2, 0, 0, 16, false},
			{"speculative, 2 in steps of 7", 2, 7, 2, 0, 0, 16, false},
			{"speculative, long prefills", 18, 64, 2, 0, 2, 24, false},
			{"speculative, preempted", 16, 512, 2, pool, 0, 24, false},
			{"speculative, 16 sharing 3 drafts", 16, 512, 2, 0, 0, 3, false},
			{"draft model, one at a time", 1, 512, 2, 0, 0, 16, true},
			{"draft model, 5 at once", 5, 512, 2, 0, 0, 16, true},
			{"draft model, 2 in steps of 7", 2, 7, 2, 0, 0, 16, true},
			{"draft model, preempted", 16, 512, 2, pool, 0, 24, true},
		};

		for (int s = 0; s < (int) (sizeof(scenarios) / sizeof(scenarios[0])); s++)
		{
			const Scenario *sc = &scenarios[s];
			LlmEngine  *e = make_engine(m, sc, true);
			int			n_bad = 0;

			if (e == NULL || !run(e, sc, -1, got, &st))
				goto done;
			llm_engine_free(e);
			for (int i = 0; i < N_REQ; i++)
			{
				bool		same = same_outcome(&got[i], &ref[i]);

				TEST_CHECK(same, "%s, %s: request %d differs from alone:\n  got  %s\n  want %s", label, sc->name, i,
						   got[i].text ? got[i].text : "(none)", ref[i].text ? ref[i].text : "(none)");
				n_bad += !same;
			}
			if (sc->max_seqs > 1 && sc->max_batch_tokens >= 64)
				TEST_CHECK(st.prefix_hit_tokens > 0, "%s, %s: no prefix-cache hit", label, sc->name);
			if (sc->pool_tokens > 0 && sc->spec_step == 0)
				TEST_CHECK(st.preemptions > 0, "%s, %s: nothing was preempted", label, sc->name);
			/* (a tight pool may leave no room for drafts) */
			if (sc->spec_step > 0 && sc->pool_tokens == 0)
				TEST_CHECK(st.draft_tokens > 0, "%s, %s: nothing was drafted", label, sc->name);
			if (sc->spec_step > 0)
				printf("  %-28s %-28s %s (%lld drafted, %lld accepted)\n", label, sc->name,
					   n_bad == 0 ? "identical" : "DIFFERS", (long long) st.draft_tokens, (long long) st.draft_accepted);
			else
				printf("  %-28s %-28s %s\n", label, sc->name, n_bad == 0 ? "identical" : "DIFFERS");
			n_bad_total += n_bad;
			free_outcomes(got);
		}
	}

	/* the model loaded again */
	llm_model_free(m);
	m = load(path, scheme);
	if (m != NULL)
	{
		const Scenario sc = {"reloaded, 16 at once", 16, 512, 2, 0, 0, 0, false};
		LlmEngine  *e = make_engine(m, &sc, true);
		int			n_bad = 0;

		if (e != NULL && run(e, &sc, -1, got, &st))
		{
			for (int i = 0; i < N_REQ; i++)
			{
				bool		same = same_outcome(&got[i], &ref[i]);

				TEST_CHECK(same, "%s, reloaded: request %d differs", label, i);
				n_bad += !same;
			}
			printf("  %-28s %-24s %s\n", label, sc.name, n_bad == 0 ? "identical" : "DIFFERS");
		}
		llm_engine_free(e);
		free_outcomes(got);
	}
done:
	free_outcomes(ref);
	free_outcomes(got);
	free_requests();
	llm_model_free(m);
	(void) n_bad_total;
}

/* stories260K, then the models of LLM_TEST_MODELS. */
int
main(void)
{
	char		path[4096];
	const char *list = getenv("LLM_TEST_MODELS");

	snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
	check_model("stories260K F32", path, LLM_QUANT_NONE);
	while (list != NULL && *list != '\0')
	{
		size_t		len = strcspn(list, " ");
		char	   *at;
		LlmQuantScheme scheme = LLM_QUANT_NONE;
		const char *base;

		if (len > 0 && len < sizeof(path))
		{
			memcpy(path, list, len);
			path[len] = '\0';
			if ((at = strrchr(path, '@')) != NULL)
			{
				*at = '\0';
				TEST_CHECK(llm_quant_scheme_parse(at + 1, &scheme), "unknown scheme %s", at + 1);
			}
			base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
			{
				char		label[64];

				snprintf(label, sizeof(label), "%.40s%s%s", base, at != NULL ? " " : "", at != NULL ? at + 1 : "");
				check_model(label, path, scheme);
			}
		}
		list += len;
		while (*list == ' ')
			list++;
	}
	return test_summary("invariance_engine");
}
