/* llm--1.5--1.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION llm UPDATE TO '1.6'" to load this file. \quit

-- ======================================================================
-- One model worker per device (llm.devices, issue 43): llm_workers() has
-- a row per worker, with what it runs now and what it has answered.
-- ======================================================================

CREATE FUNCTION llm_workers(
    OUT worker int,
    OUT pid int,
    OUT state text,
    OUT device text,
    OUT threads int,
    OUT running_requests int,
    OUT waiting_requests int,
    OUT completed_requests bigint,
    OUT prompt_tokens bigint,
    OUT completion_tokens bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'llm_workers'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION llm_workers() IS
'a row per model worker (llm.devices): its process, state, device and threads, the requests it runs and waits on, and the requests and tokens it has answered';

-- ======================================================================
-- Remote inference nodes (issue 43): an LLM Batch node spreads its
-- requests over the foreign servers of llm.remote_servers, each running
-- llm with the same model (src/remote.c).
-- ======================================================================

-- The identity of the loaded model's answers (the answer cache's: the
-- file's content and the settings that change answers), in hex; NULL while
-- no model is loaded.  A coordinator uses a node only when theirs agree.
CREATE FUNCTION llm_model_identity()
RETURNS text
AS 'MODULE_PATHNAME', 'llm_model_identity'
LANGUAGE C VOLATILE PARALLEL SAFE;

-- A node's entry point: a coordinator's serialized requests in, each
-- one's serialized answer out as it finishes.  Queued as the calling role,
-- whose fair shares apply; internal to llm, not for direct use.
CREATE FUNCTION llm_remote_batch(requests bytea)
RETURNS SETOF bytea
AS 'MODULE_PATHNAME', 'llm_remote_batch'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE ROWS 64;

-- What each remote node answered to this server's LLM Batch nodes.
CREATE FUNCTION llm_remote_stats(
    OUT server name,
    OUT answered_requests bigint,
    OUT prompt_tokens bigint,
    OUT completion_tokens bigint,
    OUT failures bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'llm_remote_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW llm_remote_stats AS SELECT * FROM llm_remote_stats();

COMMENT ON VIEW llm_remote_stats IS
'per remote inference node (foreign server of llm.remote_servers): requests it answered to this server''s LLM Batch nodes, their prompt and completion tokens, and the times it failed or was refused, since the server started';

GRANT SELECT ON llm_remote_stats TO PUBLIC;
-- end of the remote nodes' section
