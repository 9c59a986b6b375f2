/*
 * json.c
 *		A recursive-descent JSON reader and a compact writer (json.h).
 */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* The reader's position in the text. */
typedef struct JsonReader
{
	const char *s;
	size_t		len;
	size_t		pos;
	LlmError   *err;
	bool		allow_duplicates;	/* duplicate member names are valid JSON (RFC 8259 only says SHOULD) */
} JsonReader;

/* A growing byte buffer. */
typedef struct JsonBuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		failed;
} JsonBuf;

static LlmStatus json_value(JsonReader *r, LlmJson *v, int depth);

/* Append n bytes to b (sets b->failed when out of memory). */
static void
buf_put(JsonBuf *b, const char *p, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap)
	{
		size_t		cap = b->cap ? b->cap : 64;
		char	   *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		if ((d = realloc(b->data, cap)) == NULL)
		{
			b->failed = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

/* An error at the reader's position. */
static LlmStatus
json_fail(JsonReader *r, const char *what)
{
	return llm_error_set(r->err, LLM_ERR_INVALID, "invalid JSON at byte %zu: %s", r->pos, what);
}

/* Skip JSON whitespace. */
static void
json_skip_ws(JsonReader *r)
{
	while (r->pos < r->len && (r->s[r->pos] == ' ' || r->s[r->pos] == '\t' ||
							   r->s[r->pos] == '\n' || r->s[r->pos] == '\r'))
		r->pos++;
}

/* Whether the text continues with the literal word (and consume it). */
static bool
json_take_word(JsonReader *r, const char *word)
{
	size_t		n = strlen(word);

	if (r->len - r->pos < n || memcmp(r->s + r->pos, word, n) != 0)
		return false;
	r->pos += n;
	return true;
}

/* Four hex digits at the reader's position as a number, or -1. */
static long
json_hex4(JsonReader *r)
{
	long		v = 0;

	if (r->len - r->pos < 4)
		return -1;
	for (int i = 0; i < 4; i++)
	{
		char		c = r->s[r->pos + i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	r->pos += 4;
	return v;
}

/* Read a string (the reader is at its opening quote) into a new malloc'd UTF-8 copy. */
static LlmStatus
json_string(JsonReader *r, char **out, size_t *out_len)
{
	JsonBuf		b = {0};

	r->pos++;
	buf_put(&b, "", 0);
	for (;;)
	{
		unsigned char c;

		if (r->pos >= r->len)
		{
			free(b.data);
			return json_fail(r, "unterminated string");
		}
		c = (unsigned char) r->s[r->pos];
		if (c == '"')
			break;
		if (c < 0x20)
		{
			free(b.data);
			return json_fail(r, "control character in a string");
		}
		if (c != '\\')
		{
			buf_put(&b, r->s + r->pos++, 1);
			continue;
		}
		if (++r->pos >= r->len)
		{
			free(b.data);
			return json_fail(r, "unterminated string");
		}
		c = (unsigned char) r->s[r->pos++];
		switch (c)
		{
			case '"':
			case '\\':
			case '/':
				buf_put(&b, (const char *) &c, 1);
				break;
			case 'b':
				buf_put(&b, "\b", 1);
				break;
			case 'f':
				buf_put(&b, "\f", 1);
				break;
			case 'n':
				buf_put(&b, "\n", 1);
				break;
			case 'r':
				buf_put(&b, "\r", 1);
				break;
			case 't':
				buf_put(&b, "\t", 1);
				break;
			case 'u':
				{
					long		cp = json_hex4(r);
					char		utf8[4];

					if (cp >= 0xD800 && cp <= 0xDBFF && json_take_word(r, "\\u"))
					{
						long		lo = json_hex4(r);

						if (lo < 0xDC00 || lo > 0xDFFF)
							cp = -1;
						else
							cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					}
					else if (cp >= 0xD800 && cp <= 0xDFFF)
						cp = -1;
					if (cp < 0)
					{
						free(b.data);
						return json_fail(r, "invalid \\u escape");
					}
					buf_put(&b, utf8, llm_utf8_encode((uint32_t) cp, utf8));
					break;
				}
			default:
				free(b.data);
				return json_fail(r, "invalid escape in a string");
		}
	}
	r->pos++;
	if (b.failed)
		return llm_error_set(r->err, LLM_ERR_NOMEM, "out of memory reading JSON");
	*out = b.data;
	*out_len = b.len;
	return LLM_OK;
}

/* Read a number as its text and value. */
static LlmStatus
json_number(JsonReader *r, LlmJson *v)
{
	size_t		start = r->pos;
	size_t		digits;

	if (r->pos < r->len && r->s[r->pos] == '-')
		r->pos++;
	digits = r->pos;
	while (r->pos < r->len && r->s[r->pos] >= '0' && r->s[r->pos] <= '9')
		r->pos++;
	if (r->pos == digits || (r->s[digits] == '0' && r->pos - digits > 1))
		return json_fail(r, "invalid number");
	if (r->pos < r->len && r->s[r->pos] == '.')
	{
		digits = ++r->pos;
		while (r->pos < r->len && r->s[r->pos] >= '0' && r->s[r->pos] <= '9')
			r->pos++;
		if (r->pos == digits)
			return json_fail(r, "invalid number");
	}
	if (r->pos < r->len && (r->s[r->pos] == 'e' || r->s[r->pos] == 'E'))
	{
		r->pos++;
		if (r->pos < r->len && (r->s[r->pos] == '+' || r->s[r->pos] == '-'))
			r->pos++;
		digits = r->pos;
		while (r->pos < r->len && r->s[r->pos] >= '0' && r->s[r->pos] <= '9')
			r->pos++;
		if (r->pos == digits)
			return json_fail(r, "invalid number");
	}
	v->type = LLM_JSON_NUMBER;
	v->len = r->pos - start;
	if ((v->str = malloc(v->len + 1)) == NULL)
		return llm_error_set(r->err, LLM_ERR_NOMEM, "out of memory reading JSON");
	memcpy(v->str, r->s + start, v->len);
	v->str[v->len] = '\0';
	v->number = strtod(v->str, NULL);
	return LLM_OK;
}

/* Append a new zeroed item to v's items. */
static LlmJson *
json_push_item(LlmJson *v, int *cap)
{
	if (v->n == *cap)
	{
		int			ncap = *cap ? 2 * *cap : 4;
		LlmJson    *items = realloc(v->items, (size_t) ncap * sizeof(LlmJson));

		if (items == NULL)
			return NULL;
		v->items = items;
		*cap = ncap;
	}
	memset(&v->items[v->n], 0, sizeof(LlmJson));
	return &v->items[v->n++];
}

/* Read an array or an object (the reader is at its bracket). */
static LlmStatus
json_container(JsonReader *r, LlmJson *v, int depth)
{
	bool		object = r->s[r->pos] == '{';
	char		close = object ? '}' : ']';
	int			cap = 0;
	LlmStatus	st;

	if (depth >= LLM_JSON_MAX_DEPTH)
		return json_fail(r, "nested too deeply");
	v->type = object ? LLM_JSON_OBJECT : LLM_JSON_ARRAY;
	r->pos++;
	json_skip_ws(r);
	if (r->pos < r->len && r->s[r->pos] == close)
	{
		r->pos++;
		return LLM_OK;
	}
	for (;;)
	{
		LlmJson    *item = json_push_item(v, &cap);
		char	   *key = NULL;
		size_t		key_len = 0;

		if (item == NULL)
			return llm_error_set(r->err, LLM_ERR_NOMEM, "out of memory reading JSON");
		json_skip_ws(r);
		if (object)
		{
			if (r->pos >= r->len || r->s[r->pos] != '"')
				return json_fail(r, "expected a member name");
			if ((st = json_string(r, &key, &key_len)))
				return st;
			for (int i = 0; !r->allow_duplicates && i < v->n - 1; i++)
				if (v->items[i].key_len == key_len && memcmp(v->items[i].key, key, key_len) == 0)
				{
					free(key);
					return json_fail(r, "duplicate member name");
				}
			item->key = key;
			item->key_len = key_len;
			json_skip_ws(r);
			if (r->pos >= r->len || r->s[r->pos] != ':')
				return json_fail(r, "expected ':'");
			r->pos++;
			json_skip_ws(r);
		}
		if ((st = json_value(r, item, depth + 1)))
			return st;
		json_skip_ws(r);
		if (r->pos < r->len && r->s[r->pos] == ',')
		{
			r->pos++;
			continue;
		}
		if (r->pos < r->len && r->s[r->pos] == close)
		{
			r->pos++;
			return LLM_OK;
		}
		return json_fail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

/* Read one value at the reader's position (whitespace skipped before). */
static LlmStatus
json_value(JsonReader *r, LlmJson *v, int depth)
{
	json_skip_ws(r);
	if (r->pos >= r->len)
		return json_fail(r, "unexpected end of text");
	switch (r->s[r->pos])
	{
		case '{':
		case '[':
			return json_container(r, v, depth);
		case '"':
			v->type = LLM_JSON_STRING;
			return json_string(r, &v->str, &v->len);
		case 't':
		case 'f':
			v->type = LLM_JSON_BOOL;
			v->boolean = r->s[r->pos] == 't';
			if (!json_take_word(r, v->boolean ? "true" : "false"))
				return json_fail(r, "invalid literal");
			return LLM_OK;
		case 'n':
			v->type = LLM_JSON_NULL;
			if (!json_take_word(r, "null"))
				return json_fail(r, "invalid literal");
			return LLM_OK;
		default:
			return json_number(r, v);
	}
}

/* Free what v holds (not v itself). */
static void
json_clear(LlmJson *v)
{
	for (int i = 0; i < v->n; i++)
		json_clear(&v->items[i]);
	free(v->items);
	free(v->str);
	free(v->key);
}

/* Parse text into a new tree, refusing duplicate member names unless allow_duplicates. */
static LlmStatus
json_parse(const char *text, size_t len, bool allow_duplicates, LlmJson **out, LlmError *err)
{
	JsonReader	r = {text, len, 0, err, allow_duplicates};
	LlmJson    *v = calloc(1, sizeof(LlmJson));
	LlmStatus	st;

	if (v == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory reading JSON");
	st = json_value(&r, v, 0);
	if (st == LLM_OK)
	{
		json_skip_ws(&r);
		if (r.pos < r.len)
			st = json_fail(&r, "text after the value");
	}
	if (st != LLM_OK)
	{
		llm_json_free(v);
		return st;
	}
	*out = v;
	return LLM_OK;
}

/* Parse JSON text into a new tree. */
LlmStatus
llm_json_parse(const char *text, size_t len, LlmJson **out, LlmError *err)
{
	return json_parse(text, len, false, out, err);
}

/* Whether text is one JSON value. */
bool
llm_json_valid(const char *text, size_t len)
{
	LlmJson    *v = NULL;
	bool		ok = json_parse(text, len, true, &v, NULL) == LLM_OK;

	llm_json_free(v);
	return ok;
}

/* Free a tree. */
void
llm_json_free(LlmJson *v)
{
	if (v == NULL)
		return;
	json_clear(v);
	free(v);
}

/* The member of object v whose name is the n bytes at key (which may hold NULs), or NULL. */
static const LlmJson *
json_member_n(const LlmJson *v, const char *key, size_t n)
{
	if (v == NULL || v->type != LLM_JSON_OBJECT)
		return NULL;
	for (int i = 0; i < v->n; i++)
		if (v->items[i].key_len == n && memcmp(v->items[i].key, key, n) == 0)
			return &v->items[i];
	return NULL;
}

/* The member of object v named key, or NULL. */
const LlmJson *
llm_json_member(const LlmJson *v, const char *key)
{
	return json_member_n(v, key, strlen(key));
}

/*
 * Number v rounded up or down to an int64_t.  Its text -?D(.F)?(e[+-]?X)?
 * is the digits DF times 10^(X - |F|): the integer part is the digits left
 * of that point (at most 19 of them, as 2^63 has), and any nonzero digit
 * right of it is a fraction.
 */
bool
llm_json_number_int64(const LlmJson *v, bool up, int64_t *out)
{
	const char *p = v->str;
	bool		neg = *p == '-';
	char		digits[20];		/* the first significant digits of DF (leading zeros skipped) */
	long		n_sig = 0,		/* significant digits of DF */
				n_frac = 0,		/* digits of F */
				exp = 0,
				point;
	bool		in_frac = false,
				frac = false;	/* a nonzero digit past the first 20 (always right of the point) */
	uint64_t	mag = 0;

	if (v->type != LLM_JSON_NUMBER)
		return false;
	for (p += neg; (*p >= '0' && *p <= '9') || *p == '.'; p++)
	{
		if (*p == '.')
		{
			in_frac = true;
			continue;
		}
		n_frac += in_frac;
		if (n_sig == 0 && *p == '0')
			continue;
		if (n_sig < (long) sizeof(digits))
			digits[n_sig] = *p;
		else
			frac |= *p != '0';
		n_sig++;
	}
	if (*p == 'e' || *p == 'E')
	{
		bool		exp_neg = *++p == '-';

		for (p += *p == '-' || *p == '+'; *p >= '0' && *p <= '9'; p++)
			if (exp < 1000000)
				exp = exp * 10 + (*p - '0');
		exp = exp_neg ? -exp : exp;
	}
	point = n_sig == 0 ? 0 : n_sig + exp - n_frac;
	if (point > 19)
		return false;
	for (long i = 0; i < n_sig && i < (long) sizeof(digits); i++)
	{
		if (i < point)
			mag = mag * 10 + (uint64_t) (digits[i] - '0');
		else
			frac |= digits[i] != '0';
	}
	for (long i = n_sig; i < point; i++)
		mag *= 10;
	/* a fraction rounds away from zero when up and positive or down and negative */
	if (frac && up != neg)
		mag++;
	if (mag > (uint64_t) INT64_MAX + (neg ? 1 : 0))
		return false;
	*out = !neg ? (int64_t) mag : mag == 0 ? 0 : -(int64_t) (mag - 1) - 1;
	return true;
}

/* Whether a and b are the same JSON value. */
bool
llm_json_equal(const LlmJson *a, const LlmJson *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case LLM_JSON_NULL:
			return true;
		case LLM_JSON_BOOL:
			return a->boolean == b->boolean;
		case LLM_JSON_NUMBER:
			return a->number == b->number;
		case LLM_JSON_STRING:
			return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
		case LLM_JSON_ARRAY:
			if (a->n != b->n)
				return false;
			for (int i = 0; i < a->n; i++)
				if (!llm_json_equal(&a->items[i], &b->items[i]))
					return false;
			return true;
		case LLM_JSON_OBJECT:
			if (a->n != b->n)
				return false;
			for (int i = 0; i < a->n; i++)
			{
				const LlmJson *m = json_member_n(b, a->items[i].key, a->items[i].key_len);

				if (m == NULL || !llm_json_equal(&a->items[i], m))
					return false;
			}
			return true;
	}
	return false;
}

/* Write s (n bytes) as a JSON string literal. */
static void
json_write_string(JsonBuf *b, const char *s, size_t n)
{
	buf_put(b, "\"", 1);
	for (size_t i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];
		char		esc[8];

		if (c == '"' || c == '\\')
		{
			esc[0] = '\\';
			esc[1] = (char) c;
			buf_put(b, esc, 2);
		}
		else if (c == '\n')
			buf_put(b, "\\n", 2);
		else if (c == '\t')
			buf_put(b, "\\t", 2);
		else if (c == '\r')
			buf_put(b, "\\r", 2);
		else if (c < 0x20)
		{
			static const char hex[] = "0123456789abcdef";

			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			buf_put(b, esc, 6);
		}
		else
			buf_put(b, s + i, 1);
	}
	buf_put(b, "\"", 1);
}

/* Write v into b. */
static void
json_write_value(JsonBuf *b, const LlmJson *v)
{
	switch (v->type)
	{
		case LLM_JSON_NULL:
			buf_put(b, "null", 4);
			break;
		case LLM_JSON_BOOL:
			buf_put(b, v->boolean ? "true" : "false", v->boolean ? 4 : 5);
			break;
		case LLM_JSON_NUMBER:
			buf_put(b, v->str, v->len);
			break;
		case LLM_JSON_STRING:
			json_write_string(b, v->str, v->len);
			break;
		case LLM_JSON_ARRAY:
		case LLM_JSON_OBJECT:
			buf_put(b, v->type == LLM_JSON_ARRAY ? "[" : "{", 1);
			for (int i = 0; i < v->n; i++)
			{
				if (i > 0)
					buf_put(b, ",", 1);
				if (v->type == LLM_JSON_OBJECT)
				{
					json_write_string(b, v->items[i].key, v->items[i].key_len);
					buf_put(b, ":", 1);
				}
				json_write_value(b, &v->items[i]);
			}
			buf_put(b, v->type == LLM_JSON_ARRAY ? "]" : "}", 1);
			break;
	}
}

/* Write v as compact JSON. */
LlmStatus
llm_json_write(const LlmJson *v, char **out, size_t *len, LlmError *err)
{
	JsonBuf		b = {0};

	buf_put(&b, "", 0);
	json_write_value(&b, v);
	if (b.failed)
	{
		free(b.data);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory writing JSON");
	}
	*out = b.data;
	*len = b.len;
	return LLM_OK;
}
