/* llm--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION llm UPDATE TO '1.1'" to load this file. \quit

-- llm_extract no longer resolves anything through the caller's search_path:
-- a role that put its own llm_generate, || or text ahead of them ran its
-- code as whoever called llm_extract (a SECURITY DEFINER function's owner).
-- Still a single SELECT, so the planner inlines it into the caller's query.
CREATE OR REPLACE FUNCTION llm_extract(input text, schema jsonb, instruction text DEFAULT NULL,
                                       max_tokens int DEFAULT 256, on_error text DEFAULT 'error',
                                       chat boolean DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
SELECT @extschema@.llm_generate(
           coalesce(instruction, 'Extract the information in the text as JSON that follows the JSON Schema.')
           OPERATOR(pg_catalog.||) E'\n\nJSON Schema: ' OPERATOR(pg_catalog.||) schema::pg_catalog.text
           OPERATOR(pg_catalog.||) E'\n\nText: ' OPERATOR(pg_catalog.||) input
           OPERATOR(pg_catalog.||) E'\n\nJSON:',
           max_tokens => max_tokens, chat => chat, on_error => on_error, json_schema => schema)::pg_catalog.jsonb
$$;

-- llm_worker_status() says which device the worker computes on, and why not
-- a GPU when llm.device = auto found none (no llm_cuda.so, no driver, no GPU).
DROP FUNCTION llm_worker_status();

CREATE FUNCTION llm_worker_status(
    OUT pid int,
    OUT state text,
    OUT model text,
    OUT model_path text,
    OUT architecture text,
    OUT parameters bigint,
    OUT layers int,
    OUT context_length int,
    OUT weight_types text,
    OUT threads int,
    OUT started_at timestamptz,
    OUT loaded_at timestamptz,
    OUT error text,
    OUT device text,
    OUT device_note text)
RETURNS record
AS 'MODULE_PATHNAME', 'llm_worker_status'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION llm_worker_status() IS
'the llm worker''s process, state, model, device (and why not a GPU), and why no model is loaded';
