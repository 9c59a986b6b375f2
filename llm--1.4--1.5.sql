/* llm--1.4--1.5.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION llm UPDATE TO '1.5'" to load this file. \quit

-- ======================================================================
-- Background fills (issue 42, part 1): llm_fill() queues a job that a
-- background worker of its own runs in this database, as the role that
-- submitted it, committing every batch_rows rows; jobs resume after a
-- restart or a crash (src/job.c, src/job_worker.c, src/job_launcher.c).
-- ======================================================================

-- One row per job.  Written only by the extension's functions and its job
-- workers (as the table's owner); roles see their own jobs in llm_jobs.
CREATE TABLE llm_job (
    id bigserial PRIMARY KEY,
    role oid NOT NULL,                  -- the submitting role: the job runs as it
    target regclass NOT NULL,
    column_name name NOT NULL,
    function text NOT NULL,             -- generate, classify, filter or probability
    prompt text NOT NULL,               -- an SQL expression over the target's row
    where_clause text,
    search_path text NOT NULL,          -- the submitter's, for prompt and where_clause
    batch_rows int NOT NULL,
    continuous boolean NOT NULL,        -- keeps filling rows inserted or updated later
    worker_pid int,                     -- the job's worker, which the continuous trigger wakes
    max_tokens int NOT NULL,
    temperature float8 NOT NULL,
    top_p float8 NOT NULL,
    top_k int NOT NULL,
    seed bigint,
    stop text[],
    chat boolean,
    system text,
    json_schema jsonb,
    choices text[],
    labels text[],
    instruction text,
    question text,
    threshold float8,
    calibrate boolean NOT NULL,
    state text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'paused', 'done', 'failed', 'cancelled')),
    rows_done bigint NOT NULL DEFAULT 0,    -- filled and committed
    rows_total bigint,                      -- rows_done + rows left, counted when the job (re)starts
    errors bigint NOT NULL DEFAULT 0,       -- rows in llm_job_error
    completion_tokens bigint NOT NULL DEFAULT 0,
    run_seconds float8 NOT NULL DEFAULT 0,  -- time in batches, summed over the job's workers
    requests bigint NOT NULL DEFAULT 0,     -- requests sent by committed batches
    error text,                             -- why it failed
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    started_at timestamptz,
    finished_at timestamptz
);

REVOKE ALL ON llm_job FROM PUBLIC;
REVOKE ALL ON SEQUENCE llm_job_id_seq FROM PUBLIC;

-- The rows a job skipped: their request failed (or had no answer).
CREATE TABLE llm_job_error (
    job_id bigint NOT NULL REFERENCES llm_job(id) ON DELETE CASCADE,
    row_key text NOT NULL,              -- the row's primary key as text, else its ctid
    sqlstate text NOT NULL,
    message text NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (job_id, row_key)
);

REVOKE ALL ON llm_job_error FROM PUBLIC;

CREATE FUNCTION llm_fill(target regclass, column_name name, prompt text,
                         function text DEFAULT 'generate',
                         max_tokens int DEFAULT 128,
                         temperature float8 DEFAULT 0,
                         top_p float8 DEFAULT 1,
                         top_k int DEFAULT 0,
                         seed bigint DEFAULT NULL,
                         stop text[] DEFAULT NULL,
                         chat boolean DEFAULT NULL,
                         system text DEFAULT NULL,
                         json_schema jsonb DEFAULT NULL,
                         choices text[] DEFAULT NULL,
                         labels text[] DEFAULT NULL,
                         instruction text DEFAULT NULL,
                         question text DEFAULT NULL,
                         threshold float8 DEFAULT 0.5,
                         calibrate boolean DEFAULT true,
                         where_clause text DEFAULT NULL,
                         batch_rows int DEFAULT 64,
                         continuous boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'llm_fill'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION llm_fill(regclass, name, text, text, int, float8, float8, int, bigint, text[], boolean, text, jsonb, text[], text[], text, text, float8, boolean, text, int, boolean) IS
'queue a background job that fills column_name of every row of target where it is NULL (and where_clause holds) with the answer of function (generate, classify, filter or probability) to prompt, an SQL expression over the row; runs as the calling role, commits every batch_rows rows, resumes after a restart; continuous => true keeps filling rows inserted or updated later (a trigger wakes the job) until it is cancelled; returns the job id';

-- The statement trigger of a continuous job (its argument: the job id):
-- wakes the job's worker when the statement's transaction commits.
CREATE FUNCTION llm_job_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'llm_job_trigger'
LANGUAGE C;

COMMENT ON FUNCTION llm_job_trigger() IS
'statement trigger of a continuous llm_fill job (argument: the job id): wakes its worker when the transaction commits';

CREATE FUNCTION llm_job_cancel(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'llm_job_cancel'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION llm_job_cancel(bigint) IS
'cancel a queued, running or paused job after its current batch; false when it had already ended';

CREATE FUNCTION llm_job_pause(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'llm_job_pause'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION llm_job_pause(bigint) IS
'pause a queued or running job after its current batch; false when it was not queued or running';

CREATE FUNCTION llm_job_resume(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'llm_job_resume'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION llm_job_resume(bigint) IS
'resume a paused job (or restart a queued or running one whose worker is gone); false when it had ended';

CREATE FUNCTION llm_job_wait(id bigint, timeout interval DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'llm_job_wait'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION llm_job_wait(bigint, interval) IS
'wait until the job is done, failed, cancelled or paused (or timeout passes) and return its state; needs READ COMMITTED';

CREATE VIEW llm_jobs WITH (security_barrier) AS
SELECT j.id,
       j.role::regrole AS role,
       j.target,
       j.column_name,
       j.function,
       j.state,
       j.continuous,
       j.rows_done,
       j.rows_total,
       j.errors,
       j.requests,
       CASE WHEN j.run_seconds > 0 THEN j.completion_tokens / j.run_seconds END AS tokens_per_second,
       CASE WHEN j.run_seconds > 0 THEN j.rows_done / j.run_seconds END AS rows_per_second,
       j.created_at,
       j.started_at,
       j.finished_at,
       CASE WHEN j.state OPERATOR(pg_catalog.=) 'running' AND j.rows_done > 0 AND j.rows_total IS NOT NULL
            THEN pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs =>
                 j.run_seconds / j.rows_done * GREATEST(j.rows_total - j.rows_done - j.errors, 0))
       END AS eta,
       j.error
FROM @extschema@.llm_job j
WHERE pg_catalog.pg_has_role(CURRENT_USER, j.role, 'USAGE');

COMMENT ON VIEW llm_jobs IS
'the background fill jobs of the roles the current one has the privileges of: state, rows done and total, rows skipped for errors, requests sent, tokens and rows per second of the job''s time, ETA';

GRANT SELECT ON llm_jobs TO PUBLIC;

CREATE VIEW llm_job_errors WITH (security_barrier) AS
SELECT e.job_id, e.row_key, e.sqlstate, e.message, e.failed_at
FROM @extschema@.llm_job_error e JOIN @extschema@.llm_job j ON j.id OPERATOR(pg_catalog.=) e.job_id
WHERE pg_catalog.pg_has_role(CURRENT_USER, j.role, 'USAGE');

COMMENT ON VIEW llm_job_errors IS
'the rows background fill jobs skipped because their request failed: the row''s key (primary key, else ctid), SQLSTATE and message';

GRANT SELECT ON llm_job_errors TO PUBLIC;

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
