/*
 * cli_template.c
 *		llm-cli template: print the prompt a chat template renders for a
 *		system and a user turn, exactly, with nothing added.
 *
 *   llm-cli template (-m MODEL | --template FILE.jinja [--bos TEXT --eos TEXT])
 *                    [--system S] --user U [--date "01 Dec 2026"]
 *
 * With -m, the model's tokenizer.chat_template and its vocabulary's BOS and
 * EOS text; with --template, a template file and the given BOS and EOS
 * ("" when not given).  --date is what strftime_now("%d %b %Y") gives in
 * templates that call it (Llama 3.2); without it strftime_now is not
 * defined, as in the engine, so that a prompt does not change with the day.
 * On stderr: the format's family, and the text that ends an assistant's turn
 * in it (llm_chat_end_of_turn; a newline written as \n).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cli.h"
#include "cli_options.h"
#include "gguf.h"
#include "tokenizer.h"

/* Read a whole file into a new NUL-terminated buffer; NULL when it cannot be read. */
static char *
read_file(const char *path, size_t *len)
{
	FILE	   *fp = fopen(path, "rb");
	char	   *buf = NULL;
	size_t		n = 0;
	size_t		cap = 0;
	size_t		got;

	if (fp == NULL)
		return NULL;
	do
	{
		char	   *grown;

		if (n + 4096 + 1 > cap)
		{
			cap = (n + 4096 + 1) * 2;
			grown = realloc(buf, cap);
			if (grown == NULL)
			{
				free(buf);
				fclose(fp);
				return NULL;
			}
			buf = grown;
		}
		got = fread(buf + n, 1, 4096, fp);
		n += got;
	} while (got > 0);
	fclose(fp);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* llm-cli template: render a system and user turn and print it. */
int
cli_template(int argc, char **argv)
{
	CliOptions	o;
	LlmChatFormat f = {0};
	LlmChatRendering r;
	LlmChatInput in = {0};
	LlmGguf    *g = NULL;
	LlmTokenizer *t = NULL;
	LlmError	err;
	LlmStatus	st;
	int			rc = 1;

	if (!cli_parse_options(argc, argv, "-m --template --bos --eos --system --user --date", &o))
		return 2;
	if ((o.model == NULL) == (o.template_file == NULL) || o.user == NULL)
	{
		fprintf(stderr, "usage: llm-cli template (-m MODEL | --template FILE.jinja [--bos TEXT --eos TEXT]) "
				"[--system S] --user U [--date DATE]\n");
		return 2;
	}
	llm_error_clear(&err);
	if (o.template_file != NULL)
	{
		size_t		len;
		char	   *tmpl = read_file(o.template_file, &len);

		if (tmpl == NULL)
		{
			fprintf(stderr, "llm-cli template: could not read \"%s\"\n", o.template_file);
			return 1;
		}
		st = llm_chat_detect(tmpl, len, &f, &err);
		free(tmpl);
		in.bos = o.bos_text != NULL ? o.bos_text : "";
		in.eos = o.eos_text != NULL ? o.eos_text : "";
	}
	else
	{
		st = llm_gguf_open(o.model, &g, &err);
		if (st == LLM_OK)
			st = llm_tokenizer_load(g, &t, &err);
		if (st == LLM_OK)
			st = llm_chat_format_load(g, o.model, &f, &err);
		if (st == LLM_OK)
		{
			in.bos = llm_chat_token_text(t, llm_tokenizer_bos(t));
			in.eos = llm_chat_token_text(t, llm_tokenizer_eos(t));
		}
	}
	in.system = o.system;
	in.system_len = o.system != NULL ? strlen(o.system) : 0;
	in.user = o.user;
	in.user_len = strlen(o.user);
	in.date = o.date;
	if (st == LLM_OK)
		st = llm_chat_render(&f, &in, &r, &err);
	if (st != LLM_OK)
		fprintf(stderr, "llm-cli template: %s\n", err.msg);
	else
	{
		for (int i = 0; i < r.n_parts; i++)
			fwrite(r.parts[i].text, 1, r.parts[i].len, stdout);
		char		end[64];

		llm_chat_end_of_turn(&f, in.eos, end, sizeof(end));
		fprintf(stderr, "chat format: %s\nend of turn: ", llm_chat_family_name(f.family));
		for (const char *c = end; *c; c++)
			fprintf(stderr, *c == '\n' ? "\\n" : "%c", *c);
		fputc('\n', stderr);
		rc = fflush(stdout) == 0 ? 0 : 1;
	}
	llm_chat_format_free(&f);
	llm_tokenizer_free(t);
	llm_gguf_close(g);
	return rc;
}
