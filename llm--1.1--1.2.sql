/* llm--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION llm UPDATE TO '1.2'" to load this file. \quit

-- llm_generate_batch says why a prompt failed: with on_error => 'null', a
-- failed prompt's row has the error's message and detail in the new column
-- error (NULL for the others).  A new result type, so the function is made
-- anew.
DROP FUNCTION llm_generate_batch(text[], int, float8, float8, int, bigint, text[], boolean, text, text, jsonb, text[]);

CREATE FUNCTION llm_generate_batch(prompts text[],
                                   max_tokens int DEFAULT 128,
                                   temperature float8 DEFAULT 0,
                                   top_p float8 DEFAULT 1,
                                   top_k int DEFAULT 0,
                                   seed bigint DEFAULT NULL,
                                   stop text[] DEFAULT NULL,
                                   chat boolean DEFAULT NULL,
                                   on_error text DEFAULT 'error',
                                   system text DEFAULT NULL,
                                   json_schema jsonb DEFAULT NULL,
                                   choices text[] DEFAULT NULL)
RETURNS TABLE(ord int, completion text, prompt_tokens int,
              completion_tokens int, finish_reason text, error text)
AS 'MODULE_PATHNAME', 'llm_generate_batch'
LANGUAGE C VOLATILE PARALLEL SAFE COST 10000;

COMMENT ON FUNCTION llm_generate_batch(text[], int, float8, float8, int, bigint, text[], boolean, text, text, jsonb, text[]) IS
'continuations of all prompts, generated together; one row per prompt in order (on_error => ''null'': a failed prompt gives a NULL completion, finish_reason error and the error''s message and detail in error)';
