/*
 * cli_options.c
 *		Option parsing shared by llm-cli's subcommands (see cli_options.h).
 */
#include "cli_options.h"

#include <stdlib.h>

#include "awq.h"

#include <stdio.h>
#include <string.h>

#include "cli_common.h"

/* Whether opt is a whole word of the space-separated list allowed. */
static bool
option_allowed(const char *allowed, const char *opt)
{
	size_t		n = strlen(opt);

	for (const char *p = strstr(allowed, opt); p != NULL; p = strstr(p + 1, opt))
		if ((p == allowed || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return true;
	return false;
}

/* Parse "1,4,16" into o->batches. */
static bool
parse_batches(const char *s, CliOptions *o)
{
	char		buf[256];
	char	   *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	o->n_batches = 0;
	for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
	{
		long		v;

		if (o->n_batches == CLI_MAX_BATCHES)
		{
			fprintf(stderr, "too many batch sizes in -b (at most %d)\n", CLI_MAX_BATCHES);
			return false;
		}
		if (!cli_parse_int("-b", tok, 1, 4096, &v))
			return false;
		o->batches[o->n_batches++] = (int) v;
	}
	return o->n_batches > 0;
}

/* Parse argv into o, accepting only the options in allowed. */
bool
cli_parse_options(int argc, char **argv, const char *allowed, CliOptions *o)
{
	memset(o, 0, sizeof(*o));
	o->n_predict = 64;
	o->n_prompt = 128;
	o->chunk = 256;
	o->batches[0] = 1;
	o->batches[1] = 4;
	o->batches[2] = 16;
	o->n_batches = 3;
	o->top_p = 1.0;
	o->repeat_penalty = 1.0;
	o->threads = 1;
	o->kv = LLM_KV_F32;

	for (int i = 1; i < argc; i++)
	{
		const char *opt = argv[i];
		bool		has_value = !(strcmp(opt, "--bos") == 0 ||
								  strcmp(opt, "--special") == 0 || strcmp(opt, "--chat") == 0 ||
								  strcmp(opt, "--no-prefix-cache") == 0);
		const char *val = NULL;
		long		iv;
		double		fv;

		if (!option_allowed(allowed, opt))
		{
			fprintf(stderr, "llm-cli %s: unknown option \"%s\"\n", argv[0], opt);
			return false;
		}
		if (has_value)
		{
			if (i + 1 >= argc)
			{
				fprintf(stderr, "llm-cli %s: option %s needs a value\n", argv[0], opt);
				return false;
			}
			val = argv[++i];
		}
		if (strcmp(opt, "-m") == 0)
			o->model = val;
		else if (strcmp(opt, "-f") == 0)
			o->file = val;
		else if (strcmp(opt, "-p") == 0 && strcmp(argv[0], "bench") == 0)
		{
			if (!cli_parse_int(opt, val, 1, 1 << 20, &iv))
				return false;
			o->n_prompt = (int) iv;
		}
		else if (strcmp(opt, "-p") == 0)
			o->prompt = val;
		else if (strcmp(opt, "-n") == 0)
		{
			if (!cli_parse_int(opt, val, 0, 1 << 24, &iv))
				return false;
			o->n_predict = (int) iv;
		}
		else if (strcmp(opt, "-c") == 0)
		{
			if (!cli_parse_int(opt, val, 2, 1 << 20, &iv))
				return false;
			o->chunk = (int) iv;
		}
		else if (strcmp(opt, "-b") == 0)
		{
			if (!parse_batches(val, o))
				return false;
		}
		else if (strcmp(opt, "--temp") == 0)
		{
			if (!cli_parse_float(opt, val, &fv))
				return false;
			o->temp = fv;
		}
		else if (strcmp(opt, "--top-k") == 0)
		{
			if (!cli_parse_int(opt, val, 0, 1 << 24, &iv))
				return false;
			o->top_k = (int) iv;
		}
		else if (strcmp(opt, "--top-p") == 0)
		{
			if (!cli_parse_float(opt, val, &fv))
				return false;
			o->top_p = fv;
		}
		else if (strcmp(opt, "--min-p") == 0)
		{
			if (!cli_parse_float(opt, val, &fv))
				return false;
			o->min_p = fv;
		}
		else if (strcmp(opt, "--repeat-penalty") == 0)
		{
			if (!cli_parse_float(opt, val, &fv))
				return false;
			o->repeat_penalty = fv;
		}
		else if (strcmp(opt, "--seed") == 0)
		{
			if (!cli_parse_int(opt, val, 0, __LONG_MAX__, &iv))
				return false;
			o->seed = (uint64_t) iv;
		}
		else if (strcmp(opt, "--threads") == 0)
		{
			if (!cli_parse_int(opt, val, 1, 1024, &iv))
				return false;
			o->threads = (int) iv;
		}
		else if (strcmp(opt, "--ctx") == 0)
		{
			if (!cli_parse_int(opt, val, 1, 1 << 24, &iv))
				return false;
			o->ctx = (int) iv;
		}
		else if (strcmp(opt, "--kv") == 0)
		{
			if (strcmp(val, "f32") == 0)
				o->kv = LLM_KV_F32;
			else if (strcmp(val, "f16") == 0)
				o->kv = LLM_KV_F16;
			else
			{
				fprintf(stderr, "llm-cli %s: unsupported KV type \"%s\" (supported: f32, f16)\n", argv[0], val);
				return false;
			}
		}
		else if (strcmp(opt, "--stop") == 0)
		{
			if (o->n_stop == CLI_MAX_STOPS)
			{
				fprintf(stderr, "llm-cli %s: at most %d stop strings\n", argv[0], CLI_MAX_STOPS);
				return false;
			}
			o->stop[o->n_stop++] = val;
		}
		else if (strcmp(opt, "--bos") == 0)
			o->bos = true;
		else if (strcmp(opt, "--special") == 0)
			o->special = true;
		else if (strcmp(opt, "--chat") == 0)
			o->chat = true;
		else if (strcmp(opt, "--no-prefix-cache") == 0)
			o->no_prefix_cache = true;
		else if (strcmp(opt, "--calib") == 0)
			o->calib = val;
		else if (strcmp(opt, "--quantize") == 0)
		{
			if (!llm_quant_scheme_parse(val, &o->quantize))
			{
				fprintf(stderr, "llm-cli %s: unknown quantization \"%s\" (none, int8, int4, int4_g32, int4_g128)\n",
						argv[0], val);
				return false;
			}
		}
		else if (strcmp(opt, "--shared-prefix") == 0)
		{
			if (!cli_parse_int(opt, val, 0, 1 << 20, &iv))
				return false;
			o->shared_prefix = (int) iv;
		}
	}
	if (o->calib != NULL && o->quantize == LLM_QUANT_NONE)
	{
		fprintf(stderr, "llm-cli %s: --calib needs --quantize int8 or int4\n", argv[0]);
		return false;
	}
	if (o->model == NULL)
	{
		fprintf(stderr, "llm-cli %s: -m MODEL is required\n", argv[0]);
		return false;
	}
	return true;
}

/* Engine configuration from the options (threads, context, KV type). */
void
cli_engine_config(const CliOptions *o, LlmEngineConfig *c)
{
	llm_engine_config_default(c);
	c->n_threads = o->threads;
	c->n_ctx = o->ctx;
	c->kv_type = o->kv;
	c->prefix_cache = !o->no_prefix_cache;
}

/* Read a whole file into a new buffer; NULL on failure. */
char *
cli_read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *buf = NULL;
	long		size;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
		(buf = malloc((size_t) size + 1)) != NULL)
	{
		*len = fread(buf, 1, (size_t) size, f);
		buf[*len] = '\0';
	}
	fclose(f);
	return buf;
}

/*
 * Own INT8/INT4 with AWQ: calibrate the float model on the text of --calib
 * (at most 4096 tokens, chunks of 256) and quantize with those statistics.
 */
static bool
quantize_with_calibration(LlmModel *m, const CliOptions *o)
{
	LlmCalib	calib;
	LlmError	err;
	char	   *text;
	size_t		len = 0;
	int32_t    *ids = NULL;
	int			n_ids = 0;
	bool		ok = false;

	if ((text = cli_read_file(o->calib, &len)) == NULL)
	{
		fprintf(stderr, "llm-cli: could not read calibration text \"%s\"\n", o->calib);
		return false;
	}
	if (llm_calib_init(&calib, &m->config, &err) == LLM_OK &&
		llm_tokenize(m->tokenizer, text, len, true, false, &ids, &n_ids, &err) == LLM_OK &&
		llm_awq_calibrate(m, ids, n_ids < 4096 ? n_ids : 4096, 256, o->threads, &calib, &err) == LLM_OK &&
		llm_model_quantize(m, o->quantize, &calib, &err) == LLM_OK)
		ok = true;
	else
		fprintf(stderr, "llm-cli: AWQ quantization failed: %s\n", err.msg);
	free(ids);
	free(text);
	llm_calib_free(&calib);
	return ok;
}

/* Load the model named by -m, printing any error; NULL on failure. */
LlmModel *
cli_load_model(const CliOptions *o)
{
	LlmModel   *m = NULL;
	LlmError	err;

	if (llm_model_load_quantized(o->model, o->calib ? LLM_QUANT_NONE : o->quantize, &m, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli: could not load model \"%s\": %s\n", o->model, err.msg);
		return NULL;
	}
	if (o->calib != NULL && !quantize_with_calibration(m, o))
	{
		llm_model_free(m);
		return NULL;
	}
	return m;
}
