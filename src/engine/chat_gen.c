/*
 * chat_gen.c
 *		What a chat template writes for add_generation_prompt.
 *
 * Templates of one family differ most in the block that opens the model's
 * turn: "<|im_start|>assistant\n", then perhaps "<think>\n", or
 * "<think>\n</think>" unless thinking is enabled.  This file evaluates that
 * one block, and only the little Jinja such blocks use:
 *   - string literals in {{ }} and plain text, as output, and names the
 *     template sets to one literal ("set thinking_end_token = '</think>'");
 *   - {% if %} / {% else %} / {% endif %} on enable_thinking and thinking,
 *     which are undefined (false) unless the template gives them a default
 *     with "set X = X if X is defined else True|False";
 *   - the whitespace rules Hugging Face renders with: trim_blocks,
 *     lstrip_blocks and the "-" markers.
 * The block's own condition may add the conversation-state flags llama.cpp's
 * DeepSeek templates test (ns.is_tool, ns.is_last_user), which hold for a
 * system and user turn.  Anything else is refused.
 */
#include "chat.h"

#include <stdio.h>
#include <string.h>

/* A tag of the block: {{ expression }} or {% statement %}. */
typedef struct GenTag
{
	const char *start;			/* at "{{" or "{%" */
	const char *end;			/* just after "}}" or "%}" */
	const char *body;			/* the text inside, without markers or blanks */
	size_t		body_len;
	bool		block;			/* {% %} rather than {{ }} */
	bool		strip_left;		/* {{- or {%- */
	bool		strip_right;	/* -}} or -%} */
} GenTag;

/* A variable the block may test: undefined, or defined as true or false. */
typedef struct GenVar
{
	const char *name;
	bool		defined;
	bool		value;
} GenVar;

typedef struct GenState
{
	const char *tmpl;			/* the whole template, for the names it sets */
	size_t		tmpl_len;
	char	   *out;
	size_t		outsz;
	size_t		n;
	GenVar		vars[2];
	LlmError   *err;
} GenState;

/* Whether c is a blank Jinja strips around markers. */
static bool
gen_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Find the next tag at or after p (before end); false when there is none. */
static bool
gen_next_tag(const char *p, const char *end, GenTag *t)
{
	for (; p + 1 < end; p++)
	{
		const char *close;
		const char *b;
		const char *e;

		if (p[0] != '{' || (p[1] != '{' && p[1] != '%'))
			continue;
		t->start = p;
		t->block = p[1] == '%';
		close = NULL;
		for (const char *q = p + 2; q + 1 < end; q++)
			if (q[0] == (t->block ? '%' : '}') && q[1] == '}')
			{
				close = q;
				break;
			}
		if (close == NULL)
			return false;
		t->end = close + 2;
		b = p + 2;
		e = close;
		t->strip_left = b < e && *b == '-';
		if (t->strip_left)
			b++;
		t->strip_right = e > b && e[-1] == '-';
		if (t->strip_right)
			e--;
		while (b < e && gen_space(*b))
			b++;
		while (e > b && gen_space(e[-1]))
			e--;
		t->body = b;
		t->body_len = (size_t) (e - b);
		return true;
	}
	return false;
}

/* Whether the tag's body is word, or starts with word and a blank when prefix is set. */
static bool
gen_is(const GenTag *t, const char *word, bool prefix)
{
	size_t		n = strlen(word);

	if (t->body_len < n || memcmp(t->body, word, n) != 0)
		return false;
	return prefix ? (t->body_len > n && gen_space(t->body[n])) : t->body_len == n;
}

/* Append len bytes to the output. */
static LlmStatus
gen_emit(GenState *s, const char *text, size_t len)
{
	if (s->n + len >= s->outsz)
		return llm_error_set(s->err, LLM_ERR_UNSUPPORTED,
							 "the chat template's generation prompt is longer than %zu bytes", s->outsz - 1);
	memcpy(s->out + s->n, text, len);
	s->n += len;
	s->out[s->n] = '\0';
	return LLM_OK;
}

/* Write the plain text between two tags as trim_blocks, lstrip_blocks and "-" leave it. */
static LlmStatus
gen_text(GenState *s, const char *b, const char *e, const GenTag *prev, const GenTag *next)
{
	/* lstrip_blocks: blanks from a line's start to a block tag go */
	if (next != NULL && next->block && !next->strip_left)
	{
		const char *q = e;

		while (q > b && (q[-1] == ' ' || q[-1] == '\t'))
			q--;
		if (q > b && q[-1] == '\n')
			e = q;
	}
	if (next != NULL && next->strip_left)
		while (e > b && gen_space(e[-1]))
			e--;
	if (prev->strip_right)
		while (b < e && gen_space(*b))
			b++;
	else if (prev->block && b < e && *b == '\n')
		b++;				/* trim_blocks */
	return b < e ? gen_emit(s, b, (size_t) (e - b)) : LLM_OK;
}

/* Decode the one string literal an expression tag holds; false when it holds anything else. */
static bool
gen_literal(GenState *s, const GenTag *t, LlmStatus *st)
{
	const char *p = t->body;
	const char *e = t->body + t->body_len;
	char		q;

	*st = LLM_OK;
	if (t->body_len < 2 || (*p != '\'' && *p != '"') || e[-1] != *p)
		return false;
	q = *p++;
	e--;
	for (; p < e && *st == LLM_OK; p++)
	{
		char		c = *p;

		if (c == q)
			return false;		/* two literals joined: not one literal */
		if (c == '\\' && p + 1 < e)
		{
			p++;
			c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p;
		}
		*st = gen_emit(s, &c, 1);
	}
	return true;
}

/* Write the literal the template sets name (len bytes) to; false when it sets none so. */
static bool
gen_named_literal(GenState *s, const char *name, size_t len, LlmStatus *st)
{
	const char *lit;
	size_t		lit_len;

	*st = LLM_OK;
	if (!llm_chat_set_literal(s->tmpl, s->tmpl_len, name, len, &lit, &lit_len))
		return false;
	*st = gen_emit(s, lit, lit_len);
	return true;
}

/* The variable named by text (len bytes), or NULL. */
static GenVar *
gen_var(GenState *s, const char *text, size_t len)
{
	for (int i = 0; i < 2; i++)
		if (strlen(s->vars[i].name) == len && memcmp(s->vars[i].name, text, len) == 0)
			return &s->vars[i];
	return NULL;
}

/* Evaluate one term of a condition: X, not X, X is [not] defined, X is true|false. */
static bool
gen_term(GenState *s, const char *b, const char *e, bool *value)
{
	bool		negate = false;
	const char *name;
	GenVar	   *v;

	if (e - b > 4 && memcmp(b, "not ", 4) == 0)
	{
		negate = true;
		b += 4;
	}
	name = b;
	while (b < e && !gen_space(*b))
		b++;
	v = gen_var(s, name, (size_t) (b - name));
	if (v == NULL)
		return false;
	if (b == e)
		*value = v->defined && v->value;
	else if ((size_t) (e - b) == strlen(" is defined") && memcmp(b, " is defined", (size_t) (e - b)) == 0)
		*value = v->defined;
	else if ((size_t) (e - b) == strlen(" is not defined") && memcmp(b, " is not defined", (size_t) (e - b)) == 0)
		*value = !v->defined;
	else if ((size_t) (e - b) == strlen(" is false") && memcmp(b, " is false", (size_t) (e - b)) == 0)
		*value = v->defined && !v->value;
	else if ((size_t) (e - b) == strlen(" is true") && memcmp(b, " is true", (size_t) (e - b)) == 0)
		*value = v->defined && v->value;
	else
		return false;
	if (negate)
		*value = !*value;
	return true;
}

/*
 * Evaluate a condition: terms joined by " and ".  opening: the block's own
 * condition, which starts with add_generation_prompt and may test the
 * conversation flags that hold for one system and user turn.
 */
static bool
gen_condition(GenState *s, const char *b, const char *e, bool opening, bool *value)
{
	*value = true;
	while (b < e)
	{
		const char *and = NULL;
		const char *te;
		bool		v;

		for (const char *q = b; q + 5 <= e; q++)
			if (memcmp(q, " and ", 5) == 0)
			{
				and = q;
				break;
			}
		te = and != NULL ? and : e;
		if (opening)
		{
			static const char *const holds[] = {"add_generation_prompt", "not ns.is_tool",
			"ns.is_last_user", "not ns.is_tool_outputs"};
			bool		known = false;

			for (int i = 0; i < 4; i++)
				if (strlen(holds[i]) == (size_t) (te - b) && memcmp(holds[i], b, (size_t) (te - b)) == 0)
					known = true;
			if (!known && !gen_term(s, b, te, &v))
				return false;
			if (!known)
				*value = *value && v;
		}
		else
		{
			if (!gen_term(s, b, te, &v))
				return false;
			*value = *value && v;
		}
		b = and != NULL ? and + 5 : e;
	}
	return true;
}

/* Give var the default "set var = var if var is defined else True|False" gives it, if any. */
static void
gen_default(const char *tmpl, size_t len, GenVar *var)
{
	char		pattern[128];

	for (int truth = 0; truth < 2; truth++)
	{
		snprintf(pattern, sizeof(pattern), "set %s = %s if %s is defined else %s",
				 var->name, var->name, var->name, truth ? "True" : "False");
		for (size_t i = 0; i + strlen(pattern) <= len; i++)
			if (memcmp(tmpl + i, pattern, strlen(pattern)) == 0)
			{
				var->defined = true;
				var->value = truth;
			}
	}
}

/* The literal a tag "{%- set NAME = 'literal' -%}" of tmpl gives name (see chat.h). */
bool
llm_chat_set_literal(const char *tmpl, size_t len, const char *name, size_t name_len,
					 const char **lit, size_t *lit_len)
{
	char		pattern[96];
	size_t		n;

	if (name_len == 0 || name_len > 64)
		return false;
	for (size_t i = 0; i < name_len; i++)
		if (!(name[i] == '_' || (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
			  (name[i] >= '0' && name[i] <= '9')))
			return false;
	snprintf(pattern, sizeof(pattern), "set %.*s = '", (int) name_len, name);
	n = strlen(pattern);
	for (size_t i = 0; i + n <= len; i++)
	{
		size_t		j = i + n;
		size_t		k;

		if (memcmp(tmpl + i, pattern, n) != 0)
			continue;
		while (j < len && tmpl[j] != '\'' && tmpl[j] != '\\')
			j++;
		/* one plain literal, then the end of the tag */
		k = j + 1;
		while (k < len && (tmpl[k] == ' ' || tmpl[k] == '-'))
			k++;
		if (j >= len || tmpl[j] != '\'' || k + 1 >= len || tmpl[k] != '%' || tmpl[k + 1] != '}')
			return false;
		*lit = tmpl + i + n;
		*lit_len = j - (i + n);
		return true;
	}
	return false;
}

/* The text a template's generation block writes (see chat.h). */
LlmStatus
llm_chat_generation_text(const char *tmpl, size_t len, char *out, size_t outsz, LlmError *err)
{
	const char *end = tmpl + len;
	const char *p = tmpl;
	GenTag		open = {0};
	GenTag		t;
	bool		found = false;
	bool		active[16];
	int			depth = 0;
	GenState	s = {tmpl, len, out, outsz, 0, {{"enable_thinking", false, false}, {"thinking", false, false}}, err};
	GenTag		prev;

	out[0] = '\0';
	gen_default(tmpl, len, &s.vars[0]);
	gen_default(tmpl, len, &s.vars[1]);

	/* the last {% if add_generation_prompt ... %} */
	while (gen_next_tag(p, end, &t))
	{
		if (t.block && gen_is(&t, "if", true) &&
			t.body_len >= 3 + strlen("add_generation_prompt") &&
			memcmp(t.body + 3, "add_generation_prompt", strlen("add_generation_prompt")) == 0)
		{
			open = t;
			found = true;
		}
		p = t.end;
	}
	if (!found)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the chat template has no add_generation_prompt block");
	{
		bool		v;

		if (!gen_condition(&s, open.body + 3, open.body + open.body_len, true, &v))
			return llm_error_set(err, LLM_ERR_UNSUPPORTED,
								 "the chat template's generation prompt tests \"%.*s\"",
								 (int) (open.body_len - 3), open.body + 3);
	}

	active[0] = true;
	prev = open;
	p = open.end;
	while (gen_next_tag(p, end, &t))
	{
		LlmStatus	st;
		bool		on = active[depth];

		if (on && (st = gen_text(&s, p, t.start, &prev, &t)) != LLM_OK)
			return st;
		if (t.block && gen_is(&t, "endif", false))
		{
			if (depth == 0)
				return LLM_OK;
			depth--;
		}
		else if (t.block && gen_is(&t, "else", false))
		{
			if (depth == 0)
				return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the chat template's generation prompt has an else branch");
			active[depth] = active[depth - 1] && !active[depth];
		}
		else if (t.block && gen_is(&t, "if", true))
		{
			bool		v;

			if (depth + 1 >= (int) (sizeof(active) / sizeof(active[0])))
				return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the chat template's generation prompt nests too deep");
			if (!gen_condition(&s, t.body + 3, t.body + t.body_len, false, &v))
				return llm_error_set(err, LLM_ERR_UNSUPPORTED,
									 "the chat template's generation prompt tests \"%.*s\"",
									 (int) (t.body_len - 3), t.body + 3);
			depth++;
			active[depth] = on && v;
		}
		else if (!t.block)
		{
			bool		literal;

			if (on)
			{
				literal = gen_literal(&s, &t, &st);
				if (st == LLM_OK && !literal)
					literal = gen_named_literal(&s, t.body, t.body_len, &st);
				if (st != LLM_OK)
					return st;
				if (!literal)
					return llm_error_set(err, LLM_ERR_UNSUPPORTED,
										 "the chat template's generation prompt writes \"%.*s\"",
										 (int) t.body_len, t.body);
			}
		}
		else
			return llm_error_set(err, LLM_ERR_UNSUPPORTED,
								 "the chat template's generation prompt runs \"%.*s\"", (int) t.body_len, t.body);
		/* an else keeps the branch it ends; a nested tag's value is for the nested branch */
		prev = t;
		p = t.end;
	}
	return llm_error_set(err, LLM_ERR_UNSUPPORTED, "the chat template's generation prompt has no endif");
}
