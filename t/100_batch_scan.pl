# The LLM Batch plan node under load: the llm_progress view while a 64-row
# job runs, a LIMIT that cancels the requests it will not use, a query
# cancel or statement timeout in the middle of a window, after which every
# sequence is freed within a step, and a failed statement rolled back to a
# savepoint, after which its llm_progress row is gone.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# 20 ms per step and 8 sequences at once: a window of 16 rows, and jobs slow enough to watch.
my $node = llm_node('batch_scan', 'llm.debug_step_delay' => '20ms', 'llm.max_sequences' => 8);
llm_wait_state($node);
$node->safe_psql('postgres',
	"CREATE TABLE articles AS SELECT i AS id, 'Once upon a time there was a ' || "
	  . "(ARRAY['cat', 'dog', 'bird', 'girl'])[i % 4 + 1] || ' named ' || i AS body "
	  . "FROM generate_series(1, 64) i; ANALYZE articles");

like($node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) SELECT llm_generate(body, 8) FROM articles'),
	qr/Window: 16 rows/, 'the window is twice llm.max_sequences');

# The progress view while a 64-row job runs, and no row once it is done.
my $job = llm_start_query($node, 'SELECT id, llm_generate(body, 24) FROM articles');
llm_poll($node, 'SELECT count(*) = 1 FROM llm_progress WHERE rows_done > 0');
my $row = $node->safe_psql('postgres',
	"SELECT query LIKE '%llm_generate(body, 24)%', rows_done BETWEEN 1 AND 63, rows_total, "
	  . 'prompt_tokens > 0, completion_tokens > 0, tokens_per_second > 0, '
	  . "elapsed > '0', eta IS NOT NULL FROM llm_progress");
is($row, 't|t|64|t|t|t|t|t', 'llm_progress shows the job: query, rows done of 64, tokens, rate, ETA');
llm_finish_query($job);
is($job->{rc}, 0, 'the job succeeds');
my @lines = split /\n/, $job->{out};
is(scalar @lines, 64, 'with 64 rows');
is($node->safe_psql('postgres', 'SELECT count(*) FROM llm_progress'), '0', 'no progress row once it is done');

# A table never analysed: the plan guesses its rows, the node counts them
# once it has read them all, and the tokens of running requests show before
# any row is answered.
$node->safe_psql('postgres',
	"CREATE TABLE unanalysed AS SELECT i AS id, 'A dog named ' || i AS body FROM generate_series(1, 12) i");
$job = llm_start_query($node, 'SELECT id, llm_generate(body, 24) FROM unanalysed');
ok($node->poll_query_until('postgres',
		'SELECT rows_done = 0 AND completion_tokens > 0 AND rows_total = 12 AND NOT total_is_estimate FROM llm_progress'),
	'llm_progress: the running requests\' tokens before any row is answered, and the counted total');
llm_finish_query($job);
is($job->{rc}, 0, 'the job succeeds');

# A LIMIT the plan cannot see: the node fills its window, the LIMIT stops
# reading after two rows, and the requests it will not use are cancelled.
my $completed = llm_stat($node, 'completed_requests');
my $cancelled = llm_stat($node, 'cancelled_requests');
is($node->safe_psql('postgres', 'SELECT count(*) FROM (SELECT llm_generate(body, 48) FROM articles LIMIT (SELECT 2)) s'),
	'2', 'LIMIT returns two rows');
llm_poll($node, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats');
my $done = llm_stat($node, 'completed_requests') - $completed;
my $dropped = llm_stat($node, 'cancelled_requests') - $cancelled;
cmp_ok($dropped, '>', 0, "LIMIT cancels the requests it will not use ($dropped cancelled)");
cmp_ok($done, '<', 64, "the rest of the table is never computed ($done completed)");

# Cancel and statement timeout in the middle of a window: the statement
# ends at once, and the worker frees every sequence within a step or two.
sub check_abort
{
	my ($name, $how, $error, @sql) = @_;

	my $q = llm_start_query($node, @sql);
	llm_poll($node, 'SELECT running_requests = 8 AND queued_requests > 0 FROM llm_stats');
	my $t0 = time;
	$node->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%llm_generate(body, 200)%' "
		  . "AND backend_type = 'client backend' AND pid <> pg_backend_pid()") if $how;
	llm_finish_query($q);
	my $elapsed = $q->{end} - ($how ? $t0 : $q->{start});
	isnt($q->{rc}, 0, "$name: the statement fails");
	like($q->{err}, $error, "$name: with the expected error");
	cmp_ok($elapsed, '<', ($how ? 1.0 : 2.5), "$name: the statement ends at once ($elapsed s)");
	my $freed = llm_poll($node, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats');
	cmp_ok($freed, '<', 1.0, "$name: every sequence is freed at once ($freed s)");
}

check_abort('pg_cancel_backend', 1, qr/canceling statement due to user request/,
	'SELECT id, llm_generate(body, 200) FROM articles');
check_abort('statement_timeout', 0, qr/canceling statement due to statement timeout/,
	"SET statement_timeout = '1500ms'", 'SELECT id, llm_generate(body, 200) FROM articles');

# Nothing is left behind: the next query is served, and nothing failed.
is($node->safe_psql('postgres', 'SELECT count(llm_generate(body, 4)) FROM articles WHERE id <= 3'),
	'3', 'later queries work');
is(llm_stat($node, 'failed_requests'), '0', 'no request failed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM llm_progress'), '0', 'no progress row is left');

# A statement that fails mid-way in a transaction that goes on after
# ROLLBACK TO SAVEPOINT: its llm_progress row is gone at once, for the
# session itself and for another, not at the end of the transaction.
sub check_savepoint
{
	my ($name, $sql, $error) = @_;
	my ($out, $err) = ('', '');
	my $script = "BEGIN;\nSAVEPOINT s;\n$sql;\nROLLBACK TO s;\n"
	  . "SELECT 'mine', count(*) FROM llm_progress WHERE pid = pg_backend_pid();\n"
	  . "SELECT 'waited', pg_sleep(2);\nCOMMIT;\n";
	my $file = PostgreSQL::Test::Utils::tempdir . '/savepoint.sql';
	append_to_file($file, $script);
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-f', $file ],
		'>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	llm_poll($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'SELECT ''waited''%' AND state = 'active'");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM llm_progress'), '0',
		"$name: another session sees no progress row while the transaction goes on");
	$h->finish;
	like($err, $error, "$name: the statement fails");
	like($out, qr/^mine\|0$/m, "$name: after ROLLBACK TO the session sees no progress row of its own");
	like($out, qr/^waited\|$/m, "$name: the transaction goes on");
}

check_savepoint('LLM Batch node',
	'SELECT id, length(llm_generate(CASE WHEN id = 2 THEN repeat(body, 400) ELSE body END, 24)) FROM articles',
	qr/ERROR:  prompt is too long\n.*\nCONTEXT:  row 2 of the LLM Batch node/);
check_savepoint('llm_generate_batch',
	"SELECT count(*) FROM llm_generate_batch(ARRAY['Once upon a time', repeat('Once upon a time ', 1000)], 24)",
	qr/ERROR:  prompt is too long/);
llm_poll($node, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats');

$node->stop;
done_testing();
