--
-- The LLM Batch plan node: llm_generate() over the rows of a query runs a
-- window of rows at once, and every query gives the answers, in the order,
-- that it gives row by row (llm.batch_rows = 0 plans without the node).
--
CREATE TABLE articles (id int PRIMARY KEY, body text);
INSERT INTO articles
SELECT i, (ARRAY['Once upon a time', 'Lily and Ben', 'The cat sat on', 'One day a little'])[i % 4 + 1]
          || ' ' || (ARRAY['a dog', 'the park', 'a big tree', 'her mom', 'a red ball'])[i % 5 + 1]
FROM generate_series(1, 24) i;
UPDATE articles SET body = NULL WHERE id IN (7, 19);

-- A query's rows (as one array, so order counts) with the node and row by row.
CREATE FUNCTION batch_vs_rows(query text, OUT batched text, OUT row_by_row text) AS $$
BEGIN
    EXECUTE format('SELECT array_agg(q::text)::text FROM (%s) q', query) INTO batched;
    SET LOCAL llm.batch_rows = 0;
    EXECUTE format('SELECT array_agg(q::text)::text FROM (%s) q', query) INTO row_by_row;
    SET LOCAL llm.batch_rows = -1;
END $$ LANGUAGE plpgsql;

CREATE FUNCTION same_as_row_by_row(query text) RETURNS boolean AS $$
    SELECT batched = row_by_row FROM batch_vs_rows(query);
$$ LANGUAGE sql;

-- The node: over a scan, under Sort and Limit, in UPDATE, INSERT, CTEs.
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body, 8) FROM articles;
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body, 8) FROM articles ORDER BY id DESC LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM articles WHERE id > 3 AND llm_generate(body, 4) LIKE '%a%';
EXPLAIN (COSTS OFF) UPDATE articles SET body = llm_generate(body, 4) WHERE id < 3;
EXPLAIN (COSTS OFF) INSERT INTO articles SELECT id + 100, llm_generate(body, 4) FROM articles;
EXPLAIN (COSTS OFF) WITH c AS MATERIALIZED (SELECT id, llm_generate(body, 4) AS g FROM articles) SELECT * FROM c;
EXPLAIN (COSTS OFF, VERBOSE) SELECT upper(llm_generate(body, 4)) FROM articles;
-- Calls in an aggregate's arguments run in a node below the aggregate.
-- (a sorted group aggregate, without an ORDER BY of its own that 16 and
-- later would fold into the sort below)
SET enable_hashagg = off;
EXPLAIN (COSTS OFF) SELECT id % 2, string_agg(llm_generate(body, 4), '|') FROM articles GROUP BY 1;
RESET enable_hashagg;
-- Only calls made for every row are batched: those in an aggregate's FILTER
-- are, but a call that CASE or a FILTER may skip runs row by row.
EXPLAIN (COSTS OFF) SELECT count(*) FILTER (WHERE llm_generate(body, 2) LIKE '%a%') FROM articles;
SELECT count(*) FILTER (WHERE llm_generate(body, 2) LIKE '%a%') = count(*) FILTER (WHERE b LIKE '%a%')
FROM (SELECT body, llm_generate(body, 2) AS b FROM articles) s;
EXPLAIN (COSTS OFF) SELECT string_agg(llm_generate(body, 2), ',') FILTER (WHERE id > 3) FROM articles;
EXPLAIN (COSTS OFF, VERBOSE) SELECT CASE WHEN id > 3 THEN llm_generate(body, 4) END FROM articles;
-- No node without a row source, or with llm.batch_rows = 0.
EXPLAIN (COSTS OFF) SELECT llm_generate('Once upon a time', 4);
SET llm.batch_rows = 0;
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body, 8) FROM articles;
RESET llm.batch_rows;
SET llm.batch_rows = 5;
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body, 8) FROM articles;
RESET llm.batch_rows;

-- The answers, in order; NULL bodies give NULL without a request.
SELECT id, llm_generate(body, 8) FROM articles WHERE id <= 8 ORDER BY id;

-- The same answers in the same order as row by row.
SELECT same_as_row_by_row('SELECT id, llm_generate(body, 16) FROM articles');
SELECT same_as_row_by_row('SELECT id, llm_generate(body, 16) FROM articles ORDER BY id DESC');
SELECT same_as_row_by_row('SELECT id, llm_generate(body, 16) FROM articles ORDER BY id LIMIT 5');
SELECT same_as_row_by_row('SELECT id FROM articles WHERE llm_generate(body, 6) LIKE ''%the%''');
SELECT same_as_row_by_row('SELECT DISTINCT llm_generate(body, 6) FROM articles');
SELECT same_as_row_by_row('SELECT * FROM (SELECT id, llm_generate(body, 6) FROM articles OFFSET 0) s WHERE id % 2 = 0');
SELECT same_as_row_by_row('WITH c AS MATERIALIZED (SELECT id, llm_generate(body, 6) AS g FROM articles) SELECT * FROM c');
SELECT same_as_row_by_row('SELECT d.id, llm_generate(d.body || e.body, 6) FROM articles d JOIN articles e ON e.id = d.id + 1');
SELECT same_as_row_by_row('SELECT id, llm_generate(body, 6), llm_generate(body, 3, stop => ARRAY[''a'']) FROM articles');
SELECT same_as_row_by_row('SELECT id % 3, llm_generate(string_agg(body, '' '' ORDER BY id), 6) FROM articles GROUP BY 1 ORDER BY 1');
SELECT same_as_row_by_row('SELECT id % 3, string_agg(llm_generate(body, 6), ''|'' ORDER BY id), count(llm_generate(body, 2)) FROM articles GROUP BY 1 ORDER BY 1');
-- A seed per row: with a seed column, sampling too gives the row-by-row answers.
SELECT same_as_row_by_row('SELECT id, llm_generate(body, 12, temperature => 0.9, seed => id) FROM articles');

-- UPDATE and INSERT ... SELECT write what row by row writes.
CREATE TABLE out_batched AS SELECT id, body FROM articles;
CREATE TABLE out_rows AS SELECT id, body FROM articles;
UPDATE out_batched SET body = llm_generate(body, 10) WHERE id % 2 = 1;
SET llm.batch_rows = 0;
UPDATE out_rows SET body = llm_generate(body, 10) WHERE id % 2 = 1;
RESET llm.batch_rows;
SELECT count(*) AS differ FROM out_batched b JOIN out_rows r USING (id) WHERE b.body IS DISTINCT FROM r.body;
INSERT INTO out_batched SELECT id + 100, llm_generate(body, 10) FROM articles;
SET llm.batch_rows = 0;
INSERT INTO out_rows SELECT id + 100, llm_generate(body, 10) FROM articles;
RESET llm.batch_rows;
SELECT count(*) AS rows, count(*) FILTER (WHERE b.body IS DISTINCT FROM r.body) AS differ
FROM out_batched b JOIN out_rows r USING (id);

-- Prepared statements (the generic plan too) and PL/pgSQL.
PREPARE gen(int) AS SELECT id, llm_generate(body, 8) FROM articles WHERE id <= $1 ORDER BY id;
EXECUTE gen(3);
EXECUTE gen(3);
EXECUTE gen(3);
EXECUTE gen(3);
EXECUTE gen(3);
EXECUTE gen(3);
DEALLOCATE gen;
CREATE FUNCTION summaries(n int) RETURNS TABLE (id int, summary text) AS $$
BEGIN
    RETURN QUERY SELECT d.id, llm_generate(d.body, 8) FROM articles d WHERE d.id <= n ORDER BY d.id;
END $$ LANGUAGE plpgsql;
SELECT * FROM summaries(3);

-- Parallel query: each worker batches its share of the rows.
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body, 8) FROM articles WHERE id % 2 = 0;
SELECT (SELECT array_agg(q ORDER BY id) FROM (SELECT id, llm_generate(body, 8) FROM articles WHERE id % 2 = 0) q)::text
     = (SELECT array_agg(q ORDER BY id) FROM (SELECT id, llm_generate(body, 8) FROM articles WHERE id % 2 = 0 ORDER BY id) q)::text
    AS parallel_same;
SELECT array_agg(q ORDER BY id)::text AS parallel_answers
FROM (SELECT id, llm_generate(body, 8) FROM articles WHERE id % 2 = 0) q \gset
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- ... and its answers are those of a serial plan, row by row
SET llm.batch_rows = 0;
SELECT array_agg(q ORDER BY id)::text = :'parallel_answers' AS parallel_same_as_serial_row_by_row
FROM (SELECT id, llm_generate(body, 8) FROM articles WHERE id % 2 = 0) q;
RESET llm.batch_rows;

-- EXPLAIN ANALYZE counts requests and tokens: the two NULL rows make none, and
-- rows 21 to 24 ask what rows 1 to 4 ask, so they take those answers.
-- (explain_analyze: the plan as every version from 15 shows it; 18 prints
-- row counts as 24.00 and counts index searches)
CREATE FUNCTION explain_analyze(query text) RETURNS SETOF text AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) ' || query LOOP
        CONTINUE WHEN line ~ '^\s*Index Searches: ';
        RETURN NEXT regexp_replace(line, 'rows=(\d+)\.00 ', 'rows=\1 ', 'g');
    END LOOP;
END $$ LANGUAGE plpgsql;
SELECT * FROM explain_analyze('SELECT id, llm_generate(body, 4) FROM articles');
-- With a LIMIT right above, the node reads no more rows than it needs.
SELECT * FROM explain_analyze('SELECT id, llm_generate(body, 4) FROM articles ORDER BY id LIMIT 3');
-- Rows that share an instruction (more than two KV blocks) take it from the
-- prefix cache, and the node counts the cached tokens and the worker's time.
CREATE FUNCTION batch_analyze(query text, OUT requests int, OUT cached_share boolean, OUT request_time boolean) AS $$
DECLARE
    plan jsonb;
    node jsonb;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || query INTO plan;
    node := jsonb_path_query_first(plan, 'strict $.**? (@."Custom Plan Provider" == "LLM Batch")');
    requests := (node->>'Requests')::int;
    -- all but the first row's instruction came from the cache
    cached_share := (node->>'Cached Prompt Tokens')::int >= (requests - 1) * 32;
    request_time := (node->>'Summed Request Time')::float8 > 0;
END $$ LANGUAGE plpgsql;
SELECT * FROM batch_analyze($q$SELECT id, llm_generate('Once upon a time there was a little girl named Lily. '
    || 'She loved to play outside in the sun with her big red ball and her little dog. One day she saw '
    || body, 4) FROM articles$q$);

-- One bad row fails the statement, unless on_error => 'null' asks for NULL.
SELECT id, length(llm_generate(CASE WHEN id = 2 THEN repeat(body, 400) ELSE body END, 4))
FROM articles WHERE id <= 3 ORDER BY id;
SELECT id, length(llm_generate(CASE WHEN id = 2 THEN repeat(body, 400) ELSE body END, 4, on_error => 'null'))
FROM articles WHERE id <= 3 ORDER BY id;
SELECT llm_generate('Once upon a time', 4, on_error => 'ignore');
-- A bad parameter in any row fails the statement, as row by row.
SELECT id, llm_generate(body, CASE WHEN id = 5 THEN -1 ELSE 4 END) FROM articles;

-- The node checks the privilege to run llm_generate, as a call row by row does.
CREATE ROLE batch_user;
GRANT SELECT ON articles TO batch_user;
REVOKE EXECUTE ON FUNCTION llm_generate FROM PUBLIC;
SET ROLE batch_user;
SELECT id, llm_generate(body, 4) FROM articles;
RESET ROLE;
GRANT EXECUTE ON FUNCTION llm_generate TO PUBLIC;

-- llm.max_tokens caps max_tokens; only a superuser may raise it.
SELECT llm_generate('Once upon a time', 100000);
SELECT id, llm_generate(body, 100000) FROM articles;
SET ROLE batch_user;
SET llm.max_tokens = 100000;
RESET ROLE;
REVOKE SELECT ON articles FROM batch_user;
DROP ROLE batch_user;

-- Every request is answered or cancelled: nothing is left queued or running
-- (the worker drops cancelled requests at its next step).
DO $$
BEGIN
    FOR i IN 1..100 LOOP
        EXIT WHEN (SELECT queued_requests + running_requests = 0 FROM llm_stats);
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
SELECT queued_requests, running_requests FROM llm_stats;
