#!/usr/bin/env bash
# Where a decode step turns compute-bound: the knee of speculative
# decoding's cost model (src/engine/spec_gate.h).
#
#   bench/spec_knee.sh [MODELS] [THREADS]
#
# MODELS: smollm2 and/or gemma (default both); THREADS default 2.  Runs
# `llm-cli bench -p 16 -n 48` at batches 1 to 32 (steps unpaced), takes each
# batch's decode step time (batch / decode tok/s), and fits
# t(n) = t0 + c * n: once over the smallest batches (1 and 2, where a lone
# sequence's drafts land) and once over 4 to 32.  The knee t0 / c is the
# number of tokens at which a step's compute costs what reading its weights
# does.  Writes bench/results/spec_knee.{csv,md}; quote it with the
# processor's name (printed first).
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_NAMES=${1:-"smollm2 gemma"}
THREADS=${2:-2}
BATCHES=1,2,4,8,16,32
OUT=bench/results
mkdir -p "$OUT"
make -s bin/llm-cli

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "processor: $cpu; $THREADS threads"
echo "model,batch,decode_tok_s,step_ms" > "$OUT/spec_knee.csv"
for name in $MODEL_NAMES; do
    model=$(tools/fetch-model.sh "$name" | tail -n 1)
    bin/llm-cli bench -m "$model" -p 16 -n 48 -b "$BATCHES" --threads "$THREADS" --step-ms 0 2>/dev/null |
        awk -F'|' -v m="$name" '$2 ~ /[0-9]/ { printf "%s,%d,%.1f,%.3f\n", m, $2, $6, 1000 * $2 / $6 }' >> "$OUT/spec_knee.csv"
done

{
    echo "Decode step time against the tokens it feeds, and the knee t0 / c of t(n) = t0 + c * n:"
    echo "$cpu, $THREADS threads, \`bench/spec_knee.sh\`."
    echo
    echo "| model | step ms at batch 1, 2, 4, 8, 16, 32 | knee from batches 1-2 | knee from 4-32 (least squares) |"
    echo "|---|---|---:|---:|"
    awk -F, 'NR > 1 { t[$1, $2] = $4; ms[$1] = ms[$1] sprintf("%s%.2f", ms[$1] == "" ? "" : ", ", $4); if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
        END {
            for (i = 1; i <= n; i++) {
                m = order[i]
                c = t[m, 2] - t[m, 1]; k12 = (t[m, 1] - c) / c
                sx = sy = sxx = sxy = 0; k = 0
                for (b = 4; b <= 32; b *= 2) { sx += b; sy += t[m, b]; sxx += b * b; sxy += b * t[m, b]; k++ }
                cl = (k * sxy - sx * sy) / (k * sxx - sx * sx); t0 = (sy - cl * sx) / k
                printf "| %s | %s | %.1f | %.1f |\n", m, ms[m], k12, t0 / cl
            }
        }' "$OUT/spec_knee.csv"
} > "$OUT/spec_knee.md"
cat "$OUT/spec_knee.md"
