/*
 * extract.c
 *		llm_schema_outline(schema jsonb): the JSON Schema as llm_extract()
 *		shows it to the model.
 *
 * llm_extract() writes its schema into the prompt, so that the model sees
 * the fields it is to fill; the grammar compiled from the whole schema
 * decides what it may write.  An enum may have thousands of values (the
 * grammar holds them as one trie), and written out they would make the
 * prompt longer than the context: an enum of 5,000 place names made a
 * prompt of 29,772 SmolLM2 tokens against its 8,192, which the worker
 * refused.  So the prompt shows each enum of more than
 * LLM_OUTLINE_ENUM_VALUES values as a list of one string saying how many
 * there are ("... 5000 values"), and everything else as written.  Not the
 * first values and a count: SmolLM2 then wrote a value it was shown
 * rather than the one in the text ("Berber" for "Berlin"; 2 of 5 places
 * right, against 4 of 5 with the note alone, and with 300 values 3 of 5
 * with them all written out, 5 of 5 with the note).  A schema's keywords
 * are looked for where the compiler looks for them (json_schema.c): in a
 * schema object, whose subschemas are the members of "properties" and the
 * values of "items", "additionalProperties" and each of "anyOf"; "enum",
 * "const", "default" and "examples" hold data, left whole.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(llm_schema_outline);

/* Values of an enum the prompt shows, at most: a longer one is a note of its size. */
#define LLM_OUTLINE_ENUM_VALUES 32

static JsonbValue *LlmOutlineSchema(JsonbParseState **state, JsonbValue *schema, JsonbIteratorToken seq);

/* Whether v is a container of jsonb: an object (object true) or an array. */
static bool
LlmIsContainer(const JsonbValue *v, bool object)
{
	if (v->type != jbvBinary)
		return false;
	return object ? JsonContainerIsObject(v->val.binary.data) :
		JsonContainerIsArray(v->val.binary.data) && !JsonContainerIsScalar(v->val.binary.data);
}

/* Whether the key v is the keyword name. */
static bool
LlmKeyIs(const JsonbValue *v, const char *name)
{
	return v->val.string.len == strlen(name) && memcmp(v->val.string.val, name, v->val.string.len) == 0;
}

/* Push an enum's list of values as one string saying how many there are. */
static void
LlmOutlineEnum(JsonbParseState **state, JsonbValue *list)
{
	JsonbValue	note;

	note.type = jbvString;
	note.val.string.val = psprintf("... %u values", JsonContainerSize(list->val.binary.data));
	note.val.string.len = strlen(note.val.string.val);
	pushJsonbValue(state, WJB_BEGIN_ARRAY, NULL);
	pushJsonbValue(state, WJB_ELEM, &note);
	pushJsonbValue(state, WJB_END_ARRAY, NULL);
}

/* Push a container of schemas outlined: an object's members (properties) or an array's elements (anyOf). */
static void
LlmOutlineSchemas(JsonbParseState **state, JsonbValue *schemas)
{
	JsonbIterator *it = JsonbIteratorInit(schemas->val.binary.data);
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_VALUE || tok == WJB_ELEM)
			LlmOutlineSchema(state, &v, tok);
		else
			pushJsonbValue(state, tok, tok == WJB_KEY ? &v : NULL);
	}
}

/*
 * Push schema, outlined, as seq (WJB_VALUE or WJB_ELEM; WJB_DONE for the
 * outermost, an object); returns what pushJsonbValue() returned last, the
 * whole value when schema is the outermost.
 */
static JsonbValue *
LlmOutlineSchema(JsonbParseState **state, JsonbValue *schema, JsonbIteratorToken seq)
{
	JsonbIterator *it;
	JsonbValue	key;
	JsonbValue	v;

	check_stack_depth();
	if (!LlmIsContainer(schema, true))
		return pushJsonbValue(state, seq, schema);
	it = JsonbIteratorInit(schema->val.binary.data);
	(void) JsonbIteratorNext(&it, &v, true);	/* WJB_BEGIN_OBJECT */
	pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
	while (JsonbIteratorNext(&it, &key, true) == WJB_KEY)
	{
		(void) JsonbIteratorNext(&it, &v, true);	/* WJB_VALUE */
		pushJsonbValue(state, WJB_KEY, &key);
		if ((LlmKeyIs(&key, "properties") && LlmIsContainer(&v, true)) ||
			(LlmKeyIs(&key, "anyOf") && LlmIsContainer(&v, false)))
			LlmOutlineSchemas(state, &v);
		else if (LlmKeyIs(&key, "items") || LlmKeyIs(&key, "additionalProperties"))
			LlmOutlineSchema(state, &v, WJB_VALUE);
		else if (LlmKeyIs(&key, "enum") && LlmIsContainer(&v, false) &&
				 JsonContainerSize(v.val.binary.data) > LLM_OUTLINE_ENUM_VALUES)
			LlmOutlineEnum(state, &v);
		else
			pushJsonbValue(state, WJB_VALUE, &v);
	}
	return pushJsonbValue(state, WJB_END_OBJECT, NULL);
}

/*
 * llm_schema_outline(schema jsonb) RETURNS jsonb
 *		The schema with each enum of more than LLM_OUTLINE_ENUM_VALUES
 *		values written as ["... N values"]; a schema that is not an object
 *		as it is.
 */
Datum
llm_schema_outline(PG_FUNCTION_ARGS)
{
	Jsonb	   *schema = PG_GETARG_JSONB_P(0);
	JsonbParseState *state = NULL;
	JsonbValue	root;

	if (!JB_ROOT_IS_OBJECT(schema))
		PG_RETURN_JSONB_P(schema);
	root.type = jbvBinary;
	root.val.binary.data = &schema->root;
	root.val.binary.len = VARSIZE(schema) - VARHDRSZ;
	PG_RETURN_JSONB_P(JsonbValueToJsonb(LlmOutlineSchema(&state, &root, WJB_DONE)));
}
