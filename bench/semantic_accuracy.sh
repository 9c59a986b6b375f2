#!/usr/bin/env bash
# Accuracy of the semantic functions, uncalibrated (calibrate => false) and
# calibrated (the default), on bench/data/semantic_eval (250 texts written
# for it), for each model given (default: SmolLM2-135M-Instruct and Gemma 3
# 270M), each served by a temporary server (tools/pgtemp.sh):
#   - sentiment, 3 labels (llm_classify), 90 texts;
#   - complaint or not (llm_filter, 'Is this a complaint?'), 60 texts;
#   - topic, 5 labels (llm_classify), 60 texts;
# each beside the majority-label baseline (the share of the commonest label);
#   - extraction (llm_extract) of a JSON Schema with one required and three
#     optional properties, 40 texts: of the optional fields a text states,
#     the share filled and the share filled right (and the required name).
# Writes bench/results/$NAME.{md,csv} (NAME default semantic_accuracy).
#
#   bench/semantic_accuracy.sh [MODEL.gguf]...
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
NAME=${NAME:-semantic_accuracy}
OUT=bench/results
DATA=bench/data/semantic_eval
mkdir -p "$OUT"
make -s -j"$(nproc)" >/dev/null
if [ "$(id -u)" -eq 0 ] || [ -w "$(pg_config --pkglibdir)" ]; then make -s install >/dev/null; fi
if [ $# -eq 0 ]; then
    set -- "$(tools/fetch-model.sh smollm2 | tail -n 1)" "$(tools/fetch-model.sh gemma | tail -n 1)"
fi

sentiment="ARRAY['positive', 'negative', 'neutral']"
topics="ARRAY['sports', 'politics', 'technology', 'health', 'business']"

# The measures of one model, as CSV rows (model,task,metric,n,value), on stdout.
measure() {
    local model=$1 m
    m=$(basename "$model" .gguf)
    . tools/pgtemp.sh
    pgtemp_start "$model" "llm.threads = $THREADS" >&2
    cp "$DATA"/*.tsv "$DATA"/extraction_schema.json "$PGTEMP_DIR/"
    chmod a+r "$PGTEMP_DIR"/*.tsv "$PGTEMP_DIR"/extraction_schema.json
    "${PSQL[@]}" -At -F , <<SQL
CREATE TABLE sentiment (id int PRIMARY KEY, body text, label text);
CREATE TABLE complaint (id int PRIMARY KEY, body text, label text);
CREATE TABLE topic (id int PRIMARY KEY, body text, label text);
CREATE TABLE extraction (id int PRIMARY KEY, body text, name text, age text, city text, email text);
COPY sentiment FROM '$PGTEMP_DIR/sentiment.tsv' WITH (FORMAT text, HEADER true);
COPY complaint FROM '$PGTEMP_DIR/complaint.tsv' WITH (FORMAT text, HEADER true);
COPY topic FROM '$PGTEMP_DIR/topic.tsv' WITH (FORMAT text, HEADER true);
COPY extraction FROM '$PGTEMP_DIR/extraction.tsv' WITH (FORMAT text, HEADER true, NULL '');
CREATE TABLE schema AS SELECT pg_read_file('$PGTEMP_DIR/extraction_schema.json')::jsonb AS s;

-- each task's answers, uncalibrated and calibrated, one query (one LLM Batch node) each
CREATE TABLE answers (task text, id int, label text, raw text, cal text);
INSERT INTO answers SELECT 'sentiment', id, label,
    llm_classify(body, $sentiment, 'What is the sentiment of the text?', calibrate => false), NULL FROM sentiment;
UPDATE answers a SET cal = x.c FROM (SELECT id, llm_classify(body, $sentiment, 'What is the sentiment of the text?') AS c
    FROM sentiment) x WHERE a.task = 'sentiment' AND a.id = x.id;
INSERT INTO answers SELECT 'complaint', id, label,
    CASE WHEN llm_filter(body, 'Is this a complaint?', calibrate => false) THEN 'yes' ELSE 'no' END, NULL FROM complaint;
UPDATE answers a SET cal = x.c FROM (SELECT id, CASE WHEN llm_filter(body, 'Is this a complaint?') THEN 'yes' ELSE 'no' END AS c
    FROM complaint) x WHERE a.task = 'complaint' AND a.id = x.id;
INSERT INTO answers SELECT 'topic', id, label,
    llm_classify(body, $topics, 'What is the topic of the text?', calibrate => false), NULL FROM topic;
UPDATE answers a SET cal = x.c FROM (SELECT id, llm_classify(body, $topics, 'What is the topic of the text?') AS c
    FROM topic) x WHERE a.task = 'topic' AND a.id = x.id;

SELECT '$m', task, metric, n, round(v, 1) FROM (
    SELECT task, 'majority' AS metric, count(*) AS n,
           100.0 * (SELECT count(*) FROM answers b WHERE b.task = a.task GROUP BY label ORDER BY 1 DESC LIMIT 1) / count(*) AS v
    FROM answers a GROUP BY task
    UNION ALL
    SELECT task, 'uncalibrated', count(*), 100.0 * avg((raw = label)::int) FROM answers GROUP BY task
    UNION ALL
    SELECT task, 'calibrated', count(*), 100.0 * avg((cal = label)::int) FROM answers GROUP BY task
    UNION ALL
    -- the answers' spread: the share of the commonest answer
    SELECT task, 'commonest answer uncalibrated', count(*),
           100.0 * (SELECT count(*) FROM answers b WHERE b.task = a.task GROUP BY raw ORDER BY 1 DESC LIMIT 1) / count(*)
    FROM answers a GROUP BY task
    UNION ALL
    SELECT task, 'commonest answer calibrated', count(*),
           100.0 * (SELECT count(*) FROM answers b WHERE b.task = a.task GROUP BY cal ORDER BY 1 DESC LIMIT 1) / count(*)
    FROM answers a GROUP BY task) r
ORDER BY task, metric;

-- extraction: each optional field a text states, filled, and filled right
CREATE TABLE extracted AS
SELECT e.*, llm_extract(body, (SELECT s FROM schema), max_tokens => 96, on_error => 'null') AS j FROM extraction e;
WITH fields AS (
    SELECT f.field, f.want, j->>f.field AS got, j IS NULL AS failed
    FROM extracted, LATERAL (VALUES ('age', age), ('city', city), ('email', email)) f(field, want)
    WHERE f.want IS NOT NULL),
names AS (SELECT name AS want, j->>'name' AS got FROM extracted)
SELECT '$m', 'extraction', metric, n, round(v, 1) FROM (
    SELECT 'optional fields stated: filled' AS metric, count(*) AS n, 100.0 * avg((got IS NOT NULL)::int) AS v FROM fields
    UNION ALL
    SELECT 'optional fields stated: right', count(*),
           100.0 * avg((got IS NOT NULL AND lower(trim(got)) = lower(trim(want)))::int) FROM fields
    UNION ALL
    SELECT 'optional fields not stated: filled', count(*), 100.0 * avg((j->>f.field IS NOT NULL)::int)
    FROM extracted, LATERAL (VALUES ('age', age), ('city', city), ('email', email)) f(field, want) WHERE f.want IS NULL
    UNION ALL
    SELECT 'name (required): right', count(*), 100.0 * avg((lower(trim(got)) IS NOT DISTINCT FROM lower(trim(want)))::int) FROM names
    UNION ALL
    SELECT 'outputs valid JSON', count(*), 100.0 * avg((j IS NOT NULL)::int) FROM extracted) r
ORDER BY metric;
SQL
    pgtemp_stop
}

csv="$OUT/$NAME.csv"
echo "model,task,metric,n,value" > "$csv"
for model in "$@"; do
    ( measure "$model" ) >> "$csv"
done

# the markdown: per model, a row per classification task, then extraction
{
    echo "# Semantic functions: accuracy, uncalibrated and calibrated"
    echo
    echo "bench/semantic_accuracy.sh on bench/data/semantic_eval; $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads."
    echo "Accuracy in %; \"commonest answer\" is the share of the answer given most often (100: one label for every text)."
    echo "Labels are scored as the answer after 'Text: \"<input>\"', 'Question: <instruction>' and 'Answer:' in plain text;"
    echo "scored in SmolLM2's chat format before, calibrated: sentiment 50.0, complaint 51.7, topic 60.0."
    echo "Extraction: llm_extract with the schema of bench/data/semantic_eval/extraction_schema.json (properties in any"
    echo "order; before that fix an optional property could not follow a required one written first: 21.6% filled with SmolLM2)."
    for model in "$@"; do
        m=$(basename "$model" .gguf)
        echo
        echo "## $m"
        echo
        echo "| task | texts | majority label | uncalibrated | calibrated | commonest answer, uncal. / cal. |"
        echo "|---|---|---|---|---|---|"
        for task in sentiment complaint topic; do
            v() { awk -F, -v m="$m" -v t="$task" -v k="$1" '$1 == m && $2 == t && $3 == k { print $5 }' "$csv"; }
            n=$(awk -F, -v m="$m" -v t="$task" '$1 == m && $2 == t && $3 == "majority" { print $4 }' "$csv")
            echo "| $task | $n | $(v majority) | $(v uncalibrated) | **$(v calibrated)** | $(v 'commonest answer uncalibrated') / $(v 'commonest answer calibrated') |"
        done
        echo
        echo "| extraction (llm_extract) | n | % |"
        echo "|---|---|---|"
        awk -F, -v m="$m" '$1 == m && $2 == "extraction" { print "| " $3 " | " $4 " | " $5 " |" }' "$csv"
    done
} > "$OUT/$NAME.md"
cat "$OUT/$NAME.md"
