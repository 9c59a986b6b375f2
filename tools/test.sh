#!/usr/bin/env bash
# The one command that runs every test of llm on a fresh machine:
# installs the Debian packages it needs, builds, runs the engine tests
# (plain and under AddressSanitizer, plus the llm-cli checks), each fuzz
# target for 60 s (test/fuzz/run.sh), then the PostgreSQL tests (pg_regress
# and TAP, server under an unprivileged user).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
make -j"$(nproc)"
make -j"$(nproc)" check-engine
make fuzz FUZZ_SECONDS=60
tools/pg-test.sh
