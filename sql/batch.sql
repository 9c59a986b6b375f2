--
-- llm_generate_batch: every prompt is queued before the first result is
-- awaited; rows come back in order, one per prompt.
--

-- The golden prompts as one batch: the same texts as one at a time.
SELECT b.ord, g.prompt, b.prompt_tokens, b.completion_tokens, b.finish_reason,
       b.completion = g.expected AS matches_golden
FROM (SELECT array_agg(prompt ORDER BY prompt) AS prompts FROM golden) p,
     llm_generate_batch(p.prompts, 64) b
JOIN (SELECT row_number() OVER (ORDER BY prompt) AS ord, * FROM golden) g ON g.ord = b.ord
ORDER BY b.ord;

-- NULL prompts give rows of NULLs; ord counts from 1 in array order.
SELECT ord, completion IS NULL AS null_completion, prompt_tokens, completion_tokens, finish_reason
FROM llm_generate_batch(ARRAY[NULL, 'Once upon a time', NULL, 'Lily and Ben'], 4);

-- The same prompt twice, with stop strings; a stop gives finish_reason "stop".
SELECT ord, completion, completion_tokens, finish_reason
FROM llm_generate_batch(ARRAY['Once upon a time', 'Once upon a time', 'The cat sat on'], 64,
                        stop => ARRAY['Lily', 'tree']);

-- Generation ends at max_tokens or at the context limit (2048 tokens): "length".
SELECT ord, prompt_tokens, completion_tokens, prompt_tokens + completion_tokens AS total, finish_reason
FROM llm_generate_batch(ARRAY['Once upon a time', repeat('Once upon a time there was a cat. ', 200)], 100);

-- Many more requests than the worker takes at once, each answered without a
-- step (max_tokens 0 only counts the prompt's tokens): the worker claims the
-- rest as the first ones are answered.
SELECT count(*), sum(prompt_tokens), sum(completion_tokens)
FROM llm_generate_batch(array_fill('Once upon a time'::text, ARRAY[300]), 0);
-- ... and so with requests that fail when admitted (prompts over the context), NULL by on_error,
-- each with the error's message.
SELECT count(*), count(completion), min(finish_reason), count(error), min(error) = max(error) AS one_message,
       min(error)
FROM llm_generate_batch(array_fill(repeat('Once upon a time ', 700), ARRAY[100]), 4, on_error => 'null');

-- Empty and NULL arrays give no rows.
SELECT count(*) FROM llm_generate_batch(ARRAY[]::text[]);
SELECT count(*) FROM llm_generate_batch(NULL);

-- More prompts than the engine runs at once (16): all answered, in order,
-- each the same text as when generated alone.
WITH b AS (
    SELECT * FROM llm_generate_batch(
        (SELECT array_agg('Story number ' || n ORDER BY n) FROM generate_series(1, 40) n), 4))
SELECT count(*) AS rows,
       array_agg(ord ORDER BY ord) = array(SELECT generate_series(1, 40)) AS in_order,
       bool_and(completion = llm_generate('Story number ' || ord, 4)) AS same_as_alone
FROM b;

-- An error in one prompt fails the whole call.
SELECT * FROM llm_generate_batch(ARRAY['Once upon a time', repeat('long ', 5000)], 4);
