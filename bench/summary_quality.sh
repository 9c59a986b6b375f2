#!/usr/bin/env bash
# The default model's job, measured: one-sentence summaries of the 28
# documents in bench/data/summary_docs.tsv (the demo's 8 and 20 more) by
#   - Gemma 3 270M (base) with the plain prompt "Article: ...\nOne-sentence summary:",
#     cut at the first newline;
#   - SmolLM2-135M-Instruct in chat: "Summarize in one sentence: ..." as the
#     user turn of its ChatML template;
# greedy, at most 48 tokens, with llm-cli (the same engine and bits as SQL).
# Writes bench/results/summary_quality_outputs.tsv (model, id, copied, summary),
# where copied is the share of the summary's word 4-grams found in the
# document; the labels (copy, invented facts, good) are in
# bench/results/summary_quality_labels.tsv, read by hand, and the counts in
# bench/results/summary_quality.md come from both (bench/summary_quality.py).
set -euo pipefail
cd "$(dirname "$0")/.."
make -s bin/llm-cli
gemma=$(tools/fetch-model.sh gemma | tail -n 1)
smollm2=$(tools/fetch-model.sh smollm2 | tail -n 1)
out=bench/results/summary_quality_outputs.tsv
mkdir -p bench/results
printf 'model\tid\tsummary\n' > "$out.tmp"
tail -n +2 bench/data/summary_docs.tsv | while IFS=$'\t' read -r id title body; do
    g=$(bin/llm-cli generate -m "$gemma" -p "Article: $body
One-sentence summary:" -n 48 --stop $'\n' --threads "$(nproc)" 2>/dev/null | tr '\n\t' '  ')
    s=$(bin/llm-cli generate -m "$smollm2" --chat -p "Summarize in one sentence: $body" -n 48 \
        --threads "$(nproc)" 2>/dev/null | tr '\n\t' '  ')
    printf 'gemma-3-270m\t%s\t%s\n' "$id" "$g" >> "$out.tmp"
    printf 'smollm2-135m-instruct\t%s\t%s\n' "$id" "$s" >> "$out.tmp"
done
mv "$out.tmp" "$out"
python3 bench/summary_quality.py
