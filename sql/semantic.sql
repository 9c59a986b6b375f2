-- The semantic functions on stories260K (no chat template: plain prompts, " label" after "Answer:").

-- A continuation's log-probability: the likelier one scores higher; the sum is the same every time.
SELECT round(llm_score('Once upon a time, there was a little girl named', ' Lily')::numeric, 4) AS lily,
       round(llm_score('Once upon a time, there was a little girl named', ' Bob')::numeric, 4) AS bob;
SELECT llm_score('Once upon a time', ' there') = llm_score('Once upon a time', ' there') AS same_bits;
SELECT llm_score('Once upon a time', ' there') < 0 AS negative;

-- Labels: the likeliest as the answer; their probabilities sum to 1, in label order.
-- Uncalibrated (calibrate => false): the raw probabilities.
SELECT llm_classify('Lily was very happy and she smiled.', ARRAY['happy', 'sad'], calibrate => false);
SELECT label, round(probability::numeric, 4) AS probability
FROM llm_classify_scores('Lily was very happy and she smiled.', ARRAY['happy', 'sad', 'angry'], 'How does Lily feel?', false);
SELECT round(sum(probability)::numeric, 10) AS total
FROM llm_classify_scores('Tom lost his toy.', ARRAY['happy', 'sad', 'angry', 'scared'], calibrate => false);
-- Calibrated (the default): the prior of the content-free inputs divided
-- out; other probabilities, still summing to 1, the likeliest still the answer.
SELECT llm_classify('Lily was very happy and she smiled.', ARRAY['happy', 'sad']);
SELECT label, round(probability::numeric, 4) AS probability
FROM llm_classify_scores('Lily was very happy and she smiled.', ARRAY['happy', 'sad', 'angry'], 'How does Lily feel?');
SELECT round(sum(probability)::numeric, 10) AS total
FROM llm_classify_scores('Tom lost his toy.', ARRAY['happy', 'sad', 'angry', 'scared']);
SELECT (SELECT label FROM llm_classify_scores('Tom lost his toy.', ARRAY['happy', 'sad', 'angry', 'scared'])
        ORDER BY probability DESC LIMIT 1) = llm_classify('Tom lost his toy.', ARRAY['happy', 'sad', 'angry', 'scared'])
       AS classify_is_likeliest;
SELECT calibrate IS NULL AS as_default, label, round(probability::numeric, 4) AS probability
FROM (VALUES (NULL::boolean), (true)) c(calibrate),
     llm_classify_scores('Lily was very happy and she smiled.', ARRAY['happy', 'sad', 'angry'], 'How does Lily feel?', c.calibrate)
ORDER BY 1, 2;

-- Yes or no.
SELECT llm_filter('The dog ran to the park.', 'Is there a dog?') IS NOT NULL AS answered;
SELECT round(llm_probability('The dog ran to the park.', 'Is there a dog?', calibrate => false)::numeric, 4) AS p_yes_raw,
       round(llm_probability('The dog ran to the park.', 'Is there a dog?')::numeric, 4) AS p_yes;
SELECT llm_filter('The dog ran to the park.', 'Is there a dog?', 0) AS at_zero,
       llm_filter('The dog ran to the park.', 'Is there a dog?', 1) AS at_one;
SELECT llm_filter('The dog ran to the park.', 'Is there a dog?', 0.5, false) AS raw_at_half,
       llm_filter('The dog ran to the park.', 'Is there a dog?', 0.5) AS at_half;

-- Over a table: one answer per row, NULL for a NULL input.
CREATE TABLE stories (id int PRIMARY KEY, body text);
INSERT INTO stories VALUES (1, 'Lily was very happy and she smiled.'), (2, 'Tom cried because his toy broke.'), (3, NULL);
SELECT id, llm_classify(body, ARRAY['happy', 'sad']) FROM stories ORDER BY id;
SELECT id FROM stories WHERE llm_filter(body, 'Is someone sad?', 0.0) ORDER BY id;
DROP TABLE stories;

-- The scoring calls over a table run in the LLM Batch node (in the target
-- list, in WHERE, in an aggregate's FILTER), with the answers they get row
-- by row; a repeated question makes no request of its own.
CREATE TABLE notes (id int PRIMARY KEY, body text, labels text[]);
INSERT INTO notes VALUES (1, 'Lily was very happy and she smiled.', ARRAY['happy', 'sad']),
  (2, 'Tom cried because his toy broke.', ARRAY['happy', 'sad', 'angry']),
  (3, NULL, ARRAY['a']), (4, 'Lily was very happy and she smiled.', ARRAY['happy', 'sad']),
  (5, 'The dog ran to the park.', NULL);
EXPLAIN (COSTS OFF)
SELECT id, llm_classify(body, labels), llm_probability(body, 'Is someone sad?'), llm_score(body, ' The end.')
FROM notes WHERE llm_filter(body, 'Is there a dog?', 0.0);
EXPLAIN (COSTS OFF) SELECT count(*) FILTER (WHERE llm_filter(body, 'Is there a dog?')) FROM notes;
CREATE VIEW scored AS
SELECT id, llm_classify(body, labels) AS label, llm_probability(body, 'Is someone sad?') AS p_sad,
       llm_score(body, ' The end.') AS score, llm_filter(body, 'Is someone sad?') AS sad
FROM notes;
EXPLAIN (COSTS OFF) SELECT * FROM scored;
CREATE TEMP TABLE batched AS SELECT * FROM scored;
SET llm.batch_rows = 1;
CREATE TEMP TABLE alone AS SELECT * FROM scored;
RESET llm.batch_rows;
SELECT b.id, b.label, b.label IS NOT DISTINCT FROM a.label AND b.p_sad IS NOT DISTINCT FROM a.p_sad
       AND b.score IS NOT DISTINCT FROM a.score AND b.sad IS NOT DISTINCT FROM a.sad AS as_alone,
       b.p_sad IS NULL AS no_p, b.score IS NULL AS no_score
FROM batched b JOIN alone a USING (id) ORDER BY id;
-- the requests an LLM Batch node made, and the calls it answered from another's request
CREATE FUNCTION batch_requests(query text, OUT requests int, OUT deduplicated int) LANGUAGE plpgsql AS $$
DECLARE
  plan jsonb;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || query INTO plan;
  requests := jsonb_path_query_first(plan, 'lax $.**."Requests"');
  deduplicated := jsonb_path_query_first(plan, 'lax $.**."Deduplicated Calls"');
END $$;
-- 4 inputs, 3 distinct: Yes and No for each; calibrated, Yes and No for
-- each of the 3 content-free inputs too, asked once for the table
SELECT * FROM batch_requests($$SELECT id FROM notes WHERE llm_filter(body, 'Is there a dog?', calibrate => false)$$);
SELECT * FROM batch_requests($$SELECT id FROM notes WHERE llm_filter(body, 'Is there a dog?')$$);
-- 40 distinct texts, 2 labels: 80 requests, and 6 for the content-free
-- inputs, whichever window the rows fall in (the other rows' 6 each are
-- taken from the kept answers); row by row the same 86
CREATE TABLE many AS SELECT i AS id, 'Tom had ' || i || ' red balls.' AS body FROM generate_series(1, 40) i;
SET llm.batch_rows = 4;
SELECT * FROM batch_requests($$SELECT id, llm_classify(body, ARRAY['happy', 'sad']) FROM many$$);
SELECT * FROM batch_requests($$SELECT id, llm_classify(body, ARRAY['happy', 'sad'], calibrate => false) FROM many$$);
CREATE TEMP TABLE many_batched AS SELECT id, llm_classify(body, ARRAY['happy', 'sad']) AS label,
    llm_probability(body, 'Is it about balls?') AS p FROM many;
SET llm.batch_rows = 1;
SELECT completed_requests AS before FROM llm_stats \gset
CREATE TEMP TABLE many_alone AS SELECT id, llm_classify(body, ARRAY['happy', 'sad']) AS label FROM many;
SELECT completed_requests - :before AS row_by_row_requests FROM llm_stats;
CREATE TEMP TABLE many_alone_p AS SELECT id, llm_probability(body, 'Is it about balls?') AS p FROM many;
RESET llm.batch_rows;
SELECT count(*) AS rows, count(*) FILTER (WHERE b.label = a.label AND b.p = p.p) AS as_alone
FROM many_batched b JOIN many_alone a USING (id) JOIN many_alone_p p USING (id);
DROP TABLE many;
-- a bad row's arguments fail the query with the error row by row gives
SELECT id, llm_classify(body, CASE WHEN id = 4 THEN ARRAY['happy', 'happy'] ELSE labels END) FROM notes;
SELECT id FROM notes WHERE llm_filter(body, 'Is there a dog?', CASE WHEN id = 2 THEN 1.5 ELSE 0.5 END);
-- the set-returning ones too: in the target list (a ProjectSet) and as a
-- function scan rescanned per outer row (LATERAL), each row's jobs run in
-- an LLM Batch node below, and the _from function makes the same rows
EXPLAIN (COSTS OFF) SELECT id, llm_classify_scores(body, labels), llm_probability(body, 'Is someone sad?') FROM notes;
EXPLAIN (COSTS OFF) SELECT n.id, r.* FROM notes n, LATERAL llm_rank(n.body, ARRAY['a dog', 'a toy']) r;
CREATE VIEW ranked AS
SELECT n.id, s.label, s.probability, r.rank, r.candidate, r.score
FROM notes n LEFT JOIN LATERAL llm_classify_scores(n.body, n.labels, 'How does someone feel?') WITH ORDINALITY s ON true
     LEFT JOIN LATERAL llm_rank(n.body, ARRAY['a dog', 'a toy', 'a smile']) r ON r.rank = s.ordinality;
CREATE TEMP TABLE ranked_batched AS SELECT * FROM ranked;
CREATE TEMP TABLE listed_batched AS SELECT id, (llm_classify_scores(body, labels)).*, (llm_rank(body, labels)).candidate FROM notes;
SET llm.batch_rows = 1;
CREATE TEMP TABLE ranked_alone AS SELECT * FROM ranked;
CREATE TEMP TABLE listed_alone AS SELECT id, (llm_classify_scores(body, labels)).*, (llm_rank(body, labels)).candidate FROM notes;
RESET llm.batch_rows;
SELECT id, label, rank, candidate FROM ranked_batched ORDER BY id, label, rank;
SELECT (SELECT count(*) FROM ranked_batched) AS ranked_rows, (SELECT count(*) FROM listed_batched) AS listed_rows,
       NOT EXISTS (SELECT * FROM ranked_batched EXCEPT ALL SELECT * FROM ranked_alone)
       AND NOT EXISTS (SELECT * FROM ranked_alone EXCEPT ALL SELECT * FROM ranked_batched) AS ranked_as_alone,
       NOT EXISTS (SELECT * FROM listed_batched EXCEPT ALL SELECT * FROM listed_alone)
       AND NOT EXISTS (SELECT * FROM listed_alone EXCEPT ALL SELECT * FROM listed_batched) AS listed_as_alone;
-- a job per label of notes 1 and 2 (3 and 5 have a NULL), notes 4 asking what 1 asks (calibrated:
-- and per label of each content-free input, for the label sets of 1 and 2); Yes and No per candidate
-- of 1, 2, 5 (and for each content-free input about each query)
SELECT * FROM batch_requests($$SELECT id, llm_classify_scores(body, labels, calibrate => false) FROM notes$$);
SELECT * FROM batch_requests($$SELECT id, llm_classify_scores(body, labels) FROM notes$$);
SELECT * FROM batch_requests($$SELECT * FROM notes, LATERAL llm_rank(body, ARRAY['a dog', 'a toy', 'a smile'])$$);
-- a bad row's arguments: the error row by row gives
SELECT n.id, s.* FROM notes n, LATERAL llm_classify_scores(n.body, CASE WHEN n.id = 4 THEN ARRAY['x', 'x'] ELSE n.labels END) s;
SELECT id, llm_rank(body, ARRAY['a', NULL]) FROM notes;
-- the _from functions alone: the rows from given log-probabilities, checked
SELECT label, round(probability::numeric, 6) FROM llm_classify_scores_from(ARRAY['a', 'b'], ARRAY[ln(0.25), ln(0.75)]);
SELECT rank, candidate, round(score::numeric, 6) FROM llm_rank_from(ARRAY['a', 'b'], ARRAY[ln(0.2), ln(0.8), ln(0.9), ln(0.1)]);
SELECT count(*) FROM llm_classify_scores_from(ARRAY['a', 'b'], NULL);
SELECT * FROM llm_classify_scores_from(ARRAY['a', 'b'], ARRAY[0.0]);
DROP VIEW ranked;
DROP FUNCTION batch_requests;
DROP VIEW scored;
DROP TABLE notes;

-- NULL in, NULL out, without a request.
SELECT llm_score(NULL, 'x') IS NULL AS a, llm_score('x', NULL) IS NULL AS b,
       llm_classify(NULL, ARRAY['a']) IS NULL AS c, llm_classify('x', NULL) IS NULL AS d,
       llm_filter(NULL, 'q') IS NULL AS e, llm_filter('x', NULL) IS NULL AS f,
       llm_probability(NULL, 'q') IS NULL AS g;
SELECT count(*) FROM llm_classify_scores(NULL, ARRAY['a', 'b']);

-- Bad arguments: each a clear error.
SELECT llm_classify('x', ARRAY[]::text[]);
SELECT llm_classify('x', ARRAY['a', 'b', 'a']);
SELECT llm_classify('x', ARRAY['a', NULL]);
SELECT llm_classify('x', ARRAY['a', '']);
SELECT llm_classify('x', ARRAY[['a', 'b'], ['c', 'd']]);
SELECT * FROM llm_classify_scores('x', ARRAY['a', 'a']);
SELECT llm_filter('x', 'q?', 2);
SELECT llm_filter('x', 'q?', 'NaN');
SELECT llm_filter('x', '');
SELECT llm_score('x', '');
SELECT llm_score('x', 'y', system => 'Be brief.');
-- stories260K has no chat template
SELECT llm_score('x', 'y', chat => true);

-- llm_agg: a map-reduce over chunks that fit the context (stories260K: 2048 tokens, so 100 tales take two levels).
CREATE TABLE tales (id int PRIMARY KEY, grp int, body text);
INSERT INTO tales SELECT i, i % 2, 'Tale ' || i || ': Lily and Tom played with a ball in the park, and the sun was warm.'
FROM generate_series(1, 100) i;
INSERT INTO tales VALUES (101, 0, NULL);
SELECT grp, length(llm_agg(body, 'Tell the story of these tales.' ORDER BY id)) > 0 AS answered FROM tales GROUP BY grp ORDER BY grp;
SELECT completed_requests AS before FROM llm_stats \gset
SELECT llm_agg(body, 'Tell the story.' ORDER BY id) = llm_agg(body, 'Tell the story.' ORDER BY id) AS same_text FROM tales;
-- (the planner computes the two identical aggregates once) several chunks, then one to combine their answers
SELECT completed_requests - :before >= 3 AS map_and_reduce FROM llm_stats;
SELECT llm_agg(body, 'Tell the story.' ORDER BY id) IS NULL AS no_rows FROM tales WHERE id > 200;
SELECT llm_agg(body, 'Tell the story.') IS NULL AS only_nulls FROM tales WHERE id = 101;
-- Chunks are packed by the tokenizer's count, not by bytes: stories260K spells
-- these CJK texts a byte a token (315 each, 12,600 in all), and one text of
-- 28,440 (counted in 15 pieces of 2,031 bytes, whole characters) is cut to fit a chunk.
CREATE TABLE cjk AS SELECT i AS id, repeat(chr(29483) || chr(12364) || chr(22909) || chr(12365) || chr(12391)
    || chr(12377) || chr(12290), 15) AS body FROM generate_series(1, 40) i;
SELECT length(llm_agg(body, 'Tell the story.' ORDER BY id)) > 0 AS answered FROM cjk;
SELECT length(llm_agg(repeat(chr(29483), 9480), 'Tell the story.')) > 0 AS one_long_text_answered;
DROP TABLE cjk;
SELECT llm_agg(body, NULL) IS NULL AS null_instruction FROM tales;
SELECT llm_agg(body, CASE WHEN id < 50 THEN 'Tell the story.' ELSE 'Tell the end.' END ORDER BY id) FROM tales;
SELECT llm_agg(body, '') FROM tales;
DROP TABLE tales;
