#!/usr/bin/env bash
# Prefill speed of one long prompt, by length, side by side with llama.cpp:
# Gemma 3 270M (Q4_K_M; five of its six layers attend over a sliding window
# of 512, so a long prompt should cost little more per token than a short
# one), batch 1, THREADS threads (default 2).
#
#   bench/long_prompt_bench.sh [MODEL]
#
# MODEL: "gemma" (default), "smollm2" or a GGUF path.  LENGTHS overrides the
# prompt lengths (default "512 2048 8192 16384").  llm: llm-cli bench -p L
# -n 1 -b 1 --step-ms 0, its prefill tok/s (one run: the long ones take
# minutes).  llama.cpp (LLAMA_CPP_BIN, the folder of llama-bench, built by
# hand, never in CI): llama-bench -p L -n 0 -r 1, its pp tok/s.  Writes
# bench/results/long_prompt_bench.{csv,json} and prints the table with the
# ratio llm / llama.cpp at each length.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${1:-gemma}
LENGTHS=${LENGTHS:-"512 2048 8192 16384"}
THREADS=${THREADS:-2}
OUT=bench/results
mkdir -p "$OUT"
make -s bin/llm-cli
case "$MODEL" in
    gemma|smollm2) m=$(tools/fetch-model.sh "$MODEL" | tail -n 1) ;;
    *) m=$MODEL ;;
esac

csv=$OUT/long_prompt_bench.csv
echo "model,prompt,llm_prefill,llamacpp_prefill,ratio" > "$csv"
printf '%-10s %7s %12s %12s %6s\n' model prompt llm-pp cpp-pp x
for L in $LENGTHS; do
    pp=$(bin/llm-cli bench -m "$m" -p "$L" -n 1 -b 1 --threads "$THREADS" --step-ms 0 2>/dev/null |
        awk -F'|' 'NR == 3 { gsub(/ /, "", $5); print $5 }')
    cpp=""
    if [ -n "${LLAMA_CPP_BIN:-}" ] && [ -x "$LLAMA_CPP_BIN/llama-bench" ]; then
        cpp=$(LD_LIBRARY_PATH=$LLAMA_CPP_BIN "$LLAMA_CPP_BIN/llama-bench" -m "$m" -p "$L" -n 0 -t "$THREADS" -r 1 2>/dev/null |
            awk -F'|' '/pp[0-9]/ { split($8, a, " "); print a[1] }')
    fi
    ratio=$([ -n "$cpp" ] && echo "$pp / $cpp" | bc -l || echo "")
    printf '%-10s %7d %12.1f %12s %6s\n' "$(basename "$MODEL" .gguf)" "$L" "$pp" "${cpp:--}" \
        "$([ -n "$ratio" ] && printf '%.2f' "$ratio" || echo -)"
    echo "$(basename "$MODEL" .gguf),$L,$pp,$cpp,$ratio" >> "$csv"
done

python3 - "$csv" "$OUT/long_prompt_bench.json" "$THREADS" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    for k in ('prompt', 'llm_prefill', 'llamacpp_prefill', 'ratio'):
        r[k] = round(float(r[k]), 3) if r[k] else None
json.dump({'threads': int(sys.argv[3]), 'rows': rows}, open(sys.argv[2], 'w'), indent=1)
PY
