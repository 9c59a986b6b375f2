/*
 * json_schema.h
 *		Compile a JSON Schema into a byte grammar (grammar.h) whose sentences
 *		are exactly the JSON texts the decoder may write for it.
 *
 * Supported: type (a name or a list of names), properties, required,
 * additionalProperties (absent or false; only the listed properties are
 * written, each at most once, in any order; at most
 * LLM_SCHEMA_MAX_PROPERTIES of them per object), items, minItems, maxItems, minLength,
 * maxLength, enum, const, anyOf, minimum, maximum, exclusiveMinimum and
 * exclusiveMaximum (for "type": "integer" only, bounds within int64_t; a
 * bound that is not an integer rounds inward), and the annotations title,
 * description, default, examples, $schema, $id, $comment.  Any other
 * keyword is refused with its name and place (a JSON pointer), so a schema
 * never means less than it says.
 *
 * What the grammar writes: compact JSON with optional whitespace after
 * '{', '[', ':' and ',' and before '}' and ']' (a space, or a newline and
 * up to LLM_SCHEMA_MAX_INDENT spaces); none before the value or after it.
 * Strings are UTF-8 with the escapes \" \\ \/ \b \f \n \r \t (no \u, so
 * never a NUL or a lone surrogate); integers have at most 16 digits (but
 * a range's as many as its bounds have, 16 past a side it leaves open),
 * numbers at most 16 digits before the point, 16 after it and 3 in the
 * exponent, so a model cannot run on in a number.  A schema without a type
 * (true, {}) allows any JSON value nested at most LLM_SCHEMA_ANY_DEPTH deep.
 */
#ifndef LLM_JSON_SCHEMA_H
#define LLM_JSON_SCHEMA_H

#include <stddef.h>

#include "grammar.h"
#include "status.h"

#define LLM_SCHEMA_MAX_INDENT	12
#define LLM_SCHEMA_ANY_DEPTH	5
#define LLM_SCHEMA_MAX_DEPTH	32		/* nesting of subschemas */
#define LLM_SCHEMA_MAX_BOUND	65536	/* largest maxLength, maxItems, minLength, minItems */
#define LLM_SCHEMA_MAX_PROPERTIES LLM_GRAMMAR_MAX_MEMBERS	/* properties of one object */

/*
 * Compile the schema in len bytes of JSON text.  LLM_ERR_INVALID with a
 * message naming the keyword and its place for a schema that is not valid
 * JSON, uses an unsupported keyword, or is contradictory; LLM_ERR_LIMIT
 * when it is too big.
 */
LlmStatus	llm_json_schema_compile(const char *schema, size_t len, LlmGrammar **out, LlmError *err);

#endif							/* LLM_JSON_SCHEMA_H */
