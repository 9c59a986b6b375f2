/* llm--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION llm UPDATE TO '1.3'" to load this file. \quit

-- llm_chat: the model's answer to a conversation, a jsonb array of
-- {"role": ..., "content": ...} messages (roles system, user, assistant and
-- tool) rendered by the model's chat template, with tools given to the
-- template as tools and enable_thinking where the template reads it.  The
-- generation parameters are llm_generate's (without chat and system, which
-- the conversation is); over a table, calls run in the LLM Batch node.
CREATE FUNCTION llm_chat(messages jsonb,
                         max_tokens int DEFAULT 128,
                         temperature float8 DEFAULT 0,
                         top_p float8 DEFAULT 1,
                         top_k int DEFAULT 0,
                         seed bigint DEFAULT NULL,
                         stop text[] DEFAULT NULL,
                         on_error text DEFAULT 'error',
                         json_schema jsonb DEFAULT NULL,
                         choices text[] DEFAULT NULL,
                         tools jsonb DEFAULT NULL,
                         enable_thinking boolean DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'llm_chat'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_chat(jsonb, int, float8, float8, int, bigint, text[], text, jsonb, text[], jsonb, boolean) IS
'the model''s answer to a conversation (a jsonb array of messages with roles system, user, assistant and tool) as its chat template renders it, with tools passed to the template and enable_thinking where the template reads it, NULL meaning the template''s default; the other parameters are llm_generate''s; over the rows of a query, calls run together in an LLM Batch plan node';

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
