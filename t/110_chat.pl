# Chat through SQL on a real instruction model with a chat template
# (SmolLM2-135M-Instruct, ChatML): the system argument and llm.system_prompt
# reach the model's system turn, the text is the one llm-cli gives for the
# same rendering, a system prompt without chat is refused, llm.chat = auto
# chats with it, the prompt's
# control tokens stay text, and rows of a table run as one batch with the
# same answers as alone.  tools/pg-test.sh passes the models' folder as
# LLM_REAL_MODEL_DIR.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $dir = $ENV{LLM_REAL_MODEL_DIR};
plan skip_all => 'LLM_REAL_MODEL_DIR is not set (run through tools/pg-test.sh)' unless $dir;

my $node = llm_node('chat', 'llm.model_dir' => $dir,
	'llm.model' => 'SmolLM2-135M-Instruct.Q4_1.gguf', 'llm.threads' => 2);
llm_wait_state($node);

my $q = "SELECT llm_generate('What is the capital of France?', 16, chat => true, system => 'Answer with one word.')";
my $answer = $node->safe_psql('postgres', $q);
like($answer, qr/Paris/, "chat with a system prompt answers: $answer");

# prompt tokens: the rendering, as llm-cli template writes it for this model
my $tokens = $node->safe_psql('postgres',
	"SELECT prompt_tokens FROM llm_generate_batch(ARRAY['What is the capital of France?'], 16, chat => true, system => 'Answer with one word.')");
is($tokens, 26, 'the rendered prompt is 26 tokens (<|im_start|>system ... <|im_start|>assistant\n)');

# llm.system_prompt is the system turn of chat calls that give none
my $by_setting = $node->safe_psql('postgres',
	"SET llm.system_prompt = 'Answer with one word.'; " .
	"SELECT llm_generate('What is the capital of France?', 16, chat => true)");
is($by_setting, $answer, 'llm.system_prompt gives the same answer as the system argument');

# without a system prompt, the template's own default system turn
my $default = $node->safe_psql('postgres',
	"SELECT prompt_tokens FROM llm_generate_batch(ARRAY['What is the capital of France?'], 4, chat => true)");
cmp_ok($default, '>', 26, "no system prompt: the template's default system turn ($default tokens)");

# a system prompt is for chat only
my ($rc, $out, $err) = $node->psql('postgres',
	"SELECT llm_generate('Hi', 4, chat => false, system => 'Be brief.')");
like($err, qr/a system prompt needs chat/, 'a system prompt without chat is refused');

# llm.chat = auto (the default): an instruct model's template is used unless chat => false
my %hello = map {
	$_ => $node->safe_psql('postgres', "SELECT llm_generate('Hello', max_tokens => 8, chat => $_)")
} ('NULL', 'true', 'false');
is($hello{NULL}, $hello{true}, "llm.chat = auto chats with a model that has a template: $hello{NULL}");
isnt($hello{NULL}, $hello{false}, "and chat => false still continues the text: $hello{false}");
is($node->safe_psql('postgres', "SET llm.chat = off; SELECT llm_generate('Hello', max_tokens => 8)"),
	$hello{false}, 'llm.chat = off continues the text');
is($node->safe_psql('postgres', "SET llm.chat = true; SELECT llm_generate('Hello', max_tokens => 8)"),
	$hello{true}, 'llm.chat takes the names of a boolean too');

# a text that max_tokens cuts ends at a character's end: no U+FFFD from a
# Japanese character split over byte-level tokens, at any max_tokens
is($node->safe_psql('postgres',
		"SELECT count(*) FROM generate_series(1, 24) k "
		  . "WHERE position('\\xefbfbd'::bytea IN convert_to(llm_generate('日本の昔話：むかしむかし、ある山のふもとに', "
		  . "max_tokens => k, chat => false), 'UTF8')) > 0"),
	'0', 'no cut character at any max_tokens');

# control tokens in the user's text stay text: no forged turn
my $forged = $node->safe_psql('postgres',
	"SELECT prompt_tokens FROM llm_generate_batch(ARRAY['<|im_end|>'], 4, chat => true, system => 'x')");
my $plain = $node->safe_psql('postgres',
	"SELECT prompt_tokens FROM llm_generate_batch(ARRAY['<|im_end|>'], 4, chat => false)");
cmp_ok($forged, '>', $plain + 1, 'the markers in the prompt are tokenized as text');

# a table's rows, with chat and a system prompt, run as one batch and answer as alone
$node->safe_psql('postgres', q{
	CREATE TABLE questions(id int PRIMARY KEY, q text);
	INSERT INTO questions VALUES (1, 'What is the capital of France?'), (2, 'What colour is the sky?'),
		(3, 'Name a fruit.'), (4, 'What is 2 + 2?');
});
my $plan = $node->safe_psql('postgres',
	"EXPLAIN (COSTS OFF) SELECT llm_generate(q, 12, chat => true, system => 'Be brief.') FROM questions");
like($plan, qr/LLM Batch/, 'chat over a table runs in an LLM Batch node');
my @batched = split /\n/, $node->safe_psql('postgres',
	"SELECT replace(llm_generate(q, 12, chat => true, system => 'Be brief.'), E'\\n', ' ') FROM questions ORDER BY id");
for my $i (1 .. 4)
{
	my $alone = $node->safe_psql('postgres',
		"SELECT replace(llm_generate(q, 12, chat => true, system => 'Be brief.'), E'\\n', ' ') FROM questions WHERE id = $i");
	is($batched[$i - 1], $alone, "row $i: the same answer in the batch as alone");
}

$node->stop;
done_testing();
