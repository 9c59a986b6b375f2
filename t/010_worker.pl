# The worker: it comes back after SIGKILL (a crash: the postmaster resets
# shared memory and ends every session) and after SIGTERM (a clean exit:
# waiting sessions get an error and stay connected); later calls work.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = llm_node('worker');
llm_wait_state($node);

my $prompt = 'Once upon a time';
my $expected = $node->safe_psql('postgres', "SELECT llm_generate('$prompt', 16)");
isnt($expected, '', 'the worker generates');

# Slow the steps down so that a request is surely still running when the
# worker is killed.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.debug_step_delay = '100ms'; SELECT pg_reload_conf()");
usleep(200_000);

# SIGKILL while a session waits.
my $q = llm_start_query($node, "SELECT llm_generate('$prompt', 64)");
llm_poll($node, 'SELECT running_requests = 1 FROM llm_stats');
my $pid = llm_worker_pid($node);
my $t0 = time;
kill 'KILL', $pid;
llm_finish_query($q);
my $elapsed = $q->{end} - $t0;
isnt($q->{rc}, 0, 'the waiting session fails when the worker is killed');
like($q->{err}, qr/crash of another server process|server closed the connection/,
	'with a crash error');
cmp_ok($elapsed, '<', 1.0, "within a second ($elapsed s)");

# The postmaster reinitialises and starts a new worker.
$node->poll_query_until('postgres',
	"SELECT state = 'ready' AND pid <> $pid FROM llm_worker_status()")
  or die 'the worker did not come back after SIGKILL';
ok($node->log_contains(qr/background worker "llm worker" \(PID $pid\) was terminated by signal 9/),
	'the crash is logged');
is($node->safe_psql('postgres', "SELECT llm_generate('$prompt', 16)"),
	$expected, 'later calls work after SIGKILL');

# SIGTERM: the worker exits (not a crash); the waiting session gets an
# error but keeps its connection.
$q = llm_start_query($node, "SELECT llm_generate('$prompt', 64)",
	'SELECT 1');
llm_poll($node, 'SELECT running_requests = 1 FROM llm_stats');
$pid = llm_worker_pid($node);
my $log_offset = -s $node->logfile;
$t0 = time;
kill 'TERM', $pid;
llm_finish_query($q);
$elapsed = $q->{end} - $t0;
isnt($q->{rc}, 0, 'the waiting session fails when the worker exits');
like($q->{err}, qr/ERROR:  llm background worker exited/, 'with the worker\'s error');
unlike($q->{err}, qr/server closed|crash/, 'and no crash');
cmp_ok($elapsed, '<', 1.0, "within a second ($elapsed s)");

$node->poll_query_until('postgres',
	"SELECT state = 'ready' AND pid <> $pid FROM llm_worker_status()")
  or die 'the worker did not come back after SIGTERM';
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/terminating any other active server processes/,
	'SIGTERM is no crash');
is($node->safe_psql('postgres', "SELECT llm_generate('$prompt', 16)"),
	$expected, 'later calls work after SIGTERM');

$node->stop;
done_testing();
