-- Constrained generation on stories260K: json_schema, choices, llm_extract, and llm_rank.
-- Greedy outputs are fixed for the model, so they are shown; each parses as jsonb.

-- An object of three required properties, in their jsonb order.
SELECT llm_generate('Once upon a time', max_tokens => 200,
                    json_schema => '{"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer"},"happy":{"type":"boolean"}},"required":["name","age","happy"]}') AS out \gset
SELECT :'out'::jsonb ?& ARRAY['name', 'age', 'happy'] AS has_all,
       jsonb_typeof((:'out'::jsonb)->'age') AS age, jsonb_typeof((:'out'::jsonb)->'happy') AS happy,
       length((:'out'::jsonb)->>'name') <= 10 AS short_name;
-- The same bits every time, alone or beside other rows.
SELECT llm_generate('Lily had a dog', max_tokens => 64, json_schema => '{"type":"array","items":{"enum":["red","green","blue"]},"minItems":1,"maxItems":3}');
SELECT llm_generate(p, max_tokens => 64, json_schema => '{"type":"array","items":{"enum":["red","green","blue"]},"minItems":1,"maxItems":3}')
FROM (VALUES ('Lily had a dog'), ('Tom ran'), ('The sun')) v(p);
SELECT completion::jsonb IS NOT NULL AS parses, finish_reason
FROM llm_generate_batch(ARRAY['Once upon a time', 'Lily had a dog'], max_tokens => 64,
                        json_schema => '{"type":"integer"}');
-- Sampled, with a seed: the output is still valid.
SELECT jsonb_typeof(llm_generate('The cat', max_tokens => 64, temperature => 1.5, seed => 42,
                                 json_schema => '{"type":["number","null"]}')::jsonb) IN ('number', 'null') AS valid;

-- choices: exactly one of them.
SELECT llm_generate('Once upon a time', max_tokens => 8, choices => ARRAY['yes', 'no', 'maybe so'])
       IN ('yes', 'no', 'maybe so') AS one_of;
SELECT llm_generate('Lily was', max_tokens => 8, temperature => 2, seed => 3, choices => ARRAY['happy', 'sad'])
       IN ('happy', 'sad') AS one_of;

-- Many choices and large enums: each list is one trie in the grammar, so 300 choices or an enum of
-- 5,000 values (which once failed to start) are followed like three.
SELECT llm_generate('Once upon a time', max_tokens => 8,
                    choices => ARRAY(SELECT 'choice ' || i FROM generate_series(1, 300) i)) ~ '^choice [0-9]+$' AS one_of_300;
SELECT llm_generate('Lily lived in', max_tokens => 32,
                    json_schema => jsonb_build_object('enum', (SELECT jsonb_agg('c' || i) FROM generate_series(1, 5000) i)))::jsonb #>> '{}'
       ~ '^c[0-9]+$' AS one_of_5000;
SELECT llm_generate('Lily lived in', max_tokens => 32,
                    json_schema => jsonb_build_object('type', 'object', 'required', '["place"]'::jsonb, 'properties',
                                                      jsonb_build_object('place', jsonb_build_object('enum',
                                                          (SELECT jsonb_agg('c' || i) FROM generate_series(1, 5000) i)))))::jsonb ->> 'place'
       ~ '^c[0-9]+$' AS place_of_5000;
-- An object of 128 optional properties, the most supported (from 64 they once failed in the worker).
SELECT jsonb_typeof(llm_generate('Once upon a time', max_tokens => 64,
                                 json_schema => jsonb_build_object('type', 'object', 'properties',
                                     (SELECT jsonb_object_agg('p' || i, '{"type":"integer"}'::jsonb) FROM generate_series(1, 128) i)))::jsonb) AS object_of_128;

-- In one batch, calls that differ only in their grammar are different requests.
SELECT llm_generate(p, max_tokens => 8, choices => ARRAY['red']) AS a,
       llm_generate(p, max_tokens => 8, choices => ARRAY['blue']) AS b,
       llm_generate(p, max_tokens => 8, json_schema => '{"const":"green"}') AS c
FROM (VALUES ('Lily had a dog'), ('Lily had a dog')) v(p);

-- llm_extract over a table runs in one LLM Batch node; NULL in, NULL out.
CREATE TABLE notes (id int PRIMARY KEY, body text);
INSERT INTO notes VALUES (1, 'Lily is three years old.'), (2, 'Tom has a red ball.'), (3, NULL);
EXPLAIN (COSTS OFF)
SELECT id, llm_extract(body, '{"type":"object","properties":{"who":{"type":"string","maxLength":12}},"required":["who"]}') FROM notes;
SELECT id, jsonb_typeof(llm_extract(body, '{"type":"object","properties":{"who":{"type":"string","maxLength":12}},"required":["who"]}', max_tokens => 64)->'who') AS who
FROM notes ORDER BY id;
SELECT llm_extract('Lily', NULL) IS NULL AS null_schema;
-- Too few tokens for the schema: an error, or NULL with on_error => 'null'; never a cut output.
SELECT llm_extract('Lily is three.', '{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}', max_tokens => 2);
SELECT llm_extract(body, '{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}',
                   max_tokens => 2, on_error => 'null') IS NULL AS is_null
FROM notes ORDER BY id;
-- Over a table, the error names the row (CONTEXT), with the output so far
-- (DETAIL) and what to change (HINT).
SELECT id, llm_extract(body, '{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}',
                       max_tokens => CASE WHEN id = 2 THEN 3 ELSE 64 END)
FROM notes;
DROP TABLE notes;
-- llm_extract shows the model its schema through llm_schema_outline: an enum of more than 32 values
-- as a note of its size, in a schema, its properties, items and anyOf, never inside data (const) and
-- never a property named enum; an enum of 32 and a schema that is not an object as they are.
SELECT key, value FROM jsonb_each(llm_schema_outline(jsonb_build_object('type', 'object', 'properties', jsonb_build_object(
           'enum', jsonb_build_object('enum', (SELECT jsonb_agg(i) FROM generate_series(1, 33) i)),
           'list', jsonb_build_object('type', 'array', 'items', jsonb_build_object('enum', (SELECT jsonb_agg('v' || i) FROM generate_series(1, 40) i))),
           'either', jsonb_build_object('anyOf', jsonb_build_array(jsonb_build_object('enum', (SELECT jsonb_agg(i) FROM generate_series(1, 5000) i)), true)),
           'data', jsonb_build_object('const', jsonb_build_object('enum', (SELECT jsonb_agg(0) FROM generate_series(1, 40) i))),
           'small', jsonb_build_object('enum', (SELECT jsonb_agg(0) FROM generate_series(1, 32) i)))))->'properties')
ORDER BY key;
SELECT llm_schema_outline('true'), llm_schema_outline('{"enum": "x"}'), llm_schema_outline(NULL) IS NULL AS null_schema;
-- So an enum of 5,000 values works through llm_extract as through llm_generate (written out in the
-- prompt, they made it 39,046 tokens against stories260K's context of 2,048).
SELECT llm_extract('Lily lived in c1234.', jsonb_build_object('type', 'object', 'required', '["place"]'::jsonb, 'properties',
                   jsonb_build_object('place', jsonb_build_object('enum', (SELECT jsonb_agg('c' || i) FROM generate_series(1, 5000) i)))),
                   max_tokens => 32) ->> 'place' ~ '^c[0-9]+$' AS place_of_5000;

-- llm_rank: every candidate once, best first, ranks 1..n.
SELECT array_agg(rank ORDER BY rank) AS ranks, count(DISTINCT candidate) AS candidates,
       bool_and(score BETWEEN 0 AND 1) AS probabilities
FROM llm_rank('a dog', ARRAY['The dog ran.', 'The sun is hot.', 'Lily ate cake.']);
SELECT count(*) FROM llm_rank(NULL, ARRAY['a']);
SELECT count(*) FROM llm_rank('q', ARRAY[]::text[]);
SELECT * FROM llm_rank('q', ARRAY['a', NULL]);

-- Bad schemas and choices: each a clear error naming what is wrong, before anything is queued.
SELECT llm_generate('x', json_schema => '{"type":"string","pattern":"^a"}');
SELECT llm_generate('x', json_schema => '{"type":"object","properties":{"n":{"type":"integer","multipleOf":2}}}');
SELECT llm_generate('x', json_schema => '{"type":"object","properties":{"n":{"type":"integer","maximum":1e30}}}');
SELECT llm_generate('x', json_schema => '{"type":"array","items":{"format":"date"}}');
SELECT llm_generate('x', json_schema => '{"type":"object","additionalProperties":true}');
SELECT llm_generate('x', json_schema => '{"type":"object","properties":{},"required":["a"]}');
SELECT llm_generate('x', json_schema => '{"type":"strin"}');
SELECT llm_generate('x', json_schema => '{"type":"string","minLength":5,"maxLength":2}');
SELECT llm_generate('x', json_schema => '{"type":"string","maxLength":1000000}');
SELECT llm_generate('x', json_schema => '{"enum":[]}');
SELECT llm_generate('x', json_schema => '"string"');
SELECT llm_generate('x', json_schema => 'false');
SELECT llm_generate('x', choices => ARRAY[]::text[]);
SELECT llm_generate('x', choices => ARRAY['a', NULL]);
SELECT llm_generate('x', choices => ARRAY['a', '']);
SELECT llm_generate('x', choices => ARRAY['a'], stop => ARRAY['b']);
SELECT llm_generate('x', choices => ARRAY['a'], json_schema => '{}');
SELECT llm_generate(NULL, json_schema => '{"type":"string","pattern":"x"}');
-- Past the grammar's limits, before anything is queued, the limit named: 129 properties in an object,
-- anyOf of 257 subschemas, 320 ways to begin a value, choices of more than 4,194,304 grammar elements.
SELECT llm_generate('x', json_schema => jsonb_build_object('type', 'object', 'properties',
                             (SELECT jsonb_object_agg('p' || i, '{"type":"integer"}'::jsonb) FROM generate_series(1, 129) i)));
SELECT llm_extract('x', jsonb_build_object('properties', jsonb_build_object('inner', jsonb_build_object('properties',
                            (SELECT jsonb_object_agg('p' || i, '{"type":"integer"}'::jsonb) FROM generate_series(1, 129) i)))));
SELECT llm_generate('x', json_schema => jsonb_build_object('anyOf',
                             (SELECT jsonb_agg(jsonb_build_object('const', i)) FROM generate_series(1, 257) i)));
SELECT llm_generate('x', json_schema => jsonb_build_object('anyOf',
                             (SELECT jsonb_agg(jsonb_build_object('anyOf', (SELECT jsonb_agg(jsonb_build_object('const', 8 * i + k))
                                                                             FROM generate_series(1, 8) k)))
                              FROM generate_series(1, 40) i)));
SELECT llm_generate('x', choices => ARRAY(SELECT repeat(md5(i::text), 4) FROM generate_series(1, 40000) i));
