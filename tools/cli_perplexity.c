/*
 * cli_perplexity.c
 *		llm-cli perplexity, by llama.cpp's method: the text's tokens (BOS
 *		first when the model asks for it) cut into chunks of -c tokens, each
 *		chunk's first token set to BOS (again only when the model asks for
 *		BOS), and only the predictions of the second half of each chunk scored.
 *		With --kv-budget (tokens, or a percentage of the chunk) the chunks run
 *		one position a step under eviction (--evict, --sinks), so every
 *		prediction sees only the keys eviction kept; --kv-budget 100% is the
 *		same computation with nothing evicted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cli_options.h"
#include "forward.h"
#include "model.h"

/* Negative log-likelihood of token target under logits (n_vocab), in double. */
static double
token_nll(const float *logits, int n_vocab, int target)
{
	double		max = logits[0];
	double		sum = 0.0;

	for (int i = 1; i < n_vocab; i++)
		if (logits[i] > max)
			max = logits[i];
	for (int i = 0; i < n_vocab; i++)
		sum += exp((double) logits[i] - max);
	return -((double) logits[target] - max - log(sum));
}

/* Running totals of the scored predictions. */
typedef struct PplState
{
	int			n_vocab;
	int			chunk;
	double		nll;
	long		count;
} PplState;

/* Score the second half of one chunk's predictions. */
static void
ppl_chunk(void *arg, int c, const int32_t *tok, const float *logits)
{
	PplState   *p = arg;

	for (int j = p->chunk / 2; j < p->chunk - 1; j++)
	{
		p->nll += token_nll(logits + (size_t) j * p->n_vocab, p->n_vocab, tok[j + 1]);
		p->count++;
	}
	fprintf(stderr, "[%d] %.4f\n", c + 1, exp(p->nll / p->count));
}

/* Score one position's prediction when it is in the second half of its chunk. */
static void
ppl_token(void *arg, int c, int j, const int32_t *tok, const float *logits)
{
	PplState   *p = arg;

	if (j < p->chunk / 2)
		return;
	p->nll += token_nll(logits, p->n_vocab, tok[j + 1]);
	p->count++;
	if (j == p->chunk - 2 && (c + 1) % 16 == 0)
		fprintf(stderr, "[%d] %.4f\n", c + 1, exp(p->nll / p->count));
}

/* llm-cli perplexity: per-chunk running values, then "PPL = <value>". */
int
cli_perplexity(int argc, char **argv)
{
	CliOptions	o;
	LlmModel   *m = NULL;
	LlmError	err;
	char	   *text = NULL;
	size_t		len = 0;
	int32_t    *ids = NULL;
	int			n_ids = 0;
	int			n_chunks;
	PplState	p = {0};
	int			rc = 1;
	double		t0 = cli_now();

	LlmEvictRule rule;
	bool		stepwise;

	if (!cli_parse_options(argc, argv, "-m -f -c --threads --kv --quantize --calib --kv-budget --evict --sinks", &o))
		return 2;
	stepwise = o.kv_budget > 0 || o.kv_budget_pct > 0.0;
	if (llm_evict_rule_make(cli_kv_budget(&o, o.chunk), o.sinks, o.evict, &rule, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli perplexity: %s\n", err.msg);
		return 2;
	}
	if (o.file == NULL)
	{
		fprintf(stderr, "llm-cli perplexity: -f TEXT is required\n");
		return 2;
	}
	if ((text = cli_read_file(o.file, &len)) == NULL)
	{
		fprintf(stderr, "llm-cli perplexity: could not read \"%s\"\n", o.file);
		return 1;
	}
	if ((m = cli_load_model(&o)) == NULL)
		goto done;
	if (llm_tokenize(m->tokenizer, text, len, llm_tokenizer_add_bos(m->tokenizer), false, &ids, &n_ids, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli perplexity: %s\n", err.msg);
		goto done;
	}
	n_chunks = n_ids / o.chunk;
	if (n_chunks == 0)
	{
		fprintf(stderr, "llm-cli perplexity: the text has %d tokens, fewer than one chunk of %d\n", n_ids, o.chunk);
		goto done;
	}
	p.n_vocab = m->config.n_vocab;
	p.chunk = o.chunk;
	fprintf(stderr, "perplexity: %d tokens, %d chunks of %d\n", n_ids, n_chunks, o.chunk);
	if (stepwise)
		fprintf(stderr, "perplexity: one position a step, KV budget %d of %d (%d sinks, %d recent, %s)\n",
				rule.budget, o.chunk, rule.sinks, rule.recent, rule.by_score ? "heavy hitters" : "oldest first");
	if ((stepwise ?
		 llm_forward_chunks_evicting(m, ids, n_chunks, o.chunk, o.threads, o.kv, &rule, ppl_token, &p, &err) :
		 llm_forward_chunks(m, ids, n_chunks, o.chunk, o.threads, o.kv, NULL, true, ppl_chunk, &p, &err)) != LLM_OK)
	{
		fprintf(stderr, "llm-cli perplexity: %s\n", err.msg);
		goto done;
	}
	fprintf(stderr, "perplexity: %.2f s, %ld tokens scored\n", cli_now() - t0, p.count);
	printf("PPL = %.4f\n", exp(p.nll / p.count));
	rc = 0;

done:
	free(text);
	free(ids);
	llm_model_free(m);
	return rc;
}
