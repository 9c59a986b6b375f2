# A huge prompt does not stall the worker (issue 18, item 2): the worker
# tokenizes on a thread of its own, so while an 8 MB prompt is being
# tokenized (seconds, on stories260K), another session's 16-token call is
# served, and the huge one then gets its answer (here "prompt is too long").
# Before the tokenizer thread the small call waited for the whole
# tokenization.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use Time::HiRes qw(time usleep);

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = llm_node('long_prompt', 'llm.threads' => 1);
llm_wait_state($node);

my $small = "SELECT llm_generate('Lily had a dog', max_tokens => 16)";
my $alone = $node->safe_psql('postgres', $small);

# 8 MB of prompt (llm.max_prompt_bytes raised for it): its tokenization takes seconds
my $big = llm_start_query($node, "SET llm.max_prompt_bytes = '16MB'",
	"SELECT llm_generate(repeat('Lily had a big dog and the sun was warm. ', 200000), max_tokens => 1)");
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%repeat(%' AND wait_event IS NOT NULL AND pid <> pg_backend_pid()")
  or die 'the huge prompt was not queued';
usleep(300_000);				# the worker has claimed it by now

my $t0 = time;
my $answer = $node->safe_psql('postgres', $small);
my $elapsed = time - $t0;
is($answer, $alone, 'the small call gets its answer while the huge prompt is tokenized');
my $still = $node->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%repeat(%' AND state = 'active' AND pid <> pg_backend_pid()");
is($still, '1', "the huge prompt was still being tokenized when the small call finished (${elapsed}s)");

llm_finish_query($big);
like($big->{err}, qr/prompt is too long/, 'the huge prompt then gets its own answer');
is($node->safe_psql('postgres', $small), $alone, 'and the worker serves as before');

$node->stop;
done_testing();
