# Thirty-two sessions at once, each with its own prompt, each get their own
# answer: the same text as when the prompt runs alone.  Also llm_generate
# in parallel query workers.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = llm_node('concurrency');
llm_wait_state($node);

my @prompts = (
	'Once upon a time', 'Lily and Ben', 'The cat sat on', 'Tom had a red',
	'One day, a little bird', 'The sun was', 'Sara wanted to', 'The dog ran',
	'Mom said', 'There was a big', 'Tim and Sue', 'The little boat',
	'In the park', 'A girl named Amy', 'The old tree', 'Ben found a',
	'The big dog', 'Lucy liked to', 'The rain', 'A boy named Max',
	'The red car', 'Sam saw a', 'The bird sang', 'Anna had a',
	'The moon was', 'Jack and Jill', 'The happy frog', 'Kate went to',
	'The toy box', 'A little fish', 'The green hat', 'Bob was sad');
my $n = scalar @prompts;

# Alone, one after the other.
my @alone = map {
	$node->safe_psql('postgres', "SELECT llm_generate('$_', 64)")
} @prompts;
is(scalar(keys %{ { map { $_ => 1 } @alone } }), $n, "$n different answers alone");

# Slow the steps so that every session is in flight at once.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.debug_step_delay = '50ms'; SELECT pg_reload_conf()");
my $completed = llm_stat($node, 'completed_requests');

my @q = map { llm_start_query($node, "SELECT llm_generate('$_', 64)") } @prompts;
llm_poll($node, "SELECT queued_requests + running_requests = $n FROM llm_stats");
pass("all $n requests in flight at once");
llm_finish_query($_) for @q;

for my $i (0 .. $n - 1)
{
	is($q[$i]{rc}, 0, "session $i succeeds");
	is($q[$i]{out}, $alone[$i], "session $i gets its own answer");
}
is(llm_stat($node, 'completed_requests'), $completed + $n, "$n requests completed");

# Parallel query workers submit too.
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET llm.debug_step_delay; SELECT pg_reload_conf()");
$node->safe_psql('postgres',
	'CREATE TABLE prompts (id int, prompt text); '
	  . 'INSERT INTO prompts SELECT i, p FROM unnest(ARRAY['
	  . join(', ', map { "'$_'" } @prompts[0 .. 7])
	  . ']) WITH ORDINALITY AS u(p, i)');
# 16 renamed force_parallel_mode to debug_parallel_query
my $force_parallel =
  $node->safe_psql('postgres', 'SHOW server_version_num') >= 160000
  ? 'debug_parallel_query'
  : 'force_parallel_mode';
my $parallel = $node->safe_psql('postgres',
	"SET $force_parallel = on; SET parallel_setup_cost = 0; "
	  . "EXPLAIN (COSTS OFF) SELECT id, llm_generate(prompt, 64) FROM prompts");
like($parallel, qr/Gather/, 'the plan runs in a parallel worker');
my $rows = $node->safe_psql('postgres',
	"SET $force_parallel = on; SET parallel_setup_cost = 0; "
	  . "SELECT string_agg(g, E'\\x01' ORDER BY id) FROM "
	  . "(SELECT id, llm_generate(prompt, 64) AS g FROM prompts) s");
is($rows, join("\x01", @alone[0 .. 7]), 'parallel workers get the same answers');

$node->stop;
done_testing();
