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
