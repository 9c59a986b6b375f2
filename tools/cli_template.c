/*
 * cli_template.c
 *		llm-cli template: print the prompt a chat template renders for a
 *		conversation, exactly, with nothing added.
 *
 *   llm-cli template (-m MODEL | --template FILE.jinja [--bos TEXT --eos TEXT])
 *                    (--user U [--system S] | --messages FILE.json) [--tools FILE.json]
 *                    [--no-generation-prompt] [--enable-thinking true|false]
 *                    [--date "01 Dec 2026"] [--spans]
 *
 * With -m, the model's tokenizer.chat_template and its vocabulary's BOS and
 * EOS text; with --template, a template file and the given BOS and EOS
 * ("" when not given).  The conversation is a system turn (when --system is
 * given) and a user turn, or the JSON array of messages in --messages
 * ([{"role": ..., "content": ...}, ...], as llm_chat takes); --tools is a
 * JSON array given to the template as tools.  The generation prompt (the
 * assistant's turn opened) is added unless --no-generation-prompt;
 * --enable-thinking sets the variable of that name, which is otherwise not
 * given.  --date is what strftime_now() formats (without it, 26 Jul 2024,
 * as in the engine, so that a prompt does not change with the day).
 *
 * The template is run by the engine's Jinja interpreter (jinja.h) through
 * llm_chat_render(), as chat requests are.  With --spans, stderr gets one
 * line "user OFF LEN" for each run of output bytes that came from the
 * messages or tools (text never read for control tokens).
 *
 * Exit status: 0 rendered; 2 the template raised (raise_exception) or the
 * conversation is invalid (LLM_ERR_INVALID); 3 the template uses what the
 * interpreter does not implement, or the model has no template
 * (LLM_ERR_UNSUPPORTED); 1 anything else (bad options, an unreadable file,
 * a limit passed).  The error is on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cli.h"
#include "cli_options.h"
#include "gguf.h"
#include "jinja.h"
#include "tokenizer.h"

#define CLI_TEMPLATE_USAGE \
	"usage: llm-cli template (-m MODEL | --template FILE.jinja [--bos TEXT --eos TEXT])\n" \
	"                        (--user U [--system S] | --messages FILE.json) [--tools FILE.json]\n" \
	"                        [--no-generation-prompt] [--enable-thinking true|false]\n" \
	"                        [--date \"01 Dec 2026\"] [--spans]\n"

/* A growing string, for the JSON of --system and --user. */
typedef struct CliBuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		failed;			/* an allocation failed */
} CliBuf;

/* Append n bytes of s to b. */
static void
buf_put(CliBuf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap)
	{
		size_t		cap = (b->len + n + 1) * 2;
		char	   *grown = realloc(b->data, cap);

		if (grown == NULL)
		{
			b->failed = true;
			return;
		}
		b->data = grown;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

/* Append the NUL-terminated s to b. */
static void
buf_puts(CliBuf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

/* Append s to b as a JSON string: quotes, backslashes and control characters escaped, UTF-8 as is. */
static void
buf_put_json_string(CliBuf *b, const char *s)
{
	buf_put(b, "\"", 1);
	for (const unsigned char *c = (const unsigned char *) s; *c != '\0'; c++)
	{
		char		esc[8];

		if (*c == '"' || *c == '\\')
		{
			esc[0] = '\\';
			esc[1] = (char) *c;
			buf_put(b, esc, 2);
		}
		else if (*c < 0x20)
		{
			snprintf(esc, sizeof(esc), "\\u%04x", *c);
			buf_put(b, esc, 6);
		}
		else
			buf_put(b, (const char *) c, 1);
	}
	buf_put(b, "\"", 1);
}

/* The messages of --system and --user as a JSON array, in b. */
static void
build_messages(const char *system, const char *user, CliBuf *b)
{
	buf_puts(b, "[");
	if (system != NULL)
	{
		buf_puts(b, "{\"role\": \"system\", \"content\": ");
		buf_put_json_string(b, system);
		buf_puts(b, "}, ");
	}
	buf_puts(b, "{\"role\": \"user\", \"content\": ");
	buf_put_json_string(b, user);
	buf_puts(b, "}]");
}

/* Parse --date "01 Dec 2026" into *ctx; false (with a message) when it is not such a date. */
static bool
parse_date(const char *s, LlmChatContext *ctx)
{
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	char		mon[4];
	int			day;
	int			year;
	int			end = 0;

	if (sscanf(s, "%2d %3s %4d%n", &day, mon, &year, &end) == 3 && s[end] == '\0' && year >= 1)
		for (int m = 0; m < 12; m++)
			if (strcmp(mon, months[m]) == 0 && day >= 1 && day <= days[m] &&
				(m != 1 || day < 29 || (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0))))
			{
				ctx->year = year;
				ctx->month = m + 1;
				ctx->day = day;
				return true;
			}
	fprintf(stderr, "llm-cli template: invalid --date \"%s\" (expected a date such as \"01 Dec 2026\")\n", s);
	return false;
}

/* Read the JSON file of option opt into *text; false (with a message) when it cannot be read. */
static bool
read_json_file(const char *opt, const char *path, char **text, size_t *len)
{
	if ((*text = cli_read_file(path, len)) == NULL)
	{
		fprintf(stderr, "llm-cli template: could not read %s \"%s\"\n", opt, path);
		return false;
	}
	return true;
}

/* The exit status for a failed template load or render (see the file's comment). */
static int
exit_status(LlmStatus st)
{
	if (st == LLM_ERR_INVALID)
		return 2;
	if (st == LLM_ERR_UNSUPPORTED)
		return 3;
	return 1;
}

/* llm-cli template: render a conversation with a chat template and print it. */
int
cli_template(int argc, char **argv)
{
	CliOptions	o;
	LlmChatContext ctx = {"", "", 0, 0, 0};
	LlmChatRequest req = {0};
	LlmJinjaOutput out = {0};
	LlmJinja   *tmpl = NULL;
	LlmGguf    *g = NULL;
	LlmTokenizer *t = NULL;
	CliBuf		built = {0};
	char	   *messages = NULL;
	char	   *tools = NULL;
	size_t		messages_len = 0;
	size_t		tools_len = 0;
	LlmError	err;
	LlmStatus	st;
	int			rc = 1;

	if (!cli_parse_options(argc, argv,
						   "-m --template --bos --eos --system --user --messages --tools "
						   "--no-generation-prompt --enable-thinking --date --spans", &o))
		return 1;
	if ((o.model == NULL) == (o.template_file == NULL) || (o.user == NULL) == (o.messages_file == NULL) ||
		(o.system != NULL && o.messages_file != NULL) ||
		(o.model != NULL && (o.bos_text != NULL || o.eos_text != NULL)))
	{
		fputs(CLI_TEMPLATE_USAGE, stderr);
		return 1;
	}
	if (o.date != NULL && !parse_date(o.date, &ctx))
		return 1;
	if (o.messages_file != NULL)
	{
		if (!read_json_file("--messages", o.messages_file, &messages, &messages_len))
			goto done;
	}
	else
	{
		build_messages(o.system, o.user, &built);
		if (built.failed)
		{
			fprintf(stderr, "llm-cli template: out of memory\n");
			goto done;
		}
		messages = built.data;
		messages_len = built.len;
		built.data = NULL;
	}
	if (o.tools_file != NULL && !read_json_file("--tools", o.tools_file, &tools, &tools_len))
		goto done;

	llm_error_clear(&err);
	if (o.template_file != NULL)
	{
		size_t		len;
		char	   *src = cli_read_file(o.template_file, &len);

		if (src == NULL)
		{
			fprintf(stderr, "llm-cli template: could not read \"%s\"\n", o.template_file);
			goto done;
		}
		st = llm_jinja_parse(src, len, &tmpl, &err);
		free(src);
		ctx.bos = o.bos_text != NULL ? o.bos_text : "";
		ctx.eos = o.eos_text != NULL ? o.eos_text : "";
	}
	else
	{
		if ((st = llm_gguf_open(o.model, &g, &err)) != LLM_OK ||
			(st = llm_tokenizer_load(g, &t, &err)) != LLM_OK)
		{
			fprintf(stderr, "llm-cli template: could not load \"%s\": %s\n", o.model, err.msg);
			goto done;
		}
		st = llm_chat_template_load(g, o.model, &tmpl, &err);
		ctx.bos = llm_chat_token_text(t, llm_tokenizer_bos(t));
		ctx.eos = llm_chat_token_text(t, llm_tokenizer_eos(t));
	}

	req.messages = messages;
	req.messages_len = messages_len;
	req.tools = tools;
	req.tools_len = tools_len;
	req.add_generation_prompt = !o.no_generation_prompt;
	req.enable_thinking = o.enable_thinking;
	if (st == LLM_OK)
		st = llm_chat_render(tmpl, &req, &ctx, &out, &err);
	if (st != LLM_OK)
	{
		fprintf(stderr, "llm-cli template: %s\n", err.msg);
		rc = exit_status(st);
		goto done;
	}
	fwrite(out.text, 1, out.len, stdout);
	if (o.spans)
		for (int i = 0; i < out.n_user; i++)
			fprintf(stderr, "user %zu %zu\n", out.user[i].off, out.user[i].len);
	rc = fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;

done:
	llm_jinja_output_free(&out);
	llm_jinja_free(tmpl);
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	free(built.data);
	free(messages);
	free(tools);
	return rc;
}
