/*
 * llm-cli.c
 *		The engine's command line: generate, tokenize, perplexity, bench,
 *		quantize.  Output formats are the ones DESIGN.md promises.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Print the usage of every subcommand. */
static void
usage(FILE *f)
{
	fprintf(f,
			"usage: llm-cli COMMAND [OPTIONS]\n"
			"  generate   -m MODEL.gguf -p PROMPT [-n 64] [--temp 0] [--top-k 0] [--top-p 1]\n"
			"             [--min-p 0] [--repeat-penalty 1] [--seed N] [--threads N]\n"
			"             [--kv f16|f32|int8] [--ctx N] [--stop STRING]... [--chat [--system S]]\n"
			"             [--quantize SCHEME]\n"
			"             [--kv-budget N|P%%] [--evict h2o|streaming|window] [--sinks 4] [--kv-mb N]\n"
			"             [--device auto|cpu|cuda] [--step-ms 100] [--speculative off|ngram|draft] [--draft-model FILE] [--draft-max 8]\n"
			"  template   (-m MODEL.gguf | --template FILE.jinja [--bos TEXT --eos TEXT])\n"
			"             (--user U [--system S] | --messages FILE.json) [--tools FILE.json]\n"
			"             [--no-generation-prompt] [--enable-thinking true|false] [--date \"01 Dec 2026\"]\n"
			"             [--spans] (the chat prompt, exactly as rendered; --spans: the user text's\n"
			"             spans on stderr; exit 2: the template raised, 3: unsupported)\n"
			"  tokenize   -m MODEL_OR_VOCAB.gguf [--bos] [--special] < text\n"
			"  perplexity -m MODEL.gguf -f TEXT [-c 256] [--threads N] [--kv f16|f32|int8] [--quantize SCHEME]\n"
			"             [--kv-budget N|P%%] [--evict h2o|h2o_mean|streaming|window] [--sinks 4]\n"
			"  bench      -m MODEL.gguf [-p 128] [-n 64] [-b 1,4,16] [--threads N] [--kv f16|f32|int8]\n"
			"             [--shared-prefix N] [--no-prefix-cache] [--quantize SCHEME]\n"
			"             [--kv-mb N] [--kv-budget N|P%%] [--evict POLICY] [--sinks 4] [--device DEVICE]\n"
			"             [--step-ms 100] (steps paced to about this long; 0: only 512 tokens bound a step)\n"
			"             [--speculative off|ngram|draft] [--draft-model FILE] [--draft-max 8] [--prompts FILE [--chat]]\n"
			"             (drafts by prompt lookup or a draft model, verified: the same output)\n"
			"             (SCHEME: none, int8, int4 = int4_g128, int4_g32: float weights quantized at load)\n"
			"  quantize   IN.gguf OUT.gguf TYPE [--calib TEXT [--method awq|gptq|awq+gptq] [--act-order]\n"
			"             [--damp 0.01] [--calib-tokens 4096] [--threads N]]\n"
			"             (TYPE: F32, F16, BF16, Q8_0, Q4_0, INT8, INT4_G32, INT4_G128; --calib: AWQ by default)\n"
			"  actstats   -m FLOAT_MODEL.gguf --calib TEXT [--calib-tokens N] [--alpha 0.5] [--threshold 6]\n"
			"             [--threads N] (activation outliers; int8 activation error per token, per block,\n"
			"             with SmoothQuant, with LLM.int8() outliers in float)\n"
			"(--device auto or cuda loads the CUDA backend from $LLM_CUDA_MODULE, else from llm_cuda.so\n"
			" in the directory above llm-cli's; auto computes on the CPU when it or a GPU is missing)\n");
}

int
main(int argc, char **argv)
{
	if (argc < 2)
	{
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "generate") == 0)
		return cli_generate(argc - 1, argv + 1);
	if (strcmp(argv[1], "tokenize") == 0)
		return cli_tokenize(argc - 1, argv + 1);
	if (strcmp(argv[1], "perplexity") == 0)
		return cli_perplexity(argc - 1, argv + 1);
	if (strcmp(argv[1], "bench") == 0)
		return cli_bench(argc - 1, argv + 1);
	if (strcmp(argv[1], "template") == 0)
		return cli_template(argc - 1, argv + 1);
	if (strcmp(argv[1], "quantize") == 0)
		return cli_quantize(argc - 1, argv + 1);
	if (strcmp(argv[1], "actstats") == 0)
		return cli_actstats(argc - 1, argv + 1);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0)
	{
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "llm-cli: unknown command \"%s\"\n", argv[1]);
	usage(stderr);
	return 2;
}
