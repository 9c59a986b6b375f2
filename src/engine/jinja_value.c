/*
 * jinja_value.c
 *		The interpreter's values: the arena they live in, output buffers
 *		with their user masks, Python's truth, equality and ordering, and
 *		the conversions to text that Jinja2 performs (str(), repr(),
 *		json.dumps as transformers' tojson calls it).
 *
 * Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
 * (the ranges chat templates' upper/lower meet in practice); other code
 * points are left as they are.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"
#include "json.h"
#include "utf8.h"

struct JChunk
{
	JChunk	   *next;
	max_align_t data[];
};

/* n zeroed bytes from the arena (see jinja_int.h). */
void *
ja_alloc(JArena *a, size_t n)
{
	void	   *p;

	n = (n + 15) & ~(size_t) 15;
	if (n == 0)
		n = 16;
	if (a->head == NULL || a->used + n > a->size)
	{
		size_t		size = n > 65536 ? n : 65536;
		JChunk	   *c;

		if (a->cap > 0 && a->total + size > a->cap)
			return NULL;
		c = malloc(sizeof(JChunk) + size);
		if (c == NULL)
			return NULL;
		c->next = a->head;
		a->head = c;
		a->size = size;
		a->used = 0;
		a->total += size;
	}
	p = (char *) a->head->data + a->used;
	a->used += n;
	memset(p, 0, n);
	return p;
}

/* Free every chunk. */
void
ja_free(JArena *a)
{
	JChunk	   *c = a->head;

	while (c != NULL)
	{
		JChunk	   *next = c->next;

		free(c);
		c = next;
	}
	memset(a, 0, sizeof(*a));
}

/* ---- buffers ------------------------------------------------------------ */

/* Append len bytes, all user data or none. */
bool
jbuf_put(JBuf *b, const char *s, size_t len, bool user)
{
	if (b->failed)
		return false;
	if (len > b->max || b->len > b->max - len)
	{
		b->failed = b->over = true;
		return false;
	}
	if (b->len + len + 1 > b->cap)
	{
		size_t		cap = (b->len + len + 1) * 2;
		char	   *s2 = realloc(b->s, cap);
		uint8_t    *u2;

		if (s2 == NULL)
		{
			b->failed = true;
			return false;
		}
		b->s = s2;
		u2 = realloc(b->u, cap);
		if (u2 == NULL)
		{
			b->failed = true;
			return false;
		}
		b->u = u2;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, len);
	memset(b->u + b->len, user ? 1 : 0, len);
	b->len += len;
	b->s[b->len] = '\0';
	if (user && len > 0)
		b->any_user = true;
	return true;
}

/* Append a string with its mask. */
bool
jbuf_put_str(JBuf *b, JStr s)
{
	size_t		at = b->len;

	if (!jbuf_put(b, s.s, s.len, false))
		return false;
	if (s.u != NULL)
	{
		memcpy(b->u + at, s.u, s.len);
		for (size_t i = 0; i < s.len && !b->any_user; i++)
			b->any_user = s.u[i] != 0;
	}
	return true;
}

bool
jbuf_puts(JBuf *b, const char *s)
{
	return jbuf_put(b, s, strlen(s), false);
}

void
jbuf_free(JBuf *b)
{
	free(b->s);
	free(b->u);
	b->s = NULL;
	b->u = NULL;
	b->len = b->cap = 0;
}

/* A copy of b as an arena string. */
bool
jbuf_to_str(JArena *a, const JBuf *b, JStr *out)
{
	char	   *s = ja_alloc(a, b->len + 1);
	uint8_t    *u = NULL;

	if (s == NULL)
		return false;
	if (b->len)
		memcpy(s, b->s, b->len);
	if (b->any_user)
	{
		u = ja_alloc(a, b->len);
		if (u == NULL)
			return false;
		memcpy(u, b->u, b->len);
	}
	out->s = s;
	out->len = b->len;
	out->u = u;
	out->safe = false;
	return true;
}

/* ---- constructors --------------------------------------------------------- */

JValue
jv_undef(const char *name)
{
	JValue		v = {.t = J_UNDEF};

	v.s.s = name ? name : "";
	v.s.len = strlen(v.s.s);
	return v;
}

JValue
jv_none(void)
{
	return (JValue) {.t = J_NONE};
}

JValue
jv_bool(bool b)
{
	return (JValue) {.t = J_BOOL, .b = b};
}

JValue
jv_int(int64_t i)
{
	return (JValue) {.t = J_INT, .i = i};
}

JValue
jv_float(double f)
{
	return (JValue) {.t = J_FLOAT, .f = f};
}

JValue
jv_str(JStr s)
{
	return (JValue) {.t = J_STR, .s = s};
}

JValue
jv_cstr(const char *s)
{
	JValue		v = {.t = J_STR};

	v.s.s = s;
	v.s.len = strlen(s);
	return v;
}

/* A string copied into the arena, all user data or none. */
bool
jv_str_copy(JArena *a, const char *s, size_t len, bool user, JValue *out)
{
	char	   *copy = ja_alloc(a, len + 1);

	if (copy == NULL)
		return false;
	memcpy(copy, s, len);
	out->t = J_STR;
	out->s.s = copy;
	out->s.len = len;
	out->s.u = NULL;
	out->s.safe = false;
	if (user && len > 0)
	{
		uint8_t    *u = ja_alloc(a, len);

		if (u == NULL)
			return false;
		memset(u, 1, len);
		out->s.u = u;
	}
	return true;
}

JList *
jlist_new(JArena *a, int cap)
{
	JList	   *l = ja_alloc(a, sizeof(JList));

	if (l == NULL)
		return NULL;
	if (cap > 0 && (l->v = ja_alloc(a, (size_t) cap * sizeof(JValue))) == NULL)
		return NULL;
	l->cap = cap;
	return l;
}

bool
jlist_push(JArena *a, JList *l, JValue v)
{
	if (l->n == l->cap)
	{
		int			cap = l->cap ? l->cap * 2 : 8;
		JValue	   *grown = ja_alloc(a, (size_t) cap * sizeof(JValue));

		if (grown == NULL)
			return false;
		if (l->n)
			memcpy(grown, l->v, (size_t) l->n * sizeof(JValue));
		l->v = grown;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return true;
}

JDict *
jdict_new(JArena *a, int cap)
{
	JDict	   *d = ja_alloc(a, sizeof(JDict));

	if (d == NULL)
		return NULL;
	if (cap > 0 && ((d->k = ja_alloc(a, (size_t) cap * sizeof(JValue))) == NULL ||
					(d->v = ja_alloc(a, (size_t) cap * sizeof(JValue))) == NULL))
		return NULL;
	d->cap = cap;
	return d;
}

JValue *
jdict_find(const JDict *d, JValue key)
{
	for (int i = 0; i < d->n; i++)
		if (jv_equal(d->k[i], key))
			return &d->v[i];
	return NULL;
}

JValue *
jdict_get(const JDict *d, const char *k, size_t klen)
{
	for (int i = 0; i < d->n; i++)
		if (d->k[i].t == J_STR && d->k[i].s.len == klen && memcmp(d->k[i].s.s, k, klen) == 0)
			return &d->v[i];
	return NULL;
}

bool
jdict_set(JArena *a, JDict *d, JValue key, JValue v)
{
	JValue	   *slot = jdict_find(d, key);

	if (slot != NULL)
	{
		*slot = v;
		return true;
	}
	if (d->n == d->cap)
	{
		int			cap = d->cap ? d->cap * 2 : 8;
		JValue	   *k2 = ja_alloc(a, (size_t) cap * sizeof(JValue));
		JValue	   *v2 = ja_alloc(a, (size_t) cap * sizeof(JValue));

		if (k2 == NULL || v2 == NULL)
			return false;
		if (d->n)
		{
			memcpy(k2, d->k, (size_t) d->n * sizeof(JValue));
			memcpy(v2, d->v, (size_t) d->n * sizeof(JValue));
		}
		d->k = k2;
		d->v = v2;
		d->cap = cap;
	}
	d->k[d->n] = key;
	d->v[d->n] = v;
	d->n++;
	return true;
}

/* ---- Python semantics ----------------------------------------------------- */

bool
jv_truthy(JValue v)
{
	switch (v.t)
	{
		case J_BOOL:
			return v.b;
		case J_INT:
			return v.i != 0;
		case J_FLOAT:
			return v.f != 0.0;
		case J_STR:
			return v.s.len > 0;
		case J_LIST:
			return v.l->gen || v.l->n > 0;
		case J_DICT:
			return v.d->ns || v.d->n > 0;
		case J_FUNC:
			return true;
		default:
			return false;
	}
}

/* Whether v is a number (bool counts, as in Python). */
static bool
is_num(JValue v, double *f)
{
	if (v.t == J_INT || v.t == J_BOOL)
	{
		*f = v.t == J_INT ? (double) v.i : (double) v.b;
		return true;
	}
	if (v.t == J_FLOAT)
	{
		*f = v.f;
		return true;
	}
	return false;
}

/* Python's ==. */
bool
jv_equal(JValue a, JValue b)
{
	double		x,
				y;

	if ((a.t == J_INT || a.t == J_BOOL) && (b.t == J_INT || b.t == J_BOOL))
		return (a.t == J_INT ? a.i : a.b) == (b.t == J_INT ? b.i : b.b);
	if (is_num(a, &x) && is_num(b, &y))
		return x == y;
	if (a.t != b.t)
		return false;
	switch (a.t)
	{
		case J_UNDEF:
		case J_NONE:
			return true;
		case J_STR:
			return a.s.len == b.s.len && memcmp(a.s.s, b.s.s, a.s.len) == 0;
		case J_LIST:
			if (a.l->gen || b.l->gen)
				return a.l == b.l;
			if (a.l->n != b.l->n || a.l->tuple != b.l->tuple)
				return false;
			for (int i = 0; i < a.l->n; i++)
				if (!jv_equal(a.l->v[i], b.l->v[i]))
					return false;
			return true;
		case J_DICT:
			if (a.d->ns || b.d->ns)
				return a.d == b.d;
			if (a.d->n != b.d->n)
				return false;
			for (int i = 0; i < a.d->n; i++)
			{
				JValue	   *o = jdict_find(b.d, a.d->k[i]);

				if (o == NULL || !jv_equal(a.d->v[i], *o))
					return false;
			}
			return true;
		case J_FUNC:
			return a.fn == b.fn;
		default:
			return false;
	}
}

/* Python's <, where the types can be ordered. */
bool
jv_less(JValue a, JValue b, bool *lt)
{
	double		x,
				y;

	if ((a.t == J_INT || a.t == J_BOOL) && (b.t == J_INT || b.t == J_BOOL))
	{
		*lt = (a.t == J_INT ? a.i : a.b) < (b.t == J_INT ? b.i : b.b);
		return true;
	}
	if (is_num(a, &x) && is_num(b, &y))
	{
		*lt = x < y;
		return true;
	}
	if (a.t == J_STR && b.t == J_STR)
	{
		size_t		n = a.s.len < b.s.len ? a.s.len : b.s.len;
		int			c = memcmp(a.s.s, b.s.s, n);

		*lt = c < 0 || (c == 0 && a.s.len < b.s.len);
		return true;
	}
	if (a.t == J_LIST && b.t == J_LIST)
	{
		for (int i = 0; i < a.l->n && i < b.l->n; i++)
		{
			if (jv_equal(a.l->v[i], b.l->v[i]))
				continue;
			return jv_less(a.l->v[i], b.l->v[i], lt);
		}
		*lt = a.l->n < b.l->n;
		return true;
	}
	return false;
}

const char *
jv_type_name(JValue v)
{
	switch (v.t)
	{
		case J_UNDEF:
			return "Undefined";
		case J_NONE:
			return "NoneType";
		case J_BOOL:
			return "bool";
		case J_INT:
			return "int";
		case J_FLOAT:
			return "float";
		case J_STR:
			return "str";
		case J_LIST:
			return v.l->gen ? "generator" : v.l->tuple ? "tuple" : "list";
		case J_DICT:
			return v.d->ns ? "Namespace" : "dict";
		case J_FUNC:
			return "function";
		default:
			return "object";
	}
}

/* ---- text ---------------------------------------------------------------- */

/* Python's float repr. */
void
jv_format_float(double f, char *out, size_t outsz)
{
	char		buf[40];
	char		digits[24];
	int			nd = 0;
	int			exp10;
	int			decpt;
	const char *sign = signbit(f) ? "-" : "";
	char	   *e;

	if (isnan(f))
	{
		snprintf(out, outsz, "nan");
		return;
	}
	if (isinf(f))
	{
		snprintf(out, outsz, "%sinf", sign);
		return;
	}
	for (int p = 1; p <= 17; p++)
	{
		snprintf(buf, sizeof(buf), "%.*e", p - 1, fabs(f));
		if (strtod(buf, NULL) == fabs(f))
			break;
	}
	/* buf: d[.ddd]e[+-]XX */
	for (char *c = buf; *c && *c != 'e'; c++)
		if (*c >= '0' && *c <= '9')
			digits[nd++] = *c;
	e = strchr(buf, 'e');
	exp10 = e ? atoi(e + 1) : 0;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = '\0';
	decpt = exp10 + 1;
	if (f == 0.0)
	{
		snprintf(out, outsz, "%s0.0", sign);
		return;
	}
	if (decpt > -4 && decpt <= 16)
	{
		char		tmp[64];
		int			k = 0;

		if (decpt <= 0)
		{
			tmp[k++] = '0';
			tmp[k++] = '.';
			for (int i = 0; i < -decpt; i++)
				tmp[k++] = '0';
			for (int i = 0; i < nd; i++)
				tmp[k++] = digits[i];
		}
		else if (decpt >= nd)
		{
			for (int i = 0; i < nd; i++)
				tmp[k++] = digits[i];
			for (int i = nd; i < decpt; i++)
				tmp[k++] = '0';
			tmp[k++] = '.';
			tmp[k++] = '0';
		}
		else
		{
			for (int i = 0; i < nd; i++)
			{
				if (i == decpt)
					tmp[k++] = '.';
				tmp[k++] = digits[i];
			}
		}
		tmp[k] = '\0';
		snprintf(out, outsz, "%s%s", sign, tmp);
	}
	else
		snprintf(out, outsz, "%s%c%s%s%se%c%02d", sign, digits[0], nd > 1 ? "." : "", nd > 1 ? digits + 1 : "", "",
				 exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
}

/* Whether Python's str.isprintable() holds for c (repr() escapes the others), in the ranges that matter. */
static bool
printable(uint32_t c)
{
	if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0xa0) || c == 0xad)
		return false;
	if (c >= 0x80 && ju_isspace(c))
		return false;
	if ((c >= 0x200b && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2060 && c <= 0x2064) ||
		c == 0xfeff || (c >= 0xd800 && c <= 0xdfff))
		return false;
	return true;
}

/* Python's repr of a string, its mask kept (the quotes take the first byte's). */
static bool
repr_str(JBuf *b, JStr s)
{
	bool		has_sq = memchr(s.s, '\'', s.len) != NULL;
	bool		has_dq = memchr(s.s, '"', s.len) != NULL;
	char		q = (has_sq && !has_dq) ? '"' : '\'';
	bool		user = s.u != NULL && s.len > 0 && s.u[0];

	jbuf_put(b, &q, 1, user);
	for (size_t i = 0; i < s.len;)
	{
		int			adv;
		uint32_t	c = ju_decode(s.s + i, s.len - i, &adv);
		bool		u = s.u != NULL && s.u[i];
		char		esc[16];

		if (c == '\\' || c == (uint32_t) q)
			snprintf(esc, sizeof(esc), "\\%c", (char) c);
		else if (c == '\n')
			snprintf(esc, sizeof(esc), "\\n");
		else if (c == '\r')
			snprintf(esc, sizeof(esc), "\\r");
		else if (c == '\t')
			snprintf(esc, sizeof(esc), "\\t");
		else if (!printable(c))
			snprintf(esc, sizeof(esc), c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x", c);
		else
		{
			jbuf_put(b, s.s + i, (size_t) adv, u);
			i += adv;
			continue;
		}
		jbuf_put(b, esc, strlen(esc), u);
		i += adv;
	}
	return jbuf_put(b, &q, 1, user);
}

/* repr(v) (see jinja_int.h). */
bool
jv_write_repr(JBuf *b, JValue v, int depth)
{
	if (depth > 64)
		return jbuf_puts(b, "...");
	switch (v.t)
	{
		case J_STR:
			return repr_str(b, v.s);
		case J_LIST:
			jbuf_puts(b, v.l->tuple ? "(" : "[");
			for (int i = 0; i < v.l->n; i++)
			{
				if (i > 0)
					jbuf_puts(b, ", ");
				jv_write_repr(b, v.l->v[i], depth + 1);
			}
			if (v.l->tuple && v.l->n == 1)
				jbuf_puts(b, ",");
			return jbuf_puts(b, v.l->tuple ? ")" : "]");
		case J_DICT:
			if (v.d->ns)
				return jbuf_puts(b, "<Namespace>");
			jbuf_puts(b, "{");
			for (int i = 0; i < v.d->n; i++)
			{
				if (i > 0)
					jbuf_puts(b, ", ");
				jv_write_repr(b, v.d->k[i], depth + 1);
				jbuf_puts(b, ": ");
				jv_write_repr(b, v.d->v[i], depth + 1);
			}
			return jbuf_puts(b, "}");
		default:
			return jv_write_str(b, v, depth);
	}
}

/* str(v) (see jinja_int.h). */
bool
jv_write_str(JBuf *b, JValue v, int depth)
{
	char		num[48];

	switch (v.t)
	{
		case J_UNDEF:
		case J_NOARG:
			return true;
		case J_NONE:
			return jbuf_puts(b, "None");
		case J_BOOL:
			return jbuf_puts(b, v.b ? "True" : "False");
		case J_INT:
			snprintf(num, sizeof(num), "%lld", (long long) v.i);
			return jbuf_puts(b, num);
		case J_FLOAT:
			jv_format_float(v.f, num, sizeof(num));
			return jbuf_puts(b, num);
		case J_STR:
			return jbuf_put_str(b, v.s);
		case J_FUNC:
			jbuf_puts(b, "<function ");
			jbuf_puts(b, v.fn->name ? v.fn->name : "?");
			return jbuf_puts(b, ">");
		default:
			return jv_write_repr(b, v, depth);
	}
}

/* str(v) as an arena string. */
bool
jv_to_str(JArena *a, JValue v, size_t max, JStr *out)
{
	JBuf		b = {0};
	bool		ok;

	if (v.t == J_STR)
	{
		*out = v.s;
		return true;
	}
	b.max = max;
	ok = jv_write_str(&b, v, 0) && jbuf_to_str(a, &b, out);
	jbuf_free(&b);
	return ok;
}

/* A JSON string literal of s (json.dumps' escaping), its mask kept. */
static bool
json_str(JBuf *b, JStr s, bool ensure_ascii)
{
	bool		user = s.u != NULL && s.len > 0 && s.u[0];

	jbuf_put(b, "\"", 1, user);
	for (size_t i = 0; i < s.len;)
	{
		int			adv;
		uint32_t	c = ju_decode(s.s + i, s.len - i, &adv);
		bool		u = s.u != NULL && s.u[i];
		char		esc[16];

		esc[0] = '\0';
		if (c == '"')
			strcpy(esc, "\\\"");
		else if (c == '\\')
			strcpy(esc, "\\\\");
		else if (c == '\n')
			strcpy(esc, "\\n");
		else if (c == '\r')
			strcpy(esc, "\\r");
		else if (c == '\t')
			strcpy(esc, "\\t");
		else if (c == '\b')
			strcpy(esc, "\\b");
		else if (c == '\f')
			strcpy(esc, "\\f");
		else if (c < 0x20 || (ensure_ascii && c >= 0x7f))
		{
			if (c >= 0x10000)
			{
				uint32_t	v = c - 0x10000;

				snprintf(esc, sizeof(esc), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
			}
			else
				snprintf(esc, sizeof(esc), "\\u%04x", c);
		}
		if (esc[0])
			jbuf_put(b, esc, strlen(esc), u);
		else
			jbuf_put(b, s.s + i, (size_t) adv, u);
		i += adv;
	}
	return jbuf_put(b, "\"", 1, user);
}

/* A newline and indent for level, when indenting. */
static void
json_newline(JBuf *b, const JJsonOpts *o, int level)
{
	if (o->indent < 0)
		return;
	jbuf_puts(b, "\n");
	for (int i = 0; i < o->indent * level; i++)
		jbuf_puts(b, " ");
}

/* The text of a dict key as json.dumps makes it a string; false for keys it refuses. */
static bool
json_key(JArena *a, JValue k, JStr *out)
{
	char		num[48];
	JValue		v;

	switch (k.t)
	{
		case J_STR:
			*out = k.s;
			return true;
		case J_INT:
			snprintf(num, sizeof(num), "%lld", (long long) k.i);
			break;
		case J_FLOAT:
			jv_format_float(k.f, num, sizeof(num));
			break;
		case J_BOOL:
			snprintf(num, sizeof(num), "%s", k.b ? "true" : "false");
			break;
		case J_NONE:
			snprintf(num, sizeof(num), "null");
			break;
		default:
			return false;
	}
	if (a == NULL || !jv_str_copy(a, num, strlen(num), false, &v))
	{
		out->s = "";
		out->len = 0;
		out->u = NULL;
		return a == NULL;
	}
	*out = v.s;
	return true;
}

/* Compare two keys' texts (for sort_keys). */
static int
key_cmp(JStr a, JStr b)
{
	size_t		n = a.len < b.len ? a.len : b.len;
	int			c = memcmp(a.s, b.s, n);

	return c != 0 ? c : (a.len < b.len ? -1 : a.len > b.len);
}

/* json.dumps(v) (see jinja_int.h); level is the nesting for indentation. */
static bool
json_write(JBuf *b, JValue v, const JJsonOpts *o, int level, const char **why, JArena *a)
{
	const char *item_sep = o->item_sep ? o->item_sep : (o->indent >= 0 ? "," : ", ");
	const char *key_sep = o->key_sep ? o->key_sep : ": ";
	char		num[48];

	if (level > 64)
	{
		*why = "nested too deep";
		return false;
	}
	switch (v.t)
	{
		case J_NONE:
			return jbuf_puts(b, "null");
		case J_BOOL:
			return jbuf_puts(b, v.b ? "true" : "false");
		case J_INT:
			snprintf(num, sizeof(num), "%lld", (long long) v.i);
			return jbuf_puts(b, num);
		case J_FLOAT:
			if (isnan(v.f))
				return jbuf_puts(b, "NaN");
			if (isinf(v.f))
				return jbuf_puts(b, v.f > 0 ? "Infinity" : "-Infinity");
			jv_format_float(v.f, num, sizeof(num));
			return jbuf_puts(b, num);
		case J_STR:
			return json_str(b, v.s, o->ensure_ascii);
		case J_LIST:
			if (v.l->gen)
			{
				*why = "Object of type generator is not JSON serializable";
				return false;
			}
			if (v.l->n == 0)
				return jbuf_puts(b, "[]");
			jbuf_puts(b, "[");
			for (int i = 0; i < v.l->n; i++)
			{
				if (i > 0)
					jbuf_puts(b, item_sep);
				json_newline(b, o, level + 1);
				if (!json_write(b, v.l->v[i], o, level + 1, why, a))
					return false;
			}
			json_newline(b, o, level);
			return jbuf_puts(b, "]");
		case J_DICT:
			{
				int		   *order;

				if (v.d->ns)
				{
					*why = "Object of type Namespace is not JSON serializable";
					return false;
				}
				if (v.d->n == 0)
					return jbuf_puts(b, "{}");
				order = ja_alloc(a, (size_t) v.d->n * sizeof(int));
				if (order == NULL)
				{
					*why = "out of memory";
					return false;
				}
				for (int i = 0; i < v.d->n; i++)
				{
					JStr		ki;

					if (!json_key(a, v.d->k[i], &ki))
					{
						*why = "keys must be str, int, float, bool or None";
						return false;
					}
					order[i] = i;
				}
				if (o->sort_keys)
				{
					/* insertion sort by key text: dicts in templates are small */
					for (int i = 1; i < v.d->n; i++)
					{
						int			x = order[i];
						int			j = i;
						JStr		kx,
									kj;

						json_key(a, v.d->k[x], &kx);
						while (j > 0)
						{
							json_key(a, v.d->k[order[j - 1]], &kj);
							if (key_cmp(kj, kx) <= 0)
								break;
							order[j] = order[j - 1];
							j--;
						}
						order[j] = x;
					}
				}
				jbuf_puts(b, "{");
				for (int i = 0; i < v.d->n; i++)
				{
					JStr		k;

					if (i > 0)
						jbuf_puts(b, item_sep);
					json_newline(b, o, level + 1);
					json_key(a, v.d->k[order[i]], &k);
					json_str(b, k, o->ensure_ascii);
					jbuf_puts(b, key_sep);
					if (!json_write(b, v.d->v[order[i]], o, level + 1, why, a))
						return false;
				}
				json_newline(b, o, level);
				return jbuf_puts(b, "}");
			}
		case J_UNDEF:
			*why = "Object of type Undefined is not JSON serializable";
			return false;
		default:
			*why = "Object of type function is not JSON serializable";
			return false;
	}
}

bool
jv_write_json(JBuf *b, JValue v, const JJsonOpts *o, int depth, const char **why)
{
	JArena		a = {0};
	bool		ok;

	*why = NULL;
	ok = json_write(b, v, o, depth, why, &a);
	ja_free(&a);
	if (ok && b->failed)
	{
		*why = b->over ? "the output is too long" : "out of memory";
		return false;
	}
	return ok;
}

/* A value from parsed JSON. */
bool
jv_from_json(JArena *a, const LlmJson *j, bool user, JValue *out)
{
	switch (j->type)
	{
		case LLM_JSON_NULL:
			*out = jv_none();
			return true;
		case LLM_JSON_BOOL:
			*out = jv_bool(j->boolean);
			return true;
		case LLM_JSON_NUMBER:
			if (strpbrk(j->str, ".eE") == NULL)
			{
				char	   *end;
				long long	i;

				errno = 0;
				i = strtoll(j->str, &end, 10);
				if (errno == 0 && *end == '\0')
				{
					*out = jv_int(i);
					return true;
				}
			}
			*out = jv_float(j->number);
			return true;
		case LLM_JSON_STRING:
			return jv_str_copy(a, j->str, j->len, user, out);
		case LLM_JSON_ARRAY:
			{
				JList	   *l = jlist_new(a, j->n);

				if (l == NULL)
					return false;
				for (int i = 0; i < j->n; i++)
					if (!jv_from_json(a, &j->items[i], user, &l->v[i]))
						return false;
				l->n = j->n;
				out->t = J_LIST;
				out->l = l;
				return true;
			}
		case LLM_JSON_OBJECT:
			{
				JDict	   *d = jdict_new(a, j->n);

				if (d == NULL)
					return false;
				for (int i = 0; i < j->n; i++)
				{
					if (!jv_str_copy(a, j->items[i].key, j->items[i].key_len, user, &d->k[i]) ||
						!jv_from_json(a, &j->items[i], user, &d->v[i]))
						return false;
				}
				d->n = j->n;
				out->t = J_DICT;
				out->d = d;
				return true;
			}
	}
	return false;
}

/* ---- UTF-8 and Unicode ------------------------------------------------------ */

uint32_t
ju_decode(const char *s, size_t n, int *adv)
{
	size_t		len = llm_utf8_len((const uint8_t *) s, n);

	*adv = (int) len;
	if (len == 1)
		return (unsigned char) s[0];
	return llm_utf8_decode((const uint8_t *) s, len);
}

size_t
ju_count(const char *s, size_t len)
{
	size_t		k = 0;

	for (size_t i = 0; i < len; k++)
		i += llm_utf8_len((const uint8_t *) s + i, len - i);
	return k;
}

size_t
ju_offset(const char *s, size_t len, size_t idx)
{
	size_t		i = 0;

	for (size_t k = 0; k < idx && i < len; k++)
		i += llm_utf8_len((const uint8_t *) s + i, len - i);
	return i;
}

bool
ju_isspace(uint32_t c)
{
	return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
		(c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

uint32_t
ju_lower(uint32_t c)
{
	if (c >= 'A' && c <= 'Z')
		return c + 32;
	if (c < 0x80)
		return c;
	if ((c >= 0xc0 && c <= 0xde && c != 0xd7))
		return c + 32;
	if (c >= 0x100 && c <= 0x17f)
	{
		if (c == 0x130)
			return 'i';			/* Python gives i + U+0307; the dot is dropped here */
		if (c == 0x178)
			return 0xff;
		if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e))
			return (c & 1) ? c + 1 : c;
		if (c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17f)
			return c;
		return (c & 1) ? c : c + 1;
	}
	if (c >= 0x391 && c <= 0x3ab && c != 0x3a2)
		return c + 32;
	if (c == 0x386)
		return 0x3ac;
	if (c >= 0x388 && c <= 0x38a)
		return c + 37;
	if (c == 0x38c)
		return 0x3cc;
	if (c == 0x38e || c == 0x38f)
		return c + 63;
	if (c >= 0x410 && c <= 0x42f)
		return c + 32;
	if (c >= 0x400 && c <= 0x40f)
		return c + 80;
	return c;
}

int
ju_upper(uint32_t c, uint32_t out[2])
{
	out[0] = c;
	if (c >= 'a' && c <= 'z')
		out[0] = c - 32;
	else if (c < 0x80)
		return 1;
	else if (c == 0xdf)
	{
		out[0] = 'S';
		out[1] = 'S';
		return 2;
	}
	else if (c == 0xb5)
		out[0] = 0x39c;
	else if (c >= 0xe0 && c <= 0xfe && c != 0xf7)
		out[0] = c - 32;
	else if (c == 0xff)
		out[0] = 0x178;
	else if (c >= 0x100 && c <= 0x17f)
	{
		if (c == 0x131)
			out[0] = 'I';
		else if (c == 0x17f)
			out[0] = 'S';
		else if (c == 0x130 || c == 0x138 || c == 0x149 || c == 0x178)
			out[0] = c;
		else if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e))
			out[0] = (c & 1) ? c : c - 1;
		else
			out[0] = (c & 1) ? c - 1 : c;
	}
	else if (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2)
		out[0] = c - 32;
	else if (c == 0x3c2)
		out[0] = 0x3a3;
	else if (c == 0x3ac)
		out[0] = 0x386;
	else if (c >= 0x3ad && c <= 0x3af)
		out[0] = c - 37;
	else if (c == 0x3cc)
		out[0] = 0x38c;
	else if (c == 0x3cd || c == 0x3ce)
		out[0] = c - 63;
	else if (c >= 0x430 && c <= 0x44f)
		out[0] = c - 32;
	else if (c >= 0x450 && c <= 0x45f)
		out[0] = c - 80;
	return 1;
}

bool
ju_put(JBuf *b, uint32_t c, bool user)
{
	char		tmp[4];
	size_t		n = llm_utf8_encode(c, tmp);

	return jbuf_put(b, tmp, n, user);
}
