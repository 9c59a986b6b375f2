# Constrained generation through the worker on SmolLM2-135M-Instruct (a
# 49k-token BPE vocabulary, in its chat format): llm_extract gives the same
# jsonb alone, from four concurrent sessions and over a table in one batch;
# every output validates (the keys and types of the schema); a cancelled
# constrained batch frees the worker and its KV cache; an output cut by
# max_tokens is an error, or NULL with on_error => 'null'; an enum of 5,000
# places works through llm_extract.  tools/pg-test.sh
# passes the models' folder as LLM_REAL_MODEL_DIR.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $dir = $ENV{LLM_REAL_MODEL_DIR};
plan skip_all => 'LLM_REAL_MODEL_DIR is not set (run through tools/pg-test.sh)' unless $dir;

my $node = llm_node('constrained', 'llm.model_dir' => $dir,
	'llm.model' => 'SmolLM2-135M-Instruct.Q4_1.gguf', 'llm.threads' => 2, 'llm.chat' => 'on');
llm_wait_state($node);

my $schema = q{'{"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer"},"city":{"type":"string","maxLength":20}},"required":["name","age","city"]}'};
my @texts = (
	'Alice is 31 years old and lives in Paris.',
	'Bob, 45, moved to Berlin last year.',
	'Carol lives in Rome; she turned 27 in May.',
	'Dan is a 60 year old farmer from Ohio.');
sub extract_sql
{
	my ($t) = @_;
	return "SELECT llm_extract('$t', $schema, max_tokens => 64)";
}
my $check = "SELECT (j ?& ARRAY['name','age','city']) AND jsonb_typeof(j->'age') = 'number' "
  . "AND jsonb_typeof(j->'name') = 'string' AND length(j->>'city') <= 20 FROM (SELECT %s AS j) s";

my @alone = map { $node->safe_psql('postgres', extract_sql($_)) } @texts;
for my $i (0 .. $#texts)
{
	my $valid = $node->safe_psql('postgres', sprintf($check, "'$alone[$i]'::jsonb"));
	is($valid, 't', "text $i: $alone[$i] has the schema's keys and types");
}

# four sessions at once: the same jsonb
my @q = map { llm_start_query($node, extract_sql($texts[$_])) } 0 .. $#texts;
llm_finish_query($_) for @q;
for my $i (0 .. $#texts)
{
	is($q[$i]{rc}, 0, "session $i succeeds");
	is($q[$i]{out}, $alone[$i], "session $i gets what it gets alone");
}

# a table in one query (an LLM Batch node): the rows of row-by-row calls
$node->safe_psql('postgres', 'CREATE TABLE people(id int PRIMARY KEY, body text)');
$node->safe_psql('postgres', "INSERT INTO people VALUES ($_, '" . $texts[$_ % 4] . "')") for 1 .. 12;
like($node->safe_psql('postgres', "EXPLAIN SELECT llm_extract(body, $schema) FROM people"),
	qr/LLM Batch/, 'llm_extract over a table runs in an LLM Batch node');
my $table = $node->safe_psql('postgres',
	"SELECT string_agg(llm_extract(body, $schema, max_tokens => 64)::text, '|' ORDER BY id) FROM people");
is($table, join('|', map { $alone[$_ % 4] } 1 .. 12), 'a table extracted in one query gives the row-by-row answers');

# choices: exactly one, the same from a batch
my $choice = $node->safe_psql('postgres',
	"SELECT string_agg(llm_generate('Is this review positive? ' || body, max_tokens => 4, choices => ARRAY['yes','no']), ',' ORDER BY id) FROM people");
like($choice, qr/^(yes|no)(,(yes|no)){11}$/, "choices over a table: $choice");

# cancel: a statement_timeout ends a long constrained batch; the KV cache is given back; the next answer is the same
my ($rc, $out, $err) = $node->psql('postgres',
	"SET statement_timeout = '500ms'; SELECT count(llm_generate(body || ' ' || g, max_tokens => 256, json_schema => '{\"type\":\"array\",\"items\":{\"type\":\"string\"}}')) FROM people, generate_series(1, 20) g");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels a constrained batch');
$node->poll_query_until('postgres', 'SELECT kv_blocks_used = 0 FROM llm_stats')
  or die 'the KV cache was not given back';
pass('the cancelled batch gave its KV blocks back');
is($node->safe_psql('postgres', extract_sql($texts[0])), $alone[0], 'after the cancel, the same answer as before');

# too few tokens: an error naming the limit, or NULL with on_error => 'null'
($rc, $out, $err) = $node->psql('postgres', "SELECT llm_extract('$texts[0]', $schema, max_tokens => 5)");
like($err, qr/reached max_tokens before it was complete/, 'a cut output is an error');
is($node->safe_psql('postgres', "SELECT llm_extract('$texts[0]', $schema, max_tokens => 5, on_error => 'null') IS NULL"),
	't', "with on_error => 'null' it is NULL");

# an enum of 5,000 places in the schema: llm_extract's prompt shows it as a
# note of its size (llm_schema_outline), where written out it made the
# prompt longer than the context, and the grammar writes the place the text
# names (Berlin, after 2,500 towns, or Town 4321)
my $places = q{jsonb_build_object('type', 'object', 'required', '["name", "city"]'::jsonb, 'properties', }
  . q{jsonb_build_object('name', '{"type": "string", "maxLength": 20}'::jsonb, 'city', jsonb_build_object('enum', }
  . q{(SELECT jsonb_agg(c ORDER BY k) FROM (SELECT 'Town ' || i, i FROM generate_series(1, 4999) i }
  . q{UNION ALL SELECT 'Berlin', 2500.5) s(c, k)))))};
is($node->safe_psql('postgres',
		"SELECT string_agg(llm_extract(t, $places, max_tokens => 64)::text, '|' ORDER BY t) "
		  . "FROM (VALUES ('Bob, 45, moved to Berlin last year.'), ('Ann lives in Town 4321.')) v(t)"),
	'{"city": "Town 4321", "name": "Ann"}|{"city": "Berlin", "name": "Bob"}',
	'llm_extract with an enum of 5,000 places writes the place each text names');
like($node->safe_psql('postgres', "SELECT llm_schema_outline($places)::text"), qr/"city": \{"enum": \["\.\.\. 5000 values"\]\}/,
	'the prompt shows the enum as a note of its size');

$node->stop;
done_testing();
