#!/usr/bin/env bash
# Summarizing a table, three ways, on Gemma 3 270M (the argument overrides it):
#   rows       SELECT ... llm_generate(...) FROM docs, with llm.batch_rows = 0
#              (no LLM Batch node: one request at a time);
#   node       the same plain SELECT, planned with the LLM Batch node;
#   batch      llm_generate_batch(array_agg(...)) over the same rows.
# Every prompt is one shared instruction, then the document.  For each table
# size (ROWS, default "64 256") it reports wall seconds, rows/s, completion
# tokens/s, and the prompt tokens the prefix cache served against the
# shared-prefix tokens after the first row.  Row by row runs only up to
# ROW_BY_ROW_MAX rows (default 64): at 256 rows it takes many minutes.
# MAX_TOKENS (default 24) and STOP (newline, the default: one sentence;
# none: every row generates MAX_TOKENS) shape the answers.  Each mode runs
# REPEAT times (default 3), the modes taking turns, and the median time is
# reported, since one run on a shared machine moves by 20% or more.
# Prints a table and writes bench/results/$NAME.{csv,json} (NAME default
# table_bench).
#
#   bench/table_bench.sh [MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-"64 256"}
ROW_BY_ROW_MAX=${ROW_BY_ROW_MAX:-64}
MAX_TOKENS=${MAX_TOKENS:-24}
STOP=${STOP:-newline}
NAME=${NAME:-table_bench}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-2}
OUT=bench/results
mkdir -p "$OUT"
make -s -j"$(nproc)"
if [ "$(id -u)" -eq 0 ] || [ -w "$(pg_config --pkglibdir)" ]; then make -s install >/dev/null; fi
model=${1:-$(tools/fetch-model.sh gemma | tail -n 1)}

. tools/pgtemp.sh
pgtemp_start "$model" "llm.threads = $THREADS" "llm.cache_mb = 0"

instruction="You are a careful news editor. Read the article below and write one short, plain sentence that says what happened, who was involved and why it matters to readers in the city. Do not add facts that are not in the article, do not give opinions, and do not repeat the headline."
max_rows=0
for n in $ROWS; do [ "$n" -gt "$max_rows" ] && max_rows=$n; done
"${PSQL[@]}" <<SQL
CREATE TABLE docs AS
SELECT i AS id,
       'The ' || (ARRAY['city council', 'school board', 'water company', 'museum', 'bus service', 'hospital', 'football club', 'library'])[i % 8 + 1]
       || ' ' || (ARRAY['approved', 'delayed', 'announced', 'cancelled', 'expanded'])[i % 5 + 1]
       || ' a plan for ' || (ARRAY['new bike lanes', 'longer opening hours', 'a second site', 'lower fares', 'free lessons', 'a repair fund', 'more staff'])[i % 7 + 1]
       || ' on ' || (ARRAY['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday'])[i % 5 + 1]
       || ', after ' || (10 + i % 90) || ' residents spoke at a public meeting. The cost is '
       || (2 + i % 20) || ' million, and work starts in ' || (ARRAY['spring', 'summer', 'autumn', 'winter'])[i % 4 + 1] || '.' AS body
FROM generate_series(1, $max_rows) i;
SQL

# One run: prints "seconds completion_tokens prompt_tokens cached_tokens" (llm_stats deltas).
stats="SELECT completion_tokens || ' ' || prompt_tokens || ' ' || prefix_cache_hit_tokens FROM llm_stats"
run() {
    local sql=$1 before after t0 t1
    "${PSQL[@]}" -At -c "$stats" > /dev/null
    before=$("${PSQL[@]}" -At -c "$stats")
    t0=$(date +%s.%N)
    "${PSQL[@]}" -At -c "$sql" > /dev/null
    t1=$(date +%s.%N)
    after=$("${PSQL[@]}" -At -c "$stats")
    read -r c0 p0 h0 <<< "$before"
    read -r c1 p1 h1 <<< "$after"
    echo "$(echo "$t1 - $t0" | bc -l) $((c1 - c0)) $((p1 - p0)) $((h1 - h0))"
}

case $STOP in
    newline) stop_sql="ARRAY[E'\\n']" ;;
    none) stop_sql=NULL ;;
    *) echo "table_bench: STOP is newline or none" >&2; exit 1 ;;
esac
# the median of the numbers given
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

csv=$OUT/$NAME.csv
echo "rows,mode,seconds,rows_per_s,completion_tokens,tokens_per_s,prompt_tokens,cached_tokens,shared_prefix_tokens,hit_ratio,runs" > "$csv"
printf '%-5s %-6s %9s %8s %9s %8s %8s %8s %9s\n' rows mode seconds rows/s tokens tok/s cached shared hit
declare -A times result
for n in $ROWS; do
    for rep in $(seq "$REPEAT"); do
        for mode in rows node batch; do
            [ "$mode" = rows ] && [ "$n" -gt "$ROW_BY_ROW_MAX" ] && continue
            # each run's instruction starts with its own number, so no run finds
            # another's in the prefix cache: the first row computes it
            run_no=$((${run_no:-0} + 1))
            instr="Task $run_no. $instruction"
            prefix_tokens=$("${PSQL[@]}" -At -c "SELECT prompt_tokens FROM llm_generate_batch(ARRAY['$instr' || E'\n\nArticle: '], 0)")
            prompt_sql="'$instr' || E'\n\nArticle: ' || body || E'\nSummary:'"
            call="llm_generate($prompt_sql, $MAX_TOKENS, stop => $stop_sql)"
            case $mode in
                rows)  sql="SET llm.batch_rows = 0; SELECT id, $call FROM docs WHERE id <= $n" ;;
                node)  sql="SELECT id, $call FROM docs WHERE id <= $n" ;;
                batch) sql="SELECT b.* FROM (SELECT array_agg($prompt_sql ORDER BY id) AS p FROM docs WHERE id <= $n) d,
                            llm_generate_batch(d.p, $MAX_TOKENS, stop => $stop_sql) b" ;;
            esac
            read -r secs ctok ptok hit <<< "$(run "$sql")"
            shared=$(( prefix_tokens * (n - 1) ))
            times[$n,$mode]="${times[$n,$mode]:-} $secs"
            result[$n,$mode]="$ctok $ptok $hit $shared"
        done
    done
    for mode in rows node batch; do
        [ -n "${times[$n,$mode]:-}" ] || continue
        # shellcheck disable=SC2086
        secs=$(median ${times[$n,$mode]})
        echo "($n $mode runs:${times[$n,$mode]})" >&2
        read -r ctok ptok hit shared <<< "${result[$n,$mode]}"
        printf '%-5s %-6s %9.2f %8.2f %9d %8.1f %8d %8d %9.2f\n' "$n" "$mode" "$secs" \
            "$(echo "$n / $secs" | bc -l)" "$ctok" "$(echo "$ctok / $secs" | bc -l)" "$hit" "$shared" \
            "$(echo "$hit / $shared" | bc -l)"
        printf '%d,%s,%.3f,%.3f,%d,%.1f,%d,%d,%d,%.3f,%d\n' "$n" "$mode" "$secs" "$(echo "$n / $secs" | bc -l)" "$ctok" \
            "$(echo "$ctok / $secs" | bc -l)" "$ptok" "$hit" "$shared" "$(echo "$hit / $shared" | bc -l)" "$REPEAT" >> "$csv"
    done
done

python3 - "$csv" "$OUT/$NAME.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    for k in r:
        if k != 'mode':
            r[k] = float(r[k])
json.dump(rows, open(sys.argv[2], 'w'), indent=1)
by = {(int(r['rows']), r['mode']): r for r in rows}
for n in sorted({int(r['rows']) for r in rows}):
    node, batch, rbr = by.get((n, 'node')), by.get((n, 'batch')), by.get((n, 'rows'))
    if node and batch:
        print(f"{n} rows: node / llm_generate_batch throughput {node['rows_per_s'] / batch['rows_per_s']:.2f}")
    if node and rbr:
        print(f"{n} rows: node / row by row throughput {node['rows_per_s'] / rbr['rows_per_s']:.2f}")
PY
