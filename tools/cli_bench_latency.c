/*
 * cli_bench_latency.c
 *		llm-cli bench --long N: what one long prompt does to everyone else.
 *
 * B decoders (-b, the first batch size) with random prompts of -p tokens
 * generate -n tokens each (EOS ignored).  Once all of them decode, every
 * step gives each one token, so a step's duration is their inter-token
 * latency.  Two runs: the decoders alone, then the same with one prompt of
 * N random tokens added as they start decoding; the table gives the
 * latency's median, 99th percentile and maximum over the decode steps --
 * ALONE_STEPS of them in the first run, in the second until the long
 * prompt has its first token (or a decoder is done) -- and the long
 * prompt's prefill rate.  Give -n enough tokens
 * to outlast the long prefill.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cli_options.h"
#include "engine.h"
#include "sampler.h"

#define ALONE_STEPS 200			/* decode steps measured in the run without the long prompt */

typedef struct LatencyRow
{
	int			n_steps;
	double		p50_ms;
	double		p99_ms;
	double		max_ms;
	double		long_tps;		/* the long prompt's tokens / seconds to its first token; 0 without one */
} LatencyRow;

/* qsort order of doubles. */
static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Add a request of n random tokens generating max_tokens (its id in *id); false with a message on failure. */
static bool
add_random(LlmEngine *e, LlmRng *rng, int n_vocab, int n, int max_tokens, int64_t *id)
{
	int32_t    *prompt = malloc((size_t) n * sizeof(int32_t));
	LlmRequest	r;
	LlmError	err;
	bool		ok;

	if (prompt == NULL)
		return false;
	for (int i = 0; i < n; i++)
		prompt[i] = (int32_t) (3 + llm_rng_next(rng) % (uint64_t) (n_vocab - 3));
	llm_request_default(&r);
	r.prompt = prompt;
	r.n_prompt = n;
	r.max_tokens = max_tokens;
	r.ignore_eos = true;
	ok = llm_engine_add(e, &r, id, &err) == LLM_OK;
	if (!ok)
		fprintf(stderr, "llm-cli bench: %s\n", err.msg);
	free(prompt);
	return ok;
}

/* One run: the decoders, and with long_n > 0 the long prompt beside them. */
static bool
run_latency(LlmModel *m, const CliOptions *o, int n_dec, int long_n, LatencyRow *row)
{
	LlmEngineConfig ec;
	LlmEngine  *e = NULL;
	LlmEngineStats st;
	LlmError	err;
	LlmRng		rng;
	int			n_vocab = llm_model_info(m)->n_vocab;
	int			max_steps = o->n_predict + 1;
	double	   *dt = malloc((size_t) max_steps * sizeof(double));
	double		t_long = 0.0;
	int64_t		long_id = -1;
	bool		decoding = false;
	bool		ok = false;

	memset(row, 0, sizeof(*row));
	cli_engine_config(o, &ec);
	ec.max_seqs = n_dec + 1;
	ec.n_ctx = (o->n_prompt + o->n_predict > long_n + 1 ? o->n_prompt + o->n_predict : long_n + 1);
	ec.kv_prefault = true;		/* as llm-cli bench: steady state */
	if (dt == NULL || llm_engine_new(m, &ec, &e, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli bench: %s\n", dt ? err.msg : "out of memory");
		goto done;
	}
	llm_rng_seed(&rng, 42);
	for (int s = 0; s < n_dec; s++)
		if (!add_random(e, &rng, n_vocab, o->n_prompt, o->n_predict, &long_id))
			goto done;
	long_id = -1;
	/* until a decoder is done, or the long prompt has its first token */
	while (llm_engine_busy(e))
	{
		double		t0 = cli_now();
		LlmResult	r;
		bool		stop = false;

		if (llm_engine_step(e, &err) != LLM_OK)
		{
			fprintf(stderr, "llm-cli bench: %s\n", err.msg);
			goto done;
		}
		if (decoding && row->n_steps < max_steps)
			dt[row->n_steps++] = cli_now() - t0;
		while (llm_engine_poll(e, &r))
		{
			if (r.id == long_id)
				row->long_tps = long_n / (cli_now() - t_long);
			stop = true;
		}
		if (stop || (long_n == 0 && row->n_steps >= ALONE_STEPS))
			break;
		llm_engine_stats(e, &st);
		if (!decoding && st.tokens_generated >= n_dec)
		{
			decoding = true;
			if (long_n > 0)
			{
				if (!add_random(e, &rng, n_vocab, long_n, 1, &long_id))
					goto done;
				t_long = cli_now();
			}
		}
	}
	ok = true;
done:
	if (ok && row->n_steps > 0)
	{
		qsort(dt, (size_t) row->n_steps, sizeof(double), cmp_double);
		row->p50_ms = 1e3 * dt[row->n_steps / 2];
		row->p99_ms = 1e3 * dt[(int) (0.99 * (row->n_steps - 1))];
		row->max_ms = 1e3 * dt[row->n_steps - 1];
	}
	free(dt);
	llm_engine_free(e);
	return ok;
}

/* llm-cli bench --long N: the latency table. */
int
cli_bench_latency(const CliOptions *o)
{
	LatencyRow	alone,
				beside;
	int			n_dec = o->n_batches > 0 ? o->batches[0] : 8;
	LlmModel   *m = cli_load_model(o);

	if (m == NULL)
		return 1;
	if (!run_latency(m, o, n_dec, 0, &alone) || !run_latency(m, o, n_dec, o->long_prompt, &beside))
	{
		llm_model_free(m);
		return 1;
	}
	printf("| decoders | long prompt | decode steps | ITL p50 ms | ITL p99 ms | ITL max ms | long prefill tok/s |\n");
	printf("|---------:|------------:|-------------:|-----------:|-----------:|-----------:|-------------------:|\n");
	printf("| %8d | %11s | %12d | %10.1f | %10.1f | %10.1f | %18s |\n", n_dec, "none", alone.n_steps,
		   alone.p50_ms, alone.p99_ms, alone.max_ms, "");
	printf("| %8d | %11d | %12d | %10.1f | %10.1f | %10.1f | %18.1f |\n", n_dec, o->long_prompt, beside.n_steps,
		   beside.p50_ms, beside.p99_ms, beside.max_ms, beside.long_tps);
	llm_model_free(m);
	return 0;
}
