#!/usr/bin/env bash
# Plot bench/results/engine_bench.csv (from bench/engine_bench.sh) as
# bench/results/engine_bench.png: decode and prefill tok/s of each engine
# and model against the number of concurrent sequences (llama.cpp dashed).
# Installs gnuplot-nox from Debian when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
CSV=bench/results/engine_bench.csv
PNG=bench/results/engine_bench.png
[ -f "$CSV" ] || { echo "plot: $CSV not found; run bench/engine_bench.sh first" >&2; exit 1; }
if ! command -v gnuplot >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null
fi
# one line per (engine, model): columns engine, model, batch, prompt, new, prefill, decode
series=$(tail -n +2 "$CSV" | cut -d, -f1,2 | awk '!seen[$0]++' | tr '\n' ' ')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in $series; do
    awk -F, -v s="$s" 'NR > 1 && $1 "," $2 == s { print $3, $6, $7 }' "$CSV" > "$tmp/$s.dat"
done
# One plot command: column COL of every series (2 prefill, 3 decode), llama.cpp dashed.
plot_series() {
    printf "plot "
    for s in $series; do
        dt=1; case "$s" in llama.cpp,*) dt=2 ;; esac
        printf "'%s' using 1:%d with linespoints dt %d title '%s', " "$tmp/$s.dat" "$1" "$dt" "${s/,/ }"
    done
    echo
}
{
    echo "set terminal pngcairo size 1100,450 font ',10' noenhanced"
    echo "set output '$PNG'"
    echo "set multiplot layout 1,2 title 'llm-cli bench against llama-batched-bench, same GGUF files, 2 threads'"
    echo "set logscale x 2; set xlabel 'concurrent sequences'; set ylabel 'tok/s'; set key top left; set grid"
    echo "set title 'decode (aggregate)'"
    plot_series 3
    echo "set title 'prefill'"
    plot_series 2
    echo "unset multiplot"
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
echo "plot: wrote $PNG"
