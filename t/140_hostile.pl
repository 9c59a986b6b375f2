# Defects a hostile probe found (issue: fair and safe under hostile load):
#  - a FIFO named as llm.model must not hang the worker or block shutdown;
#  - a waiting session gets SQLSTATE 57P01 (admin shutdown) when the worker
#    is terminated, not XX000;
#  - llm.model_dir = '/' accepts a model by its absolute path;
#  - a query whose client was killed stops using the model within seconds;
#  - a reload to a broken model keeps the working one serving, and says so.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = llm_node('hostile', 'llm.threads' => 1);
llm_wait_state($node);
my $dir = $ENV{LLM_MODEL_DIR};
my $prompt = 'Once upon a time';
my $expected = $node->safe_psql('postgres', "SELECT llm_generate('$prompt', 16)");

# 57P01 for a session waiting when the worker is terminated
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.debug_step_delay = '100ms'; SELECT pg_reload_conf()");
my $q = llm_start_query($node, '\set VERBOSITY verbose', "SELECT llm_generate('$prompt', 64)");
llm_poll($node, 'SELECT running_requests = 1 FROM llm_stats');
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(pid) FROM llm_worker_status()');
llm_finish_query($q);
like($q->{err}, qr/ERROR:  57P01: llm background worker exited/, 'a terminated worker fails its requests with 57P01');
$node->safe_psql('postgres', "ALTER SYSTEM RESET llm.debug_step_delay; SELECT pg_reload_conf()");
$node->poll_query_until('postgres', "SELECT state = 'ready' FROM llm_worker_status()")
  or die 'the worker did not come back';

# an abandoned query: kill -9 the client, and its backend cancels its requests by itself
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.debug_step_delay = '20ms'; SELECT pg_reload_conf()");
my $abandoned = llm_start_query($node,
	"SELECT count(*) FROM llm_generate_batch(array_fill('$prompt'::text, ARRAY[64]), max_tokens => 4000)");
llm_poll($node, 'SELECT running_requests > 0 FROM llm_stats');
$abandoned->{h}->signal('KILL');
$abandoned->{h}->finish;
my $freed = llm_poll($node, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats');
cmp_ok($freed, '<', 10, "the killed client's requests leave the worker in $freed s");
$node->safe_psql('postgres', "ALTER SYSTEM RESET llm.debug_step_delay; SELECT pg_reload_conf()");

# a reload to a missing model: the working one keeps serving, and the status says which
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.model = 'missing.gguf'; SELECT pg_reload_conf()");
ok($node->poll_query_until('postgres',
	"SELECT state = 'ready' AND error LIKE '%missing.gguf%Still serving%stories260K.gguf%' FROM llm_worker_status()"),
	'a broken model in a reload is reported, and the old one still serves');
is($node->safe_psql('postgres', "SELECT llm_generate('$prompt', 16)"), $expected,
	'the old model answers as before');
$node->safe_psql('postgres', "ALTER SYSTEM RESET llm.model; SELECT pg_reload_conf()");
ok($node->poll_query_until('postgres', "SELECT state = 'ready' AND error IS NULL FROM llm_worker_status()"),
	'the settings naming the serving model again clear the failed reload\'s error');
like($node->safe_psql('postgres', 'SELECT model FROM llm_worker_status()'), qr/\(stories260K\.gguf\)$/,
	'the model column names the file too');

# a FIFO as the model: refused at once, not opened for reading until a writer comes
my $fifo = "$dir/fifo.gguf";
unlink $fifo;
system('mkfifo', $fifo) == 0 or die "mkfifo $fifo: $!";
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.model = 'fifo.gguf'; SELECT pg_reload_conf()");
ok($node->poll_query_until('postgres', "SELECT error LIKE '%not a regular file%' FROM llm_worker_status()"),
	'a FIFO as llm.model is refused as not a regular file');
is($node->safe_psql('postgres', "SELECT llm_generate('$prompt', 16)"), $expected,
	'the model loaded before keeps serving, and nothing hangs');
my $t0 = time;
$node->stop('fast');
cmp_ok(time - $t0, '<', 30, 'pg_ctl stop -m fast works with the FIFO configured');
unlink $fifo;
$node->start;

# llm.model_dir = '/': a model named by its absolute path loads
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.model_dir = '/'; ALTER SYSTEM SET llm.model = '$dir/stories260K.gguf'");
$node->restart;
llm_wait_state($node);
is($node->safe_psql('postgres', "SELECT llm_generate('$prompt', 16)"), $expected,
	"llm.model_dir = '/' serves a model by its absolute path");

$node->stop;
done_testing();
