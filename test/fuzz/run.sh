#!/usr/bin/env bash
# Build the libFuzzer targets (make fuzz-build: clang, ASan, UBSan, into
# build/fuzz) and run each for FUZZ_SECONDS seconds (default 60), one after
# the other.  Fails when any target reports a crash, a leak, undefined
# behaviour, a broken invariant, a time-out or memory over the limit; the
# input that did it is left in build/fuzz/artifacts/TARGET/.
#
# Usage: test/fuzz/run.sh [TARGET...]      (default: every test/fuzz/fuzz_*.c)
#   FUZZ_SECONDS=600 test/fuzz/run.sh fuzz_gguf    a longer run of one target
#
# Each target runs on a working corpus in build/fuzz/corpus/TARGET that
# starts from the committed seeds and regression inputs (test/fuzz/corpus/
# TARGET) plus seeds made here from the project's real files: stories260K
# and small random models of every architecture (fuzz_gguf, fuzz_model),
# the inputs of the tokenizer suites (fuzz_tokenizer), the real chat
# templates of test/data/chat-templates and $LLM_SHARED/chat-templates
# (fuzz_jinja).  A target's dictionary, test/fuzz/TARGET.dict, is given to
# libFuzzer when there is one.  The working corpus is kept between runs, so each
# run goes on from where the last stopped.  Every committed input is run
# first, so a regression input that crashes again fails at once.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${FUZZ_SECONDS:-60}
shared=${LLM_SHARED:-../shared}
export LLM_SHARED=$shared
build=build/fuzz
export LLM_FUZZ_WPM=$build/wpm.gguf

make -s -j"$(nproc)" fuzz-build FUZZ_CC="${FUZZ_CC:-clang}"

if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for f in test/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi

# seeds made from the project's files (regenerated when missing)
python3 tools/gen_wpm_vocab.py "$LLM_FUZZ_WPM"
gen=$build/seeds
mkdir -p "$gen/models" "$gen/text" "$gen/chat"
for a in llama llama31 mistral qwen2 qwen3 gemma2 phi3; do
    m=$gen/models/random-$a
    [ -f "$m" ] || $build/llm-random-model -o "$m" --arch $a --dim 8 --layers 1 --heads 2 --kv-heads 1 \
        --ffn 8 --vocab 260 --ctx 16 --seed 1 >/dev/null
done
for t in Q8_0 Q4_0 F16; do
    m=$gen/models/random-$t
    [ -f "$m" ] || $build/llm-random-model -o "$m" --dim 32 --layers 1 --heads 2 --kv-heads 1 \
        --ffn 32 --vocab 260 --ctx 16 --type $t --seed 1 >/dev/null
done
[ -f "$shared/models/stories260K.gguf" ] && cp -f "$shared/models/stories260K.gguf" "$gen/models/stories260K"
cp -f "$LLM_FUZZ_WPM" "$gen/models/wpm"
# each input of the tokenizer suites (separated by "__ggml_vocab_test__" lines), one file each
python3 - "$gen/text" "$shared"/vocab/*.inp test/data/pre_inputs.inp test/data/wpm_inputs.inp <<'PY'
import hashlib, os, sys
out = sys.argv[1]
for path in sys.argv[2:]:
    if not os.path.exists(path):
        continue
    for text in open(path, 'rb').read().split(b'\n__ggml_vocab_test__\n'):
        if text:
            name = hashlib.sha1(text).hexdigest()
            with open(os.path.join(out, name), 'wb') as f:
                f.write(text)
PY
cp -f test/data/chat-templates/*.jinja "$gen/chat/"
cp -f "$shared"/chat-templates/*.jinja "$gen/chat/" 2>/dev/null || true

seeds_of() {
    case $1 in
        fuzz_gguf|fuzz_model) echo "$gen/models" ;;
        fuzz_tokenizer) echo "$gen/text" ;;
        fuzz_jinja) echo "$gen/chat" ;;
    esac
}

failed=()
for t in "${targets[@]}"; do
    corpus=$build/corpus/$t
    artifacts=$build/artifacts/$t
    mkdir -p "$corpus" "$artifacts" "test/fuzz/corpus/$t"
    cp -f "test/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true
    seeds=$(seeds_of "$t")
    [ -n "$seeds" ] && cp -f "$seeds"/* "$corpus"/
    # 2 MB inputs at most (stories260K is 1.1 MB); 20 s for one input is a hang;
    # 2.5 GB of memory (one malloc included) is a leak or an unchecked size
    log=$build/$t.log
    dict=()
    [ -f "test/fuzz/$t.dict" ] && dict=(-dict="test/fuzz/$t.dict")
    echo "fuzz: $t for $seconds s ($(ls "$corpus" | wc -l) inputs to start from)"
    rc=0
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "$build/$t" ${dict[@]+"${dict[@]}"} -max_total_time="$seconds" -max_len=2097152 -timeout=20 -rss_limit_mb=2560 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" > "$log" 2>&1 || rc=$?
    # libFuzzer's last status line and final counters
    grep -E '^#[0-9]+' "$log" | tail -n 1 || true
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" \
        | tr '\n' ' ' || true
    echo
    if [ $rc -ne 0 ]; then
        echo "fuzz: $t FAILED (exit $rc); its report:" >&2
        grep -E -A40 'ERROR: |runtime error|FUZZ_CHECK|ALARM|out-of-memory' "$log" | head -n 80 >&2 || tail -n 60 "$log" >&2
        ls "$artifacts" >&2
        failed+=("$t")
    fi
done

echo "fuzz: ${#targets[@]} targets, ${#failed[@]} failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
