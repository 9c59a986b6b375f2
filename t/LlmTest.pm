# LlmTest.pm
#	Helpers for the llm TAP tests: a node with the extension preloaded and
#	the test model, and psql sessions running in the background.
#
# The model comes from the environment: LLM_MODEL_DIR and LLM_MODEL (the
# Makefile exports them; tools/pg-test.sh points them at its own copy).
package LlmTest;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

our @EXPORT = qw(llm_node llm_wait_state llm_worker_pid llm_stat
  llm_start_query llm_start_query_as llm_finish_query llm_poll llm_poll_through_restart);

# A started node with llm preloaded, serving the test model, the extension
# created in database postgres.  Extra settings as name => value.  The
# answer cache is off unless a test sets llm.cache_mb: the other tests
# measure the engine's work, which a repeated request would not reach.
sub llm_node
{
	my ($name, %conf) = @_;
	my $model_dir = $ENV{LLM_MODEL_DIR}
	  or BAIL_OUT('LLM_MODEL_DIR is not set (run through make installcheck or tools/pg-test.sh)');
	my $model = $ENV{LLM_MODEL} // 'stories260K.gguf';

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		    "shared_preload_libraries = 'llm'\n"
		  . "llm.model_dir = '$model_dir'\n"
		  . "llm.model = '$model'\n"
		  . "restart_after_crash = on\n"
		  . "llm.cache_mb = 0\n"
		  . join('', map { "$_ = '$conf{$_}'\n" } sort keys %conf));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION llm');
	return $node;
}

# Wait until the worker reports the given state ("ready" by default).
sub llm_wait_state
{
	my ($node, $state) = @_;
	$state //= 'ready';
	$node->poll_query_until('postgres',
		"SELECT state FROM llm_worker_status()", $state)
	  or die "llm worker never reached state \"$state\"";
}

# The worker's process id.
sub llm_worker_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT pid FROM llm_worker_status()');
}

# One column of the llm_stats view.
sub llm_stat
{
	my ($node, $column) = @_;
	return $node->safe_psql('postgres', "SELECT $column FROM llm_stats");
}

# Poll a boolean query until it is true; returns the seconds it took.
sub llm_poll
{
	my ($node, $query) = @_;
	my $t0 = time;
	$node->poll_query_until('postgres', $query)
	  or die "timed out waiting for: $query";
	return time - $t0;
}

# Poll a boolean query until it is true while the postmaster may be
# restarting every process (after a kill -9): a psql started then can exit
# before it reads its query, and IPC::Run dies of the broken pipe, so such
# a try is made again.  Returns whether the query came true.
sub llm_poll_through_restart
{
	my ($node, $query) = @_;
	for my $try (1 .. 20)
	{
		my $ok = eval { $node->poll_query_until('postgres', $query) };
		return $ok if defined $ok;
		die $@ unless $@ =~ /Broken pipe/;
		Time::HiRes::usleep(250_000);
	}
	return 0;
}

# Start psql in the background on database postgres, running each SQL
# string as its own command (-c), in one session.
sub llm_start_query
{
	my ($node, @sql) = @_;
	return llm_start_query_as($node, undef, @sql);
}

# llm_start_query as role user (undef: the default user).
sub llm_start_query_as
{
	my ($node, $user, @sql) = @_;
	my $q = { out => '', err => '', start => time };
	$q->{h} = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'),
			(defined $user ? ('-U', $user) : ()),
			map { ('-c', $_) } @sql
		],
		'>', \$q->{out}, '2>', \$q->{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return $q;
}

# Wait for a background psql to end; fills in rc, end and elapsed.
sub llm_finish_query
{
	my ($q) = @_;
	$q->{h}->finish;
	$q->{rc} = $q->{h}->result(0);
	$q->{end} = time;
	chomp $q->{out};
	return $q;
}

1;
