#!/usr/bin/env bash
# Run the PostgreSQL tests of llm end to end: pg_regress on a temporary
# instance with the library preloaded (sql/, expected/), then the TAP tests
# (t/), both through `make installcheck`.
#
# As root (as in CI): installs the extension (`make install`), creates the
# unprivileged user $LLM_TEST_USER (default llmtest) if missing, and runs the
# tests as that user in a scratch directory it owns, with its own copy of the
# model and the golden file (the checkout may be under /root or read-only
# to it).  As any other user: runs them as that user; the extension must be
# installed already, or the PostgreSQL directories writable.
#
# PG_CONFIG picks the PostgreSQL (default: pg_config on PATH, Debian's 15).
# One that is not a system install (tools/fetch-pg.sh 18) is copied into
# the scratch directory, where the user can read it, and llm is built and
# installed into that copy; PostgreSQL's TAP modules come from its PGXS, or
# from Debian's 15 (postgresql-server-dev-15) where it has none, as the
# PyPI wheel of 18 has none.
#
# Environment: PG_CONFIG, LLM_TEST_USER, LLM_MODEL (default stories260K.gguf, from
# ../shared/models; t/090 and t/110 also get Gemma 3 270M and SmolLM2, from tools/fetch-model.sh), PROVE_TESTS (e.g. "t/020_cancel.pl"), KEEP=1 keeps
# the scratch directory.  Exits nonzero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=$(cd .. && pwd)/shared
model=${LLM_MODEL:-stories260K.gguf}
test_user=${LLM_TEST_USER:-llmtest}

# The expected output must show the golden texts exactly (newlines written
# as \n, as in the golden file), so it cannot drift from the reference.
while IFS=$'\t' read -r prompt _ text; do
    case $prompt in '#'*) continue ;; esac
    if ! grep -qF -- "| $text" expected/generate.out; then
        echo "pg-test: expected/generate.out lacks the golden text for \"$prompt\"" >&2
        exit 1
    fi
done < "$shared/golden/stories260K-greedy.tsv"

tools/install-deps.sh
pg_config=$(command -v "${PG_CONFIG:-pg_config}")
pg_version=$("$pg_config" --version)
echo "pg-test: $pg_version ($pg_config)"
case $("$pg_config" --bindir) in
    /usr/*) private_pg=0 ;;
    *) private_pg=1 ;;
esac
if [ $private_pg = 0 ]; then
    make -j"$(nproc)" PG_CONFIG="$pg_config" >/dev/null
    if [ "$(id -u)" -eq 0 ] || [ -w "$("$pg_config" --pkglibdir)" ]; then
        make install PG_CONFIG="$pg_config" >/dev/null
    elif ! cmp -s llm.so "$("$pg_config" --pkglibdir)/llm.so"; then
        echo "pg-test: the installed llm.so is not this build; run 'make install' as root first" >&2
        exit 1
    fi
fi

# The scratch directory mirrors the checkout's neighbourhood: main/ and shared/.
work=$(mktemp -d /tmp/llm-pg-test.XXXXXX)
cleanup() {
    if [ "${KEEP:-0}" = 1 ]; then
        echo "pg-test: scratch directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
mkdir -p "$work/main/src" "$work/shared/models" "$work/shared/golden" "$work/shared/data"
cp -r Makefile llm.control llm--*.sql sql expected t "$work/main/"
cp src/*.c src/*.h "$work/main/src/"
cp "$shared/models/$model" "$work/shared/models/"
# a private PostgreSQL: its install, with llm built from a copy of the
# checkout and installed into it; for a wheel, the wheel's whole tree, as
# its programs find their libraries in WHEEL/PACKAGE.libs, two levels above
# WHEEL/PACKAGE/pginstall
tap_make=()
if [ $private_pg = 1 ]; then
    pg_root=$(cd "$("$pg_config" --bindir)/.." && pwd)
    if compgen -G "$pg_root/../../*.libs" >/dev/null; then
        pg_root=$(cd "$pg_root/../.." && pwd)
    fi
    pg_sub=${pg_config#"$pg_root"/}
    cp -a "$pg_root" "$work/pg"
    pg_config=$work/pg/$pg_sub
    mkdir -p "$work/build"
    tar -c --exclude=./.cache --exclude=./.git --exclude=./build --exclude=./build-asan \
        --exclude=./bin --exclude='*.o' --exclude='*.so' --exclude='*.d' --exclude='*.a' . |
        tar -x -C "$work/build"
    # WITH_CUDA=0: llm.so alone, so these tests see the CUDA module absent
    make -C "$work/build" -j"$(nproc)" PG_CONFIG="$pg_config" WITH_CUDA=0 >/dev/null
    make -C "$work/build" PG_CONFIG="$pg_config" WITH_CUDA=0 install >/dev/null
    perl_dir=$("$pg_config" --pkglibdir)/pgxs/src/test/perl
    if [ ! -d "$perl_dir/PostgreSQL/Test" ]; then
        debian_perl=/usr/lib/postgresql/15/lib/pgxs/src/test/perl
        echo "pg-test: TAP modules from $debian_perl (this install has none)"
        cp -r "$debian_perl" "$perl_dir"
    fi
    # a PGXS configured without TAP still runs them, with the system prove;
    # 15's modules find tmp_check through TESTDIR, which 18's PGXS no
    # longer sets (it sets TESTDATADIR and TESTLOGDIR)
    tap_make=(enable_tap_tests=yes PROVE=prove TESTDIR="$work/main")
fi
cp "$shared/golden/stories260K-greedy.tsv" "$work/shared/golden/"
cp "$shared/data/stories260K-samples.txt" "$work/shared/data/"
# the real models: Gemma for the batch-invariance test (t/090), SmolLM2 for chat (t/110)
mkdir -p "$work/real-models"
cp "$(tools/fetch-model.sh gemma | tail -n 1)" "$work/real-models/"
cp "$(tools/fetch-model.sh smollm2 | tail -n 1)" "$work/real-models/"

run_as=()
if [ "$(id -u)" -eq 0 ]; then
    if ! id "$test_user" >/dev/null 2>&1; then
        useradd --system --create-home --shell /bin/bash "$test_user"
    fi
    chown -R "$test_user" "$work"
    chmod 755 "$work"
    run_as=(runuser -u "$test_user" --)
fi

# pg_regress and TAP separately, so that a failure in one still runs the
# other; each under a time limit, so that a hang fails rather than blocks.
status=0
mk=(make -C "$work/main" --no-print-directory PG_CONFIG="$pg_config" "${tap_make[@]}" LLM_MODEL_DIR="$work/shared/models"
    LLM_MODEL="$model" LLM_REAL_MODEL_DIR="$work/real-models")
echo "pg-test: pg_regress"
if ! timeout 900 "${run_as[@]}" env HOME="$work" "${mk[@]}" installcheck TAP_TESTS=; then
    status=1
    [ -f "$work/main/regression.diffs" ] && cat "$work/main/regression.diffs"
fi
echo "pg-test: TAP tests"
if ! timeout 1200 "${run_as[@]}" env HOME="$work" "${mk[@]}" installcheck REGRESS= PROVE_FLAGS="--timer ${PROVE_VERBOSE:+-v}" \
        ${PROVE_TESTS:+PROVE_TESTS="$PROVE_TESTS"}; then
    status=1
    for f in "$work"/main/tmp_check/log/regress_log_*; do
        [ -f "$f" ] || continue
        echo "=== $f (last 40 lines)"
        tail -n 40 "$f"
    done
fi

if [ $status -ne 0 ]; then
    echo "pg-test: FAILED on $pg_version" >&2
else
    echo "pg-test: all PostgreSQL tests passed on $pg_version"
fi
exit $status
