# Idle cursors do not starve another role of request slots: a plain role
# cannot SET llm.batch_rows above its default (a superuser may, also per
# role), and an LLM Batch node holds at most a quarter of the slots
# however large its window, so two roles' cursors with the largest windows
# that fetched one row and sit in their transactions leave slots for a
# third role's request.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = llm_node('idle_cursors', 'llm.threads' => 1, 'llm.debug_step_delay' => '5ms');
llm_wait_state($node);
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; CREATE ROLE carol LOGIN');

# llm.batch_rows: up to the default (twice llm.max_sequences, 128 here) for everyone, above for a superuser
my ($rc, $out, $err) = $node->psql('postgres', 'SET llm.batch_rows = 65536', extra_params => [ '-U', 'alice' ]);
like($err, qr/permission denied to set llm.batch_rows above 128/, 'a plain role cannot SET llm.batch_rows above 128');
is($node->safe_psql('postgres', 'SET llm.batch_rows = 100; SHOW llm.batch_rows', extra_params => [ '-U', 'alice' ]),
	'100', 'nor is it refused below');
is($node->safe_psql('postgres', 'SET llm.batch_rows = 65536; SHOW llm.batch_rows'), '65536', 'a superuser can');
$node->safe_psql('postgres', 'ALTER ROLE alice SET llm.batch_rows = 65536; ALTER ROLE carol SET llm.batch_rows = 65536');
is($node->safe_psql('postgres', 'SHOW llm.batch_rows', extra_params => [ '-U', 'carol' ]),
	'65536', 'and may give a role more: ALTER ROLE ... SET');


# alice and carol (windows of 65,536 rows: without the quarter, 768 and 256
# slots, all of them) fetch one row each, then hold their cursors
my $cursor = q{BEGIN; DECLARE c CURSOR FOR SELECT llm_generate('Once upon a time ' || i, max_tokens => 8) }
  . q{FROM generate_series(1, 100000) i; FETCH 1 FROM c; SELECT pg_sleep(25); COMMIT;};
my @idle = map { llm_start_query_as($node, $_, $cursor) } ('alice', 'carol');
llm_poll($node, "SELECT count(*) = 2 FROM pg_stat_activity WHERE query LIKE '%pg_sleep(25)%' AND wait_event = 'PgSleep'");
# their windows' requests are all answered, the answers waiting in the slots
llm_poll($node, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats');

my $start = time;
($rc, $out, $err) = $node->psql('postgres', "SET statement_timeout = '20s'; SELECT llm_generate('Lily had a dog', max_tokens => 4)",
	extra_params => [ '-U', 'bob' ]);
my $elapsed = time - $start;
is($rc, 0, 'bob is served beside two idle cursors') or diag($err);
cmp_ok($elapsed, '<', 15, sprintf('well before his statement_timeout (%.2f s)', $elapsed));
note(sprintf('bob beside two idle cursors: %.3f s', $elapsed));

for my $q (@idle)
{
	$q->{h}->finish;
	is($q->{err}, '', 'the cursor\'s transaction ends cleanly');
}

$node->stop;
done_testing();
