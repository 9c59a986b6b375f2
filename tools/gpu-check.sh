#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one call (make gpu-check): build it,
# run its tests (every op against the CPU reference on fresh random inputs,
# whole forward passes, a random model of every architecture, stories260K's
# golden greedy text with an fp32 KV cache, SmolLM2's and Gemma 3's greedy
# text against the CPU when their files are here, batch invariance with
# llm.deterministic, every engine feature on a CUDA engine against a CPU
# engine), a memory check of the kernels where compute-sanitizer works, then
# the benchmark (random-weight Llama 1B and 8B shapes in BF16, Q8_0, Q4_0:
# decode at batch 1 and 64, prefill, each against the HBM roofline), and
# llm_cuda.so loaded at run time as the worker loads it (llm-cli).  Ends
# with the test summary and the benchmark table; exits non-zero when a test
# failed.  Sized to finish in under 8 minutes on an H200.  Logs go to
# build/gpu-check/, the benchmark's table and results to
# bench/results/gpu_bench.{txt,csv,json}.
#
#   bash tools/gpu-check.sh             run everything (here: builds, then "SKIP: no CUDA device")
#   bash tools/gpu-check.sh --prepare   put what a bare GPU machine lacks into build/gpu-carry/:
#                                       ../shared's stories260K model and golden file, PCRE2's header
#
# On a machine that sees no ../shared (a device run of a copy of the tree),
# run --prepare here first and carry build/gpu-carry.  The real models
# (SmolLM2-135M, 98 MB; Gemma 3 270M, 253 MB) are found in $LLM_MODELS or
# .cache/models; they are not carried (a device run carries at most 64 MiB
# and has no network to fetch them), so there their checks are skipped,
# and the summary says so.  When $OUT is set (a device run), logs and
# results are copied there too.
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=build/gpu-carry
T0=$(date +%s)

elapsed() { echo $(( $(date +%s) - T0 )); }

if [ "${1:-}" = "--prepare" ]; then
    SHARED=${LLM_SHARED:-../shared}
    mkdir -p "$CARRY/shared/models" "$CARRY/shared/golden" "$CARRY/include"
    cp "$SHARED/models/stories260K.gguf" "$CARRY/shared/models/" || exit 1
    cp "$SHARED/golden/stories260K-greedy.tsv" "$CARRY/shared/golden/" || exit 1
    for h in /usr/include/pcre2.h /usr/include/x86_64-linux-gnu/pcre2.h; do
        [ -f "$h" ] && cp "$h" "$CARRY/include/" && break
    done
    # the library itself too, for a machine without PCRE2 at all
    mkdir -p "$CARRY/lib"
    for l in /usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 /lib/x86_64-linux-gnu/libpcre2-8.so.0; do
        [ -f "$l" ] && cp -L "$l" "$CARRY/lib/libpcre2-8.so.0" && break
    done
    du -sh "$CARRY"
    echo "gpu-check: prepared $CARRY; carry it to the GPU machine and run: bash tools/gpu-check.sh"
    echo "gpu-check: the real models (.cache/models) are not in it: too large to carry; their checks will be skipped"
    exit 0
fi

LOG_DIR=build/gpu-check			# logs (ignored by git); the benchmark's results go to bench/results/
mkdir -p "$LOG_DIR" bench/results

# the shared material: ../shared, else the carried copy
if [ -z "${LLM_SHARED:-}" ]; then
    for d in ../shared "$CARRY/shared" shared; do
        if [ -f "$d/models/stories260K.gguf" ]; then LLM_SHARED=$d; break; fi
    done
fi
export LLM_SHARED=${LLM_SHARED:-../shared}
echo "gpu-check: models and golden text from $LLM_SHARED"

# the real models, for the greedy checks against the CPU (skipped without them)
MODELS=${LLM_MODELS:-.cache/models}
real_missing=""
for f in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf; do
    [ -f "$MODELS/$f" ] || real_missing="$real_missing $f"
done
if [ -n "$real_missing" ]; then
    real_summary="real models: SKIPPED the greedy checks of${real_missing} against the CPU: not in $MODELS"
    real_summary="$real_summary (a GPU machine has no network to fetch them, and they are too large to carry)"
else
    real_summary="real models: SmolLM2 and Gemma 3 from $MODELS"
fi
echo "gpu-check: $real_summary"

# PCRE2: a machine with the library but not its header builds with the carried header
if ! printf '#define PCRE2_CODE_UNIT_WIDTH 8\n#include <pcre2.h>\n' | ${CC:-cc} -E -x c - >/dev/null 2>&1; then
    if [ -f "$CARRY/include/pcre2.h" ]; then
        export CPATH="$PWD/$CARRY/include${CPATH:+:$CPATH}"
        echo "gpu-check: using the carried pcre2.h"
    else
        echo "gpu-check: pcre2.h is missing; run 'bash tools/gpu-check.sh --prepare' where it exists and carry $CARRY"
    fi
fi
if ! echo 'int f(void) { return 0; }' | ${CC:-cc} -x c - -shared -lpcre2-8 -o /dev/null 2>/dev/null; then
    lib=$(ls /usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 /usr/lib64/libpcre2-8.so.0 /lib/x86_64-linux-gnu/libpcre2-8.so.0 \
        "$PWD/$CARRY/lib/libpcre2-8.so.0" 2>/dev/null | head -n 1)
    if [ -n "$lib" ]; then
        mkdir -p "$CARRY/lib" && ln -sf "$lib" "$CARRY/lib/libpcre2-8.so"
        export LIBRARY_PATH="$PWD/$CARRY/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
        export LD_LIBRARY_PATH="$PWD/$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        echo "gpu-check: linking $lib"
    fi
fi

# 1. build (the engine library, the CUDA backend, its test and benchmark,
#    the module the worker loads, and llm-cli, which loads it too)
echo "== build ($(nproc) cores)"
if ! make -j"$(nproc)" WITH_CUDA=1 build/cuda/test_cuda bin/llm-gpu-bench llm_cuda.so bin/llm-cli \
        bin/llm-random-model > "$LOG_DIR/gpu_build.log" 2>&1; then
    tail -n 40 "$LOG_DIR/gpu_build.log"
    echo "gpu-check: build failed after $(elapsed) s"
    exit 1
fi
echo "gpu-check: built in $(elapsed) s"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# 2. tests: every op against the CPU reference, forward passes (every
#    architecture), golden and real models' greedy text, deterministic
#    batches, the engine features
echo "== tests"
LLM_MODELS=$MODELS timeout 300 build/cuda/test_cuda > "$LOG_DIR/gpu_test.log" 2>&1
test_rc=$?
grep -v '^FAIL' "$LOG_DIR/gpu_test.log" | tail -n 80
grep '^FAIL' "$LOG_DIR/gpu_test.log" | head -n 20
[ $test_rc -eq 124 ] && echo "gpu-check: the tests ran out of time"
if grep -q '^SKIP' "$LOG_DIR/gpu_test.log"; then
    echo "gpu-check: no CUDA device here: built and skipped in $(elapsed) s"
    exit 0
fi
echo "gpu-check: tests done at $(elapsed) s"
if [ $test_rc -ne 0 ]; then
    # localise a failure: the same checks without fusing launches, and without programmatic dependent launch
    for v in "--no-fuse" "--no-pdl" "--no-fuse --no-pdl"; do
        timeout 120 build/cuda/test_cuda --quick $v > "$LOG_DIR/gpu_test_variant.log" 2>&1
        echo "gpu-check: with $v: $(grep -E '^cuda: [0-9]+ passed' "$LOG_DIR/gpu_test_variant.log" || echo 'no summary')"
    done
fi

# 2b. the module as the worker loads it (dlopen of llm_cuda.so): llm-cli on
#     the GPU, its greedy text against the CPU's (fp32 KV cache on both)
echo "== llm_cuda.so, loaded by llm-cli --device cuda"
model=$LLM_SHARED/models/stories260K.gguf
gen() { bin/llm-cli generate -m "$model" -p "Once upon a time" -n 48 --kv f32 --device "$1"; }
cpu_text=$(gen cpu 2>/dev/null)
gpu_text=$(LLM_CUDA_MODULE=$PWD/llm_cuda.so gen cuda 2> "$LOG_DIR/gpu_module.log")
module_rc=$?
tail -n 1 "$LOG_DIR/gpu_module.log"
if [ $module_rc -ne 0 ]; then
    module_summary="llm_cuda.so: llm-cli --device cuda failed (exit $module_rc)"
elif [ "$gpu_text" != "$cpu_text" ]; then
    module_summary="llm_cuda.so: loaded, but the GPU's text differs from the CPU's"
    module_rc=1
else
    module_summary="llm_cuda.so: loaded, and the GPU's greedy text is the CPU's"
fi
echo "$module_summary"

# 3. the kernels under compute-sanitizer's memory check, where it works (quick shapes)
san_summary="compute-sanitizer: not run"
if command -v compute-sanitizer >/dev/null 2>&1 && [ "$(elapsed)" -lt 240 ]; then
    echo "== compute-sanitizer memcheck (ops, attention; quick shapes)"
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 build/cuda/test_cuda --quick ops \
        > "$LOG_DIR/gpu_memcheck.log" 2>&1
    r1=$?
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 build/cuda/test_cuda --quick attention \
        >> "$LOG_DIR/gpu_memcheck.log" 2>&1
    r2=$?
    tail -n 6 "$LOG_DIR/gpu_memcheck.log"
    san_summary="compute-sanitizer memcheck: exit $r1 (ops), $r2 (attention) (0 clean, 99 errors, 124 time out)"
fi

# 4. the benchmark
echo "== benchmark"
timeout 240 bin/llm-gpu-bench --out bench/results/gpu_bench > bench/results/gpu_bench.txt 2> "$LOG_DIR/gpu_bench.log"
bench_rc=$?
tail -n 5 "$LOG_DIR/gpu_bench.log"

if [ -n "${OUT:-}" ]; then
    cp "$LOG_DIR"/gpu_* bench/results/gpu_bench.* "$OUT"/ 2>/dev/null
fi

echo
echo "== summary ($(elapsed) s)"
echo "$san_summary"
echo "$module_summary"
echo "$real_summary"
# what the named checks did: real models, architectures, deterministic batches, features
grep -E '^cuda: (SKIPPED|no bin/|greedy [^:]*: [0-9]+ of|forward random [^:]*: logits|deterministic|features [^:]*: [0-9]+ of)' \
    "$LOG_DIR/gpu_test.log"
grep -E '^cuda: [0-9]+ passed' "$LOG_DIR/gpu_test.log" || echo "cuda tests: no summary line (exit $test_rc)"
[ $bench_rc -ne 0 ] && echo "benchmark exit status $bench_rc"
cat bench/results/gpu_bench.txt
[ $test_rc -eq 0 ] && [ $module_rc -eq 0 ]
