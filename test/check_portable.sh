#!/usr/bin/env bash
# Check that the engine is portable x86-64 outside its SIMD kernels: no
# function of build/libllmengine.a uses an AVX register or a VEX/EVEX
# instruction unless it belongs to a file compiled for its level (the
# matmul, attention, activation, norm and exp-sum kernels of each level)
# or is the F16C KV store, so llm.so built on one machine cannot die of
# SIGILL on another (with OPTFLAGS=-march=... the build opts out and this
# check is skipped).
# Exits 1, naming the functions, when one does.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=build/libllmengine.a
[ -f "$lib" ] || { echo "check_portable: $lib not built" >&2; exit 1; }
case "$(uname -m)" in x86_64) ;; *) echo "check_portable: not x86-64, nothing to check"; exit 0 ;; esac
if grep -q -- '-march' <<<"${OPTFLAGS:-}"; then echo "check_portable: OPTFLAGS sets -march, skipped"; exit 0; fi
# objdump prints "In archive" / "member.o:" headers, "<function>:" labels and instructions
bad=$(objdump -d --no-show-raw-insn "$lib" | awk '
    /^[^ \t].*\.o:/ { obj = $1; sub(/:$/, "", obj); next }
    /^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn); next }
    /%[yz]mm|%k[0-7]|\tv[a-z]/ {
        if (obj ~ /^(matmul|attention|activation|norm|exp_sum)_avx(2|512)(_[a-z0-9]+)?\.o$/) next
        if (obj == "kv_ops.o" && fn ~ /^fp16_row_f16c/) next
        if (!(obj "/" fn in seen)) { seen[obj "/" fn] = 1; print obj ": " fn }
    }')
if [ -n "$bad" ]; then
    echo "check_portable: functions outside the SIMD kernels use AVX instructions:" >&2
    echo "$bad" >&2
    exit 1
fi
echo "check_portable: generic engine code is baseline x86-64"
