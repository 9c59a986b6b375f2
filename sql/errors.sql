--
-- Bad parameters (checked before anything is queued) and privileges.
--
CREATE FUNCTION sqlstate_of(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE query;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

SELECT llm_generate('Once upon a time', -1);

SELECT q, sqlstate_of(q) FROM (VALUES
    ($$SELECT llm_generate('x', -1)$$),
    ($$SELECT llm_generate('x', NULL)$$),
    ($$SELECT llm_generate('x', 8, -0.5)$$),
    ($$SELECT llm_generate('x', 8, 'NaN')$$),
    ($$SELECT llm_generate('x', 8, 'Infinity')$$),
    ($$SELECT llm_generate('x', 8, NULL)$$),
    ($$SELECT llm_generate('x', 8, 1.0, 0)$$),
    ($$SELECT llm_generate('x', 8, 1.0, 1.5)$$),
    ($$SELECT llm_generate('x', 8, 1.0, -0.1)$$),
    ($$SELECT llm_generate('x', 8, 1.0, 'NaN')$$),
    ($$SELECT llm_generate('x', 8, 1.0, 1.0, -1)$$),
    ($$SELECT llm_generate('x', 8, stop => ARRAY['a', NULL])$$),
    ($$SELECT llm_generate('x', 8, stop => ARRAY[''])$$),
    ($$SELECT llm_generate(NULL, -1)$$),
    ($$SELECT * FROM llm_generate_batch(ARRAY['x'], -1)$$),
    ($$SELECT * FROM llm_generate_batch(ARRAY['x'], 8, top_p => 2)$$),
    ($$SELECT * FROM llm_generate_batch(NULL, 8, temperature => -1)$$),
    ($$SELECT llm_generate(repeat('x', 100000), 8)$$),
    ($$SELECT llm_generate('x', 8, 1.0, 1.0, 0, -1)$$),
    ($$SELECT llm_generate('x', 8, stop => '{}')$$)
) AS t(q);

-- stories260K has no chat format: asking for one is refused, by argument or by setting.
SELECT llm_generate('Once upon a time', 4, chat => true);
SET llm.chat = on;
SELECT llm_generate('Once upon a time', 4);
SELECT llm_generate('Once upon a time', 4, chat => false);
RESET llm.chat;

-- A system prompt is for chat: without it, an error; llm.system_prompt only applies to chat.
SELECT llm_generate('Once upon a time', 4, system => 'Be brief.');
SELECT llm_generate('Once upon a time', 4, chat => true, system => 'Be brief.');
SET llm.system_prompt = 'Be brief.';
SELECT llm_generate('Once upon a time', 4);
SELECT llm_generate('Once upon a time', 4, chat => true);
RESET llm.system_prompt;

-- llm_chat: messages a non-empty JSON array of objects, each with a role of system, user, assistant
-- or tool; tools an array; each refusal names the element, before anything is queued (NULL messages:
-- NULL, the other arguments still checked).  stories260K has no chat template: the worker refuses.
SELECT llm_chat('{"role": "user", "content": "Hi"}');
SELECT llm_chat('"Hi"');
SELECT llm_chat('[]');
SELECT llm_chat('[{"role": "user", "content": "Hi"}, 42]');
SELECT llm_chat('[{"content": "Hi"}]');
SELECT llm_chat('[{"role": null, "content": "Hi"}]');
SELECT llm_chat('[{"role": "system", "content": "x"}, {"role": "User", "content": "Hi"}]');
SELECT llm_chat('[{"role": "user", "content": "Hi"}]', tools => '{"type": "function"}');
SELECT llm_chat(NULL, tools => '"get_weather"');
SELECT llm_chat(NULL, -1);
SELECT llm_chat(NULL) IS NULL AS no_request;
SELECT llm_chat('[{"role": "user", "content": "Hi"}]', 4);
SELECT llm_chat('[{"role": "user", "content": "Hi"}]', 4, on_error => 'null') IS NULL AS failed;

-- Checked as the worker will see them (single precision): one message, before anything is queued.
SELECT llm_generate('x', 4, temperature => 1e308);
SELECT llm_generate('x', 4, top_p => 1e-300);

-- A request larger than llm.max_prompt_bytes is refused before it reaches shared memory.
SET llm.max_prompt_bytes = 1024;
SELECT llm_generate(repeat('a', 2000), 4);
SELECT count(*) FROM llm_generate_batch(array_fill(repeat('a', 2000), ARRAY[300]), 4);
SELECT llm_generate('Once upon a time', 4, stop => ARRAY[repeat('b', 1100)]);
SELECT llm_chat('[{"role": "user", "content": "Hi"}]', 4, tools => jsonb_build_array(repeat('t', 1000)));
RESET llm.max_prompt_bytes;

-- The settings that size shared memory need a restart, and llm.model a reload;
-- each says how to change it.
SET llm.max_queued_requests = 10;
SET llm.model = 'other.gguf';
SET llm.device = cpu;

-- Only what changes server state is withheld from PUBLIC.
CREATE ROLE llm_regress_user;
SELECT p.proname, has_function_privilege('llm_regress_user', p.oid, 'EXECUTE') AS executable
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'llm')
ORDER BY 1;
SELECT c.relname, has_table_privilege('llm_regress_user', c.oid, 'SELECT') AS readable
FROM pg_class c JOIN pg_depend d ON d.objid = c.oid
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'llm')
ORDER BY 1;
SELECT model_path IS NOT NULL AS path_shown FROM llm_worker_status();
-- The fair shares' settings are a superuser's: no role may raise its own share.
SET llm.role_weight = 0;
SET llm.max_requests_per_role = -2;
ALTER ROLE llm_regress_user SET llm.role_weight = 1001;
ALTER ROLE llm_regress_user SET llm.role_weight = 4;
SELECT setconfig FROM pg_db_role_setting WHERE setrole = 'llm_regress_user'::regrole;
SET ROLE llm_regress_user;
SET llm.role_weight = 10;
SET llm.max_requests_per_role = 10000;
ALTER ROLE llm_regress_user SET llm.role_weight = 10;
ALTER ROLE llm_regress_user RESET llm.role_weight;
SELECT count(*) >= 0 FROM llm_role_stats;
-- the model's path is for members of pg_read_all_settings
SELECT model, model_path IS NULL AS path_hidden FROM llm_worker_status();
SELECT llm_generate('Once upon a time', 4);
SELECT count(*) FROM llm_stats;
SELECT count(*) >= 0 FROM llm_progress;
SELECT llm_reset_stats();
RESET ROLE;
ALTER ROLE llm_regress_user RESET llm.role_weight;
DROP ROLE llm_regress_user;
