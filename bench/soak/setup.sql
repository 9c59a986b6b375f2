-- Schema of bench/soak.sh, run as the superuser in a fresh temporary server.
--   soak_prompts    40 prompts: 10 short (a few words), 15 medium (2-6
--                   sentences), 15 long (12-30 sentences, a few hundred tokens)
--   soak_params     8 parameter sets: greedy and seeded sampling, 1 to 256
--                   tokens, with and without stop strings
--   soak_reference  each (prompt, parameters)'s answer alone on the idle server
--   soak_results    one row per transaction of the load
--   soak_wrong      every answer that differs from its reference
--   soak_errors     every error other than 57014, with its message
-- soak_try() makes one call and records it; the pgbench scripts call it.
-- Roles soak_a .. soak_d run the load (created by soak.sh, weights there).

CREATE TABLE soak_prompts (id int PRIMARY KEY, class text NOT NULL, prompt text NOT NULL,
                           prompt_tokens int);

CREATE TABLE soak_params (id int PRIMARY KEY, max_tokens int NOT NULL, temperature float8 NOT NULL,
                          top_p float8 NOT NULL, top_k int NOT NULL, seed bigint, stop text[]);

CREATE TABLE soak_reference (prompt_id int, param_id int, completion text NOT NULL,
                             PRIMARY KEY (prompt_id, param_id));

CREATE TABLE soak_results (ts timestamptz NOT NULL DEFAULT clock_timestamp(), role text NOT NULL,
                           client int NOT NULL, kind text NOT NULL, param_id int NOT NULL,
                           prompt_id int NOT NULL, timeout_ms int NOT NULL, sqlstate text NOT NULL,
                           n int NOT NULL, n_wrong int NOT NULL, latency_ms float8 NOT NULL);

CREATE TABLE soak_wrong (ts timestamptz NOT NULL DEFAULT clock_timestamp(), role text, kind text,
                         param_id int, prompt_id int, got text, expected text);

CREATE TABLE soak_errors (ts timestamptz NOT NULL DEFAULT clock_timestamp(), role text, kind text,
                          param_id int, prompt_id int, sqlstate text, message text);

-- Story sentences in the style of the model's training text.
INSERT INTO soak_prompts (id, class, prompt)
WITH s(a) AS (
    SELECT ARRAY[
        'Once upon a time, there was a little girl named Lily.',
        'She loved to play outside in the sun with her friends.',
        'One day, she found a big red ball under a tree.',
        'Tom was a happy boy who liked to run and jump.',
        'The cat sat on the mat and looked at the bird.',
        'Mom said it was time to go home and eat dinner.',
        'The dog barked at the car and wagged his tail.',
        'They went to the park to see the ducks in the pond.',
        'Ben had a blue truck that he wanted to share.',
        'The sky was dark and it started to rain very hard.',
        'Sue wanted to bake a cake for her grandma.',
        'The little bird could not fly because its wing was hurt.',
        'Max and Mia built a tall tower with their blocks.',
        'The sun came out and everyone was happy again.',
        'He said sorry and they became good friends.']),
n(id, class, k) AS (
    SELECT i, CASE WHEN i <= 10 THEN 'short' WHEN i <= 25 THEN 'medium' ELSE 'long' END,
           CASE WHEN i <= 10 THEN 1 WHEN i <= 25 THEN 2 + i % 5 ELSE 12 + (i * 7) % 19 END
    FROM generate_series(1, 40) i)
SELECT id, class,
       CASE WHEN class = 'short'
            -- the first 1 to 6 words of a sentence
            THEN array_to_string((string_to_array(a[1 + id * 4 % 15], ' '))[1:1 + id % 6], ' ')
            ELSE (SELECT string_agg(a[1 + (id * 7 + j * 11) % 15], ' ' ORDER BY j)
                  FROM generate_series(1, k) j)
       END
FROM n, s;

INSERT INTO soak_params VALUES
    (1, 1,   0,   1,    0,  NULL,      NULL),   -- greedy, one token
    (2, 16,  0,   1,    0,  NULL,      NULL),   -- greedy, short
    (3, 64,  0,   1,    0,  NULL,      NULL),   -- greedy
    (4, 256, 0,   1,    0,  NULL,      NULL),   -- greedy, long answer
    (5, 32,  0.8, 0.95, 0,  42,        NULL),   -- seeded nucleus sampling
    (6, 128, 1.0, 1,    40, 7,         NULL),   -- seeded top-k sampling
    (7, 64,  0.7, 1,    0,  123456789, ARRAY['.']),     -- seeded, stops at a period
    (8, 200, 0,   1,    0,  NULL,      ARRAY['!', 'The end']);  -- greedy with stops

-- One call of the load: kind 'single' (llm_generate) or 'batch'
-- (llm_generate_batch of 4 consecutive prompts), compared with the references
-- in SQL and recorded in soak_results.  A statement timeout or a cancel
-- (57014) and any other error are caught and recorded too, so no pgbench
-- client stops on them; the handlers' own inserts run after the timeout
-- has fired, and a second cancel there is caught again.
CREATE FUNCTION soak_try(p_kind int, p_param int, p_prompt int, p_timeout int, p_client int)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    pr soak_params;
    kind text := CASE WHEN p_kind = 0 THEN 'batch' ELSE 'single' END;
    t0 timestamptz := clock_timestamp();
    got text;
    ids int[];
    n int := 1;
    n_wrong int := 0;
    st text;
    msg text;
BEGIN
    SELECT * INTO pr FROM soak_params WHERE id = p_param;
    BEGIN
        IF kind = 'batch' THEN
            ids := ARRAY(SELECT (p_prompt - 1 + k) % 40 + 1 FROM generate_series(0, 3) k);
            n := 4;
            WITH g AS (
                SELECT b.ord, b.completion
                FROM llm_generate_batch(ARRAY(SELECT p.prompt FROM unnest(ids) WITH ORDINALITY u(id, o)
                                              JOIN soak_prompts p USING (id) ORDER BY o),
                                        max_tokens => pr.max_tokens, temperature => pr.temperature,
                                        top_p => pr.top_p, top_k => pr.top_k, seed => pr.seed,
                                        stop => pr.stop) b)
            INSERT INTO soak_wrong (role, kind, param_id, prompt_id, got, expected)
            SELECT session_user, kind, p_param, u.id, g.completion, r.completion
            FROM unnest(ids) WITH ORDINALITY u(id, o)
            LEFT JOIN g ON g.ord = u.o
            JOIN soak_reference r ON r.prompt_id = u.id AND r.param_id = p_param
            WHERE g.completion IS DISTINCT FROM r.completion;
            GET DIAGNOSTICS n_wrong = ROW_COUNT;
        ELSE
            got := llm_generate((SELECT prompt FROM soak_prompts WHERE id = p_prompt),
                                max_tokens => pr.max_tokens, temperature => pr.temperature,
                                top_p => pr.top_p, top_k => pr.top_k, seed => pr.seed,
                                stop => pr.stop);
            INSERT INTO soak_wrong (role, kind, param_id, prompt_id, got, expected)
            SELECT session_user, kind, p_param, p_prompt, got, r.completion
            FROM soak_reference r
            WHERE r.prompt_id = p_prompt AND r.param_id = p_param AND got IS DISTINCT FROM r.completion;
            GET DIAGNOSTICS n_wrong = ROW_COUNT;
        END IF;
        INSERT INTO soak_results (role, client, kind, param_id, prompt_id, timeout_ms, sqlstate, n,
                                  n_wrong, latency_ms)
        VALUES (session_user, p_client, kind, p_param, p_prompt, p_timeout, 'ok', n, n_wrong,
                extract(epoch FROM clock_timestamp() - t0) * 1000);
    EXCEPTION
        WHEN query_canceled THEN
            INSERT INTO soak_results (role, client, kind, param_id, prompt_id, timeout_ms, sqlstate, n,
                                      n_wrong, latency_ms)
            VALUES (session_user, p_client, kind, p_param, p_prompt, p_timeout, '57014', n, 0,
                    extract(epoch FROM clock_timestamp() - t0) * 1000);
        WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
            BEGIN
                INSERT INTO soak_errors (role, kind, param_id, prompt_id, sqlstate, message)
                VALUES (session_user, kind, p_param, p_prompt, st, msg);
                INSERT INTO soak_results (role, client, kind, param_id, prompt_id, timeout_ms, sqlstate,
                                          n, n_wrong, latency_ms)
                VALUES (session_user, p_client, kind, p_param, p_prompt, p_timeout, st, n, 0,
                        extract(epoch FROM clock_timestamp() - t0) * 1000);
            EXCEPTION WHEN query_canceled THEN
                INSERT INTO soak_results (role, client, kind, param_id, prompt_id, timeout_ms, sqlstate,
                                          n, n_wrong, latency_ms)
                VALUES (session_user, p_client, kind, p_param, p_prompt, p_timeout, st, n, 0,
                        extract(epoch FROM clock_timestamp() - t0) * 1000);
            END;
    END;
END $$;

-- The references: every (prompt, parameters) alone, one after another, on
-- the idle server; soak.sh runs it before the load and again after it
-- (into soak_recheck) to see that the restarted worker still gives them.
CREATE FUNCTION soak_answer(p_prompt int, p_param int) RETURNS text LANGUAGE sql AS $$
    SELECT llm_generate(p.prompt, max_tokens => pr.max_tokens, temperature => pr.temperature,
                        top_p => pr.top_p, top_k => pr.top_k, seed => pr.seed, stop => pr.stop)
    FROM soak_prompts p, soak_params pr WHERE p.id = p_prompt AND pr.id = p_param
$$;
