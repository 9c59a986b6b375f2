#!/usr/bin/env bash
# Soak test (not part of CI): many sessions of several roles against one llm
# worker for DURATION seconds, every answer checked against its reference.
#
#   1. A temporary server (tools/pgtemp.sh) serves MODEL (default
#      stories260K, greedy answers are deterministic) with llm.threads =
#      THREADS; roles soak_a (llm.role_weight 3), soak_b, soak_c, soak_d.
#   2. References: each of 40 prompts (a few words to a few hundred tokens)
#      under each of 8 parameter sets (greedy and seeded sampling, 1 to 256
#      tokens, stop strings) is answered alone, one after another, on the
#      idle server (bench/soak/setup.sql: soak_reference).
#   3. Load: one pgbench per role, CLIENTS in all, running
#      bench/soak/call.pgbench for DURATION seconds (in segments of SEGMENT
#      seconds, so a client lost to the kill below comes back): a random
#      (prompt, parameters) through llm_generate, or 4 consecutive prompts
#      through llm_generate_batch (BATCH_PCT %), CANCEL_PCT % under a 5-300 ms
#      statement_timeout (cancelled while queued or decoding), TIMEOUT_PCT %
#      under 1.5 s; soak_try() compares each answer with its reference in SQL
#      and records the outcome (SQLSTATE or ok, wrong answers, latency) in
#      soak_results.  Beside it, every CANCEL_EVERY seconds one session
#      waiting for the worker gets pg_cancel_backend(), and every SAMPLE_S
#      seconds the worker's memory (/proc/PID/status), the /dev/shm segments
#      it maps, the backends' anonymous memory and llm_stats are sampled.
#   4. At KILL_AT seconds (default the middle; 0: never) the worker, found by
#      llm_worker_status(), gets SIGKILL.  The postmaster then does what it
#      does for any crashed process attached to shared memory: it ends every
#      session (a 57P02 warning, then the connection closes: pgbench stops
#      the client, "perhaps the backend died", counted as 08006), refuses
#      connections during crash recovery (57P03) and starts everything again,
#      worker included, which reloads the model (0.2-0.4 s on stories260K).  Those errors are expected from the
#      kill until KILL_GRACE seconds after the worker is ready again; later
#      calls must succeed.
#   5. After the load: every reference again on the idle, restarted worker
#      (soak_recheck), the queue must be empty; then bench/soak_report.py
#      prints the table and writes bench/results/soak.{md,csv},
#      soak_memory.csv, and soak_memory.png (gnuplot; installed with apt-get
#      when missing, or matplotlib; skipped with a message if neither).
#
# Expected SQLSTATEs: 57014 (statement timeout, pg_cancel_backend) any time;
# within the kill window 57P01, 57P02, 57P03, 08006 (connection lost) and
# 55000 (no model loaded yet).  Anything else, including 53000 (64 clients
# of at most 4 requests each hold far fewer than the 1024 slots), a wrong
# answer, a changed reference or requests left in the queue exits 1.
#
#   bench/soak.sh                  # 10 minutes
#   DURATION=60 bench/soak.sh      # a quick run
#
# Holds $LLM_PG_LOCK (default /tmp/llm-pg-test.lock) while its server runs,
# as the other PostgreSQL tests do; uses the installed llm.so (make install).
# KEEP=1 keeps the server's directory and the raw logs.
set -euo pipefail
cd "$(dirname "$0")/.."

LOCK=${LLM_PG_LOCK:-/tmp/llm-pg-test.lock}
if [ -z "${SOAK_LOCKED:-}" ]; then
    exec env SOAK_LOCKED=1 flock "$LOCK" bash "$0" "$@"
fi

SHARED=${LLM_SHARED:-../shared}
MODEL=${MODEL:-$SHARED/models/stories260K.gguf}
DURATION=${DURATION:-600}
CLIENTS=${CLIENTS:-64}
THREADS=${THREADS:-2}
SEGMENT=${SEGMENT:-60}
SAMPLE_S=${SAMPLE_S:-2}
THINK_MS=${THINK_MS:-100}
CANCEL_PCT=${CANCEL_PCT:-8}
TIMEOUT_PCT=${TIMEOUT_PCT:-4}
BATCH_PCT=${BATCH_PCT:-10}
CANCEL_EVERY=${CANCEL_EVERY:-1}
KILL_AT=${KILL_AT:-$((DURATION / 2))}
KILL_GRACE=${KILL_GRACE:-10}
ROLES=${ROLES:-"soak_a:3 soak_b:1 soak_c:1 soak_d:1"}
OUT=${OUT:-bench/results}
PGBENCH=$(pg_config --bindir)/pgbench
mkdir -p "$OUT"

. tools/pgtemp.sh
# fsync off: only processes crash here, never the machine, and the WAL the
# kill's crash recovery replays is in the kernel's cache either way
pgtemp_start "$MODEL" "llm.threads = $THREADS" "llm.cache_mb = 0" "max_connections = $((CLIENTS + 20))" "fsync = off"
WORK=$PGTEMP_DIR/soak
mkdir -p "$WORK"
chmod 777 "$WORK"
echo "soak: server in $PGTEMP_DIR, $DURATION s, $CLIENTS clients, roles $ROLES" >&2

# 1. schema, roles, references
n_roles=0
role_sql=""
for rw in $ROLES; do
    r=${rw%%:*} w=${rw#*:}
    n_roles=$((n_roles + 1))
    role_sql+="CREATE ROLE $r LOGIN IN ROLE soak_load; ALTER ROLE $r SET llm.role_weight = $w;"
done
"${PSQL[@]}" -f "$PWD/bench/soak/setup.sql"
"${PSQL[@]}" <<SQL
CREATE ROLE soak_load;
$role_sql
GRANT SELECT ON soak_prompts, soak_params, soak_reference TO soak_load;
GRANT INSERT ON soak_results, soak_wrong, soak_errors TO soak_load;
UPDATE soak_prompts SET prompt_tokens = (SELECT b.prompt_tokens FROM llm_generate_batch(ARRAY[prompt], 1) b);
DO \$\$
DECLARE c record;
BEGIN
    FOR c IN SELECT p.id AS prompt_id, pr.id AS param_id FROM soak_prompts p, soak_params pr ORDER BY 1, 2 LOOP
        INSERT INTO soak_reference VALUES (c.prompt_id, c.param_id, soak_answer(c.prompt_id, c.param_id));
    END LOOP;
END \$\$;
SELECT llm_reset_stats();
SQL
"${PSQL[@]}" -At -c "SELECT 'soak: ' || count(*) || ' references, prompts of ' || min(prompt_tokens) || ' to '
                            || max(prompt_tokens) || ' tokens' FROM soak_reference JOIN soak_prompts ON id = prompt_id" >&2

# 2. the load
now() { echo "$EPOCHREALTIME"; }
# A - B in seconds, with FORMAT (default %.3f).
sub() { awk -v a="$1" -v b="$2" -v f="${3:-%.3f}" 'BEGIN { printf f, a - b }'; }
t0=$(now)
t_end=$(sub "$t0" "-$DURATION")
printf 't0,%s\nduration,%s\nclients,%s\nthreads,%s\n' "$t0" "$DURATION" "$CLIENTS" "$THREADS" > "$WORK/run.csv"
left() { sub "$t_end" "$(now)" %d; }

# One role's pgbench runs, segment after segment, until the end; stderr lines stamped with the time.
role_load() {
    local role=$1 clients=$2 seg rc
    while :; do
        seg=$(left)
        [ "${seg:-0}" -ge 1 ] 2>/dev/null || break
        [ "$seg" -gt "$SEGMENT" ] && seg=$SEGMENT
        rc=0
        "$PGBENCH" -h "$PGTEMP_DIR" -U "$role" -n -c "$clients" -j 1 -T "$seg" \
            -f bench/soak/call.pgbench -D cancel_pct="$CANCEL_PCT" -D timeout_pct="$TIMEOUT_PCT" \
            -D batch_pct="$BATCH_PCT" -D think_ms="$THINK_MS" \
            postgres >> "$WORK/pgbench_$role.out" \
            2> >(while IFS= read -r l; do printf '%s %s\n' "$(now)" "$l"; done >> "$WORK/pgbench_$role.err") || rc=$?
        echo "$(now) exit $rc" >> "$WORK/pgbench_$role.runs"
        [ "$rc" -eq 0 ] || sleep 1
    done
}

# Sample the worker's memory, its /dev/shm segments, the backends' memory and llm_stats.
sampler() {
    local pm w f stats kb
    echo "t_s,worker_pid,vm_rss_kb,rss_anon_kb,rss_file_kb,rss_shmem_kb,vm_hwm_kb,shm_mapped_kb,devshm_used_kb,backends,backends_anon_kb,queued,running,kv_blocks_used" > "$WORK/memory.csv"
    while [ "$(left)" -ge 0 ] 2>/dev/null; do
        pm=$(head -n 1 "$PGTEMP_DIR/data/postmaster.pid" 2>/dev/null || true)
        w=$(ps -o pid=,args= --ppid "${pm:-1}" 2>/dev/null | awk '/llm worker/ { print $1; exit }')
        if [ -n "$w" ] && [ -r "/proc/$w/status" ]; then
            read -r rss anon file shm hwm < <(awk '/^VmRSS/ { r = $2 } /^RssAnon/ { a = $2 } /^RssFile/ { f = $2 }
                /^RssShmem/ { s = $2 } /^VmHWM/ { h = $2 } END { print r, a, f, s, h }' "/proc/$w/status")
            kb=0
            for f in $(grep -o '/dev/shm/[^ ]*' "/proc/$w/maps" 2>/dev/null | sort -u); do
                kb=$((kb + $(stat -c %s "$f" 2>/dev/null || echo 0) / 1024))
            done
            read -r nb banon < <(for p in $(ps -o pid= --ppid "$pm"); do
                    [ "$p" = "$w" ] || awk '/^RssAnon/ { print $2 }' "/proc/$p/status" 2>/dev/null
                done | awk '{ n++; s += $1 } END { print n + 0, s + 0 }')
            stats=$("${PSQL[@]}" -At -F, -c "SELECT queued_requests, running_requests, kv_blocks_used FROM llm_stats" 2>/dev/null || echo ",,")
            echo "$(sub "$(now)" "$t0" %.1f),$w,$rss,$anon,$file,$shm,$hwm,$kb,$(df -k /dev/shm | awk 'NR == 2 { print $3 }'),$nb,$banon,$stats" >> "$WORK/memory.csv"
        fi
        sleep "$SAMPLE_S"
    done
}

# Every CANCEL_EVERY seconds, cancel one soak session that waits for the worker.
canceller() {
    while [ "$(left)" -ge 1 ] 2>/dev/null; do
        "${PSQL[@]}" -At -c "SELECT count(pg_cancel_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
                             WHERE usename LIKE 'soak\_%' AND wait_event_type = 'Extension'
                             ORDER BY random() LIMIT 1) s" >> "$WORK/cancels.log" 2>/dev/null || true
        sleep "$CANCEL_EVERY"
    done
}

pids=()
per_role=$((CLIENTS / n_roles))
i=0
for rw in $ROLES; do
    i=$((i + 1))
    n=$per_role
    [ "$i" -eq "$n_roles" ] && n=$((CLIENTS - per_role * (n_roles - 1)))
    echo "${rw%%:*},${rw#*:},$n" >> "$WORK/roles.csv"
    role_load "${rw%%:*}" "$n" &
    pids+=($!)
done
sampler &
sampler_pid=$!
canceller &
canceller_pid=$!

if [ "$KILL_AT" -gt 0 ] && [ "$KILL_AT" -lt "$DURATION" ]; then
    sleep "$KILL_AT"
    wpid=$("${PSQL[@]}" -At -c "SELECT pid FROM llm_worker_status()")
    kill -KILL "$wpid"
    t_kill=$(now)
    echo "soak: SIGKILL to the llm worker (pid $wpid) at $(sub "$t_kill" "$t0" %.1f) s" >&2
    newpid="" state=""
    for _ in $(seq 600); do
        sleep 0.1
        IFS='|' read -r newpid state < <("${PSQL[@]}" -At -c "SELECT pid, state FROM llm_worker_status()" 2>/dev/null || echo "|")
        [ "$state" = ready ] && [ "$newpid" != "$wpid" ] && break
    done
    t_ready=$(now)
    echo "soak: worker pid $newpid $state after $(sub "$t_ready" "$t_kill" %.2f) s" >&2
    printf 'killed_pid,%s\nt_kill,%s\nnew_pid,%s\nnew_state,%s\nt_ready,%s\nkill_grace,%s\n' \
        "$wpid" "$t_kill" "$newpid" "$state" "$t_ready" "$KILL_GRACE" >> "$WORK/run.csv"
fi

wait "${pids[@]}"
t_done=$(now)
kill "$canceller_pid" "$sampler_pid" 2>/dev/null || true
wait "$canceller_pid" "$sampler_pid" 2>/dev/null || true
printf 't_done,%s\n' "$t_done" >> "$WORK/run.csv"

# 3. after the load: the queue drains, the restarted worker gives every reference again
sleep 3
"${PSQL[@]}" -At -F, -c "SELECT queued_requests, running_requests, kv_blocks_used, kv_blocks_cached, kv_blocks_total FROM llm_stats" \
    | awk -F, '{ printf "idle_queued,%s\nidle_running,%s\nidle_kv_used,%s\nidle_kv_cached,%s\nidle_kv_total,%s\n", $1, $2, $3, $4, $5 }' >> "$WORK/run.csv"
"${PSQL[@]}" -At -F, <<'SQL' >> "$WORK/run.csv"
CREATE TABLE soak_recheck AS SELECT * FROM soak_reference WITH NO DATA;
DO $$
DECLARE c record;
BEGIN
    FOR c IN SELECT prompt_id, param_id FROM soak_reference ORDER BY 1, 2 LOOP
        INSERT INTO soak_recheck VALUES (c.prompt_id, c.param_id, soak_answer(c.prompt_id, c.param_id));
    END LOOP;
END $$;
SELECT 'recheck_changed', count(*) FROM soak_reference r JOIN soak_recheck c USING (prompt_id, param_id)
WHERE c.completion IS DISTINCT FROM r.completion;
SQL
"${PSQL[@]}" -c "\copy (SELECT extract(epoch FROM ts) AS ts, role, client, kind, param_id, prompt_id, timeout_ms, sqlstate, n, n_wrong, latency_ms FROM soak_results ORDER BY ts) TO STDOUT CSV HEADER" > "$WORK/results.csv"
"${PSQL[@]}" -c "\copy (SELECT extract(epoch FROM ts) AS ts, role, kind, param_id, prompt_id, sqlstate, message FROM soak_errors ORDER BY ts) TO STDOUT CSV HEADER" > "$WORK/errors.csv"
"${PSQL[@]}" -c "\copy (SELECT extract(epoch FROM ts) AS ts, role, kind, param_id, prompt_id, got, expected FROM soak_wrong ORDER BY ts) TO STDOUT CSV HEADER" > "$WORK/wrong.csv"
"${PSQL[@]}" -c "\copy (SELECT role, weight, completed_requests, failed_requests, cancelled_requests, prompt_tokens, completion_tokens, round(mean_queue_time::numeric, 4) AS mean_queue_time FROM llm_role_stats WHERE role LIKE 'soak%' ORDER BY role) TO STDOUT CSV HEADER" > "$WORK/role_stats.csv"
cat "$WORK"/pgbench_*.runs > "$WORK/segments.log" 2>/dev/null || true
pgtemp_stop

# 4. report and plot
rc=0
python3 bench/soak_report.py "$WORK" "$OUT" || rc=$?
cp "$WORK/memory.csv" "$OUT/soak_memory.csv"
png=$OUT/soak_memory.png
if ! command -v gnuplot >/dev/null && ! python3 -c "import matplotlib" 2>/dev/null && [ "$(id -u)" -eq 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null) || true
fi
kill_s=$(awk -F, -v t0="$t0" '$1 == "t_kill" { printf "%.1f", $2 - t0 }' "$WORK/run.csv")
if command -v gnuplot >/dev/null; then
    gnuplot <<GP
set terminal pngcairo size 1000,800 noenhanced
set output '$png'
set datafile separator ','
set multiplot layout 2,1 title 'llm worker memory under the soak ($CLIENTS clients, $DURATION s$( [ -n "$kill_s" ] && echo ", SIGKILL at $kill_s s"))'
$( [ -n "$kill_s" ] && echo "set arrow 1 from $kill_s, graph 0 to $kill_s, graph 1 nohead dt 2 lc rgb 'red'")
set key center right
set xlabel 'seconds'
set ylabel 'MiB'
set yrange [0:*]
plot '$WORK/memory.csv' every ::1 using 1:(\$3/1024) with lines lw 2 title 'worker VmRSS', \
     '' every ::1 using 1:(\$4/1024) with lines title 'worker RssAnon', \
     '' every ::1 using 1:(\$6/1024) with lines title 'worker RssShmem', \
     '' every ::1 using 1:(\$8/1024) with lines title '/dev/shm segments the worker maps'
set ylabel 'MiB'
set y2label 'requests'
set y2tics
set ytics nomirror
set y2range [0:*]
set key bottom center
plot '$WORK/memory.csv' every ::1 using 1:(\$11/1024) with lines title 'other server processes RssAnon (sum)', \
     '' every ::1 using 1:(\$12+\$13) axes x1y2 with lines lc rgb 'gray' title 'queued + running requests (right)'
unset multiplot
GP
    echo "soak: plot in $png" >&2
elif python3 -c "import matplotlib" 2>/dev/null; then
    python3 - "$WORK/memory.csv" "$png" "$kill_s" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
t = [float(r["t_s"]) for r in rows]
fig, ax = plt.subplots(figsize=(10, 6))
for col, label in [("vm_rss_kb", "worker VmRSS"), ("rss_anon_kb", "worker RssAnon"),
                   ("rss_shmem_kb", "worker RssShmem"), ("shm_mapped_kb", "/dev/shm segments mapped"),
                   ("backends_anon_kb", "other server processes RssAnon (sum)")]:
    ax.plot(t, [float(r[col] or 0) / 1024 for r in rows], label=label)
if sys.argv[3]:
    ax.axvline(float(sys.argv[3]), color="red", linestyle="--")
ax.set_xlabel("seconds"); ax.set_ylabel("MiB"); ax.legend(loc="upper left")
fig.savefig(sys.argv[2], dpi=100)
PY
    echo "soak: plot in $png" >&2
else
    echo "soak: no plot: neither gnuplot nor python3-matplotlib is installed (apt-get install gnuplot-nox)" >&2
fi

if [ "$rc" -ne 0 ]; then
    KEEP=1
    echo "soak: FAILED; raw logs in $WORK" >&2
elif [ "${KEEP:-0}" = 1 ]; then
    echo "soak: raw logs in $WORK" >&2
fi
exit "$rc"
