--
-- llm_generate: greedy outputs against the golden file, sampling
-- parameters, stop strings, NULLs, encodings and long prompts.
--

-- The golden continuations (fp32, greedy), as written by llama2.c and llama.cpp.
\getenv abs_srcdir PG_ABS_SRCDIR
\set golden_file :abs_srcdir '/../shared/golden/stories260K-greedy.tsv'
CREATE TABLE golden (prompt text, new_tokens int, expected text);
COPY golden FROM :'golden_file' WITH (FORMAT text, HEADER true);
SELECT count(*) AS golden_lines FROM golden;

-- Each greedy completion equals the golden text exactly.
\x on
SELECT g.prompt, g.new_tokens, c.completion = g.expected AS matches_golden,
       replace(c.completion, E'\n', '\n') AS completion
FROM golden g, LATERAL (SELECT llm_generate(g.prompt, g.new_tokens) AS completion) c
ORDER BY g.prompt;
\x off

-- Greedy is the default.
SELECT llm_generate('Once upon a time', 64) = expected AS default_is_greedy
FROM golden WHERE prompt = 'Once upon a time';

-- Fewer tokens give a prefix of the longer completion.
SELECT starts_with(expected, llm_generate('Lily and Ben', 16)) AS prefix
FROM golden WHERE prompt = 'Lily and Ben';

-- Sampling filters that leave one candidate are greedy too.
SELECT llm_generate('The cat sat on', 64, temperature => 1.0, top_k => 1) = expected AS top_k_1,
       llm_generate('The cat sat on', 64, temperature => 1.0, top_p => 0.000001) = expected AS tiny_top_p
FROM golden WHERE prompt = 'The cat sat on';

-- A seed makes sampling repeatable.
SELECT llm_generate('Once upon a time', 32, temperature => 0.9, seed => 42)
     = llm_generate('Once upon a time', 32, temperature => 0.9, seed => 42) AS same_seed_same_text;

-- Stop strings cut the completion before the stop string.
SELECT llm_generate('Once upon a time', 64, stop => ARRAY['Lily']);
SELECT llm_generate('Once upon a time', 64, stop => ARRAY['zzz', 'park']);
SELECT llm_generate('Once upon a time', 64, stop => ARRAY[E'\n']);

-- max_tokens => 0 generates nothing; a NULL prompt gives NULL.
SELECT llm_generate('Once upon a time', 0) = '' AS empty;
SELECT llm_generate(NULL) IS NULL AS null_prompt;
SELECT llm_generate(NULL, 16, 0.5, 0.9, 40, 1, ARRAY['x']) IS NULL AS null_prompt_with_params;

-- Non-ASCII prompts go to the model as UTF-8 and the result is valid text.
SELECT length(llm_generate('Zoë ate a crème brûlée ☕', 16)) > 0 AS non_ascii;
SELECT llm_generate('', 8) IS NOT NULL AS empty_prompt;

-- A prompt longer than the context: both token counts in the detail.
SELECT llm_generate(repeat('Once upon a time there was a cat. ', 3000), 8);

-- Per row, in a query.
CREATE TABLE docs (id int, body text);
INSERT INTO docs VALUES (1, 'Once upon a time'), (2, 'Lily and Ben'), (3, NULL);
SELECT d.id, llm_generate(d.body, 64) = g.expected AS matches_golden
FROM docs d LEFT JOIN golden g ON g.prompt = d.body ORDER BY d.id;
