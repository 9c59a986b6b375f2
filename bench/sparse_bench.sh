#!/usr/bin/env bash
# Batch-1 decode of 2:4 sparse weights (SPARSE24) against dense INT8, Q8_0
# and Q4_0, on the random 1.1B shape (TinyLlama's: dim 2048, 22 layers,
# ffn 5632), which is DRAM-bound, so fewer bytes per weight should mean
# faster decode.
#
# The models come from one F32 file: SRC (default build/pace/1b1-q4k.gguf,
# a random Q4_K_M 1.1B) converted with llm-cli quantize to F32, then to INT8
# (Q8_0 blocks with one scale per row), Q8_0 and Q4_0; SPARSE24 is pruned
# from the INT8 file, so it keeps INT8's kept integers and only the layers'
# matrices change (the embedding and output stay INT8).
#
# The machine is shared and noisy, so the types are measured in turns: each
# of REPS rounds (default 5) runs llm-cli bench -p 16 -n N_GEN -b 1 once per
# type, in an order rotated every round, after one warm-up of each.  Printed
# and written to bench/results/$NAME.{csv,md} (NAME default sparse_bench):
# each type's median decode tok/s, its min-max, and the median and range of
# its per-round ratio to INT8 (the type measured seconds apart from INT8).
#
# Then (unless KERNELS=0) the GEMV kernels alone, bench/bench_kernels.c at
# THREADS threads on an FFN matrix of the shape (5632 x 2048) walked over a
# set of 800 MB (a decode step's worth, from DRAM): the types the engine
# serves the files in (INT8 and Q8_0 as Q8_0_G, Q4_0 as Q4_0_G, SPARSE24),
# REPS runs in turns, written to bench/results/$NAME-kernels.md.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
REPS=${REPS:-5}
N_GEN=${N_GEN:-32}
NAME=${NAME:-sparse_bench}
SRC=${SRC:-build/pace/1b1-q4k.gguf}
MODELS=${MODELS:-.cache/models/sparse}
OUT=bench/results
mkdir -p "$MODELS" "$OUT"
make -s bin/llm-cli

q() { [ -f "$2" ] || bin/llm-cli quantize "$1" "$2" "$3" >/dev/null; }
q "$SRC" "$MODELS/f32.gguf" F32
q "$MODELS/f32.gguf" "$MODELS/int8.gguf" INT8
q "$MODELS/int8.gguf" "$MODELS/sparse24.gguf" SPARSE24
q "$MODELS/f32.gguf" "$MODELS/q8_0.gguf" Q8_0
q "$MODELS/f32.gguf" "$MODELS/q4_0.gguf" Q4_0
types=(INT8 SPARSE24 Q8_0 Q4_0)
file() { echo "$MODELS/$(echo "$1" | tr 'A-Z' 'a-z').gguf"; }

# one decode figure (tok/s) of type $1
decode() {
    bin/llm-cli bench -m "$(file "$1")" -p 16 -n "$N_GEN" -b 1 --threads "$THREADS" --step-ms 0 2>/dev/null |
        awk -F'|' 'NR == 3 { print $6 + 0 }'
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "CPU: $cpu, $(nproc) cores, $THREADS threads; $REPS rounds of -p 16 -n $N_GEN -b 1"
for t in "${types[@]}"; do decode "$t" >/dev/null; done
raw=$OUT/$NAME.csv
echo "round,type,decode_tok_s" > "$raw"
for ((r = 0; r < REPS; r++)); do
    for ((i = 0; i < ${#types[@]}; i++)); do
        t=${types[$(((i + r) % ${#types[@]}))]}
        v=$(decode "$t")
        echo "$r,$t,$v" >> "$raw"
        echo "  round $r $t $v tok/s"
    done
done

# Write and print the table of $1 (round,type,value) to $2, headed by $3: per type the median and range of
# its values and of its speed against type $4 in the same round ($5: "rate" when higher is faster, "time").
summarize() {
    python3 - "$@" <<'PY'
import csv, statistics as st, sys
raw, md, title, base_type, kind = sys.argv[1:6]
by = {}
for r in csv.DictReader(open(raw)):
    by.setdefault(r['type'], {})[int(r['round'])] = float(list(r.values())[2])
base = by[base_type]
speed = (lambda v, b: v / b) if kind == 'rate' else (lambda v, b: b / v)
lines = [title, "", f"| type | {'decode tok/s' if kind == 'rate' else 'GEMV us'} median | min-max | "
         f"speed / {base_type} (per round) median | min-max |", "|---|---|---|---|---|"]
for t, v in by.items():
    ratios = [speed(v[r], base[r]) for r in v if r in base]
    lines.append(f"| {t} | {st.median(v.values()):.2f} | {min(v.values()):.2f}-{max(v.values()):.2f} | "
                 f"{st.median(ratios):.3f} | {min(ratios):.3f}-{max(ratios):.3f} |")
open(md, 'w').write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
}

ls -l "$MODELS"/{int8,sparse24,q8_0,q4_0}.gguf
summarize "$raw" "$OUT/$NAME.md" "Batch-1 decode, random 1.1B shape, $cpu, $THREADS threads, $REPS rounds of \
\`llm-cli bench -p 16 -n $N_GEN -b 1\` (types in turns, order rotated each round)." INT8 rate

[ "${KERNELS:-1}" = 1 ] || exit 0
cc -std=c11 -D_GNU_SOURCE -O2 -pthread -Isrc/engine -o build/bench_kernels bench/bench_kernels.c build/libllmengine.a \
    -lpcre2-8 -lm -lpthread
kraw=$OUT/$NAME-kernels.csv
echo "round,type,gemv_us" > "$kraw"
for ((r = 0; r < REPS; r++)); do
    build/bench_kernels "$THREADS" 5632 2048 16 800 Q8_0_G,Q4_0_G,SPARSE24,SPARSE24_G avx512 2>/dev/null |
        awk -v r="$r" '$3 == "GEMV" { print r "," $2 "," $4 }' >> "$kraw"
done
summarize "$kraw" "$OUT/$NAME-kernels.md" "GEMV alone, 5632 x 2048 weights walked over 800 MB, $cpu, $THREADS \
threads, $REPS runs in turns (bench/bench_kernels.c)." Q8_0_G time
