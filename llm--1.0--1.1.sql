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

-- llm_progress says whether rows_total is still a plan's estimate (an LLM
-- Batch node counts the rows once its input is read); rows count as done
-- when the worker has answered them, and the tokens include those of the
-- requests still running.
DROP VIEW llm_progress;
DROP FUNCTION llm_progress();

CREATE FUNCTION llm_progress(
    OUT pid int,
    OUT rows_done bigint,
    OUT rows_total bigint,
    OUT prompt_tokens bigint,
    OUT completion_tokens bigint,
    OUT tokens_per_second float8,
    OUT elapsed interval,
    OUT eta interval,
    OUT total_is_estimate boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'llm_progress'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW llm_progress AS
SELECT p.pid, a.query, p.rows_done, p.rows_total, p.total_is_estimate, p.prompt_tokens, p.completion_tokens,
       p.tokens_per_second, p.elapsed, p.eta
FROM @extschema@.llm_progress() p LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = p.pid;

COMMENT ON VIEW llm_progress IS
'one row per backend with work in the llm worker: its query, rows answered of the total (NULL when unknown; total_is_estimate while it is a plan''s estimate), tokens in and out (running requests'' included), completion tokens per second, elapsed time and the time left at the rate of rows answered';

GRANT SELECT ON llm_progress TO PUBLIC;
