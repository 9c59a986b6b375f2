#!/usr/bin/env bash
# Whole-prefill speed with the AVX-512 level's AMX tiles on (LLM_CPU_AMX=1)
# and off, side by side in one run: llm-cli bench of a PROMPT-token prefill,
# batch 1, the two settings in turns, ROUNDS rounds, the median of each.
# Models: a random 134M Q8_0 (dim 768, ffn 2048: every matmul's rows are
# whole groups of blocks, as the tiles need), with BIG=1 a random 1.1B
# Q8_0 (dim 2048, ffn 5632), and SmolLM2-135M-Instruct Q4_1 (only its
# down projection, 1536 columns, is whole groups).
#
#   bench/amx_prefill.sh [THREADS]     writes bench/results/amx_prefill.{csv,md}
#
# On a processor without AMX both columns run the VNNI tiles.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${1:-2}
PROMPTS=${PROMPTS:-"128 512"}
ROUNDS=${ROUNDS:-3}
MODELS=.cache/models
OUT=bench/results
mkdir -p "$MODELS" "$OUT"
make -s bin/llm-cli bin/llm-random-model

models=("random-134m-Q8_0 $MODELS/random-134m-llm-Q8_0.gguf --dim 768 --layers 12 --heads 12 --ffn 2048 --vocab 32000 --ctx 1024")
[ "${BIG:-0}" = 1 ] && models+=("random-1b1-Q8_0 $MODELS/random-1b1-llm-Q8_0.gguf --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000 --ctx 2048")
models+=("smollm2-135m-Q4_1 $(tools/fetch-model.sh smollm2 | tail -n 1)")

# prefill tok/s of one llm-cli bench run
prefill() {
    env LLM_CPU_AMX="$1" bin/llm-cli bench -m "$2" -p "$3" -n 1 -b 1 --threads "$THREADS" 2>/dev/null |
        tail -n 1 | awk -F'|' '{ gsub(/ /, "", $5); print $5 }'
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
csv=$OUT/amx_prefill.csv
md=$OUT/amx_prefill.md
echo "model,prompt,amx_on_tok_s,amx_off_tok_s,ratio" > "$csv"
{
    echo "| model | prompt tokens | AMX on (tok/s) | AMX off (tok/s) | on / off |"
    echo "|---|---:|---:|---:|---:|"
} > "$md"
for entry in "${models[@]}"; do
    read -r name path shape <<<"$entry"
    [ -f "$path" ] || bin/llm-random-model -o "$path" $shape --type Q8_0 >/dev/null
    for p in $PROMPTS; do
        on=""
        off=""
        for _ in $(seq "$ROUNDS"); do
            on="$on $(prefill 1 "$path" "$p")"
            off="$off $(prefill 0 "$path" "$p")"
        done
        a=$(echo "$on" | median)
        b=$(echo "$off" | median)
        r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')
        echo "$name,$p,$a,$b,$r" >> "$csv"
        echo "| $name | $p | $a | $b | ${r}x |" >> "$md"
        echo "$name p$p: on $a off $b (${r}x)"
    done
done
echo >> "$md"
echo "Processor: $cpu, $THREADS threads; llm-cli bench, batch 1, median of $ROUNDS rounds, the settings in turns." >> "$md"
cat "$md"
