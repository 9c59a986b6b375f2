#!/usr/bin/env bash
# Plot bench/results/engine_bench.csv (from bench/engine_bench.sh) as
# bench/results/engine_bench.png: decode and prefill tok/s per weight type
# against the number of concurrent sequences, with llama.cpp's batch-1
# figures from DESIGN.md as reference points.  Installs gnuplot-nox from
# Debian when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
CSV=bench/results/engine_bench.csv
PNG=bench/results/engine_bench.png
[ -f "$CSV" ] || { echo "plot: $CSV not found; run bench/engine_bench.sh first" >&2; exit 1; }
if ! command -v gnuplot >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null
fi
types=$(tail -n +2 "$CSV" | cut -d, -f1 | awk '!seen[$0]++' | tr '\n' ' ')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in $types; do
    awk -F, -v t="$t" 'NR > 1 && $1 == t { print $2, $5, $6 }' "$CSV" > "$tmp/$t.dat"
done
{
    echo "set terminal pngcairo size 1100,450 font ',10' noenhanced"
    echo "set output '$PNG'"
    echo "set multiplot layout 1,2 title 'llm-cli bench, random 134M Llama (dim 768, 12 layers), 2 threads'"
    echo "set logscale x 2; set xlabel 'concurrent sequences'; set ylabel 'tok/s'; set key top left; set grid"
    echo "set title 'decode (aggregate)'"
    printf "plot "
    for t in $types; do printf "'%s' using 1:3 with linespoints title '%s', " "$tmp/$t.dat" "$t"; done
    echo "107 with lines dt 2 title 'llama.cpp Q8_0 batch 1', 231 with lines dt 3 title 'llama.cpp Q4_0 batch 1'"
    echo "set title 'prefill (prompt 128)'"
    printf "plot "
    for t in $types; do printf "'%s' using 1:2 with linespoints title '%s', " "$tmp/$t.dat" "$t"; done
    echo "703 with lines dt 2 title 'llama.cpp Q8_0', 880 with lines dt 3 title 'llama.cpp Q4_0'"
    echo "unset multiplot"
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
echo "plot: wrote $PNG"
