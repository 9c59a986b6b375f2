#!/usr/bin/env bash
# The semantic functions against the naive route (llm_generate, then parse
# the text), with the same model (default SmolLM2-135M-Instruct, in chat):
#   - rows/s over ROWS (default 256) rows: llm_filter and llm_classify with
#     4 labels, beside llm_generate(max_tokens => 8) of the same question
#     with the answer parsed (the first label named in it), and the same
#     with max_tokens left at its default (128), as written untuned; the
#     LLM Batch node runs each route's calls over the table as one batch;
#   - accuracy on test/data/semantic_labels.tsv (60 texts written for it:
#     sentiment in 3 classes, and a yes/no question each), both routes, and
#     for sentiment the two constrained routes too (llm_extract of an enum
#     field, with the share of valid outputs; llm_generate with choices).
# json_schema decoding speed and mask times are bench/constrained_bench.sh's.
# Prints a table and writes bench/results/$NAME.{md,csv} (NAME default
# semantic_bench).
#
#   bench/semantic_bench.sh [MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-256}
CHAT=${CHAT:-true}				# the naive route's chat argument: false for a base model (Gemma 3 270M)
THREADS=${THREADS:-2}
NAME=${NAME:-semantic_bench}
OUT=bench/results
mkdir -p "$OUT"
make -s -j"$(nproc)"
if [ "$(id -u)" -eq 0 ] || [ -w "$(pg_config --pkglibdir)" ]; then make -s install >/dev/null; fi
model=${1:-$(tools/fetch-model.sh smollm2 | tail -n 1)}

. tools/pgtemp.sh
pgtemp_start "$model" "llm.threads = $THREADS" "llm.cache_mb = 0"
cp test/data/semantic_labels.tsv "$PGTEMP_DIR/labels.tsv"
chmod a+r "$PGTEMP_DIR/labels.tsv"

labels4="ARRAY['positive', 'negative', 'neutral', 'mixed']"
labels3="ARRAY['positive', 'negative', 'neutral']"
sentiment="What is the sentiment of the text?"
# the naive route's prompt: what llm_classify asks, as text to answer (after "Answer:" without chat)
tail=$([ "$CHAT" = true ] && echo "''" || echo "E'\\nAnswer:'")
naive_sentiment() { echo "'$sentiment' || E'\\nAnswer with one of: ' || array_to_string($2, ', ') || E'.\\n\\nText: ' || $1 || $tail"; }
naive_yesno() { echo "$2 || E'\\nAnswer with one of: Yes, No.\\n\\nText: ' || $1 || $tail"; }
# the first of the labels named in an answer, or 'unparsed' (a subquery: the
# answer must be a column, computed below it, or every label would ask again)
parse() { echo "coalesce((SELECT l FROM unnest($2) WITH ORDINALITY AS u(l, o) WHERE position(lower(l) IN lower($1)) > 0 ORDER BY position(lower(l) IN lower($1)), o LIMIT 1), 'unparsed')"; }

"${PSQL[@]}" <<SQL
CREATE TABLE labelled (id int PRIMARY KEY, body text, sentiment text, question text, answer text);
COPY labelled FROM '$PGTEMP_DIR/labels.tsv' WITH (FORMAT text, HEADER true);
CREATE TABLE bench AS
SELECT i AS id, l.body || ' (' || i || ')' AS body, l.question
FROM generate_series(1, $ROWS) i JOIN labelled l ON l.id = (i - 1) % 60 + 1;
SQL

# seconds of one query (its rows discarded)
timed() {
    local t0 t1
    t0=$(date +%s.%N)
    "${PSQL[@]}" -At -c "$1" > /dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
acc=$("${PSQL[@]}" -At -F ' ' <<SQL
SELECT round(100.0 * avg((c = sentiment)::int), 1),
       round(100.0 * avg(($(parse cn "$labels3") = sentiment)::int), 1),
       round(100.0 * avg((f = (answer = 'yes'))::int), 1),
       round(100.0 * avg(($(parse fn "ARRAY['Yes', 'No']") = initcap(answer))::int), 1),
       round(100.0 * avg(($(parse fn "ARRAY['Yes', 'No']") = 'unparsed')::int), 1)
FROM (SELECT sentiment, answer, llm_classify(body, $labels3, '$sentiment') AS c,
             llm_generate($(naive_sentiment body "$labels3"), 8, chat => $CHAT) AS cn,
             llm_filter(body, question) AS f,
             llm_generate($(naive_yesno body question), 8, chat => $CHAT) AS fn
      FROM labelled) s;
SQL
)
read -r acc_c acc_cn acc_f acc_fn unparsed <<< "$acc"
# the constrained routes: llm_extract of a sentiment field, and llm_generate with choices
schema='{"type":"object","properties":{"sentiment":{"enum":["positive","negative","neutral"]}},"required":["sentiment"]}'
ext=$("${PSQL[@]}" -At -F ' ' <<SQL
WITH x AS (SELECT sentiment, llm_extract(body, '$schema', '$sentiment', 32, 'null') AS j,
                  llm_generate($(naive_sentiment body "$labels3"), 8, chat => $CHAT, choices => $labels3) AS c
           FROM labelled)
SELECT round(100.0 * avg((j->>'sentiment' = sentiment)::int), 1),
       round(100.0 * avg((j IS NOT NULL AND j->>'sentiment' = ANY ($labels3))::int), 1),
       round(100.0 * avg((c = sentiment)::int), 1)
FROM x;
SQL
)
read -r acc_x valid_x acc_ch <<< "$ext"
# The timed runs come after the accuracy runs above, which put the prompts'
# shared beginnings (chat template, instruction or question) in the prefix
# cache for both routes alike.  Each run tags the start of its texts, so no
# run finds a text of another in the cache.  Both routes run in the LLM
# Batch node: the naive one's answers as a subquery's column.
tagged() { echo "'[$1 ' || id || '] ' || body"; }
q_filter="SELECT count(*) FROM bench WHERE llm_filter($(tagged f), question)"
q_filter_naive="SELECT count(*) FROM (SELECT llm_generate($(naive_yesno "$(tagged fn)" question), 8, chat => $CHAT) AS a FROM bench) s WHERE $(parse a "ARRAY['Yes', 'No']") = 'Yes'"
q_classify="SELECT count(DISTINCT llm_classify($(tagged c), $labels4, '$sentiment')) FROM bench"
q_classify_naive="SELECT count(DISTINCT $(parse a "$labels4")) FROM (SELECT llm_generate($(naive_sentiment "$(tagged cn)" "$labels4"), 8, chat => $CHAT) AS a FROM bench) s"
# the naive route as written without tuning max_tokens (its default, 128)
q_filter_naive128="SELECT count(*) FROM (SELECT llm_generate($(naive_yesno "$(tagged fd)" question), chat => $CHAT) AS a FROM bench) s WHERE $(parse a "ARRAY['Yes', 'No']") = 'Yes'"
q_classify_naive128="SELECT count(DISTINCT $(parse a "$labels4")) FROM (SELECT llm_generate($(naive_sentiment "$(tagged cd)" "$labels4"), chat => $CHAT) AS a FROM bench) s"

printf 'what,route,rows,seconds,rows_per_s\n' > "$OUT/$NAME.csv"
declare -A secs
for q in filter_naive filter classify_naive classify filter_naive128 classify_naive128; do
    var="q_$q"
    secs[$q]=$(timed "${!var}")
    what=${q%%_*}; route=${q#"$what"}; route=${route#_}; route=${route:-semantic}
    printf '%s,%s,%s,%.2f,%.2f\n' "$what" "$route" "$ROWS" "${secs[$q]}" "$(echo "$ROWS / ${secs[$q]}" | bc -l)" >> "$OUT/$NAME.csv"
done

{
    echo "# Semantic functions against llm_generate + parsing ($(basename "$model"), $THREADS threads, $ROWS rows)"
    echo
    echo "| what | semantic rows/s | naive, max_tokens 8 | ratio | naive, default max_tokens (128) | ratio |"
    echo "|---|---|---|---|---|---|"
    for w in filter classify; do
        a=$(echo "$ROWS / ${secs[$w]}" | bc -l); b=$(echo "$ROWS / ${secs[${w}_naive]}" | bc -l)
        c=$(echo "$ROWS / ${secs[${w}_naive128]}" | bc -l)
        printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n' "$([ $w = filter ] && echo 'llm_filter' || echo 'llm_classify (4 labels)')" \
            "$a" "$b" "$(echo "$a / $b" | bc -l)" "$c" "$(echo "$a / $c" | bc -l)"
    done
    echo
    echo "Accuracy on test/data/semantic_labels.tsv (60 texts):"
    echo
    echo "| task | semantic | naive |"
    echo "|---|---|---|"
    echo "| sentiment, 3 labels | $acc_c% | $acc_cn% |"
    echo "| yes/no question | $acc_f% | $acc_fn% ($unparsed% of answers name neither) |"
    echo
    echo "Constrained routes for the same sentiment: llm_extract of {\"sentiment\": enum} is right for $acc_x%"
    echo "($valid_x% of its outputs valid for the schema); llm_generate with choices => the 3 labels, $acc_ch%."
    echo "json_schema decoding speed and mask times: bench/constrained_bench.sh."
} > "$OUT/$NAME.md"
cat "$OUT/$NAME.md"
pgtemp_stop
