/* llm--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION llm UPDATE TO '1.4'" to load this file. \quit

-- llm_stats: the tokens speculative decoding (llm.speculative) drafted, and
-- of those the ones accepted, after the columns it had (a 1.3 definition
-- keeps working with the new library: it fills the columns it declares).
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
    OUT draft_accepted_tokens bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'llm_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW llm_stats AS SELECT * FROM llm_stats();

COMMENT ON VIEW llm_stats IS
'queue depth, running sequences, token counts and rates (per second of engine time), KV cache use, prefix cache hits, KV eviction, speculative decoding''s drafted and accepted tokens';

GRANT SELECT ON llm_stats TO PUBLIC;
