/*
 * cli_options.c
 *		Option parsing shared by llm-cli's subcommands (see cli_options.h).
 */
#include "cli_options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compress.h"
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
	o->kv = LLM_KV_F16;
	o->sinks = 4;
	o->step_ms = -1;
	o->evict = LLM_EVICT_H2O;
	o->device = LLM_DEVICE_AUTO;
	o->enable_thinking = -1;

	for (int i = 1; i < argc; i++)
	{
		const char *opt = argv[i];
		bool		has_value = !((strcmp(opt, "--bos") == 0 && strcmp(argv[0], "template") != 0) ||
								  strcmp(opt, "--special") == 0 || strcmp(opt, "--chat") == 0 ||
								  strcmp(opt, "--no-prefix-cache") == 0 ||
								  strcmp(opt, "--no-generation-prompt") == 0 || strcmp(opt, "--spans") == 0);
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
				o->kv = LLM_KV_F16;
			else if (strcmp(val, "f16") == 0)
				o->kv = LLM_KV_F16;
			else if (strcmp(val, "int8") == 0)
				o->kv = LLM_KV_I8;
			else
			{
				fprintf(stderr, "llm-cli %s: unsupported KV type \"%s\" (supported: f32, f16, int8)\n", argv[0], val);
				return false;
			}
		}
		else if (strcmp(opt, "--kv-budget") == 0)
		{
			size_t		n = strlen(val);

			if (n > 1 && val[n - 1] == '%')
			{
				char	   *end;

				o->kv_budget_pct = strtod(val, &end);
				if (end != val + n - 1 || !(o->kv_budget_pct > 0.0 && o->kv_budget_pct <= 100.0))
				{
					fprintf(stderr, "llm-cli %s: --kv-budget %s: a percentage must be above 0 and at most 100\n",
							argv[0], val);
					return false;
				}
			}
			else
			{
				if (!cli_parse_int(opt, val, 0, 1 << 24, &iv))
					return false;
				o->kv_budget = (int) iv;
			}
		}
		else if (strcmp(opt, "--evict") == 0)
		{
			if (strcmp(val, "h2o") == 0)
				o->evict = LLM_EVICT_H2O;
			else if (strcmp(val, "h2o_mean") == 0)
				o->evict = LLM_EVICT_H2O_MEAN;
			else if (strcmp(val, "streaming") == 0)
				o->evict = LLM_EVICT_STREAMING;
			else if (strcmp(val, "window") == 0)
				o->evict = LLM_EVICT_WINDOW;
			else
			{
				fprintf(stderr, "llm-cli %s: unknown eviction policy \"%s\" (h2o, h2o_mean, streaming, window)\n", argv[0], val);
				return false;
			}
		}
		else if (strcmp(opt, "--sinks") == 0)
		{
			if (!cli_parse_int(opt, val, 0, 1 << 20, &iv))
				return false;
			o->sinks = (int) iv;
		}
		else if (strcmp(opt, "--step-ms") == 0)
		{
			if (!cli_parse_int(opt, val, 0, 1 << 20, &iv))
				return false;
			o->step_ms = (int) iv;
		}
		else if (strcmp(opt, "--prompts") == 0)
			o->prompts_file = val;
		else if (strcmp(opt, "--speculative") == 0)
		{
			if (strcmp(val, "off") == 0)
				o->speculative = LLM_SPEC_OFF;
			else if (strcmp(val, "ngram") == 0)
				o->speculative = LLM_SPEC_NGRAM;
			else if (strcmp(val, "draft") == 0)
				o->speculative = LLM_SPEC_DRAFT;
			else
			{
				fprintf(stderr, "llm-cli %s: --speculative must be off, ngram or draft, got \"%s\"\n", argv[0], val);
				return false;
			}
		}
		else if (strcmp(opt, "--draft-model") == 0)
			o->draft_path = val;
		else if (strcmp(opt, "--draft-max") == 0)
		{
			if (!cli_parse_int(opt, val, 1, LLM_SPEC_MAX_DRAFT, &iv))
				return false;
			o->draft_max = (int) iv;
		}
		else if (strcmp(opt, "--kv-mb") == 0)
		{
			if (!cli_parse_int(opt, val, 1, 1 << 24, &iv))
				return false;
			o->kv_mb = (int) iv;
		}
		else if (strcmp(opt, "--device") == 0)
		{
			if (strcmp(val, "auto") == 0)
				o->device = LLM_DEVICE_AUTO;
			else if (strcmp(val, "cpu") == 0)
				o->device = LLM_DEVICE_CPU;
			else if (strcmp(val, "cuda") == 0)
				o->device = LLM_DEVICE_CUDA;
			else
			{
				fprintf(stderr, "llm-cli %s: unknown device \"%s\" (auto, cpu, cuda)\n", argv[0], val);
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
		else if (strcmp(opt, "--json-schema") == 0)
			o->json_schema = val;
		else if (strcmp(opt, "--choice") == 0)
		{
			if (o->n_choice == CLI_MAX_STOPS)
			{
				fprintf(stderr, "llm-cli %s: at most %d choices\n", argv[0], CLI_MAX_STOPS);
				return false;
			}
			o->choice[o->n_choice++] = val;
		}
		else if (strcmp(opt, "--bos") == 0 && val != NULL)
			o->bos_text = val;
		else if (strcmp(opt, "--bos") == 0)
			o->bos = true;
		else if (strcmp(opt, "--eos") == 0)
			o->eos_text = val;
		else if (strcmp(opt, "--system") == 0)
			o->system = val;
		else if (strcmp(opt, "--user") == 0)
			o->user = val;
		else if (strcmp(opt, "--template") == 0)
			o->template_file = val;
		else if (strcmp(opt, "--messages") == 0)
			o->messages_file = val;
		else if (strcmp(opt, "--tools") == 0)
			o->tools_file = val;
		else if (strcmp(opt, "--no-generation-prompt") == 0)
			o->no_generation_prompt = true;
		else if (strcmp(opt, "--spans") == 0)
			o->spans = true;
		else if (strcmp(opt, "--enable-thinking") == 0)
		{
			if (strcmp(val, "true") == 0)
				o->enable_thinking = 1;
			else if (strcmp(val, "false") == 0)
				o->enable_thinking = 0;
			else
			{
				fprintf(stderr, "llm-cli %s: --enable-thinking takes true or false, not \"%s\"\n", argv[0], val);
				return false;
			}
		}
		else if (strcmp(opt, "--date") == 0)
			o->date = val;
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
		else if (strcmp(opt, "--long") == 0)
		{
			if (!cli_parse_int(opt, val, 1, 1 << 24, &iv))
				return false;
			o->long_prompt = (int) iv;
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
	if (o->model == NULL && strcmp(argv[0], "template") != 0)	/* template: -m or --template */
	{
		fprintf(stderr, "llm-cli %s: -m MODEL is required\n", argv[0]);
		return false;
	}
	return true;
}

/*
 * The CUDA backend module: $LLM_CUDA_MODULE, else llm_cuda.so in the
 * directory above llm-cli's (the checkout's, beside llm.so).
 */
static const char *
cli_cuda_module(void)
{
	static char path[PATH_MAX + 32];
	const char *env = getenv("LLM_CUDA_MODULE");
	char		exe[PATH_MAX];
	ssize_t		n;
	char	   *slash;

	if (env != NULL)
		return env;
	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
		return NULL;
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) == NULL)
		return NULL;
	*slash = '\0';
	snprintf(path, sizeof(path), "%s/../llm_cuda.so", exe);
	return path;
}

/* Engine configuration from the options (threads, context, KV type, device). */
void
cli_engine_config(const CliOptions *o, LlmEngineConfig *c)
{
	llm_engine_config_default(c);
	c->n_threads = o->threads;
	c->n_ctx = o->ctx;
	c->kv_type = o->kv;
	c->prefix_cache = !o->no_prefix_cache;
	c->kv_cache_bytes = (size_t) o->kv_mb << 20;
	c->kv_budget = cli_kv_budget(o, o->ctx);
	c->kv_sink_tokens = o->sinks;
	c->evict_policy = o->evict;
	c->device = o->device;
	c->cuda_module = cli_cuda_module();
	if (o->step_ms >= 0)
		c->step_time_ms = o->step_ms;
	c->speculative = o->speculative;
	c->draft_model = o->draft;
	if (o->draft_max > 0)
		c->spec_max_draft = o->draft_max;
}

/* The KV budget in tokens: --kv-budget N, or P% of length (rounded up). */
int
cli_kv_budget(const CliOptions *o, int length)
{
	if (o->kv_budget_pct > 0.0)
		return (int) ceil(o->kv_budget_pct * length / 100.0);
	return o->kv_budget;
}

/* Read a whole file into a new buffer; NULL on failure. */
char *
cli_read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *buf = NULL;
	struct stat st;
	long		size;

	if (f == NULL)
		return NULL;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode))
	{
		fclose(f);
		errno = EISDIR;
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
		(buf = malloc((size_t) size + 1)) != NULL)
	{
		*len = fread(buf, 1, (size_t) size, f);
		buf[*len] = '\0';
	}
	fclose(f);
	return buf;
}

/* Read the calibration text at path into a new buffer, printing why not; NULL on failure. */
char *
cli_read_calib(const char *path, size_t *len)
{
	char	   *text;

	errno = 0;
	if ((text = cli_read_file(path, len)) == NULL)
		fprintf(stderr, "llm-cli: could not read calibration text \"%s\": %s\n", path,
				errno != 0 ? strerror(errno) : "out of memory");
	return text;
}

/* Load the model named by -m (with AWQ when --calib names a text), printing any error; NULL on failure. */
LlmModel *
cli_load_model(const CliOptions *o)
{
	/* (cli_load_draft, below, loads the draft model) */
	LlmModel   *m = NULL;
	LlmError	err;
	char	   *text = NULL;
	size_t		len = 0;
	LlmStatus	st;

	if (o->calib != NULL && (text = cli_read_calib(o->calib, &len)) == NULL)
		return NULL;
	if (o->calib != NULL)
	{
		LlmCompressOptions co;

		llm_compress_options_default(&co, o->quantize);
		co.n_threads = o->threads;
		st = llm_model_load_compressed(o->model, &co, text, len, &m, &err);
	}
	else
		st = llm_model_load_quantized(o->model, o->quantize, &m, &err);
	free(text);
	if (st != LLM_OK)
	{
		fprintf(stderr, "llm-cli: could not load model \"%s\"%s: %s\n", o->model,
				o->calib != NULL ? " with AWQ" : "", err.msg);
		return NULL;
	}
	return m;
}

/* Load --draft-model into o->draft for --speculative draft (see cli_options.h). */
bool
cli_load_draft(CliOptions *o)
{
	LlmError	err;

	if (o->speculative != LLM_SPEC_DRAFT)
		return true;
	if (o->draft_path == NULL)
	{
		fprintf(stderr, "llm-cli: --speculative draft needs --draft-model FILE\n");
		return false;
	}
	if (llm_model_load(o->draft_path, &o->draft, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli: could not load draft model \"%s\": %s\n", o->draft_path, err.msg);
		return false;
	}
	return true;
}
