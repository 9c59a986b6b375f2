/*
 * cli_options.h
 *		The options of llm-cli's subcommands, parsed by one function.
 */
#ifndef LLM_CLI_OPTIONS_H
#define LLM_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

#define CLI_MAX_STOPS 16
#define CLI_MAX_BATCHES 16

typedef struct CliOptions
{
	const char *model;			/* -m */
	const char *prompt;			/* -p (generate) */
	const char *file;			/* -f */
	int			n_predict;		/* -n */
	int			n_prompt;		/* -p (bench) */
	int			chunk;			/* -c */
	int			batches[CLI_MAX_BATCHES];	/* -b */
	int			n_batches;
	double		temp;
	int			top_k;
	double		top_p;
	double		min_p;
	double		repeat_penalty;
	uint64_t	seed;
	int			threads;
	LlmKvType	kv;
	int			kv_budget;		/* --kv-budget N: keys kept per sequence; 0 = no eviction */
	double		kv_budget_pct;	/* --kv-budget P%: percent of a reference length; 0 = not given */
	LlmEvictPolicy evict;		/* --evict */
	int			sinks;			/* --sinks */
	int			step_ms;		/* --step-ms: pace steps to this many ms (0: off; -1: the engine's default) */
	int			kv_mb;			/* --kv-mb: KV pool size; 0 = the engine's default */
	LlmSpeculative speculative; /* --speculative off|ngram|draft */
	const char *draft_path;		/* --draft-model FILE: the draft model of --speculative draft */
	LlmModel   *draft;			/* loaded by cli_load_draft */
	int			draft_max;		/* --draft-max: drafted tokens per step and sequence; 0 = the engine's default */
	LlmDevice	device;			/* --device */
	int			ctx;
	const char *stop[CLI_MAX_STOPS];
	int			n_stop;
	const char *json_schema;	/* generate --json-schema: a JSON Schema's text, or @FILE */
	const char *choice[CLI_MAX_STOPS];	/* generate --choice, repeated */
	int			n_choice;
	bool		bos;			/* tokenize: put BOS first */
	bool		special;
	bool		chat;			/* generate: wrap the prompt in the model's chat format */
	const char *system;			/* --system: a system prompt (generate --chat, template) */
	const char *user;			/* template --user */
	const char *messages_file;	/* template --messages FILE.json: a JSON array of messages */
	const char *tools_file;		/* template --tools FILE.json: a JSON array of tools */
	bool		no_generation_prompt;	/* template --no-generation-prompt */
	int			enable_thinking;	/* template --enable-thinking: -1 not given, 0 false, 1 true */
	bool		spans;			/* template --spans: print the user spans on stderr */
	const char *template_file;	/* template --template FILE.jinja */
	const char *bos_text;		/* template --bos TEXT */
	const char *eos_text;		/* template --eos TEXT */
	const char *date;			/* template --date "01 Dec 2026": strftime_now's date */
	int			shared_prefix;	/* bench: leading prompt tokens common to all sequences */
	int			long_prompt;	/* bench --long N: inter-token latency beside one prompt of N tokens */
	const char *prompts_file;	/* bench --prompts FILE: real prompts, one a line, instead of random tokens */
	bool		no_prefix_cache;	/* bench: turn the prefix cache off */
	LlmQuantScheme quantize;	/* quantize float weights at load (--quantize) */
	const char *calib;			/* calibration text for AWQ scales (--calib) */
} CliOptions;

/*
 * Parse argv (argv[0] is the subcommand) into o.  allowed lists the options
 * the subcommand takes, e.g. "-m -p -n --temp"; others are refused.
 */
bool		cli_parse_options(int argc, char **argv, const char *allowed, CliOptions *o);

/* Engine configuration from the options (threads, context, KV type, pool, eviction, device). */
void		cli_engine_config(const CliOptions *o, LlmEngineConfig *c);

/* The KV budget in tokens: --kv-budget N, or P% of length. */
int			cli_kv_budget(const CliOptions *o, int length);

/* Read a whole file into a new NUL-terminated buffer; NULL on failure. */
char	   *cli_read_file(const char *path, size_t *len);

/* Read the calibration text at path (--calib), printing why not; NULL on failure. */
char	   *cli_read_calib(const char *path, size_t *len);

/* Load the model named by -m (quantized as --quantize / --calib ask), printing any error; NULL on failure. */
LlmModel   *cli_load_model(const CliOptions *o);

/* Load --draft-model into o->draft for --speculative draft; false with a message (true when none is wanted). */
bool		cli_load_draft(CliOptions *o);

#endif							/* LLM_CLI_OPTIONS_H */
