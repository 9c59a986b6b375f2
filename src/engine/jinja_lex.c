/*
 * jinja_lex.c
 *		Template source to tokens, with Jinja2's whitespace rules as
 *		transformers configures them (trim_blocks, lstrip_blocks, no
 *		trailing newline kept).
 *
 * The rules, as Jinja2's lexer applies them:
 *   - newlines (\r\n, \r, \n) become \n, and one newline ending the source
 *     is dropped;
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}",
 *     "-}}", "-#}" all whitespace after it;
 *   - trim_blocks: a newline right after "%}" or "#}" is dropped ("+%}"
 *     keeps it);
 *   - lstrip_blocks: spaces and tabs between a line's start and "{%" or
 *     "{#" are dropped ("{%+" keeps them), where the line starts in this
 *     text or the previous tag ended the line;
 *   - a tag ends at its closer only where brackets inside it are balanced;
 *   - {% raw %} ... {% endraw %} is data.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

typedef struct Lexer
{
	JArena	   *a;
	const char *src;			/* normalized source */
	size_t		len;
	size_t		pos;
	int			line;
	bool		line_starting;	/* the last match ended with a newline */
	JToken	   *toks;
	int			n;
	int			cap;
	LlmError   *err;
} Lexer;

/* Whether c starts a Python whitespace character in ASCII (what \s matches there). */
static bool
ascii_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The length of the Python whitespace (any Unicode space) at s[0..n), 0 when none. */
static int
space_at(const char *s, size_t n)
{
	int			adv;
	uint32_t	c;

	if (n == 0)
		return 0;
	if (ascii_space(s[0]))
		return 1;
	if ((unsigned char) s[0] < 0x80)
		return ju_isspace((unsigned char) s[0]) ? 1 : 0;
	c = ju_decode(s, n, &adv);
	return ju_isspace(c) ? adv : 0;
}

/* Length of text[0..n) without its trailing whitespace (Python's rstrip()). */
static size_t
rstrip_len(const char *s, size_t n)
{
	size_t		end = n;

	/* walk forward, remembering where the last non-space run ended */
	size_t		last = 0;
	size_t		i = 0;

	while (i < end)
	{
		int			sp = space_at(s + i, end - i);

		if (sp > 0)
			i += sp;
		else
		{
			int			adv;

			(void) ju_decode(s + i, end - i, &adv);
			i += adv;
			last = i;
		}
	}
	return last;
}

/* Bytes of whitespace at s[0..n) (\s*). */
static size_t
skip_space(const char *s, size_t n)
{
	size_t		i = 0;
	int			sp;

	while (i < n && (sp = space_at(s + i, n - i)) > 0)
		i += sp;
	return i;
}

/* Count newlines in s[0..n). */
static int
newlines(const char *s, size_t n)
{
	int			k = 0;

	for (size_t i = 0; i < n; i++)
		k += s[i] == '\n';
	return k;
}

/* Fail with a syntax error at the lexer's line. */
static LlmStatus
lex_fail(Lexer *lx, const char *what)
{
	return llm_error_set(lx->err, LLM_ERR_UNSUPPORTED, "chat template line %d: %s", lx->line, what);
}

/* Append a token; NULL when out of memory. */
static JToken *
push(Lexer *lx, JTokKind kind)
{
	if (lx->n == lx->cap)
	{
		int			cap = lx->cap ? lx->cap * 2 : 256;
		JToken	   *grown = ja_alloc(lx->a, (size_t) cap * sizeof(JToken));

		if (grown == NULL)
			return NULL;
		if (lx->n > 0)
			memcpy(grown, lx->toks, (size_t) lx->n * sizeof(JToken));
		lx->toks = grown;
		lx->cap = cap;
	}
	memset(&lx->toks[lx->n], 0, sizeof(JToken));
	lx->toks[lx->n].kind = kind;
	lx->toks[lx->n].line = lx->line;
	return &lx->toks[lx->n++];
}

/* Append a token whose text is s[0..n), copied NUL-terminated. */
static LlmStatus
push_text(Lexer *lx, JTokKind kind, const char *s, size_t n)
{
	JToken	   *t = push(lx, kind);
	char	   *copy;

	if (t == NULL || (copy = ja_alloc(lx->a, n + 1)) == NULL)
		return llm_error_set(lx->err, LLM_ERR_NOMEM, "out of memory parsing the chat template");
	memcpy(copy, s, n);
	t->s = copy;
	t->len = n;
	return LLM_OK;
}

/*
 * Emit the data text[0..n) that precedes a tag opened with sign ('-', '+'
 * or 0); lstrip applies when the tag is a block or a comment.
 */
static LlmStatus
emit_data(Lexer *lx, const char *text, size_t n, char sign, bool lstrip_ok)
{
	if (sign == '-')
		n = rstrip_len(text, n);
	else if (sign != '+' && lstrip_ok)
	{
		size_t		l_pos = 0;

		for (size_t i = n; i > 0; i--)
			if (text[i - 1] == '\n')
			{
				l_pos = i;
				break;
			}
		if ((l_pos > 0 || lx->line_starting) && l_pos < n && skip_space(text + l_pos, n - l_pos) == n - l_pos)
			n = l_pos;
	}
	if (n == 0)
		return LLM_OK;
	return push_text(lx, T_TEXT, text, n);
}

/* Decode a Python string literal's body s[0..n) (escapes as unicode-escape reads them) into a token. */
static LlmStatus
push_string(Lexer *lx, const char *s, size_t n)
{
	JBuf		b = {0};
	LlmStatus	st;

	b.max = n + 16;
	for (size_t i = 0; i < n; i++)
	{
		char		c = s[i];
		uint32_t	cp;
		int			digits;

		if (c != '\\' || i + 1 >= n)
		{
			jbuf_put(&b, &c, 1, false);
			continue;
		}
		c = s[++i];
		switch (c)
		{
			case '\n':
				break;			/* a line continuation */
			case '\\':
			case '\'':
			case '"':
				jbuf_put(&b, &c, 1, false);
				break;
			case 'n':
				jbuf_puts(&b, "\n");
				break;
			case 't':
				jbuf_puts(&b, "\t");
				break;
			case 'r':
				jbuf_puts(&b, "\r");
				break;
			case 'a':
				jbuf_puts(&b, "\a");
				break;
			case 'b':
				jbuf_puts(&b, "\b");
				break;
			case 'f':
				jbuf_puts(&b, "\f");
				break;
			case 'v':
				jbuf_puts(&b, "\v");
				break;
			case 'x':
			case 'u':
			case 'U':
				digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
				cp = 0;
				for (int k = 0; k < digits; k++)
				{
					char		h = i + 1 + k < n ? s[i + 1 + k] : 0;

					if (!isxdigit((unsigned char) h))
					{
						jbuf_free(&b);
						return lex_fail(lx, "a truncated \\x, \\u or \\U escape in a string");
					}
					cp = cp * 16 + (uint32_t) (isdigit((unsigned char) h) ? h - '0' : (tolower((unsigned char) h) - 'a' + 10));
				}
				i += digits;
				if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
				{
					jbuf_free(&b);
					return lex_fail(lx, "an escape outside Unicode in a string");
				}
				ju_put(&b, cp, false);
				break;
			default:
				if (c >= '0' && c <= '7')
				{
					cp = 0;
					for (int k = 0; k < 3 && i < n && s[i] >= '0' && s[i] <= '7'; k++, i++)
						cp = cp * 8 + (uint32_t) (s[i] - '0');
					i--;
					ju_put(&b, cp, false);
				}
				else
				{
					/* an unknown escape stays as written */
					jbuf_puts(&b, "\\");
					jbuf_put(&b, &c, 1, false);
				}
				break;
		}
	}
	if (b.failed)
	{
		jbuf_free(&b);
		return llm_error_set(lx->err, LLM_ERR_NOMEM, "out of memory parsing the chat template");
	}
	st = push_text(lx, T_STRING, b.s ? b.s : "", b.len);
	jbuf_free(&b);
	return st;
}

/* Digits with optional single underscores between them, from s[i]; the end. */
static size_t
digits_end(const char *s, size_t n, size_t i)
{
	if (i >= n || !isdigit((unsigned char) s[i]))
		return i;
	while (i < n)
	{
		if (isdigit((unsigned char) s[i]))
			i++;
		else if (s[i] == '_' && i + 1 < n && isdigit((unsigned char) s[i + 1]))
			i++;
		else
			break;
	}
	return i;
}

/* Copy s[0..n) without underscores into buf (bufsz); false when too long. */
static bool
no_underscores(const char *s, size_t n, char *buf, size_t bufsz)
{
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
		if (s[i] != '_')
		{
			if (k + 1 >= bufsz)
				return false;
			buf[k++] = s[i];
		}
	buf[k] = '\0';
	return true;
}

/* Lex a number at lx->pos (a digit is there). */
static LlmStatus
lex_number(Lexer *lx)
{
	const char *s = lx->src;
	size_t		n = lx->len;
	size_t		p = lx->pos;
	size_t		e = digits_end(s, n, p);
	size_t		f = e;
	bool		is_float = false;
	char		buf[128];
	JToken	   *t;

	/* float: digits (. digits)? e[+-]digits, or digits . digits; not after a '.' */
	if (p == 0 || s[p - 1] != '.')
	{
		if (f < n && s[f] == '.' && f + 1 < n && isdigit((unsigned char) s[f + 1]))
		{
			f = digits_end(s, n, f + 1);
			is_float = true;
		}
		if (f < n && (s[f] == 'e' || s[f] == 'E'))
		{
			size_t		x = f + 1;

			if (x < n && (s[x] == '+' || s[x] == '-'))
				x++;
			if (x < n && isdigit((unsigned char) s[x]))
			{
				f = digits_end(s, n, x);
				is_float = true;
			}
		}
	}
	if (!is_float)
	{
		/* integers: 0x, 0o, 0b, or decimal; "0" may repeat as 00 */
		if (s[p] == '0' && p + 1 < n && strchr("xXoObB", s[p + 1]) != NULL)
			return lex_fail(lx, "hexadecimal, octal and binary integer literals are not supported");
		if (s[p] == '0')
		{
			e = p + 1;
			while (e < n && (s[e] == '0' || (s[e] == '_' && e + 1 < n && s[e + 1] == '0')))
				e++;
		}
		f = e;
	}
	if (!no_underscores(s + p, f - p, buf, sizeof(buf)))
		return lex_fail(lx, "a number literal too long");
	t = push(lx, is_float ? T_FLOAT : T_INT);
	if (t == NULL)
		return llm_error_set(lx->err, LLM_ERR_NOMEM, "out of memory parsing the chat template");
	if (is_float)
		t->f = strtod(buf, NULL);
	else
	{
		char	   *end;

		errno = 0;
		t->i = strtoll(buf, &end, 10);
		if (errno != 0)
			return lex_fail(lx, "an integer literal beyond 64 bits");
	}
	lx->pos = f;
	return LLM_OK;
}

/*
 * Lex the inside of a tag up to its end: block (is_block) or variable.
 * Brackets must balance before the closer counts.
 */
static LlmStatus
lex_tag(Lexer *lx, bool is_block)
{
	static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<="};
	const char *s = lx->src;
	size_t		n = lx->len;
	char		stack[64];
	int			depth = 0;
	LlmStatus	st;

	for (;;)
	{
		size_t		p = lx->pos;
		size_t		sp;

		if (p >= n)
			return lex_fail(lx, is_block ? "a block tag is not closed (missing %})" : "a variable tag is not closed (missing }})");
		/* the closer, where brackets balance */
		if (depth == 0)
		{
			size_t		end = 0;

			if (is_block)
			{
				if (strncmp(s + p, "+%}", 3) == 0)
					end = p + 3;
				else if (strncmp(s + p, "-%}", 3) == 0)
					end = p + 3 + skip_space(s + p + 3, n - p - 3);
				else if (strncmp(s + p, "%}", 2) == 0)
					end = p + 2 + (p + 2 < n && s[p + 2] == '\n');
			}
			else
			{
				if (strncmp(s + p, "-}}", 3) == 0)
					end = p + 3 + skip_space(s + p + 3, n - p - 3);
				else if (strncmp(s + p, "}}", 2) == 0)
					end = p + 2;
			}
			if (end > 0)
			{
				if (push(lx, is_block ? T_BLOCK_END : T_VAR_END) == NULL)
					return llm_error_set(lx->err, LLM_ERR_NOMEM, "out of memory parsing the chat template");
				lx->line += newlines(s + p, end - p);
				lx->line_starting = s[end - 1] == '\n';
				lx->pos = end;
				return LLM_OK;
			}
		}
		sp = skip_space(s + p, n - p);
		if (sp > 0)
		{
			lx->line += newlines(s + p, sp);
			lx->pos += sp;
			continue;
		}
		if (isdigit((unsigned char) s[p]))
		{
			st = lex_number(lx);
			if (st != LLM_OK)
				return st;
			continue;
		}
		if (isalpha((unsigned char) s[p]) || s[p] == '_')
		{
			size_t		e = p + 1;

			while (e < n && (isalnum((unsigned char) s[e]) || s[e] == '_'))
				e++;
			st = push_text(lx, T_NAME, s + p, e - p);
			if (st != LLM_OK)
				return st;
			lx->pos = e;
			continue;
		}
		if (s[p] == '\'' || s[p] == '"')
		{
			char		q = s[p];
			size_t		e = p + 1;

			while (e < n && s[e] != q)
				e += (s[e] == '\\' && e + 1 < n) ? 2 : 1;
			if (e >= n)
				return lex_fail(lx, "a string literal is not closed");
			st = push_string(lx, s + p + 1, e - p - 1);
			if (st != LLM_OK)
				return st;
			lx->line += newlines(s + p, e + 1 - p);
			lx->pos = e + 1;
			continue;
		}
		/* operators, longest first */
		{
			size_t		oplen = 0;

			for (size_t k = 0; k < sizeof(ops2) / sizeof(ops2[0]); k++)
				if (strncmp(s + p, ops2[k], 2) == 0)
					oplen = 2;
			if (oplen == 0 && strchr("+-/*%~[](){}<>=.:|,;", s[p]) != NULL)
				oplen = 1;
			if (oplen == 0)
			{
				char		what[64];

				snprintf(what, sizeof(what), "unexpected character '%c' in a tag",
						 (unsigned char) s[p] >= 0x20 && (unsigned char) s[p] < 0x7f ? s[p] : '?');
				return lex_fail(lx, what);
			}
			if (oplen == 1 && strchr("([{", s[p]) != NULL)
			{
				if (depth == (int) sizeof(stack))
					return lex_fail(lx, "brackets nested too deep");
				stack[depth++] = s[p] == '(' ? ')' : s[p] == '[' ? ']' : '}';
			}
			else if (oplen == 1 && strchr(")]}", s[p]) != NULL)
			{
				if (depth == 0 || stack[depth - 1] != s[p])
					return lex_fail(lx, "unbalanced brackets");
				depth--;
			}
			st = push_text(lx, T_OP, s + p, oplen);
			if (st != LLM_OK)
				return st;
			lx->pos += oplen;
		}
	}
}

/* The sign ('-', '+' or 0) at s[p] after a tag opener. */
static char
sign_at(const char *s, size_t n, size_t p)
{
	return p < n && (s[p] == '-' || s[p] == '+') ? s[p] : 0;
}

/* Whether a "raw" block opens at p ("{%" sign? \s* raw \s* (-%}\s* | %})); *end past it. */
static bool
raw_begin(const char *s, size_t n, size_t p, const char *word, size_t *end, char *sign)
{
	size_t		q = p + 2;
	size_t		wl = strlen(word);

	*sign = sign_at(s, n, q);
	if (*sign)
		q++;
	q += skip_space(s + q, n - q);
	if (n - q < wl || strncmp(s + q, word, wl) != 0)
		return false;
	q += wl;
	if (q < n && (isalnum((unsigned char) s[q]) || s[q] == '_'))
		return false;
	q += skip_space(s + q, n - q);
	*end = q;
	return true;
}

/* Lex a raw block's body from lx->pos up to its {% endraw %}. */
static LlmStatus
lex_raw(Lexer *lx)
{
	const char *s = lx->src;
	size_t		n = lx->len;

	for (size_t p = lx->pos; p + 1 < n; p++)
	{
		size_t		q;
		char		sign;
		size_t		end = 0;
		LlmStatus	st;

		if (s[p] != '{' || s[p + 1] != '%' || !raw_begin(s, n, p, "endraw", &q, &sign))
			continue;
		if (strncmp(s + q, "+%}", 3) == 0)
			end = q + 3;
		else if (strncmp(s + q, "-%}", 3) == 0)
			end = q + 3 + skip_space(s + q + 3, n - q - 3);
		else if (strncmp(s + q, "%}", 2) == 0)
			end = q + 2 + (q + 2 < n && s[q + 2] == '\n');
		else
			continue;
		st = emit_data(lx, s + lx->pos, p - lx->pos, sign, true);
		if (st != LLM_OK)
			return st;
		lx->line += newlines(s + lx->pos, end - lx->pos);
		lx->line_starting = s[end - 1] == '\n';
		lx->pos = end;
		return LLM_OK;
	}
	return lex_fail(lx, "a raw block is not closed (missing {% endraw %})");
}

/* Normalize newlines and drop one trailing newline, as Jinja2 does before lexing. */
static char *
normalize(JArena *a, const char *src, size_t len, size_t *out_len)
{
	char	   *buf = ja_alloc(a, len + 1);
	size_t		k = 0;

	if (buf == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++)
	{
		if (src[i] == '\r')
		{
			buf[k++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		}
		else
			buf[k++] = src[i];
	}
	if (k > 0 && buf[k - 1] == '\n')
		k--;
	buf[k] = '\0';
	*out_len = k;
	return buf;
}

/* Split a template into tokens (see jinja_int.h). */
LlmStatus
jinja_lex(JArena *a, const char *src, size_t len, JToken **toks, int *n_toks, LlmError *err)
{
	Lexer		lx = {0};
	LlmStatus	st = LLM_OK;

	lx.a = a;
	lx.err = err;
	lx.line = 1;
	lx.line_starting = true;
	if (memchr(src, '\0', len) != NULL)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "chat template: a NUL byte in the template");
	lx.src = normalize(a, src, len, &lx.len);
	if (lx.src == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory parsing the chat template");

	while (st == LLM_OK && lx.pos < lx.len)
	{
		const char *s = lx.src;
		size_t		n = lx.len;
		size_t		p = lx.pos;
		size_t		q;
		char		sign;
		char		kind = 0;

		/* the next tag opener */
		while (p + 1 < n && !(s[p] == '{' && (s[p + 1] == '{' || s[p + 1] == '%' || s[p + 1] == '#')))
			p++;
		if (p + 1 >= n)
		{
			st = push_text(&lx, T_TEXT, s + lx.pos, n - lx.pos);
			lx.line += newlines(s + lx.pos, n - lx.pos);
			lx.pos = n;
			break;
		}
		kind = s[p + 1];
		if (kind == '%' && raw_begin(s, n, p, "raw", &q, &sign) &&
			(strncmp(s + q, "-%}", 3) == 0 || strncmp(s + q, "%}", 2) == 0))
		{
			size_t		end = strncmp(s + q, "-%}", 3) == 0 ? q + 3 + skip_space(s + q + 3, n - q - 3) : q + 2;

			st = emit_data(&lx, s + lx.pos, p - lx.pos, sign, true);
			if (st != LLM_OK)
				break;
			lx.line += newlines(s + lx.pos, end - lx.pos);
			lx.line_starting = s[end - 1] == '\n';
			lx.pos = end;
			st = lex_raw(&lx);
			continue;
		}
		sign = sign_at(s, n, p + 2);
		st = emit_data(&lx, s + lx.pos, p - lx.pos, sign, kind != '{');
		if (st != LLM_OK)
			break;
		lx.line += newlines(s + lx.pos, p - lx.pos);
		lx.pos = p + 2 + (sign ? 1 : 0);
		lx.line_starting = false;
		if (kind == '#')
		{
			size_t		c = lx.pos;
			size_t		end = 0;

			for (; c + 1 < n; c++)
			{
				if (s[c] == '+' && strncmp(s + c + 1, "#}", 2) == 0)
					end = c + 3;
				else if (s[c] == '-' && strncmp(s + c + 1, "#}", 2) == 0)
					end = c + 3 + skip_space(s + c + 3, n - c - 3);
				else if (s[c] == '#' && s[c + 1] == '}')
					end = c + 2 + (c + 2 < n && s[c + 2] == '\n');
				if (end > 0)
					break;
			}
			if (end == 0)
				st = lex_fail(&lx, "a comment is not closed (missing #})");
			else
			{
				lx.line += newlines(s + lx.pos, end - lx.pos);
				lx.line_starting = s[end - 1] == '\n';
				lx.pos = end;
			}
			continue;
		}
		if (push(&lx, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN) == NULL)
			st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory parsing the chat template");
		else
			st = lex_tag(&lx, kind == '%');
	}
	if (st == LLM_OK && push(&lx, T_EOF) == NULL)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory parsing the chat template");
	if (st != LLM_OK)
		return st;
	*toks = lx.toks;
	*n_toks = lx.n;
	return LLM_OK;
}
