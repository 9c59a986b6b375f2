# Query cancel, statement_timeout and pg_terminate_backend end the wait at
# once, and the worker drops the request at its next step.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# 100 ms per step: a 64-token request runs for about 6 s unless dropped.
my $node = llm_node('cancel', 'llm.debug_step_delay' => '100ms');
llm_wait_state($node);

my $generate = "SELECT llm_generate('Once upon a time', 64)";
my $find = "SELECT pid FROM pg_stat_activity WHERE query LIKE '%llm_generate%' "
  . "AND backend_type = 'client backend' AND pid <> pg_backend_pid()";

# Run $sql in the background until $n requests run, act on it with $how
# (SQL run from another session), then check the wait ended within a
# second and the worker dropped everything within a second more.
sub check_abort
{
	my ($name, $n, $how, $error, @sql) = @_;
	my $cancelled = llm_stat($node, 'cancelled_requests');

	my $q = llm_start_query($node, @sql);
	llm_poll($node, "SELECT running_requests = $n FROM llm_stats");
	my $t0 = time;
	$node->safe_psql('postgres', $how) if defined $how;
	llm_finish_query($q);
	my $elapsed = $q->{end} - ($how ? $t0 : $q->{start});

	isnt($q->{rc}, 0, "$name: the statement fails");
	like($q->{err}, $error, "$name: with the expected error");
	cmp_ok($elapsed, '<', ($how ? 1.0 : 1.5), "$name: the wait ends at once ($elapsed s)");

	my $dropped = llm_poll($node,
		    'SELECT running_requests = 0 AND queued_requests = 0 '
		  . 'AND cancelled_requests = ' . ($cancelled + $n) . ' FROM llm_stats');
	cmp_ok($dropped, '<', 1.0,
		"$name: the worker drops the request at its next step ($dropped s)");
}

check_abort('pg_cancel_backend', 1,
	"SELECT pg_cancel_backend(pid) FROM ($find) a",
	qr/canceling statement due to user request/, $generate);

check_abort('statement_timeout', 1, undef,
	qr/canceling statement due to statement timeout/,
	"SET statement_timeout = '500ms'", $generate);

check_abort('pg_cancel_backend on a batch', 4,
	"SELECT pg_cancel_backend(pid) FROM ($find) a",
	qr/canceling statement due to user request/,
	"SELECT * FROM llm_generate_batch(ARRAY['a', 'b', 'c', 'd'], 64)");

check_abort('pg_terminate_backend', 1,
	"SELECT pg_terminate_backend(pid) FROM ($find) a",
	qr/terminating connection due to administrator command/, $generate);

# Nothing is left behind: a new request is served normally.
is($node->safe_psql('postgres', "SELECT llm_generate('Once upon a time', 4)"),
	', there was a', 'later calls work');
is(llm_stat($node, 'failed_requests'), '0', 'no request failed');

$node->stop;
done_testing();
