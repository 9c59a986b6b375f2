#!/usr/bin/env bash
# The main job: build llm, start a temporary PostgreSQL 15 with the
# extension preloaded and a model loaded, create a sample table of
# documents, summarize them all in one llm_generate_batch() call, print the
# rows, and stop the server.  Everything lives in a temporary directory
# that is removed at the end, also on failure.
#
# As root it installs the Debian packages it needs and the extension, and
# runs the server as the unprivileged user $LLM_DEMO_USER (default llmtest,
# created if missing).  As another user it runs the server as that user
# (the extension must be installed already).
#
# Environment: LLM_DEMO_MODEL, a GGUF file (default
# ../shared/models/stories260K.gguf); LLM_DEMO_MAX_TOKENS (default 48);
# KEEP=1 keeps the directory and leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."

model=${LLM_DEMO_MODEL:-../shared/models/stories260K.gguf}
max_tokens=${LLM_DEMO_MAX_TOKENS:-48}
demo_user=${LLM_DEMO_USER:-llmtest}
[ -f "$model" ] || { echo "demo: model file $model not found" >&2; exit 1; }

tools/install-deps.sh
echo "demo: building"
make -j"$(nproc)" >/dev/null
if [ "$(id -u)" -eq 0 ] || [ -w "$(pg_config --pkglibdir)" ]; then
    make install >/dev/null
fi
bindir=$(pg_config --bindir)

work=$(mktemp -d /tmp/llm-demo.XXXXXX)
run_as=()
if [ "$(id -u)" -eq 0 ]; then
    id "$demo_user" >/dev/null 2>&1 ||
        useradd --system --create-home --shell /bin/bash "$demo_user"
    run_as=(runuser -u "$demo_user" --)
fi

cleanup() {
    if [ -f "$work/data/postmaster.pid" ]; then
        "${run_as[@]}" "$bindir/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null || true
    fi
    if [ "${KEEP:-0}" = 1 ]; then
        echo "demo: kept $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

# The model goes into a directory the server's user can read.
mkdir -p "$work/models"
cp "$model" "$work/models/"
model_name=$(basename "$model")
[ "$(id -u)" -eq 0 ] && chown -R "$demo_user" "$work"

echo "demo: initialising a cluster in $work/data"
"${run_as[@]}" "$bindir/initdb" -D "$work/data" -A trust -U postgres --no-sync >/dev/null
cat >> "$work/data/postgresql.conf" <<CONF
shared_preload_libraries = 'llm'
llm.model_dir = '$work/models'
llm.model = '$model_name'
listen_addresses = ''
unix_socket_directories = '$work'
port = 5432
CONF
"${run_as[@]}" "$bindir/pg_ctl" -D "$work/data" -l "$work/server.log" -w start >/dev/null
echo "demo: server started (log: $work/server.log)"

psql=("${run_as[@]}" "$bindir/psql" -X -q -h "$work" -U postgres -d postgres -v ON_ERROR_STOP=1 -P pager=off)

"${psql[@]}" <<SQL
CREATE EXTENSION llm;

-- Wait for the worker to load the model; stop with its reason if it cannot.
DO \$\$
DECLARE
    s record;
BEGIN
    FOR i IN 1..600 LOOP
        SELECT * INTO s FROM llm_worker_status();
        EXIT WHEN s.state IN ('ready', 'no model');
        PERFORM pg_sleep(0.1);
    END LOOP;
    IF s.state <> 'ready' THEN
        RAISE EXCEPTION 'the llm worker has no model: %', s.error;
    END IF;
END \$\$;

\echo
\echo 'The worker and its model:'
SELECT pid, state, architecture, parameters, context_length, weight_types, threads
FROM llm_worker_status();

CREATE TABLE docs (id int PRIMARY KEY, title text, body text);
INSERT INTO docs VALUES
 (1, 'The red ball',   'Lily found a red ball in the park. She played with it all day and shared it with her friend Ben.'),
 (2, 'The lost cat',   'Tom could not find his cat. He looked under the bed and in the garden. The cat was asleep in a box.'),
 (3, 'Rainy day',      'It was raining, so Sue and her mom stayed inside. They baked cookies and read a book about a dragon.'),
 (4, 'The big tree',   'A little bird lived in a big tree. One day the wind was strong, but the tree kept the bird safe.'),
 (5, 'New shoes',      'Max got new shoes for his birthday. He ran fast in the park and did not fall once.'),
 (6, 'The boat',       'Anna and her dad made a small boat. They put it on the lake and watched it float away in the sun.'),
 (7, 'Sharing toys',   'Mia did not want to share her doll. Then she saw that playing together with Sam was more fun.'),
 (8, 'The kind dog',   'A big dog helped a little girl find her way home. Her mom gave the dog a bone to say thank you.');

\echo
\echo 'Summaries of every document, generated in one batch (llm_generate_batch):'
\timing on
WITH d AS (
    SELECT array_agg(id ORDER BY id) AS ids,
           array_agg('Summarize: ' || body ORDER BY id) AS prompts
    FROM docs)
SELECT docs.id, docs.title,
       regexp_replace(b.completion, '\s+', ' ', 'g') AS summary,
       b.completion_tokens AS tokens, b.finish_reason
FROM d CROSS JOIN llm_generate_batch(d.prompts, $max_tokens) AS b
JOIN docs ON docs.id = d.ids[b.ord]
ORDER BY b.ord;
\timing off

\echo
\echo 'The worker statistics (llm_stats):'
SELECT completed_requests, prompt_tokens, completion_tokens, steps,
       round(completion_tokens_per_second) AS completion_tokens_per_second,
       kv_blocks_total
FROM llm_stats;
SQL

echo "demo: stopping the server"
"${run_as[@]}" "$bindir/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null
echo "demo: done"
