#!/usr/bin/env bash
# Remote inference nodes (llm.remote_servers): rows/s of short summaries
# through the LLM Batch node on
#   1. one server alone (its own worker), and a coordinator that only
#      dispatches to one remote node (what the dispatch costs),
#   2. a coordinator that only dispatches (llm.local_inference = off) to two
#      remote nodes,
#   3. the same with one node stopped (immediate mode) about midway;
#   4. one server with two model workers (llm.devices = 'cpu,cpu'), twice
#      THREADS threads split between them;
# every server's worker has llm.threads = THREADS (default 1), so on a
# 2-core machine each node has a core.  The answers of 2 and 3 are checked
# identical to 1's (md5 of the whole ordered output).  Median of REPEAT runs
# (default 3) for 1 and 2.  Prints a table and writes
# bench/results/scale_bench.{csv,md}.
#
#   bench/scale_bench.sh [MODEL]     (default SmolLM2-135M-Instruct Q4_1, tools/fetch-model.sh smollm2)
#
# ROWS (default 128) rows, NEW (default 24) new tokens each.  PG_CONFIG names
# the PostgreSQL to build, install into and run (default: pg_config on
# PATH); it must be one you may install into (tools/fetch-pg.sh 18 gives a
# private one).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-128}
NEW=${NEW:-24}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-1}
OUT=bench/results
mkdir -p "$OUT"
pg_config=${PG_CONFIG:-$(command -v pg_config)}
bindir=$("$pg_config" --bindir)
make -s -j"$(nproc)" PG_CONFIG="$pg_config" WITH_CUDA=0 >/dev/null
make -s PG_CONFIG="$pg_config" WITH_CUDA=0 install >/dev/null
model=${1:-$(tools/fetch-model.sh smollm2 | tail -n 1)}

user=${LLM_PG_USER:-llmtest}
run_as=()
dir=$(mktemp -d /tmp/llm-scale.XXXXXX)
if [ "$(id -u)" -eq 0 ]; then
    id "$user" >/dev/null 2>&1 || useradd --system --create-home --shell /bin/bash "$user"
    run_as=(runuser -u "$user" -- env -C /)
fi
mkdir -p "$dir/models"
cp "$model" "$dir/models/"
chmod 755 "$dir"
[ "$(id -u)" -eq 0 ] && chown -R "$user" "$dir"

names=(coord node1 node2 devs)
declare -A port=([coord]=55431 [node1]=55432 [node2]=55433 [devs]=55434)
cleanup() {
    for n in "${names[@]}"; do
        [ -f "$dir/$n/postmaster.pid" ] && "${run_as[@]}" "$bindir/pg_ctl" -D "$dir/$n" -m immediate -w stop >/dev/null 2>&1
    done
    rm -rf "$dir"
}
trap cleanup EXIT

# psql on server $1
psql_on() { "${run_as[@]}" "$bindir/psql" -X -q -At -h "$dir" -p "${port[$1]}" -U postgres -d postgres -v ON_ERROR_STOP=1 "${@:2}"; }
start() { "${run_as[@]}" "$bindir/pg_ctl" -D "$dir/$1" -l "$dir/$1.log" -w start >/dev/null; }

for n in "${names[@]}"; do
    "${run_as[@]}" "$bindir/initdb" -D "$dir/$n" -A trust -U postgres --no-sync >/dev/null
    cat >> "$dir/$n/postgresql.conf" <<EOF
shared_preload_libraries = 'llm'
llm.model_dir = '$dir/models'
llm.model = '$(basename "$model")'
llm.threads = $([ "$n" = devs ] && echo $((2 * THREADS)) || echo "$THREADS")
llm.devices = '$([ "$n" = devs ] && echo cpu,cpu)'
llm.cache_mb = 0
listen_addresses = ''
unix_socket_directories = '$dir'
port = ${port[$n]}
EOF
    start "$n"
done
for n in "${names[@]}"; do
    psql_on "$n" <<'SQL'
CREATE EXTENSION llm;
DO $$
BEGIN
    FOR i IN 1..1200 LOOP
        EXIT WHEN (SELECT state FROM llm_worker_status()) IN ('ready', 'no model');
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
SQL
done

docs="CREATE TABLE docs AS
SELECT i AS id, 'Summarize in one sentence: ' ||
       (ARRAY['Tom', 'Lily', 'Ben', 'Sue', 'Max'])[i % 5 + 1] || ' found ' || i || ' ' ||
       (ARRAY['shells', 'coins', 'books', 'apples'])[i % 4 + 1] || ' on the beach and gave half to ' ||
       (ARRAY['a friend', 'his sister', 'the teacher'])[i % 3 + 1] || '.' AS body
FROM generate_series(1, $ROWS) i"
psql_on devs -c "$docs" -c "SELECT llm_generate('Warm-up', 4)" >/dev/null
psql_on coord >/dev/null <<SQL
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER node1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$dir', port '${port[node1]}', dbname 'postgres');
CREATE SERVER node2 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$dir', port '${port[node2]}', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER node1 OPTIONS (user 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER node2 OPTIONS (user 'postgres');
$docs;
SELECT llm_generate('Warm-up', 4) IS NOT NULL AS warm;
SQL
for n in node1 node2; do psql_on "$n" -c "SELECT llm_generate('Warm-up', 4)" >/dev/null; done

query="SELECT id, llm_generate(body, max_tokens => $NEW, seed => id) FROM docs"
# seconds and md5 of the output of the query, with settings $1, on server $2 (default coord)
run() {
    local t0 t1 sum
    t0=$(date +%s.%N)
    sum=$(psql_on "${2:-coord}" -c "$1" -c "$query" 2>>"$dir/warnings" | md5sum | cut -c1-12) ||
        { cat "$dir/warnings" >&2; exit 1; }
    t1=$(date +%s.%N)
    printf '%.2f %s\n' "$(echo "$t1 - $t0" | bc)" "$sum"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }

one=() rem=() two=() devs=()
for _ in $(seq "$REPEAT"); do
    one+=("$(run "SET llm.remote_servers = ''")")
    devs+=("$(run "SET llm.remote_servers = ''" devs)")
    rem+=("$(run "SET llm.remote_servers = 'node1'; SET llm.local_inference = off")")
    two+=("$(run "SET llm.remote_servers = 'node1, node2'; SET llm.local_inference = off")")
done
sum_one=${one[0]#* }
t_one=$(printf '%s\n' "${one[@]}" | cut -d' ' -f1 | median)
t_two=$(printf '%s\n' "${two[@]}" | cut -d' ' -f1 | median)
t_rem=$(printf '%s\n' "${rem[@]}" | cut -d' ' -f1 | median)
t_devs=$(printf '%s\n' "${devs[@]}" | cut -d' ' -f1 | median)
same_devs=yes
for r in "${devs[@]}"; do [ "${r#* }" = "$sum_one" ] || same_devs=no; done
same_two=yes
for r in "${one[@]}" "${rem[@]}" "${two[@]}"; do [ "${r#* }" = "$sum_one" ] || same_two=no; done

# a node stopped in immediate mode at about half the one-node time... of two nodes
half=$(printf '%.1f' "$(echo "$t_two / 2" | bc -l)")
( sleep "$half"; "${run_as[@]}" "$bindir/pg_ctl" -D "$dir/node1" -m immediate -w stop >/dev/null ) &
killed=$(run "SET llm.remote_servers = 'node1, node2'; SET llm.local_inference = off")
wait
t_killed=${killed%% *}
same_killed=$([ "${killed#* }" = "$sum_one" ] && echo yes || echo no)
resent=$(grep -c 'llm inference node "node1" failed' "$dir/warnings" || true)

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
load=$(cut -d' ' -f1-3 /proc/loadavg)
rate() { echo "scale=1; $ROWS / $1" | bc; }
{
    echo "| setup | seconds | rows/s | vs one node | answers identical |"
    echo "|---|---|---|---|---|"
    echo "| one server (its own worker) | $t_one | $(rate "$t_one") | 1.00x | (reference) |"
    echo "| coordinator + 1 remote node, llm.local_inference = off (the dispatch's cost) | $t_rem | $(rate "$t_rem") | $(printf "%.2f" "$(echo "$t_one / $t_rem" | bc -l)")x | $same_two |"
    echo "| coordinator + 2 remote nodes, llm.local_inference = off | $t_two | $(rate "$t_two") | $(printf "%.2f" "$(echo "$t_one / $t_two" | bc -l)")x | $same_two |"
    echo "| one server, two model workers (llm.devices = 'cpu,cpu', $((2 * THREADS)) threads split) | $t_devs | $(rate "$t_devs") | $(printf "%.2f" "$(echo "$t_one / $t_devs" | bc -l)")x | $same_devs |"
    echo "| coordinator + 2 remote nodes, node1 stopped (-m immediate) at ${half}s | $t_killed | $(rate "$t_killed") | $(printf "%.2f" "$(echo "$t_one / $t_killed" | bc -l)")x | $same_killed (node failed: $resent) |"
    echo
    echo "$ROWS rows, $NEW new tokens each, seed => id, $(basename "$model"), llm.threads = $THREADS per server, median of $REPEAT (the stopped run once); $cpu, $(nproc) cores (load average $load at the end: other work shares them); $("$pg_config" --version)."
} | tee "$OUT/scale_bench.md"
{
    echo "setup,seconds,rows_per_s,identical"
    echo "one,$t_one,$(rate "$t_one"),reference"
    echo "one_remote,$t_rem,$(rate "$t_rem"),$same_two"
    echo "two_remote,$t_two,$(rate "$t_two"),$same_two"
    echo "two_workers,$t_devs,$(rate "$t_devs"),$same_devs"
    echo "two_remote_one_stopped,$t_killed,$(rate "$t_killed"),$same_killed"
} > "$OUT/scale_bench.csv"
