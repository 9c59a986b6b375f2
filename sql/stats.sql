--
-- Monitoring: the llm_stats view and llm_worker_status().
--
SELECT queued_requests, running_requests, completed_requests > 0 AS completed,
       failed_requests > 0 AS failed, cancelled_requests,
       prompt_tokens > 0 AS prompt_tokens, completion_tokens > 0 AS completion_tokens,
       steps > 0 AS steps, completion_tokens_per_second > 0 AS rate,
       kv_blocks_used, kv_blocks_total > 0 AS kv_pool
FROM llm_stats;

SELECT llm_reset_stats();
SELECT completed_requests, failed_requests, cancelled_requests, prompt_tokens, completion_tokens,
       steps, completion_tokens_per_second, preemptions, stats_reset > now() - interval '1 minute' AS reset
FROM llm_stats;

SELECT llm_generate('Once upon a time', 8) IS NOT NULL AS generated;
SELECT completed_requests, prompt_tokens, completion_tokens, steps >= 8 AS steps
FROM llm_stats;

-- The same request, counted for its role (the session user).
SELECT weight, queued_requests, running_requests, completed_requests, failed_requests,
       cancelled_requests, prompt_tokens, completion_tokens,
       mean_queue_time >= 0 AND total_queue_time = mean_queue_time AS queue_time
FROM llm_role_stats WHERE role = session_user;

-- A prompt seen before reuses its cached KV blocks (the prefix cache).
SELECT llm_generate(repeat('Once upon a time there was a cat. ', 10), 1) IS NOT NULL AS first,
       llm_generate(repeat('Once upon a time there was a cat. ', 10), 1) IS NOT NULL AS again;
SELECT prefix_cache_hit_tokens > 0 AS prefix_cache_hits, kv_blocks_used, kv_blocks_cached > 0 AS cached
FROM llm_stats;

SELECT state, started_at <= loaded_at AS loaded_after_start, context_length > 0 AS context,
       threads > 0 AS threads
FROM llm_worker_status();

-- The worker shows up in pg_stat_activity.
SELECT backend_type, datname FROM pg_stat_activity WHERE backend_type = 'llm worker';
