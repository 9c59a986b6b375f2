/*
 * jinja.h
 *		A sandboxed Jinja2 interpreter for chat templates.
 *
 * Chat templates are Jinja2 programs, rendered by Hugging Face transformers
 * with an ImmutableSandboxedEnvironment (trim_blocks, lstrip_blocks, the
 * loopcontrols extension, its own tojson, raise_exception, strftime_now and
 * {% generation %}).  This interpreter renders the subset real templates
 * use, byte for byte as Jinja2 does; anything outside it is refused when the
 * template is parsed or when the construct is reached, with a message naming
 * the construct and its line.  test/chat_template_test.py checks it against
 * Jinja2 on every real template of the repository and of ../shared.
 *
 * Values that come from the caller's data (messages, tools) are "user" text:
 * the rendering records, byte by byte, which output came from them, so that
 * the tokenizer reads control tokens only in the template's own text.  A
 * value computed from user text (trim, slicing, concatenation, tojson) stays
 * user text where its bytes came from it.
 *
 * Every render is bounded: steps, output bytes, recursion depth, loop
 * lengths.  Passing a limit is an error (LLM_ERR_LIMIT), never a hang.
 * Nothing here aborts; allocation failures are LLM_ERR_NOMEM.
 */
#ifndef LLM_JINJA_H
#define LLM_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* A parsed template (opaque); immutable, so one may be rendered by several threads at once. */
typedef struct LlmJinja LlmJinja;

/* The variables of one render (opaque). */
typedef struct LlmJinjaVars LlmJinjaVars;

/* Bounds of one render; llm_jinja_limits_default() gives generous ones. */
typedef struct LlmJinjaLimits
{
	int64_t		max_steps;		/* expression and statement evaluations */
	size_t		max_output;		/* bytes of output (and of any one string built) */
	int			max_depth;		/* nesting of macro calls and of values */
	int64_t		max_loop;		/* iterations of one for loop, and length of a range() */
} LlmJinjaLimits;

/* A run of output bytes that came from user data (never read for control tokens). */
typedef struct LlmJinjaSpan
{
	size_t		off;
	size_t		len;
} LlmJinjaSpan;

/* A rendering: the text (NUL-terminated, len bytes) and its user spans in order. */
typedef struct LlmJinjaOutput
{
	char	   *text;
	size_t		len;
	LlmJinjaSpan *user;
	int			n_user;
} LlmJinjaOutput;

/*
 * Parse len bytes of template source into *out.  LLM_ERR_UNSUPPORTED, with
 * the line and the construct, for a template that is not Jinja2 or uses what
 * the interpreter does not implement (a statement, filter, test or method
 * reached at render time is checked then).
 */
LlmStatus	llm_jinja_parse(const char *src, size_t len, LlmJinja **out, LlmError *err);

/* Free a parsed template; NULL is allowed. */
void		llm_jinja_free(LlmJinja *t);

/* Generous limits: 10 M steps, 16 MiB of output, depth 64, loops of 1 M. */
void		llm_jinja_limits_default(LlmJinjaLimits *lim);

/* A new, empty set of variables; NULL when out of memory. */
LlmJinjaVars *llm_jinja_vars_new(void);

/* Free a set of variables; NULL is allowed. */
void		llm_jinja_vars_free(LlmJinjaVars *v);

/*
 * Set variable name to the JSON value json (len bytes): objects become
 * dicts (their key order kept), arrays lists, numbers ints or floats as
 * Python's json module reads them.  With user, its strings are user text.
 * LLM_ERR_INVALID for text that is not JSON.
 */
LlmStatus	llm_jinja_vars_set_json(LlmJinjaVars *v, const char *name, const char *json, size_t len,
									bool user, LlmError *err);

/*
 * llm_jinja_vars_set_json() where the strings that are the value of a
 * member named plain_key are template text, not user text: the roles of
 * messages the caller has checked ("system", "user", ...), which templates
 * build control tokens from ('<|' + role + '|>').
 */
LlmStatus	llm_jinja_vars_set_json_plain_key(LlmJinjaVars *v, const char *name, const char *json, size_t len,
											  bool user, const char *plain_key, LlmError *err);

/* llm_jinja_vars_set_json_plain_key() from JSON the caller has parsed already (json.h). */
struct LlmJson;
LlmStatus	llm_jinja_vars_set_tree(LlmJinjaVars *v, const char *name, const struct LlmJson *j, bool user,
									const char *plain_key, LlmError *err);

/* Set variable name to a string (len bytes), user text or not. */
LlmStatus	llm_jinja_vars_set_string(LlmJinjaVars *v, const char *name, const char *s, size_t len,
									  bool user, LlmError *err);

/* Set variable name to a boolean. */
LlmStatus	llm_jinja_vars_set_bool(LlmJinjaVars *v, const char *name, bool b, LlmError *err);

/*
 * Set the date strftime_now() formats (a fixed date, so that a prompt does
 * not change with the day).  Without it: 26 Jul 2024, 00:00.
 */
void		llm_jinja_vars_set_date(LlmJinjaVars *v, int year, int month, int day);

/*
 * Render template t with variables v (NULL: none) into *out (free it with
 * llm_jinja_output_free).  The template's raise_exception(msg) is
 * LLM_ERR_INVALID with msg; what the interpreter does not implement is
 * LLM_ERR_UNSUPPORTED naming it and its line; a passed limit LLM_ERR_LIMIT;
 * an error Jinja2 would raise (an undefined name called, a type error)
 * LLM_ERR_INVALID with its line.
 */
LlmStatus	llm_jinja_render(const LlmJinja *t, const LlmJinjaVars *v, const LlmJinjaLimits *lim,
							 LlmJinjaOutput *out, LlmError *err);

/* Free what llm_jinja_render() gave; the struct itself is the caller's. */
void		llm_jinja_output_free(LlmJinjaOutput *o);

#endif							/* LLM_JINJA_H */
