/*
 * cli_perplexity.c
 *		llm-cli perplexity, by llama.cpp's method: the text's tokens (BOS
 *		first) cut into chunks of -c tokens, each chunk's first token set to
 *		BOS, and only the predictions of the second half of each chunk scored.
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

/* llm-cli perplexity: per-chunk running values, then "PPL = <value>". */
int
cli_perplexity(int argc, char **argv)
{
	CliOptions	o;
	LlmModel   *m = NULL;
	LlmBackend *be = NULL;
	LlmKvCache	kv = {0};
	LlmKvSeq	seq = {0};
	LlmRunState rs = {0};
	LlmError	err;
	char	   *text = NULL;
	size_t		len = 0;
	int32_t    *ids = NULL;
	int			n_ids = 0;
	float	   *logits = NULL;
	int32_t    *pos = NULL;
	LlmKvSeq  **seqs = NULL;
	bool	   *want = NULL;
	double		nll = 0.0;
	long		count = 0;
	int			n_ctx,
				n_chunks,
				n_vocab;
	int			rc = 1;
	double		t0 = cli_now();

	if (!cli_parse_options(argc, argv, "-m -f -c --threads --kv --quantize --calib", &o))
		return 2;
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
	n_ctx = o.chunk;
	n_vocab = m->config.n_vocab;
	if (llm_tokenize(m->tokenizer, text, len, true, false, &ids, &n_ids, &err) != LLM_OK ||
		llm_backend_cpu_new(o.threads, &be, &err) != LLM_OK ||
		llm_kv_init(&kv, m->config.n_layers, m->config.n_kv_heads * m->config.head_dim, 16,
					(n_ctx + 15) / 16, o.kv, false, &err) != LLM_OK ||
		llm_run_state_init(&rs, &m->config, n_ctx, &err) != LLM_OK ||
		llm_kv_seq_reserve(&kv, &seq, n_ctx, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli perplexity: %s\n", err.msg);
		goto done;
	}
	n_chunks = n_ids / n_ctx;
	if (n_chunks == 0)
	{
		fprintf(stderr, "llm-cli perplexity: the text has %d tokens, fewer than one chunk of %d\n", n_ids, n_ctx);
		goto done;
	}
	logits = malloc((size_t) n_ctx * n_vocab * sizeof(float));
	pos = malloc((size_t) n_ctx * sizeof(int32_t));
	seqs = malloc((size_t) n_ctx * sizeof(LlmKvSeq *));
	want = malloc((size_t) n_ctx * sizeof(bool));
	if (!logits || !pos || !seqs || !want)
	{
		fprintf(stderr, "llm-cli perplexity: out of memory\n");
		goto done;
	}
	for (int j = 0; j < n_ctx; j++)
	{
		pos[j] = j;
		seqs[j] = &seq;
		want[j] = true;
	}
	fprintf(stderr, "perplexity: %d tokens, %d chunks of %d\n", n_ids, n_chunks, n_ctx);
	for (int c = 0; c < n_chunks; c++)
	{
		int32_t    *tok = ids + (size_t) c * n_ctx;
		int32_t		saved = tok[0];
		LlmBatch	b = {n_ctx, tok, pos, seqs, want};

		tok[0] = llm_tokenizer_bos(m->tokenizer) >= 0 ? llm_tokenizer_bos(m->tokenizer) : saved;
		if (llm_forward(m, be, &kv, &rs, &b, logits, &err) != LLM_OK)
		{
			fprintf(stderr, "llm-cli perplexity: %s\n", err.msg);
			goto done;
		}
		tok[0] = saved;
		for (int j = n_ctx / 2; j < n_ctx - 1; j++)
		{
			nll += token_nll(logits + (size_t) j * n_vocab, n_vocab, tok[j + 1]);
			count++;
		}
		fprintf(stderr, "[%d] %.4f\n", c + 1, exp(nll / count));
	}
	fprintf(stderr, "perplexity: %.2f s, %ld tokens scored\n", cli_now() - t0, count);
	printf("PPL = %.4f\n", exp(nll / count));
	rc = 0;

done:
	free(text);
	free(ids);
	free(logits);
	free(pos);
	free(seqs);
	free(want);
	llm_run_state_free(&rs);
	llm_kv_seq_release(&kv, &seq);
	llm_kv_seq_free(&seq);
	llm_kv_free(&kv);
	llm_backend_free(be);
	llm_model_free(m);
	return rc;
}
