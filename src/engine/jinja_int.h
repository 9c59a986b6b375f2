/*
 * jinja_int.h
 *		The Jinja interpreter's internals, shared by its files:
 *		jinja_lex.c (source to tokens, with Jinja2's whitespace rules),
 *		jinja_parse.c (tokens to a tree), jinja_value.c (values, strings and
 *		their conversions), jinja_eval.c (the tree run over values) and
 *		jinja_builtins.c (filters, tests, methods and globals).
 *
 * Memory: a parsed template lives in one arena owned by LlmJinja; a render
 * allocates its values in an arena of its own, freed whole at the end.
 * Nothing is freed piecemeal, so values may share anything.
 *
 * Strings are byte strings of UTF-8 with an optional per-byte mask of which
 * bytes came from user data (u[i] != 0); u is NULL when none did.  Python
 * strings count code points, so len(), indexing and slicing decode UTF-8.
 */
#ifndef LLM_JINJA_INT_H
#define LLM_JINJA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* ---- arena ------------------------------------------------------------ */

typedef struct JChunk JChunk;

/* A bump allocator; cap bounds its total size (0: unbounded). */
typedef struct JArena
{
	JChunk	   *head;
	size_t		used;			/* bytes used in head */
	size_t		size;			/* head's size */
	size_t		total;			/* bytes of all chunks */
	size_t		cap;
} JArena;

/* n zeroed bytes from arena a (8-byte aligned), or NULL when out of memory or past a->cap. */
void	   *ja_alloc(JArena *a, size_t n);

/* Free every chunk of a. */
void		ja_free(JArena *a);

/* ---- strings and values ------------------------------------------------ */

typedef struct JStr
{
	const char *s;
	size_t		len;
	const uint8_t *u;			/* (len) 1 where the byte came from user data; NULL: none did */
	bool		safe;			/* a Markup string (|safe): adding a str to it HTML-escapes the str */
} JStr;

typedef enum JType
{
	J_UNDEF,					/* Jinja2's Undefined; s holds the missing name, for messages */
	J_NONE,
	J_BOOL,
	J_INT,
	J_FLOAT,
	J_STR,
	J_LIST,						/* also tuples (l->tuple) */
	J_DICT,						/* also namespace() objects (d->ns) */
	J_FUNC,						/* a builtin, a bound method, a macro, caller */
	J_NOARG						/* internal: an argument that was not given */
} JType;

typedef struct JList JList;
typedef struct JDict JDict;
typedef struct JFunc JFunc;

typedef struct JValue
{
	JType		t;
	union
	{
		bool		b;
		int64_t		i;
		double		f;
		JStr		s;
		JList	   *l;
		JDict	   *d;
		JFunc	   *fn;
	};
} JValue;

struct JList
{
	JValue	   *v;
	int			n;
	int			cap;
	bool		tuple;
	bool		gen;			/* a generator (what map, select and the like return): no len(), no index, */
	bool		consumed;		/* iterated once, then empty */
};

struct JDict
{
	JValue	   *k;
	JValue	   *v;
	int			n;
	int			cap;
	bool		ns;				/* a namespace(): attributes may be set */
};

/* ---- the tree ---------------------------------------------------------- */

typedef enum JNodeKind
{
	/* statements */
	N_TEXT,						/* c: the text */
	N_PRINT,					/* a: the expression */
	N_IF,						/* a: condition; body; alt: else (an elif is an N_IF there) */
	N_FOR,						/* names: targets; a: iterable; b: filter or NULL; body; alt: else */
	N_SET,						/* a: target (Name, NSRef or Tuple of names); b: value */
	N_SETBLOCK,					/* a: target; body; b: filter chain over N_BLOCKVALUE, or NULL */
	N_MACRO,					/* name; names: parameters; alt: their defaults (NULL: none); body */
	N_CALLBLOCK,				/* a: the call; names: caller's parameters; alt: their defaults; body */
	N_FILTERBLOCK,				/* b: filter chain over N_BLOCKVALUE; body */
	N_BREAK,
	N_CONTINUE,
	N_SCOPE,					/* body ({% generation %}) */
	/* expressions */
	N_CONST,					/* c */
	N_NAME,						/* name */
	N_NSREF,					/* name.attr as a set target: name, attr */
	N_GETATTR,					/* a.attr */
	N_GETITEM,					/* a[b] */
	N_SLICE,					/* a[args[0]:args[1]:args[2]] (NULL: omitted) */
	N_CALL,						/* a(args, kwnames=kwargs) */
	N_FILTER,					/* a|name(args, kwargs) */
	N_TEST,						/* a is [not] name(args): negate */
	N_BIN,						/* a op b: + - * / // % ** */
	N_NEG,						/* -a */
	N_POS,						/* +a */
	N_NOT,						/* not a */
	N_AND,
	N_OR,
	N_COMPARE,					/* a ops[0] args[0] ops[1] args[1] ... */
	N_COND,						/* b if a else c (c NULL: undefined) */
	N_LIST,						/* args */
	N_TUPLE,					/* args */
	N_DICT,						/* args: keys; kwargs: values */
	N_CONCAT,					/* args joined by ~ */
	N_BLOCKVALUE				/* the captured body of a set or filter block */
} JNodeKind;

typedef enum JOp
{
	OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
	OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN
} JOp;

typedef struct JNode JNode;

struct JNode
{
	JNodeKind	kind;
	int			line;
	const char *name;			/* a name, attribute, filter, test or macro */
	const char *attr;			/* N_NSREF's attribute */
	JValue		c;				/* N_CONST, N_TEXT */
	JNode	   *a;
	JNode	   *b;
	JNode	   *c3;
	JNode	  **args;			/* (n_args) arguments, items, operands */
	int			n_args;
	const char **kwnames;		/* (n_kw) keyword names */
	JNode	  **kwargs;			/* (n_kw) keyword values; N_DICT: the values (n_args) */
	int			n_kw;
	JOp		   *ops;			/* (n_args) N_COMPARE's operators */
	const char **names;			/* (n_names) loop targets, parameters */
	int			n_names;
	JNode	  **body;			/* (n_body) */
	int			n_body;
	JNode	  **alt;			/* (n_alt) else branch; N_MACRO: parameter defaults */
	int			n_alt;
	bool		negate;			/* N_TEST */
	bool		builtin;		/* N_FILTER, N_TEST: implemented (else an error where it runs) */
};

struct LlmJinja
{
	JArena		arena;
	JNode	  **body;
	int			n_body;
};

/* ---- lexer ------------------------------------------------------------- */

typedef enum JTokKind
{
	T_EOF,
	T_TEXT,						/* template data, whitespace rules applied */
	T_VAR_BEGIN,				/* {{ */
	T_VAR_END,					/* }} */
	T_BLOCK_BEGIN,				/* {% */
	T_BLOCK_END,				/* %} */
	T_NAME,
	T_STRING,					/* decoded */
	T_INT,
	T_FLOAT,
	T_OP						/* an operator or punctuation, in s */
} JTokKind;

typedef struct JToken
{
	JTokKind	kind;
	int			line;
	const char *s;				/* T_TEXT, T_NAME, T_STRING, T_OP: NUL-terminated, len bytes */
	size_t		len;
	int64_t		i;
	double		f;
} JToken;

/*
 * Split source (len bytes) into tokens in arena a, as Jinja2's lexer does
 * with trim_blocks and lstrip_blocks: *toks gets *n_toks tokens ending in
 * T_EOF.  LLM_ERR_UNSUPPORTED with the line for what Jinja2 rejects too.
 */
LlmStatus	jinja_lex(JArena *a, const char *src, size_t len, JToken **toks, int *n_toks, LlmError *err);

/* ---- parser ------------------------------------------------------------ */

/* Parse tokens into t's statements; LLM_ERR_UNSUPPORTED naming the construct and its line. */
LlmStatus	jinja_parse_tokens(LlmJinja *t, const JToken *toks, int n_toks, LlmError *err);

/* Whether name is a filter (a test) the interpreter implements (jinja_builtins.c). */
bool		jinja_has_filter(const char *name);
bool		jinja_has_test(const char *name);

/* Whether Jinja2 has a filter (a test) of that name, implemented here or not. */
bool		jinja2_knows_filter(const char *name);
bool		jinja2_knows_test(const char *name);

/* The error for a filter or test the interpreter does not implement (Jinja2 may or may not know it). */
LlmStatus	jinja_unknown_status(const char *name, bool is_filter, char *msg, size_t msgsz);

/* ---- values (jinja_value.c) ---------------------------------------------- */

/* A growing output buffer with its user mask. */
typedef struct JBuf
{
	char	   *s;
	uint8_t    *u;
	size_t		len;
	size_t		cap;
	size_t		max;			/* bytes allowed */
	bool		any_user;
	bool		failed;			/* out of memory or past max */
	bool		over;			/* past max (else out of memory) */
} JBuf;

bool		jbuf_put(JBuf *b, const char *s, size_t len, bool user);
bool		jbuf_put_str(JBuf *b, JStr s);
bool		jbuf_puts(JBuf *b, const char *s);
void		jbuf_free(JBuf *b);

/* A copy of b's contents in arena a as a string (NULL s on failure). */
bool		jbuf_to_str(JArena *a, const JBuf *b, JStr *out);

JValue		jv_undef(const char *name);
JValue		jv_none(void);
JValue		jv_bool(bool b);
JValue		jv_int(int64_t i);
JValue		jv_float(double f);
JValue		jv_str(JStr s);
/* A string of len bytes copied into a; user marks every byte as user data. */
bool		jv_str_copy(JArena *a, const char *s, size_t len, bool user, JValue *out);
JValue		jv_cstr(const char *s);	/* a static or arena string, not user data */

JList	   *jlist_new(JArena *a, int cap);
bool		jlist_push(JArena *a, JList *l, JValue v);
JDict	   *jdict_new(JArena *a, int cap);
/* Set key to v (replacing an equal key). */
bool		jdict_set(JArena *a, JDict *d, JValue key, JValue v);
/* The value under string key k, or NULL. */
JValue	   *jdict_get(const JDict *d, const char *k, size_t klen);
/* The value under key (any type), or NULL. */
JValue	   *jdict_find(const JDict *d, JValue key);

bool		jv_truthy(JValue v);
/* Python's ==. */
bool		jv_equal(JValue a, JValue b);
/* Python's <: *lt; false when the types cannot be ordered. */
bool		jv_less(JValue a, JValue b, bool *lt);
/* The type's name as Python says it ("str", "dict", "NoneType"). */
const char *jv_type_name(JValue v);

/* Python's str(v) (Undefined: "") appended to b; strings keep their mask. */
bool		jv_write_str(JBuf *b, JValue v, int depth);
/* Python's repr(v) appended to b. */
bool		jv_write_repr(JBuf *b, JValue v, int depth);
/* str(v) as a string value in a. */
bool		jv_to_str(JArena *a, JValue v, size_t max, JStr *out);

/* json.dumps options, as transformers' tojson passes them. */
typedef struct JJsonOpts
{
	bool		ensure_ascii;
	int			indent;			/* -1: none */
	const char *item_sep;		/* NULL: ", " without indent, "," with */
	const char *key_sep;		/* NULL: ": " */
	bool		sort_keys;
} JJsonOpts;

/* json.dumps(v) appended to b; false with *why set for what JSON cannot hold. */
bool		jv_write_json(JBuf *b, JValue v, const JJsonOpts *o, int depth, const char **why);

/* A value from parsed JSON (json.h), its strings user data when user. */
struct LlmJson;
bool		jv_from_json(JArena *a, const struct LlmJson *j, bool user, JValue *out);

/* Python's float repr into out (at least 32 bytes). */
void		jv_format_float(double f, char *out, size_t outsz);

/* ---- UTF-8 and Python's str methods (jinja_value.c) -------------------- */

/* Code points in s. */
size_t		ju_count(const char *s, size_t len);
/* The byte offset of code point i of s (i <= count). */
size_t		ju_offset(const char *s, size_t len, size_t i);
/* The code point at s (n bytes available) and its length in *adv. */
uint32_t	ju_decode(const char *s, size_t n, int *adv);
/* Whether Python's str.isspace() holds for code point c. */
bool		ju_isspace(uint32_t c);
/* Python's upper()/lower() of one code point (the ranges jinja_value.c names); ß upper is "SS". */
int			ju_upper(uint32_t c, uint32_t out[2]);
uint32_t	ju_lower(uint32_t c);
/* Append code point c as UTF-8 to b. */
bool		ju_put(JBuf *b, uint32_t c, bool user);

/* ---- the render ---------------------------------------------------------- */

typedef struct JFrame JFrame;

struct JFrame
{
	JDict	   *vars;
	JFrame	   *parent;
};

typedef struct JRender
{
	JArena		arena;
	const LlmJinjaLimits *lim;
	int64_t		steps;
	int			depth;
	JBuf	   *out;			/* where output goes now */
	JFrame	   *globals;
	JFrame	   *frame;			/* the frame statements run in now */
	JValue		block;			/* what a set or filter block's filters apply to */
	int			ctl;			/* 0, or a pending break (1) or continue (2) */
	int			year, month, day;	/* strftime_now's date */
	LlmError   *err;
	LlmStatus	status;			/* the first error */
} JRender;

/* Record an error (the first one wins); returns false for "return fail(...)". */
bool		jr_fail(JRender *r, LlmStatus st, int line, const char *fmt,...)
			__attribute__((format(printf, 4, 5)));

/* Evaluate expression n into *out. */
bool		jinja_eval(JRender *r, const JNode *n, JValue *out);

/* Call a callable value with arguments (a macro, a builtin, a bound method). */
bool		jinja_call(JRender *r, int line, JValue fn, JValue *args, int n_args,
					   const char **kwnames, JValue *kwargs, int n_kw, JValue *out);

/* Apply filter name to v with arguments (jinja_builtins.c). */
bool		jinja_filter(JRender *r, int line, const char *name, JValue v, JValue *args, int n_args,
						 const char **kwnames, JValue *kwargs, int n_kw, JValue *out);
/* Apply test name to v (jinja_builtins.c). */
bool		jinja_test(JRender *r, int line, const char *name, JValue v, JValue *args, int n_args,
					   bool *out);
/* v.attr as Jinja2 resolves it in the sandbox: a method, an item, or Undefined. */
bool		jinja_getattr(JRender *r, int line, JValue v, const char *attr, JValue *out);
/* v[key] as Jinja2 resolves it: an item, an attribute, or Undefined. */
bool		jinja_getitem(JRender *r, int line, JValue v, JValue key, JValue *out);
/* A global function (range, namespace, raise_exception, ...), or false. */
bool		jinja_global(const char *name, JValue *out);
/* Call builtin function fn (a global or a bound method). */
bool		jinja_call_builtin(JRender *r, int line, JFunc *fn, JValue *args, int n_args,
							   const char **kwnames, JValue *kwargs, int n_kw, JValue *out);
/* The items of an iterable value (a list, a dict's keys, a string's characters). */
bool		jinja_iterate(JRender *r, int line, JValue v, JList **out);

/* What a J_FUNC is. */
typedef enum JFuncKind
{
	F_MACRO,
	F_CALLER,
	F_BUILTIN,					/* a global or a method bound to self */
	F_LOOP_CYCLE
} JFuncKind;

struct JFunc
{
	JFuncKind	kind;
	const char *name;
	const JNode *node;			/* F_MACRO, F_CALLER: the definition */
	JFrame	   *closure;		/* F_MACRO, F_CALLER: where it was defined */
	JValue		self;			/* F_BUILTIN: the bound object (J_NOARG for a global) */
	JValue		caller;			/* F_MACRO called from a call block: its caller */
	int			id;				/* F_BUILTIN: which (jinja_builtins.c) */
};

/* Run statements body with output to r->out (jinja_eval.c). */
bool		jinja_exec(JRender *r, JNode **body, int n, JFrame *frame);

/* Step accounting: false (LLM_ERR_LIMIT) past the limit. */
static inline bool
jr_step(JRender *r, int line)
{
	if (++r->steps > r->lim->max_steps)
		return jr_fail(r, LLM_ERR_LIMIT, line, "the template ran more than %lld steps",
					   (long long) r->lim->max_steps);
	return true;
}

#endif							/* LLM_JINJA_INT_H */
