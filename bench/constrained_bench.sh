#!/usr/bin/env bash
# Constrained decoding (json_schema) against plain decoding, in the engine
# (bench/bench_constrained.c), with SmolLM2-135M-Instruct (49k tokens, in
# chat) and Gemma 3 270M (262k tokens, base):
#   - tokens/s at 1 and 16 sequences, constrained and plain with the same
#     number of tokens per sequence, on one engine as the worker keeps it
#     (median of 5 interleaved runs);
#   - the time per token mask (µs): the first row of a new schema, the rows
#     after it, and cached; the worst single mask; the trie and schema build.
# Prints a table and writes bench/results/constrained_bench.{md,csv}.
#
#   bench/constrained_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
OUT=bench/results
mkdir -p "$OUT"
make -s -j"$(nproc)" build/bench_constrained
smollm2=$(tools/fetch-model.sh smollm2 | tail -n 1)
gemma=$(tools/fetch-model.sh gemma | tail -n 1)

declare -A v
keys="vocabulary seqs_1_tokens seqs_1_constrained_tok_s seqs_1_plain_tok_s seqs_1_ratio seqs_16_tokens
      seqs_16_constrained_tok_s seqs_16_plain_tok_s seqs_16_ratio trie_and_compile_ms mask_us_first_row
      mask_us_other_rows mask_us_cached mask_us_worst automaton_states masks_computed"
echo "model,$(echo $keys | tr ' ' ',')" > "$OUT/constrained_bench.csv"
for m in smollm2 gemma; do
    path=${!m}
    chat=$([ $m = smollm2 ] && echo 1 || echo 0)
    while read -r k val; do v[$m.$k]=$val; done < <(build/bench_constrained "$path" "$THREADS" "$chat" | grep -E '^[a-z0-9_]+ [0-9.]+$')
    row=$m
    for k in $keys; do row="$row,${v[$m.$k]}"; done
    echo "$row" >> "$OUT/constrained_bench.csv"
done
{
    echo "# json_schema decoding against plain decoding ($THREADS threads; median of 5 interleaved runs)"
    echo
    echo "| | SmolLM2-135M (${v[smollm2.vocabulary]} tokens) | Gemma 3 270M (${v[gemma.vocabulary]} tokens) |"
    echo "|---|---|---|"
    for n in 1 16; do
        echo "| $n seq: constrained / plain tok/s | ${v[smollm2.seqs_${n}_constrained_tok_s]} / ${v[smollm2.seqs_${n}_plain_tok_s]} | ${v[gemma.seqs_${n}_constrained_tok_s]} / ${v[gemma.seqs_${n}_plain_tok_s]} |"
        echo "| $n seq: ratio | ${v[smollm2.seqs_${n}_ratio]} | ${v[gemma.seqs_${n}_ratio]} |"
    done
    echo "| mask µs, first row of a new schema | ${v[smollm2.mask_us_first_row]} | ${v[gemma.mask_us_first_row]} |"
    echo "| mask µs, the next 15 rows | ${v[smollm2.mask_us_other_rows]} | ${v[gemma.mask_us_other_rows]} |"
    echo "| mask µs, cached | ${v[smollm2.mask_us_cached]} | ${v[gemma.mask_us_cached]} |"
    echo "| worst single mask µs | ${v[smollm2.mask_us_worst]} | ${v[gemma.mask_us_worst]} |"
    echo "| trie + schema build ms (once per model / schema) | ${v[smollm2.trie_and_compile_ms]} | ${v[gemma.trie_and_compile_ms]} |"
    echo "| automaton states / masks computed | ${v[smollm2.automaton_states]} / ${v[smollm2.masks_computed]} | ${v[gemma.automaton_states]} / ${v[gemma.masks_computed]} |"
} > "$OUT/constrained_bench.md"
cat "$OUT/constrained_bench.md"
