/*
 * cli_generate.c
 *		llm-cli generate and tokenize.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cli_options.h"
#include "chat.h"
#include "engine.h"
#include "gguf.h"
#include "tokenizer.h"

/* Read all of stdin into a new buffer; NULL on failure. */
static char *
read_stdin(size_t *len)
{
	size_t		cap = 4096;
	size_t		n = 0;
	char	   *buf = malloc(cap);

	while (buf != NULL)
	{
		size_t		got = fread(buf + n, 1, cap - n, stdin);

		n += got;
		if (got == 0)
			break;
		if (n == cap)
		{
			char	   *b = realloc(buf, cap * 2);

			if (b == NULL)
				free(buf);
			buf = b;
			cap *= 2;
		}
	}
	*len = n;
	return buf;
}

/*
 * The grammar of --json-schema (text, or @FILE) or of the --choice
 * options, into r; *buf holds the text for the caller to free.  False,
 * with a message, when the schema file cannot be read or both are given.
 */
bool
cli_request_grammar(const CliOptions *o, LlmRequest *r, char **buf)
{
	size_t		len = 0;

	if (o->json_schema != NULL && o->n_choice > 0)
	{
		fprintf(stderr, "llm-cli: --json-schema and --choice exclude each other\n");
		return false;
	}
	if (o->json_schema != NULL)
	{
		if (o->json_schema[0] == '@' && (*buf = cli_read_file(o->json_schema + 1, &len)) == NULL)
		{
			fprintf(stderr, "llm-cli: could not read \"%s\"\n", o->json_schema + 1);
			return false;
		}
		r->grammar = LLM_GRAMMAR_JSON_SCHEMA;
		r->grammar_text = *buf != NULL ? *buf : o->json_schema;
		r->grammar_len = *buf != NULL ? len : strlen(o->json_schema);
	}
	else if (o->n_choice > 0)
	{
		for (int i = 0; i < o->n_choice; i++)
			len += strlen(o->choice[i]) + 1;
		if ((*buf = malloc(len)) == NULL)
			return false;
		len = 0;
		for (int i = 0; i < o->n_choice; i++)
		{
			memcpy(*buf + len, o->choice[i], strlen(o->choice[i]) + 1);
			len += strlen(o->choice[i]) + 1;
		}
		r->grammar = LLM_GRAMMAR_CHOICES;
		r->grammar_text = *buf;
		r->grammar_len = len;
	}
	return true;
}

/* llm-cli generate: the continuation on stdout, timings on stderr. */
int
cli_generate(int argc, char **argv)
{
	CliOptions	o;
	LlmEngineConfig ec;
	LlmModel   *m;
	LlmEngine  *e = NULL;
	LlmRequest	r;
	LlmResult	res;
	LlmError	err;
	int32_t    *ids = NULL;
	int			n_ids = 0;
	int64_t		id;
	double		t0,
				t1;
	int			rc = 1;
	char	   *grammar = NULL;

	if (!cli_parse_options(argc, argv,
						   "-m -p -n --temp --top-k --top-p --min-p --repeat-penalty --seed --threads --kv --ctx --stop --chat --system --quantize --calib "
						   "--kv-budget --evict --sinks --kv-mb --device --step-ms --json-schema --choice --speculative --draft-max "
						   "--draft-model",
						   &o))
		return 2;
	if (o.prompt == NULL)
	{
		fprintf(stderr, "llm-cli generate: -p PROMPT is required\n");
		return 2;
	}
	if ((m = cli_load_model(&o)) == NULL)
		return 1;
	if (!cli_load_draft(&o))
	{
		llm_model_free(m);
		return 1;
	}
	cli_engine_config(&o, &ec);
	ec.max_seqs = 1;
	if (llm_engine_new(m, &ec, &e, &err) != LLM_OK ||
		llm_chat_tokenize(m, o.system, o.system ? strlen(o.system) : 0, o.prompt, strlen(o.prompt), o.chat, &ids, &n_ids, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli generate: %s\n", err.msg);
		goto done;
	}
	llm_request_default(&r);
	r.prompt = ids;
	r.n_prompt = n_ids;
	r.max_tokens = o.n_predict;
	r.temperature = (float) o.temp;
	r.top_k = o.top_k;
	r.top_p = (float) o.top_p;
	r.min_p = (float) o.min_p;
	r.repeat_penalty = (float) o.repeat_penalty;
	r.seed = o.seed;
	r.stop = o.stop;
	r.n_stop = o.n_stop;
	if (!cli_request_grammar(&o, &r, &grammar))
		goto done;
	t0 = cli_now();
	if (llm_engine_add(e, &r, &id, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli generate: %s\n", err.msg);
		goto done;
	}
	while (llm_engine_busy(e))
		if (llm_engine_step(e, &err) != LLM_OK)
		{
			fprintf(stderr, "llm-cli generate: %s\n", err.msg);
			goto done;
		}
	t1 = cli_now();
	if (!llm_engine_poll(e, &res))
	{
		fprintf(stderr, "llm-cli generate: the sequence did not finish\n");
		goto done;
	}
	if (res.reason == LLM_FINISH_ERROR)
	{
		fprintf(stderr, "llm-cli generate: %s\n", res.error);
		if (res.text_len > 0)
			fprintf(stderr, "llm-cli generate: the output so far: %.*s\n", (int) res.text_len, res.text);
		goto done;
	}
	fwrite(res.text, 1, res.text_len, stdout);
	fflush(stdout);
	fprintf(stderr, "\n[%d prompt tokens, %d generated, finish: %s, %.3f s, %.1f tok/s, on %s%s%s]\n",
			res.n_prompt, res.n_generated, llm_finish_reason_name(res.reason), t1 - t0,
			(res.n_prompt + res.n_generated) / (t1 - t0), llm_engine_device(e),
			llm_engine_device_note(e)[0] != '\0' ? ": " : "", llm_engine_device_note(e));
	rc = 0;

done:
	free(grammar);
	free(ids);
	llm_engine_free(e);
	llm_model_free(m);
	llm_model_free(o.draft);
	return rc;
}

/* llm-cli tokenize: the token ids of stdin's text on one line. */
int
cli_tokenize(int argc, char **argv)
{
	CliOptions	o;
	LlmGguf    *g = NULL;
	LlmTokenizer *t = NULL;
	LlmError	err;
	char	   *text;
	size_t		len;
	int32_t    *ids = NULL;
	int			n_ids = 0;
	int			rc = 1;

	if (!cli_parse_options(argc, argv, "-m --bos --special", &o))
		return 2;
	if ((text = read_stdin(&len)) == NULL)
	{
		fprintf(stderr, "llm-cli tokenize: could not read standard input\n");
		return 1;
	}
	if (llm_gguf_open(o.model, &g, &err) != LLM_OK ||
		llm_tokenizer_load(g, &t, &err) != LLM_OK ||
		llm_tokenize(t, text, len, o.bos, o.special, &ids, &n_ids, &err) != LLM_OK)
		fprintf(stderr, "llm-cli tokenize: %s\n", err.msg);
	else
	{
		for (int i = 0; i < n_ids; i++)
			printf(i ? " %d" : "%d", ids[i]);
		printf("\n");
		rc = 0;
	}
	free(ids);
	free(text);
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	return rc;
}
