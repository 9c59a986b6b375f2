/*
 * bench_constrained.c
 *		Constrained decoding against unconstrained decoding, in the engine:
 *
 *   - tokens/s of json_schema decoding and of plain decoding of exactly as
 *     many tokens per sequence (ignore_eos, max_tokens from the constrained
 *     run), at 1 and 16 sequences, prompts and prefill the same, runs
 *     interleaved and the median of REPS kept;
 *   - the time to compute a token mask (µs): replaying the 16 constrained
 *     outputs through a fresh constraint, the first row (every state new:
 *     the trie walk), the other 15 (states shared with earlier rows), and
 *     a second replay (every mask cached);
 *   - the time to build the vocabulary trie.
 *
 * Build and run from the repository root (after make):
 *   make build/bench_constrained
 *   build/bench_constrained MODEL.gguf [threads] [chat 0|1]
 * Prints "key value" lines (bench/semantic_bench.sh tabulates them).
 */
#include "constraint.h"
#include "json.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_SEQS	16
#define MAX_NEW 96
#define REPS	5

static const char schema[] =
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":24},"
	"\"age\":{\"type\":\"integer\"},\"city\":{\"type\":\"string\",\"maxLength\":24},"
	"\"sentiment\":{\"enum\":[\"positive\",\"negative\",\"neutral\"]}},"
	"\"required\":[\"name\",\"age\",\"city\",\"sentiment\"]}";

static const char *const people[N_SEQS] = {
	"Alice is 31 and lives in Paris; she loves her job.", "Bob, 45, moved to Berlin and hates the weather.",
	"Carol lives in Rome and turned 27 in May.", "Dan is a 60 year old farmer from Ohio, tired of the rain.",
	"Eve, 22, studies in Tokyo and is thrilled about it.", "Frank is 38 and runs a cafe in Lisbon.",
	"Grace, 51, a nurse in Toronto, feels exhausted.", "Hank is 19, lives in Austin, and just got a dog.",
	"Ivy is 44 and teaches in Dublin; the pay is poor.", "Jack, 70, retired to Nice and enjoys the sea.",
	"Kate is 29 and codes in Seattle; she is bored.", "Leo, 35, cooks in Naples and loves it.",
	"Mia is 26, a dancer in Madrid, very happy.", "Ned, 53, drives a taxi in Cairo; traffic is awful.",
	"Olga is 41 and paints in Prague.", "Paul, 33, sells bikes in Amsterdam and is doing fine."
};

/* Seconds on a monotonic clock. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Exit with a message when st is not LLM_OK. */
static void
check(LlmStatus st, const LlmError *err, const char *what)
{
	if (st != LLM_OK)
	{
		fprintf(stderr, "bench_constrained: %s: %s\n", what, err->msg);
		exit(1);
	}
}

static LlmModel *model;
static int32_t *prompt_ids[N_SEQS];
static int	prompt_len[N_SEQS];
static int32_t out_tokens[N_SEQS][MAX_NEW];
static int	out_len[N_SEQS];
static bool print_samples;		/* print two outputs of the next 16-sequence run */

/*
 * Run n sequences at once on engine e, constrained or not (then each
 * generates exactly out_len[i] tokens); returns the seconds, and the tokens
 * generated into *n_tokens.  The constrained run records its outputs.
 */
static double
run(LlmEngine *e, int n, bool constrained, int64_t *n_tokens)
{
	LlmError	err;
	LlmResult	res;
	int64_t		ids[N_SEQS];
	double		t0,
				t;

	t0 = now();
	for (int i = 0; i < n; i++)
	{
		LlmRequest	r;

		llm_request_default(&r);
		r.prompt = prompt_ids[i];
		r.n_prompt = prompt_len[i];
		if (constrained)
		{
			r.max_tokens = MAX_NEW;
			r.grammar = LLM_GRAMMAR_JSON_SCHEMA;
			r.grammar_text = schema;
			r.grammar_len = strlen(schema);
		}
		else
		{
			r.max_tokens = out_len[i];
			r.ignore_eos = true;
		}
		check(llm_engine_add(e, &r, &ids[i], &err), &err, "add");
	}
	while (llm_engine_busy(e))
		check(llm_engine_step(e, &err), &err, "step");
	t = now() - t0;
	*n_tokens = 0;
	while (llm_engine_poll(e, &res))
	{
		for (int i = 0; i < n; i++)
			if (ids[i] == res.id && constrained)
			{
				out_len[i] = res.n_generated < MAX_NEW ? res.n_generated : MAX_NEW;
				memcpy(out_tokens[i], res.tokens, (size_t) out_len[i] * sizeof(int32_t));
				if (n == N_SEQS && i < 2 && print_samples)
					printf("sample_output_%d %s%s\n", i, res.text,
						   res.reason == LLM_FINISH_ERROR ? " (cut at max_tokens)" : "");
			}
		*n_tokens += res.n_generated;
		llm_engine_release(e, res.id);
	}
	return t;
}

/* Compare doubles for qsort. */
static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* Replay the recorded outputs through a fresh constraint, timing every mask. */
static void
time_masks(void)
{
	const LlmTokenizer *tok = llm_model_tokenizer(model);
	LlmConstraintCache *cache;
	LlmConstraint *c;
	LlmError	err;
	double		t0 = now();
	double		first = 0,
				rest = 0,
				warm = 0,
				worst = 0;
	int			n_first = 0,
				n_rest = 0,
				n_warm = 0;
	int64_t		states,
				masks;

	check(llm_constraint_cache_new(tok, &cache, &err), &err, "cache");
	check(llm_constraint_get(cache, LLM_GRAMMAR_JSON_SCHEMA, schema, strlen(schema), &c, &err), &err, "compile");
	printf("trie_and_compile_ms %.1f\n", (now() - t0) * 1e3);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < N_SEQS; i++)
		{
			LlmConstraintCursor cur;

			check(llm_constraint_cursor_init(c, &cur, &err), &err, "cursor");
			for (int k = 0; k < out_len[i]; k++)
			{
				const uint64_t *mask;
				double		t1 = now(),
							dt;

				check(llm_constraint_mask(c, &cur, &mask, &err), &err, "mask");
				dt = now() - t1;
				if (pass == 1)
				{
					warm += dt;
					n_warm++;
				}
				else if (i == 0)
				{
					first += dt;
					n_first++;
				}
				else
				{
					rest += dt;
					n_rest++;
				}
				if (dt > worst)
					worst = dt;
				if (!llm_constraint_advance(c, &cur, out_tokens[i][k]))
					break;		/* the end-of-generation token */
			}
			llm_constraint_cursor_free(&cur);
		}
	llm_constraint_cache_counts(cache, &states, &masks);
	printf("mask_us_first_row %.1f\n", n_first ? first / n_first * 1e6 : 0);
	printf("mask_us_other_rows %.1f\n", n_rest ? rest / n_rest * 1e6 : 0);
	printf("mask_us_cached %.2f\n", n_warm ? warm / n_warm * 1e6 : 0);
	printf("mask_us_worst %.1f\n", worst * 1e6);
	printf("automaton_states %lld\nmasks_computed %lld\n", (long long) states, (long long) masks);
	llm_constraint_put(cache, c);
	llm_constraint_cache_free(cache);
}

int
main(int argc, char **argv)
{
	int			threads = argc > 2 ? atoi(argv[2]) : 2;
	bool		chat = argc > 3 && atoi(argv[3]) != 0;
	LlmError	err;
	LlmEngineConfig ec;
	LlmEngine  *e;

	if (argc < 2)
	{
		fprintf(stderr, "usage: bench_constrained MODEL.gguf [threads] [chat 0|1]\n");
		return 2;
	}
	check(llm_model_load(argv[1], &model, &err), &err, "load");
	printf("vocabulary %d\n", llm_tokenizer_n_vocab(llm_model_tokenizer(model)));
	for (int i = 0; i < N_SEQS; i++)
	{
		char		prompt[512];

		snprintf(prompt, sizeof(prompt), "Extract name, age, city and sentiment as JSON.\n\nText: %s\n\nJSON:",
				 people[i]);
		check(llm_chat_tokenize(model, NULL, 0, prompt, strlen(prompt), chat, &prompt_ids[i], &prompt_len[i], &err),
			  &err, "tokenize");
	}
	/*
	 * One engine for every run, as the worker keeps one: the prefix cache
	 * off, so that no run reuses another's prompt; the first constrained
	 * run builds the trie and the schema's automaton (their cost is the
	 * "first request" figures below), later ones find them.
	 */
	llm_engine_config_default(&ec);
	ec.n_threads = threads;
	ec.max_seqs = N_SEQS;
	ec.n_ctx = 512;
	ec.prefix_cache = false;
	check(llm_engine_new(model, &ec, &e, &err), &err, "engine");
	for (int n = 1; n <= N_SEQS; n *= N_SEQS)
	{
		double		tc[REPS],
					tu[REPS];
		int64_t		nc = 0,
					nu = 0;

		print_samples = true;
		run(e, n, true, &nc);	/* warm-up, and the outputs to match */
		print_samples = false;
		for (int r = 0; r < REPS; r++)
		{
			tc[r] = run(e, n, true, &nc);
			tu[r] = run(e, n, false, &nu);
		}
		qsort(tc, REPS, sizeof(double), cmp_double);
		qsort(tu, REPS, sizeof(double), cmp_double);
		printf("seqs_%d_tokens %lld\n", n, (long long) nc);
		printf("seqs_%d_constrained_tok_s %.1f\n", n, nc / tc[REPS / 2]);
		printf("seqs_%d_plain_tok_s %.1f\n", n, nu / tu[REPS / 2]);
		printf("seqs_%d_ratio %.3f\n", n, (nc / tc[REPS / 2]) / (nu / tu[REPS / 2]));
	}
	llm_engine_free(e);
	time_masks();
	for (int i = 0; i < N_SEQS; i++)
		free(prompt_ids[i]);
	llm_model_free(model);
	return 0;
}
