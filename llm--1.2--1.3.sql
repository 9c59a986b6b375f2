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
