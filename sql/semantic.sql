-- The semantic functions on stories260K (no chat template: plain prompts, " label" after "Answer:").

-- A continuation's log-probability: the likelier one scores higher; the sum is the same every time.
SELECT round(llm_score('Once upon a time, there was a little girl named', ' Lily')::numeric, 4) AS lily,
       round(llm_score('Once upon a time, there was a little girl named', ' Bob')::numeric, 4) AS bob;
SELECT llm_score('Once upon a time', ' there') = llm_score('Once upon a time', ' there') AS same_bits;
SELECT llm_score('Once upon a time', ' there') < 0 AS negative;

-- Labels: the likeliest as the answer; their probabilities sum to 1, in label order.
SELECT llm_classify('Lily was very happy and she smiled.', ARRAY['happy', 'sad']);
SELECT label, round(probability::numeric, 4) AS probability
FROM llm_classify_scores('Lily was very happy and she smiled.', ARRAY['happy', 'sad', 'angry'], 'How does Lily feel?');
SELECT round(sum(probability)::numeric, 10) AS total
FROM llm_classify_scores('Tom lost his toy.', ARRAY['happy', 'sad', 'angry', 'scared']);

-- Yes or no.
SELECT llm_filter('The dog ran to the park.', 'Is there a dog?') IS NOT NULL AS answered;
SELECT round(llm_probability('The dog ran to the park.', 'Is there a dog?')::numeric, 4) AS p_yes;
SELECT llm_filter('The dog ran to the park.', 'Is there a dog?', 0) AS at_zero,
       llm_filter('The dog ran to the park.', 'Is there a dog?', 1) AS at_one;

-- Over a table: one answer per row, NULL for a NULL input.
CREATE TABLE stories (id int PRIMARY KEY, body text);
INSERT INTO stories VALUES (1, 'Lily was very happy and she smiled.'), (2, 'Tom cried because his toy broke.'), (3, NULL);
SELECT id, llm_classify(body, ARRAY['happy', 'sad']) FROM stories ORDER BY id;
SELECT id FROM stories WHERE llm_filter(body, 'Is someone sad?', 0.0) ORDER BY id;
DROP TABLE stories;

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
SELECT llm_agg(body, NULL) FROM tales;
SELECT llm_agg(body, '') FROM tales;
DROP TABLE tales;
