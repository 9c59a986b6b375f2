# KV eviction and the INT8 KV cache through SQL: with llm.kv_budget a
# sequence keeps a bounded cache and long generations still complete, many
# at once; a budget at least the generation's length gives exactly the text
# of no budget; llm.kv_type = int8 serves; a budget too small for the
# attention sinks and the window is a clear engine error; a fraction is
# read as a share of the context.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = llm_node('kv_budget', 'llm.kv_block_size' => '8');
llm_wait_state($node);

my $prompt = "SELECT llm_generate('Once upon a time', 200)";
my $plain = $node->safe_psql('postgres', $prompt);
isnt($plain, '', 'greedy text without a budget');

# Change settings and wait for the worker to load the model with them.
sub reload_with
{
	my ($settings) = @_;
	my $loaded = "coalesce(loaded_at::text, 'none')";
	my $before = $node->safe_psql('postgres', "SELECT $loaded FROM llm_worker_status()");
	$node->safe_psql('postgres', "$settings; SELECT pg_reload_conf()");
	llm_poll($node, "SELECT $loaded <> '$before' FROM llm_worker_status()");
}

reload_with("ALTER SYSTEM SET llm.kv_budget = 1000");
is($node->safe_psql('postgres', $prompt), $plain,
	'a budget above the length generates exactly the text of no budget');

reload_with("ALTER SYSTEM SET llm.kv_budget = 24; ALTER SYSTEM SET llm.kv_evict = 'h2o'");
my $rows = $node->safe_psql('postgres',
	"SELECT count(*), count(*) FILTER (WHERE length(t) > 100) FROM "
	  . "(SELECT llm_generate('Once upon a time, ' || i, 200) AS t FROM generate_series(1, 8) i) s");
is($rows, '8|8', 'eight long generations complete under a budget of 24 keys');
is($node->safe_psql('postgres', 'SELECT evicted_keys > 0 FROM llm_stats'), 't',
	'llm_stats counts the evicted keys');
isnt($node->safe_psql('postgres', $prompt), $plain,
	'a budget of 24 keys changes a 200-token generation');

reload_with("ALTER SYSTEM SET llm.kv_type = 'int8'; ALTER SYSTEM SET llm.kv_evict = 'streaming'");
isnt($node->safe_psql('postgres', $prompt), '', 'int8 KV with streaming eviction generates');

reload_with("ALTER SYSTEM SET llm.kv_budget = 0.05");
isnt($node->safe_psql('postgres', $prompt), '', 'a budget of 5% of the context generates');

# a budget too small for the sinks and the window: refused, and the model loaded before keeps serving
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.kv_budget = 6; ALTER SYSTEM SET llm.kv_evict = 'h2o'; SELECT pg_reload_conf()");
llm_poll($node, "SELECT error LIKE '%KV budget of 6 keys%' FROM llm_worker_status()");
like($node->safe_psql('postgres', 'SELECT state || error FROM llm_worker_status()'),
	qr/^ready.*KV budget of 6 keys cannot hold 4 attention sinks.*Still serving/,
	'a budget too small for the sinks and the window is refused with the reason');
isnt($node->safe_psql('postgres', $prompt), '', 'the model loaded before still generates');

reload_with("ALTER SYSTEM SET llm.kv_sink_tokens = 2");
is($node->safe_psql('postgres', "SELECT state || coalesce(error, '') FROM llm_worker_status()"), 'ready',
	'fewer sinks make the budget of 6 valid');
isnt($node->safe_psql('postgres', $prompt), '', 'and it generates');

$node->stop;
done_testing();
