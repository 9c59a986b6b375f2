/*
 * jinja_eval.c
 *		Running a parsed template: statements, expressions, scopes, macros,
 *		and the public entry points of jinja.h.
 *
 * Scopes follow Jinja2's: a for loop's body runs in a new frame per
 * iteration (a set inside it does not leak out, which is why templates use
 * namespace()), a macro's body in a frame over the one it was defined in,
 * if blocks in the frame around them.  A name not found in any frame nor
 * among the globals is Undefined.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"
#include "json.h"

struct LlmJinjaVars
{
	JArena		arena;
	JDict	   *vars;
	int			year,
				month,
				day;
};

/* Record the first error with the template's line. */
bool
jr_fail(JRender *r, LlmStatus st, int line, const char *fmt,...)
{
	va_list		ap;
	char		msg[400];

	if (r->status != LLM_OK)
		return false;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	llm_error_set(r->err, st, "chat template line %d: %s", line, msg);
	r->status = st;
	return false;
}

/* Out of memory (or past the arena's bound). */
static bool
no_memory(JRender *r, int line)
{
	return jr_fail(r, LLM_ERR_LIMIT, line, "the template used more memory than allowed (or none was left)");
}

/* A failed buffer's error. */
static bool
buf_failed(JRender *r, const JBuf *b, int line)
{
	if (b->over)
		return jr_fail(r, LLM_ERR_LIMIT, line, "the rendering passed %zu bytes", r->lim->max_output);
	return no_memory(r, line);
}

/* Look name up in the frames from f outwards, then among the globals. */
static JValue
lookup(JFrame *f, const char *name)
{
	JValue		v;

	for (; f != NULL; f = f->parent)
	{
		JValue	   *p = jdict_get(f->vars, name, strlen(name));

		if (p != NULL)
			return *p;
	}
	if (jinja_global(name, &v))
		return v;
	return jv_undef(name);
}

/* Set name in frame f. */
static bool
frame_set(JRender *r, JFrame *f, const char *name, JValue v, int line)
{
	if (!jdict_set(&r->arena, f->vars, jv_cstr(name), v))
		return no_memory(r, line);
	return true;
}

/* A new frame over parent. */
static JFrame *
frame_new(JRender *r, JFrame *parent)
{
	JFrame	   *f = ja_alloc(&r->arena, sizeof(JFrame));

	if (f == NULL || (f->vars = jdict_new(&r->arena, 4)) == NULL)
		return NULL;
	f->parent = parent;
	return f;
}

/* The error for using an Undefined value. */
static bool
undefined_error(JRender *r, int line, JValue v)
{
	if (v.s.len > 0)
		return jr_fail(r, LLM_ERR_INVALID, line, "'%.*s' is undefined", (int) v.s.len, v.s.s);
	return jr_fail(r, LLM_ERR_INVALID, line, "a value is undefined");
}

/* Concatenate two strings with their masks. */
static bool
str_concat(JRender *r, int line, JStr a, JStr b, JValue *out)
{
	JBuf		buf = {0};
	bool		ok;

	buf.max = r->lim->max_output;
	ok = jbuf_put_str(&buf, a) && jbuf_put_str(&buf, b);
	if (!ok)
	{
		ok = buf_failed(r, &buf, line);
		jbuf_free(&buf);
		return ok;
	}
	out->t = J_STR;
	ok = jbuf_to_str(&r->arena, &buf, &out->s);
	jbuf_free(&buf);
	return ok ? true : no_memory(r, line);
}

/* Markup's escape of s (& < > " '), its mask kept, appended to b. */
static void
html_escape(JBuf *b, JStr s)
{
	for (size_t i = 0; i < s.len; i++)
	{
		const char *rep = NULL;
		bool		u = s.u && s.u[i];

		switch (s.s[i])
		{
			case '&':
				rep = "&amp;";
				break;
			case '<':
				rep = "&lt;";
				break;
			case '>':
				rep = "&gt;";
				break;
			case '"':
				rep = "&#34;";
				break;
			case '\'':
				rep = "&#39;";
				break;
		}
		if (rep)
			jbuf_put(b, rep, strlen(rep), u);
		else
			jbuf_put(b, s.s + i, 1, u);
	}
}

/* Markup + str or str + Markup: the plain string escaped, the result Markup. */
static bool
markup_concat(JRender *r, int line, JStr a, JStr b, JValue *out)
{
	JBuf		buf = {0};
	bool		ok;

	buf.max = r->lim->max_output;
	if (a.safe)
		jbuf_put_str(&buf, a);
	else
		html_escape(&buf, a);
	if (b.safe)
		jbuf_put_str(&buf, b);
	else
		html_escape(&buf, b);
	if (buf.failed)
	{
		ok = buf_failed(r, &buf, line);
		jbuf_free(&buf);
		return ok;
	}
	out->t = J_STR;
	ok = jbuf_to_str(&r->arena, &buf, &out->s);
	jbuf_free(&buf);
	out->s.safe = true;
	return ok ? true : no_memory(r, line);
}

/* Python's a % b for str: printf-style formatting with %s, %d, %i, %r, %f and %%. */
static bool
str_percent(JRender *r, int line, JStr fmt, JValue args, JValue *out)
{
	JBuf		b = {0};
	int			k = 0;
	int			n_args = (args.t == J_LIST && args.l->tuple) ? args.l->n : 1;
	bool		ok = true;

	b.max = r->lim->max_output;
	for (size_t i = 0; i < fmt.len && ok; i++)
	{
		JValue		a;
		char		spec;

		if (fmt.s[i] != '%')
		{
			jbuf_put(&b, fmt.s + i, 1, fmt.u && fmt.u[i]);
			continue;
		}
		if (++i >= fmt.len)
		{
			ok = jr_fail(r, LLM_ERR_INVALID, line, "incomplete format");
			break;
		}
		spec = fmt.s[i];
		if (spec == '%')
		{
			jbuf_puts(&b, "%");
			continue;
		}
		if (k >= n_args)
		{
			ok = jr_fail(r, LLM_ERR_INVALID, line, "not enough arguments for format string");
			break;
		}
		a = (args.t == J_LIST && args.l->tuple) ? args.l->v[k] : args;
		k++;
		if (spec == 's')
			jv_write_str(&b, a, 0);
		else if (spec == 'r')
			jv_write_repr(&b, a, 0);
		else if ((spec == 'd' || spec == 'i') && (a.t == J_INT || a.t == J_BOOL || a.t == J_FLOAT))
		{
			char		num[48];

			snprintf(num, sizeof(num), "%lld", a.t == J_INT ? (long long) a.i : a.t == J_BOOL ? (long long) a.b : (long long) a.f);
			jbuf_puts(&b, num);
		}
		else
			ok = jr_fail(r, LLM_ERR_UNSUPPORTED, line, "the %% format '%%%c' is not supported", spec);
	}
	if (ok && k < n_args)
		ok = jr_fail(r, LLM_ERR_INVALID, line, "not all arguments converted during string formatting");
	if (ok && b.failed)
		ok = buf_failed(r, &b, line);
	if (ok)
	{
		out->t = J_STR;
		if (!jbuf_to_str(&r->arena, &b, &out->s))
			ok = no_memory(r, line);
	}
	jbuf_free(&b);
	return ok;
}

/* Repeat a string or list n times (str * int). */
static bool
repeat(JRender *r, int line, JValue v, int64_t n, JValue *out)
{
	if (n < 0)
		n = 0;
	/* an empty string or list repeated any number of times is empty: do not loop n times */
	if ((v.t == J_STR && v.s.len == 0) || (v.t == J_LIST && v.l->n == 0))
		n = n > 0 ? 1 : 0;
	if (v.t == J_STR)
	{
		JBuf		b = {0};
		bool		ok = true;

		b.max = r->lim->max_output;
		for (int64_t i = 0; i < n && ok; i++)
			ok = jbuf_put_str(&b, v.s);
		ok = ok ? (out->t = J_STR, jbuf_to_str(&r->arena, &b, &out->s) || no_memory(r, line)) : buf_failed(r, &b, line);
		jbuf_free(&b);
		return ok;
	}
	else
	{
		JList	   *l;

		if (n * (int64_t) v.l->n > r->lim->max_loop)
			return jr_fail(r, LLM_ERR_LIMIT, line, "a list longer than %lld", (long long) r->lim->max_loop);
		l = jlist_new(&r->arena, (int) (n * v.l->n));
		if (l == NULL)
			return no_memory(r, line);
		for (int64_t i = 0; i < n; i++)
			for (int j = 0; j < v.l->n; j++)
				l->v[l->n++] = v.l->v[j];
		out->t = J_LIST;
		out->l = l;
		return true;
	}
}

/* a op b for the arithmetic operators. */
static bool
arith(JRender *r, int line, JOp op, JValue a, JValue b, JValue *out)
{
	static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
	bool		ai = a.t == J_INT || a.t == J_BOOL;
	bool		bi = b.t == J_INT || b.t == J_BOOL;
	bool		af = a.t == J_FLOAT;
	bool		bf = b.t == J_FLOAT;

	if (a.t == J_UNDEF)
		return undefined_error(r, line, a);
	if (b.t == J_UNDEF)
		return undefined_error(r, line, b);
	if (ai && bi)
	{
		int64_t		x = a.t == J_INT ? a.i : a.b;
		int64_t		y = b.t == J_INT ? b.i : b.b;
		int64_t		z = 0;
		bool		ovf = false;

		switch (op)
		{
			case OP_ADD:
				ovf = __builtin_add_overflow(x, y, &z);
				break;
			case OP_SUB:
				ovf = __builtin_sub_overflow(x, y, &z);
				break;
			case OP_MUL:
				ovf = __builtin_mul_overflow(x, y, &z);
				break;
			case OP_DIV:
				if (y == 0)
					return jr_fail(r, LLM_ERR_INVALID, line, "division by zero");
				*out = jv_float((double) x / (double) y);
				return true;
			case OP_FLOORDIV:
			case OP_MOD:
				if (y == 0)
					return jr_fail(r, LLM_ERR_INVALID, line, "integer division or modulo by zero");
				if (x == INT64_MIN && y == -1)
				{
					ovf = true;
					break;
				}
				z = x / y;
				if ((x % y != 0) && ((x < 0) != (y < 0)))
					z--;
				if (op == OP_MOD)
					z = x - z * y;
				break;
			case OP_POW:
				if (y < 0)
				{
					*out = jv_float(pow((double) x, (double) y));
					return true;
				}
				/* by squaring: y may be huge when x is 0, 1 or -1 */
				z = 1;
				for (int64_t base = x, e = y; e > 0 && !ovf; e >>= 1)
				{
					if (e & 1)
						ovf = __builtin_mul_overflow(z, base, &z);
					if (e > 1 && !ovf)
						ovf = __builtin_mul_overflow(base, base, &base);
				}
				break;
			default:
				break;
		}
		if (ovf)
			return jr_fail(r, LLM_ERR_LIMIT, line, "an integer beyond 64 bits");
		*out = jv_int(z);
		return true;
	}
	if ((ai || af) && (bi || bf))
	{
		double		x = af ? a.f : (double) (a.t == J_INT ? a.i : a.b);
		double		y = bf ? b.f : (double) (b.t == J_INT ? b.i : b.b);

		switch (op)
		{
			case OP_ADD:
				*out = jv_float(x + y);
				return true;
			case OP_SUB:
				*out = jv_float(x - y);
				return true;
			case OP_MUL:
				*out = jv_float(x * y);
				return true;
			case OP_DIV:
			case OP_FLOORDIV:
			case OP_MOD:
				if (y == 0.0)
					return jr_fail(r, LLM_ERR_INVALID, line, "float division by zero");
				if (op == OP_DIV)
					*out = jv_float(x / y);
				else if (op == OP_FLOORDIV)
					*out = jv_float(floor(x / y));
				else
				{
					double		m = fmod(x, y);

					if (m != 0.0 && ((m < 0) != (y < 0)))
						m += y;
					*out = jv_float(m);
				}
				return true;
			case OP_POW:
				*out = jv_float(pow(x, y));
				return true;
			default:
				break;
		}
	}
	if (op == OP_ADD && a.t == J_STR && b.t == J_STR)
		return (a.s.safe || b.s.safe) ? markup_concat(r, line, a.s, b.s, out) : str_concat(r, line, a.s, b.s, out);
	if (op == OP_ADD && a.t == J_LIST && b.t == J_LIST && !a.l->gen && !b.l->gen)
	{
		JList	   *l = jlist_new(&r->arena, a.l->n + b.l->n);

		if (l == NULL)
			return no_memory(r, line);
		for (int i = 0; i < a.l->n; i++)
			l->v[l->n++] = a.l->v[i];
		for (int i = 0; i < b.l->n; i++)
			l->v[l->n++] = b.l->v[i];
		l->tuple = a.l->tuple;
		out->t = J_LIST;
		out->l = l;
		return true;
	}
	if (op == OP_MOD && a.t == J_STR && a.s.safe)
		return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "%% formatting of a |safe string is not supported");
	if (op == OP_MOD && a.t == J_STR)
		return str_percent(r, line, a.s, b, out);
	if (op == OP_MUL && (a.t == J_STR || a.t == J_LIST) && bi)
		return repeat(r, line, a, b.t == J_INT ? b.i : b.b, out);
	if (op == OP_MUL && (b.t == J_STR || b.t == J_LIST) && ai)
		return repeat(r, line, b, a.t == J_INT ? a.i : a.b, out);
	return jr_fail(r, LLM_ERR_INVALID, line, "unsupported operand type(s) for %s: '%s' and '%s'",
				   names[op], jv_type_name(a), jv_type_name(b));
}

/* Python's "a in b". */
static bool
contains(JRender *r, int line, JValue a, JValue b, bool *out)
{
	*out = false;
	switch (b.t)
	{
		case J_STR:
			if (a.t != J_STR)
				return jr_fail(r, LLM_ERR_INVALID, line, "'in <string>' requires string as left operand, not %s",
							   jv_type_name(a));
			if (a.s.len == 0)
				*out = true;
			else
				for (size_t i = 0; i + a.s.len <= b.s.len && !*out; i++)
					*out = memcmp(b.s.s + i, a.s.s, a.s.len) == 0;
			return true;
		case J_LIST:
			for (int i = 0; i < b.l->n && !*out; i++)
				*out = jv_equal(a, b.l->v[i]);
			return true;
		case J_DICT:
			*out = !b.d->ns && jdict_find(b.d, a) != NULL;
			return true;
		case J_UNDEF:
			return true;		/* an Undefined iterates as empty */
		default:
			return jr_fail(r, LLM_ERR_INVALID, line, "argument of type '%s' is not iterable", jv_type_name(b));
	}
}

/* One comparison a op b. */
static bool
compare(JRender *r, int line, JOp op, JValue a, JValue b, bool *out)
{
	bool		lt;

	switch (op)
	{
		case OP_EQ:
			*out = jv_equal(a, b);
			return true;
		case OP_NE:
			*out = !jv_equal(a, b);
			return true;
		case OP_IN:
			return contains(r, line, a, b, out);
		case OP_NOTIN:
			if (!contains(r, line, a, b, out))
				return false;
			*out = !*out;
			return true;
		default:
			break;
	}
	if (a.t == J_UNDEF)
		return undefined_error(r, line, a);
	if (b.t == J_UNDEF)
		return undefined_error(r, line, b);
	if (op == OP_LT || op == OP_GE)
	{
		if (!jv_less(a, b, &lt))
			goto bad;
		*out = op == OP_LT ? lt : !lt;
		return true;
	}
	/* a > b is b < a; a <= b is not b < a */
	if (!jv_less(b, a, &lt))
		goto bad;
	*out = op == OP_GT ? lt : !lt;
	return true;
bad:
	return jr_fail(r, LLM_ERR_INVALID, line, "'%s' not supported between instances of '%s' and '%s'",
				   op == OP_LT ? "<" : op == OP_LE ? "<=" : op == OP_GT ? ">" : ">=", jv_type_name(a), jv_type_name(b));
}

/* Normalize a slice bound (Python's rules) for a sequence of n items. */
static int64_t
slice_bound(JValue v, int64_t n, int64_t step, bool is_start)
{
	int64_t		x;

	if (v.t != J_INT && v.t != J_BOOL)
		return step > 0 ? (is_start ? 0 : n) : (is_start ? n - 1 : -1);
	x = v.t == J_INT ? v.i : v.b;
	if (x < 0)
	{
		x += n;
		if (x < 0)
			x = step > 0 ? 0 : -1;
	}
	else if (x >= n)
		x = step > 0 ? n : n - 1;
	return x;
}

/* v[start:stop:step] for lists and strings. */
static bool
do_slice(JRender *r, int line, JValue v, JValue start, JValue stop, JValue step, JValue *out)
{
	int64_t		st = 1;
	int64_t		n;
	int64_t		lo,
				hi;

	if (step.t == J_INT || step.t == J_BOOL)
		st = step.t == J_INT ? step.i : step.b;
	if (st == 0)
		return jr_fail(r, LLM_ERR_INVALID, line, "slice step cannot be zero");
	for (int k = 0; k < 3; k++)
	{
		JValue		b = k == 0 ? start : k == 1 ? stop : step;

		if (b.t != J_INT && b.t != J_BOOL && b.t != J_NONE && b.t != J_NOARG)
			return jr_fail(r, LLM_ERR_INVALID, line, "slice indices must be integers or None");
	}
	if (v.t == J_UNDEF)
		return undefined_error(r, line, v);
	if (v.t == J_LIST)
	{
		JList	   *l;

		n = v.l->n;
		lo = slice_bound(start, n, st, true);
		hi = slice_bound(stop, n, st, false);
		l = jlist_new(&r->arena, (int) (n > 0 ? n : 1));
		if (l == NULL)
			return no_memory(r, line);
		for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st)
			l->v[l->n++] = v.l->v[i];
		l->tuple = v.l->tuple;
		out->t = J_LIST;
		out->l = l;
		return true;
	}
	if (v.t == J_STR)
	{
		size_t		cps = ju_count(v.s.s, v.s.len);
		size_t	   *offs = ja_alloc(&r->arena, (cps + 1) * sizeof(size_t));
		JBuf		b = {0};
		bool		ok = true;

		if (offs == NULL)
			return no_memory(r, line);
		for (size_t i = 0, k = 0; k <= cps; k++)
		{
			offs[k] = i;
			if (i < v.s.len)
			{
				int			adv;

				(void) ju_decode(v.s.s + i, v.s.len - i, &adv);
				i += adv;
			}
		}
		n = (int64_t) cps;
		lo = slice_bound(start, n, st, true);
		hi = slice_bound(stop, n, st, false);
		b.max = r->lim->max_output;
		if (st == 1)
		{
			if (hi > lo)
			{
				JStr		part = {v.s.s + offs[lo], offs[hi] - offs[lo], v.s.u ? v.s.u + offs[lo] : NULL, false};

				out->t = J_STR;
				out->s = part;
				return true;
			}
			*out = jv_cstr("");
			return true;
		}
		for (int64_t i = lo; ok && (st > 0 ? i < hi : i > hi); i += st)
		{
			JStr		ch = {v.s.s + offs[i], offs[i + 1] - offs[i], v.s.u ? v.s.u + offs[i] : NULL, false};

			ok = jbuf_put_str(&b, ch);
		}
		if (!ok)
			ok = buf_failed(r, &b, line);
		else
		{
			out->t = J_STR;
			ok = jbuf_to_str(&r->arena, &b, &out->s) || no_memory(r, line);
		}
		jbuf_free(&b);
		return ok;
	}
	return jr_fail(r, LLM_ERR_INVALID, line, "'%s' object is not subscriptable", jv_type_name(v));
}

/* The error for a filter or test that is not implemented, reached at run time. */
static bool
unknown(JRender *r, const JNode *n, bool is_filter)
{
	char		msg[200];
	LlmStatus	st = jinja_unknown_status(n->name, is_filter, msg, sizeof(msg));

	return jr_fail(r, st, n->line, "%s", msg);
}

/* Whether v is a generator, which str() would print with its address: refused. */
static bool
printable_value(JRender *r, int line, JValue v)
{
	if (v.t == J_LIST && v.l->gen)
		return jr_fail(r, LLM_ERR_UNSUPPORTED, line, "printing a generator (its text holds an address); apply |list first");
	return true;
}

/* Evaluate args and kwargs of call-like node n into arena arrays. */
static bool
eval_args(JRender *r, const JNode *n, JValue **args, JValue **kwargs)
{
	*args = ja_alloc(&r->arena, (size_t) (n->n_args + 1) * sizeof(JValue));
	*kwargs = ja_alloc(&r->arena, (size_t) (n->n_kw + 1) * sizeof(JValue));
	if (*args == NULL || *kwargs == NULL)
		return no_memory(r, n->line);
	for (int i = 0; i < n->n_args; i++)
		if (!jinja_eval(r, n->args[i], &(*args)[i]))
			return false;
	for (int i = 0; i < n->n_kw; i++)
		if (!jinja_eval(r, n->kwargs[i], &(*kwargs)[i]))
			return false;
	return true;
}

/* Evaluate an expression (see jinja_int.h). */
bool
jinja_eval(JRender *r, const JNode *n, JValue *out)
{
	JValue		a,
				b;
	JValue	   *args,
			   *kwargs;

	if (!jr_step(r, n->line))
		return false;
	switch (n->kind)
	{
		case N_CONST:
			*out = n->c;
			return true;
		case N_NAME:
			*out = lookup(r->frame, n->name);
			return true;
		case N_BLOCKVALUE:
			*out = r->block;
			return true;
		case N_GETATTR:
			return jinja_eval(r, n->a, &a) && jinja_getattr(r, n->line, a, n->name, out);
		case N_GETITEM:
			return jinja_eval(r, n->a, &a) && jinja_eval(r, n->b, &b) && jinja_getitem(r, n->line, a, b, out);
		case N_SLICE:
			{
				JValue		parts[3];

				if (!jinja_eval(r, n->a, &a))
					return false;
				for (int k = 0; k < 3; k++)
				{
					parts[k] = jv_none();
					if (n->args[k] != NULL && !jinja_eval(r, n->args[k], &parts[k]))
						return false;
				}
				return do_slice(r, n->line, a, parts[0], parts[1], parts[2], out);
			}
		case N_CALL:
			return jinja_eval(r, n->a, &a) && eval_args(r, n, &args, &kwargs) &&
				jinja_call(r, n->line, a, args, n->n_args, n->kwnames, kwargs, n->n_kw, out);
		case N_FILTER:
			if (!n->builtin)
				return unknown(r, n, true);
			return jinja_eval(r, n->a, &a) && eval_args(r, n, &args, &kwargs) &&
				jinja_filter(r, n->line, n->name, a, args, n->n_args, n->kwnames, kwargs, n->n_kw, out);
		case N_TEST:
			{
				bool		res;

				if (!n->builtin)
					return unknown(r, n, false);
				if (!jinja_eval(r, n->a, &a) || !eval_args(r, n, &args, &kwargs) ||
					!jinja_test(r, n->line, n->name, a, args, n->n_args, &res))
					return false;
				*out = jv_bool(n->negate ? !res : res);
				return true;
			}
		case N_BIN:
			return jinja_eval(r, n->a, &a) && jinja_eval(r, n->b, &b) &&
				arith(r, n->line, (JOp) n->c.i, a, b, out);
		case N_NEG:
		case N_POS:
			if (!jinja_eval(r, n->a, &a))
				return false;
			if (a.t == J_INT || a.t == J_BOOL)
			{
				int64_t		x = a.t == J_INT ? a.i : a.b;

				if (n->kind == N_NEG && x == INT64_MIN)
					return jr_fail(r, LLM_ERR_LIMIT, n->line, "an integer beyond 64 bits");
				*out = jv_int(n->kind == N_NEG ? -x : x);
				return true;
			}
			if (a.t == J_FLOAT)
			{
				*out = jv_float(n->kind == N_NEG ? -a.f : a.f);
				return true;
			}
			if (a.t == J_UNDEF)
				return undefined_error(r, n->line, a);
			return jr_fail(r, LLM_ERR_INVALID, n->line, "bad operand type for unary %s: '%s'",
						   n->kind == N_NEG ? "-" : "+", jv_type_name(a));
		case N_NOT:
			if (!jinja_eval(r, n->a, &a))
				return false;
			*out = jv_bool(!jv_truthy(a));
			return true;
		case N_AND:
			if (!jinja_eval(r, n->a, &a))
				return false;
			if (!jv_truthy(a))
			{
				*out = a;
				return true;
			}
			return jinja_eval(r, n->b, out);
		case N_OR:
			if (!jinja_eval(r, n->a, &a))
				return false;
			if (jv_truthy(a))
			{
				*out = a;
				return true;
			}
			return jinja_eval(r, n->b, out);
		case N_COMPARE:
			{
				bool		res = true;

				if (!jinja_eval(r, n->a, &a))
					return false;
				for (int i = 0; i < n->n_args && res; i++)
				{
					if (!jinja_eval(r, n->args[i], &b) || !compare(r, n->line, n->ops[i], a, b, &res))
						return false;
					a = b;
				}
				*out = jv_bool(res);
				return true;
			}
		case N_COND:
			if (!jinja_eval(r, n->a, &a))
				return false;
			if (jv_truthy(a))
				return jinja_eval(r, n->b, out);
			if (n->c3 == NULL)
			{
				*out = jv_undef("");
				return true;
			}
			return jinja_eval(r, n->c3, out);
		case N_LIST:
		case N_TUPLE:
			{
				JList	   *l = jlist_new(&r->arena, n->n_args);

				if (l == NULL)
					return no_memory(r, n->line);
				for (int i = 0; i < n->n_args; i++)
					if (!jinja_eval(r, n->args[i], &l->v[i]))
						return false;
				l->n = n->n_args;
				l->tuple = n->kind == N_TUPLE;
				out->t = J_LIST;
				out->l = l;
				return true;
			}
		case N_DICT:
			{
				JDict	   *d = jdict_new(&r->arena, n->n_args);

				if (d == NULL)
					return no_memory(r, n->line);
				for (int i = 0; i < n->n_args; i++)
				{
					if (!jinja_eval(r, n->args[i], &a) || !jinja_eval(r, n->kwargs[i], &b))
						return false;
					if (a.t == J_LIST && !a.l->tuple)
						return jr_fail(r, LLM_ERR_INVALID, n->line, "unhashable type: 'list'");
					if (a.t == J_DICT)
						return jr_fail(r, LLM_ERR_INVALID, n->line, "unhashable type: 'dict'");
					if (!jdict_set(&r->arena, d, a, b))
						return no_memory(r, n->line);
				}
				out->t = J_DICT;
				out->d = d;
				return true;
			}
		case N_CONCAT:
			{
				JBuf		buf = {0};
				bool		ok = true;

				buf.max = r->lim->max_output;
				for (int i = 0; i < n->n_args && ok; i++)
				{
					if (!jinja_eval(r, n->args[i], &a))
					{
						jbuf_free(&buf);
						return false;
					}
					ok = printable_value(r, n->args[i]->line, a) && jv_write_str(&buf, a, 0);
					if (r->status != LLM_OK)
					{
						jbuf_free(&buf);
						return false;
					}
				}
				if (!ok || buf.failed)
					ok = buf_failed(r, &buf, n->line);
				else
				{
					out->t = J_STR;
					ok = jbuf_to_str(&r->arena, &buf, &out->s) || no_memory(r, n->line);
				}
				jbuf_free(&buf);
				return ok;
			}
		default:
			return jr_fail(r, LLM_ERR_UNSUPPORTED, n->line, "a statement where an expression was expected");
	}
}

/* Run body with output captured into a string *out. */
static bool
capture(JRender *r, JNode **body, int n, JFrame *frame, int line, JValue *out)
{
	JBuf		buf = {0};
	JBuf	   *saved = r->out;
	bool		ok;

	buf.max = r->lim->max_output;
	r->out = &buf;
	ok = jinja_exec(r, body, n, frame);
	r->out = saved;
	if (ok && buf.failed)
		ok = buf_failed(r, &buf, line);
	if (ok)
	{
		out->t = J_STR;
		ok = jbuf_to_str(&r->arena, &buf, &out->s) || no_memory(r, line);
	}
	jbuf_free(&buf);
	return ok;
}

/* Bind a macro's or caller's parameters (node's names and defaults) in frame f. */
static bool
bind_params(JRender *r, int line, const JNode *def, JFrame *f, JValue *args, int n_args,
			const char **kwnames, JValue *kwargs, int n_kw)
{
	JFrame	   *saved = r->frame;
	bool		ok = true;

	if (n_args > def->n_names)
		return jr_fail(r, LLM_ERR_INVALID, line, "macro '%s' takes not more than %d argument(s)",
					   def->name ? def->name : "caller", def->n_names);
	for (int k = 0; k < n_kw; k++)
	{
		bool		known = false;

		for (int i = 0; i < def->n_names; i++)
			known |= strcmp(kwnames[k], def->names[i]) == 0;
		if (!known)
			return jr_fail(r, LLM_ERR_INVALID, line, "macro '%s' has no parameter named '%s'",
						   def->name ? def->name : "caller", kwnames[k]);
	}
	r->frame = f;
	for (int i = 0; i < def->n_names && ok; i++)
	{
		JValue		v = {.t = J_NOARG};

		if (i < n_args)
			v = args[i];
		for (int k = 0; k < n_kw; k++)
			if (strcmp(kwnames[k], def->names[i]) == 0)
			{
				if (i < n_args)
					ok = jr_fail(r, LLM_ERR_INVALID, line, "macro '%s' got multiple values for '%s'",
								 def->name ? def->name : "caller", def->names[i]);
				v = kwargs[k];
			}
		if (!ok)
			break;
		if (v.t == J_NOARG)
		{
			if (i < def->n_alt && def->alt[i] != NULL)
				ok = jinja_eval(r, def->alt[i], &v);
			else
				v = jv_undef(def->names[i]);
		}
		if (ok)
			ok = frame_set(r, f, def->names[i], v, line);
	}
	r->frame = saved;
	return ok;
}

/* Call a callable value (see jinja_int.h). */
bool
jinja_call(JRender *r, int line, JValue fn, JValue *args, int n_args,
		   const char **kwnames, JValue *kwargs, int n_kw, JValue *out)
{
	JFrame	   *f;
	const JNode *def;
	bool		ok;

	if (fn.t == J_UNDEF)
		return undefined_error(r, line, fn);
	if (fn.t != J_FUNC)
		return jr_fail(r, LLM_ERR_INVALID, line, "'%s' object is not callable", jv_type_name(fn));
	if (fn.fn->kind == F_BUILTIN || fn.fn->kind == F_LOOP_CYCLE)
		return jinja_call_builtin(r, line, fn.fn, args, n_args, kwnames, kwargs, n_kw, out);
	if (r->depth >= r->lim->max_depth)
		return jr_fail(r, LLM_ERR_LIMIT, line, "macro calls nested deeper than %d", r->lim->max_depth);
	def = fn.fn->node;
	f = frame_new(r, fn.fn->closure);
	if (f == NULL)
		return no_memory(r, line);
	if (!bind_params(r, line, def, f, args, n_args, kwnames, kwargs, n_kw))
		return false;
	if (fn.fn->kind == F_MACRO && fn.fn->caller.t == J_FUNC && !frame_set(r, f, "caller", fn.fn->caller, line))
		return false;
	r->depth++;
	ok = capture(r, def->body, def->n_body, f, line, out);
	r->depth--;
	return ok;
}

/* Bind loop targets names (one, or several unpacked from item) in frame f. */
static bool
bind_targets(JRender *r, int line, const char **names, int n, JValue item, JFrame *f)
{
	if (n == 1)
		return frame_set(r, f, names[0], item, line);
	if (item.t != J_LIST)
		return jr_fail(r, LLM_ERR_INVALID, line, "cannot unpack a '%s' into %d names", jv_type_name(item), n);
	if (item.l->n != n)
		return jr_fail(r, LLM_ERR_INVALID, line, "expected %d values to unpack, got %d", n, item.l->n);
	for (int i = 0; i < n; i++)
		if (!frame_set(r, f, names[i], item.l->v[i], line))
			return false;
	return true;
}

/* The loop object for iteration i of n items. */
static bool
loop_object(JRender *r, int line, JList *items, int i, JValue *out)
{
	JDict	   *d = jdict_new(&r->arena, 12);
	int			n = items->n;
	JFunc	   *cycle = ja_alloc(&r->arena, sizeof(JFunc));
	bool		ok;

	if (d == NULL || cycle == NULL)
		return no_memory(r, line);
	cycle->kind = F_LOOP_CYCLE;
	cycle->name = "cycle";
	cycle->id = i;
	ok = jdict_set(&r->arena, d, jv_cstr("index"), jv_int(i + 1)) &&
		jdict_set(&r->arena, d, jv_cstr("index0"), jv_int(i)) &&
		jdict_set(&r->arena, d, jv_cstr("revindex"), jv_int(n - i)) &&
		jdict_set(&r->arena, d, jv_cstr("revindex0"), jv_int(n - i - 1)) &&
		jdict_set(&r->arena, d, jv_cstr("first"), jv_bool(i == 0)) &&
		jdict_set(&r->arena, d, jv_cstr("last"), jv_bool(i == n - 1)) &&
		jdict_set(&r->arena, d, jv_cstr("length"), jv_int(n)) &&
		jdict_set(&r->arena, d, jv_cstr("depth"), jv_int(1)) &&
		jdict_set(&r->arena, d, jv_cstr("depth0"), jv_int(0)) &&
		jdict_set(&r->arena, d, jv_cstr("cycle"), (JValue) {.t = J_FUNC, .fn = cycle});
	if (ok && i > 0)
		ok = jdict_set(&r->arena, d, jv_cstr("previtem"), items->v[i - 1]);
	if (ok && i < n - 1)
		ok = jdict_set(&r->arena, d, jv_cstr("nextitem"), items->v[i + 1]);
	if (!ok)
		return no_memory(r, line);
	out->t = J_DICT;
	out->d = d;
	return true;
}

/* {% for %}. */
static bool
exec_for(JRender *r, const JNode *n, JFrame *frame)
{
	JValue		seq;
	JList	   *items;

	if (!jinja_eval(r, n->a, &seq) || !jinja_iterate(r, n->line, seq, &items))
		return false;
	if (n->b != NULL)
	{
		JList	   *kept = jlist_new(&r->arena, items->n);
		JFrame	   *saved = r->frame;

		if (kept == NULL)
			return no_memory(r, n->line);
		for (int i = 0; i < items->n; i++)
		{
			JFrame	   *f = frame_new(r, frame);
			JValue		c;
			bool		ok;

			if (f == NULL)
				return no_memory(r, n->line);
			if (!bind_targets(r, n->line, n->names, n->n_names, items->v[i], f))
				return false;
			r->frame = f;
			ok = jinja_eval(r, n->b, &c);
			r->frame = saved;
			if (!ok)
				return false;
			if (jv_truthy(c))
				kept->v[kept->n++] = items->v[i];
		}
		items = kept;
	}
	if (items->n > r->lim->max_loop)
		return jr_fail(r, LLM_ERR_LIMIT, n->line, "a loop of more than %lld items", (long long) r->lim->max_loop);
	if (items->n == 0)
		return jinja_exec(r, n->alt, n->n_alt, frame);
	for (int i = 0; i < items->n; i++)
	{
		JFrame	   *f = frame_new(r, frame);
		JValue		loop;

		if (f == NULL)
			return no_memory(r, n->line);
		if (!loop_object(r, n->line, items, i, &loop) || !frame_set(r, f, "loop", loop, n->line) ||
			!bind_targets(r, n->line, n->names, n->n_names, items->v[i], f))
			return false;
		if (!jinja_exec(r, n->body, n->n_body, f))
			return false;
		if (r->ctl == 1)
		{
			r->ctl = 0;
			break;
		}
		r->ctl = 0;
	}
	return true;
}

/* {% set %}: assign v to target in frame. */
static bool
assign(JRender *r, const JNode *target, JValue v, JFrame *frame)
{
	if (target->kind == N_NAME)
		return frame_set(r, frame, target->name, v, target->line);
	if (target->kind == N_NSREF)
	{
		JValue		ns = lookup(frame, target->name);

		if (ns.t != J_DICT || !ns.d->ns)
			return jr_fail(r, LLM_ERR_INVALID, target->line, "cannot assign attribute on non-namespace object");
		if (!jdict_set(&r->arena, ns.d, jv_cstr(target->attr), v))
			return no_memory(r, target->line);
		return true;
	}
	return bind_targets(r, target->line, target->names, target->n_names, v, frame);
}

/* Apply a block's filter chain (over N_BLOCKVALUE) to captured text. */
static bool
apply_block_filters(JRender *r, const JNode *chain, JValue text, JValue *out)
{
	JValue		saved = r->block;
	bool		ok;

	r->block = text;
	ok = jinja_eval(r, chain, out);
	r->block = saved;
	return ok;
}

/* Run one statement. */
static bool
exec_one(JRender *r, const JNode *n, JFrame *frame)
{
	JValue		v;

	if (!jr_step(r, n->line))
		return false;
	switch (n->kind)
	{
		case N_TEXT:
			return jbuf_put_str(r->out, n->c.s) || buf_failed(r, r->out, n->line);
		case N_PRINT:
			if (!jinja_eval(r, n->a, &v) || !printable_value(r, n->line, v))
				return false;
			return jv_write_str(r->out, v, 0) || buf_failed(r, r->out, n->line);
		case N_IF:
			if (!jinja_eval(r, n->a, &v))
				return false;
			if (jv_truthy(v))
				return jinja_exec(r, n->body, n->n_body, frame);
			return jinja_exec(r, n->alt, n->n_alt, frame);
		case N_FOR:
			return exec_for(r, n, frame);
		case N_SET:
			return jinja_eval(r, n->b, &v) && assign(r, n->a, v, frame);
		case N_SETBLOCK:
			if (!capture(r, n->body, n->n_body, frame, n->line, &v))
				return false;
			if (n->b != NULL && !apply_block_filters(r, n->b, v, &v))
				return false;
			return assign(r, n->a, v, frame);
		case N_FILTERBLOCK:
			if (!capture(r, n->body, n->n_body, frame, n->line, &v) || !apply_block_filters(r, n->b, v, &v))
				return false;
			return jv_write_str(r->out, v, 0) || buf_failed(r, r->out, n->line);
		case N_MACRO:
		case N_CALLBLOCK:
			{
				JFunc	   *fn = ja_alloc(&r->arena, sizeof(JFunc));

				if (fn == NULL)
					return no_memory(r, n->line);
				fn->kind = n->kind == N_MACRO ? F_MACRO : F_CALLER;
				fn->name = n->kind == N_MACRO ? n->name : "caller";
				fn->node = n;
				fn->closure = frame;
				if (n->kind == N_MACRO)
					return frame_set(r, frame, n->name, (JValue) {.t = J_FUNC, .fn = fn}, n->line);
				else
				{
					const JNode *call = n->a;
					JValue		callee;
					JValue	   *args,
							   *kwargs;
					JFunc	   *bound;

					if (!jinja_eval(r, call->a, &callee) || !eval_args(r, call, &args, &kwargs))
						return false;
					if (callee.t != J_FUNC || callee.fn->kind != F_MACRO)
						return jr_fail(r, LLM_ERR_INVALID, n->line, "{%% call %%} needs a macro");
					bound = ja_alloc(&r->arena, sizeof(JFunc));
					if (bound == NULL)
						return no_memory(r, n->line);
					*bound = *callee.fn;
					bound->caller = (JValue) {.t = J_FUNC, .fn = fn};
					if (!jinja_call(r, n->line, (JValue) {.t = J_FUNC, .fn = bound}, args, call->n_args,
									call->kwnames, kwargs, call->n_kw, &v))
						return false;
					return jv_write_str(r->out, v, 0) || buf_failed(r, r->out, n->line);
				}
			}
		case N_BREAK:
			r->ctl = 1;
			return true;
		case N_CONTINUE:
			r->ctl = 2;
			return true;
		case N_SCOPE:
			{
				JFrame	   *f = frame_new(r, frame);

				if (f == NULL)
					return no_memory(r, n->line);
				return jinja_exec(r, n->body, n->n_body, f);
			}
		default:
			return jr_fail(r, LLM_ERR_UNSUPPORTED, n->line, "an expression where a statement was expected");
	}
}

/* Run statements (see jinja_int.h); stops at a pending break or continue. */
bool
jinja_exec(JRender *r, JNode **body, int n, JFrame *frame)
{
	JFrame	   *saved = r->frame;
	bool		ok = true;

	r->frame = frame;
	for (int i = 0; i < n && ok && r->ctl == 0; i++)
		ok = exec_one(r, body[i], frame);
	r->frame = saved;
	return ok;
}

/* Caller's frame for calls made while a caller body runs: the caller's closure. */

/* ---- jinja.h ---------------------------------------------------------- */

LlmStatus
llm_jinja_parse(const char *src, size_t len, LlmJinja **out, LlmError *err)
{
	LlmJinja   *t = calloc(1, sizeof(LlmJinja));
	JArena		lex = {0};
	JToken	   *toks;
	int			n_toks;
	LlmStatus	st;

	*out = NULL;
	if (t == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory parsing the chat template");
	st = jinja_lex(&t->arena, src, len, &toks, &n_toks, err);
	if (st == LLM_OK)
		st = jinja_parse_tokens(t, toks, n_toks, err);
	ja_free(&lex);
	if (st != LLM_OK)
	{
		llm_jinja_free(t);
		return st;
	}
	*out = t;
	return LLM_OK;
}

void
llm_jinja_free(LlmJinja *t)
{
	if (t == NULL)
		return;
	ja_free(&t->arena);
	free(t);
}

void
llm_jinja_limits_default(LlmJinjaLimits *lim)
{
	lim->max_steps = 10 * 1000 * 1000;
	lim->max_output = 16 * 1024 * 1024;
	lim->max_depth = 64;
	lim->max_loop = 1000 * 1000;
}

LlmJinjaVars *
llm_jinja_vars_new(void)
{
	LlmJinjaVars *v = calloc(1, sizeof(LlmJinjaVars));

	if (v == NULL)
		return NULL;
	v->vars = jdict_new(&v->arena, 8);
	if (v->vars == NULL)
	{
		llm_jinja_vars_free(v);
		return NULL;
	}
	v->year = 2024;
	v->month = 7;
	v->day = 26;
	return v;
}

void
llm_jinja_vars_free(LlmJinjaVars *v)
{
	if (v == NULL)
		return;
	ja_free(&v->arena);
	free(v);
}

/* Set name to value in v. */
static LlmStatus
vars_set(LlmJinjaVars *v, const char *name, JValue value, LlmError *err)
{
	JValue		key;

	if (!jv_str_copy(&v->arena, name, strlen(name), false, &key) || !jdict_set(&v->arena, v->vars, key, value))
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory setting template variable \"%s\"", name);
	return LLM_OK;
}

LlmStatus
llm_jinja_vars_set_json(LlmJinjaVars *v, const char *name, const char *json, size_t len, bool user,
						LlmError *err)
{
	return llm_jinja_vars_set_json_plain_key(v, name, json, len, user, NULL, err);
}

LlmStatus
llm_jinja_vars_set_json_plain_key(LlmJinjaVars *v, const char *name, const char *json, size_t len, bool user,
								  const char *plain_key, LlmError *err)
{
	LlmJson    *j = NULL;
	LlmStatus	st = llm_json_parse(json, len, &j, err);

	if (st != LLM_OK)
		return st;
	st = llm_jinja_vars_set_tree(v, name, j, user, plain_key, err);
	llm_json_free(j);
	return st;
}

LlmStatus
llm_jinja_vars_set_tree(LlmJinjaVars *v, const char *name, const LlmJson *j, bool user, const char *plain_key,
						LlmError *err)
{
	JValue		value;

	if (!jv_from_json(&v->arena, j, user, plain_key, &value))
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory setting template variable \"%s\"", name);
	return vars_set(v, name, value, err);
}

LlmStatus
llm_jinja_vars_set_string(LlmJinjaVars *v, const char *name, const char *s, size_t len, bool user,
						  LlmError *err)
{
	JValue		value;

	if (!jv_str_copy(&v->arena, s, len, user, &value))
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory setting template variable \"%s\"", name);
	return vars_set(v, name, value, err);
}

LlmStatus
llm_jinja_vars_set_bool(LlmJinjaVars *v, const char *name, bool b, LlmError *err)
{
	return vars_set(v, name, jv_bool(b), err);
}

void
llm_jinja_vars_set_date(LlmJinjaVars *v, int year, int month, int day)
{
	v->year = year;
	v->month = month;
	v->day = day;
}

LlmStatus
llm_jinja_render(const LlmJinja *t, const LlmJinjaVars *v, const LlmJinjaLimits *lim,
				 LlmJinjaOutput *out, LlmError *err)
{
	JRender		r = {0};
	JBuf		buf = {0};
	LlmJinjaLimits def;
	JFrame	   *root;
	bool		ok;

	memset(out, 0, sizeof(*out));
	if (lim == NULL)
	{
		llm_jinja_limits_default(&def);
		lim = &def;
	}
	r.lim = lim;
	r.err = err;
	r.status = LLM_OK;
	r.arena.cap = lim->max_output * 8 + ((size_t) 64 << 20);
	r.year = v ? v->year : 2024;
	r.month = v ? v->month : 7;
	r.day = v ? v->day : 26;
	buf.max = lim->max_output;
	r.out = &buf;
	root = frame_new(&r, NULL);
	if (root == NULL)
	{
		ja_free(&r.arena);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory rendering the chat template");
	}
	if (v != NULL)
		for (int i = 0; i < v->vars->n; i++)
			if (!jdict_set(&r.arena, root->vars, v->vars->k[i], v->vars->v[i]))
			{
				ja_free(&r.arena);
				return llm_error_set(err, LLM_ERR_NOMEM, "out of memory rendering the chat template");
			}
	r.globals = root;
	ok = jinja_exec(&r, t->body, t->n_body, root);
	if (ok && buf.failed)
		ok = buf_failed(&r, &buf, 0);
	ja_free(&r.arena);
	if (!ok)
	{
		jbuf_free(&buf);
		return r.status != LLM_OK ? r.status : LLM_ERR_INVALID;
	}
	/* the user mask as spans */
	out->text = buf.s ? buf.s : strdup("");
	out->len = buf.len;
	if (out->text == NULL)
	{
		jbuf_free(&buf);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory rendering the chat template");
	}
	if (buf.any_user)
	{
		int			cap = 16;

		out->user = malloc((size_t) cap * sizeof(LlmJinjaSpan));
		for (size_t i = 0; out->user != NULL && i < buf.len;)
		{
			size_t		j = i;

			if (!buf.u[i])
			{
				i++;
				continue;
			}
			while (j < buf.len && buf.u[j])
				j++;
			if (out->n_user == cap)
			{
				LlmJinjaSpan *grown = realloc(out->user, (size_t) cap * 2 * sizeof(LlmJinjaSpan));

				if (grown == NULL)
				{
					free(out->user);
					out->user = NULL;
					break;
				}
				out->user = grown;
				cap *= 2;
			}
			out->user[out->n_user].off = i;
			out->user[out->n_user].len = j - i;
			out->n_user++;
			i = j;
		}
		if (out->user == NULL)
		{
			free(buf.u);
			free(out->text);
			memset(out, 0, sizeof(*out));
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory rendering the chat template");
		}
	}
	free(buf.u);
	return LLM_OK;
}

void
llm_jinja_output_free(LlmJinjaOutput *o)
{
	free(o->text);
	free(o->user);
	memset(o, 0, sizeof(*o));
}
