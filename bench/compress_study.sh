#!/usr/bin/env bash
# The offline compression methods measured (issue 44): perplexity of each
# against bytes per weight, every method starting from the same F32 weights.
#
# Models: SmolLM2-135M-Instruct and Gemma 3 270M, each made F32 by
# llm-cli quantize from the files tools/fetch-model.sh fetches (or MODELS,
# "name=file.gguf ..." of F32 files).  Perplexity: llm-cli perplexity -c 512
# on EVAL_TEXT (default: the first EVAL_BYTES = 16000 bytes of the Python
# language reference's topics, pydoc_data, which ships with python3),
# calibrated on CALIB_TEXT (default: bytes 100000 to 160000 of the same
# topics, a disjoint part of the same corpus, as wikitext's train and test
# splits are), each of CALIB_TOKENS (default "512 4096") tokens.  A
# calibration text from another domain (the GPL v3) made GPTQ's FFN error on
# this held-out text worse than rounding, on SmolLM2: calibrate on text like
# what the model will serve.
#
# Rows: F32; Q8_0 and Q4_0 (ggml's rounding); the engine's INT8, INT4 g128
# and g32 rounded to nearest (RTN); then, per calibration size, AWQ, GPTQ
# (original order and act-order), AWQ then GPTQ, GPTQ INT8, the g32
# variants, SmoothQuant INT8, and Wanda and SparseGPT pruning (50%, 2:4) before INT8 (SparseGPT 2:4 also
# stored as SPARSE24); with LLAMA_QUANTIZE (the path of llama.cpp's llama-quantize,
# built by hand outside the repository, never in CI) its Q8_0 and Q4_K_M
# of the same F32 file, measured by our llm-cli perplexity.  ROWS (a
# space-separated list of the row keys below) limits the rows.
#
# Bits per weight are of the whole file (32 x its size / the F32 file's
# size): the embedding and output matrix are quantized too, norms stay F32.
# Writes bench/results/$NAME.csv and .md (NAME default compression; APPEND=1
# adds rows to an existing CSV and rewrites the .md from all of them;
# REPORT_ONLY=1 measures nothing and writes the .md and .png from the CSV) and, when
# gnuplot is there, $NAME.png (perplexity against bits per weight).
# THREADS (default 2) threads; the machine is shared, so quantize times move.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
NAME=${NAME:-compression}
CALIB_TOKENS=${CALIB_TOKENS:-"512 4096"}
EVAL_BYTES=${EVAL_BYTES:-16000}
WORK=${WORK:-build/compress-study}
OUT=bench/results
CLI=bin/llm-cli
mkdir -p "$WORK" "$OUT"
make -s bin/llm-cli

# Bytes $1 to $2 of the Python language reference's topics.
topics() {
    python3 -c "
import sys, pydoc_data.topics as t
text = '\n\n'.join(t.topics[k] for k in sorted(t.topics))
sys.stdout.write(text[int(sys.argv[1]):int(sys.argv[2])])" "$1" "$2"
}
if [ -z "${EVAL_TEXT:-}" ]; then
    EVAL_TEXT=$WORK/eval.txt
    topics 0 "$EVAL_BYTES" > "$EVAL_TEXT"
fi
if [ -z "${CALIB_TEXT:-}" ]; then
    CALIB_TEXT=$WORK/calib.txt
    topics 100000 160000 > "$CALIB_TEXT"
fi
if [ -z "${MODELS:-}" ] && [ "${REPORT_ONLY:-0}" != 1 ]; then
    MODELS=""
    for m in smollm2-135m=SmolLM2-135M-Instruct.Q4_1.gguf gemma3-270m=gemma-3-270m-q4_k_m.gguf; do
        name=${m%%=*}
        src=.cache/models/${m#*=}
        [ -f "$src" ] || tools/fetch-model.sh >/dev/null
        [ -f "$WORK/$name-f32.gguf" ] || $CLI quantize "$src" "$WORK/$name-f32.gguf" F32 2>/dev/null
        MODELS="$MODELS $name=$WORK/$name-f32.gguf"
    done
fi

# key|label|TYPE|quantize options ("-" none)[|TYPE2, a second llm-cli quantize of the result];
# keys with "cal" run once per calibration size
plain_rows="f32|F32|F32|-
q8_0|Q8_0|Q8_0|-
q4_0|Q4_0|Q4_0|-
int8|INT8 RTN|INT8|-
int4g128|INT4 g128 RTN|INT4_G128|-
int4g32|INT4 g32 RTN|INT4_G32|-"
cal_rows="cal_awq128|AWQ INT4 g128|INT4_G128|--method awq
cal_gptq128|GPTQ INT4 g128|INT4_G128|--method gptq
cal_gptq128act|GPTQ INT4 g128 act-order|INT4_G128|--method gptq --act-order
cal_awqgptq128|AWQ+GPTQ INT4 g128 act-order|INT4_G128|--method awq+gptq --act-order
cal_gptq8|GPTQ INT8 act-order|INT8|--method gptq --act-order
cal_awq32|AWQ INT4 g32|INT4_G32|--method awq
cal_gptq32act|GPTQ INT4 g32 act-order|INT4_G32|--method gptq --act-order
cal_sq8|SmoothQuant INT8 (α 0.5)|INT8|--method smoothquant
cal_wanda|Wanda 50% + INT8|INT8|--prune wanda
cal_wanda24|Wanda 2:4 + INT8|INT8|--prune wanda24
cal_sgpt|SparseGPT 50% + INT8|INT8|--prune sparsegpt
cal_sgpt24|SparseGPT 2:4 + INT8|INT8|--prune sparsegpt24
cal_sgpt24s|SparseGPT 2:4 → INT8 → SPARSE24|INT8|--prune sparsegpt24|SPARSE24"
llama_rows="llama_q8_0|llama.cpp Q8_0|Q8_0
llama_q4_k_m|llama.cpp Q4_K_M|Q4_K_M"

# Whether row key $1 is asked for (ROWS unset: all).
wanted() { [ -z "${ROWS:-}" ] || [[ " $ROWS " == *" $1 "* ]]; }

# Perplexity of model file $1 on the evaluation text.
ppl() { nice -n 19 $CLI perplexity -m "$1" -f "$EVAL_TEXT" -c 512 --threads "$THREADS" 2>/dev/null | sed -n 's/^PPL = //p'; }

CSV=$OUT/$NAME.csv
[ "${APPEND:-0}" = 1 ] && [ -f "$CSV" ] || [ "${REPORT_ONLY:-0}" = 1 ] ||
    echo "model,method,calib_tokens,bits_per_weight,ppl,delta_pct,quantize_s" > "$CSV"
# One row: model name $1, F32 file $2, label $3, calibration tokens $4 ("" none), file $5, seconds $6.
record() {
    local p bpw f32size
    p=$(ppl "$5")
    f32size=$(stat -c %s "$2")
    bpw=$(awk -v a="$(stat -c %s "$5")" -v b="$f32size" 'BEGIN { printf "%.2f", 32 * a / b }')
    [ "$3" = F32 ] && f32ppl=$p
    delta=$(awk -v p="$p" -v f="$f32ppl" 'BEGIN { printf "%+.2f", 100 * (p / f - 1) }')
    echo "$1,$3,$4,$bpw,$p,$delta,$6" | tee -a "$CSV"
}

[ "${REPORT_ONLY:-0}" = 1 ] && MEASURE="" || MEASURE=$MODELS
for spec in $MEASURE; do
    model=${spec%%=*}
    f32=${spec#*=}
    f32ppl=""
    while IFS='|' read -r key label type opts; do
        wanted "$key" || [ "$key" = f32 ] || continue
        file=$WORK/$model-$key.gguf
        if [ "$key" = f32 ]; then file=$f32; t=0; else
            t0=$(date +%s.%N)
            nice -n 19 $CLI quantize "$f32" "$file" "$type" 2>/dev/null
            t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
        fi
        record "$model" "$f32" "$label" "" "$file" "$t"
        [ "$key" = f32 ] || rm -f "$file"
    done <<< "$plain_rows"
    for n in $CALIB_TOKENS; do
        while IFS='|' read -r key label type opts type2; do
            wanted "$key" || continue
            file=$WORK/$model-$key-$n.gguf
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            nice -n 19 $CLI quantize "$f32" "$file" "$type" --calib "$CALIB_TEXT" --calib-tokens "$n" \
                --threads "$THREADS" $opts 2>/dev/null
            if [ -n "$type2" ]; then
                nice -n 19 $CLI quantize "$file" "$file.2" "$type2" 2>/dev/null
                mv "$file.2" "$file"
            fi
            t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
            record "$model" "$f32" "$label" "$n" "$file" "$t"
            rm -f "$file"
        done <<< "$cal_rows"
    done
    if [ -n "${LLAMA_QUANTIZE:-}" ]; then
        while IFS='|' read -r key label type; do
            wanted "$key" || continue
            file=$WORK/$model-$key.gguf
            t0=$(date +%s.%N)
            nice -n 19 "$LLAMA_QUANTIZE" "$f32" "$file" "$type" "$THREADS" >/dev/null 2>&1
            t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
            record "$model" "$f32" "$label" "" "$file" "$t"
            rm -f "$file"
        done <<< "$llama_rows"
    fi
done

# the markdown table, and the share of the INT4 g128 RTN gap to F32 each g128 method closes
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
{
    echo "# Offline compression: perplexity against bits per weight"
    echo
    echo "\`bench/compress_study.sh\`, $(date -u +%Y-%m-%d), $cpu, $THREADS threads. Perplexity: \`llm-cli perplexity -c 512\`"
    echo "on $(wc -c < "$EVAL_TEXT") bytes of held-out text ($( [ -z "${EVAL_TEXT_NAME:-}" ] && echo "the Python language reference's topics" || echo "$EVAL_TEXT_NAME"));"
    echo "calibration on ${CALIB_NAME:-bytes 100000-160000 of the same topics}. Bits per weight of the whole file. Gap closed: the share of the perplexity"
    echo "gap between INT4 g128 RTN and F32 that the row closes (INT4 g128 rows only)."
    echo
    echo "| model | method | calib tokens | bits/weight | PPL | Δ vs F32 | gap closed | quantize s |"
    echo "|---|---|---|---|---|---|---|---|"
    awk -F, 'NR > 1 {
        if ($2 == "F32") f[$1] = $5
        if ($2 == "INT4 g128 RTN") r[$1] = $5
        rows[NR] = $0 }
    END {
        for (i = 2; i <= NR; i++) {
            split(rows[i], c, ",")
            gap = ""
            if (c[2] ~ /INT4 g128/ && c[2] !~ /RTN/ && (c[1] in r) && r[c[1]] != f[c[1]])
                gap = sprintf("%.0f%%", 100 * (r[c[1]] - c[5]) / (r[c[1]] - f[c[1]]))
            printf "| %s | %s | %s | %s | %s | %s%% | %s | %s |\n", c[1], c[2], c[3], c[4], c[5], c[6], gap, c[7]
        }
    }' "$CSV"
} > "$OUT/$NAME.md"
cat "$OUT/$NAME.md"

if command -v gnuplot >/dev/null; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    plot="plot "
    for model in $(tail -n +2 "$CSV" | cut -d, -f1 | awk '!seen[$0]++'); do
        awk -F, -v m="$model" 'NR > 1 && $1 == m { print $4, $5, "\"" $2 ($3 != "" ? " " $3 : "") "\"" }' "$CSV" > "$tmp/$model.dat"
        plot="$plot'$tmp/$model.dat' using 1:2 with points pt 7 title '$model', '' using 1:2:3 with labels font ',7' offset 0.5,0.3 left notitle, "
    done
    {
        echo "set terminal pngcairo size 1200,700 font ',10' noenhanced"
        echo "set output '$OUT/$NAME.png'"
        echo "set title 'Perplexity against bits per weight (whole file), $cpu'"
        echo "set xlabel 'bits per weight'; set ylabel 'perplexity'; set logscale x 2; set grid; set key top right"
        echo "$plot"
    } > "$tmp/plot.gp"
    gnuplot "$tmp/plot.gp" && echo "wrote $OUT/$NAME.png"
fi
