/*
 * json_schema.c
 *		JSON Schema to byte grammar (json_schema.h).
 *
 * Each subschema becomes one rule, built bottom-up (the rules of its parts
 * first).  An object with properties p0..pn-1, some of them optional, is
 * an any-order group (grammar.h) of their members:
 *
 *   member_i ::= "p_i" ws ":" ws value_i
 *   object   ::= "{" ws group(member_0 .. member_n-1; sep "," ws) ws "}"
 *
 * so the members come in any order (JSON objects are unordered, and a
 * model writes them in the order it finds natural), each at most once,
 * with a comma only between two, and "}" only after every required one.
 * The recognizer keeps which are written; the grammar stays linear in n.
 * An integer with minimum or maximum (or the exclusive ones) is a range
 * of digit strings (int_range.h), its bounds read exactly from their text.
 * The values of an enum are one trie of their texts
 * (llm_grammar_strings_rule), not an alternative each, so an enum of
 * thousands keeps the recognizer at a stack per byte that may come next.
 * Bounded repetition (maxItems, maxLength) unrolls into a chain of
 * optional rules, unbounded repetition into right recursion.
 */
#include "json_schema.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "int_range.h"
#include "json.h"

#define PATH_LEN 512

/* The compiler's state: the builder, the first error, shared rules made on first use. */
typedef struct SchemaCompiler
{
	LlmGrammarBuilder *b;
	LlmError   *err;
	LlmStatus	st;
	char		path[PATH_LEN]; /* JSON pointer of the subschema at hand, after "#" */
	int			ws;
	int			member_sep;
	int			str_char;
	int			string;
	int			number;
	int			integer;
	int			any[LLM_SCHEMA_ANY_DEPTH + 1];
} SchemaCompiler;

/* The keywords that constrain a value here, and the annotations, which mean nothing to decoding. */
static const char *const schema_assertions[] = {
	"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
	"minLength", "maxLength", "enum", "const", "anyOf", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", NULL
};
static const char *const schema_annotations[] = {
	"title", "description", "default", "examples", "$schema", "$id", "$comment", NULL
};

/* Whether list (NULL-terminated) holds name. */
static bool
keyword_in(const char *const *list, const char *name)
{
	for (int k = 0; list[k] != NULL; k++)
		if (strcmp(list[k], name) == 0)
			return true;
	return false;
}

static int	compile_schema(SchemaCompiler *sc, const LlmJson *s, int depth);

/* Record the first error, at the subschema at hand; returns -1 (no rule). */
static int
schema_fail(SchemaCompiler *sc, LlmStatus st, const char *fmt, const char *arg)
{
	char		what[256];

	if (sc->st != LLM_OK)
		return -1;
	snprintf(what, sizeof(what), fmt, arg);
	sc->st = llm_error_set(sc->err, st, "%s at #%s", what, sc->path);
	return -1;
}

/* Append "/key" to the path (escaped as JSON pointers are); returns the old length. */
static size_t
path_push(SchemaCompiler *sc, const char *key)
{
	size_t		old = strlen(sc->path);
	size_t		n = old;

	if (n + 1 < PATH_LEN)
		sc->path[n++] = '/';
	for (const char *p = key; *p != '\0' && n + 3 < PATH_LEN; p++)
	{
		if (*p == '~' || *p == '/')
		{
			sc->path[n++] = '~';
			sc->path[n++] = *p == '~' ? '0' : '1';
		}
		else
			sc->path[n++] = *p;
	}
	sc->path[n] = '\0';
	return old;
}

/* A rule for alt-free use: r ::= the concatenation of rules parts[0..n). */
static int
seq_rule(SchemaCompiler *sc, const int *parts, int n)
{
	int			r = llm_grammar_rule(sc->b);
	int			a = llm_grammar_alt(sc->b, r);

	for (int i = 0; i < n; i++)
		llm_grammar_add_rule(sc->b, a, parts[i]);
	return r;
}

/* Optional whitespace: "" | " " | "\n" and up to LLM_SCHEMA_MAX_INDENT spaces. */
static int
ws_rule(SchemaCompiler *sc)
{
	int			indent;

	if (sc->ws >= 0)
		return sc->ws;
	indent = llm_grammar_rule(sc->b);
	llm_grammar_alt(sc->b, indent);
	for (int i = 0; i < LLM_SCHEMA_MAX_INDENT; i++)
	{
		int			r = llm_grammar_rule(sc->b);
		int			a;

		llm_grammar_alt(sc->b, r);
		a = llm_grammar_alt(sc->b, r);
		llm_grammar_add_literal(sc->b, a, " ", 1);
		llm_grammar_add_rule(sc->b, a, indent);
		indent = r;
	}
	sc->ws = llm_grammar_rule(sc->b);
	llm_grammar_alt(sc->b, sc->ws);
	llm_grammar_add_literal(sc->b, llm_grammar_alt(sc->b, sc->ws), " ", 1);
	{
		int			a = llm_grammar_alt(sc->b, sc->ws);

		llm_grammar_add_literal(sc->b, a, "\n", 1);
		llm_grammar_add_rule(sc->b, a, indent);
	}
	return sc->ws;
}

/* The separator of an object's members: "," ws. */
static int
member_sep_rule(SchemaCompiler *sc)
{
	if (sc->member_sep < 0)
	{
		int			a;

		sc->member_sep = llm_grammar_rule(sc->b);
		a = llm_grammar_alt(sc->b, sc->member_sep);
		llm_grammar_add_literal(sc->b, a, ",", 1);
		llm_grammar_add_rule(sc->b, a, ws_rule(sc));
	}
	return sc->member_sep;
}

/* Append n bytes, each from the set lo..hi, to alternative a. */
static void
add_range(SchemaCompiler *sc, int a, uint8_t lo, uint8_t hi, int n)
{
	LlmByteSet	s = llm_byteset_range(lo, hi);

	for (int i = 0; i < n; i++)
		llm_grammar_add_set(sc->b, a, &s);
}

/* One character of a JSON string: UTF-8 other than '"', '\\' and controls, or a short escape. */
static int
str_char_rule(SchemaCompiler *sc)
{
	int			r,
				a;
	LlmByteSet	s;

	if (sc->str_char >= 0)
		return sc->str_char;
	r = sc->str_char = llm_grammar_rule(sc->b);
	s = llm_byteset_range(0x20, 0x7F);
	s.bits[0] &= ~((uint64_t) 1 << '"');
	s.bits[1] &= ~((uint64_t) 1 << ('\\' - 64));
	llm_grammar_add_set(sc->b, llm_grammar_alt(sc->b, r), &s);
	/* well-formed UTF-8 only (RFC 3629 table 3-7): no overlongs, surrogates or code points past U+10FFFF */
	a = llm_grammar_alt(sc->b, r);
	add_range(sc, a, 0xC2, 0xDF, 1);
	add_range(sc, a, 0x80, 0xBF, 1);
	a = llm_grammar_alt(sc->b, r);
	add_range(sc, a, 0xE0, 0xE0, 1);
	add_range(sc, a, 0xA0, 0xBF, 1);
	add_range(sc, a, 0x80, 0xBF, 1);
	a = llm_grammar_alt(sc->b, r);
	s = llm_byteset_range(0xE1, 0xEC);
	llm_byteset_add(&s, 0xEE, 0xEF);
	llm_grammar_add_set(sc->b, a, &s);
	add_range(sc, a, 0x80, 0xBF, 2);
	a = llm_grammar_alt(sc->b, r);
	add_range(sc, a, 0xED, 0xED, 1);
	add_range(sc, a, 0x80, 0x9F, 1);
	add_range(sc, a, 0x80, 0xBF, 1);
	a = llm_grammar_alt(sc->b, r);
	add_range(sc, a, 0xF0, 0xF0, 1);
	add_range(sc, a, 0x90, 0xBF, 1);
	add_range(sc, a, 0x80, 0xBF, 2);
	a = llm_grammar_alt(sc->b, r);
	add_range(sc, a, 0xF1, 0xF3, 1);
	add_range(sc, a, 0x80, 0xBF, 3);
	a = llm_grammar_alt(sc->b, r);
	add_range(sc, a, 0xF4, 0xF4, 1);
	add_range(sc, a, 0x80, 0x8F, 1);
	add_range(sc, a, 0x80, 0xBF, 2);
	/* the escapes that stand for themselves or a control character */
	a = llm_grammar_alt(sc->b, r);
	llm_grammar_add_literal(sc->b, a, "\\", 1);
	s = llm_byteset_range('"', '"');
	llm_byteset_add(&s, '\\', '\\');
	llm_byteset_add(&s, '/', '/');
	llm_byteset_add(&s, 'b', 'b');
	llm_byteset_add(&s, 'f', 'f');
	llm_byteset_add(&s, 'n', 'n');
	llm_byteset_add(&s, 'r', 'r');
	llm_byteset_add(&s, 't', 't');
	llm_grammar_add_set(sc->b, a, &s);
	return r;
}

/*
 * unit repeated lo to hi times (hi < 0: no upper bound): lo copies, then a
 * chain of hi - lo optional ones, or a right-recursive tail.
 */
static int
repeat_rule(SchemaCompiler *sc, int unit, int lo, int hi)
{
	int			tail = llm_grammar_rule(sc->b);
	int			r,
				a;

	llm_grammar_alt(sc->b, tail);	/* "" */
	if (hi < 0)
	{
		a = llm_grammar_alt(sc->b, tail);
		llm_grammar_add_rule(sc->b, a, unit);
		llm_grammar_add_rule(sc->b, a, tail);
	}
	else
		for (int i = lo; i < hi; i++)
		{
			int			t = llm_grammar_rule(sc->b);

			llm_grammar_alt(sc->b, t);
			a = llm_grammar_alt(sc->b, t);
			llm_grammar_add_rule(sc->b, a, unit);
			llm_grammar_add_rule(sc->b, a, tail);
			tail = t;
		}
	r = llm_grammar_rule(sc->b);
	a = llm_grammar_alt(sc->b, r);
	for (int i = 0; i < lo; i++)
		llm_grammar_add_rule(sc->b, a, unit);
	llm_grammar_add_rule(sc->b, a, tail);
	return r;
}

/* A string of lo to hi characters (hi < 0: any number). */
static int
string_rule(SchemaCompiler *sc, int lo, int hi)
{
	int			r = llm_grammar_rule(sc->b);
	int			chars = repeat_rule(sc, str_char_rule(sc), lo, hi);
	int			a = llm_grammar_alt(sc->b, r);

	llm_grammar_add_literal(sc->b, a, "\"", 1);
	llm_grammar_add_rule(sc->b, a, chars);
	llm_grammar_add_literal(sc->b, a, "\"", 1);
	return r;
}

/* A string of any length (one rule for the whole schema). */
static int
any_string_rule(SchemaCompiler *sc)
{
	if (sc->string < 0)
		sc->string = string_rule(sc, 0, -1);
	return sc->string;
}

/* An integer: -?(0|[1-9][0-9]{0,15}). */
static int
integer_rule(SchemaCompiler *sc)
{
	int			r,
				digits,
				a;
	LlmByteSet	d09 = llm_byteset_range('0', '9');

	if (sc->integer >= 0)
		return sc->integer;
	digits = llm_grammar_rule(sc->b);
	llm_grammar_add_set(sc->b, llm_grammar_alt(sc->b, digits), &d09);
	digits = repeat_rule(sc, digits, 0, 15);
	r = llm_grammar_rule(sc->b);
	for (int neg = 0; neg < 2; neg++)
	{
		a = llm_grammar_alt(sc->b, r);
		llm_grammar_add_literal(sc->b, a, "-", neg);
		llm_grammar_add_literal(sc->b, a, "0", 1);
		a = llm_grammar_alt(sc->b, r);
		llm_grammar_add_literal(sc->b, a, "-", neg);
		add_range(sc, a, '1', '9', 1);
		llm_grammar_add_rule(sc->b, a, digits);
	}
	return sc->integer = r;
}

/* A number: an integer, then .[0-9]{1,16} and [eE][+-]?[0-9]{1,3}, each optional. */
static int
number_rule(SchemaCompiler *sc)
{
	int			digit,
				frac,
				exp,
				sign,
				a;
	LlmByteSet	d09 = llm_byteset_range('0', '9');

	if (sc->number >= 0)
		return sc->number;
	digit = llm_grammar_rule(sc->b);
	llm_grammar_add_set(sc->b, llm_grammar_alt(sc->b, digit), &d09);

	frac = llm_grammar_rule(sc->b);
	llm_grammar_alt(sc->b, frac);
	a = llm_grammar_alt(sc->b, frac);
	llm_grammar_add_literal(sc->b, a, ".", 1);
	llm_grammar_add_rule(sc->b, a, repeat_rule(sc, digit, 1, 16));

	sign = llm_grammar_rule(sc->b);
	llm_grammar_alt(sc->b, sign);
	llm_grammar_add_literal(sc->b, llm_grammar_alt(sc->b, sign), "+", 1);
	llm_grammar_add_literal(sc->b, llm_grammar_alt(sc->b, sign), "-", 1);
	exp = llm_grammar_rule(sc->b);
	llm_grammar_alt(sc->b, exp);
	a = llm_grammar_alt(sc->b, exp);
	{
		LlmByteSet	e = llm_byteset_range('e', 'e');

		llm_byteset_add(&e, 'E', 'E');
		llm_grammar_add_set(sc->b, a, &e);
	}
	llm_grammar_add_rule(sc->b, a, sign);
	llm_grammar_add_rule(sc->b, a, repeat_rule(sc, digit, 1, 3));

	{
		int			parts[3] = {integer_rule(sc), frac, exp};

		sc->number = seq_rule(sc, parts, 3);
	}
	return sc->number;
}

/*
 * open ws items ws close, the items lo to hi (hi < 0: unbounded) of rule
 * item separated by "," ws, or open ws close when lo is 0.
 */
static int
list_rule(SchemaCompiler *sc, char open, char close, int item, int lo, int hi)
{
	int			r = llm_grammar_rule(sc->b);
	int			ws = ws_rule(sc);
	int			a;

	if (lo == 0)
	{
		a = llm_grammar_alt(sc->b, r);
		llm_grammar_add_literal(sc->b, a, &open, 1);
		llm_grammar_add_rule(sc->b, a, ws);
		llm_grammar_add_literal(sc->b, a, &close, 1);
	}
	if (hi != 0)
	{
		int			next = llm_grammar_rule(sc->b);
		int			na = llm_grammar_alt(sc->b, next);

		llm_grammar_add_literal(sc->b, na, ",", 1);
		llm_grammar_add_rule(sc->b, na, ws);
		llm_grammar_add_rule(sc->b, na, item);
		a = llm_grammar_alt(sc->b, r);
		llm_grammar_add_literal(sc->b, a, &open, 1);
		llm_grammar_add_rule(sc->b, a, ws);
		llm_grammar_add_rule(sc->b, a, item);
		llm_grammar_add_rule(sc->b, a, repeat_rule(sc, next, lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1));
		llm_grammar_add_rule(sc->b, a, ws);
		llm_grammar_add_literal(sc->b, a, &close, 1);
	}
	return r;
}

/* A member: key ws ":" ws value, with key a rule. */
static int
member_rule(SchemaCompiler *sc, int key, int value)
{
	int			r = llm_grammar_rule(sc->b);
	int			a = llm_grammar_alt(sc->b, r);

	llm_grammar_add_rule(sc->b, a, key);
	llm_grammar_add_rule(sc->b, a, ws_rule(sc));
	llm_grammar_add_literal(sc->b, a, ":", 1);
	llm_grammar_add_rule(sc->b, a, ws_rule(sc));
	llm_grammar_add_rule(sc->b, a, value);
	return r;
}

/* Any JSON value nested at most depth deep. */
static int
any_rule(SchemaCompiler *sc, int depth)
{
	int			r;

	if (sc->any[depth] >= 0)
		return sc->any[depth];
	r = llm_grammar_rule(sc->b);
	llm_grammar_add_rule(sc->b, llm_grammar_alt(sc->b, r), any_string_rule(sc));
	llm_grammar_add_rule(sc->b, llm_grammar_alt(sc->b, r), number_rule(sc));
	llm_grammar_add_literal(sc->b, llm_grammar_alt(sc->b, r), "true", 4);
	llm_grammar_add_literal(sc->b, llm_grammar_alt(sc->b, r), "false", 5);
	llm_grammar_add_literal(sc->b, llm_grammar_alt(sc->b, r), "null", 4);
	if (depth > 0)
	{
		int			inner = any_rule(sc, depth - 1);
		int			member = member_rule(sc, any_string_rule(sc), inner);

		llm_grammar_add_rule(sc->b, llm_grammar_alt(sc->b, r), list_rule(sc, '{', '}', member, 0, -1));
		llm_grammar_add_rule(sc->b, llm_grammar_alt(sc->b, r), list_rule(sc, '[', ']', inner, 0, -1));
	}
	return sc->any[depth] = r;
}

/* A rule writing JSON value v exactly (for enum and const). */
static int
literal_value_rule(SchemaCompiler *sc, const LlmJson *v)
{
	char	   *text;
	size_t		len;
	int			r;

	if (v->type == LLM_JSON_STRING && memchr(v->str, '\0', v->len) != NULL)
		return schema_fail(sc, LLM_ERR_INVALID, "%s", "a string with a NUL character cannot be written");
	if ((sc->st = llm_json_write(v, &text, &len, sc->err)) != LLM_OK)
		return -1;
	r = llm_grammar_literal_rule(sc->b, text, len);
	free(text);
	return r;
}

/* The integer value of keyword name in s (within 0..LLM_SCHEMA_MAX_BOUND), or dflt when absent; -2 on error. */
static int
bound_keyword(SchemaCompiler *sc, const LlmJson *s, const char *name, int dflt)
{
	const LlmJson *v = llm_json_member(s, name);

	if (v == NULL)
		return dflt;
	if (v->type != LLM_JSON_NUMBER || v->number != floor(v->number) || v->number < 0)
	{
		schema_fail(sc, LLM_ERR_INVALID, "\"%s\" must be a non-negative integer", name);
		return -2;
	}
	if (v->number > LLM_SCHEMA_MAX_BOUND)
	{
		char		what[64];

		snprintf(what, sizeof(what), "%s above %d", name, LLM_SCHEMA_MAX_BOUND);
		schema_fail(sc, LLM_ERR_LIMIT, "%s is not supported", what);
		return -2;
	}
	return (int) v->number;
}

/* The lower and upper bounds named lo_name and hi_name in s; false on error. */
static bool
bounds(SchemaCompiler *sc, const LlmJson *s, const char *lo_name, const char *hi_name, int *lo, int *hi)
{
	*lo = bound_keyword(sc, s, lo_name, 0);
	*hi = bound_keyword(sc, s, hi_name, -1);
	if (*lo == -2 || *hi == -2)
		return false;
	if (*hi >= 0 && *lo > *hi)
	{
		schema_fail(sc, LLM_ERR_INVALID, "%s is greater than the maximum", lo_name);
		return false;
	}
	return true;
}

/*
 * Tighten one side of range by keyword name of s, if present: the least
 * integer at or above its value (up) or the greatest at or below it,
 * moved one further when exclusive; *kw names the keyword that bounds the
 * side.  False on error.
 */
static bool
range_keyword(SchemaCompiler *sc, const LlmJson *s, const char *name, bool up, bool exclusive, bool *has,
			  int64_t *bound, const char **kw)
{
	const LlmJson *v = llm_json_member(s, name);
	int64_t		x;

	if (v == NULL)
		return true;
	if (v->type != LLM_JSON_NUMBER)
	{
		schema_fail(sc, LLM_ERR_INVALID, "\"%s\" must be a number", name);
		return false;
	}
	/* exclusive: above x means at or above floor(x) + 1, below it at or below ceil(x) - 1 */
	if (!llm_json_number_int64(v, exclusive ? !up : up, &x) ||
		(exclusive && (up ? x == INT64_MAX : x == INT64_MIN)))
	{
		schema_fail(sc, LLM_ERR_INVALID, "\"%s\" is outside the 64-bit integer range "
					"(-9223372036854775808 to 9223372036854775807)", name);
		return false;
	}
	if (exclusive)
		x += up ? 1 : -1;
	if (!*has || (up ? x > *bound : x < *bound))
	{
		*has = true;
		*bound = x;
		*kw = name;
	}
	return true;
}

/* The largest magnitude of a plain integer (integer_rule's 16 digits). */
#define LLM_SCHEMA_OPEN_INT INT64_C(9999999999999999)

/* An integer within s's minimum, maximum, exclusiveMinimum and exclusiveMaximum, if any. */
static int
bounded_integer_rule(SchemaCompiler *sc, const LlmJson *s)
{
	bool		has_lo = false,
				has_hi = false;
	int64_t		lo = 0,
				hi = 0;
	const char *lo_kw = NULL,
			   *hi_kw = NULL;
	char		what[96];

	if (!range_keyword(sc, s, "minimum", true, false, &has_lo, &lo, &lo_kw) ||
		!range_keyword(sc, s, "exclusiveMinimum", true, true, &has_lo, &lo, &lo_kw) ||
		!range_keyword(sc, s, "maximum", false, false, &has_hi, &hi, &hi_kw) ||
		!range_keyword(sc, s, "exclusiveMaximum", false, true, &has_hi, &hi, &hi_kw))
		return -1;
	if (!has_lo && !has_hi)
		return integer_rule(sc);
	if (has_lo && has_hi && lo > hi)
	{
		snprintf(what, sizeof(what), "\"%s\" and \"%s\"", lo_kw, hi_kw);
		return schema_fail(sc, LLM_ERR_INVALID, "no integer satisfies both %s", what);
	}
	/* an open side ends where a plain integer does (16 digits), or at int64's end past that */
	if (!has_hi)
		hi = lo > LLM_SCHEMA_OPEN_INT ? INT64_MAX : LLM_SCHEMA_OPEN_INT;
	if (!has_lo)
		lo = hi < -LLM_SCHEMA_OPEN_INT ? INT64_MIN : -LLM_SCHEMA_OPEN_INT;
	return llm_int_range_rule(sc->b, lo, hi);
}

/* Whether s has any of the keywords that bound a number. */
static bool
has_range_keyword(const LlmJson *s)
{
	return llm_json_member(s, "minimum") || llm_json_member(s, "maximum") ||
		llm_json_member(s, "exclusiveMinimum") || llm_json_member(s, "exclusiveMaximum");
}

/* An object of the properties listed in s, in any order (see the top). */
static int
object_rule(SchemaCompiler *sc, const LlmJson *s, int depth)
{
	const LlmJson *props = llm_json_member(s, "properties");
	const LlmJson *req = llm_json_member(s, "required");
	const LlmJson *addl = llm_json_member(s, "additionalProperties");
	int			n,
				r,
				a;
	int		   *members;
	bool	   *required;

	if (props != NULL && props->type != LLM_JSON_OBJECT)
		return schema_fail(sc, LLM_ERR_INVALID, "%s", "\"properties\" must be an object");
	if (req != NULL && req->type != LLM_JSON_ARRAY)
		return schema_fail(sc, LLM_ERR_INVALID, "%s", "\"required\" must be an array");
	if (addl != NULL && !(addl->type == LLM_JSON_BOOL && !addl->boolean))
		return schema_fail(sc, LLM_ERR_UNSUPPORTED, "%s",
						   "\"additionalProperties\" other than false is not supported");
	if (props == NULL && addl == NULL)
	{
		if (req != NULL && req->n > 0)
			return schema_fail(sc, LLM_ERR_INVALID, "%s", "\"required\" names properties that \"properties\" does not list");
		return list_rule(sc, '{', '}', member_rule(sc, any_string_rule(sc), any_rule(sc, LLM_SCHEMA_ANY_DEPTH - 1)), 0, -1);
	}
	n = props != NULL ? props->n : 0;
	if (n > LLM_SCHEMA_MAX_PROPERTIES)
	{
		char		what[64];

		snprintf(what, sizeof(what), "more than %d properties", LLM_SCHEMA_MAX_PROPERTIES);
		return schema_fail(sc, LLM_ERR_LIMIT, "%s in an object are not supported", what);
	}
	members = calloc((size_t) n + 1, sizeof(int));
	required = calloc((size_t) n + 1, sizeof(bool));
	if (members == NULL || required == NULL)
	{
		free(members);
		free(required);
		sc->st = llm_error_set(sc->err, LLM_ERR_NOMEM, "out of memory compiling a JSON Schema");
		return -1;
	}
	for (int i = 0; req != NULL && i < req->n && sc->st == LLM_OK; i++)
	{
		int			found = -1;

		if (req->items[i].type != LLM_JSON_STRING)
		{
			schema_fail(sc, LLM_ERR_INVALID, "%s", "\"required\" must list strings");
			break;
		}
		for (int k = 0; k < n; k++)
			if (props->items[k].key_len == req->items[i].len &&
				memcmp(props->items[k].key, req->items[i].str, req->items[i].len) == 0)
				found = k;
		if (found < 0)
			schema_fail(sc, LLM_ERR_INVALID, "required property \"%s\" is not in \"properties\"", req->items[i].str);
		else
			required[found] = true;
	}
	for (int i = 0; i < n && sc->st == LLM_OK; i++)
	{
		size_t		old = path_push(sc, "properties");
		size_t		old2 = path_push(sc, props->items[i].key);
		int			value = compile_schema(sc, &props->items[i], depth + 1);
		LlmJson		key = {.type = LLM_JSON_STRING, .str = props->items[i].key, .len = props->items[i].key_len};

		sc->path[old2] = '\0';
		if (value >= 0)
			members[i] = member_rule(sc, literal_value_rule(sc, &key), value);
		sc->path[old] = '\0';
	}
	if (sc->st != LLM_OK)
	{
		free(members);
		free(required);
		return -1;
	}
	r = llm_grammar_rule(sc->b);
	a = llm_grammar_alt(sc->b, r);
	llm_grammar_add_literal(sc->b, a, "{", 1);
	llm_grammar_add_rule(sc->b, a, ws_rule(sc));
	llm_grammar_add_any_order(sc->b, a, members, required, n, member_sep_rule(sc));
	llm_grammar_add_rule(sc->b, a, ws_rule(sc));
	llm_grammar_add_literal(sc->b, a, "}", 1);
	free(members);
	free(required);
	return r;
}

/* An array of s's items, minItems to maxItems of them. */
static int
array_rule(SchemaCompiler *sc, const LlmJson *s, int depth)
{
	const LlmJson *items = llm_json_member(s, "items");
	int			lo,
				hi,
				item;

	if (!bounds(sc, s, "minItems", "maxItems", &lo, &hi))
		return -1;
	if (items == NULL)
		item = any_rule(sc, LLM_SCHEMA_ANY_DEPTH - 1);
	else
	{
		size_t		old = path_push(sc, "items");

		if (items->type == LLM_JSON_ARRAY)
			item = schema_fail(sc, LLM_ERR_UNSUPPORTED, "%s", "\"items\" as an array (tuple validation) is not supported");
		else
			item = compile_schema(sc, items, depth + 1);
		sc->path[old] = '\0';
		if (item < 0)
			return -1;
	}
	return list_rule(sc, '[', ']', item, lo, hi);
}

/* The rule for s taken as the one type named type. */
static int
typed_rule(SchemaCompiler *sc, const LlmJson *s, const char *type, int depth)
{
	int			lo,
				hi;

	if (strcmp(type, "object") == 0)
		return object_rule(sc, s, depth);
	if (strcmp(type, "array") == 0)
		return array_rule(sc, s, depth);
	if (strcmp(type, "string") == 0)
	{
		if (!bounds(sc, s, "minLength", "maxLength", &lo, &hi))
			return -1;
		return lo == 0 && hi < 0 ? any_string_rule(sc) : string_rule(sc, lo, hi);
	}
	if (strcmp(type, "number") == 0)
	{
		if (has_range_keyword(s))
			return schema_fail(sc, LLM_ERR_UNSUPPORTED, "%s",
							   "\"minimum\" and \"maximum\" (and the exclusive ones) are supported only for "
							   "\"type\": \"integer\", not \"number\"");
		return number_rule(sc);
	}
	if (strcmp(type, "integer") == 0)
		return bounded_integer_rule(sc, s);
	if (strcmp(type, "boolean") == 0)
	{
		int			r = llm_grammar_rule(sc->b);

		llm_grammar_add_literal(sc->b, llm_grammar_alt(sc->b, r), "true", 4);
		llm_grammar_add_literal(sc->b, llm_grammar_alt(sc->b, r), "false", 5);
		return r;
	}
	if (strcmp(type, "null") == 0)
		return llm_grammar_literal_rule(sc->b, "null", 4);
	return schema_fail(sc, LLM_ERR_INVALID, "unknown type \"%s\"", type);
}

/* The type s implies by its keywords when it names none, or NULL for any value. */
static const char *
implied_type(const LlmJson *s)
{
	if (llm_json_member(s, "properties") || llm_json_member(s, "required") ||
		llm_json_member(s, "additionalProperties"))
		return "object";
	if (llm_json_member(s, "items") || llm_json_member(s, "minItems") || llm_json_member(s, "maxItems"))
		return "array";
	if (llm_json_member(s, "minLength") || llm_json_member(s, "maxLength"))
		return "string";
	return NULL;
}

/* Whether JSON value v is of the JSON Schema type named name (an integer: a number with no fraction). */
static bool
value_has_type(const LlmJson *v, const char *name)
{
	switch (v->type)
	{
		case LLM_JSON_NULL:
			return strcmp(name, "null") == 0;
		case LLM_JSON_BOOL:
			return strcmp(name, "boolean") == 0;
		case LLM_JSON_NUMBER:
			return strcmp(name, "number") == 0 ||
				(strcmp(name, "integer") == 0 && isfinite(v->number) && v->number == floor(v->number));
		case LLM_JSON_STRING:
			return strcmp(name, "string") == 0;
		case LLM_JSON_ARRAY:
			return strcmp(name, "array") == 0;
		case LLM_JSON_OBJECT:
			return strcmp(name, "object") == 0;
	}
	return false;
}

/*
 * Whether v is of schema type "type" (a name or a list of names; NULL: any
 * type), so that a literal of enum or const beside a type validates; a
 * type that is not such a name or list fails sc.
 */
static bool
value_in_type(SchemaCompiler *sc, const LlmJson *v, const LlmJson *type)
{
	if (type == NULL)
		return true;
	if (type->type == LLM_JSON_STRING)
		return value_has_type(v, type->str);
	if (type->type != LLM_JSON_ARRAY || type->n == 0)
	{
		schema_fail(sc, LLM_ERR_INVALID, "%s", "\"type\" must be a type name or a non-empty array of them");
		return false;
	}
	for (int i = 0; i < type->n; i++)
	{
		if (type->items[i].type != LLM_JSON_STRING)
		{
			schema_fail(sc, LLM_ERR_INVALID, "%s", "\"type\" must list type names");
			return false;
		}
		if (value_has_type(v, type->items[i].str))
			return true;
	}
	return false;
}

/*
 * A rule with one alternative per subschema of anyOf's list, each compiled
 * by compile_schema; at most LLM_GRAMMAR_MAX_STACKS of them, the most the
 * recognizer follows at once.
 */
static int
any_of_rule(SchemaCompiler *sc, const LlmJson *list, int depth)
{
	int			r;

	if (list->type != LLM_JSON_ARRAY || list->n == 0)
		return schema_fail(sc, LLM_ERR_INVALID, "\"%s\" must be a non-empty array", "anyOf");
	/* each subschema's value starts a stack of its own wherever the value may begin */
	if (list->n > LLM_GRAMMAR_MAX_STACKS)
	{
		char		what[64];

		snprintf(what, sizeof(what), "more than %d subschemas", LLM_GRAMMAR_MAX_STACKS);
		return schema_fail(sc, LLM_ERR_LIMIT, "\"anyOf\" with %s is not supported (for literal values, use \"enum\")",
						   what);
	}
	r = llm_grammar_rule(sc->b);
	for (int i = 0; i < list->n && sc->st == LLM_OK; i++)
	{
		char		index[16];
		size_t		old = path_push(sc, "anyOf");
		int			alt;

		snprintf(index, sizeof(index), "%d", i);
		path_push(sc, index);
		alt = compile_schema(sc, &list->items[i], depth + 1);
		sc->path[old] = '\0';
		if (alt >= 0)
			llm_grammar_add_rule(sc->b, llm_grammar_alt(sc->b, r), alt);
	}
	return sc->st == LLM_OK ? r : -1;
}

/*
 * A rule writing exactly one value of enum's list, as text
 * (llm_json_write), all of them in one trie (llm_grammar_strings_rule), so
 * an enum of thousands of values is followed with a stack per next byte
 * rather than one per value; a value not of type (enum beside "type") is
 * left out, and a list that leaves none fails.
 */
static int
enum_rule(SchemaCompiler *sc, const LlmJson *list, const LlmJson *type)
{
	char	  **texts;
	size_t	   *lens;
	int			n = 0,
				r = -1;

	if (list->type != LLM_JSON_ARRAY || list->n == 0)
		return schema_fail(sc, LLM_ERR_INVALID, "\"%s\" must be a non-empty array", "enum");
	texts = calloc((size_t) list->n, sizeof(char *));
	lens = calloc((size_t) list->n, sizeof(size_t));
	if (texts == NULL || lens == NULL)
		sc->st = llm_error_set(sc->err, LLM_ERR_NOMEM, "out of memory compiling a JSON Schema");
	for (int i = 0; i < list->n && sc->st == LLM_OK; i++)
	{
		const LlmJson *v = &list->items[i];
		char		index[16];
		size_t		old = path_push(sc, "enum");

		snprintf(index, sizeof(index), "%d", i);
		path_push(sc, index);
		if (value_in_type(sc, v, type))
		{
			if (v->type == LLM_JSON_STRING && memchr(v->str, '\0', v->len) != NULL)
				schema_fail(sc, LLM_ERR_INVALID, "%s", "a string with a NUL character cannot be written");
			else if ((sc->st = llm_json_write(v, &texts[n], &lens[n], sc->err)) == LLM_OK)
				n++;
		}
		sc->path[old] = '\0';
	}
	if (sc->st == LLM_OK && n == 0)
		schema_fail(sc, LLM_ERR_INVALID, "no value of \"%s\" has the schema's \"type\"", "enum");
	if (sc->st == LLM_OK)
		r = llm_grammar_strings_rule(sc->b, (const char *const *) texts, lens, n);
	for (int i = 0; i < n; i++)
		free(texts[i]);
	free(texts);
	free(lens);
	return r;
}

/* The rule for subschema s. */
static int
compile_schema(SchemaCompiler *sc, const LlmJson *s, int depth)
{
	const LlmJson *type,
			   *v;
	int			n_assertions = 0;

	if (depth > LLM_SCHEMA_MAX_DEPTH)
		return schema_fail(sc, LLM_ERR_LIMIT, "%s", "the schema nests too deeply");
	if (s->type == LLM_JSON_BOOL)
		return s->boolean ? any_rule(sc, LLM_SCHEMA_ANY_DEPTH) :
			schema_fail(sc, LLM_ERR_INVALID, "%s", "the schema false allows no value");
	if (s->type != LLM_JSON_OBJECT)
		return schema_fail(sc, LLM_ERR_INVALID, "%s", "a schema must be an object or a boolean");
	for (int i = 0; i < s->n; i++)
	{
		if (keyword_in(schema_assertions, s->items[i].key))
			n_assertions++;
		else if (!keyword_in(schema_annotations, s->items[i].key))
			return schema_fail(sc, LLM_ERR_UNSUPPORTED, "unsupported JSON Schema keyword \"%s\"", s->items[i].key);
	}

	if ((v = llm_json_member(s, "anyOf")) != NULL)
	{
		if (n_assertions > 1)
			return schema_fail(sc, LLM_ERR_UNSUPPORTED, "%s", "\"anyOf\" beside other assertions is not supported");
		return any_of_rule(sc, v, depth);
	}
	type = llm_json_member(s, "type");
	if ((v = llm_json_member(s, "const")) != NULL || (v = llm_json_member(s, "enum")) != NULL)
	{
		/* the values themselves; of the other assertions only "type", which each value must have */
		const char *keyword = llm_json_member(s, "const") != NULL ? "const" : "enum";

		if (n_assertions > (type != NULL ? 2 : 1))
			return schema_fail(sc, LLM_ERR_UNSUPPORTED, "\"%s\" beside assertions other than \"type\" is not supported",
							   keyword);
		if (strcmp(keyword, "enum") == 0)
			return enum_rule(sc, v, type);
		if (!value_in_type(sc, v, type))
			return sc->st != LLM_OK ? -1 :
				schema_fail(sc, LLM_ERR_INVALID, "%s", "the value of \"const\" does not have the schema's \"type\"");
		return literal_value_rule(sc, v);
	}

	if (type == NULL)
	{
		const char *t = implied_type(s);

		/* a bound applies to any number the schema allows, and only integers can be bounded */
		if (t == NULL && has_range_keyword(s))
			return schema_fail(sc, LLM_ERR_UNSUPPORTED, "%s",
							   "\"minimum\" and \"maximum\" (and the exclusive ones) need \"type\": \"integer\"");
		return t != NULL ? typed_rule(sc, s, t, depth) : any_rule(sc, LLM_SCHEMA_ANY_DEPTH);
	}
	if (type->type == LLM_JSON_STRING)
		return typed_rule(sc, s, type->str, depth);
	if (type->type == LLM_JSON_ARRAY && type->n > 0)
	{
		int			r = llm_grammar_rule(sc->b);

		for (int i = 0; i < type->n && sc->st == LLM_OK; i++)
		{
			int			alt;

			if (type->items[i].type != LLM_JSON_STRING)
				return schema_fail(sc, LLM_ERR_INVALID, "%s", "\"type\" must list type names");
			if ((alt = typed_rule(sc, s, type->items[i].str, depth)) >= 0)
				llm_grammar_add_rule(sc->b, llm_grammar_alt(sc->b, r), alt);
		}
		return sc->st == LLM_OK ? r : -1;
	}
	return schema_fail(sc, LLM_ERR_INVALID, "%s", "\"type\" must be a type name or a non-empty array of them");
}

/* Compile a JSON Schema into a grammar. */
LlmStatus
llm_json_schema_compile(const char *schema, size_t len, LlmGrammar **out, LlmError *err)
{
	SchemaCompiler sc;
	LlmJson    *root;
	LlmStatus	st;
	int			rule;

	if ((st = llm_json_parse(schema, len, &root, err)) != LLM_OK)
		return st;
	memset(&sc, 0, sizeof(sc));
	sc.err = err;
	sc.ws = sc.member_sep = sc.str_char = sc.string = sc.number = sc.integer = -1;
	for (int i = 0; i <= LLM_SCHEMA_ANY_DEPTH; i++)
		sc.any[i] = -1;
	if ((sc.b = llm_grammar_builder_new()) == NULL)
	{
		llm_json_free(root);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory compiling a JSON Schema");
	}
	rule = compile_schema(&sc, root, 0);
	llm_json_free(root);
	if (sc.st != LLM_OK)
	{
		llm_grammar_builder_free(sc.b);
		return sc.st;
	}
	return llm_grammar_builder_finish(sc.b, rule, out, err);
}
