#!/usr/bin/env bash
# Engine throughput through `llm-cli bench`, side by side with llama.cpp's
# llama-batched-bench on the same GGUF files in the same run when it is there,
# and the inter-token latency of decoders beside one long prompt.
#
#   bench/engine_bench.sh [MODELS] [BATCHES] [THREADS]
#
# MODELS: space-separated names, each "q8_0" or "q4_0" (a random Llama of
# DESIGN.md's 134M reference shape, written by llm-random-model), "gemma"
# (Gemma 3 270M Q4_K_M) or "smollm2" (SmolLM2-135M-Instruct Q4_1), both
# fetched by tools/fetch-model.sh; or a path to a GGUF file.  Defaults:
# "q8_0 gemma smollm2", batches 1,4,16,64, 2 threads, prompt 128, 64 new
# tokens (PROMPT=, NEW= override).  llm runs with --step-ms 0 here, so that
# as in llama-batched-bench every prompt is prefilled in full chunks (paced
# steps overlap the two phases; the latency table shows what pacing does).
# llm's decode figure counts only the steps that computed no prompt token,
# as S_TG counts llama-batched-bench's generation phase; its prefill figure
# is the prompt tokens over the time until the last one was computed (the
# sequences admitted first decode meanwhile, so it reads lower than a pure
# S_PP).  Both engines keep an f16 KV cache by default, and both write its
# pages before they time anything (llm-cli bench prefaults its pool, as a
# long-running server's is after its first requests; llama.cpp clears its
# KV buffer when it makes a context), so neither pays first-touch faults.
#
# llama.cpp: LLAMA_CPP_BIN names the folder of llama-batched-bench (built
# once from the llama-cpp-python sdist's vendor/llama.cpp with CMake; never in
# CI); without it only llm is measured.  Its aggregate decode figure is
# S_TG t/s at each batch, prefill S_PP t/s.
#
# LATENCY=0 skips the latency table: 8 decoders (prompt 32) alone and beside
# one prompt of LONG tokens (default 8192) on Gemma, paced (the engine's
# default step time) and unpaced (--step-ms 0).
#
# Writes bench/results/engine_bench.{csv,json} and latency.{csv,json}, and
# prints both tables.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_NAMES=${1:-"q8_0 gemma smollm2"}
BATCHES=${2:-1,4,16,64}
THREADS=${3:-2}
PROMPT=${PROMPT:-128}
NEW=${NEW:-64}
LONG=${LONG:-8192}
LATENCY=${LATENCY:-1}
SHAPE="--dim 768 --layers 12 --heads 12 --ffn 2048 --vocab 32000 --ctx 1024"
MODELS=.cache/models
OUT=bench/results
mkdir -p "$MODELS" "$OUT"
make -s bin/llm-cli bin/llm-random-model

# The GGUF path of a model name.
model_path() {
    case "$1" in
        q8_0|q4_0|f32|f16|bf16)
            local t m
            t=$(echo "$1" | tr a-z A-Z)
            m=$MODELS/random-134m-$t.gguf
            [ -f "$m" ] || bin/llm-random-model -o "$m" $SHAPE --type "$t" >/dev/null
            echo "$m" ;;
        gemma|smollm2) tools/fetch-model.sh "$1" | tail -n 1 ;;
        *) echo "$1" ;;
    esac
}

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for name in $MODEL_NAMES; do
    m=$(model_path "$name")
    bin/llm-cli bench -m "$m" -p "$PROMPT" -n "$NEW" -b "$BATCHES" --threads "$THREADS" --step-ms 0 2>/dev/null |
        awk -v n="$name" -F'|' 'NR > 2 { gsub(/ /, ""); print "llm," n "," $2 "," $5 "," $6 }' >> "$rows"
    if [ -n "${LLAMA_CPP_BIN:-}" ] && [ -x "$LLAMA_CPP_BIN/llama-batched-bench" ]; then
        max_b=$(echo "$BATCHES" | tr ',' '\n' | sort -n | tail -n 1)
        "$LLAMA_CPP_BIN/llama-batched-bench" -m "$m" -c $(( max_b * (PROMPT + NEW) + 64 )) -b 2048 -ub 512 \
            -npp "$PROMPT" -ntg "$NEW" -npl "$BATCHES" -t "$THREADS" 2>/dev/null |
            awk -v n="$name" -F'|' '$2 ~ /^ *[0-9]+ *$/ { gsub(/ /, ""); print "llama.cpp," n "," $4 "," $7 "," $9 }' >> "$rows"
    fi
done

python3 - "$rows" "$OUT" "$THREADS" "$PROMPT" "$NEW" <<'PY'
import csv, json, sys
rows_path, out, threads, prompt, new = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = []
for line in open(rows_path):
    engine, model, batch, pp, tg = line.strip().split(",")
    rows.append({"engine": engine, "model": model, "batch": int(batch), "prompt": prompt, "new": new,
                 "prefill_tok_s": float(pp), "decode_tok_s": float(tg)})
fields = ["engine", "model", "batch", "prompt", "new", "prefill_tok_s", "decode_tok_s"]
with open(f"{out}/engine_bench.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
with open(f"{out}/engine_bench.json", "w") as f:
    json.dump({"threads": threads, "rows": rows}, f, indent=1)
ref = {(r["model"], r["batch"]): r for r in rows if r["engine"] == "llama.cpp"}
print(f"| model | batch | llm prefill tok/s | llm decode tok/s | llama.cpp prefill | llama.cpp decode | decode ratio |")
print(f"|-------|------:|------------------:|-----------------:|------------------:|-----------------:|-------------:|")
for r in rows:
    if r["engine"] != "llm":
        continue
    l = ref.get((r["model"], r["batch"]))
    lp = f"{l['prefill_tok_s']:.1f}" if l else ""
    ld = f"{l['decode_tok_s']:.1f}" if l else ""
    ratio = f"{r['decode_tok_s'] / l['decode_tok_s']:.2f}x" if l and l["decode_tok_s"] > 0 else ""
    print(f"| {r['model']} | {r['batch']} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.1f} | {lp} | {ld} | {ratio} |")
PY

[ "$LATENCY" = 1 ] || exit 0
gemma=$(model_path gemma)
lat=$(mktemp)
trap 'rm -f "$rows" "$lat"' EXIT
for pacing in paced unpaced; do
    step=(); [ "$pacing" = unpaced ] && step=(--step-ms 0)
    bin/llm-cli bench -m "$gemma" -p 32 -n 1200 -b 8 --long "$LONG" --threads "$THREADS" "${step[@]}" 2>/dev/null |
        awk -v p="$pacing" -F'|' 'NR > 2 { gsub(/ /, ""); print p "," $2 "," $3 "," $4 "," $5 "," $6 "," $7 "," $8 }' >> "$lat"
done
python3 - "$lat" "$OUT" <<'PY'
import csv, json, sys
lat_path, out = sys.argv[1], sys.argv[2]
fields = ["pacing", "decoders", "long_prompt", "decode_steps", "itl_p50_ms", "itl_p99_ms", "itl_max_ms", "long_prefill_tok_s"]
rows = []
for line in open(lat_path):
    v = line.strip().split(",")
    rows.append(dict(zip(fields, [v[0], int(v[1]), v[2], int(v[3]), float(v[4]), float(v[5]), float(v[6]), v[7]])))
with open(f"{out}/latency.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
with open(f"{out}/latency.json", "w") as f:
    json.dump({"model": "gemma-3-270m-q4_k_m", "rows": rows}, f, indent=1)
print()
print("| pacing | decoders | long prompt | decode steps | ITL p50 ms | ITL p99 ms | ITL max ms | long prefill tok/s |")
print("|--------|---------:|------------:|-------------:|-----------:|-----------:|-----------:|-------------------:|")
for r in rows:
    print(f"| {r['pacing']} | {r['decoders']} | {r['long_prompt']} | {r['decode_steps']} | {r['itl_p50_ms']:.1f} | "
          f"{r['itl_p99_ms']:.1f} | {r['itl_max_ms']:.1f} | {r['long_prefill_tok_s']} |")
PY
