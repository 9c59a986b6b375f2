#!/usr/bin/env bash
# make check-cassert: the PostgreSQL tests of llm (pg_regress and TAP,
# tools/pg-test.sh) against a PostgreSQL 15 built with assertions from the
# Debian package's sources, so that the extension's Assert()s run (Debian's
# server is built without --enable-cassert).  The server build takes about
# a quarter of an hour on 2 cores and is kept in $LLM_CASSERT_PREFIX
# (default /opt/llm-pg15-cassert), so this is not part of tools/test.sh.
# Run as root, like tools/test.sh; the checkout is copied, so its llm.so
# (built for the system server) is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${LLM_CASSERT_PREFIX:-/opt/llm-pg15-cassert}
checkout=$PWD

tools/install-deps.sh
if [ ! -x "$prefix/bin/pg_config" ]; then
    src=$(mktemp -d /tmp/llm-pg-src.XXXXXX)
    # the sources of the postgresql-15 package the system runs (deb-src beside the deb entries)
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
        > /etc/apt/sources.list.d/llm-deb-src.sources
    apt-get update -qq
    (cd "$src" && apt-get source -qq --download-only postgresql-15 && tar xjf postgresql-15_*.orig.tar.bz2)
    (cd "$src"/postgresql-15.* &&
        ./configure -q --prefix="$prefix" --enable-cassert --enable-debug --enable-tap-tests \
            --without-icu --without-readline --without-zlib CFLAGS="-O1 -g" &&
        make -s -j"$(nproc)" && make -s install)
    rm -rf "$src"
fi
"$prefix/bin/pg_config" --configure | grep -q -- --enable-cassert ||
    { echo "check-cassert: $prefix is not a cassert build" >&2; exit 1; }

# a copy of the checkout beside ../shared, built and tested against that server
work=$(mktemp -d /tmp/llm-cassert.XXXXXX)
trap 'rm -rf "$work"' EXIT
git -C "$checkout" ls-files -z | (cd "$checkout" && xargs -0 tar cf -) | (mkdir -p "$work/main" && tar xf - -C "$work/main")
ln -s "$(cd "$checkout/.." && pwd)/shared" "$work/shared"
[ -d "$checkout/.cache" ] && ln -s "$checkout/.cache" "$work/main/.cache"
cd "$work/main"
# the PostgreSQL side is what is checked: no CUDA build needed for it
PATH="$prefix/bin:$PATH" WITH_CUDA=0 bash tools/pg-test.sh
echo "check-cassert: all PostgreSQL tests passed against $("$prefix/bin/postgres" --version) with assertions"
