#!/usr/bin/env bash
# Mutation checks of the CUDA emulator's tests (issue 39, item 4: the
# emulator must be able to fail).  Each mutation plants one bug, a one-line
# sed, in a copy of one file of cuda/ under build/mutants/<name>/; make
# compiles that copy alone and links it with every other object of the
# emulator build (the Makefile's MUTANT_DIR rule), and the test group that
# should notice runs.  A mutation is caught when the group fails (a failed
# check, or ASan, UBSan or the emulator stopping it); one that survives
# makes the script exit 1, as does a sed that changes nothing or a build
# that fails.  The groups run first without a mutation, and must pass.
#
#   bash test/cuda_mutations.sh            every mutation, then the table
#   bash test/cuda_mutations.sh NAME...    only these (names as in the table)
#
# Needs the CUDA headers (the emulator build, make cuda-emu) and
# bin/llm-random-model (make tools) for the archs group.  About 6 minutes
# on 2 cores; not part of the default tests.  Logs: build/mutants/<name>/.
set -uo pipefail
cd "$(dirname "$0")/.."

MUT=build/mutants
EMU=build/cuda-emu

# name | file in cuda/ | sed script | test group (with --quick)
MUTATIONS=(
# qwen2's Q/K/V biases: the bias of the next column; only on the first row
"bias-next|elementwise.cu|s/x\[i\] += b\[i % width\];/x[i] += b[(i + 1) % width];/|archs"
"bias-first-row|elementwise.cu|s/i < total;/i < width;/|archs"
# qwen3's Q/K RMSNorm (rows of head_dim, one warp each): half a warp; its epsilon dropped
"qk-norm-half-warp|elementwise.cu|0,/(dim >= 256 ? 128 : 32)/s//(dim >= 256 ? 128 : 16)/|archs"
"qk-norm-no-eps|elementwise.cu|0,/sqrtf(ss \/ dim + eps)/s//sqrtf(ss \/ dim)/|ops"
# gemma2: no attention soft cap; a sliding window one key wider
"softcap-off|attention.cu|s/if (a.softcap > 0.0f)/if (a.softcap < 0.0f)/|archs"
"window-wider|attention.cu|s/v.win_lo = pos - a.window + 1;/v.win_lo = pos - a.window;/|archs"
# Llama 3.1: RoPE frequencies as a geometric series, without rope_freqs' factors
"rope-no-factors|elementwise.cu|s/angle = (float) pos\[t\] \* inv_freq\[k\];/angle = (float) pos[t] * inv_freq[0] * powf(inv_freq[1] \/ inv_freq[0], (float) k);/|archs"
# races: the decode kernel reads a value tile before every thread loaded it; loads the next
# tile of keys while others still read the values
"race-value-tile|attention.cu|/load_tile(a, a.kv.v, a.kv.v_scale, t, g, s0, cnt, kvt, ld);/{n;s/__syncthreads();/\/* mutant: no barrier *\//}|attention"
"race-next-tile|attention.cu|/acc\[p\] = acc\[p\] \* cs\[gi\] + sum;/,/__syncthreads();/s/__syncthreads();/\/* mutant: no barrier *\//|attention"
# features: H2O sums never reach the host scores; key moves (eviction, a shared prompt) dropped;
# int8 keys and values read without their scales
"h2o-no-scores|attn.c|s/^\tif (scores)$/\tif (false)/|features"
"kv-move-dropped|attn.c|s/if (cuda_stage_push(cb, d, (size_t) n \* 4 \* sizeof(int32_t)))/if (false)/|features"
"int8-no-scale|attention.cu|s/float\t\tsc = kv.type == 2 ? scales\[(size_t) row \* kv.n_kv_heads + g\] : 1.0f;/float sc = 1.0f;/|features"
)

only=" $* "
[ $# -eq 0 ] && only=""

echo "== the emulator build"
if ! make -s -j2 "$EMU/test_cuda" bin/llm-random-model; then
    echo "cuda_mutations: the emulator build failed (it needs the CUDA headers: make cuda-emu)"
    exit 1
fi
mkdir -p "$MUT"

# the groups the chosen mutations run, first as they are: each must pass
groups=""
for m in "${MUTATIONS[@]}"; do
    IFS='|' read -r name file script group <<< "$m"
    [ -n "$only" ] && [[ "$only" != *" $name "* ]] && continue
    [[ " $groups " == *" $group "* ]] || groups="$groups $group"
done
for g in $groups; do
    t0=$(date +%s)
    if ! "$EMU/test_cuda" --quick "$g" > "$MUT/baseline-$g.log" 2>&1; then
        echo "cuda_mutations: group $g fails without a mutation ($MUT/baseline-$g.log); nothing to learn"
        exit 1
    fi
    echo "baseline $g: passes ($(( $(date +%s) - t0 )) s)"
done

rows=()
survived=0
broken=0
for m in "${MUTATIONS[@]}"; do
    IFS='|' read -r name file script group <<< "$m"
    [ -n "$only" ] && [[ "$only" != *" $name "* ]] && continue
    dir=$MUT/$name
    t0=$(date +%s)
    rm -rf "$dir" && mkdir -p "$dir"
    cp "cuda/$file" "$dir/$file"
    sed -i -e "$script" "$dir/$file"
    if cmp -s "cuda/$file" "$dir/$file"; then
        rows+=("$name|$file|$group|NO: the sed changed nothing")
        broken=$((broken + 1))
        continue
    fi
    diff "cuda/$file" "$dir/$file" > "$dir/mutation.diff"
    if ! make -s MUTANT_DIR="$dir" MUTANT_FILE="$file" "$dir/test_cuda" > "$dir/build.log" 2>&1; then
        rows+=("$name|$file|$group|NO: the mutant does not build ($dir/build.log)")
        broken=$((broken + 1))
        continue
    fi
    # (in a subshell that reports a killed program to /dev/null, not the table's "Aborted" lines)
    ( "$dir/test_cuda" --quick "$group" > "$dir/test.log" 2>&1; exit $? ) 2>/dev/null
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    if [ $rc -eq 0 ]; then
        rows+=("$name|$file|$group|NO (survived, ${secs} s)")
        survived=$((survived + 1))
    else
        why=$(grep -m1 -E '^FAIL|ERROR: AddressSanitizer|runtime error|cuda emulator:' "$dir/test.log" |
            sed -E 's/^FAIL [^ ]+ [^:]*: //' | cut -c1-60)
        rows+=("$name|$file|$group|yes (exit $rc, ${secs} s): ${why:-no message}")
    fi
    rm -f "$dir/test_cuda"
    echo "$name: done in $secs s"
done

echo
printf '%-20s %-20s %-10s %s\n' "mutation" "file" "group" "caught"
for r in "${rows[@]}"; do
    IFS='|' read -r name file group caught <<< "$r"
    printf '%-20s %-20s %-10s %s\n' "$name" "cuda/$file" "$group" "$caught"
done
echo "cuda_mutations: ${#rows[@]} mutations, $survived survived, $broken did not apply or build"
[ $survived -eq 0 ] && [ $broken -eq 0 ]
