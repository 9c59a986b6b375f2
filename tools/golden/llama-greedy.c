/*
 * llama-greedy.c
 *		The reference side of the golden test (tools/make-golden.sh, never
 *		built by make): llama.cpp's greedy continuation of each prompt, as
 *		token ids.  Built against llama.cpp's libllama; the engine is not
 *		involved.
 *
 * usage: llama-greedy MODEL.gguf N_NEW PROMPT...
 * For each prompt, two lines: "prompt <ids>" (the prompt as llama.cpp
 * tokenizes it for generation: BOS when the model asks for it, special
 * tokens parsed as llama-completion does) and "greedy <ids>" (N_NEW tokens,
 * each the argmax of the logits, lowest id on ties; stops early at an
 * end-of-generation token, which is included).  Every prompt runs in a fresh
 * context: F32 K and V cache, no flash attention, the prompt in one batch,
 * then one token a step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

/* Index of the largest of n values, lowest on ties. */
static int
argmax(const float *v, int n)
{
	int			best = 0;

	for (int i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return best;
}

/* Print one prompt's two lines; 0 on success. */
static int
run_prompt(struct llama_model *model, const char *prompt, int n_new)
{
	const struct llama_vocab *vocab = llama_model_get_vocab(model);
	int			n_vocab = llama_vocab_n_tokens(vocab);
	struct llama_context_params cp = llama_context_default_params();
	struct llama_context *ctx;
	llama_token ids[4096];
	int			n;

	cp.n_ctx = 1024;
	cp.n_batch = 1024;
	cp.n_ubatch = 1024;
	cp.n_threads = 2;
	cp.n_threads_batch = 2;
	cp.type_k = GGML_TYPE_F32;
	cp.type_v = GGML_TYPE_F32;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	n = llama_tokenize(vocab, prompt, (int32_t) strlen(prompt), ids, 4096, true, true);
	if (n < 1 || n + n_new > 1024)
	{
		fprintf(stderr, "llama-greedy: could not tokenize \"%s\" (%d)\n", prompt, n);
		return 1;
	}
	printf("prompt");
	for (int i = 0; i < n; i++)
		printf(" %d", ids[i]);
	printf("\n");
	if ((ctx = llama_init_from_model(model, cp)) == NULL)
	{
		fprintf(stderr, "llama-greedy: could not create a context\n");
		return 1;
	}
	printf("greedy");
	for (int step = 0, start = 0; step < n_new; step++)
	{
		int			tok;

		if (llama_decode(ctx, llama_batch_get_one(ids + start, n - start)) != 0)
		{
			fprintf(stderr, "llama-greedy: llama_decode failed\n");
			llama_free(ctx);
			return 1;
		}
		tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
		printf(" %d", tok);
		start = n;
		ids[n++] = tok;
		if (llama_vocab_is_eog(vocab, tok))
			break;
	}
	printf("\n");
	llama_free(ctx);
	return 0;
}

int
main(int argc, char **argv)
{
	struct llama_model_params mp = llama_model_default_params();
	struct llama_model *model;
	int			rc = 0;

	if (argc < 4)
	{
		fprintf(stderr, "usage: llama-greedy MODEL.gguf N_NEW PROMPT...\n");
		return 2;
	}
	llama_backend_init();
	mp.n_gpu_layers = 0;
	if ((model = llama_model_load_from_file(argv[1], mp)) == NULL)
	{
		fprintf(stderr, "llama-greedy: could not load %s\n", argv[1]);
		return 1;
	}
	for (int i = 3; i < argc && rc == 0; i++)
		rc = run_prompt(model, argv[i], atoi(argv[2]));
	llama_model_free(model);
	llama_backend_free();
	return rc;
}
