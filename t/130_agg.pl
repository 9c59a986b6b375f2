# llm_agg over 1,000 rows (stories260K, a 2048-token context: 250 rows a
# group need several chunks, then a level to combine them): each group gets an answer,
# the same in two runs and from two concurrent sessions, every level's
# chunks run together, and a cancel in the middle frees the worker.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = llm_node('agg', 'llm.threads' => 2);
llm_wait_state($node);

$node->safe_psql('postgres', q{
	CREATE TABLE reviews AS
	SELECT i AS id, i % 4 AS product,
	       'Review ' || i || ': the ' || (ARRAY['toy', 'ball', 'kite', 'book'])[i % 4 + 1] || ' was '
	       || (ARRAY['fun', 'broken', 'too small', 'great'])[i % 7 % 4 + 1] || ' and Lily liked it.' AS body
	FROM generate_series(1, 1000) i;
});
my $q = "SELECT product, replace(llm_agg(body, 'Summarize the complaints.' ORDER BY id), E'\\n', ' ') FROM reviews GROUP BY product ORDER BY product";

my $before = llm_stat($node, 'completed_requests');
my $first = $node->safe_psql('postgres', $q);
my $requests = llm_stat($node, 'completed_requests') - $before;
my @rows = split /\n/, $first;
is(scalar @rows, 4, 'one answer per product');
like($_, qr/^\d\|.+/, "product answered: " . substr($_, 0, 40)) for @rows;
cmp_ok($requests, '>=', 4 * 3, "map-reduce over chunks: $requests requests for 4 groups of 250 rows");

is($node->safe_psql('postgres', $q), $first, 'the same answers in a second run');

my @s = map { llm_start_query($node, $q) } 1 .. 2;
llm_finish_query($_) for @s;
is($s[$_]{out}, $first, "session $_ of two at once gets the same answers") for 0 .. 1;

# the chunks of a level are queued together: the worker runs many at once
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.debug_step_delay = '20ms'; SELECT pg_reload_conf()");
my $bg = llm_start_query($node, "SELECT llm_agg(body, 'Summarize.' ORDER BY id) FROM reviews");
# (the engine's running sequences, as the worker reports them: the requests
# that only count a text's tokens finish without running)
ok(llm_poll($node, q{SELECT query ~ '([0-9]{2,}|9) running' FROM pg_stat_activity WHERE backend_type = 'llm worker'}) < 30,
	'a level runs its chunks as one batch');
$node->safe_psql('postgres', "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT llm_agg%'");
llm_finish_query($bg);
like($bg->{err}, qr/canceling statement due to user request/, 'a cancel ends the aggregate');
ok(llm_poll($node, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats') < 30,
	'its requests leave the worker');
$node->safe_psql('postgres', "ALTER SYSTEM RESET llm.debug_step_delay; SELECT pg_reload_conf()");
is($node->safe_psql('postgres', $q), $first, 'after the cancel, the same answers');

$node->stop;
done_testing();
