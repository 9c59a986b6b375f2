#!/usr/bin/env bash
# Install the Debian packages that building and testing llm need.
# Idempotent: does nothing when everything is already there.
set -euo pipefail

# clang and libclang-rt-dev (libFuzzer's runtime, only recommended by
# clang) build the fuzz targets of test/fuzz
PACKAGES=(build-essential postgresql-15 postgresql-server-dev-15 libpcre2-dev
          libipc-run-perl valgrind python3 python3-jinja2 python3-jsonschema clang libclang-rt-dev)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing packages (${missing[*]}); run as root" >&2
        exit 1
    fi
    echo "install-deps: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
