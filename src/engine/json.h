/*
 * json.h
 *		A small JSON reader and writer (RFC 8259) for the JSON Schemas that
 *		constrain decoding (json_schema.c).
 *
 * llm_json_parse() builds a tree of LlmJson values; strings come out
 * decoded to UTF-8 (escapes resolved), numbers keep their source text.
 * Object members keep their order, and duplicate keys are an error, since
 * a schema with two "type" keys means nothing certain.
 */
#ifndef LLM_JSON_H
#define LLM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum LlmJsonType
{
	LLM_JSON_NULL,
	LLM_JSON_BOOL,
	LLM_JSON_NUMBER,
	LLM_JSON_STRING,
	LLM_JSON_ARRAY,
	LLM_JSON_OBJECT
} LlmJsonType;

typedef struct LlmJson
{
	LlmJsonType type;
	bool		boolean;		/* LLM_JSON_BOOL */
	double		number;			/* LLM_JSON_NUMBER */
	char	   *str;			/* (len) STRING: the decoded UTF-8; NUMBER: its text; NUL-terminated */
	size_t		len;
	struct LlmJson *items;		/* (n) ARRAY: the elements; OBJECT: the members' values */
	int			n;
	char	   *key;			/* (key_len) a member's decoded key, NUL-terminated; NULL elsewhere */
	size_t		key_len;
} LlmJson;

/* Deepest nesting of arrays and objects llm_json_parse() accepts. */
#define LLM_JSON_MAX_DEPTH 64

/*
 * Parse len bytes of JSON text into a new tree *out (free it with
 * llm_json_free).  LLM_ERR_INVALID, with the byte offset, for text that is
 * not one JSON value or nests deeper than LLM_JSON_MAX_DEPTH.
 */
LlmStatus	llm_json_parse(const char *text, size_t len, LlmJson **out, LlmError *err);

/*
 * Whether len bytes of text are one JSON value, duplicate member names
 * allowed (RFC 8259 makes them legal; jsonb keeps the last).  What a
 * grammar with free-form objects may write (json_schema.h).
 */
bool		llm_json_valid(const char *text, size_t len);

/* Free a tree from llm_json_parse(); NULL is allowed. */
void		llm_json_free(LlmJson *v);

/* The member of object v named key, or NULL (also when v is not an object). */
const LlmJson *llm_json_member(const LlmJson *v, const char *key);

/*
 * Number v rounded to an integer, up (ceiling) or down (floor), exactly
 * from its text (a double holds integers exactly only to 2^53), into *out;
 * false when that integer is outside the range of int64_t.
 */
bool		llm_json_number_int64(const LlmJson *v, bool up, int64_t *out);

/* Whether a and b are the same JSON value (numbers compared by value, members in any order). */
bool		llm_json_equal(const LlmJson *a, const LlmJson *b);

/*
 * Write v as compact JSON (no spaces) into a new malloc'd NUL-terminated
 * string *out of *len bytes.  Strings escape '"', '\\' and control
 * characters only; numbers are written as their source text.
 */
LlmStatus	llm_json_write(const LlmJson *v, char **out, size_t *len, LlmError *err);

#endif							/* LLM_JSON_H */
