/*
 * jinja_parse.c
 *		Tokens to a tree, by Jinja2's grammar and operator precedence:
 *
 *   expression := or ["if" or ["else" expression]]
 *   or := and ("or" and)*          and := not ("and" not)*
 *   not := "not" not | compare     compare := math1 (op math1)*
 *   math1 := concat (("+"|"-") concat)*   concat := math2 ("~" math2)*
 *   math2 := pow (("*"|"/"|"//"|"%") pow)*  pow := unary ("**" unary)*
 *   unary := ("-"|"+") unary | primary postfix* (filter | test | call)*
 *
 * Statements: if/elif/else, for (targets, "if" filter, else), set (with a
 * namespace attribute, or a block), macro, call, filter, break, continue,
 * raw (in the lexer) and transformers' generation.  Whatever else is
 * refused with its name and line; so are filters and tests the interpreter
 * does not implement, as Jinja2 refuses unknown ones when it compiles.
 */
#include <stdio.h>
#include <string.h>

#include "jinja_int.h"

typedef struct Parser
{
	JArena	   *a;
	const JToken *tk;
	int			n;
	int			pos;
	LlmError   *err;
	bool		failed;
} Parser;

/* A growing array of nodes during parsing. */
typedef struct NodeVec
{
	JNode	  **v;
	int			n;
	int			cap;
} NodeVec;

static JNode *parse_expression(Parser *p, bool with_condexpr);
static JNode *parse_tuple(Parser *p, bool with_condexpr, bool explicit_parens, const char *extra_end);
static JNode *parse_unary(Parser *p, bool with_filter);
static JNode *parse_primary(Parser *p);
static JNode *parse_postfix(Parser *p, JNode *node);
static JNode *parse_filter_expr(Parser *p, JNode *node);
static bool parse_body(Parser *p, const char *const *ends, JNode ***body, int *n, const char **which);

/* Record a syntax error at token line; returns NULL. */
static void *
fail(Parser *p, const char *fmt, const char *what)
{
	char		msg[256];

	if (!p->failed)
	{
		snprintf(msg, sizeof(msg), fmt, what ? what : "");
		llm_error_set(p->err, LLM_ERR_UNSUPPORTED, "chat template line %d: %s",
					  p->tk[p->pos < p->n ? p->pos : p->n - 1].line, msg);
		p->failed = true;
	}
	return NULL;
}

/* Out of memory; returns NULL. */
static void *
oom(Parser *p)
{
	if (!p->failed)
		llm_error_set(p->err, LLM_ERR_NOMEM, "out of memory parsing the chat template");
	p->failed = true;
	return NULL;
}

static const JToken *
cur(Parser *p)
{
	return &p->tk[p->pos];
}

/* Whether the current token is operator op. */
static bool
is_op(Parser *p, const char *op)
{
	return cur(p)->kind == T_OP && strcmp(cur(p)->s, op) == 0;
}

/* Whether the current token is the name nm. */
static bool
is_name(Parser *p, const char *nm)
{
	return cur(p)->kind == T_NAME && strcmp(cur(p)->s, nm) == 0;
}

static void
next(Parser *p)
{
	if (p->pos < p->n - 1)
		p->pos++;
}

/* Consume operator op or fail. */
static bool
expect_op(Parser *p, const char *op)
{
	if (!is_op(p, op))
	{
		fail(p, "expected '%s'", op);
		return false;
	}
	next(p);
	return true;
}

/* Consume the end of a block tag or fail. */
static bool
expect_block_end(Parser *p)
{
	if (cur(p)->kind != T_BLOCK_END)
	{
		fail(p, "expected the end of the statement (%%}) %s", "");
		return false;
	}
	next(p);
	return true;
}

/* Consume a name token and return its text, or fail. */
static const char *
expect_name(Parser *p)
{
	const char *s;

	if (cur(p)->kind != T_NAME)
		return fail(p, "expected a name%s", "");
	s = cur(p)->s;
	next(p);
	return s;
}

/* A new node of kind at the current line. */
static JNode *
node_new(Parser *p, JNodeKind kind)
{
	JNode	   *nd = ja_alloc(p->a, sizeof(JNode));

	if (nd == NULL)
		return oom(p);
	nd->kind = kind;
	nd->line = cur(p)->line;
	return nd;
}

static bool
vec_push(Parser *p, NodeVec *v, JNode *nd)
{
	if (v->n == v->cap)
	{
		int			cap = v->cap ? v->cap * 2 : 8;
		JNode	  **grown = ja_alloc(p->a, (size_t) cap * sizeof(JNode *));

		if (grown == NULL)
		{
			oom(p);
			return false;
		}
		if (v->n)
			memcpy(grown, v->v, (size_t) v->n * sizeof(JNode *));
		v->v = grown;
		v->cap = cap;
	}
	v->v[v->n++] = nd;
	return true;
}

/* A copy of names in the arena. */
static const char **
names_copy(Parser *p, const char **names, int n)
{
	const char **out = ja_alloc(p->a, (size_t) (n > 0 ? n : 1) * sizeof(char *));

	if (out == NULL)
		return oom(p);
	memcpy(out, names, (size_t) n * sizeof(char *));
	return out;
}

/* A binary node of kind (and op) over l and r. */
static JNode *
binary(Parser *p, JNodeKind kind, JOp op, JNode *l, JNode *r, int line)
{
	JNode	   *nd;

	if (l == NULL || r == NULL)
		return NULL;
	nd = node_new(p, kind);
	if (nd == NULL)
		return NULL;
	nd->ops = NULL;
	nd->a = l;
	nd->b = r;
	nd->line = line;
	nd->c.t = J_INT;
	nd->c.i = op;
	return nd;
}

/*
 * Call arguments after "(": positional, then name=value; into nd's args and
 * kwargs.  Consumes the ")".
 */
static bool
parse_call_args(Parser *p, JNode *nd)
{
	NodeVec		args = {0};
	NodeVec		kwv = {0};
	const char *kwn[64];
	int			n_kw = 0;

	if (!expect_op(p, "("))
		return false;
	while (!is_op(p, ")"))
	{
		if (args.n + n_kw > 0 && !expect_op(p, ","))
			return false;
		if (is_op(p, ")"))
			break;
		if (is_op(p, "*") || is_op(p, "**"))
		{
			fail(p, "%s arguments (*args, **kwargs) are not supported", "star");
			return false;
		}
		if (cur(p)->kind == T_NAME && p->pos + 1 < p->n && p->tk[p->pos + 1].kind == T_OP &&
			strcmp(p->tk[p->pos + 1].s, "=") == 0)
		{
			if (n_kw == 64)
			{
				fail(p, "more than 64 keyword arguments%s", "");
				return false;
			}
			kwn[n_kw++] = cur(p)->s;
			next(p);
			next(p);
			if (!vec_push(p, &kwv, parse_expression(p, true)) || kwv.v[kwv.n - 1] == NULL)
				return false;
		}
		else
		{
			if (n_kw > 0)
			{
				fail(p, "a positional argument follows a keyword argument%s", "");
				return false;
			}
			if (!vec_push(p, &args, parse_expression(p, true)) || args.v[args.n - 1] == NULL)
				return false;
		}
	}
	next(p);
	nd->args = args.v;
	nd->n_args = args.n;
	nd->kwargs = kwv.v;
	nd->n_kw = n_kw;
	nd->kwnames = names_copy(p, kwn, n_kw);
	return nd->kwnames != NULL;
}

/* A dotted name (filters and tests may be "a.b"); only plain names are known, so a dot fails later. */
static const char *
dotted_name(Parser *p)
{
	const char *nm = expect_name(p);

	if (nm != NULL && is_op(p, "."))
		return fail(p, "the dotted filter or test name '%s...' is not supported", nm);
	return nm;
}

/* A call of callee: "(args)" follows. */
static JNode *
parse_call(Parser *p, JNode *callee)
{
	JNode	   *call = node_new(p, N_CALL);

	if (call == NULL)
		return NULL;
	call->a = callee;
	if (!parse_call_args(p, call))
		return NULL;
	return call;
}

/* "|name(args)" applied to node. */
static JNode *
parse_filter(Parser *p, JNode *node)
{
	JNode	   *nd;
	const char *nm;

	next(p);					/* | */
	nd = node_new(p, N_FILTER);
	if (nd == NULL || (nm = dotted_name(p)) == NULL)
		return NULL;
	nd->name = nm;
	nd->a = node;
	nd->builtin = jinja_has_filter(nm);
	if (is_op(p, "(") && !parse_call_args(p, nd))
		return NULL;
	return nd;
}

/* "is [not] name [args]" applied to node. */
static JNode *
parse_test(Parser *p, JNode *node)
{
	JNode	   *nd;
	const char *nm;
	const JToken *t;

	next(p);					/* is */
	nd = node_new(p, N_TEST);
	if (nd == NULL)
		return NULL;
	if (is_name(p, "not"))
	{
		nd->negate = true;
		next(p);
	}
	if ((nm = dotted_name(p)) == NULL)
		return NULL;
	nd->name = nm;
	nd->a = node;
	nd->builtin = jinja_has_test(nm);
	t = cur(p);
	if (is_op(p, "("))
	{
		if (!parse_call_args(p, nd))
			return NULL;
	}
	else if ((t->kind == T_NAME || t->kind == T_STRING || t->kind == T_INT || t->kind == T_FLOAT ||
			  is_op(p, "(") || is_op(p, "[") || is_op(p, "{")) &&
			 !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and"))
	{
		JNode	   *arg;

		if (is_name(p, "is"))
			return fail(p, "tests cannot be chained with 'is'%s", "");
		arg = parse_postfix(p, parse_primary(p));
		if (arg == NULL)
			return NULL;
		nd->args = ja_alloc(p->a, sizeof(JNode *));
		if (nd->args == NULL)
			return oom(p);
		nd->args[0] = arg;
		nd->n_args = 1;
	}
	return nd;
}

/* Filters, tests and calls after a unary expression. */
static JNode *
parse_filter_expr(Parser *p, JNode *node)
{
	while (node != NULL)
	{
		if (is_op(p, "|"))
			node = parse_filter(p, node);
		else if (is_name(p, "is"))
			node = parse_test(p, node);
		else if (is_op(p, "("))
			node = parse_call(p, node);
		else
			break;
	}
	return node;
}

/* One subscript: an expression or a slice a:b:c. */
static JNode *
parse_subscribed(Parser *p)
{
	JNode	   *parts[3] = {NULL, NULL, NULL};
	JNode	   *nd;
	int			line = cur(p)->line;

	if (is_op(p, ":"))
		next(p);
	else
	{
		JNode	   *e = parse_expression(p, true);

		if (e == NULL || !is_op(p, ":"))
			return e;
		parts[0] = e;
		next(p);
	}
	if (!is_op(p, "]") && !is_op(p, ",") && !is_op(p, ":"))
	{
		if ((parts[1] = parse_expression(p, true)) == NULL)
			return NULL;
	}
	if (is_op(p, ":"))
	{
		next(p);
		if (!is_op(p, "]") && !is_op(p, ","))
		{
			if ((parts[2] = parse_expression(p, true)) == NULL)
				return NULL;
		}
	}
	nd = node_new(p, N_SLICE);
	if (nd == NULL || (nd->args = ja_alloc(p->a, 3 * sizeof(JNode *))) == NULL)
		return oom(p);
	memcpy(nd->args, parts, sizeof(parts));
	nd->n_args = 3;
	nd->line = line;
	return nd;
}

/* Attribute access, subscripts and calls after a primary. */
static JNode *
parse_postfix(Parser *p, JNode *node)
{
	while (node != NULL)
	{
		if (is_op(p, "."))
		{
			JNode	   *nd;

			next(p);
			if (cur(p)->kind == T_INT)
			{
				nd = node_new(p, N_GETITEM);
				if (nd == NULL || (nd->b = node_new(p, N_CONST)) == NULL)
					return NULL;
				nd->b->c = jv_int(cur(p)->i);
				next(p);
			}
			else
			{
				const char *nm = expect_name(p);

				if (nm == NULL || (nd = node_new(p, N_GETATTR)) == NULL)
					return NULL;
				nd->name = nm;
			}
			nd->a = node;
			node = nd;
		}
		else if (is_op(p, "["))
		{
			NodeVec		items = {0};
			JNode	   *nd;

			next(p);
			while (!is_op(p, "]"))
			{
				if (items.n > 0 && !expect_op(p, ","))
					return NULL;
				if (is_op(p, "]"))
					break;
				if (!vec_push(p, &items, parse_subscribed(p)) || items.v[items.n - 1] == NULL)
					return NULL;
			}
			next(p);
			if (items.n != 1)
				return fail(p, "a subscript with %s", items.n == 0 ? "nothing in it" : "several indices");
			if (items.v[0]->kind == N_SLICE)
			{
				nd = items.v[0];
				nd->a = node;
			}
			else
			{
				nd = node_new(p, N_GETITEM);
				if (nd == NULL)
					return NULL;
				nd->a = node;
				nd->b = items.v[0];
			}
			node = nd;
		}
		else if (is_op(p, "("))
			node = parse_call(p, node);
		else
			break;
	}
	return node;
}

/* A literal, a name, a parenthesized expression or tuple, a list or a dict. */
static JNode *
parse_primary(Parser *p)
{
	const JToken *t = cur(p);
	JNode	   *nd;

	if (p->failed)
		return NULL;
	if (t->kind == T_NAME)
	{
		nd = node_new(p, N_CONST);
		if (nd == NULL)
			return NULL;
		if (strcmp(t->s, "true") == 0 || strcmp(t->s, "True") == 0)
			nd->c = jv_bool(true);
		else if (strcmp(t->s, "false") == 0 || strcmp(t->s, "False") == 0)
			nd->c = jv_bool(false);
		else if (strcmp(t->s, "none") == 0 || strcmp(t->s, "None") == 0)
			nd->c = jv_none();
		else
		{
			nd->kind = N_NAME;
			nd->name = t->s;
		}
		next(p);
		return nd;
	}
	if (t->kind == T_STRING)
	{
		JBuf		b = {0};
		JValue		v;

		b.max = SIZE_MAX;
		nd = node_new(p, N_CONST);
		if (nd == NULL)
			return NULL;
		while (cur(p)->kind == T_STRING)
		{
			jbuf_put(&b, cur(p)->s, cur(p)->len, false);
			next(p);
		}
		if (b.failed || !jv_str_copy(p->a, b.s ? b.s : "", b.len, false, &v))
		{
			jbuf_free(&b);
			return oom(p);
		}
		jbuf_free(&b);
		nd->c = v;
		return nd;
	}
	if (t->kind == T_INT || t->kind == T_FLOAT)
	{
		nd = node_new(p, N_CONST);
		if (nd == NULL)
			return NULL;
		nd->c = t->kind == T_INT ? jv_int(t->i) : jv_float(t->f);
		next(p);
		return nd;
	}
	if (is_op(p, "("))
	{
		next(p);
		nd = parse_tuple(p, true, true, NULL);
		if (nd == NULL || !expect_op(p, ")"))
			return NULL;
		return nd;
	}
	if (is_op(p, "[") || is_op(p, "{"))
	{
		bool		dict = is_op(p, "{");
		const char *close = dict ? "}" : "]";
		NodeVec		keys = {0};
		NodeVec		vals = {0};

		nd = node_new(p, dict ? N_DICT : N_LIST);
		if (nd == NULL)
			return NULL;
		next(p);
		while (!is_op(p, close))
		{
			if (keys.n > 0 && !expect_op(p, ","))
				return NULL;
			if (is_op(p, close))
				break;
			if (!vec_push(p, &keys, parse_expression(p, true)) || keys.v[keys.n - 1] == NULL)
				return NULL;
			if (dict)
			{
				if (!expect_op(p, ":"))
					return NULL;
				if (!vec_push(p, &vals, parse_expression(p, true)) || vals.v[vals.n - 1] == NULL)
					return NULL;
			}
		}
		next(p);
		nd->args = keys.v;
		nd->n_args = keys.n;
		nd->kwargs = vals.v;
		return nd;
	}
	if (t->kind == T_OP)
		return fail(p, "unexpected '%s'", t->s);
	if (t->kind == T_EOF)
		return fail(p, "unexpected end of template%s", "");
	return fail(p, "unexpected end of tag%s", "");
}

/* unary := ("-"|"+") unary | primary postfix*, then filters and tests when with_filter. */
static JNode *
parse_unary(Parser *p, bool with_filter)
{
	JNode	   *node;

	if (is_op(p, "-") || is_op(p, "+"))
	{
		JNode	   *nd = node_new(p, is_op(p, "-") ? N_NEG : N_POS);

		if (nd == NULL)
			return NULL;
		next(p);
		nd->a = parse_unary(p, false);
		if (nd->a == NULL)
			return NULL;
		node = nd;
	}
	else
		node = parse_postfix(p, parse_primary(p));
	if (with_filter)
		node = parse_filter_expr(p, node);
	return node;
}

static JNode *
parse_pow(Parser *p)
{
	JNode	   *l = parse_unary(p, true);

	while (l != NULL && is_op(p, "**"))
	{
		int			line = cur(p)->line;

		next(p);
		l = binary(p, N_BIN, OP_POW, l, parse_unary(p, true), line);
	}
	return l;
}

static JNode *
parse_math2(Parser *p)
{
	JNode	   *l = parse_pow(p);

	while (l != NULL && (is_op(p, "*") || is_op(p, "/") || is_op(p, "//") || is_op(p, "%")))
	{
		JOp			op = is_op(p, "*") ? OP_MUL : is_op(p, "/") ? OP_DIV : is_op(p, "//") ? OP_FLOORDIV : OP_MOD;
		int			line = cur(p)->line;

		next(p);
		l = binary(p, N_BIN, op, l, parse_pow(p), line);
	}
	return l;
}

static JNode *
parse_concat(Parser *p)
{
	JNode	   *first = parse_math2(p);
	NodeVec		parts = {0};
	JNode	   *nd;

	if (first == NULL || !is_op(p, "~"))
		return first;
	if (!vec_push(p, &parts, first))
		return NULL;
	while (is_op(p, "~"))
	{
		next(p);
		if (!vec_push(p, &parts, parse_math2(p)) || parts.v[parts.n - 1] == NULL)
			return NULL;
	}
	nd = node_new(p, N_CONCAT);
	if (nd == NULL)
		return NULL;
	nd->args = parts.v;
	nd->n_args = parts.n;
	nd->line = first->line;
	return nd;
}

static JNode *
parse_math1(Parser *p)
{
	JNode	   *l = parse_concat(p);

	while (l != NULL && (is_op(p, "+") || is_op(p, "-")))
	{
		JOp			op = is_op(p, "+") ? OP_ADD : OP_SUB;
		int			line = cur(p)->line;

		next(p);
		l = binary(p, N_BIN, op, l, parse_concat(p), line);
	}
	return l;
}

static JNode *
parse_compare(Parser *p)
{
	JNode	   *first = parse_math1(p);
	NodeVec		rhs = {0};
	JOp			ops[32];
	JNode	   *nd;

	while (first != NULL)
	{
		JOp			op;

		if (is_op(p, "=="))
			op = OP_EQ;
		else if (is_op(p, "!="))
			op = OP_NE;
		else if (is_op(p, "<"))
			op = OP_LT;
		else if (is_op(p, "<="))
			op = OP_LE;
		else if (is_op(p, ">"))
			op = OP_GT;
		else if (is_op(p, ">="))
			op = OP_GE;
		else if (is_name(p, "in"))
			op = OP_IN;
		else if (is_name(p, "not") && p->pos + 1 < p->n && p->tk[p->pos + 1].kind == T_NAME &&
				 strcmp(p->tk[p->pos + 1].s, "in") == 0)
		{
			op = OP_NOTIN;
			next(p);
		}
		else
			break;
		next(p);
		if (rhs.n == 32)
			return fail(p, "more than 32 chained comparisons%s", "");
		ops[rhs.n] = op;
		if (!vec_push(p, &rhs, parse_math1(p)) || rhs.v[rhs.n - 1] == NULL)
			return NULL;
	}
	if (first == NULL || rhs.n == 0)
		return first;
	nd = node_new(p, N_COMPARE);
	if (nd == NULL || (nd->ops = ja_alloc(p->a, (size_t) rhs.n * sizeof(JOp))) == NULL)
		return oom(p);
	memcpy(nd->ops, ops, (size_t) rhs.n * sizeof(JOp));
	nd->a = first;
	nd->args = rhs.v;
	nd->n_args = rhs.n;
	nd->line = first->line;
	return nd;
}

static JNode *
parse_not(Parser *p)
{
	if (is_name(p, "not"))
	{
		JNode	   *nd = node_new(p, N_NOT);

		if (nd == NULL)
			return NULL;
		next(p);
		nd->a = parse_not(p);
		return nd->a ? nd : NULL;
	}
	return parse_compare(p);
}

static JNode *
parse_and(Parser *p)
{
	JNode	   *l = parse_not(p);

	while (l != NULL && is_name(p, "and"))
	{
		int			line = cur(p)->line;

		next(p);
		l = binary(p, N_AND, OP_ADD, l, parse_not(p), line);
	}
	return l;
}

static JNode *
parse_or(Parser *p)
{
	JNode	   *l = parse_and(p);

	while (l != NULL && is_name(p, "or"))
	{
		int			line = cur(p)->line;

		next(p);
		l = binary(p, N_OR, OP_ADD, l, parse_and(p), line);
	}
	return l;
}

/* expression := or ["if" or ["else" expression]] (the condition only with with_condexpr). */
static JNode *
parse_expression(Parser *p, bool with_condexpr)
{
	JNode	   *expr = parse_or(p);

	while (with_condexpr && expr != NULL && is_name(p, "if"))
	{
		JNode	   *nd = node_new(p, N_COND);

		if (nd == NULL)
			return NULL;
		next(p);
		nd->b = expr;
		nd->a = parse_or(p);
		if (nd->a == NULL)
			return NULL;
		if (is_name(p, "else"))
		{
			next(p);
			nd->c3 = parse_expression(p, true);
			if (nd->c3 == NULL)
				return NULL;
		}
		expr = nd;
	}
	return expr;
}

/* Whether the current token ends a tuple: a tag's end, ")" or the name extra_end. */
static bool
tuple_end(Parser *p, const char *extra_end)
{
	const JToken *t = cur(p);

	return t->kind == T_VAR_END || t->kind == T_BLOCK_END || t->kind == T_EOF || is_op(p, ")") ||
		(extra_end != NULL && is_name(p, extra_end));
}

/* Expressions separated by commas: one, or a tuple of them. */
static JNode *
parse_tuple(Parser *p, bool with_condexpr, bool explicit_parens, const char *extra_end)
{
	NodeVec		items = {0};
	bool		is_tuple = false;
	int			line = cur(p)->line;
	JNode	   *nd;

	for (;;)
	{
		if (items.n > 0 && !expect_op(p, ","))
			return NULL;
		if (tuple_end(p, extra_end))
			break;
		if (!vec_push(p, &items, parse_expression(p, with_condexpr)) || items.v[items.n - 1] == NULL)
			return NULL;
		if (is_op(p, ","))
			is_tuple = true;
		else
			break;
	}
	if (!is_tuple)
	{
		if (items.n == 1)
			return items.v[0];
		if (!explicit_parens)
			return fail(p, "expected an expression%s", "");
	}
	nd = node_new(p, N_TUPLE);
	if (nd == NULL)
		return NULL;
	nd->args = items.v;
	nd->n_args = items.n;
	nd->line = line;
	return nd;
}

/* Assignment targets: name (, name)*; *n names into out (at most max). */
static bool
parse_targets(Parser *p, const char **out, int max, int *n)
{
	*n = 0;
	do
	{
		if (*n > 0)
			next(p);			/* , */
		if (*n == max)
		{
			fail(p, "too many loop targets%s", "");
			return false;
		}
		if ((out[(*n)++] = expect_name(p)) == NULL)
			return false;
	} while (is_op(p, ","));
	return true;
}

/* {% if %} ... {% elif %} ... {% else %} ... {% endif %} after "if". */
static JNode *
parse_if(Parser *p)
{
	static const char *const ends[] = {"elif", "else", "endif", NULL};
	JNode	   *nd = node_new(p, N_IF);
	const char *which;

	if (nd == NULL)
		return NULL;
	next(p);
	nd->a = parse_tuple(p, false, false, NULL);
	if (nd->a == NULL || !expect_block_end(p) || !parse_body(p, ends, &nd->body, &nd->n_body, &which))
		return NULL;
	if (strcmp(which, "elif") == 0)
	{
		JNode	   *elif = parse_if(p);

		if (elif == NULL || (nd->alt = ja_alloc(p->a, sizeof(JNode *))) == NULL)
			return elif ? oom(p) : NULL;
		nd->alt[0] = elif;
		nd->n_alt = 1;
		return nd;
	}
	if (strcmp(which, "else") == 0)
	{
		static const char *const end[] = {"endif", NULL};

		next(p);
		if (!expect_block_end(p) || !parse_body(p, end, &nd->alt, &nd->n_alt, &which))
			return NULL;
	}
	next(p);					/* endif */
	return expect_block_end(p) ? nd : NULL;
}

/* {% for targets in iter [if cond] %} ... [{% else %} ...] {% endfor %} after "for". */
static JNode *
parse_for(Parser *p)
{
	static const char *const ends[] = {"else", "endfor", NULL};
	static const char *const end[] = {"endfor", NULL};
	JNode	   *nd = node_new(p, N_FOR);
	const char *targets[8];
	int			n_targets;
	const char *which;

	if (nd == NULL)
		return NULL;
	next(p);
	if (!parse_targets(p, targets, 8, &n_targets))
		return NULL;
	if (!is_name(p, "in"))
		return fail(p, "expected 'in' in a for loop%s", "");
	next(p);
	nd->names = names_copy(p, targets, n_targets);
	nd->n_names = n_targets;
	nd->a = parse_tuple(p, false, false, "recursive");
	if (nd->a == NULL)
		return NULL;
	if (is_name(p, "if"))
	{
		next(p);
		if ((nd->b = parse_expression(p, true)) == NULL)
			return NULL;
	}
	if (is_name(p, "recursive"))
		return fail(p, "recursive for loops are not supported%s", "");
	if (!expect_block_end(p) || !parse_body(p, ends, &nd->body, &nd->n_body, &which))
		return NULL;
	if (strcmp(which, "else") == 0)
	{
		next(p);
		if (!expect_block_end(p) || !parse_body(p, end, &nd->alt, &nd->n_alt, &which))
			return NULL;
	}
	next(p);
	return expect_block_end(p) ? nd : NULL;
}

/* A chain of filters "|f(args)|g" applied to the captured block, or NULL when there is none. */
static JNode *
parse_block_filters(Parser *p, bool first_has_bar)
{
	JNode	   *value = node_new(p, N_BLOCKVALUE);
	JNode	   *node = value;

	if (value == NULL)
		return NULL;
	if (!first_has_bar)
	{
		/* {% filter name(args) | more %}: the first filter has no bar */
		JNode	   *nd = node_new(p, N_FILTER);
		const char *nm;

		if (nd == NULL || (nm = dotted_name(p)) == NULL)
			return NULL;
		nd->name = nm;
		nd->a = value;
		nd->builtin = jinja_has_filter(nm);
		if (is_op(p, "(") && !parse_call_args(p, nd))
			return NULL;
		node = nd;
	}
	while (node != NULL && is_op(p, "|"))
		node = parse_filter(p, node);
	return node;
}

/* {% set target = value %} or {% set target [| filters] %} ... {% endset %} after "set". */
static JNode *
parse_set(Parser *p)
{
	static const char *const end[] = {"endset", NULL};
	JNode	   *nd = node_new(p, N_SET);
	JNode	   *target;
	const char *which;

	if (nd == NULL)
		return NULL;
	next(p);
	if (cur(p)->kind == T_NAME && p->tk[p->pos + 1].kind == T_OP && strcmp(p->tk[p->pos + 1].s, ".") == 0)
	{
		target = node_new(p, N_NSREF);
		if (target == NULL)
			return NULL;
		target->name = cur(p)->s;
		next(p);
		next(p);
		if ((target->attr = expect_name(p)) == NULL)
			return NULL;
	}
	else
	{
		const char *names[8];
		int			n;

		target = node_new(p, N_TUPLE);
		if (target == NULL || !parse_targets(p, names, 8, &n))
			return NULL;
		if (n == 1)
		{
			target->kind = N_NAME;
			target->name = names[0];
		}
		else
		{
			target->names = names_copy(p, names, n);
			target->n_names = n;
		}
	}
	nd->a = target;
	if (is_op(p, "="))
	{
		next(p);
		nd->b = parse_tuple(p, true, false, NULL);
		if (nd->b == NULL || !expect_block_end(p))
			return NULL;
		return nd;
	}
	if (target->kind != N_NAME)
		return fail(p, "a block set of a namespace attribute or several names is not supported%s", "");
	nd->kind = N_SETBLOCK;
	if (is_op(p, "|") && (nd->b = parse_block_filters(p, true)) == NULL)
		return NULL;
	if (!expect_block_end(p) || !parse_body(p, end, &nd->body, &nd->n_body, &which))
		return NULL;
	next(p);
	return expect_block_end(p) ? nd : NULL;
}

/* Parameters "(a, b=default, ...)" of a macro or a call block's caller, into nd->names and nd->alt. */
static bool
parse_params(Parser *p, JNode *nd)
{
	const char *names[64];
	JNode	   *defaults[64];
	int			n = 0;

	if (!expect_op(p, "("))
		return false;
	while (!is_op(p, ")"))
	{
		if (n > 0 && !expect_op(p, ","))
			return false;
		if (is_op(p, ")"))
			break;
		if (n == 64)
		{
			fail(p, "more than 64 macro parameters%s", "");
			return false;
		}
		if ((names[n] = expect_name(p)) == NULL)
			return false;
		defaults[n] = NULL;
		if (is_op(p, "="))
		{
			next(p);
			if ((defaults[n] = parse_expression(p, true)) == NULL)
				return false;
		}
		else if (n > 0 && defaults[n - 1] != NULL)
		{
			fail(p, "a macro parameter without a default follows one with a default%s", "");
			return false;
		}
		n++;
	}
	next(p);
	nd->names = names_copy(p, names, n);
	nd->n_names = n;
	nd->alt = ja_alloc(p->a, (size_t) (n > 0 ? n : 1) * sizeof(JNode *));
	if (nd->names == NULL || nd->alt == NULL)
	{
		oom(p);
		return false;
	}
	memcpy(nd->alt, defaults, (size_t) n * sizeof(JNode *));
	nd->n_alt = n;
	return true;
}

/* {% macro name(params) %} ... {% endmacro %} after "macro". */
static JNode *
parse_macro(Parser *p)
{
	static const char *const end[] = {"endmacro", NULL};
	JNode	   *nd = node_new(p, N_MACRO);
	const char *which;

	if (nd == NULL)
		return NULL;
	next(p);
	if ((nd->name = expect_name(p)) == NULL || !parse_params(p, nd) || !expect_block_end(p) ||
		!parse_body(p, end, &nd->body, &nd->n_body, &which))
		return NULL;
	next(p);
	return expect_block_end(p) ? nd : NULL;
}

/* {% call[(params)] macro(args) %} ... {% endcall %} after "call". */
static JNode *
parse_callblock(Parser *p)
{
	static const char *const end[] = {"endcall", NULL};
	JNode	   *nd = node_new(p, N_CALLBLOCK);
	const char *which;

	if (nd == NULL)
		return NULL;
	next(p);
	if (is_op(p, "("))
	{
		if (!parse_params(p, nd))
			return NULL;
	}
	else if ((nd->alt = ja_alloc(p->a, sizeof(JNode *))) == NULL || (nd->names = ja_alloc(p->a, sizeof(char *))) == NULL)
		return oom(p);
	nd->a = parse_expression(p, true);
	if (nd->a == NULL)
		return NULL;
	if (nd->a->kind != N_CALL)
		return fail(p, "expected a call in {%% call %%}%s", "");
	if (!expect_block_end(p) || !parse_body(p, end, &nd->body, &nd->n_body, &which))
		return NULL;
	next(p);
	return expect_block_end(p) ? nd : NULL;
}

/* One statement after "{%": the tag's name is current. */
static JNode *
parse_statement(Parser *p)
{
	const JToken *t = cur(p);
	JNode	   *nd;

	if (t->kind != T_NAME)
		return fail(p, "expected a statement name after {%%%s", "");
	if (strcmp(t->s, "if") == 0)
		return parse_if(p);
	if (strcmp(t->s, "for") == 0)
		return parse_for(p);
	if (strcmp(t->s, "set") == 0)
		return parse_set(p);
	if (strcmp(t->s, "macro") == 0)
		return parse_macro(p);
	if (strcmp(t->s, "call") == 0)
		return parse_callblock(p);
	if (strcmp(t->s, "break") == 0 || strcmp(t->s, "continue") == 0)
	{
		nd = node_new(p, strcmp(t->s, "break") == 0 ? N_BREAK : N_CONTINUE);
		if (nd == NULL)
			return NULL;
		next(p);
		return expect_block_end(p) ? nd : NULL;
	}
	if (strcmp(t->s, "filter") == 0)
	{
		static const char *const end[] = {"endfilter", NULL};
		const char *which;

		nd = node_new(p, N_FILTERBLOCK);
		if (nd == NULL)
			return NULL;
		next(p);
		if ((nd->b = parse_block_filters(p, false)) == NULL || !expect_block_end(p) ||
			!parse_body(p, end, &nd->body, &nd->n_body, &which))
			return NULL;
		next(p);
		return expect_block_end(p) ? nd : NULL;
	}
	if (strcmp(t->s, "generation") == 0)
	{
		static const char *const end[] = {"endgeneration", NULL};
		const char *which;

		nd = node_new(p, N_SCOPE);
		if (nd == NULL)
			return NULL;
		next(p);
		if (!expect_block_end(p) || !parse_body(p, end, &nd->body, &nd->n_body, &which))
			return NULL;
		next(p);
		return expect_block_end(p) ? nd : NULL;
	}
	return fail(p, "the statement {%% %s %%} is not supported", t->s);
}

/*
 * Statements up to a block tag named in ends (NULL-terminated; none: to
 * the end): *which is that name, the current token.
 */
static bool
parse_body(Parser *p, const char *const *ends, JNode ***body, int *n, const char **which)
{
	NodeVec		v = {0};

	*which = NULL;
	while (!p->failed)
	{
		const JToken *t = cur(p);
		JNode	   *nd = NULL;

		if (t->kind == T_EOF)
		{
			if (ends != NULL && ends[0] != NULL)
			{
				char		what[64];

				snprintf(what, sizeof(what), "{%% %s %%}", ends[0][0] == 'e' && strncmp(ends[0], "end", 3) == 0 ? ends[0] : "end");
				for (int k = 0; ends[k] != NULL; k++)
					if (strncmp(ends[k], "end", 3) == 0)
						snprintf(what, sizeof(what), "{%% %s %%}", ends[k]);
				fail(p, "the template ended before %s", what);
				return false;
			}
			break;
		}
		if (t->kind == T_TEXT)
		{
			nd = node_new(p, N_TEXT);
			if (nd == NULL || !jv_str_copy(p->a, t->s, t->len, false, &nd->c))
			{
				oom(p);
				return false;
			}
			next(p);
		}
		else if (t->kind == T_VAR_BEGIN)
		{
			nd = node_new(p, N_PRINT);
			if (nd == NULL)
				return false;
			next(p);
			if ((nd->a = parse_tuple(p, true, false, NULL)) == NULL)
				return false;
			if (cur(p)->kind != T_VAR_END)
			{
				fail(p, "expected the end of a print (}})%s", "");
				return false;
			}
			next(p);
		}
		else if (t->kind == T_BLOCK_BEGIN)
		{
			next(p);
			if (ends != NULL && cur(p)->kind == T_NAME)
				for (int k = 0; ends[k] != NULL; k++)
					if (strcmp(cur(p)->s, ends[k]) == 0)
					{
						*which = ends[k];
						goto done;
					}
			if (cur(p)->kind == T_NAME && strncmp(cur(p)->s, "end", 3) == 0)
			{
				fail(p, "unexpected {%% %s %%}", cur(p)->s);
				return false;
			}
			if (cur(p)->kind == T_NAME && (strcmp(cur(p)->s, "elif") == 0 || strcmp(cur(p)->s, "else") == 0))
			{
				fail(p, "unexpected {%% %s %%}", cur(p)->s);
				return false;
			}
			if ((nd = parse_statement(p)) == NULL)
				return false;
		}
		else
		{
			fail(p, "unexpected token%s", "");
			return false;
		}
		if (!vec_push(p, &v, nd))
			return false;
	}
done:
	if (p->failed)
		return false;
	*body = v.v;
	*n = v.n;
	return true;
}

/*
 * Refuse filters and tests that are not implemented, where Jinja2 checks
 * them when it compiles: everywhere but inside an if (its test and
 * branches) or a conditional expression, where Jinja2 (3.x) waits until one
 * runs.  A for loop's body, a macro and a block start a new frame, which
 * is checked again.
 */
static bool
check_names(const JNode *n, bool soft, LlmError *err)
{
	bool		inner;

	if (n == NULL)
		return true;
	if ((n->kind == N_FILTER || n->kind == N_TEST) && !n->builtin && !soft)
	{
		char		msg[200];
		LlmStatus	st = jinja_unknown_status(n->name, n->kind == N_FILTER, msg, sizeof(msg));

		llm_error_set(err, st, "chat template line %d: %s", n->line, msg);
		return false;
	}
	inner = n->kind == N_IF || n->kind == N_COND ? true : soft;
	if (!check_names(n->a, inner, err) || !check_names(n->b, inner, err) || !check_names(n->c3, inner, err))
		return false;
	for (int i = 0; i < n->n_args; i++)
		if (!check_names(n->args[i], inner, err))
			return false;
	for (int i = 0; i < n->n_kw; i++)
		if (!check_names(n->kwargs[i], inner, err))
			return false;
	/* bodies of loops, macros and blocks run in new frames */
	if (n->kind == N_FOR || n->kind == N_MACRO || n->kind == N_CALLBLOCK || n->kind == N_SETBLOCK ||
		n->kind == N_FILTERBLOCK || n->kind == N_SCOPE)
		inner = false;
	for (int i = 0; i < n->n_body; i++)
		if (!check_names(n->body[i], inner, err))
			return false;
	for (int i = 0; i < n->n_alt; i++)
		if (!check_names(n->alt[i], n->kind == N_MACRO || n->kind == N_CALLBLOCK ? false : inner, err))
			return false;
	return true;
}

/* Parse tokens into t's statements (see jinja_int.h). */
LlmStatus
jinja_parse_tokens(LlmJinja *t, const JToken *toks, int n_toks, LlmError *err)
{
	Parser		p = {0};
	const char *which;

	p.a = &t->arena;
	p.tk = toks;
	p.n = n_toks;
	p.err = err;
	if (!parse_body(&p, NULL, &t->body, &t->n_body, &which))
		return err->status != LLM_OK ? err->status : LLM_ERR_UNSUPPORTED;
	for (int i = 0; i < t->n_body; i++)
		if (!check_names(t->body[i], false, err))
			return err->status;
	return LLM_OK;
}
