#!/usr/bin/env bash
# Engine throughput on random Llama models of a fixed shape, through
# `llm-cli bench`: prefill and decode tok/s per weight type and number of
# concurrent sequences.  Prints one table and writes
# bench/results/engine_bench.{csv,json}.
#
#   bench/engine_bench.sh [TYPES] [BATCHES] [THREADS]
#   defaults: "F32 Q8_0" "1,4,16" 2, shape dim 768, 12 layers, 12 heads,
#   FFN 2048, vocab 32000 (DESIGN.md's 134M reference model), prompt 128,
#   32 new tokens (override with PROMPT=, NEW=, SHAPE="--dim ... ").
set -euo pipefail
cd "$(dirname "$0")/.."

TYPES=${1:-"F32 Q8_0"}
BATCHES=${2:-1,4,16}
THREADS=${3:-2}
PROMPT=${PROMPT:-128}
NEW=${NEW:-32}
SHAPE=${SHAPE:-"--dim 768 --layers 12 --heads 12 --ffn 2048 --vocab 32000 --ctx 1024"}
MODELS=.cache/models
OUT=bench/results
mkdir -p "$MODELS" "$OUT"
make -s bin/llm-cli bin/llm-random-model

tag=$(echo "$SHAPE" | tr -d ' -' | tr -c 'a-z0-9\n' '_')
base=$MODELS/random-$tag-F32.gguf
[ -f "$base" ] || bin/llm-random-model -o "$base" $SHAPE --type F32

rows=$OUT/engine_bench.rows
: > "$rows"
for t in $TYPES; do
    m=$MODELS/random-$tag-$t.gguf
    [ -f "$m" ] || bin/llm-cli quantize "$base" "$m" "$t" 2>/dev/null
    bin/llm-cli bench -m "$m" -p "$PROMPT" -n "$NEW" -b "$BATCHES" --threads "$THREADS" 2>/dev/null |
        awk -v t="$t" -F'|' 'NR > 2 { gsub(/ /, ""); print t "," $2 "," $3 "," $4 "," $5 "," $6 "," $7 }' >> "$rows"
done

python3 - "$rows" "$OUT" "$THREADS" <<'PY'
import csv, json, sys
rows_path, out, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
fields = ["type", "batch", "prompt", "new", "prefill_tok_s", "decode_tok_s", "seconds"]
rows = []
for line in open(rows_path):
    v = line.strip().split(",")
    rows.append({"type": v[0], "batch": int(v[1]), "prompt": int(v[2]), "new": int(v[3]),
                 "prefill_tok_s": float(v[4]), "decode_tok_s": float(v[5]), "seconds": float(v[6])})
with open(f"{out}/engine_bench.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
with open(f"{out}/engine_bench.json", "w") as f:
    json.dump({"threads": threads, "rows": rows}, f, indent=1)
print("| type | batch | prompt | new | prefill tok/s | decode tok/s |")
print("|------|------:|-------:|----:|--------------:|-------------:|")
for r in rows:
    print(f"| {r['type']} | {r['batch']} | {r['prompt']} | {r['new']} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.1f} |")
PY
rm -f "$rows"
