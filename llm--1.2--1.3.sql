/* llm--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION llm UPDATE TO '1.3'" to load this file. \quit

-- llm_extract shows the model its schema with each enum of more than 32
-- values written as a note of its size, ["... 5000 values"] (an enum of
-- 5,000 place names, written out, made a prompt of 29,772 SmolLM2 tokens
-- against a context of 8,192, and the worker refused it); the grammar still
-- follows the whole schema.  Still a single SELECT, which the planner
-- inlines, and folds the outline of a constant schema once.
CREATE FUNCTION llm_schema_outline(schema jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'llm_schema_outline'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION llm_schema_outline(jsonb) IS
'the JSON Schema as llm_extract shows it to the model: each enum of more than 32 values written as ["... N values"]';

CREATE OR REPLACE FUNCTION llm_extract(input text, schema jsonb, instruction text DEFAULT NULL,
                                       max_tokens int DEFAULT 256, on_error text DEFAULT 'error',
                                       chat boolean DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
SELECT @extschema@.llm_generate(
           coalesce(instruction, 'Extract the information in the text as JSON that follows the JSON Schema.')
           OPERATOR(pg_catalog.||) E'\n\nJSON Schema: '
           OPERATOR(pg_catalog.||) @extschema@.llm_schema_outline(schema)::pg_catalog.text
           OPERATOR(pg_catalog.||) E'\n\nText: ' OPERATOR(pg_catalog.||) input
           OPERATOR(pg_catalog.||) E'\n\nJSON:',
           max_tokens => max_tokens, chat => chat, on_error => on_error, json_schema => schema)::pg_catalog.jsonb
$$;
