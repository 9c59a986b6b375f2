# A full KV pool is taken back from the role holding the most of it: while
# alice's 64 long generations keep a 2 MB pool full (sequences preempted
# and recomputed), bob's short request is not the one preempted, and is
# served within a few engine steps of what it takes alone, with the answer
# it gets alone.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = llm_node('kv_share', 'llm.threads' => 1, 'llm.kv_cache_mb' => 2, 'llm.max_sequences' => 64,
	'llm.debug_step_delay' => '5ms');
llm_wait_state($node);
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN');


# bob's request as he sees it: (answer, engine steps it took)
sub bob
{
	my $steps = llm_stat($node, 'steps');
	my $answer = $node->safe_psql('postgres', "SELECT llm_generate('Lily had a dog', max_tokens => 4)",
		extra_params => [ '-U', 'bob' ]);
	return ($answer, llm_stat($node, 'steps') - $steps);
}

my ($alone, $alone_steps) = bob();

my $flood = llm_start_query_as($node, 'alice',
	"SELECT count(*) FROM llm_generate_batch(ARRAY(SELECT 'Once upon a time ' || i FROM generate_series(1, 64) i), "
	  . "max_tokens => 800)");
# the pool is full when alice's sequences start to be preempted
llm_poll($node, 'SELECT preemptions > 10 FROM llm_stats');
my ($busy, $busy_steps) = bob();
is($busy, $alone, 'bob gets his answer beside a full pool');
cmp_ok($busy_steps, '<=', $alone_steps + 10,
	"within a few engine steps of his own ($busy_steps against $alone_steps alone)");
note("bob beside a full KV pool: $busy_steps engine steps, $alone_steps alone");

$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%max_tokens => 800%' AND pid <> pg_backend_pid()");
$flood->{h}->finish;
$node->stop;
done_testing();
