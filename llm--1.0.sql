/* llm--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION llm" to load this file. \quit

-- Generation.  VOLATILE: sampling is random unless a seed is given.

CREATE FUNCTION llm_generate(prompt text,
                             max_tokens int DEFAULT 128,
                             temperature float8 DEFAULT 0,
                             top_p float8 DEFAULT 1,
                             top_k int DEFAULT 0,
                             seed bigint DEFAULT NULL,
                             stop text[] DEFAULT NULL,
                             chat boolean DEFAULT NULL,
                             on_error text DEFAULT 'error',
                             system text DEFAULT NULL,
                             json_schema jsonb DEFAULT NULL,
                             choices text[] DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'llm_generate'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_generate(text, int, float8, float8, int, bigint, text[], boolean, text, text, jsonb, text[]) IS
'continuation of the prompt by the model (greedy when temperature is 0; a NULL seed draws a random one; chat wraps the prompt in the model''s chat format, NULL meaning llm.chat, with system as its system prompt, NULL meaning llm.system_prompt; on_error => ''null'' gives NULL for a request that fails; json_schema makes the output JSON valid for that schema, choices makes it exactly one of them, both by masking the tokens that would break them); over the rows of a query, calls run together in an LLM Batch plan node';

CREATE FUNCTION llm_generate_batch(prompts text[],
                                   max_tokens int DEFAULT 128,
                                   temperature float8 DEFAULT 0,
                                   top_p float8 DEFAULT 1,
                                   top_k int DEFAULT 0,
                                   seed bigint DEFAULT NULL,
                                   stop text[] DEFAULT NULL,
                                   chat boolean DEFAULT NULL,
                                   on_error text DEFAULT 'error',
                                   system text DEFAULT NULL,
                                   json_schema jsonb DEFAULT NULL,
                                   choices text[] DEFAULT NULL)
RETURNS TABLE(ord int, completion text, prompt_tokens int,
              completion_tokens int, finish_reason text)
AS 'MODULE_PATHNAME', 'llm_generate_batch'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_generate_batch(text[], int, float8, float8, int, bigint, text[], boolean, text, text, jsonb, text[]) IS
'continuations of all prompts, generated together; one row per prompt in order (on_error => ''null'': a failed prompt gives a NULL completion and finish_reason error)';

-- Semantic functions: read the model's probabilities, no sampling (semantic.c).

CREATE FUNCTION llm_score(prompt text, continuation text, chat boolean DEFAULT false, system text DEFAULT NULL)
RETURNS float8
AS 'MODULE_PATHNAME', 'llm_score'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_score(text, text, boolean, text) IS
'natural log of the probability of continuation right after prompt (the sum of its tokens'' log-probabilities); with chat, prompt is the user''s turn and continuation the start of the reply';

CREATE FUNCTION llm_classify(input text, labels text[], instruction text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'llm_classify'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_classify(text, text[], text) IS
'the label the model finds likeliest as its whole answer about input (one scoring pass per label over a shared prompt; no sampling)';

CREATE FUNCTION llm_classify_scores(input text, labels text[], instruction text DEFAULT NULL)
RETURNS TABLE(label text, probability float8)
AS 'MODULE_PATHNAME', 'llm_classify_scores'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000 ROWS 4;

COMMENT ON FUNCTION llm_classify_scores(text, text[], text) IS
'each label with its probability as the model''s answer about input, in label order (the probabilities sum to 1)';

CREATE FUNCTION llm_filter(input text, question text, threshold float8 DEFAULT 0.5)
RETURNS boolean
AS 'MODULE_PATHNAME', 'llm_filter'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_filter(text, text, float8) IS
'whether the model answers Yes to question about input with at least threshold probability against No';

CREATE FUNCTION llm_probability(input text, question text)
RETURNS float8
AS 'MODULE_PATHNAME', 'llm_probability'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_probability(text, text) IS
'the probability that the model answers Yes (against No) to question about input';

CREATE FUNCTION llm_rank(query text, candidates text[], instruction text DEFAULT NULL)
RETURNS TABLE(rank int, candidate text, score float8)
AS 'MODULE_PATHNAME', 'llm_rank'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000 ROWS 10;

COMMENT ON FUNCTION llm_rank(text, text[], text) IS
'the candidates, best first, scored by the probability that the model answers Yes (against No) to whether each is relevant to query; all candidates are scored in one batch';

-- What the LLM Batch node calls in place of llm_classify_scores() and
-- llm_rank() over a table, once it has run their scoring jobs for a window
-- of rows: their rows from the jobs' log-probabilities (NULL: no rows).
CREATE FUNCTION llm_classify_scores_from(labels text[], logprobs float8[])
RETURNS TABLE(label text, probability float8)
AS 'MODULE_PATHNAME', 'llm_classify_scores_from'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 4;

COMMENT ON FUNCTION llm_classify_scores_from(text[], float8[]) IS
'llm_classify_scores'' rows from its label jobs'' log-probabilities (one per label), for the LLM Batch node';

CREATE FUNCTION llm_rank_from(candidates text[], logprobs float8[])
RETURNS TABLE(rank int, candidate text, score float8)
AS 'MODULE_PATHNAME', 'llm_rank_from'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 10;

COMMENT ON FUNCTION llm_rank_from(text[], float8[]) IS
'llm_rank''s rows from its jobs'' log-probabilities (Yes, then No, per candidate), for the LLM Batch node';

-- Constrained generation: llm_generate with json_schema, as an SQL function
-- the planner inlines, so that over a table the calls run in an LLM Batch
-- node like any llm_generate.  NULL input or schema gives NULL.
CREATE FUNCTION llm_extract(input text, schema jsonb, instruction text DEFAULT NULL,
                            max_tokens int DEFAULT 256, on_error text DEFAULT 'error',
                            chat boolean DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
SELECT llm_generate(coalesce(instruction, 'Extract the information in the text as JSON that follows the JSON Schema.')
                    || E'\n\nJSON Schema: ' || schema::text || E'\n\nText: ' || input || E'\n\nJSON:',
                    max_tokens => max_tokens, chat => chat, on_error => on_error, json_schema => schema)::jsonb
$$;

COMMENT ON FUNCTION llm_extract(text, jsonb, text, int, text, boolean) IS
'the fields of schema taken from input by the model, as jsonb that always validates against schema (decoding follows a grammar compiled from it); an output that max_tokens cuts short is an error, or NULL with on_error => ''null''';

CREATE FUNCTION llm_agg_transfn(internal, text, text)
RETURNS internal
AS 'MODULE_PATHNAME', 'llm_agg_transfn'
LANGUAGE C VOLATILE;

CREATE FUNCTION llm_agg_finalfn(internal, text, text)
RETURNS text
AS 'MODULE_PATHNAME', 'llm_agg_finalfn'
LANGUAGE C VOLATILE;

CREATE AGGREGATE llm_agg(text, text) (
    SFUNC = llm_agg_transfn,
    STYPE = internal,
    FINALFUNC = llm_agg_finalfn,
    FINALFUNC_EXTRA
);

COMMENT ON AGGREGATE llm_agg(text, text) IS
'the model''s answer to instruction (the second argument) over all the rows'' texts, in the aggregate''s ORDER BY: a map-reduce over chunks that fit the context, the chunks of a level run as one batch';

-- Monitoring.

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
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'llm_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW llm_stats AS SELECT * FROM llm_stats();

COMMENT ON VIEW llm_stats IS
'queue depth, running sequences, token counts and rates (per second of engine time), KV cache use, prefix cache hits, KV eviction';

CREATE FUNCTION llm_progress(
    OUT pid int,
    OUT rows_done bigint,
    OUT rows_total bigint,
    OUT prompt_tokens bigint,
    OUT completion_tokens bigint,
    OUT tokens_per_second float8,
    OUT elapsed interval,
    OUT eta interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'llm_progress'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW llm_progress AS
SELECT p.pid, a.query, p.rows_done, p.rows_total, p.prompt_tokens, p.completion_tokens,
       p.tokens_per_second, p.elapsed, p.eta
FROM llm_progress() p LEFT JOIN pg_stat_activity a ON a.pid = p.pid;

COMMENT ON VIEW llm_progress IS
'one row per backend with work in the llm worker: its query, rows done of the total (a plan''s estimate; NULL when unknown), tokens in and out, completion tokens per second, elapsed time and the time left at that rate';

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
    OUT mean_queue_time float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'llm_role_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW llm_role_stats AS SELECT * FROM llm_role_stats();

COMMENT ON VIEW llm_role_stats IS
'per role (the session user): its llm.role_weight, requests queued and running now, requests completed, failed and cancelled, prompt and completion tokens, and the time its requests waited in the queue (total and mean, in milliseconds); roles beyond the 127 tracked are counted in a row with NULL roleid and role';

GRANT SELECT ON llm_role_stats TO PUBLIC;

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
    OUT error text)
RETURNS record
AS 'MODULE_PATHNAME', 'llm_worker_status'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION llm_worker_status() IS
'the llm worker''s process, state, model, and why no model is loaded';

-- The views are for everyone, as the functions under them are.
GRANT SELECT ON llm_stats, llm_progress TO PUBLIC;

-- Changes server state: not for everyone.

CREATE FUNCTION llm_reset_stats()
RETURNS void
AS 'MODULE_PATHNAME', 'llm_reset_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

REVOKE ALL ON FUNCTION llm_reset_stats() FROM PUBLIC;
