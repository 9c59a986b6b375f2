#!/usr/bin/env bash
# Every CPU matmul kernel as a fraction of the machine's own limits.
#
#   bench/kernel_roofline.sh [THREADS]
#
# bench/peak_probe.c measures the limits at THREADS threads (default 2): the
# int8 and fp32 multiply-accumulate peaks of each SIMD level and the DRAM
# read bandwidth.  build/bench_kernels then times every weight type at every
# level this processor has, through the backend's matmul op (a 2048 x 768
# weight, an FFN matrix of the 134M reference shape): GEMV over a 64 MB set
# of such matrices, and GEMM at 16, 64, 128 and 512 tokens.  Each GEMM is
# printed in GMAC/s and as a fraction of its level's peak: int8 for the
# quantized types (AVX-512: vpdpbusd zmm; AVX2: vpdpbusd ymm where the CPU
# has AVX-VNNI, else vpmaddubsw/vpmaddwd), fp32 FMA for F32, F16 and BF16;
# each GEMV in GB/s and as a fraction of the DRAM read bandwidth (above 1
# where the last-level cache holds the 64 MB set: the Xeon's 480 MB does).  The
# machine is shared: run it on a quiet one, and quote it with the processor's
# name (printed first).  Writes bench/results/$NAME.{csv,json,md} (NAME=kernel_roofline;
# LLM_CPU_AMX=1 NAME=kernel_roofline_amx for the AMX tiles).
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${1:-2}
TOKENS=${TOKENS:-"16 64 128 512"}
OUT=bench/results
mkdir -p build "$OUT"
make -s build/bench_kernels
cc -std=c11 -D_GNU_SOURCE -O2 -pthread -o build/peak_probe bench/peak_probe.c

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "processor: $cpu; $THREADS threads"
peaks=$(build/peak_probe "$THREADS" 2>/dev/null)
echo "$peaks"
peak() { echo "$peaks" | awk -v k="$1" '$1 == k { print $2 }'; }
int8_avx512=$(peak int8_avx512)
int8_avx2=$(peak int8_avxvnni)
[ "$(awk -v v="$int8_avx2" 'BEGIN { print (v > 0) }')" = 1 ] || int8_avx2=$(peak int8_avx2)
fp32_avx512=$(peak fp32_avx512)
fp32_avx2=$(peak fp32_avx2)
dram=$(peak dram_read)
int8_amx=$(peak int8_amx)
NAME=${NAME:-kernel_roofline}

raw=build/kernel_roofline.txt
: > "$raw"
for t in $TOKENS; do
    out=$(build/bench_kernels "$THREADS" 2048 768 "$t" 64)
    amx_state=$(sed -n 's/.*AMX tiles //p' <<<"$out" | head -n 1)
    awk -v t="$t" '$3 == "GEMV" { print t, $0 }' <<<"$out" >> "$raw"
done

# one row per level and type: GEMV, then GEMM at each token count, with fractions
awk -v tokens="$TOKENS" -v i8a="$int8_avx512" -v i8b="$int8_avx2" -v f32a="$fp32_avx512" -v f32b="$fp32_avx2" \
    -v dram="$dram" -v cpu="$cpu" -v threads="$THREADS" -v csv="$OUT/$NAME.csv" \
    -v json="$OUT/$NAME.json" -v md="$OUT/$NAME.md" -v i8x="$int8_amx" -v amx="$amx_state" '
function peak_of(level, type) {
    fl = (type == "F32" || type == "F16" || type == "BF16")
    if (level == "avx512") return fl ? f32a : i8a
    return fl ? f32b : i8b
}
{
    # t level type GEMV <us> us <GB/s> GB/s GEMM(t) <us> us <GMAC/s> GMAC/s: the figures are fields 7 and 12
    key = $2 " " $3
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    gemv[key] = $7
    gemm[key, $1] = $12
}
END {
    nt = split(tokens, tk, " ")
    hdr = "| level | type | GEMV GB/s | of DRAM |"
    sep = "|---|---|---:|---:|"
    for (i = 1; i <= nt; i++) {
        hdr = hdr " GEMM(" tk[i] ") GMAC/s | of peak |"
        sep = sep "---:|---:|"
    }
    printf "%s\n%s\n", hdr, sep > md
    printf "[" > json
    for (r = 1; r <= n; r++) {
        split(order[r], kv, " ")
        p = peak_of(kv[1], kv[2])
        line = sprintf("| %s | %s | %.1f | %.0f%% |", kv[1], kv[2], gemv[order[r]], 100 * gemv[order[r]] / dram)
        js = sprintf("%s{\"level\": \"%s\", \"type\": \"%s\", \"gemv_gbs\": %s, \"gemm\": {", r > 1 ? ", " : "",
                     kv[1], kv[2], gemv[order[r]])
        for (i = 1; i <= nt; i++) {
            g = gemm[order[r], tk[i]]
            line = line sprintf(" %.1f | %.0f%% |", g, 100 * g / p)
            js = js sprintf("%s\"%s\": %s", i > 1 ? ", " : "", tk[i], g)
            printf "%s,%s,%s,%s,%s,%.3f\n", kv[1], kv[2], tk[i], gemv[order[r]], g, g / p > (csv ".gemm")
        }
        print line > md
        printf "%s}, \"peak_gmacs\": %s}", js, p > json
    }
    printf "]\n" > json
    printf "\nProcessor: %s, %s threads. Peaks (peak_probe): int8 AVX-512 %s, int8 AVX2 level %s, fp32 AVX-512 %s, fp32 AVX2 %s GMAC/s; DRAM read %s GB/s; AMX int8 tiles %s GMAC/s (0: none). AMX in the kernels: %s.\n", \
        cpu, threads, i8a, i8b, f32a, f32b, dram, i8x, amx > md
}' "$raw"
{ echo "level,type,tokens,gemv_gbs,gemm_gmacs,gemm_frac_peak"; cat "$OUT/$NAME.csv.gemm"; } > "$OUT/$NAME.csv"
rm -f "$OUT/$NAME.csv.gemm"
cat "$OUT/$NAME.md"
