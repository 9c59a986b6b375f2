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

-- The label functions are calibrated by default (contextual calibration,
-- Zhao et al. 2021): each also scores its labels for content-free inputs
-- ("N/A", "", "[MASK]"), once per instruction and labels in a statement,
-- and divides that prior out of the labels' probabilities, each label
-- scored by its mean log-probability per token.  calibrate => false gives
-- the raw probabilities, as 1.0 did.
DROP FUNCTION llm_classify(text, text[], text);

CREATE FUNCTION llm_classify(input text, labels text[], instruction text DEFAULT NULL,
                             calibrate boolean DEFAULT true)
RETURNS text
AS 'MODULE_PATHNAME', 'llm_classify'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_classify(text, text[], text, boolean) IS
'the label the model finds likeliest as its whole answer about input (one scoring pass per label over a shared prompt; no sampling); calibrated against content-free inputs unless calibrate is false';

DROP FUNCTION llm_classify_scores(text, text[], text);

CREATE FUNCTION llm_classify_scores(input text, labels text[], instruction text DEFAULT NULL,
                                    calibrate boolean DEFAULT true)
RETURNS TABLE(label text, probability float8)
AS 'MODULE_PATHNAME', 'llm_classify_scores'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000 ROWS 4;

COMMENT ON FUNCTION llm_classify_scores(text, text[], text, boolean) IS
'each label with its probability as the model''s answer about input, in label order (the probabilities sum to 1); calibrated against content-free inputs unless calibrate is false';

DROP FUNCTION llm_filter(text, text, float8);

CREATE FUNCTION llm_filter(input text, question text, threshold float8 DEFAULT 0.5,
                           calibrate boolean DEFAULT true)
RETURNS boolean
AS 'MODULE_PATHNAME', 'llm_filter'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_filter(text, text, float8, boolean) IS
'whether the model answers Yes to question about input with at least threshold probability against No; calibrated against content-free inputs unless calibrate is false';

DROP FUNCTION llm_probability(text, text);

CREATE FUNCTION llm_probability(input text, question text, calibrate boolean DEFAULT true)
RETURNS float8
AS 'MODULE_PATHNAME', 'llm_probability'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_probability(text, text, boolean) IS
'the probability that the model answers Yes (against No) to question about input; calibrated against content-free inputs unless calibrate is false';

DROP FUNCTION llm_rank(text, text[], text);

CREATE FUNCTION llm_rank(query text, candidates text[], instruction text DEFAULT NULL,
                         calibrate boolean DEFAULT true)
RETURNS TABLE(rank int, candidate text, score float8)
AS 'MODULE_PATHNAME', 'llm_rank'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000 ROWS 10;

COMMENT ON FUNCTION llm_rank(text, text[], text, boolean) IS
'the candidates, best first, scored by the probability that the model answers Yes (against No) to whether each is relevant to query; all candidates are scored in one batch; calibrated against content-free inputs about the query unless calibrate is false';

COMMENT ON FUNCTION llm_classify_scores_from(text[], float8[]) IS
'llm_classify_scores'' rows from its labels'' log-scores (one per label; their softmax is the probabilities), for the LLM Batch node';

COMMENT ON FUNCTION llm_rank_from(text[], float8[]) IS
'llm_rank''s rows from its log-scores (Yes, then No, per candidate), for the LLM Batch node';
