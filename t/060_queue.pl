# A full queue: with every request slot taken, new requests fail at once
# with ERRCODE_INSUFFICIENT_RESOURCES; a batch larger than the queue runs
# through it as a sliding window; prompts of any size travel through the
# DSA area.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = llm_node('queue', 'llm.max_queued_requests' => 2);
llm_wait_state($node);
is($node->safe_psql('postgres', 'SHOW llm.max_queued_requests'), '2', 'two slots');

my @prompts = map { "Story number $_" } 1 .. 7;
my @alone = map { $node->safe_psql('postgres', "SELECT llm_generate('$_', 8)") } @prompts;

# Fill both slots with slow requests.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.debug_step_delay = '100ms'; SELECT pg_reload_conf()");
my @q = map { llm_start_query($node, "SELECT llm_generate('Once upon a time', 64)") } 1 .. 2;
llm_poll($node, 'SELECT running_requests = 2 FROM llm_stats');

for my $sql ("SELECT llm_generate('Lily and Ben', 4)",
	"SELECT * FROM llm_generate_batch(ARRAY['a', 'b'], 4)")
{
	my $t0 = time;
	my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	my $elapsed = time - $t0;
	like($err, qr/ERROR:  53000: too many llm requests are queued\nDETAIL:  All 2 request slots are in use\./,
		"queue full: $sql");
	cmp_ok($elapsed, '<', 1.0, "fails at once ($elapsed s)");
}

$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
	  . "WHERE query LIKE 'SELECT llm_generate%' AND pid <> pg_backend_pid()");
llm_finish_query($_) for @q;
llm_poll($node, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats');

# Seven prompts through two slots, in order, as when alone.
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET llm.debug_step_delay; SELECT pg_reload_conf()");
my $batch = $node->safe_psql('postgres',
	"SELECT string_agg(completion, E'\\x01' ORDER BY ord) FROM llm_generate_batch(ARRAY["
	  . join(', ', map { "'$_'" } @prompts) . "], 8)");
is($batch, join("\x01", @alone), 'a batch larger than the queue is served in order');

# Large prompts: 1 MB crosses the DSA area's first segment (llm.max_prompt_bytes raised to let it in).
my ($rc, $out, $err) = $node->psql('postgres',
	"SET llm.max_prompt_bytes = '4MB'; SELECT llm_generate(repeat('Once upon a time. ', 60000), 4)");
like($err, qr/ERROR:  prompt is too long\nDETAIL:  The prompt has \d+ tokens; the model's context length is \d+\./,
	'a 1 MB prompt reaches the worker and is measured');
is($node->safe_psql('postgres',
	"SELECT length(llm_generate(repeat('Once upon a time. ', 100), 4)) > 0"),
	't', 'a long prompt that fits the context is served');

$node->stop;
done_testing();
