--
-- The extension and its worker: the library is preloaded by the temporary
-- instance's configuration and the worker serves stories260K.
--
CREATE EXTENSION llm;

-- Wait (up to 30 s) until the worker has loaded its model.
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        EXIT WHEN (SELECT state IN ('ready', 'no model') FROM llm_worker_status());
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;

SELECT pid IS NOT NULL AS running, state, model_path LIKE '%/stories260K.gguf' AS stories260k,
       architecture, parameters, layers, weight_types, error
FROM llm_worker_status();

-- Settings carry the reserved prefix "llm".
SELECT name, CASE WHEN name = 'llm.model_dir' THEN '(path)' ELSE setting END AS setting, unit, context
FROM pg_settings WHERE name LIKE 'llm.%' ORDER BY name;
SET llm.no_such_setting = 1;

-- Objects of the extension (but the row types of its views, which 18 also
-- records as members).
SELECT pg_describe_object(classid, objid, 0) AS object
FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'llm')
  AND classid <> 'pg_type'::regclass
ORDER BY 1;
