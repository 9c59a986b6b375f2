/*
 * test_golden_arch.c
 *		The engine against llama.cpp, token for token, on one small model of
 *		each architecture (test/data/golden/, written once by
 *		tools/make-golden.sh with llama.cpp; never regenerated in CI).
 *
 * Each golden file names its model: "model random ARGS" (rebuilt here by
 * bin/llm-random-model ARGS, deterministic from the seed in ARGS) or
 * "model convert PATH" (a real GGUF file, converted to F32 here by
 * bin/llm-cli quantize, as llama.cpp's llama-quantize converted it for the
 * golden run; skipped with a message when PATH is absent), then "prompts
 * FILE" (one prompt a line), "ppl_text FILE", "ppl_ctx N", "ppl VALUE" and,
 * per prompt, "prompt IDS" (llama.cpp's tokens of the prompt, BOS as the
 * model asks) and "greedy IDS" (llama.cpp's greedy continuation, an
 * end-of-generation token last when it stopped on one).
 *
 * Checks, with an F32 KV cache: the engine's tokens of each prompt equal
 * llama.cpp's; its greedy continuation, all prompts in one batch, equals
 * llama.cpp's exactly; and its perplexity of the text, by llama.cpp's method
 * (chunks of ppl_ctx tokens, BOS first, the second half of each chunk
 * scored: llm_forward_chunks), is within 0.1% of llama.cpp's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"
#include "engine.h"
#include "forward.h"
#include "model.h"
#include "tokenizer.h"

#define GOLDEN_DIR "test/data/golden"
#define MAX_PROMPTS 8
#define MAX_IDS 1024
#define LINE_MAX_LEN 8192

typedef struct Golden
{
	char		name[64];
	char		model_kind[16];	/* "random" or "convert" */
	char		model_arg[1024];
	char		prompts_file[256];
	char		ppl_text[256];
	int			ppl_ctx;
	double		ppl;
	int			n_prompts;
	int			n_prompt_ids[MAX_PROMPTS];
	int32_t		prompt_ids[MAX_PROMPTS][MAX_IDS];
	int			n_greedy[MAX_PROMPTS];
	int32_t		greedy[MAX_PROMPTS][MAX_IDS];
} Golden;

/* Parse space-separated ids from s into out (at most MAX_IDS); returns the count. */
static int
parse_ids(const char *s, int32_t *out)
{
	int			n = 0;
	char	   *end;

	while (n < MAX_IDS)
	{
		long		v = strtol(s, &end, 10);

		if (end == s)
			break;
		out[n++] = (int32_t) v;
		s = end;
	}
	return n;
}

/* Read golden file path into g; false (with a failed check) when malformed. */
static bool
golden_read(const char *path, Golden *g)
{
	FILE	   *f = fopen(path, "r");
	char	   *line = malloc(LINE_MAX_LEN);
	int			n_greedy = 0;

	memset(g, 0, sizeof(*g));
	if (f == NULL || line == NULL)
	{
		TEST_CHECK(false, "cannot read %s", path);
		if (f)
			fclose(f);
		free(line);
		return false;
	}
	while (fgets(line, LINE_MAX_LEN, f) != NULL)
	{
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (strncmp(line, "name ", 5) == 0)
			snprintf(g->name, sizeof(g->name), "%s", line + 5);
		else if (strncmp(line, "model ", 6) == 0)
		{
			const char *rest = line + 6;
			size_t		k = strcspn(rest, " ");

			snprintf(g->model_kind, sizeof(g->model_kind), "%.*s", (int) k, rest);
			snprintf(g->model_arg, sizeof(g->model_arg), "%s", rest[k] ? rest + k + 1 : "");
		}
		else if (strncmp(line, "prompts ", 8) == 0)
			snprintf(g->prompts_file, sizeof(g->prompts_file), "%s", line + 8);
		else if (strncmp(line, "ppl_text ", 9) == 0)
			snprintf(g->ppl_text, sizeof(g->ppl_text), "%s", line + 9);
		else if (strncmp(line, "ppl_ctx ", 8) == 0)
			g->ppl_ctx = atoi(line + 8);
		else if (strncmp(line, "ppl ", 4) == 0)
			g->ppl = strtod(line + 4, NULL);
		else if (strncmp(line, "prompt ", 7) == 0 && g->n_prompts < MAX_PROMPTS)
		{
			g->n_prompt_ids[g->n_prompts] = parse_ids(line + 7, g->prompt_ids[g->n_prompts]);
			g->n_prompts++;
		}
		else if (strncmp(line, "greedy ", 7) == 0 && n_greedy < g->n_prompts)
		{
			g->n_greedy[n_greedy] = parse_ids(line + 7, g->greedy[n_greedy]);
			n_greedy++;
		}
	}
	fclose(f);
	free(line);
	TEST_CHECK(g->name[0] && g->model_kind[0] && g->prompts_file[0] && g->ppl_text[0] && g->ppl_ctx > 0 &&
			   g->ppl > 0.0 && g->n_prompts > 0 && n_greedy == g->n_prompts, "%s is incomplete", path);
	return g->name[0] && g->n_prompts > 0 && n_greedy == g->n_prompts && g->ppl_ctx > 0;
}

/* Whether path exists. */
static bool
file_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Make golden g's model file into path (len bytes); false when skipped (a message says why) or failed. */
static bool
golden_model(const Golden *g, char *path, size_t len)
{
	char		cmd[4096];

	(void) mkdir("build/golden-models", 0755);
	snprintf(path, len, "build/golden-models/%s.gguf", g->name);
	if (strcmp(g->model_kind, "random") == 0)
		snprintf(cmd, sizeof(cmd), "bin/llm-random-model -o %s %s", path, g->model_arg);
	else if (strcmp(g->model_kind, "convert") == 0)
	{
		if (!file_exists(g->model_arg))
		{
			printf("test_golden_arch: skipping %s: %s is absent (tools/fetch-model.sh smollm2 fetches it)\n",
				   g->name, g->model_arg);
			return false;
		}
		snprintf(cmd, sizeof(cmd), "bin/llm-cli quantize %s %s F32 >/dev/null", g->model_arg, path);
	}
	else
	{
		TEST_CHECK(false, "%s: unknown model kind \"%s\"", g->name, g->model_kind);
		return false;
	}
	if (system(cmd) != 0)
	{
		TEST_CHECK(false, "%s: \"%s\" failed", g->name, cmd);
		return false;
	}
	return true;
}

/* Read the lines of path (at most max) into lines (malloc'd); returns the count. */
static int
read_lines(const char *path, char **lines, int max)
{
	FILE	   *f = fopen(path, "r");
	char		buf[LINE_MAX_LEN];
	int			n = 0;

	if (f == NULL)
		return 0;
	while (n < max && fgets(buf, sizeof(buf), f) != NULL)
	{
		buf[strcspn(buf, "\n")] = '\0';
		lines[n++] = strdup(buf);
	}
	fclose(f);
	return n;
}

/* Check the engine's prompt tokens and greedy continuations (all prompts in one batch) against g. */
static void
check_greedy(const Golden *g, LlmModel *m)
{
	char	   *prompts[MAX_PROMPTS] = {0};
	int			n_text = read_lines(g->prompts_file, prompts, MAX_PROMPTS);
	LlmEngineConfig c;
	LlmEngine  *e = NULL;
	LlmError	err;
	int64_t		ids[MAX_PROMPTS];
	LlmResult	r;

	TEST_CHECK(n_text == g->n_prompts, "%s: %s has %d prompts, the golden file %d", g->name, g->prompts_file,
			   n_text, g->n_prompts);
	llm_engine_config_default(&c);
	c.kv_type = LLM_KV_F32;
	c.n_threads = 2;
	c.n_ctx = 1024;
	c.device = LLM_DEVICE_CPU;
	if (n_text != g->n_prompts || llm_engine_new(m, &c, &e, &err) != LLM_OK)
	{
		TEST_CHECK(e != NULL, "%s: engine: %s", g->name, err.msg);
		goto done;
	}
	for (int i = 0; i < g->n_prompts; i++)
	{
		int32_t    *tok = NULL;
		int			n_tok = 0;
		LlmRequest	req;
		bool		same;

		ids[i] = -1;
		if (llm_chat_tokenize(m, NULL, 0, prompts[i], strlen(prompts[i]), false, &tok, &n_tok, &err) != LLM_OK)
		{
			TEST_CHECK(false, "%s: tokenize: %s", g->name, err.msg);
			continue;
		}
		same = n_tok == g->n_prompt_ids[i] && memcmp(tok, g->prompt_ids[i], (size_t) n_tok * sizeof(int32_t)) == 0;
		TEST_CHECK(same, "%s: prompt %d tokenizes to %d tokens, llama.cpp's %d differ", g->name, i, n_tok,
				   g->n_prompt_ids[i]);
		free(tok);
		/* the continuation starts from llama.cpp's own prompt tokens either way */
		llm_request_default(&req);
		req.prompt = g->prompt_ids[i];
		req.n_prompt = g->n_prompt_ids[i];
		req.max_tokens = g->n_greedy[i];
		req.temperature = 0.0f;
		TEST_CHECK(llm_engine_add(e, &req, &ids[i], &err) == LLM_OK, "%s: add: %s", g->name, err.msg);
	}
	while (llm_engine_busy(e))
		if (llm_engine_step(e, &err) != LLM_OK)
		{
			TEST_CHECK(false, "%s: step: %s", g->name, err.msg);
			goto done;
		}
	while (llm_engine_poll(e, &r))
		for (int i = 0; i < g->n_prompts; i++)
		{
			int			n_want = g->n_greedy[i];
			int			match = 0;

			if (r.id != ids[i])
				continue;
			/* the engine leaves out the end-of-generation token it stopped on; llama-greedy printed it */
			if (r.reason == LLM_FINISH_STOP)
			{
				n_want--;
				TEST_CHECK(n_want >= 0 && llm_tokenizer_is_eog(m->tokenizer, g->greedy[i][n_want]),
						   "%s: prompt %d: the engine stopped, llama.cpp went on", g->name, i);
			}
			while (match < r.n_generated && match < n_want && r.tokens[match] == g->greedy[i][match])
				match++;
			TEST_CHECK(r.n_generated == n_want && match == n_want,
					   "%s: prompt %d: %d of llama.cpp's %d tokens match (engine made %d, %s); first difference "
					   "at %d: %d vs %d", g->name, i, match, g->n_greedy[i], r.n_generated,
					   llm_finish_reason_name(r.reason), match, match < r.n_generated ? r.tokens[match] : -1,
					   match < g->n_greedy[i] ? g->greedy[i][match] : -1);
			printf("test_golden_arch: %s prompt %d: %d/%d tokens match llama.cpp%s\n", g->name, i,
				   match + (r.reason == LLM_FINISH_STOP && match == n_want), g->n_greedy[i],
				   r.reason == LLM_FINISH_STOP ? " (both stopped at end-of-generation)" : "");
		}
done:
	llm_engine_free(e);
	for (int i = 0; i < MAX_PROMPTS; i++)
		free(prompts[i]);
}

typedef struct PplSum
{
	int			n_vocab;
	int			chunk;
	double		nll;
	long		count;
} PplSum;

/* Add the second half of one chunk's predictions to the sum (llama.cpp's scoring, as llm-cli perplexity). */
static void
ppl_chunk(void *arg, int c, const int32_t *tok, const float *logits)
{
	PplSum	   *p = arg;

	(void) c;
	for (int j = p->chunk / 2; j < p->chunk - 1; j++)
	{
		const float *l = logits + (size_t) j * p->n_vocab;
		double		max = l[0];
		double		sum = 0.0;

		for (int v = 1; v < p->n_vocab; v++)
			if (l[v] > max)
				max = l[v];
		for (int v = 0; v < p->n_vocab; v++)
			sum += exp((double) l[v] - max);
		p->nll += -((double) l[tok[j + 1]] - max - log(sum));
		p->count++;
	}
}

/* Check the engine's perplexity of g's text against llama.cpp's, within 0.1%. */
static void
check_ppl(const Golden *g, LlmModel *m)
{
	FILE	   *f = fopen(g->ppl_text, "rb");
	char	   *text = malloc(1 << 20);
	size_t		len = 0;
	int32_t    *ids = NULL;
	int			n_ids = 0;
	PplSum		p = {m->config.n_vocab, g->ppl_ctx, 0.0, 0};
	LlmError	err;
	double		ppl;

	if (f == NULL || text == NULL)
	{
		TEST_CHECK(false, "%s: cannot read %s", g->name, g->ppl_text);
		if (f)
			fclose(f);
		free(text);
		return;
	}
	len = fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	text[len] = '\0';
	/* llama-perplexity: BOS first when the model asks for it, special tokens not parsed */
	if (llm_tokenize(m->tokenizer, text, len, llm_tokenizer_add_bos(m->tokenizer), false, &ids, &n_ids, &err) != LLM_OK ||
		llm_forward_chunks(m, ids, n_ids / g->ppl_ctx, g->ppl_ctx, 2, LLM_KV_F32, NULL, true, ppl_chunk, &p,
						   &err) != LLM_OK)
		TEST_CHECK(false, "%s: perplexity: %s", g->name, err.msg);
	else
	{
		ppl = exp(p.nll / p.count);
		TEST_CHECK(fabs(ppl - g->ppl) <= 0.001 * g->ppl, "%s: PPL %.4f, llama.cpp's %.4f", g->name, ppl, g->ppl);
		printf("test_golden_arch: %s PPL %.4f, llama.cpp %.4f (%+.4f%%, %d chunks of %d)\n", g->name, ppl, g->ppl,
			   100.0 * (ppl - g->ppl) / g->ppl, n_ids / g->ppl_ctx, g->ppl_ctx);
	}
	free(ids);
	free(text);
}

int
main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : getenv("LLM_GOLDEN_ONLY");
	char	   *names[64];
	int			n_names = 0;
	FILE	   *list = popen("ls " GOLDEN_DIR "/*.golden 2>/dev/null", "r");
	char		buf[512];

	if (!file_exists("bin/llm-random-model") || !file_exists("bin/llm-cli"))
	{
		TEST_CHECK(false, "run from the repository root after make (bin/llm-random-model, bin/llm-cli)");
		return test_summary("test_golden_arch");
	}
	while (list != NULL && n_names < 64 && fgets(buf, sizeof(buf), list) != NULL)
	{
		buf[strcspn(buf, "\n")] = '\0';
		names[n_names++] = strdup(buf);
	}
	if (list != NULL)
		pclose(list);
	TEST_CHECK(n_names > 0, "no golden files in %s", GOLDEN_DIR);
	for (int i = 0; i < n_names; i++)
	{
		Golden	   *g = malloc(sizeof(Golden));
		char		path[1100];
		LlmModel   *m = NULL;
		LlmError	err;

		if (g != NULL && golden_read(names[i], g) && (only == NULL || strcmp(only, g->name) == 0) &&
			golden_model(g, path, sizeof(path)))
		{
			if (llm_model_load(path, &m, &err) != LLM_OK)
				TEST_CHECK(false, "%s: load: %s", g->name, err.msg);
			else
			{
				check_greedy(g, m);
				check_ppl(g, m);
				llm_model_free(m);
			}
		}
		free(g);
		free(names[i]);
	}
	return test_summary("test_golden_arch");
}
