#!/usr/bin/env bash
# The SQL path against the engine alone.
#   1. Overhead: llm_generate of 32 greedy tokens on stories260K, 20 times
#      one after another, against `llm-cli generate` for the same work (its
#      own timing, model load excluded); the ratio is SQL time / CLI time.
#   2. Throughput: llm_generate_batch of N prompts (N = 1, 4, 16, 64), each
#      generating NEW tokens (default 64), on MODEL (default: the random
#      134M-shape Q8_0 model of bench/engine_bench.sh); aggregate tok/s.
# Prints tables and writes bench/results/sql_bench.{csv,json}.
#
#   bench/sql_bench.sh [MODEL] [BATCHES]
set -euo pipefail
cd "$(dirname "$0")/.."

SHARED=${LLM_SHARED:-../shared}
NEW=${NEW:-64}
BATCHES=${2:-"1 4 16 64"}
THREADS=${THREADS:-2}
OUT=bench/results
mkdir -p "$OUT"
make -s -j"$(nproc)" all tools
if [ "$(id -u)" -eq 0 ] || [ -w "$(pg_config --pkglibdir)" ]; then make -s install >/dev/null; fi

model=${1:-}
if [ -z "$model" ]; then
    SHAPE="--dim 768 --layers 12 --heads 12 --ffn 2048 --vocab 32000 --ctx 1024"
    tag=$(echo "$SHAPE" | tr -d ' -' | tr -c 'a-z0-9\n' '_')
    model=.cache/models/random-$tag-Q8_0.gguf
    if [ ! -f "$model" ]; then
        mkdir -p .cache/models
        base=.cache/models/random-$tag-F32.gguf
        [ -f "$base" ] || bin/llm-random-model -o "$base" $SHAPE --type F32
        bin/llm-cli quantize "$base" "$model" Q8_0 2>/dev/null
    fi
fi

. tools/pgtemp.sh

# 1. overhead on stories260K
cli_s=$(for i in $(seq 20); do
    bin/llm-cli generate -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 32 --threads "$THREADS" 2>&1 >/dev/null |
        sed -n 's/.*generated, finish: [a-z]*, \([0-9.]*\) s,.*/\1/p'
done | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
pgtemp_start "$SHARED/models/stories260K.gguf" "llm.threads = $THREADS" "llm.cache_mb = 0"
sql_s=$("${PSQL[@]}" -At <<'SQL'
SELECT llm_generate('Once upon a time', 32);  -- warm-up
CREATE TEMP TABLE t(s float8);
DO $$
DECLARE t0 timestamptz;
BEGIN
    FOR i IN 1..20 LOOP
        t0 := clock_timestamp();
        PERFORM llm_generate('Once upon a time', 32);
        INSERT INTO t VALUES (extract(epoch FROM clock_timestamp() - t0));
    END LOOP;
END $$;
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY s) FROM t;
SQL
)
sql_s=$(echo "$sql_s" | tail -n 1)
pgtemp_cleanup
PGTEMP_DIR=

# 2. batch throughput through SQL
pgtemp_start "$model" "llm.threads = $THREADS" "llm.cache_mb = 0" "llm.max_batch_tokens = 512"
rows=$OUT/sql_bench.rows
: > "$rows"
for n in $BATCHES; do
    "${PSQL[@]}" -At -F, <<SQL >> "$rows"
SELECT llm_generate('warm up', 2);
CREATE TEMP TABLE IF NOT EXISTS r(n int, s float8, toks bigint);
DO \$\$
DECLARE t0 timestamptz; toks bigint;
BEGIN
    t0 := clock_timestamp();
    SELECT sum(completion_tokens) INTO toks
    FROM llm_generate_batch(array(SELECT 'Document ' || i || ': the quick brown fox jumps over the lazy dog.'
                                  FROM generate_series(1, $n) i), $NEW);
    INSERT INTO r VALUES ($n, extract(epoch FROM clock_timestamp() - t0), toks);
END \$\$;
SELECT n, toks, round(s::numeric, 3), round((toks / s)::numeric, 1) FROM r WHERE n = $n;
SQL
done
pgtemp_stop

python3 - "$rows" "$OUT" "$cli_s" "$sql_s" "$model" <<'PY'
import csv, json, sys
rows_path, out, cli_s, sql_s, model = sys.argv[1:6]
cli_s, sql_s = float(cli_s), float(sql_s)
rows = []
for line in open(rows_path):
    v = line.strip().split(",")
    if len(v) == 4 and v[0].isdigit():
        rows.append({"sequences": int(v[0]), "tokens": int(v[1]), "seconds": float(v[2]), "tok_s": float(v[3])})
print("| stories260K, 32 tokens | median seconds |")
print("|---|---:|")
print(f"| llm-cli generate (engine only) | {cli_s:.4f} |")
print(f"| SELECT llm_generate(...) | {sql_s:.4f} |")
print(f"| ratio SQL / CLI | {sql_s / cli_s:.2f} |")
print()
print(f"| {model}: sequences | tokens | seconds | aggregate tok/s |")
print("|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['sequences']} | {r['tokens']} | {r['seconds']:.2f} | {r['tok_s']:.1f} |")
with open(f"{out}/sql_bench.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["sequences", "tokens", "seconds", "tok_s"])
    w.writeheader()
    w.writerows(rows)
with open(f"{out}/sql_bench.json", "w") as f:
    json.dump({"overhead": {"cli_seconds": cli_s, "sql_seconds": sql_s, "ratio": sql_s / cli_s},
               "model": model, "batch": rows}, f, indent=1)
PY
rm -f "$rows"
