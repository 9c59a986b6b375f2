/* llm--1.4--1.5.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION llm UPDATE TO '1.5'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- The answer cache (issue 42, part 3; llm.cache_mb, llm.cache_shared).
--
-- llm_stats: the requests answered from the answer cache, and its entries
-- and bytes now, after the columns it had; llm_role_stats: each role's
-- requests answered from it.  A 1.4 definition of either keeps working with
-- the new library: it fills the columns it declares.
-- ---------------------------------------------------------------------------
DROP VIEW llm_stats;
DROP FUNCTION llm_stats();

CREATE FUNCTION llm_stats(
    OUT queued_requests int,
    OUT running_requests int,
    OUT completed_requests bigint,
    OUT failed_requests bigint,
    OUT cancelled_requests bigint,
    OUT prompt_tokens bigint,
    OUT completion_tokens bigint,
    OUT steps bigint,
    OUT prompt_tokens_per_second float8,
    OUT completion_tokens_per_second float8,
    OUT kv_blocks_used int,
    OUT kv_blocks_cached int,
    OUT kv_blocks_total int,
    OUT prefix_cache_hit_tokens bigint,
    OUT preemptions bigint,
    OUT evicted_keys bigint,
    OUT stats_reset timestamptz,
    OUT draft_tokens bigint,
    OUT draft_accepted_tokens bigint,
    OUT answer_cache_hits bigint,
    OUT answer_cache_entries bigint,
    OUT answer_cache_bytes bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'llm_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW llm_stats AS SELECT * FROM llm_stats();

COMMENT ON VIEW llm_stats IS
'queue depth, running sequences, token counts and rates (per second of engine time), KV cache use, prefix cache hits, KV eviction, speculative decoding''s drafted and accepted tokens, answer cache hits (requests answered without computing; the caller''s role''s unless it may read all statistics), entries and bytes';

GRANT SELECT ON llm_stats TO PUBLIC;

DROP VIEW llm_role_stats;
DROP FUNCTION llm_role_stats();

CREATE FUNCTION llm_role_stats(
    OUT roleid oid,
    OUT role name,
    OUT weight int,
    OUT queued_requests int,
    OUT running_requests int,
    OUT completed_requests bigint,
    OUT failed_requests bigint,
    OUT cancelled_requests bigint,
    OUT prompt_tokens bigint,
    OUT completion_tokens bigint,
    OUT total_queue_time float8,
    OUT mean_queue_time float8,
    OUT answer_cache_hits bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'llm_role_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW llm_role_stats AS SELECT * FROM llm_role_stats();

COMMENT ON VIEW llm_role_stats IS
'per role (the session user): its llm.role_weight, requests queued and running now, requests completed, failed and cancelled, prompt and completion tokens, the time its requests waited in the queue (total and mean, in milliseconds), and its requests answered from the answer cache; roles beyond the 127 tracked are counted in a row with NULL roleid and role';

GRANT SELECT ON llm_role_stats TO PUBLIC;
-- end of the answer cache's section
