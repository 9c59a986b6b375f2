#!/usr/bin/env bash
# The answer cache (llm.cache_mb): a hit against computing the answer.
#   1. One call at a time: llm_generate of NEW greedy tokens (default 128)
#      for CALLS distinct prompts (default 32), one after another, timed in
#      the server; then the same calls again, now answered from the cache.
#      (Their prompts are not among the SELECT's below.)
#      Median milliseconds per call, and the ratio miss / hit.
#   2. A 64-row SELECT (the LLM Batch node, the 64 requests batched in the
#      engine): the whole statement, first computed, then repeated (median
#      of REPEAT runs, default 5); milliseconds and the ratio.
# Every repeated answer is checked equal to the computed one.  Prints a
# table and writes bench/results/cache_bench.{csv,md} (cache_bench_MODEL.*
# for another model).
#
#   bench/cache_bench.sh [MODEL]      (default ../shared/models/stories260K.gguf)
#
# PG_CONFIG names the PostgreSQL to build, install into and run (default:
# pg_config on PATH); it must be one you may install into (tools/fetch-pg.sh
# 18 gives a private one).
set -euo pipefail
cd "$(dirname "$0")/.."

SHARED=${LLM_SHARED:-../shared}
NEW=${NEW:-128}
CALLS=${CALLS:-32}
REPEAT=${REPEAT:-5}
THREADS=${THREADS:-1}
OUT=bench/results
mkdir -p "$OUT"
pg_config=${PG_CONFIG:-$(command -v pg_config)}
export PATH="$("$pg_config" --bindir):$PATH"
make -s -j"$(nproc)" PG_CONFIG="$pg_config" WITH_CUDA=0 >/dev/null
make -s PG_CONFIG="$pg_config" WITH_CUDA=0 install >/dev/null
model=${1:-$SHARED/models/stories260K.gguf}
tag=""
[ -n "${1:-}" ] && tag="_$(basename "$model" .gguf)"

. tools/pgtemp.sh
pgtemp_start "$model" "llm.threads = $THREADS" "llm.cache_mb = 64"

result=$("${PSQL[@]}" -At <<SQL
SELECT llm_generate('Warm-up', 4);
CREATE TABLE stories AS
SELECT i AS id, 'Once upon a time there was a ' ||
       (ARRAY['cat', 'dog', 'girl', 'boy', 'bird', 'fish', 'king', 'frog'])[i % 8 + 1] || ' called ' || i || '.' AS body
FROM generate_series(1, 64 + $CALLS) i;
CREATE TABLE single (pass int, id int, ms float8, answer text);
-- 1. one call at a time: CALLS prompts computed, then the same from the cache
DO \$\$
DECLARE t0 timestamptz; a text;
BEGIN
    FOR pass IN 1..2 LOOP
        FOR i IN 1..$CALLS LOOP
            t0 := clock_timestamp();
            a := llm_generate((SELECT body FROM stories WHERE id = 64 + i), $NEW);
            INSERT INTO single VALUES (pass, i, extract(epoch FROM clock_timestamp() - t0) * 1000, a);
        END LOOP;
    END LOOP;
END \$\$;
-- 2. a 64-row SELECT: computed once, then repeated
CREATE TABLE whole (run int, ms float8, answers text);
DO \$\$
DECLARE t0 timestamptz; a text;
BEGIN
    FOR run IN 0..$REPEAT LOOP
        t0 := clock_timestamp();
        SELECT string_agg(x, E'\n' ORDER BY id) INTO a
        FROM (SELECT id, llm_generate(body, max_tokens => $NEW) AS x FROM stories WHERE id <= 64) s;
        INSERT INTO whole VALUES (run, extract(epoch FROM clock_timestamp() - t0) * 1000, a);
    END LOOP;
END \$\$;
SELECT
  (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) FROM single WHERE pass = 1),
  (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) FROM single WHERE pass = 2),
  (SELECT bool_and(a.answer = b.answer) FROM single a JOIN single b USING (id) WHERE a.pass = 1 AND b.pass = 2),
  (SELECT ms FROM whole WHERE run = 0),
  (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) FROM whole WHERE run > 0),
  (SELECT bool_and(w.answers = f.answers) FROM whole w, whole f WHERE f.run = 0),
  (SELECT answer_cache_hits FROM llm_stats),
  (SELECT round(avg(length(answer))) FROM single WHERE pass = 1);
SQL
)
result=$(echo "$result" | tail -n 1)
IFS='|' read -r miss1 hit1 same1 miss64 hit64 same64 hits chars <<<"$result"
[ "$same1" = t ] && [ "$same64" = t ] || { echo "cache_bench: a cached answer differs from the computed one" >&2; exit 1; }
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
ratio1=$(awk -v a="$miss1" -v b="$hit1" 'BEGIN { printf "%.0f", a / b }')
ratio64=$(awk -v a="$miss64" -v b="$hit64" 'BEGIN { printf "%.0f", a / b }')

{
    echo "what,miss_ms,hit_ms,ratio"
    echo "one call ($NEW tokens; median of $CALLS),$miss1,$hit1,$ratio1"
    echo "64-row SELECT ($NEW tokens a row; hit: median of $REPEAT),$miss64,$hit64,$ratio64"
} > "$OUT/cache_bench$tag.csv"
{
    echo "# Answer cache: a hit against computing the answer"
    echo
    echo "\`NEW=$NEW CALLS=$CALLS REPEAT=$REPEAT THREADS=$THREADS bench/cache_bench.sh $*\` on $(basename "$model"), $THREADS thread(s), $cpu"
    echo "(PostgreSQL $("$pg_config" --version | awk '{ print $2 }'), $(date -u +%Y-%m-%d)); answers of $chars characters on average;"
    echo "every cached answer checked equal to the computed one; $hits hits in llm_stats ($CALLS + 64 x $REPEAT expected);"
    echo "load average at the end: $(cut -d ' ' -f 1-3 /proc/loadavg) (a machine of $(nproc) cores shared with other work)."
    echo
    echo "| what | computed (ms) | from the cache (ms) | ratio |"
    echo "|---|---:|---:|---:|"
    echo "| one llm_generate call, $NEW tokens (median of $CALLS) | $miss1 | $hit1 | ${ratio1}x |"
    echo "| 64-row SELECT, $NEW tokens a row (hit: median of $REPEAT) | $miss64 | $hit64 | ${ratio64}x |"
} > "$OUT/cache_bench$tag.md"
cat "$OUT/cache_bench$tag.md"
