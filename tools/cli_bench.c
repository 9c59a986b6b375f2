/*
 * cli_bench.c
 *		llm-cli bench: prefill and decode throughput through the engine, for
 *		several numbers of concurrent sequences, printed as a table.
 *
 * For each batch size b, b sequences with random prompts of -p tokens are
 * added at once and generate -n tokens each (EOS ignored).  Prefill time
 * runs until the last step that computed prompt tokens (early sequences
 * decode alongside, as continuous batching does); decode tok/s counts the
 * tokens of the steps that computed no prompt token, over their time, so
 * neither phase's figure carries the other's work.  The KV pool's pages
 * are written before the clock starts, as a long-running server's pool is
 * after its first requests (and as llama.cpp clears its KV buffer when it
 * makes a context).
 * With --shared-prefix N the first N prompt tokens are the same for every
 * sequence (the prefix cache's case; --no-prefix-cache turns it off).  KV
 * utilization is positions stored over the capacity of the blocks held,
 * averaged over the decode-only steps.  With --kv-mb the KV pool has a fixed
 * size, and with --kv-budget sequences evict; the table then shows how many
 * sequences ran at once (mean over the decode-only steps) and how
 * often one had to be preempted.  With --long N: the inter-token latency
 * table instead (cli_bench_latency.c).
 *
 * With --prompts FILE the prompts are FILE's lines instead (sequence s takes
 * line s modulo their number; --chat wraps each in the model's chat format,
 * --json-schema or --choice constrains the output), and each sequence ends
 * at EOS or -n tokens: the case of real jobs, where speculative decoding
 * (--speculative ngram; the drafted and accepted columns) finds text to copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cli_options.h"
#include "chat.h"
#include "engine.h"
#include "sampler.h"

typedef struct BenchRow
{
	int			batch;
	double		prefill_tps;
	double		decode_tps;
	double		seconds;
	double		kv_util;		/* mean over decode steps, percent */
	int64_t		prefix_hits;	/* prompt tokens served from the prefix cache */
	double		mean_running;	/* sequences running at once, mean over the decode steps */
	int64_t		preemptions;
	double		mean_prompt;	/* prompt tokens per sequence */
	int64_t		drafted;		/* speculative decoding: tokens drafted, and accepted */
	int64_t		accepted;
	int64_t		rounds;
} BenchRow;

/* Real prompts (--prompts), tokenized. */
typedef struct BenchPrompts
{
	int32_t   **ids;
	int		   *n;
	int			count;
} BenchPrompts;

/* Read and tokenize the lines of o->prompts_file (--chat: in the chat format); false with a message. */
static bool
prompts_load(LlmModel *m, const CliOptions *o, BenchPrompts *p)
{
	size_t		len = 0;
	char	   *text = cli_read_file(o->prompts_file, &len);
	char	   *line;
	char	   *save = NULL;
	LlmError	err;

	memset(p, 0, sizeof(*p));
	if (text == NULL)
	{
		fprintf(stderr, "llm-cli bench: could not read \"%s\"\n", o->prompts_file);
		return false;
	}
	for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
	{
		int32_t   **ids = realloc(p->ids, (size_t) (p->count + 1) * sizeof(int32_t *));
		int		   *n = realloc(p->n, (size_t) (p->count + 1) * sizeof(int));

		if (ids != NULL)
			p->ids = ids;
		if (n != NULL)
			p->n = n;
		if (ids == NULL || n == NULL ||
			llm_chat_tokenize(m, NULL, 0, line, strlen(line), o->chat, &p->ids[p->count], &p->n[p->count], &err) != LLM_OK)
		{
			fprintf(stderr, "llm-cli bench: %s\n", ids && n ? err.msg : "out of memory");
			free(text);
			return false;
		}
		p->count++;
	}
	free(text);
	if (p->count == 0)
		fprintf(stderr, "llm-cli bench: \"%s\" has no prompt\n", o->prompts_file);
	return p->count > 0;
}

/* Free what prompts_load made. */
static void
prompts_free(BenchPrompts *p)
{
	for (int i = 0; i < p->count; i++)
		free(p->ids[i]);
	free(p->ids);
	free(p->n);
}

/* Run one batch size; false with a message on failure. */
static bool
bench_one(LlmModel *m, const CliOptions *o, const BenchPrompts *real, int batch, BenchRow *row)
{
	LlmEngineConfig ec;
	LlmEngine  *e = NULL;
	LlmEngineStats st;
	LlmError	err;
	LlmRng		rng;
	int32_t    *prompt = malloc((size_t) o->n_prompt * sizeof(int32_t));
	int			n_vocab = llm_model_info(m)->n_vocab;
	LlmEngineStats prev;
	double		t0,
				t_prefilled,
				t1;
	double		decode_time = 0.0;
	int64_t		decode_tokens = 0;
	double		util_sum = 0.0;
	double		running_sum = 0.0;
	int			util_steps = 0;
	int64_t		prompt_tokens = 0;
	int			max_prompt = o->n_prompt;
	char	   *grammar = NULL;
	bool		ok = false;

	memset(row, 0, sizeof(*row));
	cli_engine_config(o, &ec);
	ec.max_seqs = batch;
	for (int i = 0; real != NULL && i < real->count; i++)
		max_prompt = i == 0 || real->n[i] > max_prompt ? real->n[i] : max_prompt;
	ec.n_ctx = max_prompt + o->n_predict;
	ec.kv_budget = cli_kv_budget(o, ec.n_ctx);
	ec.kv_prefault = true;		/* steady state: no step pays the pool's first page faults */
	if (prompt == NULL || llm_engine_new(m, &ec, &e, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli bench: %s\n", prompt ? err.msg : "out of memory");
		goto done;
	}
	llm_rng_seed(&rng, (uint64_t) batch);
	for (int s = 0; s < batch; s++)
	{
		LlmRequest	r;
		int64_t		id;
		LlmStatus	added;

		if (s == 0)
			for (int i = 0; i < o->n_prompt; i++)
				prompt[i] = (int32_t) (3 + llm_rng_next(&rng) % (uint64_t) (n_vocab - 3));
		else
			for (int i = o->shared_prefix; i < o->n_prompt; i++)
				prompt[i] = (int32_t) (3 + llm_rng_next(&rng) % (uint64_t) (n_vocab - 3));
		llm_request_default(&r);
		r.prompt = prompt;
		r.n_prompt = o->n_prompt;
		r.max_tokens = o->n_predict;
		r.ignore_eos = true;
		if (real != NULL)
		{
			r.prompt = real->ids[s % real->count];
			r.n_prompt = real->n[s % real->count];
			r.ignore_eos = false;
			if (!cli_request_grammar(o, &r, &grammar))
				goto done;
		}
		prompt_tokens += r.n_prompt;
		added = llm_engine_add(e, &r, &id, &err);
		free(grammar);
		grammar = NULL;
		if (added != LLM_OK)
		{
			fprintf(stderr, "llm-cli bench: %s\n", err.msg);
			goto done;
		}
	}
	t0 = cli_now();
	t_prefilled = t0;
	llm_engine_stats(e, &prev);
	while (llm_engine_busy(e))
	{
		double		ts = cli_now();
		double		te;

		if (llm_engine_step(e, &err) != LLM_OK)
		{
			fprintf(stderr, "llm-cli bench: %s\n", err.msg);
			goto done;
		}
		te = cli_now();
		llm_engine_stats(e, &st);
		if (st.tokens_prefilled != prev.tokens_prefilled)
			t_prefilled = te;
		else
		{
			/* a step of decode only */
			decode_time += te - ts;
			decode_tokens += st.tokens_generated - prev.tokens_generated;
			if (st.kv_capacity > 0)
				util_sum += 100.0 * (double) st.kv_tokens / (double) st.kv_capacity;
			running_sum += st.n_running;
			util_steps++;
		}
		prev = st;
	}
	t1 = cli_now();
	llm_engine_stats(e, &st);
	row->kv_util = util_steps ? util_sum / util_steps : 0.0;
	row->mean_running = util_steps ? running_sum / util_steps : 0.0;
	row->prefix_hits = st.prefix_hit_tokens;
	row->preemptions = st.preemptions;
	row->batch = batch;
	row->mean_prompt = (double) prompt_tokens / batch;
	row->drafted = st.draft_tokens;
	row->accepted = st.draft_accepted;
	row->rounds = st.draft_rounds;
	row->prefill_tps = (double) prompt_tokens / (t_prefilled - t0);
	row->decode_tps = decode_time > 0.0 ? (double) decode_tokens / decode_time : 0.0;
	row->seconds = t1 - t0;
	ok = true;

done:
	free(prompt);
	free(grammar);
	llm_engine_free(e);
	return ok;
}

/* llm-cli bench: a table of prefill and decode tok/s per batch size. */
int
cli_bench(int argc, char **argv)
{
	CliOptions	o;
	LlmModel   *m;
	const LlmModelInfo *info;
	BenchRow	rows[CLI_MAX_BATCHES];

	BenchPrompts real = {0};

	if (!cli_parse_options(argc, argv, "-m -p -n -b --threads --kv --shared-prefix --no-prefix-cache --quantize --calib "
						   "--kv-mb --kv-budget --evict --sinks --device --step-ms --long --speculative --draft-max "
						   "--prompts --chat --json-schema --choice --draft-model", &o))
		return 2;
	if (o.long_prompt > 0)
		return cli_bench_latency(&o);
	if (o.shared_prefix > o.n_prompt)
	{
		fprintf(stderr, "llm-cli bench: --shared-prefix %d is longer than the prompt (-p %d)\n", o.shared_prefix, o.n_prompt);
		return 2;
	}
	if ((m = cli_load_model(&o)) == NULL)
		return 1;
	if (!cli_load_draft(&o))
	{
		llm_model_free(m);
		return 1;
	}
	info = llm_model_info(m);
	fprintf(stderr, "model: %s (%s), %.1fM parameters, %s; %d threads\n", info->name, info->arch,
			info->n_params / 1e6, info->weight_types, o.threads);
	if (o.prompts_file != NULL && !prompts_load(m, &o, &real))
	{
		prompts_free(&real);
		llm_model_free(m);
		llm_model_free(o.draft);
		return 1;
	}
	for (int i = 0; i < o.n_batches; i++)
		if (!bench_one(m, &o, o.prompts_file != NULL ? &real : NULL, o.batches[i], &rows[i]))
		{
			prompts_free(&real);
			llm_model_free(m);
			llm_model_free(o.draft);
			return 1;
		}
	printf("| batch | prompt | new | prefill tok/s | decode tok/s | seconds | KV util %% | prefix hits | running | preemptions "
		   "| drafted | accepted | rounds |\n");
	printf("|------:|-------:|----:|--------------:|-------------:|--------:|----------:|------------:|--------:|------------:"
		   "|--------:|---------:|-------:|\n");
	for (int i = 0; i < o.n_batches; i++)
		printf("| %5d | %6.0f | %3d | %13.1f | %12.1f | %7.2f | %9.1f | %11lld | %7.1f | %11lld | %7lld | %8lld | %6lld |\n",
			   rows[i].batch, rows[i].mean_prompt, o.n_predict, rows[i].prefill_tps, rows[i].decode_tps, rows[i].seconds,
			   rows[i].kv_util, (long long) rows[i].prefix_hits, rows[i].mean_running, (long long) rows[i].preemptions,
			   (long long) rows[i].drafted, (long long) rows[i].accepted, (long long) rows[i].rounds);
	prompts_free(&real);
	llm_model_free(m);
	llm_model_free(o.draft);
	return 0;
}
