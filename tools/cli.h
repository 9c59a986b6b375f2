/*
 * cli.h
 *		The subcommands of llm-cli, each in its own file.
 */
#ifndef LLM_CLI_H
#define LLM_CLI_H

int			cli_generate(int argc, char **argv);
int			cli_tokenize(int argc, char **argv);
int			cli_perplexity(int argc, char **argv);
int			cli_bench(int argc, char **argv);
int			cli_quantize(int argc, char **argv);
int			cli_template(int argc, char **argv);

struct CliOptions;
/* llm-cli bench --long N: inter-token latency of -b decoders alone and beside one N-token prompt. */
int			cli_bench_latency(const struct CliOptions *o);

#endif							/* LLM_CLI_H */
