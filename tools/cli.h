/*
 * cli.h
 *		The subcommands of llm-cli, each in its own file.
 */
#ifndef LLM_CLI_H
#define LLM_CLI_H

#include <stdbool.h>

int			cli_generate(int argc, char **argv);
int			cli_tokenize(int argc, char **argv);
int			cli_perplexity(int argc, char **argv);
int			cli_bench(int argc, char **argv);
int			cli_quantize(int argc, char **argv);
int			cli_template(int argc, char **argv);
int			cli_actstats(int argc, char **argv);

struct CliOptions;
/* llm-cli bench --long N: inter-token latency of -b decoders alone and beside one N-token prompt. */
int			cli_bench_latency(const struct CliOptions *o);

/*
 * The grammar of --json-schema (text, or @FILE) or of the --choice options,
 * into r (cli_generate.c); *buf holds the text for the caller to free.
 */
struct LlmRequest;
bool		cli_request_grammar(const struct CliOptions *o, struct LlmRequest *r, char **buf);

#endif							/* LLM_CLI_H */
