# The answer cache (llm.cache_mb): a repeated 64-row SELECT gives the same
# answers in under a tenth of the time, from the cache (EXPLAIN ANALYZE,
# llm_stats, llm_role_stats say so); a changed parameter, seed or model
# misses, a greedy request's seed does not matter, and a random seed is never
# cached; one role's answers are not another's unless llm.cache_shared; the
# cache survives a restart and a crash of the worker, and a damaged cache
# file is discarded, never served.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use File::Copy;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

# A model directory of our own: the test model, the same bytes under another
# name, and a copy whose last weight byte differs (another model).
my $model_dir = PostgreSQL::Test::Utils::tempdir;
my $model = "$ENV{LLM_MODEL_DIR}/" . ($ENV{LLM_MODEL} // 'stories260K.gguf');
copy($model, "$model_dir/a.gguf") or die "copy: $!";
copy($model, "$model_dir/same.gguf") or die "copy: $!";
copy($model, "$model_dir/b.gguf") or die "copy: $!";
{
	open(my $fh, '+<:raw', "$model_dir/b.gguf") or die "open: $!";
	seek($fh, -1, 2);
	read($fh, my $byte, 1);
	seek($fh, -1, 2);
	print $fh chr(ord($byte) ^ 1);
	close($fh);
}

my $node = llm_node('answer_cache', 'llm.threads' => 1, 'llm.cache_mb' => 16,
	'llm.model_dir' => $model_dir, 'llm.model' => 'a.gguf');
llm_wait_state($node);
$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE TABLE stories (id int, body text);
INSERT INTO stories
SELECT i, 'Once upon a time there was a ' || (ARRAY['cat', 'dog', 'girl', 'boy', 'bird', 'fish', 'king', 'frog'])[i % 8 + 1]
          || ' called number ' || i || '.'
FROM generate_series(1, 64) i;
GRANT SELECT ON stories TO PUBLIC;
-- a query's result and its run time in milliseconds, measured in the server
CREATE FUNCTION timed(q text, OUT ms float8, OUT result text) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    EXECUTE q INTO result;
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
});

my $all = q{SELECT string_agg(a, E'\n' ORDER BY id)
FROM (SELECT id, llm_generate(body, max_tokens => 96) AS a FROM stories) s};

# llm_stats' answer cache hits (as the superuser: every role's).
sub hits
{
	return $node->safe_psql('postgres', 'SELECT answer_cache_hits FROM llm_stats');
}

# ---- a repeated 64-row SELECT ----
my ($miss_ms, $first) = split /\|/, $node->safe_psql('postgres', "SELECT ms, result FROM timed(\$q\$$all\$q\$)"), 2;
is(hits(), 0, 'the first SELECT finds nothing cached');
my $steps = llm_stat($node, 'steps');
my ($hit_ms, $second) = split /\|/, $node->safe_psql('postgres', "SELECT ms, result FROM timed(\$q\$$all\$q\$)"), 2;
is($second, $first, 'the repeated SELECT gives the same 64 answers');
is(hits(), 64, 'all 64 from the answer cache');
is(llm_stat($node, 'steps'), $steps, 'without an engine step');
cmp_ok($hit_ms, '<', $miss_ms / 10,
	sprintf('in under a tenth of the time (%.1f ms against %.1f ms: %.0fx)', $hit_ms, $miss_ms, $miss_ms / $hit_ms));
my $plan = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $all");
like($plan, qr/LLM Batch.*Answer Cache Hits: 64/s, 'EXPLAIN ANALYZE shows the hits');
cmp_ok(llm_stat($node, 'answer_cache_entries'), '>=', 64, 'llm_stats counts the entries');
cmp_ok(llm_stat($node, 'answer_cache_bytes'), '>', 0, 'and their bytes');
is($node->safe_psql('postgres', 'SELECT answer_cache_hits FROM llm_role_stats WHERE role = current_user'), 128,
	'llm_role_stats counts the role\'s hits');

# ---- what hits and what misses ----
# Whether query hits the cache (llm_stats' hits grow), and its answer.
sub probe
{
	my ($q, $user) = @_;
	my $before = hits();
	my $answer = $node->safe_psql('postgres', $q, extra_params => [ defined $user ? ('-U', $user) : () ]);
	return (hits() > $before ? 'hit' : 'miss', $answer);
}
my $one = "SELECT llm_generate('Once upon a time', max_tokens => 16";
my ($h, $greedy) = probe("$one)");
is($h, 'miss', 'a new prompt misses');
is((probe("$one)"))[0], 'hit', 'asked again, it hits');
is((probe("$one, seed => 7)"))[0], 'hit', 'greedy: another seed hits (the seed does not matter)');
is((probe("$one + 1)"))[0], 'miss', 'another max_tokens misses');
is((probe("$one, stop => ARRAY['.'])"))[0], 'miss', 'other stop strings miss');
is((probe("$one, top_k => 5)"))[0], 'miss', 'another top_k misses');
my ($s1, $sampled) = probe("$one, temperature => 0.9, seed => 1)");
is($s1, 'miss', 'sampling with a seed misses first');
my ($s2, $sampled2) = probe("$one, temperature => 0.9, seed => 1)");
is($s2, 'hit', 'the same seed hits');
is($sampled2, $sampled, 'with the same answer');
is((probe("$one, temperature => 0.9, seed => 2)"))[0], 'miss', 'another seed misses');
is((probe("$one, temperature => 0.8, seed => 1)"))[0], 'miss', 'another temperature misses');
probe("$one, temperature => 0.9)");
is((probe("$one, temperature => 0.9)"))[0], 'miss', 'a random seed (NULL) is never cached');

# batched and scored requests too: llm_generate_batch and llm_classify (its label scores)
my $batch = q{SELECT string_agg(completion || ':' || finish_reason || ':' || completion_tokens, '|' ORDER BY ord)
FROM llm_generate_batch(ARRAY['Lily and Ben', 'The sun was'], 12)};
my ($b1, $batch1) = probe($batch);
my ($b2, $batch2) = probe($batch);
is("$b1 $b2", 'miss hit', 'llm_generate_batch: a repeat hits');
is($batch2, $batch1, 'with the same completions, finish reasons and token counts');
my $classify = q{SELECT llm_classify_scores('Lily was very happy and she smiled.', ARRAY['happy', 'sad'])::text};
my ($c1, $scores1) = probe($classify);
my ($c2, $scores2) = probe($classify);
is($c2, 'hit', 'llm_classify_scores: a repeat hits');
is($scores2, $scores1, 'with the same scores, to the last bit');

# ---- roles ----
my $private = "SELECT llm_generate('Tom found a secret box', max_tokens => 8)";
my ($r1, $bob_answer) = probe($private, 'bob');
is($r1, 'miss', 'bob asks first');
my ($r2, $alice_answer) = probe($private, 'alice');
is($r2, 'miss', 'alice asking the same does not hit bob\'s answer');
is($alice_answer, $bob_answer, 'and gets the same answer');
is((probe($private, 'alice'))[0], 'hit', 'her own repeat hits');
is($node->safe_psql('postgres', 'SELECT answer_cache_hits FROM llm_stats', extra_params => [ '-U', 'bob' ]), 0,
	'llm_stats shows bob his own hits only');
$node->append_conf('postgresql.conf', 'llm.cache_shared = on');
$node->reload;
my $shared = "SELECT llm_generate('Ben had a big blue kite', max_tokens => 8)";
probe($shared, 'bob');
is((probe($shared, 'alice'))[0], 'hit', 'llm.cache_shared = on: alice hits bob\'s answer');
$node->append_conf('postgresql.conf', 'llm.cache_shared = off');
$node->reload;

# ---- the model ----
# Switch llm.model and wait for the worker to load it.
sub use_model
{
	my ($file) = @_;
	$node->append_conf('postgresql.conf', "llm.model = '$file'");
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT model_path LIKE '%/$file' AND state = 'ready' FROM llm_worker_status()")
	  or die "model $file never loaded";
}
use_model('same.gguf');
is((probe("$one)"))[0], 'hit', 'the same bytes under another file name: the same model, a hit');
use_model('b.gguf');
is((probe("$one)"))[0], 'miss', 'a model whose content differs by one byte misses');
use_model('a.gguf');
is((probe("$one)"))[0], 'miss', 'and the change dropped the first model\'s answers');

# ---- restart ----
$node->safe_psql('postgres', $all);		# the 64 answers of model a again
$node->restart;
llm_wait_state($node);
ok(-f $node->data_dir . '/llm_answer_cache', 'the cache is a file in the data directory');
cmp_ok(llm_stat($node, 'answer_cache_entries'), '>=', 64, 'read back at start');
my $after = $node->safe_psql('postgres', $all);
is($after, $first, 'after a restart the same answers');
is(hits(), 64, 'all from the cache');

# ---- a damaged file ----
$node->stop;
my $file = $node->data_dir . '/llm_answer_cache';
my $size = -s $file;
{
	open(my $fh, '+<:raw', $file) or die "open: $!";
	seek($fh, int($size / 2), 0);
	read($fh, my $byte, 1);
	seek($fh, int($size / 2), 0);
	print $fh chr(ord($byte) ^ 0x20);
	close($fh);
}
my $log_offset = -s $node->logfile;
$node->start;
llm_wait_state($node);
like(slurp_file($node->logfile, $log_offset), qr/answer cache file "llm_answer_cache" is invalid and was discarded/,
	'a damaged file is detected (checksums) and discarded');
is(llm_stat($node, 'answer_cache_entries'), 0, 'none of its entries is kept');
$after = $node->safe_psql('postgres', $all);
is($after, $first, 'the answers, computed again, are the same');
is(hits(), 0, 'none came from the damaged file');

# ---- a crash ----
# The worker wrote the file at its first answers since the start (then at
# most once a minute): kill -9 loses what came after, the file stays whole.
my $pid = llm_worker_pid($node);
$log_offset = -s $node->logfile;
kill 'KILL', $pid;
$node->poll_query_until('postgres',
	"SELECT state = 'ready' AND pid <> $pid FROM llm_worker_status()")
  or die 'the worker did not come back';
unlike(slurp_file($node->logfile, $log_offset), qr/answer cache file .* is invalid/,
	'after kill -9 of the worker the file read back is whole');
cmp_ok(llm_stat($node, 'answer_cache_entries'), '>', 0, 'with the answers written before the crash');
is($node->safe_psql('postgres', $all), $first, 'and the same answers, cached or computed');

# llm.cache_mb = 0 turns it off and removes the file
$node->append_conf('postgresql.conf', 'llm.cache_mb = 0');
$node->reload;
$node->poll_query_until('postgres', 'SELECT answer_cache_entries = 0 FROM llm_stats')
  or die 'the cache was not dropped';
ok(!-f $file, 'llm.cache_mb = 0 removes the file');
is((probe("$one)"))[0], 'miss', 'and nothing hits');

$node->stop;
done_testing();
