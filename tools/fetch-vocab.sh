#!/usr/bin/env bash
# Fetch llama.cpp's vocabulary test suites: every models/ggml-vocab-*.gguf
# with its .inp and .out (the .gguf files hold the tokenizer alone, no
# weights), from the llama-cpp-python 0.3.36 source distribution on PyPI
# (its vendor/llama.cpp/models/).  The sdist is downloaded (never built or
# installed) into .cache/pip, checked against the sha256 recorded beside
# this script, and only those files are unpacked into .cache/vocab/0.3.36/.
# A .gguf without a .inp and .out (aquila, baichuan, gpt-neox,
# nomic-bert-moe) is unpacked too but has no suite.  Does nothing when the
# folder is already there.  Prints the folder on the last line.
#
# Usage: tools/fetch-vocab.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SUM=tools/llama-cpp-python-$VERSION.sha256
MEMBERS=llama_cpp_python-$VERSION/vendor/llama.cpp/models
CACHE=.cache
OUT=$CACHE/vocab/$VERSION

if [ -f "$OUT/.complete" ]; then
    echo "$OUT"
    exit 0
fi
WANT=$(cut -d' ' -f1 "$SUM")
mkdir -p "$CACHE/pip" "$CACHE/vocab"
if [ ! -f "$CACHE/pip/$SDIST" ] || [ "$(sha256sum "$CACHE/pip/$SDIST" | cut -d' ' -f1)" != "$WANT" ]; then
    echo "fetch-vocab: downloading llama-cpp-python==$VERSION (sdist) from PyPI into $CACHE/pip" >&2
    # pip prepares the sdist's metadata, which needs its build backend: it
    # fetches that into a throw-away environment and builds nothing else
    python3 -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
        -d "$CACHE/pip" "llama-cpp-python==$VERSION" >&2
fi
GOT=$(sha256sum "$CACHE/pip/$SDIST" | cut -d' ' -f1)
if [ "$GOT" != "$WANT" ]; then
    echo "fetch-vocab: $SDIST has sha256 $GOT, expected $WANT" >&2
    exit 1
fi
rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp"
tar -xzf "$CACHE/pip/$SDIST" -C "$OUT.tmp" --strip-components=4 --wildcards "$MEMBERS/ggml-vocab-*"
n=$(find "$OUT.tmp" -name "ggml-vocab-*.gguf.inp" | wc -l)
if [ "$n" -eq 0 ]; then
    echo "fetch-vocab: no ggml-vocab-*.gguf.inp in $SDIST" >&2
    exit 1
fi
touch "$OUT.tmp/.complete"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "$OUT"
