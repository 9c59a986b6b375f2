# Remote inference nodes (llm.remote_servers): a coordinator and two nodes,
# SmolLM2 with one thread each.  A 64-row llm_generate through the LLM
# Batch node gives the answers one server gives alone, in the same order,
# with requests on both nodes; a node stopped in immediate mode mid-query
# leaves every answer right; a cancel on the coordinator frees the remote
# sequences; a node with another model file is refused (a WARNING, and the
# statement runs on the others); llm.local_inference = off with no node
# left is an error; llm_classify's scoring jobs and a background fill spread
# over the nodes too.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $dir = $ENV{LLM_REAL_MODEL_DIR};
plan skip_all => 'LLM_REAL_MODEL_DIR is not set (run through tools/pg-test.sh)' unless $dir;
my %smol = ('llm.model_dir' => $dir, 'llm.model' => 'SmolLM2-135M-Instruct.Q4_1.gguf', 'llm.threads' => 1);

my $coord = llm_node('coord', %smol);
# the nodes' steps take 20 ms more, so that a stop and a cancel land mid-query
my $n1 = llm_node('node1', %smol, 'llm.debug_step_delay' => 20);
my $n2 = llm_node('node2', %smol, 'llm.debug_step_delay' => 20);
my $other = llm_node('other');	# stories260K: another model
llm_wait_state($_) for ($coord, $n1, $n2, $other);

$coord->safe_psql('postgres', q{
CREATE TABLE docs (id int PRIMARY KEY, body text);
INSERT INTO docs SELECT i, 'Summarize in one sentence: ' || (ARRAY['Tom','Lily','Ben','Sue'])[1 + i % 4]
    || ' found ' || i || ' ' || (ARRAY['apples','shells','coins','books'])[1 + i % 4] || ' on the beach.'
  FROM generate_series(1, 64) i;
});
$coord->safe_psql('postgres', 'CREATE EXTENSION IF NOT EXISTS postgres_fdw');
for my $n ($n1, $n2, $other)
{
	my $name = $n->name;
	my $port = $n->port;
	my $host = $n->host;
	$coord->safe_psql('postgres', qq{
CREATE SERVER $name FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port', dbname 'postgres', fetch_size '100');
CREATE USER MAPPING FOR CURRENT_USER SERVER $name;
});
}

my $query = 'SELECT id, llm_generate(body, max_tokens => 12, seed => id) FROM docs';
like($coord->safe_psql('postgres', "EXPLAIN (COSTS OFF) $query"), qr/LLM Batch/, 'the query runs through the LLM Batch node');
my $alone = $coord->safe_psql('postgres', $query);
is(scalar(split /\n/, $alone), 64, '64 answers from one server alone');

# two nodes, no local inference
my $remote = "SET llm.remote_servers = 'node1, node2'; SET llm.local_inference = off; ";
my $spread = $coord->safe_psql('postgres', $remote . $query);
is($spread, $alone, 'two remote nodes give the same answers in the same order');
my $done1 = llm_stat($n1, 'completed_requests');
my $done2 = llm_stat($n2, 'completed_requests');
ok($done1 > 0 && $done2 > 0 && $done1 + $done2 == 64, "requests reach both nodes ($done1 + $done2)");
is($coord->safe_psql('postgres', q{SELECT string_agg(server || ' ' || answered_requests, ', ' ORDER BY server) FROM llm_remote_stats}),
	"node1 $done1, node2 $done2", 'llm_remote_stats counts each node\'s answers');
like($coord->safe_psql('postgres', $remote . "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $query"),
	qr/Local Requests: 0.*Node node1: requests=\d+ answers=\d+.*Node node2: requests=\d+/s,
	'EXPLAIN ANALYZE shows each node\'s requests');

# the scoring functions' jobs (labels scored as continuations, calibrated by content-free inputs) too
my $classify = q{SELECT id, llm_classify(body, ARRAY['happy', 'sad', 'busy']) FROM docs WHERE id <= 16};
my $classified = $coord->safe_psql('postgres', $classify);
is($coord->safe_psql('postgres', $remote . $classify), $classified, 'llm_classify over two nodes gives the same labels');

# the local worker is one more node
my $with_local = $coord->safe_psql('postgres', "SET llm.remote_servers = 'node1, node2'; " . $query);
is($with_local, $alone, 'the coordinator and two nodes give the same answers');

# a node stopped in immediate mode mid-query: its requests go to the other
my $before = llm_stat($n2, 'completed_requests');
my $q = llm_start_query($coord, "SET llm.remote_servers = 'node1, node2'", 'SET llm.local_inference = off', $query);
llm_poll($n1, 'SELECT running_requests > 0 FROM llm_stats');
$n1->stop('immediate');
llm_finish_query($q);
is($q->{rc}, 0, 'the query survives a node stopped mid-query') or diag($q->{err});
is($q->{out}, $alone, 'with every answer right, once');
like($q->{err}, qr/WARNING:  llm inference node "node1" failed/, 'the failure is a WARNING');
ok(llm_stat($n2, 'completed_requests') - $before >= 32, 'the other node answered the rest');

# the stopped node refuses connections: the statement runs on the other; it is used again once back
my ($rc, $out, $err) = $coord->psql('postgres', $remote . $query);
is($out, $alone, 'a node that is down is passed over');
like($err, qr/WARNING:  llm inference node "node1" is not used/, 'with a WARNING');
$n1->start;
llm_wait_state($n1);
$before = llm_stat($n1, 'completed_requests');
is($coord->safe_psql('postgres', $remote . $query), $alone, 'the node back in service');
ok(llm_stat($n1, 'completed_requests') > $before, 'is used again');

# cancel on the coordinator frees the remote sequences
$q = llm_start_query($coord, "SET llm.remote_servers = 'node2'", 'SET llm.local_inference = off',
	'SELECT id, llm_generate(body, max_tokens => 200, seed => id) FROM docs');
llm_poll($n2, 'SELECT running_requests > 0 FROM llm_stats');
$coord->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%max_tokens => 200%' AND pid <> pg_backend_pid()");
llm_finish_query($q);
like($q->{err}, qr/canceling statement due to user request/, 'the query is cancelled');
my $t = llm_poll($n2, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats');
ok($t < 5, sprintf('the remote sequences are freed (%.2f s)', $t));

# a node with another model file is refused
($rc, $out, $err) = $coord->psql('postgres', "SET llm.remote_servers = 'other, node2'; SET llm.local_inference = off; " . $query);
is($out, $alone, 'a node with another model serves nothing: the others answer');
like($err, qr/WARNING:  llm inference node "other" is not used\nDETAIL:  Its model's identity is [0-9a-f]{16}; this server's is [0-9a-f]{16}\./,
	'the node with another model is refused');
is(llm_stat($other, 'completed_requests'), 0, 'no request reached it');

# no node left and no local inference: an error
($rc, $out, $err) = $coord->psql('postgres', "SET llm.remote_servers = 'other'; SET llm.local_inference = off; " . $query);
like($err, qr/ERROR:  no llm inference node is available/, 'no node left is an error');

# a bad batch sent to the entry point directly is an error, not a crash
($rc, $out, $err) = $n2->psql('postgres', q{SELECT llm_remote_batch('\x00'::bytea)});
like($err, qr/ERROR:  invalid llm remote batch/, 'a malformed batch is refused');
($rc, $out, $err) = $n2->psql('postgres', q{SELECT llm_remote_batch('\x4c4c4d3100000001'::bytea)});
like($err, qr/ERROR:  .*insufficient data|invalid llm remote batch/, 'a truncated batch is refused');

# a background fill (llm_fill) spreads over the same nodes: its worker takes the database's settings
$coord->safe_psql('postgres', q{
ALTER TABLE docs ADD COLUMN summary text;
ALTER DATABASE postgres SET llm.remote_servers = 'node1, node2';
ALTER DATABASE postgres SET llm.local_inference = off;
});
my ($f1, $f2) = (llm_stat($n1, 'completed_requests'), llm_stat($n2, 'completed_requests'));
my $job = $coord->safe_psql('postgres', "SELECT llm_fill('docs', 'summary', 'body', max_tokens => 12, batch_rows => 32)");
is($coord->safe_psql('postgres', "SELECT llm_job_wait($job, '5 min')"), 'done', 'a fill over the remote nodes completes');
is($coord->safe_psql('postgres', q{SELECT string_agg(id || '|' || summary, E'\n' ORDER BY id) FROM docs}), $alone,
	'with the answers of one server alone');
ok(llm_stat($n1, 'completed_requests') > $f1 && llm_stat($n2, 'completed_requests') > $f2,
	'from both nodes');

$_->stop for ($coord, $n1, $n2, $other);
done_testing();
