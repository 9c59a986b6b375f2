# Shutdown with requests in flight: fast shutdown ends the sessions and the
# worker cleanly; smart shutdown lets running requests finish first.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = llm_node('shutdown', 'llm.debug_step_delay' => '100ms');
llm_wait_state($node);
my $expected = $node->safe_psql('postgres', "SELECT llm_generate('Lily and Ben', 16)");

# Fast shutdown while three sessions wait.
my @q = map { llm_start_query($node, "SELECT llm_generate('Once upon a time', 64)") } 1 .. 3;
llm_poll($node, 'SELECT running_requests = 3 FROM llm_stats');
my $log_offset = -s $node->logfile;
my $t0 = time;
$node->stop('fast');
my $elapsed = time - $t0;
cmp_ok($elapsed, '<', 10, "fast shutdown is quick ($elapsed s)");
for my $q (@q)
{
	llm_finish_query($q);
	isnt($q->{rc}, 0, 'a waiting session is ended');
	like($q->{err}, qr/terminating connection due to administrator command/,
		'by the shutdown');
}
my $log = slurp_file($node->logfile, $log_offset);
like($log, qr/database system is shut down/, 'the server shut down');
unlike($log, qr/terminated by signal|terminating any other active server processes|PANIC/,
	'without a crash');

# Up again: the worker serves as before.
$node->start;
llm_wait_state($node);
is($node->safe_psql('postgres', "SELECT llm_generate('Lily and Ben', 16)"),
	$expected, 'generation works after a restart');

# Smart shutdown waits for the session, whose request finishes normally.
my $q = llm_start_query($node, "SELECT llm_generate('Lily and Ben', 16)");
llm_poll($node, 'SELECT running_requests = 1 FROM llm_stats');
$log_offset = -s $node->logfile;
$t0 = time;
$node->stop('smart');
$elapsed = time - $t0;
llm_finish_query($q);
is($q->{rc}, 0, 'the running request finishes during a smart shutdown');
is($q->{out}, $expected, 'with its answer');
cmp_ok($elapsed, '>', 0.5, "the server waited for it ($elapsed s)");
$log = slurp_file($node->logfile, $log_offset);
like($log, qr/received smart shutdown request/, 'it was a smart shutdown');
unlike($log, qr/terminated by signal|PANIC/, 'without a crash');

$node->start;
llm_wait_state($node);
$node->stop;
done_testing();
