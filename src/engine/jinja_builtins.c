/*
 * jinja_builtins.c
 *		What templates call: Jinja2's filters and tests, the Python methods
 *		of str, dict and list that chat templates use, attribute and item
 *		access as the sandbox resolves them, and the globals (range,
 *		namespace, dict, transformers' raise_exception and strftime_now).
 *
 * Each behaves as Jinja2 3.1 and Python 3 do, including where they surprise
 * (Python's round() rounds half to even; "x is sequence" holds for an
 * undefined x).  A Python method the interpreter does not implement is
 * LLM_ERR_UNSUPPORTED naming it, never Undefined, so that a template is
 * refused rather than rendered differently; list and dict methods that
 * modify are errors, as Jinja2's ImmutableSandboxedEnvironment makes them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

/* ---- argument binding ------------------------------------------------------ */

/*
 * Bind positional args and keyword args to params (n_params names), into
 * out (J_NOARG where not given).  fname names the callee in errors.
 */
static bool
bind(JRender *r, int line, const char *fname, const char *const *params, int n_params,
	 JValue *args, int n_args, const char **kwnames, JValue *kwargs, int n_kw, JValue *out)
{
	for (int i = 0; i < n_params; i++)
		out[i].t = J_NOARG;
	if (n_args > n_params)
		return jr_fail(r, LLM_ERR_INVALID, line, "%s() takes at most %d argument(s) (%d given)", fname, n_params, n_args);
	for (int i = 0; i < n_args; i++)
		out[i] = args[i];
	for (int k = 0; k < n_kw; k++)
	{
		int			i;

		for (i = 0; i < n_params; i++)
			if (strcmp(kwnames[k], params[i]) == 0)
				break;
		if (i == n_params)
			return jr_fail(r, LLM_ERR_INVALID, line, "%s() got an unexpected keyword argument '%s'", fname, kwnames[k]);
		if (out[i].t != J_NOARG)
			return jr_fail(r, LLM_ERR_INVALID, line, "%s() got multiple values for argument '%s'", fname, kwnames[k]);
		out[i] = kwargs[k];
	}
	return true;
}

/* Whether an argument was given (and is not None, where None means "not given"). */
static bool
given(JValue v)
{
	return v.t != J_NOARG && v.t != J_NONE;
}

static bool
oom(JRender *r, int line)
{
	return jr_fail(r, LLM_ERR_LIMIT, line, "the template used more memory than allowed (or none was left)");
}

/* A string result from a buffer (freed here). */
static bool
buf_result(JRender *r, int line, JBuf *b, JValue *out)
{
	bool		ok;

	if (b->failed)
	{
		ok = b->over ? jr_fail(r, LLM_ERR_LIMIT, line, "a string passed %zu bytes", r->lim->max_output) : oom(r, line);
		jbuf_free(b);
		return ok;
	}
	out->t = J_STR;
	ok = jbuf_to_str(&r->arena, b, &out->s) || oom(r, line);
	jbuf_free(b);
	return ok;
}

/* A new buffer bounded by the output limit. */
static JBuf
new_buf(JRender *r)
{
	JBuf		b = {0};

	b.max = r->lim->max_output;
	return b;
}

/* str(v), Jinja2's soft_str. */
static bool
soft_str(JRender *r, int line, JValue v, JStr *out)
{
	if (!jv_to_str(&r->arena, v, r->lim->max_output, out))
		return oom(r, line);
	return true;
}

/* A substring of s (bytes off..off+len), its mask kept. */
static JValue
substr(JStr s, size_t off, size_t len)
{
	JValue		v = {.t = J_STR};

	v.s.s = s.s + off;
	v.s.len = len;
	v.s.u = s.u ? s.u + off : NULL;
	v.s.safe = s.safe;
	return v;
}

/* Whether code point c is in chars (a set given to strip()). */
static bool
in_chars(uint32_t c, JStr chars)
{
	for (size_t i = 0; i < chars.len;)
	{
		int			adv;

		if (ju_decode(chars.s + i, chars.len - i, &adv) == c)
			return true;
		i += adv;
	}
	return false;
}

/* Python's strip/lstrip/rstrip (chars NULL: whitespace). */
static JValue
strip(JStr s, const JStr *chars, bool left, bool right)
{
	size_t		lo = 0,
				hi = s.len;

	if (left)
		while (lo < hi)
		{
			int			adv;
			uint32_t	c = ju_decode(s.s + lo, hi - lo, &adv);

			if (chars ? !in_chars(c, *chars) : !ju_isspace(c))
				break;
			lo += adv;
		}
	if (right)
		while (hi > lo)
		{
			size_t		k = hi - 1;
			int			adv;
			uint32_t	c;

			while (k > lo && ((unsigned char) s.s[k] & 0xC0) == 0x80)
				k--;
			c = ju_decode(s.s + k, hi - k, &adv);
			if ((size_t) adv != hi - k)
				k = hi - 1, c = (unsigned char) s.s[k];
			if (chars ? !in_chars(c, *chars) : !ju_isspace(c))
				break;
			hi = k;
		}
	return substr(s, lo, hi - lo);
}

/* Map every code point of s through upper (or lower), masks kept per character. */
static bool
change_case(JRender *r, int line, JStr s, int mode, JValue *out)
{
	/* mode 0: lower, 1: upper, 2: capitalize, 3: title (Python's str.title) */
	JBuf		b = new_buf(r);
	bool		prev_cased = false;
	bool		first = true;

	for (size_t i = 0; i < s.len;)
	{
		int			adv;
		uint32_t	c = ju_decode(s.s + i, s.len - i, &adv);
		bool		u = s.u && s.u[i];
		uint32_t	up[2];
		bool		to_upper;
		bool		cased = ju_lower(c) != c || (ju_upper(c, up) == 2 || up[0] != c);

		to_upper = mode == 1 || (mode == 2 && first) || (mode == 3 && !prev_cased);
		if (to_upper)
		{
			int			k = ju_upper(c, up);

			for (int j = 0; j < k; j++)
				ju_put(&b, up[j], u);
		}
		else
			ju_put(&b, ju_lower(c), u);
		prev_cased = cased;
		first = false;
		i += adv;
	}
	if (!buf_result(r, line, &b, out))
		return false;
	out->s.safe = s.safe;
	return true;
}

/* Jinja2's title filter: each word (after -, whitespace, brackets) capitalized. */
static bool
jinja_title(JRender *r, int line, JStr s, JValue *out)
{
	JBuf		b = new_buf(r);
	bool		at_start = true;

	for (size_t i = 0; i < s.len;)
	{
		int			adv;
		uint32_t	c = ju_decode(s.s + i, s.len - i, &adv);
		bool		u = s.u && s.u[i];
		bool		sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || ju_isspace(c);

		if (sep)
		{
			jbuf_put(&b, s.s + i, (size_t) adv, u);
			at_start = true;
		}
		else if (at_start)
		{
			uint32_t	up[2];
			int			k = ju_upper(c, up);

			for (int j = 0; j < k; j++)
				ju_put(&b, up[j], u);
			at_start = false;
		}
		else
			ju_put(&b, ju_lower(c), u);
		i += adv;
	}
	return buf_result(r, line, &b, out);
}

/* Python's str.replace(old, new, count). */
static bool
str_replace(JRender *r, int line, JStr s, JStr old, JStr new, int64_t count, JValue *out)
{
	JBuf		b = new_buf(r);
	int64_t		done = 0;
	size_t		i = 0;

	if (old.len == 0)
	{
		/* new goes before every character and at the end */
		while (count < 0 || done < count)
		{
			jbuf_put_str(&b, new);
			done++;
			if (i >= s.len)
				break;
			{
				int			adv;

				(void) ju_decode(s.s + i, s.len - i, &adv);
				jbuf_put_str(&b, (JStr) {s.s + i, (size_t) adv, s.u ? s.u + i : NULL, false});
				i += adv;
			}
		}
		jbuf_put_str(&b, (JStr) {s.s + i, s.len - i, s.u ? s.u + i : NULL, false});
		return buf_result(r, line, &b, out);
	}
	while (i < s.len)
	{
		size_t		j = i;
		bool		found = false;

		if (count < 0 || done < count)
			for (; j + old.len <= s.len; j++)
				if (memcmp(s.s + j, old.s, old.len) == 0)
				{
					found = true;
					break;
				}
		if (!found)
		{
			jbuf_put_str(&b, (JStr) {s.s + i, s.len - i, s.u ? s.u + i : NULL, false});
			break;
		}
		jbuf_put_str(&b, (JStr) {s.s + i, j - i, s.u ? s.u + i : NULL, false});
		jbuf_put_str(&b, new);
		i = j + old.len;
		done++;
	}
	return buf_result(r, line, &b, out);
}

/* Python's str.split(sep, maxsplit) (sep NULL: runs of whitespace); rsplit when from_right. */
static bool
str_split(JRender *r, int line, JStr s, const JStr *sep, int64_t maxsplit, bool from_right, JValue *out)
{
	JList	   *l = jlist_new(&r->arena, 4);
	JList	   *rev;

	if (l == NULL)
		return oom(r, line);
	if (sep != NULL && sep->len == 0)
		return jr_fail(r, LLM_ERR_INVALID, line, "empty separator");
	if (!from_right)
	{
		size_t		i = 0;
		int64_t		splits = 0;

		if (sep == NULL)
		{
			for (;;)
			{
				size_t		start;
				int			adv;

				while (i < s.len && ju_isspace(ju_decode(s.s + i, s.len - i, &adv)))
					i += adv;
				if (i >= s.len)
					break;
				if (maxsplit >= 0 && splits >= maxsplit)
				{
					/* the rest, trailing whitespace stripped */
					JValue		rest = strip(substr(s, i, s.len - i).s, NULL, false, true);

					if (!jlist_push(&r->arena, l, rest))
						return oom(r, line);
					break;
				}
				start = i;
				while (i < s.len && !ju_isspace(ju_decode(s.s + i, s.len - i, &adv)))
					i += adv;
				if (!jlist_push(&r->arena, l, substr(s, start, i - start)))
					return oom(r, line);
				splits++;
			}
		}
		else
		{
			for (;;)
			{
				size_t		j = i;
				bool		found = false;

				if (maxsplit < 0 || splits < maxsplit)
					for (; j + sep->len <= s.len; j++)
						if (memcmp(s.s + j, sep->s, sep->len) == 0)
						{
							found = true;
							break;
						}
				if (!found)
				{
					if (!jlist_push(&r->arena, l, substr(s, i, s.len - i)))
						return oom(r, line);
					break;
				}
				if (!jlist_push(&r->arena, l, substr(s, i, j - i)))
					return oom(r, line);
				i = j + sep->len;
				splits++;
			}
		}
		out->t = J_LIST;
		out->l = l;
		return true;
	}
	/* rsplit: split from the right, then reverse */
	{
		size_t		end = s.len;
		int64_t		splits = 0;

		if (sep == NULL)
		{
			for (;;)
			{
				size_t		k;

				while (end > 0 && ju_isspace((unsigned char) s.s[end - 1]))
					end--;
				if (end == 0)
					break;
				if (maxsplit >= 0 && splits >= maxsplit)
				{
					JValue		rest = strip(substr(s, 0, end).s, NULL, true, false);

					if (!jlist_push(&r->arena, l, rest))
						return oom(r, line);
					break;
				}
				k = end;
				while (k > 0 && !ju_isspace((unsigned char) s.s[k - 1]))
					k--;
				if (!jlist_push(&r->arena, l, substr(s, k, end - k)))
					return oom(r, line);
				end = k;
				splits++;
			}
		}
		else
		{
			for (;;)
			{
				bool		found = false;
				size_t		j = 0;

				if ((maxsplit < 0 || splits < maxsplit) && end >= sep->len)
					for (j = end - sep->len + 1; j-- > 0;)
						if (memcmp(s.s + j, sep->s, sep->len) == 0)
						{
							found = true;
							break;
						}
				if (!found)
				{
					if (!jlist_push(&r->arena, l, substr(s, 0, end)))
						return oom(r, line);
					break;
				}
				if (!jlist_push(&r->arena, l, substr(s, j + sep->len, end - j - sep->len)))
					return oom(r, line);
				end = j;
				splits++;
			}
		}
		rev = jlist_new(&r->arena, l->n);
		if (rev == NULL)
			return oom(r, line);
		for (int i = l->n - 1; i >= 0; i--)
			rev->v[rev->n++] = l->v[i];
		out->t = J_LIST;
		out->l = rev;
		return true;
	}
}

/* Python's str.splitlines(). */
static bool
str_splitlines(JRender *r, int line, JStr s, bool keepends, JValue *out)
{
	JList	   *l = jlist_new(&r->arena, 4);
	size_t		start = 0;

	if (l == NULL)
		return oom(r, line);
	for (size_t i = 0; i < s.len;)
	{
		int			adv;
		uint32_t	c = ju_decode(s.s + i, s.len - i, &adv);
		bool		brk = c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e) ||
			c == 0x85 || c == 0x2028 || c == 0x2029;
		size_t		eol = (size_t) adv;

		if (!brk)
		{
			i += adv;
			continue;
		}
		if (c == '\r' && i + 1 < s.len && s.s[i + 1] == '\n')
			eol = 2;
		if (!jlist_push(&r->arena, l, substr(s, start, (keepends ? i + eol : i) - start)))
			return oom(r, line);
		i += eol;
		start = i;
	}
	if (start < s.len && !jlist_push(&r->arena, l, substr(s, start, s.len - start)))
		return oom(r, line);
	out->t = J_LIST;
	out->l = l;
	return true;
}

/* The code point index of byte offset off in s. */
static int64_t
cp_index(JStr s, size_t off)
{
	return (int64_t) ju_count(s.s, off);
}

/* Python's str.format with {} {0} {name} fields (no conversions or format specs). */
static bool
str_format(JRender *r, int line, JStr fmt, JValue *args, int n_args, const char **kwnames, JValue *kwargs,
		   int n_kw, JValue *out)
{
	JBuf		b = new_buf(r);
	int			auto_idx = 0;

	for (size_t i = 0; i < fmt.len; i++)
	{
		char		c = fmt.s[i];

		if (c == '{' && i + 1 < fmt.len && fmt.s[i + 1] == '{')
		{
			jbuf_put(&b, "{", 1, fmt.u && fmt.u[i]);
			i++;
		}
		else if (c == '}' && i + 1 < fmt.len && fmt.s[i + 1] == '}')
		{
			jbuf_put(&b, "}", 1, fmt.u && fmt.u[i]);
			i++;
		}
		else if (c == '{')
		{
			size_t		j = i + 1;
			JValue		v;

			while (j < fmt.len && fmt.s[j] != '}')
				j++;
			if (j >= fmt.len)
			{
				jbuf_free(&b);
				return jr_fail(r, LLM_ERR_INVALID, line, "Single '{' encountered in format string");
			}
			if (memchr(fmt.s + i + 1, ':', j - i - 1) || memchr(fmt.s + i + 1, '!', j - i - 1) ||
				memchr(fmt.s + i + 1, '.', j - i - 1) || memchr(fmt.s + i + 1, '[', j - i - 1))
			{
				jbuf_free(&b);
				return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "str.format with a conversion, attribute or format spec is not supported");
			}
			if (j == i + 1)
			{
				if (auto_idx >= n_args)
				{
					jbuf_free(&b);
					return jr_fail(r, LLM_ERR_INVALID, line, "Replacement index %d out of range for positional args tuple", auto_idx);
				}
				v = args[auto_idx++];
			}
			else if (fmt.s[i + 1] >= '0' && fmt.s[i + 1] <= '9')
			{
				int			idx = atoi(fmt.s + i + 1);

				if (idx >= n_args)
				{
					jbuf_free(&b);
					return jr_fail(r, LLM_ERR_INVALID, line, "Replacement index %d out of range for positional args tuple", idx);
				}
				v = args[idx];
			}
			else
			{
				int			k;

				for (k = 0; k < n_kw; k++)
					if (strlen(kwnames[k]) == j - i - 1 && memcmp(kwnames[k], fmt.s + i + 1, j - i - 1) == 0)
						break;
				if (k == n_kw)
				{
					jbuf_free(&b);
					return jr_fail(r, LLM_ERR_INVALID, line, "KeyError in str.format: '%.*s'", (int) (j - i - 1), fmt.s + i + 1);
				}
				v = kwargs[k];
			}
			jv_write_str(&b, v, 0);
			i = j;
		}
		else if (c == '}')
		{
			jbuf_free(&b);
			return jr_fail(r, LLM_ERR_INVALID, line, "Single '}' encountered in format string");
		}
		else
			jbuf_put(&b, &c, 1, fmt.u && fmt.u[i]);
	}
	return buf_result(r, line, &b, out);
}

/* ---- strftime_now ---------------------------------------------------------- */

/* strftime for the render's fixed date at 00:00:00: the directives templates use. */
static bool
strftime_fixed(JRender *r, int line, JStr fmt, JValue *out)
{
	static const char *const months[] = {"January", "February", "March", "April", "May", "June", "July",
	"August", "September", "October", "November", "December"};
	static const char *const days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
	static const int cum[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
	JBuf		b = new_buf(r);
	int			y = r->year,
				m = r->month,
				d = r->day;
	bool		leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	int			yday = cum[(m - 1) % 12] + d + (leap && m > 2 ? 1 : 0);
	int			wday;

	/* Zeller-style day of the week (0 = Sunday) */
	{
		int			yy = m < 3 ? y - 1 : y;
		static const int t[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};

		wday = (yy + yy / 4 - yy / 100 + yy / 400 + t[(m - 1) % 12] + d) % 7;
	}
	for (size_t i = 0; i < fmt.len; i++)
	{
		char		num[32];
		bool		nopad = false;
		char		c;

		if (fmt.s[i] != '%' || i + 1 >= fmt.len)
		{
			jbuf_put(&b, fmt.s + i, 1, false);
			continue;
		}
		c = fmt.s[++i];
		if (c == '-' && i + 1 < fmt.len)
		{
			nopad = true;
			c = fmt.s[++i];
		}
		num[0] = '\0';
		switch (c)
		{
			case 'd':
				snprintf(num, sizeof(num), nopad ? "%d" : "%02d", d);
				break;
			case 'e':
				snprintf(num, sizeof(num), nopad ? "%d" : "%2d", d);
				break;
			case 'm':
				snprintf(num, sizeof(num), nopad ? "%d" : "%02d", m);
				break;
			case 'Y':
				snprintf(num, sizeof(num), "%d", y);
				break;
			case 'y':
				snprintf(num, sizeof(num), nopad ? "%d" : "%02d", y % 100);
				break;
			case 'b':
			case 'h':
				snprintf(num, sizeof(num), "%.3s", months[(m - 1) % 12]);
				break;
			case 'B':
				snprintf(num, sizeof(num), "%s", months[(m - 1) % 12]);
				break;
			case 'a':
				snprintf(num, sizeof(num), "%.3s", days[wday]);
				break;
			case 'A':
				snprintf(num, sizeof(num), "%s", days[wday]);
				break;
			case 'j':
				snprintf(num, sizeof(num), nopad ? "%d" : "%03d", yday);
				break;
			case 'H':
			case 'M':
			case 'S':
				snprintf(num, sizeof(num), nopad ? "0" : "00");
				break;
			case 'I':
				snprintf(num, sizeof(num), nopad ? "12" : "12");
				break;
			case 'p':
				snprintf(num, sizeof(num), "AM");
				break;
			case 'F':
				snprintf(num, sizeof(num), "%04d-%02d-%02d", y, m, d);
				break;
			case '%':
				snprintf(num, sizeof(num), "%%");
				break;
			default:
				jbuf_free(&b);
				return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "strftime_now: the directive %%%c is not supported", c);
		}
		jbuf_puts(&b, num);
	}
	return buf_result(r, line, &b, out);
}

/* ---- builtins by id ---------------------------------------------------------- */

typedef enum BuiltinId
{
	/* globals */
	B_RANGE, B_NAMESPACE, B_DICT, B_RAISE, B_STRFTIME, B_UNSUPPORTED_GLOBAL,
	/* str methods */
	M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_SPLITLINES, M_STARTSWITH, M_ENDSWITH, M_REPLACE,
	M_UPPER, M_LOWER, M_TITLE, M_CAPITALIZE, M_FIND, M_RFIND, M_COUNT, M_FORMAT, M_JOIN,
	M_ISDIGIT, M_ISALPHA, M_ISALNUM, M_ISSPACE, M_ISLOWER, M_ISUPPER,
	/* dict methods */
	M_GET, M_ITEMS, M_KEYS, M_VALUES,
	/* what exists in Python but is not implemented, or is unsafe */
	M_UNSUPPORTED, M_UNSAFE
} BuiltinId;

typedef struct NamedId
{
	const char *name;
	int			id;
} NamedId;


static const NamedId str_methods[] = {
	{"strip", M_STRIP}, {"lstrip", M_LSTRIP}, {"rstrip", M_RSTRIP}, {"split", M_SPLIT}, {"rsplit", M_RSPLIT},
	{"splitlines", M_SPLITLINES}, {"startswith", M_STARTSWITH}, {"endswith", M_ENDSWITH},
	{"replace", M_REPLACE}, {"upper", M_UPPER}, {"lower", M_LOWER}, {"title", M_TITLE},
	{"capitalize", M_CAPITALIZE}, {"find", M_FIND}, {"rfind", M_RFIND}, {"count", M_COUNT},
	{"format", M_FORMAT}, {"join", M_JOIN}, {"isdigit", M_ISDIGIT}, {"isalpha", M_ISALPHA},
	{"isalnum", M_ISALNUM}, {"isspace", M_ISSPACE}, {"islower", M_ISLOWER}, {"isupper", M_ISUPPER},
	{"casefold", M_UNSUPPORTED}, {"center", M_UNSUPPORTED}, {"encode", M_UNSUPPORTED},
	{"expandtabs", M_UNSUPPORTED}, {"format_map", M_UNSUPPORTED}, {"index", M_UNSUPPORTED},
	{"isascii", M_UNSUPPORTED}, {"isdecimal", M_UNSUPPORTED}, {"isidentifier", M_UNSUPPORTED},
	{"isnumeric", M_UNSUPPORTED}, {"isprintable", M_UNSUPPORTED}, {"istitle", M_UNSUPPORTED},
	{"ljust", M_UNSUPPORTED}, {"partition", M_UNSUPPORTED}, {"removeprefix", M_UNSUPPORTED},
	{"removesuffix", M_UNSUPPORTED}, {"rindex", M_UNSUPPORTED}, {"rjust", M_UNSUPPORTED},
	{"rpartition", M_UNSUPPORTED}, {"swapcase", M_UNSUPPORTED}, {"translate", M_UNSUPPORTED},
	{"zfill", M_UNSUPPORTED}, {"maketrans", M_UNSUPPORTED},
	{NULL, 0}
};

static const NamedId dict_methods[] = {
	{"get", M_GET}, {"items", M_ITEMS}, {"keys", M_KEYS}, {"values", M_VALUES},
	{"copy", M_UNSUPPORTED}, {"fromkeys", M_UNSUPPORTED},
	{"pop", M_UNSAFE}, {"popitem", M_UNSAFE}, {"setdefault", M_UNSAFE}, {"update", M_UNSAFE}, {"clear", M_UNSAFE},
	{NULL, 0}
};

static const NamedId list_methods[] = {
	{"index", M_UNSUPPORTED}, {"count", M_UNSUPPORTED}, {"copy", M_UNSUPPORTED},
	{"append", M_UNSAFE}, {"extend", M_UNSAFE}, {"insert", M_UNSAFE}, {"pop", M_UNSAFE},
	{"remove", M_UNSAFE}, {"clear", M_UNSAFE}, {"sort", M_UNSAFE}, {"reverse", M_UNSAFE},
	{NULL, 0}
};

/* The id of name in table, or -1. */
static int
find_id(const NamedId *table, const char *name)
{
	for (int i = 0; table[i].name != NULL; i++)
		if (strcmp(table[i].name, name) == 0)
			return table[i].id;
	return -1;
}

/* A builtin function value: id bound to self (J_NOARG for a global). */
static bool
make_builtin(JRender *r, int line, int id, const char *name, JValue self, JValue *out)
{
	JFunc	   *fn = r ? ja_alloc(&r->arena, sizeof(JFunc)) : NULL;

	if (fn == NULL)
		return r ? oom(r, line) : false;
	fn->kind = F_BUILTIN;
	fn->id = id;
	fn->name = name;
	fn->self = self;
	out->t = J_FUNC;
	out->fn = fn;
	return true;
}

/* The globals as values: immutable and shared, bound to nothing. */
#define GLOBAL(nm, ident) {.kind = F_BUILTIN, .name = nm, .id = ident, .self = {.t = J_NOARG}}
static JFunc global_fns[] = {
	GLOBAL("range", B_RANGE), GLOBAL("namespace", B_NAMESPACE), GLOBAL("dict", B_DICT),
	GLOBAL("raise_exception", B_RAISE), GLOBAL("strftime_now", B_STRFTIME),
	GLOBAL("cycler", B_UNSUPPORTED_GLOBAL), GLOBAL("joiner", B_UNSUPPORTED_GLOBAL),
	GLOBAL("lipsum", B_UNSUPPORTED_GLOBAL)
};
#undef GLOBAL

/* The global function name, as a value (see jinja_int.h). */
bool
jinja_global(const char *name, JValue *out)
{
	for (size_t i = 0; i < sizeof(global_fns) / sizeof(global_fns[0]); i++)
		if (strcmp(global_fns[i].name, name) == 0)
		{
			out->t = J_FUNC;
			out->fn = &global_fns[i];
			return true;
		}
	return false;
}

/* ---- attributes and items -------------------------------------------------- */

/* v.attr (see jinja_int.h). */
bool
jinja_getattr(JRender *r, int line, JValue v, const char *attr, JValue *out)
{
	int			id = -1;

	if (v.t == J_UNDEF)
	{
		if (v.s.len > 0)
			return jr_fail(r, LLM_ERR_INVALID, line, "'%.*s' is undefined", (int) v.s.len, v.s.s);
		return jr_fail(r, LLM_ERR_INVALID, line, "an undefined value has no attribute '%s'", attr);
	}
	if (attr[0] == '_')
	{
		*out = jv_undef(attr);
		return true;
	}
	if (v.t == J_STR)
		id = find_id(str_methods, attr);
	else if (v.t == J_DICT && !v.d->ns)
		id = find_id(dict_methods, attr);
	else if (v.t == J_LIST)
		id = find_id(list_methods, attr);
	if (id >= 0)
		return make_builtin(r, line, id, attr, v, out);
	if (v.t == J_DICT)
	{
		JValue	   *p = jdict_get(v.d, attr, strlen(attr));

		*out = p ? *p : jv_undef(attr);
		return true;
	}
	*out = jv_undef(attr);
	return true;
}

/* v[key] (see jinja_int.h). */
bool
jinja_getitem(JRender *r, int line, JValue v, JValue key, JValue *out)
{
	if (v.t == J_UNDEF)
		return jinja_getattr(r, line, v, "[]", out);
	if (v.t == J_DICT && !v.d->ns)
	{
		JValue	   *p = jdict_find(v.d, key);

		if (p != NULL)
		{
			*out = *p;
			return true;
		}
	}
	else if (v.t == J_DICT && key.t == J_STR)
	{
		JValue	   *p = jdict_get(v.d, key.s.s, key.s.len);

		*out = p ? *p : jv_undef("");
		return true;
	}
	else if (v.t == J_LIST && v.l->gen)
		return jr_fail(r, LLM_ERR_INVALID, line, "'generator' object is not subscriptable");
	else if ((v.t == J_LIST || v.t == J_STR) && (key.t == J_INT || key.t == J_BOOL))
	{
		int64_t		i = key.t == J_INT ? key.i : key.b;
		int64_t		n = v.t == J_LIST ? v.l->n : (int64_t) ju_count(v.s.s, v.s.len);

		if (i < 0)
			i += n;
		if (i < 0 || i >= n)
		{
			*out = jv_undef("");
			return true;
		}
		if (v.t == J_LIST)
			*out = v.l->v[i];
		else
		{
			size_t		off = ju_offset(v.s.s, v.s.len, (size_t) i);
			int			adv;

			(void) ju_decode(v.s.s + off, v.s.len - off, &adv);
			*out = substr(v.s, off, (size_t) adv);
		}
		return true;
	}
	if (key.t == J_STR)
	{
		char	   *name = ja_alloc(&r->arena, key.s.len + 1);

		if (name == NULL)
			return oom(r, line);
		memcpy(name, key.s.s, key.s.len);
		if (memchr(name, '\0', key.s.len) == NULL)
			return jinja_getattr(r, line, v, name, out);
	}
	*out = jv_undef("");
	return true;
}

/* The items of an iterable (see jinja_int.h). */
bool
jinja_iterate(JRender *r, int line, JValue v, JList **out)
{
	JList	   *l;

	switch (v.t)
	{
		case J_LIST:
			if (v.l->gen && v.l->consumed)
			{
				*out = jlist_new(&r->arena, 0);
				return *out != NULL || oom(r, line);
			}
			v.l->consumed = v.l->gen;
			*out = v.l;
			return true;
		case J_UNDEF:
			*out = jlist_new(&r->arena, 0);
			return *out != NULL || oom(r, line);
		case J_DICT:
			if (v.d->ns)
				break;
			l = jlist_new(&r->arena, v.d->n);
			if (l == NULL)
				return oom(r, line);
			for (int i = 0; i < v.d->n; i++)
				l->v[l->n++] = v.d->k[i];
			*out = l;
			return true;
		case J_STR:
			l = jlist_new(&r->arena, (int) ju_count(v.s.s, v.s.len));
			if (l == NULL)
				return oom(r, line);
			for (size_t i = 0; i < v.s.len;)
			{
				int			adv;

				(void) ju_decode(v.s.s + i, v.s.len - i, &adv);
				l->v[l->n++] = substr(v.s, i, (size_t) adv);
				i += adv;
			}
			*out = l;
			return true;
		default:
			break;
	}
	return jr_fail(r, LLM_ERR_INVALID, line, "'%s' object is not iterable", jv_type_name(v));
}

/* (key, value) tuples of a dict. */
static bool
dict_items(JRender *r, int line, JDict *d, JValue *out)
{
	JList	   *l = jlist_new(&r->arena, d->n);

	if (l == NULL)
		return oom(r, line);
	for (int i = 0; i < d->n; i++)
	{
		JList	   *pair = jlist_new(&r->arena, 2);

		if (pair == NULL)
			return oom(r, line);
		pair->v[0] = d->k[i];
		pair->v[1] = d->v[i];
		pair->n = 2;
		pair->tuple = true;
		l->v[l->n++] = (JValue) {.t = J_LIST, .l = pair};
	}
	out->t = J_LIST;
	out->l = l;
	return true;
}

/* The length of v, as len() gives it. */
static bool
length(JRender *r, int line, JValue v, int64_t *n)
{
	switch (v.t)
	{
		case J_STR:
			*n = (int64_t) ju_count(v.s.s, v.s.len);
			return true;
		case J_LIST:
			if (v.l->gen)
				break;
			*n = v.l->n;
			return true;
		case J_DICT:
			if (v.d->ns)
				break;
			*n = v.d->n;
			return true;
		case J_UNDEF:
			*n = 0;
			return true;
		default:
			break;
	}
	return jr_fail(r, LLM_ERR_INVALID, line, "object of type '%s' has no len()", jv_type_name(v));
}

/* ---- calls of builtins ---------------------------------------------------------- */

/* The string argument a (or fail naming fname). */
static bool
str_arg(JRender *r, int line, const char *fname, JValue a, JStr *out)
{
	if (a.t != J_STR)
		return jr_fail(r, LLM_ERR_INVALID, line, "%s() argument must be str, not %s", fname, jv_type_name(a));
	*out = a.s;
	return true;
}

/* An integer argument a, or dflt when not given. */
static bool
int_arg(JRender *r, int line, const char *fname, JValue a, int64_t dflt, int64_t *out)
{
	if (!given(a))
		*out = dflt;
	else if (a.t == J_INT || a.t == J_BOOL)
		*out = a.t == J_INT ? a.i : a.b;
	else
		return jr_fail(r, LLM_ERR_INVALID, line, "%s() expects an integer, not %s", fname, jv_type_name(a));
	return true;
}

/* s.startswith/endswith(prefix or tuple of them). */
static bool
affix(JRender *r, int line, JStr s, JValue p, bool end, bool *res)
{
	int			n = p.t == J_LIST && p.l->tuple ? p.l->n : 1;

	*res = false;
	for (int i = 0; i < n; i++)
	{
		JValue		x = p.t == J_LIST && p.l->tuple ? p.l->v[i] : p;

		if (x.t != J_STR)
			return jr_fail(r, LLM_ERR_INVALID, line, "%s first arg must be str or a tuple of str, not %s",
						   end ? "endswith" : "startswith", jv_type_name(x));
		if (x.s.len <= s.len && memcmp(end ? s.s + s.len - x.s.len : s.s, x.s.s, x.s.len) == 0)
			*res = true;
	}
	return true;
}

/* A character class test over every code point of s (at least one). */
static bool
char_class(JStr s, int id)
{
	bool		any_cased = false;

	if (s.len == 0)
		return false;
	for (size_t i = 0; i < s.len;)
	{
		int			adv;
		uint32_t	c = ju_decode(s.s + i, s.len - i, &adv);
		uint32_t	up[2];
		bool		lower = ju_lower(c) == c && (ju_upper(c, up) == 2 || up[0] != c);
		bool		upper = ju_lower(c) != c;
		bool		alpha = lower || upper || (c >= 0x80 && !ju_isspace(c));
		bool		digit = c >= '0' && c <= '9';

		i += adv;
		switch (id)
		{
			case M_ISDIGIT:
				if (!digit)
					return false;
				break;
			case M_ISALPHA:
				if (!alpha)
					return false;
				break;
			case M_ISALNUM:
				if (!alpha && !digit)
					return false;
				break;
			case M_ISSPACE:
				if (!ju_isspace(c))
					return false;
				break;
			case M_ISLOWER:
				if (upper)
					return false;
				any_cased |= lower;
				break;
			case M_ISUPPER:
				if (lower)
					return false;
				any_cased |= upper;
				break;
		}
	}
	return (id == M_ISLOWER || id == M_ISUPPER) ? any_cased : true;
}

/* range(stop) / range(start, stop[, step]). */
static bool
do_range(JRender *r, int line, JValue *args, int n_args, JValue *out)
{
	int64_t		a[3] = {0, 0, 1};
	int64_t		count;
	JList	   *l;

	if (n_args < 1 || n_args > 3)
		return jr_fail(r, LLM_ERR_INVALID, line, "range expected 1 to 3 arguments, got %d", n_args);
	for (int i = 0; i < n_args; i++)
		if (args[i].t != J_INT && args[i].t != J_BOOL)
			return jr_fail(r, LLM_ERR_INVALID, line, "'%s' object cannot be interpreted as an integer",
						   jv_type_name(args[i]));
	if (n_args == 1)
		a[1] = args[0].t == J_INT ? args[0].i : args[0].b;
	else
		for (int i = 0; i < n_args; i++)
			a[i] = args[i].t == J_INT ? args[i].i : args[i].b;
	if (a[2] == 0)
		return jr_fail(r, LLM_ERR_INVALID, line, "range() arg 3 must not be zero");
	if (a[2] > 0)
		count = a[1] > a[0] ? (a[1] - a[0] + a[2] - 1) / a[2] : 0;
	else
		count = a[0] > a[1] ? (a[0] - a[1] - a[2] - 1) / -a[2] : 0;
	if (count > r->lim->max_loop)
		return jr_fail(r, LLM_ERR_LIMIT, line, "a range of more than %lld items", (long long) r->lim->max_loop);
	l = jlist_new(&r->arena, (int) count);
	if (l == NULL)
		return oom(r, line);
	for (int64_t i = 0; i < count; i++)
		l->v[l->n++] = jv_int(a[0] + i * a[2]);
	out->t = J_LIST;
	out->l = l;
	return true;
}

/* Call builtin fn (see jinja_int.h). */
bool
jinja_call_builtin(JRender *r, int line, JFunc *fn, JValue *args, int n_args,
				   const char **kwnames, JValue *kwargs, int n_kw, JValue *out)
{
	JValue		p[4];
	JStr		s = fn->self.t == J_STR ? fn->self.s : (JStr) {"", 0, NULL, false};
	JStr		x,
				y;
	int64_t		n = -1;
	bool		res;

	if (fn->kind == F_LOOP_CYCLE)
	{
		if (n_args == 0)
			return jr_fail(r, LLM_ERR_INVALID, line, "no items for cycling given");
		*out = args[fn->id % n_args];
		return true;
	}
	switch ((BuiltinId) fn->id)
	{
		case B_RANGE:
			if (n_kw > 0)
				return jr_fail(r, LLM_ERR_INVALID, line, "range() takes no keyword arguments");
			return do_range(r, line, args, n_args, out);
		case B_NAMESPACE:
		case B_DICT:
			{
				JDict	   *d;

				if (n_args > 0 && !(fn->id == B_NAMESPACE && n_args == 1 && args[0].t == J_DICT))
					return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "%s() with positional arguments is not supported", fn->name);
				d = jdict_new(&r->arena, n_kw + 4);
				if (d == NULL)
					return oom(r, line);
				if (n_args == 1)
					for (int i = 0; i < args[0].d->n; i++)
						if (!jdict_set(&r->arena, d, args[0].d->k[i], args[0].d->v[i]))
							return oom(r, line);
				for (int i = 0; i < n_kw; i++)
					if (!jdict_set(&r->arena, d, jv_cstr(kwnames[i]), kwargs[i]))
						return oom(r, line);
				d->ns = fn->id == B_NAMESPACE;
				out->t = J_DICT;
				out->d = d;
				return true;
			}
		case B_RAISE:
			{
				JStr		msg = {"", 0, NULL, false};

				if (n_args > 0 && !soft_str(r, line, args[0], &msg))
					return false;
				if (r->status != LLM_OK)
					return false;
				llm_error_set(r->err, LLM_ERR_INVALID, "the chat template raised an error: %.*s",
							  (int) (msg.len > 400 ? 400 : msg.len), msg.s);
				r->status = LLM_ERR_INVALID;
				return false;
			}
		case B_STRFTIME:
			if (n_args != 1 || args[0].t != J_STR)
				return jr_fail(r, LLM_ERR_INVALID, line, "strftime_now() takes one format string");
			return strftime_fixed(r, line, args[0].s, out);
		case B_UNSUPPORTED_GLOBAL:
			return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "the global %s() is not supported", fn->name);
		case M_UNSUPPORTED:
			return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "the method %s.%s() is not supported",
						   jv_type_name(fn->self), fn->name);
		case M_UNSAFE:
			return jr_fail(r, LLM_ERR_INVALID, line, "%s.%s() modifies a value, which the sandbox forbids",
						   jv_type_name(fn->self), fn->name);
		case M_STRIP:
		case M_LSTRIP:
		case M_RSTRIP:
			{
				static const char *const params[] = {"chars"};

				if (!bind(r, line, fn->name, params, 1, args, n_args, kwnames, kwargs, n_kw, p))
					return false;
				if (given(p[0]) && !str_arg(r, line, fn->name, p[0], &x))
					return false;
				*out = strip(s, given(p[0]) ? &x : NULL, fn->id != M_RSTRIP, fn->id != M_LSTRIP);
				return true;
			}
		case M_SPLIT:
		case M_RSPLIT:
			{
				static const char *const params[] = {"sep", "maxsplit"};

				if (!bind(r, line, fn->name, params, 2, args, n_args, kwnames, kwargs, n_kw, p) ||
					(given(p[0]) && !str_arg(r, line, fn->name, p[0], &x)) ||
					!int_arg(r, line, fn->name, p[1], -1, &n))
					return false;
				return str_split(r, line, s, given(p[0]) ? &x : NULL, n, fn->id == M_RSPLIT, out);
			}
		case M_SPLITLINES:
			{
				static const char *const params[] = {"keepends"};

				if (!bind(r, line, fn->name, params, 1, args, n_args, kwnames, kwargs, n_kw, p))
					return false;
				return str_splitlines(r, line, s, given(p[0]) && jv_truthy(p[0]), out);
			}
		case M_STARTSWITH:
		case M_ENDSWITH:
			if (n_args != 1 || n_kw != 0)
				return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "%s() with start or end is not supported", fn->name);
			if (!affix(r, line, s, args[0], fn->id == M_ENDSWITH, &res))
				return false;
			*out = jv_bool(res);
			return true;
		case M_REPLACE:
			{
				static const char *const params[] = {"old", "new", "count"};

				if (!bind(r, line, fn->name, params, 3, args, n_args, kwnames, kwargs, n_kw, p) ||
					!str_arg(r, line, fn->name, p[0], &x) || !str_arg(r, line, fn->name, p[1], &y) ||
					!int_arg(r, line, fn->name, p[2], -1, &n))
					return false;
				return str_replace(r, line, s, x, y, n, out);
			}
		case M_UPPER:
		case M_LOWER:
		case M_TITLE:
		case M_CAPITALIZE:
			return change_case(r, line, s, fn->id == M_LOWER ? 0 : fn->id == M_UPPER ? 1 : fn->id == M_CAPITALIZE ? 2 : 3, out);
		case M_FIND:
		case M_RFIND:
		case M_COUNT:
			if (n_args != 1 || n_kw != 0)
				return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "%s() with start or end is not supported", fn->name);
			if (!str_arg(r, line, fn->name, args[0], &x))
				return false;
			{
				int64_t		found = -1,
							count = 0;

				for (size_t i = 0; i + x.len <= s.len;)
				{
					if (memcmp(s.s + i, x.s, x.len) == 0)
					{
						if (found < 0 || fn->id == M_RFIND)
							found = (int64_t) i;
						count++;
						if (fn->id == M_FIND)
							break;
						i += x.len > 0 ? x.len : 1;
					}
					else
						i++;
				}
				if (fn->id == M_COUNT)
				{
					if (x.len == 0)
						count = (int64_t) ju_count(s.s, s.len) + 1;
					*out = jv_int(count);
				}
				else
					*out = jv_int(found < 0 ? -1 : cp_index(s, (size_t) found));
				return true;
			}
		case M_FORMAT:
			return str_format(r, line, s, args, n_args, kwnames, kwargs, n_kw, out);
		case M_JOIN:
			{
				JList	   *items;
				JBuf		b = new_buf(r);

				if (n_args != 1 || !jinja_iterate(r, line, args[0], &items))
					return n_args != 1 ? jr_fail(r, LLM_ERR_INVALID, line, "join() takes one argument") : false;
				for (int i = 0; i < items->n; i++)
				{
					if (items->v[i].t != J_STR)
					{
						jbuf_free(&b);
						return jr_fail(r, LLM_ERR_INVALID, line, "sequence item %d: expected str instance, %s found",
									   i, jv_type_name(items->v[i]));
					}
					if (i > 0)
						jbuf_put_str(&b, s);
					jbuf_put_str(&b, items->v[i].s);
				}
				return buf_result(r, line, &b, out);
			}
		case M_ISDIGIT:
		case M_ISALPHA:
		case M_ISALNUM:
		case M_ISSPACE:
		case M_ISLOWER:
		case M_ISUPPER:
			*out = jv_bool(char_class(s, fn->id));
			return true;
		case M_GET:
			{
				JValue	   *v;

				if (n_args < 1 || n_args > 2 || n_kw > 0)
					return jr_fail(r, LLM_ERR_INVALID, line, "get expected 1 or 2 arguments");
				v = jdict_find(fn->self.d, args[0]);
				*out = v ? *v : (n_args == 2 ? args[1] : jv_none());
				return true;
			}
		case M_ITEMS:
			return dict_items(r, line, fn->self.d, out);
		case M_KEYS:
		case M_VALUES:
			{
				JList	   *l = jlist_new(&r->arena, fn->self.d->n);

				if (l == NULL)
					return oom(r, line);
				for (int i = 0; i < fn->self.d->n; i++)
					l->v[l->n++] = fn->id == M_KEYS ? fn->self.d->k[i] : fn->self.d->v[i];
				out->t = J_LIST;
				out->l = l;
				return true;
			}
	}
	return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "the function %s() is not supported", fn->name);
}

/* ---- tests ------------------------------------------------------------------ */

/* Whether name is in the NULL-terminated list. */
static bool
in_list(const char *const *list, const char *name)
{
	for (int i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

static const char *const test_names[] = {
	"defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "boolean", "number",
	"integer", "float", "false", "true", "equalto", "eq", "==", "ne", "!=", "lt", "<", "le", "<=", "gt", ">",
	"ge", ">=", "in", "odd", "even", "divisibleby", "lower", "upper", "callable", "sameas", NULL
};

bool
jinja_has_test(const char *name)
{
	return in_list(test_names, name);
}

/* Apply test name (see jinja_int.h). */
bool
jinja_test(JRender *r, int line, const char *name, JValue v, JValue *args, int n_args, bool *out)
{
	bool		lt;

#define IS(nm) (strcmp(name, nm) == 0)
	if (IS("defined") || IS("undefined"))
		*out = (v.t != J_UNDEF) == IS("defined");
	else if (IS("none"))
		*out = v.t == J_NONE;
	else if (IS("string"))
		*out = v.t == J_STR;
	else if (IS("mapping"))
		*out = v.t == J_DICT && !v.d->ns;
	else if (IS("iterable"))
		*out = v.t == J_STR || v.t == J_LIST || (v.t == J_DICT && !v.d->ns) || v.t == J_UNDEF;
	else if (IS("sequence"))
		*out = v.t == J_STR || (v.t == J_LIST && !v.l->gen) || (v.t == J_DICT && !v.d->ns) || v.t == J_UNDEF;
	else if (IS("boolean"))
		*out = v.t == J_BOOL;
	else if (IS("number"))
		*out = v.t == J_INT || v.t == J_FLOAT || v.t == J_BOOL;
	else if (IS("integer"))
		*out = v.t == J_INT;
	else if (IS("float"))
		*out = v.t == J_FLOAT;
	else if (IS("false") || IS("true"))
		*out = v.t == J_BOOL && v.b == IS("true");
	else if (IS("callable"))
		*out = v.t == J_FUNC;
	else if (IS("odd") || IS("even") || IS("divisibleby"))
	{
		int64_t		d = 2;

		if (v.t != J_INT && v.t != J_BOOL)
			return jr_fail(r, LLM_ERR_INVALID, line, "the test '%s' needs an integer, not %s", name, jv_type_name(v));
		if (IS("divisibleby"))
		{
			if (n_args != 1 || (args[0].t != J_INT && args[0].t != J_BOOL))
				return jr_fail(r, LLM_ERR_INVALID, line, "divisibleby needs an integer argument");
			d = args[0].t == J_INT ? args[0].i : args[0].b;
			if (d == 0)
				return jr_fail(r, LLM_ERR_INVALID, line, "integer division or modulo by zero");
			*out = (v.t == J_INT ? v.i : v.b) % d == 0;
		}
		else
			*out = (((v.t == J_INT ? v.i : v.b) % 2) != 0) == IS("odd");
	}
	else if (IS("lower") || IS("upper"))
	{
		JStr		s;

		if (!soft_str(r, line, v, &s))
			return false;
		*out = char_class(s, IS("lower") ? M_ISLOWER : M_ISUPPER);
	}
	else
	{
		/* the comparisons: one argument */
		if (n_args != 1)
			return jr_fail(r, LLM_ERR_INVALID, line, "the test '%s' needs one argument", name);
		if (IS("equalto") || IS("eq") || IS("=="))
			*out = jv_equal(v, args[0]);
		else if (IS("ne") || IS("!="))
			*out = !jv_equal(v, args[0]);
		else if (IS("sameas"))
			*out = v.t == args[0].t && (v.t == J_NONE || v.t == J_UNDEF ||
										(v.t == J_BOOL && v.b == args[0].b) ||
										(v.t == J_LIST && v.l == args[0].l) ||
										(v.t == J_DICT && v.d == args[0].d) ||
										(v.t == J_INT && v.i == args[0].i));
		else if (IS("in"))
		{
			JList	   *items;

			if (args[0].t == J_STR)
			{
				if (v.t != J_STR)
					return jr_fail(r, LLM_ERR_INVALID, line, "'in <string>' requires string as left operand");
				*out = false;
				for (size_t i = 0; i + v.s.len <= args[0].s.len && !*out; i++)
					*out = memcmp(args[0].s.s + i, v.s.s, v.s.len) == 0;
				return true;
			}
			if (!jinja_iterate(r, line, args[0], &items))
				return false;
			*out = false;
			for (int i = 0; i < items->n && !*out; i++)
				*out = jv_equal(v, items->v[i]);
		}
		else
		{
			bool		less_op = IS("lt") || IS("<") || IS("ge") || IS(">=");
			JValue		a = less_op ? v : args[0];
			JValue		b = less_op ? args[0] : v;

			if (!jv_less(a, b, &lt))
				return jr_fail(r, LLM_ERR_INVALID, line, "'%s' not supported between instances of '%s' and '%s'",
							   name, jv_type_name(v), jv_type_name(args[0]));
			*out = (IS("lt") || IS("<") || IS("gt") || IS(">")) ? lt : !lt;
		}
	}
#undef IS
	return true;
}

/* ---- filters ------------------------------------------------------------------ */

/* Jinja2 3.1's filters and tests, implemented here or not. */
static const char *const jinja2_filters[] = {
	"abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
	"filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
	"last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
	"replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags",
	"sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
	"wordwrap", "xmlattr", NULL
};
static const char *const jinja2_tests[] = {
	"boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "filter",
	"float", "ge", "gt", "greaterthan", "in", "integer", "iterable", "le", "lessthan", "lower", "lt",
	"mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined",
	"upper", "==", "!=", "<", "<=", ">", ">=", NULL
};

bool
jinja2_knows_filter(const char *name)
{
	return in_list(jinja2_filters, name);
}

bool
jinja2_knows_test(const char *name)
{
	return in_list(jinja2_tests, name);
}

/* The error for a filter or test not implemented here (see jinja_int.h). */
LlmStatus
jinja_unknown_status(const char *name, bool is_filter, char *msg, size_t msgsz)
{
	const char *what = is_filter ? "filter" : "test";

	if (is_filter ? jinja2_knows_filter(name) : jinja2_knows_test(name))
	{
		snprintf(msg, msgsz, "the %s '%s' is not supported", what, name);
		return LLM_ERR_UNSUPPORTED;
	}
	/* Jinja2 has no such filter either: the template fails there too */
	snprintf(msg, msgsz, "no %s named '%s'", what, name);
	return LLM_ERR_INVALID;
}

static const char *const filter_names[] = {
	"abs", "capitalize", "count", "d", "default", "dictsort", "first", "float", "indent", "int", "items",
	"join", "last", "length", "list", "lower", "map", "reject", "rejectattr", "replace", "reverse", "round",
	"safe", "select", "selectattr", "sort", "string", "title", "tojson", "trim", "unique", "upper", NULL
};

bool
jinja_has_filter(const char *name)
{
	return in_list(filter_names, name);
}

/* item's attribute path (dotted, integers as indices) as Jinja2's make_attrgetter reads it. */
static bool
attr_get(JRender *r, int line, JValue item, JStr path, JValue *out)
{
	size_t		i = 0;

	*out = item;
	while (i <= path.len)
	{
		size_t		j = i;
		JValue		key;
		bool		digits = true;

		while (j < path.len && path.s[j] != '.')
		{
			digits &= path.s[j] >= '0' && path.s[j] <= '9';
			j++;
		}
		if (digits && j > i)
			key = jv_int(strtoll(path.s + i, NULL, 10));
		else
		{
			key.t = J_STR;
			key.s = (JStr) {path.s + i, j - i, NULL, false};
		}
		if (!jinja_getitem(r, line, *out, key, out))
			return false;
		i = j + 1;
	}
	return true;
}

/* Whether item passes select/reject's test (name and args) or, without one, is truthy. */
static bool
passes(JRender *r, int line, JValue item, JValue *rest, int n_rest, bool *ok)
{
	char		name[64];

	if (n_rest == 0)
	{
		*ok = jv_truthy(item);
		return true;
	}
	if (rest[0].t != J_STR || rest[0].s.len >= sizeof(name))
		return jr_fail(r, LLM_ERR_INVALID, line, "a test name must be a string");
	memcpy(name, rest[0].s.s, rest[0].s.len);
	name[rest[0].s.len] = '\0';
	if (!jinja_has_test(name))
		return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "the test '%s' is not supported", name);
	return jinja_test(r, line, name, item, rest + 1, n_rest - 1, ok);
}

/* A sort key: the value, or its attribute, lowercased when not case_sensitive. */
static bool
sort_key(JRender *r, int line, JValue v, const JStr *attribute, bool case_sensitive, JValue *out)
{
	if (attribute != NULL && !attr_get(r, line, v, *attribute, &v))
		return false;
	if (!case_sensitive && v.t == J_STR)
		return change_case(r, line, v.s, 0, out);
	*out = v;
	return true;
}

/* Stable sort of items by keys (insertion sort: template lists are short). */
static bool
sort_by(JRender *r, int line, JValue *items, JValue *keys, int n, bool reverse)
{
	for (int i = 1; i < n; i++)
	{
		JValue		it = items[i],
					k = keys[i];
		int			j = i;

		while (j > 0)
		{
			bool		lt;

			if (!jv_less(reverse ? keys[j - 1] : k, reverse ? k : keys[j - 1], &lt))
				return jr_fail(r, LLM_ERR_INVALID, line, "'<' not supported between instances of '%s' and '%s'",
							   jv_type_name(k), jv_type_name(keys[j - 1]));
			if (!lt)
				break;
			items[j] = items[j - 1];
			keys[j] = keys[j - 1];
			j--;
		}
		items[j] = it;
		keys[j] = k;
	}
	return true;
}

/* A copy of list l's items with their sort keys. */
static bool
keyed_copy(JRender *r, int line, JList *l, const JStr *attribute, bool case_sensitive, JList **items, JValue **keys)
{
	*items = jlist_new(&r->arena, l->n);
	*keys = ja_alloc(&r->arena, (size_t) (l->n + 1) * sizeof(JValue));
	if (*items == NULL || *keys == NULL)
		return oom(r, line);
	for (int i = 0; i < l->n; i++)
	{
		(*items)->v[i] = l->v[i];
		if (!sort_key(r, line, l->v[i], attribute, case_sensitive, &(*keys)[i]))
			return false;
	}
	(*items)->n = l->n;
	return true;
}

/* Python's int() of a value, or dflt. */
static JValue
to_int(JValue v, JValue dflt)
{
	if (v.t == J_INT)
		return v;
	if (v.t == J_BOOL)
		return jv_int(v.b);
	if (v.t == J_FLOAT && isfinite(v.f) && fabs(v.f) < 9.2e18)
		return jv_int((int64_t) v.f);
	if (v.t == J_STR)
	{
		char		buf[64];
		char	   *end;
		JStr		t = strip(v.s, NULL, true, true).s;
		size_t		k = 0;

		for (size_t i = 0; i < t.len && k + 1 < sizeof(buf); i++)
			if (t.s[i] != '_')
				buf[k++] = t.s[i];
		buf[k] = '\0';
		if (k > 0)
		{
			long long	i = strtoll(buf, &end, 10);
			double		f;

			if (*end == '\0')
				return jv_int(i);
			f = strtod(buf, &end);
			if (*end == '\0' && isfinite(f) && fabs(f) < 9.2e18)
				return jv_int((int64_t) f);
		}
	}
	return dflt;
}

/* Apply filter name (see jinja_int.h). */
bool
jinja_filter(JRender *r, int line, const char *name, JValue v, JValue *args, int n_args,
			 const char **kwnames, JValue *kwargs, int n_kw, JValue *out)
{
	JValue		p[6];
	JStr		s,
				x,
				y;
	JList	   *items;
	int64_t		n = -1;

#define IS(nm) (strcmp(name, nm) == 0)
#define BIND(...) do { \
		static const char *const params_[] = {__VA_ARGS__}; \
		if (!bind(r, line, name, params_, (int) (sizeof(params_) / sizeof(params_[0])), args, n_args, \
				  kwnames, kwargs, n_kw, p)) \
			return false; \
	} while (0)

	if (IS("default") || IS("d"))
	{
		BIND("default_value", "boolean");
		if (v.t == J_UNDEF || (p[1].t != J_NOARG && jv_truthy(p[1]) && !jv_truthy(v)))
			*out = p[0].t == J_NOARG ? jv_cstr("") : p[0];
		else
			*out = v;
		return true;
	}
	if (IS("length") || IS("count"))
	{
		if (!length(r, line, v, &n))
			return false;
		*out = jv_int(n);
		return true;
	}
	if (IS("string") || IS("safe"))
	{
		if (!soft_str(r, line, v, &s))
			return false;
		*out = jv_str(s);
		if (IS("safe"))
			out->s.safe = true;
		return true;
	}
	if (IS("trim"))
	{
		BIND("chars");
		if (!soft_str(r, line, v, &s) || (given(p[0]) && !str_arg(r, line, name, p[0], &x)))
			return false;
		*out = strip(s, given(p[0]) ? &x : NULL, true, true);
		return true;
	}
	if (IS("upper") || IS("lower") || IS("capitalize"))
	{
		if (!soft_str(r, line, v, &s))
			return false;
		return change_case(r, line, s, IS("lower") ? 0 : IS("upper") ? 1 : 2, out);
	}
	if (IS("title"))
		return soft_str(r, line, v, &s) && jinja_title(r, line, s, out);
	if (IS("replace"))
	{
		BIND("old", "new", "count");
		if (!soft_str(r, line, v, &s) || !soft_str(r, line, p[0], &x) || !soft_str(r, line, p[1], &y) ||
			!int_arg(r, line, name, p[2], -1, &n))
			return false;
		return str_replace(r, line, s, x, y, n, out);
	}
	if (IS("tojson"))
	{
		JJsonOpts	o = {false, -1, NULL, NULL, false};
		JBuf		b = new_buf(r);
		const char *why;

		BIND("ensure_ascii", "indent", "separators", "sort_keys");
		o.ensure_ascii = given(p[0]) && jv_truthy(p[0]);
		if (given(p[1]))
		{
			if (p[1].t != J_INT)
				return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "tojson's indent must be an integer");
			o.indent = p[1].i < 0 ? 0 : (int) (p[1].i > 64 ? 64 : p[1].i);
		}
		if (given(p[2]))
		{
			if (p[2].t != J_LIST || p[2].l->n != 2 || p[2].l->v[0].t != J_STR || p[2].l->v[1].t != J_STR)
				return jr_fail(r, LLM_ERR_INVALID, line, "tojson's separators must be two strings");
			if (!soft_str(r, line, p[2].l->v[0], &x) || !soft_str(r, line, p[2].l->v[1], &y))
				return false;
			o.item_sep = ja_alloc(&r->arena, x.len + 1);
			o.key_sep = ja_alloc(&r->arena, y.len + 1);
			if (o.item_sep == NULL || o.key_sep == NULL)
				return oom(r, line);
			memcpy((char *) o.item_sep, x.s, x.len);
			memcpy((char *) o.key_sep, y.s, y.len);
		}
		o.sort_keys = given(p[3]) && jv_truthy(p[3]);
		if (!jv_write_json(&b, v, &o, 0, &why))
		{
			bool		over = b.over;

			jbuf_free(&b);
			if (over)
				return jr_fail(r, LLM_ERR_LIMIT, line, "tojson: the output passed %zu bytes", r->lim->max_output);
			return jr_fail(r, LLM_ERR_INVALID, line, "tojson: %s", why ? why : "cannot serialize");
		}
		return buf_result(r, line, &b, out);
	}
	if (IS("join"))
	{
		JBuf		b = new_buf(r);

		BIND("d", "attribute");
		if (given(p[0]) && !soft_str(r, line, p[0], &x))
			return false;
		if (!given(p[0]))
			x = (JStr) {"", 0, NULL, false};
		if (!jinja_iterate(r, line, v, &items))
			return false;
		for (int i = 0; i < items->n; i++)
		{
			JValue		it = items->v[i];

			if (given(p[1]) && (!soft_str(r, line, p[1], &y) || !attr_get(r, line, it, y, &it)))
			{
				jbuf_free(&b);
				return false;
			}
			if (i > 0)
				jbuf_put_str(&b, x);
			jv_write_str(&b, it, 0);
		}
		return buf_result(r, line, &b, out);
	}
	if (IS("first") || IS("last"))
	{
		if (IS("last") && v.t == J_LIST && v.l->gen)
			return jr_fail(r, LLM_ERR_INVALID, line, "'generator' object is not reversible");
		if (!jinja_iterate(r, line, v, &items))
			return false;
		*out = items->n == 0 ? jv_undef("") : items->v[IS("first") ? 0 : items->n - 1];
		return true;
	}
	if (IS("list"))
	{
		JList	   *l;

		if (!jinja_iterate(r, line, v, &items))
			return false;
		l = jlist_new(&r->arena, items->n);
		if (l == NULL)
			return oom(r, line);
		if (items->n > 0)
			memcpy(l->v, items->v, (size_t) items->n * sizeof(JValue));
		l->n = items->n;
		out->t = J_LIST;
		out->l = l;
		return true;
	}
	if (IS("items"))
	{
		if (v.t == J_UNDEF)
		{
			out->t = J_LIST;
			out->l = jlist_new(&r->arena, 0);
			return out->l != NULL || oom(r, line);
		}
		if (v.t != J_DICT || v.d->ns)
			return jr_fail(r, LLM_ERR_INVALID, line, "Can only get item pairs from a mapping.");
		return dict_items(r, line, v.d, out);
	}
	if (IS("dictsort"))
	{
		JValue		pairs;
		JValue	   *keys;
		bool		by_value;

		BIND("case_sensitive", "by", "reverse");
		if (v.t != J_DICT || v.d->ns)
			return jr_fail(r, LLM_ERR_INVALID, line, "dictsort needs a mapping, not %s", jv_type_name(v));
		by_value = given(p[1]) && p[1].t == J_STR && p[1].s.len == 5 && memcmp(p[1].s.s, "value", 5) == 0;
		if (!dict_items(r, line, v.d, &pairs))
			return false;
		keys = ja_alloc(&r->arena, (size_t) (pairs.l->n + 1) * sizeof(JValue));
		if (keys == NULL)
			return oom(r, line);
		for (int i = 0; i < pairs.l->n; i++)
			if (!sort_key(r, line, pairs.l->v[i].l->v[by_value ? 1 : 0], NULL, given(p[0]) && jv_truthy(p[0]), &keys[i]))
				return false;
		if (!sort_by(r, line, pairs.l->v, keys, pairs.l->n, given(p[2]) && jv_truthy(p[2])))
			return false;
		*out = pairs;
		return true;
	}
	if (IS("sort") || IS("unique"))
	{
		JList	   *sorted;
		JValue	   *keys;
		bool		has_attr;

		if (IS("sort"))
			BIND("reverse", "case_sensitive", "attribute");
		else
		{
			BIND("case_sensitive", "attribute");
			p[2] = p[1];
			p[1] = p[0];
			p[0].t = J_NOARG;
		}
		has_attr = given(p[2]);
		if ((has_attr && !soft_str(r, line, p[2], &x)) || !jinja_iterate(r, line, v, &items) ||
			!keyed_copy(r, line, items, has_attr ? &x : NULL, given(p[1]) && jv_truthy(p[1]), &sorted, &keys))
			return false;
		if (IS("sort"))
		{
			if (!sort_by(r, line, sorted->v, keys, sorted->n, given(p[0]) && jv_truthy(p[0])))
				return false;
		}
		else
		{
			int			k = 0;

			for (int i = 0; i < sorted->n; i++)
			{
				bool		seen = false;

				for (int j = 0; j < i && !seen; j++)
					seen = jv_equal(keys[j], keys[i]);
				if (!seen)
					sorted->v[k++] = sorted->v[i];
			}
			sorted->n = k;
		}
		out->t = J_LIST;
		out->l = sorted;
		return true;
	}
	if (IS("reverse"))
	{
		if (v.t == J_STR)
		{
			JValue		step = jv_int(-1);

			if (!jinja_iterate(r, line, v, &items))
				return false;
			(void) step;
			{
				JBuf		b = new_buf(r);

				for (int i = items->n - 1; i >= 0; i--)
					jbuf_put_str(&b, items->v[i].s);
				return buf_result(r, line, &b, out);
			}
		}
		if (!jinja_iterate(r, line, v, &items))
			return false;
		{
			JList	   *l = jlist_new(&r->arena, items->n);

			if (l == NULL)
				return oom(r, line);
			for (int i = items->n - 1; i >= 0; i--)
				l->v[l->n++] = items->v[i];
			out->t = J_LIST;
			out->l = l;
			return true;
		}
	}
	if (IS("selectattr") || IS("rejectattr") || IS("select") || IS("reject"))
	{
		bool		by_attr = name[6] == 'a';
		bool		keep_if = name[0] == 's';
		JList	   *l;
		int			skip = by_attr ? 1 : 0;

		if (n_kw > 0)
			return jr_fail(r, LLM_ERR_INVALID, line, "%s() takes no keyword arguments", name);
		if (by_attr && (n_args < 1 || !soft_str(r, line, args[0], &x)))
			return n_args < 1 ? jr_fail(r, LLM_ERR_INVALID, line, "%s() needs an attribute", name) : false;
		/* a generator, empty for a false value (Jinja2: "if value:") */
		if (!jv_truthy(v))
			v = (JValue) {.t = J_UNDEF};
		if (!jinja_iterate(r, line, v, &items))
			return false;
		l = jlist_new(&r->arena, items->n);
		if (l == NULL)
			return oom(r, line);
		l->gen = true;
		for (int i = 0; i < items->n; i++)
		{
			JValue		it = items->v[i];
			bool		ok;

			if (by_attr && !attr_get(r, line, it, x, &it))
				return false;
			if (!passes(r, line, it, args + skip, n_args - skip, &ok))
				return false;
			if (ok == keep_if)
				l->v[l->n++] = items->v[i];
		}
		out->t = J_LIST;
		out->l = l;
		return true;
	}
	if (IS("map"))
	{
		JList	   *l;
		int			attr_kw = -1,
					default_kw = -1;

		for (int k = 0; k < n_kw; k++)
		{
			if (strcmp(kwnames[k], "attribute") == 0)
				attr_kw = k;
			else if (strcmp(kwnames[k], "default") == 0)
				default_kw = k;
			else
				return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "map() with the keyword '%s' is not supported", kwnames[k]);
		}
		if (!jv_truthy(v))
			v = (JValue) {.t = J_UNDEF};
		if (!jinja_iterate(r, line, v, &items))
			return false;
		l = jlist_new(&r->arena, items->n);
		if (l == NULL)
			return oom(r, line);
		l->gen = true;
		if (attr_kw >= 0 && !soft_str(r, line, kwargs[attr_kw], &x))
			return false;
		if (attr_kw < 0 && (n_args < 1 || args[0].t != J_STR))
			return jr_fail(r, LLM_ERR_INVALID, line, "map() needs a filter name or attribute=");
		for (int i = 0; i < items->n; i++)
		{
			JValue		it = items->v[i];

			if (attr_kw >= 0)
			{
				if (!attr_get(r, line, it, x, &it))
					return false;
				if (it.t == J_UNDEF && default_kw >= 0)
					it = kwargs[default_kw];
			}
			else
			{
				char		fname[64];

				if (args[0].s.len >= sizeof(fname))
					return jr_fail(r, LLM_ERR_INVALID, line, "map(): no filter of that name");
				memcpy(fname, args[0].s.s, args[0].s.len);
				fname[args[0].s.len] = '\0';
				if (!jinja_has_filter(fname))
					return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "the filter '%s' is not supported", fname);
				if (!jinja_filter(r, line, fname, it, args + 1, n_args - 1, NULL, NULL, 0, &it))
					return false;
			}
			l->v[l->n++] = it;
		}
		out->t = J_LIST;
		out->l = l;
		return true;
	}
	if (IS("int"))
	{
		BIND("default", "base");
		if (given(p[1]) && !(p[1].t == J_INT && p[1].i == 10))
			return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "int() with a base other than 10 is not supported");
		*out = to_int(v, p[0].t == J_NOARG ? jv_int(0) : p[0]);
		return true;
	}
	if (IS("float"))
	{
		BIND("default");
		if (v.t == J_FLOAT)
			*out = v;
		else if (v.t == J_INT || v.t == J_BOOL)
			*out = jv_float(v.t == J_INT ? (double) v.i : (double) v.b);
		else
		{
			char	   *end = NULL;
			double		f = 0;
			char		buf[64];
			bool		ok = false;

			if (v.t == J_STR)
			{
				JStr		t = strip(v.s, NULL, true, true).s;

				if (t.len > 0 && t.len < sizeof(buf))
				{
					memcpy(buf, t.s, t.len);
					buf[t.len] = '\0';
					f = strtod(buf, &end);
					ok = *end == '\0';
				}
			}
			*out = ok ? jv_float(f) : (p[0].t == J_NOARG ? jv_float(0.0) : p[0]);
		}
		return true;
	}
	if (IS("round"))
	{
		double		f,
					scale;

		BIND("precision", "method");
		if (!int_arg(r, line, name, p[0], 0, &n))
			return false;
		if (v.t != J_INT && v.t != J_FLOAT && v.t != J_BOOL)
			return jr_fail(r, LLM_ERR_INVALID, line, "round() needs a number, not %s", jv_type_name(v));
		f = v.t == J_FLOAT ? v.f : (double) (v.t == J_INT ? v.i : v.b);
		scale = pow(10.0, (double) n);
		if (given(p[1]) && p[1].t == J_STR && p[1].s.len == 4 && memcmp(p[1].s.s, "ceil", 4) == 0)
			f = ceil(f * scale) / scale;
		else if (given(p[1]) && p[1].t == J_STR && p[1].s.len == 5 && memcmp(p[1].s.s, "floor", 5) == 0)
			f = floor(f * scale) / scale;
		else
			f = nearbyint(f * scale) / scale;	/* Python's round: half to even */
		*out = jv_float(f);
		return true;
	}
	if (IS("abs"))
	{
		if (v.t == J_INT || v.t == J_BOOL)
			*out = jv_int(llabs(v.t == J_INT ? v.i : v.b));
		else if (v.t == J_FLOAT)
			*out = jv_float(fabs(v.f));
		else
			return jr_fail(r, LLM_ERR_INVALID, line, "bad operand type for abs(): '%s'", jv_type_name(v));
		return true;
	}
	if (IS("indent"))
	{
		JBuf		b = new_buf(r);
		JValue		lines;
		JStr		ind;
		bool		first,
					blank;

		BIND("width", "first", "blank");
		if (!soft_str(r, line, v, &s))
			return false;
		if (p[0].t == J_STR)
			ind = p[0].s;
		else
		{
			int64_t		w;
			char	   *sp;

			if (!int_arg(r, line, name, p[0], 4, &w))
				return false;
			w = w < 0 ? 0 : w > 256 ? 256 : w;
			sp = ja_alloc(&r->arena, (size_t) w + 1);
			if (sp == NULL)
				return oom(r, line);
			memset(sp, ' ', (size_t) w);
			ind = (JStr) {sp, (size_t) w, NULL, false};
		}
		first = given(p[1]) && jv_truthy(p[1]);
		blank = given(p[2]) && jv_truthy(p[2]);
		/* s += "\n"; then splitlines */
		{
			JValue		with_nl;

			if (!jv_str_copy(&r->arena, "\n", 1, false, &with_nl))
				return oom(r, line);
			{
				JBuf		t = new_buf(r);
				JValue		tv;

				jbuf_put_str(&t, s);
				jbuf_puts(&t, "\n");
				if (!buf_result(r, line, &t, &tv))
					return false;
				s = tv.s;
			}
		}
		if (!str_splitlines(r, line, s, false, &lines))
			return false;
		if (first)
			jbuf_put_str(&b, ind);
		for (int i = 0; i < lines.l->n; i++)
		{
			JStr		ln = lines.l->v[i].s;

			if (i > 0)
			{
				jbuf_puts(&b, "\n");
				if (blank || ln.len > 0)
					jbuf_put_str(&b, ind);
			}
			jbuf_put_str(&b, ln);
		}
		return buf_result(r, line, &b, out);
	}
#undef BIND
#undef IS
	return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "the filter '%s' is not supported", name);
}
