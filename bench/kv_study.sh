#!/usr/bin/env bash
# KV eviction and INT8 KV quality and throughput study (issue 7).
#
#   bench/kv_study.sh [stories|gemma|throughput|all|report] [THREADS]   (report: only rewrite h2o.md)
#
# Quality: perplexity (llm-cli perplexity, chunks scored on their second
# half) with every prediction made from the cache as eviction left it
# (--kv-budget: one position of every chunk a step, eviction after each),
# at budgets of 100%, 50%, 20% and 10% of the chunk, for H2O (sinks + recent
# half + heavy hitters by summed attention), H2O ranked by mean attention,
# StreamingLLM (sinks + recent) and a plain window;
# and for the INT8 KV cache.  stories260K on ../shared/data/stories260K-samples.txt
# (chunks of 256), Gemma 3 270M on the first 16 KB of the GPL-3 (plain English,
# chunks of 512).
# Throughput: llm-cli bench with long generations (512 new tokens) at a
# fixed KV pool, budget 20% (of prompt + generation) against no eviction.
#
# Writes bench/results/kv_study_<model>.csv, bench/results/kv_throughput.csv
# and regenerates bench/results/h2o.md from every CSV present.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-all}
threads=${2:-2}
CLI=${LLM_CLI:-bin/llm-cli}
out=bench/results
mkdir -p "$out"
[ -x "$CLI" ] || make -s "$CLI"

# perplexity ARGS...: the PPL value llm-cli prints
ppl() {
    "$CLI" perplexity --threads "$threads" "$@" 2>/dev/null | sed -n 's/^PPL = //p'
}

# study NAME MODEL TEXT CHUNK: one CSV of perplexities
study() {
    local name=$1 model=$2 text=$3 chunk=$4
    local csv=$out/kv_study_$name.csv
    echo "model,kv,policy,budget_pct,budget_tokens,ppl" > "$csv"
    echo "== $name: chunks of $chunk" >&2
    local base
    base=$(ppl -m "$model" -f "$text" -c "$chunk" --kv-budget 100%)
    echo "$name,f32,full,100,$chunk,$base" >> "$csv"
    echo "   full cache: $base" >&2
    local v
    v=$(ppl -m "$model" -f "$text" -c "$chunk" --kv int8 --kv-budget 100%)
    echo "$name,int8,full,100,$chunk,$v" >> "$csv"
    echo "   int8 KV: $v" >&2
    for policy in h2o h2o_mean streaming window; do
        for pct in 50 20 10; do
            v=$(ppl -m "$model" -f "$text" -c "$chunk" --kv-budget "$pct%" --evict "$policy")
            echo "$name,f32,$policy,$pct,$((chunk * pct / 100)),$v" >> "$csv"
            echo "   $policy $pct%: $v" >&2
        done
    done
}

# throughput MODEL MB BATCHES: decode tok/s and concurrency at a fixed pool, budget 20% vs off
throughput() {
    local model=$1 mb=$2 batches=$3
    local csv=$out/kv_throughput.csv
    [ -f "$csv" ] || echo "model,budget,kv_mb,sequences,decode_tok_s,mean_running,preemptions" > "$csv"
    for budget in 0 20%; do
        "$CLI" bench -m "$model" -p 64 -n 512 -b "$batches" --threads "$threads" --kv-mb "$mb" \
            --kv-budget "$budget" 2>/dev/null |
            awk -F'|' -v b="$budget" -v mb="$mb" -v m="$(basename "$model" .gguf | sed 's/^random-134m-Q8_0$/random-134M-Q8_0/')" \
                'NR > 2 { gsub(/ /, ""); print m "," (b == "0" ? "off" : b) "," mb "," $2 "," $6 "," $10 "," $11 }' >> "$csv"
    done
    column -s, -t "$csv" >&2
}

case $what in
    stories|all) study stories260K ../shared/models/stories260K.gguf ../shared/data/stories260K-samples.txt 256 ;;&
    gemma|all)
        # the first 16 KB of the GPL-3 (about 3900 tokens: 7 chunks, run side by side)
        text=$(mktemp)
        trap 'rm -f "$text"' EXIT
        head -c 16384 /usr/share/common-licenses/GPL-3 > "$text"
        study gemma3-270m "$(tools/fetch-model.sh gemma | tail -n 1)" "$text" 512 ;;&
    throughput|all)
        rm -f "$out/kv_throughput.csv"
        # stories260K: 1280 bytes of f32 KV per position, 4 MB hold about 5 sequences of 576
        throughput ../shared/models/stories260K.gguf 4 16,64
        # the random 134M Llama (Q8_0, made by bench/engine_bench.sh): 72 KB per position, 256 MB hold 6
        m134=.cache/models/random-134m-Q8_0.gguf
        [ -f "$m134" ] && throughput "$m134" 256 16 ;;
    stories|gemma|report) ;;
    *) echo "usage: $0 [stories|gemma|throughput|all|report] [THREADS]" >&2; exit 2 ;;
esac

# the report: one table per model, targets checked
{
    echo "# KV eviction (H2O) and INT8 KV: measured quality"
    echo
    echo "Made by \`bench/kv_study.sh all $threads\` (this file last rewritten by \`$what\`, $(date -u +%Y-%m-%d),"
    echo "$(nproc) cores). Random 134M = random-134m-Q8_0 from bench/engine_bench.sh."
    echo "Perplexity over chunks scored on their second half; with a budget every prediction sees only the"
    echo "keys eviction kept (token by token). Budget = keys kept per layer and KV head, as % of the chunk."
    echo "H2O keeps 4 sinks, the newest half of the budget and the highest accumulated attention (summed over"
    echo "the queries so far; \"mean score\": divided by the number of queries that saw the key);"
    echo "StreamingLLM keeps 4 sinks and the newest; window keeps only the newest."
    for csv in "$out"/kv_study_*.csv; do
        [ -f "$csv" ] || continue
        echo
        awk -F, 'NR == 2 { name = $1; base = $6 }
            NR > 1 { v[$2 "," $3 "," $4] = $6 }
            END {
                printf "## %s\n\n", name
                printf "| budget | H2O | H2O, mean score | sinks + window | window only |\n|---|---:|---:|---:|---:|\n"
                printf "| 100%% (full cache) | %.4f | %.4f | %.4f | %.4f |\n", base, base, base, base
                n = split("50 20 10", pcts, " ")
                for (i = 1; i <= n; i++) {
                    p = pcts[i]
                    printf "| %s%% |", p
                    m = split("h2o h2o_mean streaming window", pols, " ")
                    for (k = 1; k <= m; k++)
                        printf " %.4f (%+.2f%%) |", v["f32," pols[k] "," p], 100 * (v["f32," pols[k] "," p] / base - 1)
                    printf "\n"
                }
                i8 = v["int8,full,100"]
                printf "\nINT8 KV cache (full): %.4f (%+.3f%% against f32; target within 0.5%%: %s)\n", i8,
                    100 * (i8 / base - 1), (i8 / base - 1 < 0.005 && i8 / base - 1 > -0.005) ? "met" : "NOT met"
                h = v["f32,h2o,20"]; w = v["f32,window,20"]
                printf "H2O at 20%%: %+.2f%% against the full cache (target within 2%%: %s); window only at 20%%: %+.2f%%\n",
                    100 * (h / base - 1), (h / base - 1 < 0.02) ? "met" : "NOT met", 100 * (w / base - 1)
            }' "$csv"
    done
    if [ -f "$out/kv_throughput.csv" ]; then
        echo
        echo "## Throughput: 512 new tokens per sequence, fixed KV pool"
        echo
        echo "| model | budget | KV MB | sequences | decode tok/s | running at once (mean) | preemptions |"
        echo "|---|---|---:|---:|---:|---:|---:|"
        awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %.1f | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' \
            "$out/kv_throughput.csv"
    fi
} > "$out/h2o.md"
cat "$out/h2o.md"
