# The batch-invariance rule through SQL, on the real default model (Gemma 3
# 270M, Q4_K_M): a prompt's answer -- greedy, or sampled with a seed -- is the
# same text alone, from eight concurrent sessions, inside one
# llm_generate_batch call, after a reload that prefills every prompt in
# steps of 7 tokens, and with speculative decoding (llm.speculative = ngram,
# then draft with the model drafting for itself), alone and from eight
# sessions; a draft model of another vocabulary is refused.  tools/pg-test.sh passes the model's folder
# as LLM_REAL_MODEL_DIR.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $dir = $ENV{LLM_REAL_MODEL_DIR};
plan skip_all => 'LLM_REAL_MODEL_DIR is not set (run through tools/pg-test.sh)' unless $dir;

# speculation off until its part below, so that it is compared with plain decoding
my $node = llm_node('invariance', 'llm.model_dir' => $dir,
	'llm.model' => 'gemma-3-270m-q4_k_m.gguf', 'llm.threads' => 2, 'llm.speculative' => 'off');
llm_wait_state($node);

my @prompts = (
	'The capital of France is', 'My favourite recipe for soup is',
	'The best way to learn a language is', 'In the year 2050, cars will',
	'A good name for a cat is', 'The main reason people travel is',
	'To make a cup of tea, first', 'The ocean is deep because');
my $n = scalar @prompts;

# Prompt i's call: greedy for even i, sampled with seed i for odd i.
sub call
{
	my ($i) = @_;
	my $params = $i % 2 ? ", temperature => 0.8, top_p => 0.95, seed => $i" : '';
	return "SELECT llm_generate('$prompts[$i]', max_tokens => 24$params)";
}

my @alone = map { $node->safe_psql('postgres', call($_)) } 0 .. $n - 1;
ok(length($alone[$_]) > 0, "prompt $_ answered alone") for 0 .. $n - 1;

# Every prompt in its own session, all in flight at once.
sub concurrent
{
	my ($what) = @_;
	my @q = map { llm_start_query($node, call($_)) } 0 .. $n - 1;
	llm_finish_query($_) for @q;
	for my $i (0 .. $n - 1)
	{
		is($q[$i]{rc}, 0, "$what: session $i succeeds");
		is($q[$i]{out}, $alone[$i], "$what: session $i gets the text it gets alone");
	}
}

$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.debug_step_delay = '20ms'; SELECT pg_reload_conf()");
concurrent('8 sessions');
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET llm.debug_step_delay; SELECT pg_reload_conf()");

# The greedy prompts in one call.
my @greedy = grep { $_ % 2 == 0 } 0 .. $n - 1;
my $batch = $node->safe_psql('postgres',
	"SELECT string_agg(completion, E'\\x01' ORDER BY ord) FROM llm_generate_batch(ARRAY["
	  . join(', ', map { "'$prompts[$_]'" } @greedy) . "], max_tokens => 24)");
is($batch, join("\x01", map { $alone[$_] } @greedy), 'one llm_generate_batch call gives each prompt its text alone');

# A table's rows through the LLM Batch plan node, greedy and sampled with a
# seed column: every row gets the text its prompt gets alone, in order.
$node->safe_psql('postgres',
	"CREATE TABLE prompts (i int, prompt text); INSERT INTO prompts VALUES "
	  . join(', ', map { "($_, '$prompts[$_]')" } 0 .. $n - 1));
my $plan = $node->safe_psql('postgres',
	"EXPLAIN (COSTS OFF) SELECT llm_generate(prompt, max_tokens => 24, "
	  . "temperature => CASE WHEN i % 2 = 1 THEN 0.8 ELSE 0 END, top_p => CASE WHEN i % 2 = 1 THEN 0.95 ELSE 1 END, "
	  . "seed => i) FROM prompts");
like($plan, qr/LLM Batch/, 'a query over the table runs in an LLM Batch node');
my $rows = $node->safe_psql('postgres',
	"SELECT string_agg(g, E'\\x01') FROM (SELECT llm_generate(prompt, max_tokens => 24, "
	  . "temperature => CASE WHEN i % 2 = 1 THEN 0.8 ELSE 0 END, top_p => CASE WHEN i % 2 = 1 THEN 0.95 ELSE 1 END, "
	  . "seed => i) AS g FROM prompts) s");
is($rows, join("\x01", @alone), 'the LLM Batch node gives each row the text its prompt gets alone, in order');

# Reloaded with steps of 7 tokens: prompts are prefilled in chunks beside the others' decoding.
my $loaded = $node->safe_psql('postgres', 'SELECT loaded_at FROM llm_worker_status()');
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.max_batch_tokens = 7; SELECT pg_reload_conf()");
llm_poll($node, "SELECT loaded_at > '$loaded' AND state = 'ready' FROM llm_worker_status()");
concurrent('steps of 7 tokens, after a reload');

# Speculative decoding: the same texts alone and together, and it drafted
$loaded = $node->safe_psql('postgres', 'SELECT loaded_at FROM llm_worker_status()');
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET llm.max_batch_tokens; ALTER SYSTEM SET llm.speculative = 'ngram'; SELECT pg_reload_conf()");
llm_poll($node, "SELECT loaded_at > '$loaded' AND state = 'ready' FROM llm_worker_status()");
my $drafted = $node->safe_psql('postgres', 'SELECT draft_tokens FROM llm_stats');
is($node->safe_psql('postgres', call($_)), $alone[$_], "speculative: prompt $_ alone gets its text") for 0 .. $n - 1;
cmp_ok($node->safe_psql('postgres', 'SELECT draft_tokens FROM llm_stats'), '>', $drafted,
	'speculative: tokens were drafted');
concurrent('speculative, 8 sessions');

# A draft model of another vocabulary is refused, and the worker keeps serving with prompt lookup
$loaded = $node->safe_psql('postgres', 'SELECT loaded_at FROM llm_worker_status()');
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.speculative = 'draft'; ALTER SYSTEM SET llm.draft_model = 'SmolLM2-135M-Instruct.Q4_1.gguf'; "
	  . "SELECT pg_reload_conf()");
llm_poll($node, "SELECT error IS NOT NULL FROM llm_worker_status()");
like($node->safe_psql('postgres', 'SELECT error FROM llm_worker_status()'),
	qr/draft model.*vocabulary/, 'a draft model with another vocabulary is refused, saying why');
is($node->safe_psql('postgres', call(0)), $alone[0], 'and the worker keeps serving');

# The model as its own draft (the same vocabulary): the same texts, and drafts were made
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.draft_model = 'gemma-3-270m-q4_k_m.gguf'; SELECT pg_reload_conf()");
llm_poll($node, "SELECT loaded_at > '$loaded' AND state = 'ready' AND error IS NULL FROM llm_worker_status()");
$drafted = $node->safe_psql('postgres', 'SELECT draft_tokens FROM llm_stats');
concurrent('draft model, 8 sessions');
cmp_ok($node->safe_psql('postgres', 'SELECT draft_tokens FROM llm_stats'), '>', $drafted,
	'draft model: tokens were drafted');
my $explain = $node->safe_psql('postgres',
	"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT llm_generate(prompt, max_tokens => 24) FROM prompts");
like($explain, qr/Drafted Tokens: [1-9]\d*\n\s*Accepted Draft Tokens: \d+/,
	'EXPLAIN ANALYZE shows the drafted and accepted tokens of the LLM Batch node');

$node->stop;
done_testing();
