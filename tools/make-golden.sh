#!/usr/bin/env bash
# Write test/data/golden/*.golden, the reference answers of test/test_golden_arch.c, from llama.cpp.
# Run once, by hand, on a machine with llama.cpp built (never in CI):
#   LLAMA_CPP=/path/to/llama.cpp tools/make-golden.sh [NAME...]
# (default: the llama.cpp inside llama-cpp-python 0.3.36's sdist, at
# /work/llamacpp/llama_cpp_python-0.3.36/vendor/llama.cpp, with build/bin/ holding libllama,
# llama-perplexity and llama-quantize; `cmake --build build --target llama-perplexity` builds one).
#
# For each model below: the model is written here (random ones by bin/llm-random-model with the
# arguments that the golden file records, so the test rebuilds the same file; SmolLM2 converted to
# F32 by llama.cpp's llama-quantize), then
#   - tools/golden/llama-greedy.c (built here against libllama) prints llama.cpp's tokens of each
#     prompt of the prompts file and its greedy continuation of 32 tokens (F32 KV cache, no flash
#     attention);
#   - llama-perplexity scores test/data/golden/ppl.txt in chunks of 128 tokens (F32 KV, no flash
#     attention): BOS first, the second half of each chunk scored.
# Writes one NAME.golden per model; the models themselves are not kept in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA=${LLAMA_CPP:-/work/llamacpp/llama_cpp_python-0.3.36/vendor/llama.cpp}
LBIN=$LLAMA/build/bin
export LD_LIBRARY_PATH=$LBIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=test/data/golden
WORK=build/golden-models
N_NEW=32
PPL_CTX=128
mkdir -p "$WORK"

for f in "$LBIN/llama-perplexity" "$LBIN/llama-quantize" "$LBIN/libllama.so" bin/llm-random-model; do
    [ -e "$f" ] || { echo "make-golden: $f is missing (build llama.cpp's targets, and make here)" >&2; exit 1; }
done
gcc -O2 -o "$WORK/llama-greedy" tools/golden/llama-greedy.c -I"$LLAMA/include" -I"$LLAMA/ggml/include" \
    -L"$LBIN" -lllama -lggml -lggml-base
LLAMA_COMMIT=$(git -C "$LLAMA" rev-parse --short HEAD 2>/dev/null || echo unknown)

# name | kind | arguments (random: llm-random-model's, -o added; convert: the source GGUF) | prompts file
SHAPE="--dim 256 --heads 4 --kv-heads 2 --ffn 768 --vocab 2048 --ctx 1024"
MODELS=(
    "llama|random|--arch llama --layers 2 $SHAPE --seed 21|$OUT/prompts.txt"
    "llama31|random|--arch llama31 --layers 2 $SHAPE --seed 22|$OUT/prompts.txt"
    "mistral|random|--arch mistral --layers 2 --dim 256 --heads 8 --kv-heads 2 --ffn 768 --vocab 2048 --ctx 1024 --seed 23|$OUT/prompts.txt"
    "qwen2|random|--arch qwen2 --layers 2 $SHAPE --seed 24|$OUT/prompts.txt"
    "qwen3|random|--arch qwen3 --layers 2 $SHAPE --head-dim 96 --seed 25|$OUT/prompts.txt"
    "gemma2|random|--arch gemma2 --layers 4 $SHAPE --seed 26|$OUT/prompts.txt"
    "phi3|random|--arch phi3 --layers 2 $SHAPE --seed 27|$OUT/prompts.txt"
    "smollm2|convert|.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf|$OUT/prompts-smollm2.txt"
)

for spec in "${MODELS[@]}"; do
    IFS='|' read -r name kind args prompts <<<"$spec"
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
    model=$WORK/$name.gguf
    if [ "$kind" = random ]; then
        # shellcheck disable=SC2086
        bin/llm-random-model -o "$model" $args
    else
        [ -f "$args" ] || { echo "make-golden: $args is missing (tools/fetch-model.sh smollm2)" >&2; exit 1; }
        "$LBIN/llama-quantize" --allow-requantize "$args" "$model" F32 >"$WORK/$name.quantize.log" 2>&1
    fi
    mapfile -t lines <"$prompts"
    "$WORK/llama-greedy" "$model" "$N_NEW" "${lines[@]}" >"$WORK/$name.greedy" 2>"$WORK/$name.greedy.log"
    # llama.cpp logs from a thread of its own and now and then exits before the last line is out: retry
    ppl=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        "$LBIN/llama-perplexity" -m "$model" -f "$OUT/ppl.txt" -c "$PPL_CTX" -b "$PPL_CTX" -t 2 \
            -ctk f32 -ctv f32 -fa off >"$WORK/$name.ppl.log" 2>&1
        ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$WORK/$name.ppl.log")
        [ -z "$ppl" ] || break
    done
    [ -n "$ppl" ] || { echo "make-golden: no PPL for $name (see $WORK/$name.ppl.log)" >&2; exit 1; }
    {
        echo "# written by tools/make-golden.sh from llama.cpp $LLAMA_COMMIT: greedy ids and PPL, F32 weights and KV"
        echo "name $name"
        echo "model $kind $args"
        echo "prompts $prompts"
        echo "ppl_text $OUT/ppl.txt"
        echo "ppl_ctx $PPL_CTX"
        echo "ppl $ppl"
        cat "$WORK/$name.greedy"
    } >"$OUT/$name.golden"
    echo "make-golden: $OUT/$name.golden (PPL $ppl)"
done
