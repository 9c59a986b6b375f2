#!/usr/bin/env bash
# A background fill (llm_fill) against the single statement
# UPDATE docs SET summary = llm_generate(body, ...), on ROWS rows (default
# 2000) of stories260K (the argument overrides the model):
#   update   the single statement (an LLM Batch node under the UPDATE);
#   job      llm_fill(..., batch_rows => BATCH_ROWS) and llm_job_wait;
#   faults   the same job, with a kill -9 of its worker at about a third of
#            the rows and an immediate-mode stop and start of the server at
#            about two thirds (its time includes the restarts).
# Each mode runs REPEAT times (default 3), taking turns; the median wall
# time is reported, with rows/s and the ratio to the single statement.  The
# work of each run is the requests the worker finished, failed or cancelled
# and the tokens it generated (llm_stats, summed over the server's lives:
# read just before each fault), against the rows; faults' work is compared
# with the job's without faults.  Writes bench/results/$NAME.{csv,md} (NAME
# default job_bench).  BATCH_ROWS (default 32): a fault loses the batch in
# flight, so the faults' extra work is about 2 x BATCH_ROWS / ROWS, while a
# batch below llm.max_sequences (64) leaves the engine part idle at each
# batch's end: 32 keeps both within 1.05x and 0.9x on 2,000 rows.
#
# Runs on the PostgreSQL that PG_CONFIG names (default: tools/fetch-pg.sh 18,
# installed into its private copy, never the system's).
#
#   bench/job_bench.sh [MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-2000}
MAX_TOKENS=${MAX_TOKENS:-64}
BATCH_ROWS=${BATCH_ROWS:-32}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-2}
NAME=${NAME:-job_bench}
OUT=bench/results
mkdir -p "$OUT"
PG_CONFIG=${PG_CONFIG:-$(tools/fetch-pg.sh 18 | tail -n 1)}
case $("$PG_CONFIG" --bindir) in
    /usr/*) echo "job_bench: PG_CONFIG must be a private PostgreSQL (tools/fetch-pg.sh 18)" >&2; exit 1 ;;
esac
export PATH="$("$PG_CONFIG" --bindir):$PATH"
make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG"
make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
model=${1:-../shared/models/stories260K.gguf}

. tools/pgtemp.sh
pgtemp_start "$model" "llm.threads = $THREADS" "llm.cache_mb = 0" "restart_after_crash = on" "max_worker_processes = 16"
pgctl=("${pgtemp_run_as[@]}" "$pgtemp_bindir/pg_ctl" -D "$PGTEMP_DIR/data" -l "$PGTEMP_DIR/server.log" -w)
q() { "${PSQL[@]}" -At -c "$1"; }
# wait until the query's answer is t
until_true() { local i; for i in $(seq 6000); do [ "$(q "$1" 2>/dev/null || true)" = t ] && return 0; sleep 0.1; done; echo "job_bench: timed out on $1" >&2; exit 1; }
ready="SELECT state = 'ready' FROM llm_worker_status()"

q "CREATE TABLE docs AS SELECT i AS id, 'Once upon a time, ' || (ARRAY['Tom','Lily','Ben','Sue','Max'])[1 + i % 5]
    || ' had ' || i || ' ' || (ARRAY['apples','toys','cats','books'])[1 + i % 4] || '. One day' AS body,
    NULL::text AS summary FROM generate_series(1, $ROWS) i;
   ALTER TABLE docs ADD PRIMARY KEY (id)" >/dev/null
work_sql="SELECT (completed_requests + failed_requests + cancelled_requests) || ' ' || completion_tokens FROM llm_stats"
# before a fault: the requests in flight count too (the fault loses them; they are asked again)
fault_sql="SELECT (completed_requests + failed_requests + cancelled_requests + queued_requests + running_requests)
           || ' ' || completion_tokens FROM llm_stats"

# One run of a mode: prints "seconds requests tokens".
run() {
    local mode=$1 w0 r=0 t=0 job t0 t1 rr tt pid
    q "UPDATE docs SET summary = NULL" >/dev/null
    q "VACUUM docs" >/dev/null
    read -r r0 t0w <<< "$(q "$work_sql")"
    t0=$(date +%s.%N)
    case $mode in
        update)
            q "UPDATE docs SET summary = llm_generate(body, max_tokens => $MAX_TOKENS)" >/dev/null ;;
        job)
            job=$(q "SELECT llm_fill('docs', 'summary', 'body', max_tokens => $MAX_TOKENS, batch_rows => $BATCH_ROWS)")
            [ "$(q "SELECT llm_job_wait($job)")" = done ] ;;
        faults)
            job=$(q "SELECT llm_fill('docs', 'summary', 'body', max_tokens => $MAX_TOKENS, batch_rows => $BATCH_ROWS)")
            until_true "SELECT rows_done >= $ROWS / 3 FROM llm_jobs WHERE id = $job"
            pid=$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'llm job'")
            read -r rr tt <<< "$(q "$fault_sql")"
            kill -9 "$pid"
            r=$((r + rr - r0)); t=$((t + tt - t0w)); r0=0; t0w=0
            sleep 1
            until_true "SELECT rows_done >= 2 * $ROWS / 3 FROM llm_jobs WHERE id = $job"
            [ "$(q "SELECT state FROM llm_jobs WHERE id = $job")" = running ] ||
                { echo "job_bench: the job ended before the second fault; raise ROWS or MAX_TOKENS" >&2; exit 1; }
            read -r rr tt <<< "$(q "$fault_sql")"
            "${pgctl[@]}" -m immediate stop >/dev/null
            r=$((r + rr)); t=$((t + tt))
            "${pgctl[@]}" start >/dev/null
            until_true "$ready"
            [ "$(q "SELECT llm_job_wait($job)")" = done ] ;;
    esac
    t1=$(date +%s.%N)
    read -r rr tt <<< "$(q "$work_sql")"
    r=$((r + rr - r0)); t=$((t + tt - t0w))
    [ "$(q "SELECT count(*) FROM docs WHERE summary IS NULL")" = 0 ] || { echo "job_bench: $mode left rows empty" >&2; exit 1; }
    echo "$(echo "$t1 - $t0" | bc -l) $r $t"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A times reqs toks
for rep in $(seq "$REPEAT"); do
    for mode in update job faults; do
        read -r secs r t <<< "$(run $mode)"
        echo "($mode run $rep: $secs s, $r requests, $t tokens)" >&2
        times[$mode]="${times[$mode]:-} $secs"
        reqs[$mode]="${reqs[$mode]:-} $r"
        toks[$mode]="${toks[$mode]:-} $t"
    done
done

csv=$OUT/$NAME.csv
md=$OUT/$NAME.md
echo "mode,rows,seconds,rows_per_s,vs_update,requests,requests_per_row,tokens,work_vs_job,runs" > "$csv"
{
    echo "# job_bench: $ROWS rows of $(basename "$model"), max_tokens $MAX_TOKENS, batch_rows $BATCH_ROWS, $THREADS threads"
    echo
    echo "$(lscpu | grep 'Model name' | sed 's/  */ /g'); medians of $REPEAT runs; $(date -u +%F)"
    echo
    echo "| mode | seconds | rows/s | vs UPDATE | requests | requests/row | tokens | work vs job |"
    echo "|---|---|---|---|---|---|---|---|"
} > "$md"
# shellcheck disable=SC2086
base=$(median ${times[update]}); jobtok=$(median ${toks[job]})
for mode in update job faults; do
    # shellcheck disable=SC2086
    secs=$(median ${times[$mode]}); r=$(median ${reqs[$mode]}); t=$(median ${toks[$mode]})
    rps=$(echo "$ROWS / $secs" | bc -l); vs=$(echo "$base / $secs" | bc -l)
    per=$(echo "$r / $ROWS" | bc -l); wvj=$(echo "$t / $jobtok" | bc -l)
    printf '%s,%d,%.2f,%.1f,%.3f,%d,%.3f,%d,%.3f,%d\n' "$mode" "$ROWS" "$secs" "$rps" "$vs" "$r" "$per" "$t" "$wvj" "$REPEAT" >> "$csv"
    printf '| %s | %.2f | %.1f | %.2f | %d | %.3f | %d | %.3f |\n' "$mode" "$secs" "$rps" "$vs" "$r" "$per" "$t" "$wvj" >> "$md"
done
cat "$md"
