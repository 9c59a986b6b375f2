# One model worker per device (llm.devices, issue 43 item 4): two CPU
# workers of one thread each give the answers one worker gives, in the same
# order, for a 64-row query through the LLM Batch node, greedy and seeded
# sampling alike; both workers take requests; a cancel frees the sequences
# of both; a bad list is logged, and one worker serves.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $rows = "CREATE TABLE prompts AS SELECT g AS id, "
  . "(ARRAY['Lily had a', 'Once upon a time', 'The little dog', 'Tom saw a big'])[g % 4 + 1] || ' ' || g AS p "
  . "FROM generate_series(1, 64) g";
my $answers = "SELECT id, llm_generate(p, max_tokens => 24) AS greedy, "
  . "llm_generate(p, max_tokens => 24, temperature => 0.8, seed => id) AS sampled FROM prompts ORDER BY id";

my $one = llm_node('one_worker', 'llm.threads' => 1);
llm_wait_state($one);
$one->safe_psql('postgres', $rows);
my $expected = $one->safe_psql('postgres', $answers);
$one->stop;

my $two = llm_node('two_workers', 'llm.devices' => 'cpu, cpu', 'llm.threads' => 2);
llm_wait_state($two);
$two->poll_query_until('postgres', "SELECT count(*) = 2 FROM llm_workers() WHERE state = 'ready'")
  or die 'the two workers never both loaded the model';
is($two->safe_psql('postgres', 'SELECT string_agg(threads::text, \',\' ORDER BY worker) FROM llm_workers()'),
	'1,1', 'the two CPU workers split llm.threads = 2');
$two->safe_psql('postgres', $rows);
like($two->safe_psql('postgres', "EXPLAIN (COSTS OFF) $answers"), qr/LLM Batch/, 'the query runs through the LLM Batch node');
is($two->safe_psql('postgres', $answers), $expected, 'two workers give the answers one worker gives, in the same order');
my $counts = $two->safe_psql('postgres', 'SELECT string_agg(completed_requests::text, \',\' ORDER BY worker) FROM llm_workers()');
my ($a, $b) = split /,/, $counts;
ok($a > 0 && $b > 0, "requests reached both workers ($counts)");
is($a + $b, 128, 'and each request was answered once');
is(llm_stat($two, 'completed_requests'), '128', 'llm_stats counts the requests of both workers');

# a cancel frees the sequences of both workers
my $long = llm_start_query($two,
	"SELECT count(llm_generate(p, max_tokens => 400, stop => ARRAY['never'])) FROM prompts");
$two->poll_query_until('postgres', "SELECT bool_and(running_requests > 0) FROM llm_workers()")
  or die 'the long query never ran on both workers';
$two->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%max_tokens => 400%' AND pid <> pg_backend_pid()");
llm_finish_query($long);
like($long->{err}, qr/canceling statement due to user request/, 'the long query was cancelled');
ok(llm_poll($two, "SELECT sum(running_requests) = 0 AND sum(waiting_requests) = 0 FROM llm_workers()") < 30,
	'both workers dropped its sequences');
is($two->safe_psql('postgres', "SELECT count(*) FROM ($answers) a"), '64', 'both serve again after the cancel');

# a bad list: as for any setting of a preloaded library, the log says why and the default (one worker) serves
$two->stop;
$two->append_conf('postgresql.conf', "llm.devices = 'cpu, gpu:1'\n");
$two->start;
like(slurp_file($two->logfile), qr/invalid value for parameter "llm.devices".*\n.*"gpu:1" is not a device/,
	'a bad llm.devices is logged with the bad entry named');
llm_wait_state($two);
is($two->safe_psql('postgres', 'SELECT count(*) FROM llm_workers()'), '1', 'and one worker serves instead');
$two->stop;

# CPUs and GPUs do not mix: their answers are not the same bits
$two->append_conf('postgresql.conf', "llm.devices = 'cpu, cuda:0'\n");
$two->start;
like(slurp_file($two->logfile), qr/invalid value for parameter "llm.devices".*\n.*must all be CPUs or all GPUs/,
	'a list mixing CPUs and GPUs is refused');
$two->stop;

done_testing();
