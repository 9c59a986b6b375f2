/*
 * fuzz_model.c
 *		libFuzzer target: arbitrary bytes as a model file.
 *
 * Each input goes through the loaders a model file meets:
 *  1. llm_gguf_open_memory(), then llm_tokenizer_load() and
 *     llm_chat_template_load() on the parsed metadata, so that the tokenizer
 *     and the template parser see every vocabulary that parses, whether or not
 *     the weights would load;
 *  2. llm_model_load() on a file holding the bytes (a memfd, reached by its
 *     /proc/self/fd path: the real path-based loader, mmap included):
 *     architecture, hyper-parameters, every tensor's shape and type, RoPE
 *     tables, and the tokenizer against the embedding's rows;
 *  3. when the model loads and is small, an engine over it on the CPU
 *     generates two greedy tokens from a tokenized chat prompt, so that
 *     odd but accepted hyper-parameters (head sizes, windows, soft-caps,
 *     RoPE settings) reach the forward pass.
 * Every status must come with a message; token ids must be in range.
 * Seeded with stories260K and small random models of every architecture.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "chat.h"
#include "engine.h"
#include "gguf.h"
#include "tokenizer.h"

#define FUZZ_MODEL_MAX_PARAMS (4 << 20)	/* larger models load but are not run */

static int	model_fd = -1;

/* Create the memfd that holds each input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	model_fd = memfd_create("fuzz-model", MFD_CLOEXEC);
	if (model_fd < 0)
	{
		perror("memfd_create");
		exit(1);
	}
	return 0;
}

/* Check that n ids are all tokens of t. */
static void
check_ids(const LlmTokenizer *t, const int32_t *ids, int n, const char *what)
{
	FUZZ_CHECK(n >= 0 && (n == 0 || ids != NULL), "%s: %d ids", what, n);
	for (int i = 0; i < n; i++)
		FUZZ_CHECK(ids[i] >= 0 && ids[i] < llm_tokenizer_n_vocab(t) && llm_token_text(t, ids[i]) != NULL,
				   "%s: id %d of %d tokens", what, ids[i], llm_tokenizer_n_vocab(t));
}

/* Check that a failed call left a message naming what failed. */
static void
check_failure(LlmStatus st, const LlmError *err, const char *what)
{
	FUZZ_CHECK(err->status == st && err->msg[0] != '\0', "%s failed (%s) without a message", what,
			   llm_status_name(st));
}

/* Stage 1: the tokenizer and chat template of parsed metadata g. */
static void
fuzz_metadata(const LlmGguf *g)
{
	LlmTokenizer *t = NULL;
	LlmJinja   *tmpl = NULL;
	LlmError	err;
	LlmStatus	st;
	static const char text[] = "Hello world! <s> 12 \xC3\xA9t\xC3\xA9\n\n<|im_start|>\xFF";
	int32_t    *ids = NULL;
	int			n = 0;
	char	   *out = NULL;
	size_t		len = 0;

	llm_error_clear(&err);
	st = llm_tokenizer_load(g, &t, &err);
	if (st != LLM_OK)
		check_failure(st, &err, "llm_tokenizer_load");
	else
	{
		for (int special = 0; special <= 1; special++)
		{
			st = llm_tokenize(t, text, sizeof(text) - 1, special, special, &ids, &n, &err);
			FUZZ_CHECK(st == LLM_OK, "a loaded tokenizer fails on text: %s", err.msg);
			check_ids(t, ids, n, "llm_tokenize");
			st = llm_detokenize(t, ids, n, &out, &len, &err);
			FUZZ_CHECK(st == LLM_OK && out != NULL && strlen(out) <= len, "detokenize: %s", err.msg);
			free(out);
			free(ids);
		}
		llm_tokenizer_free(t);
	}
	st = llm_chat_template_load(g, "fuzz", &tmpl, &err);
	if (st == LLM_OK)
		FUZZ_CHECK(tmpl != NULL, "llm_chat_template_load succeeded without a template");
	else
		check_failure(st, &err, "llm_chat_template_load");
	llm_jinja_free(tmpl);
}

/* Stage 3: two greedy tokens from a chat prompt (or a plain one) on the CPU. */
static void
fuzz_generate(LlmModel *m)
{
	const LlmTokenizer *t = llm_model_tokenizer(m);
	LlmEngineConfig c;
	LlmEngine  *e = NULL;
	LlmRequest	r;
	LlmResult	res;
	LlmError	err;
	LlmStatus	st;
	int32_t    *ids = NULL;
	int			n = 0;
	int64_t		id;
	int			polled = 0;

	if (llm_model_info(m)->n_params > FUZZ_MODEL_MAX_PARAMS)
		return;
	st = llm_chat_tokenize(m, NULL, 0, "Once upon a time", 16, llm_model_has_chat_template(m), &ids, &n, &err);
	if (st != LLM_OK)
	{
		check_failure(st, &err, "llm_chat_tokenize");
		st = llm_chat_tokenize(m, NULL, 0, "Once upon a time", 16, false, &ids, &n, &err);
		FUZZ_CHECK(st == LLM_OK, "a plain prompt does not tokenize: %s", err.msg);
	}
	check_ids(t, ids, n, "llm_chat_tokenize");
	llm_engine_config_default(&c);
	c.n_ctx = 32;
	c.max_seqs = 1;
	c.max_batch_tokens = 16;
	c.step_time_ms = 0;
	c.device = LLM_DEVICE_CPU;
	st = llm_engine_new(m, &c, &e, &err);
	if (st != LLM_OK)
	{
		check_failure(st, &err, "llm_engine_new");
		free(ids);
		return;
	}
	llm_request_default(&r);
	r.prompt = ids;
	r.n_prompt = n;
	r.max_tokens = 2;
	st = llm_engine_add(e, &r, &id, &err);
	if (st != LLM_OK)
		check_failure(st, &err, "llm_engine_add");
	else
	{
		for (int step = 0; step < 64 && llm_engine_busy(e); step++)
		{
			st = llm_engine_step(e, &err);
			if (st != LLM_OK)
			{
				check_failure(st, &err, "llm_engine_step");
				break;
			}
		}
		while (llm_engine_poll(e, &res))
		{
			FUZZ_CHECK(res.id == id && res.n_generated <= 2, "result %lld: %d tokens", (long long) res.id,
					   res.n_generated);
			if (res.reason != LLM_FINISH_ERROR)
				check_ids(t, res.tokens, res.n_generated, "generated");
			polled++;
		}
		FUZZ_CHECK(polled == 1 || llm_engine_busy(e), "%d results for one request", polled);
		llm_engine_release(e, id);
	}
	llm_engine_free(e);
	free(ids);
}

/* One input: its metadata's tokenizer and template, then the whole model. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	LlmGguf    *g = NULL;
	LlmModel   *m = NULL;
	LlmError	err;
	LlmStatus	st;
	char		path[64];
	size_t		done = 0;

	llm_error_clear(&err);
	if (llm_gguf_open_memory(data, size, &g, &err) == LLM_OK)
	{
		fuzz_metadata(g);
		llm_gguf_close(g);
	}

	if (ftruncate(model_fd, 0) != 0)
		return 0;
	while (done < size)
	{
		ssize_t		w = pwrite(model_fd, data + done, size - done, (off_t) done);

		if (w <= 0)
			return 0;
		done += (size_t) w;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", model_fd);
	st = llm_model_load(path, &m, &err);
	if (st != LLM_OK)
	{
		FUZZ_CHECK(m == NULL, "a failed load returned a model");
		check_failure(st, &err, "llm_model_load");
		return 0;
	}
	fuzz_generate(m);
	llm_model_free(m);
	return 0;
}
