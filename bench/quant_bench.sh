#!/usr/bin/env bash
# Batch-1 prefill and decode of every weight type, side by side with
# llama.cpp, and decode as a fraction of the DRAM roofline.
#
# Models: a random Llama of DESIGN.md's 134M reference shape (BIG=1 adds
# TinyLlama's 1.1B shape, which is DRAM-bound), written in F32 by
# llm-random-model and quantized by llama.cpp's llama-quantize to each of
# TYPES (default "Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K_M Q5_K_M Q3_K_M Q2_K"); and
# (unless REAL=0) the real Gemma 3 270M (Q4_K_M) and SmolLM2-135M (Q4_1)
# from tools/fetch-model.sh.
# Without LLAMA_CPP_BIN (the folder of llama-bench and llama-quantize,
# built by hand, never in CI) only Q8_0 and Q4_0 are made, by
# llm-random-model, and llama.cpp's columns stay empty.
#
# Per model: llm-cli bench -p 128 -n 64 -b 1 after a warm-up run (the
# median of three), and llama-bench -p 128 -n 64 -r 3 (its mean), THREADS
# threads (default 2).  The machine is shared: ratios move by about 15%
# between runs.  The roofline is the read bandwidth that
# bench/peak_probe.c measures at THREADS threads divided by the weight
# bytes one decode step reads (bench/gguf_decode_bytes.py).  Prints a table
# and writes bench/results/$NAME.{csv,json} (NAME default quant_bench).
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
TYPES=${TYPES:-"Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K_M Q5_K_M Q3_K_M Q2_K"}
NAME=${NAME:-quant_bench}
REAL=${REAL:-1}
MODELS=.cache/models
OUT=bench/results
mkdir -p "$MODELS" "$OUT"
make -s bin/llm-cli bin/llm-random-model

cc -std=c11 -D_GNU_SOURCE -O2 -pthread -o build/peak_probe bench/peak_probe.c
bw=$(build/peak_probe --dram "$THREADS" 2>/dev/null)
echo "DRAM read bandwidth at $THREADS threads: $bw GB/s"

shapes=("134m:--dim 768 --layers 12 --heads 12 --ffn 2048 --vocab 32000 --ctx 1024")
[ "${BIG:-0}" = 1 ] && shapes+=("1b1:--dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000 --ctx 2048")

# The models to measure, "name path" per line.
models=()
for s in "${shapes[@]}"; do
    tag=${s%%:*}
    shape=${s#*:}
    if [ -n "${LLAMA_CPP_BIN:-}" ]; then
        f32=$MODELS/random-$tag-F32.gguf
        [ -f "$f32" ] || bin/llm-random-model -o "$f32" $shape --type F32 >/dev/null
        for t in $TYPES; do
            m=$MODELS/random-$tag-$t.gguf
            [ -f "$m" ] || LD_LIBRARY_PATH=$LLAMA_CPP_BIN "$LLAMA_CPP_BIN/llama-quantize" "$f32" "$m" "$t" >/dev/null 2>&1
            models+=("random-$tag-$t $m")
        done
    else
        for t in Q8_0 Q4_0; do
            m=$MODELS/random-$tag-llm-$t.gguf
            [ -f "$m" ] || bin/llm-random-model -o "$m" $shape --type "$t" >/dev/null
            models+=("random-$tag-$t $m")
        done
    fi
done
if [ "$REAL" = 1 ]; then
    models+=("gemma-3-270m-Q4_K_M $(tools/fetch-model.sh gemma | tail -n 1)")
    models+=("smollm2-135m-Q4_1 $(tools/fetch-model.sh smollm2 | tail -n 1)")
fi

csv=$OUT/$NAME.csv
echo "model,decode_mb,llm_prefill,llm_decode,llamacpp_prefill,llamacpp_decode,prefill_ratio,decode_ratio,roofline_tok_s,llm_roofline_fraction,llamacpp_roofline_fraction" > "$csv"
printf '%-22s %8s %9s %8s %9s %8s %6s %6s %8s %6s %6s\n' model MB/token llm-pp llm-tg cpp-pp cpp-tg pp-x tg-x roof llm% cpp%
for entry in "${models[@]}"; do
    name=${entry%% *}
    m=${entry#* }
    bytes=$(python3 bench/gguf_decode_bytes.py "$m")
    # a warm-up run first: the file in the page cache, the processor clocked up
    bin/llm-cli bench -m "$m" -p 128 -n 8 -b 1 --threads "$THREADS" --step-ms 0 >/dev/null 2>&1
    # the median of three runs, as llama-bench's three repetitions
    read -r pp tg <<< "$(for rep in 1 2 3; do
        bin/llm-cli bench -m "$m" -p 128 -n 64 -b 1 --threads "$THREADS" --step-ms 0 2>/dev/null | awk -F'|' 'NR == 3 { print $5, $6 }'
    done | python3 -c 'import sys, statistics as st; r = [l.split() for l in sys.stdin if l.strip()]; print(st.median(float(a) for a, _ in r), st.median(float(b) for _, b in r))')"
    cpp_pp=""; cpp_tg=""
    if [ -n "${LLAMA_CPP_BIN:-}" ]; then
        read -r cpp_pp cpp_tg <<< "$(LD_LIBRARY_PATH=$LLAMA_CPP_BIN "$LLAMA_CPP_BIN/llama-bench" -m "$m" -p 128 -n 64 \
            -t "$THREADS" -r 3 2>/dev/null | awk -F'|' '/pp128/ { split($8, a, " "); p = a[1] } /tg64/ { split($8, a, " "); t = a[1] } END { print p, t }')"
    fi
    roof=$(echo "$bw * 1000000000 / $bytes" | bc -l)
    ratio() { [ -n "$2" ] && echo "$1 / $2" | bc -l || echo ""; }
    frac() { [ -n "$1" ] && echo "$1 / $roof" | bc -l || echo ""; }
    printf '%-22s %8.1f %9.1f %8.1f %9s %8s %6s %6s %8.1f %6.2f %6s\n' "$name" "$(echo "$bytes / 1000000" | bc -l)" \
        "$pp" "$tg" "${cpp_pp:--}" "${cpp_tg:--}" "$(printf '%.2f' "$(ratio "$pp" "$cpp_pp")" 2>/dev/null || echo -)" \
        "$(printf '%.2f' "$(ratio "$tg" "$cpp_tg")" 2>/dev/null || echo -)" "$roof" "$(frac "$tg")" \
        "$(printf '%.2f' "$(frac "$cpp_tg")" 2>/dev/null || echo -)"
    echo "$name,$(echo "$bytes / 1000000" | bc -l),$pp,$tg,$cpp_pp,$cpp_tg,$(ratio "$pp" "$cpp_pp"),$(ratio "$tg" "$cpp_tg"),$roof,$(frac "$tg"),$(frac "$cpp_tg")" >> "$csv"
done

python3 - "$csv" "$OUT/$NAME.json" "$bw" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    for k in r:
        if k != 'model':
            r[k] = round(float(r[k]), 3) if r[k] not in ('', None) else None
with open(sys.argv[1], 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
json.dump({'dram_read_gb_s': float(sys.argv[3]), 'models': rows}, open(sys.argv[2], 'w'), indent=1)
PY
