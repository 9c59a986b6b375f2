#!/usr/bin/env bash
# Speculative decoding (prompt lookup) against plain decoding, side by side
# in one run, through `llm-cli bench --prompts` on real prompts.
#
#   bench/spec_bench.sh [MODELS] [BATCHES] [THREADS]
#
# MODELS: "smollm2" (SmolLM2-135M-Instruct Q4_1, prompts in its chat format)
# and "gemma" (Gemma 3 270M base Q4_K_M, plain prompts) draft by prompt
# lookup (ngram); "smollm2-f16" (an F16 copy of SmolLM2 made with
# `llm-cli quantize`) drafts with the Q4_1 file as its draft model (draft);
# default all three.
# BATCHES default 1,4,16,64; THREADS default 2; NEW= new tokens (64);
# REPEAT= rounds of both modes (3), of which each cell shows the median ratio.
# Three prompt sets: one-sentence summaries of bench/data/summary_docs.tsv,
# JSON extraction from the same texts under a schema, and free-form
# writing with nothing to copy.  Every sequence ends at EOS or NEW tokens;
# both modes produce the same tokens (test_invariance_engine checks it), so
# decode tok/s compare the same work.  Reports decode tok/s of each mode,
# their ratio, the share of drafted tokens accepted and the mean accepted
# length per verification.  Steps are unpaced (--step-ms 0).  The machine is
# shared: quote ratios, with the processor's name (printed first).
# Writes bench/results/spec_bench.{csv,md}.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_NAMES=${1:-"smollm2 gemma smollm2-f16"}
BATCHES=${2:-1,4,16,64}
THREADS=${3:-2}
NEW=${NEW:-64}
REPEAT=${REPEAT:-3}
OUT=bench/results
TMP=build/spec_bench
mkdir -p "$OUT" "$TMP"
make -s bin/llm-cli

tail -n +2 bench/data/summary_docs.tsv | cut -f3 | sed 's/^/Summarize this text in one sentence: /' > "$TMP/summaries.txt"
tail -n +2 bench/data/summary_docs.tsv | cut -f3 | sed 's/^/Give the subject and the key fact of this text as JSON: /' > "$TMP/extraction.txt"
cat > "$TMP/freeform.txt" <<'PROMPTS'
Write a short poem about the sea at night.
Tell a story about a dragon who learns to cook.
Describe your ideal weekend in a few sentences.
Invent a new board game and explain its rules.
Write a letter to your future self.
Explain why the sky changes colour at sunset.
Describe a city on Mars a hundred years from now.
Write a short dialogue between a cat and a robot.
PROMPTS
schema='{"type":"object","properties":{"subject":{"type":"string"},"key_fact":{"type":"string"}},"required":["subject","key_fact"]}'

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "processor: $cpu; $THREADS threads; batches $BATCHES; $NEW new tokens"
echo "model,drafter,prompts,batch,decode_off,decode_spec,ratio,drafted,accepted,rounds" > "$OUT/spec_bench.csv"

# decode tok/s, drafted, accepted, rounds of each batch: one line each
run() {
    bin/llm-cli bench -m "$1" --prompts "$TMP/$2.txt" -n "$NEW" -b "$BATCHES" --threads "$THREADS" --step-ms 0 \
        --speculative "$3" "${@:4}" 2>/dev/null | awk -F'|' '$2 ~ /[0-9]/ { print $2, $6, $12, $13, $14 }'
}

for name in $MODEL_NAMES; do
    spec=(ngram)
    chat=()
    case $name in
        smollm2-f16)
            draft=$(tools/fetch-model.sh smollm2 | tail -n 1)
            model=$TMP/smollm2-f16.gguf
            [ -f "$model" ] || bin/llm-cli quantize "$draft" "$model" F16 >/dev/null
            spec=(draft --draft-model "$draft")
            chat=(--chat) ;;
        smollm2) model=$(tools/fetch-model.sh smollm2 | tail -n 1); chat=(--chat) ;;
        *) model=$(tools/fetch-model.sh "$name" | tail -n 1) ;;
    esac
    for set in summaries extraction freeform; do
        extra=("${chat[@]}")
        [ "$set" = extraction ] && extra+=(--json-schema "$schema")
        # REPEAT rounds of off then on; each cell keeps the round with the median ratio
        for r in $(seq "$REPEAT"); do
            off=$(run "$model" "$set" off "${extra[@]}")
            on=$(run "$model" "$set" "${spec[@]}" "${extra[@]}")
            paste -d' ' <(echo "$off") <(echo "$on")
        done | awk -v m="$name" -v d="${spec[0]}" -v s="$set" '{
            printf "%s,%s,%s,%d,%.1f,%.1f,%.3f,%d,%d,%d\n", m, d, s, $1, $2, $7, ($2 > 0 ? $7 / $2 : 0), $8, $9, $10 }' |
            sort -t, -k4,4n -k7,7g | awk -F, -v r="$REPEAT" '{ row[NR] = $0 } NR % r == 0 { print row[NR - int(r / 2)] }' \
            >> "$OUT/spec_bench.csv"
    done
done

{
    echo "Speculative decoding (\`--speculative ngram\`: prompt lookup; \`draft\`: the Q4_1 model drafting for its F16 copy)"
    echo "against plain decoding, decode tok/s,"
    echo "side by side in one run: $cpu, $THREADS threads, $NEW new tokens at most, \`bench/spec_bench.sh\`;"
    echo "each cell is the median ratio of $REPEAT rounds of both modes."
    echo
    echo "| model | drafter | prompts | batch | off tok/s | speculative tok/s | ratio | accepted / drafted | mean accepted length |"
    echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
    tail -n +2 "$OUT/spec_bench.csv" | awk -F, '{
        printf "| %s | %s | %s | %d | %.1f | %.1f | %.2fx | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7,
            ($8 > 0 ? sprintf("%.0f%%", 100 * $9 / $8) : "-"), ($10 > 0 ? sprintf("%.2f", $9 / $10) : "-") }'
} > "$OUT/spec_bench.md"
cat "$OUT/spec_bench.md"
