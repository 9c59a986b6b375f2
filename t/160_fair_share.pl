# Fair shares among roles: while one role floods the worker with 10,000
# requests, another role's request gets a slot without 53000 and starts
# within a few engine steps, and so beside another role's long prompts; two flooding roles share the engine by their
# llm.role_weight; a role's own limit (llm.max_requests_per_role) fails
# its lone requests beyond it and runs its batches through it; and
# llm_role_stats counts each role.  Beside another role's long prompts
# again on SmolLM2, within 1 s, when LLM_REAL_MODEL_DIR has it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = llm_node('fair_share', 'llm.threads' => 2, 'llm.debug_step_delay' => '10ms');
llm_wait_state($node);
$node->safe_psql('postgres',
	'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; CREATE ROLE carol LOGIN; '
	  . 'CREATE ROLE dave LOGIN');

# psql as a role in the background, errors with their SQLSTATE.
sub start_as
{
	my ($user, $sql) = @_;
	return llm_start_query_as($node, $user, '\set VERBOSITY verbose', $sql);
}

# Run sql as a role and wait; the finished query, with its engine steps.
sub run_as
{
	my ($user, $sql) = @_;
	my $steps = llm_stat($node, 'steps');
	my $q = llm_finish_query(start_as($user, $sql));
	$q->{steps} = llm_stat($node, 'steps') - $steps;
	$q->{elapsed} = $q->{end} - $q->{start};
	return $q;
}

# One column of a role's row in llm_role_stats.
sub role_stat
{
	my ($role, $column) = @_;
	return $node->safe_psql('postgres',
		"SELECT $column FROM llm_role_stats WHERE role = '$role'");
}

my $flood = "SELECT count(*) FROM llm_generate_batch(array_fill('Once upon a time'::text, ARRAY[10000]), max_tokens => 64)";
my $probe = "SELECT llm_generate('Lily had a dog', max_tokens => 16)";

# bob alone, for comparison
my $idle = run_as('bob', $probe);
is($idle->{rc}, 0, 'bob alone is served');
note(sprintf('bob alone: %.3f s, %d engine steps', $idle->{elapsed}, $idle->{steps}));

# Cancel the floods and wait until the worker is idle.
sub stop_floods
{
	$node->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%array_fill%' AND pid <> pg_backend_pid()");
	llm_finish_query($_) for @_;
	llm_poll($node, 'SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats');
}

# alice floods; bob, two seconds later, is served at once
my $fa = start_as('alice', $flood);
llm_poll($node, 'SELECT queued_requests > 0 AND running_requests = 64 FROM llm_stats');
sleep 2;
my $busy = run_as('bob', $probe);
unless (is($busy->{rc}, 0, 'bob is served while alice floods'))
{
	diag($busy->{err});
	stop_floods($fa);
	done_testing();
	exit;
}
unlike($busy->{err}, qr/53000/, 'without 53000');
is($busy->{out}, $idle->{out}, 'with the answer he gets alone');
cmp_ok($busy->{steps}, '<=', $idle->{steps} + 10,
	"within a few engine steps of his own ($busy->{steps} against $idle->{steps} alone)");
note(sprintf('bob during the flood: %.3f s, %d engine steps', $busy->{elapsed}, $busy->{steps}));

# alice holds her limit of the 1024 slots, not all of them: her batch
# refills its slots as answers come back, so the count is polled up to the
# limit, then sampled to see it never goes past it
ok($node->poll_query_until('postgres',
		"SELECT queued_requests + running_requests = 768 FROM llm_role_stats WHERE role = 'alice'"),
	'alice holds 768 slots: llm.max_queued_requests less a quarter');
my $most = 0;
for (1 .. 20)
{
	my $held = role_stat('alice', 'queued_requests + running_requests');
	$most = $held if $held > $most;
	Time::HiRes::sleep(0.05);
}
cmp_ok($most, '<=', 768, "and never more ($most at most in 20 samples)");

# bob floods too, with three times alice's weight: he gets about three
# quarters of the engine's 64 sequences (and the headroom's 8 are taken
# only by a role with none running)
$node->safe_psql('postgres', 'ALTER ROLE bob SET llm.role_weight = 3');
my $fb = start_as('bob', $flood);
llm_poll($node, "SELECT running_requests > 0 FROM llm_role_stats WHERE role = 'bob'");
sleep 3;
my ($ra, $rb) = split /\|/, $node->safe_psql('postgres',
	"SELECT (SELECT running_requests FROM llm_role_stats WHERE role = 'alice'), "
	  . "(SELECT running_requests FROM llm_role_stats WHERE role = 'bob')");
note("running: alice $ra, bob $rb");
cmp_ok($ra + $rb, '<=', 64 + 8, 'the engine runs at most llm.max_sequences and its headroom');
cmp_ok($rb, '>=', 2 * $ra, 'bob, of weight 3, runs about three times as many as alice');
cmp_ok($ra, '>', 0, 'and alice still runs');
is(role_stat('bob', 'weight'), '3', 'llm_role_stats shows the weight');

# a third role gets a slot when the two floods hold them all (each at its
# share, no slot free) and is served
my $served = run_as('carol', $probe);
is($served->{rc}, 0, 'carol is served while two roles flood') or diag($served->{err});
note(sprintf('carol during two floods: %.3f s, %d engine steps', $served->{elapsed}, $served->{steps}));

stop_floods($fa, $fb);
like($fa->{err}, qr/canceling statement due to user request/, 'the floods are cancelled');

# every slot to alice: bob, finding none free, waits for one instead of failing
$node->safe_psql('postgres', 'ALTER ROLE alice SET llm.max_requests_per_role = 1024');
$fa = start_as('alice', $flood);
llm_poll($node,
	"SELECT queued_requests + running_requests = 1024 FROM llm_role_stats WHERE role = 'alice'");
$busy = run_as('dave', $probe);
is($busy->{rc}, 0, 'with every slot taken, dave waits for one and is served') or diag($busy->{err});
is($busy->{out}, $idle->{out}, 'with his answer');
note(sprintf('dave, every slot taken: %.3f s, %d engine steps', $busy->{elapsed}, $busy->{steps}));
stop_floods($fa);

# a role's own limit: a lone request beyond it fails at once, a batch runs through it
$node->safe_psql('postgres', 'ALTER ROLE carol SET llm.max_requests_per_role = 2');
my @slow = map { start_as('carol', "SELECT llm_generate('Once upon a time', 64)") } 1 .. 2;
llm_poll($node, "SELECT running_requests = 2 FROM llm_role_stats WHERE role = 'carol'");
my $refused = run_as('carol', "SELECT llm_generate('Lily and Ben', 4)");
like($refused->{err},
	qr/ERROR:  53000: too many llm requests are queued for role "carol"\nDETAIL:  The role holds 2 request slots; llm.max_requests_per_role is 2\.\nHINT:  Try again later, or raise llm.max_requests_per_role\./,
	'a lone request beyond the role\'s limit fails with 53000');
cmp_ok($refused->{elapsed}, '<', 5, 'at once');
llm_finish_query($_) for @slow;
is($_->{rc}, 0, 'the requests within the limit are served') for @slow;
my $batch = run_as('carol', "SELECT count(completion) FROM llm_generate_batch(ARRAY['a', 'b', 'c', 'd', 'e'], 4)");
is($batch->{out}, '5', 'a batch runs through the role\'s limit');

# long prompts: alice's 64 distinct prompts of ~1,350 tokens wait for the
# steps' prompt budget; bob's short request gets its prompt fed within a
# step or two (the engine shares that budget by role), not after hers
my $long = "SELECT count(*) FROM llm_generate_batch(ARRAY(SELECT i || '. ' || "
  . "repeat('Once upon a time there was a little girl. ', 130) FROM generate_series(1, 64) i), max_tokens => 1)";
my $fl = start_as('alice', $long);
llm_poll($node, "SELECT running_requests > 0 FROM llm_role_stats WHERE role = 'alice'");
Time::HiRes::sleep(1.5);
my $beside = run_as('bob', $probe);
my $alice_left = $node->safe_psql('postgres',
	"SELECT queued_requests + running_requests FROM llm_role_stats WHERE role = 'alice'");
is($beside->{out}, $idle->{out}, 'bob, beside alice\'s long prompts, gets his answer');
cmp_ok($beside->{steps}, '<=', $idle->{steps} + 5,
	"within a few engine steps of his own ($beside->{steps} against $idle->{steps} alone)");
cmp_ok($alice_left, '>', 0, "while alice's prompts were still being fed ($alice_left requests left)");
note(sprintf('bob beside 64 long prompts: %.3f s, %d engine steps', $beside->{elapsed}, $beside->{steps}));
llm_finish_query($fl);
is($fl->{out}, '64', 'alice\'s long prompts are all answered');

# the counts per role
is($node->safe_psql('postgres',
	"SELECT string_agg(role, ',' ORDER BY role) FROM llm_role_stats WHERE role IN ('alice', 'bob', 'carol', 'dave')"),
	'alice,bob,carol,dave', 'llm_role_stats has a row per role');
cmp_ok(role_stat('alice', 'completed_requests'), '>', 0, 'alice completed requests');
cmp_ok(role_stat('alice', 'cancelled_requests'), '>', 0, 'alice had requests cancelled');
cmp_ok(role_stat('bob', 'completed_requests'), '>=', 2, 'bob completed his requests');
is(role_stat('dave', 'completed_requests'), '1', 'dave completed one request');
cmp_ok(role_stat('dave', 'completion_tokens'), '>', 0, 'dave has completion tokens');
cmp_ok(role_stat('dave', 'prompt_tokens'), '>', 0, 'dave has prompt tokens');
is(role_stat('carol', 'completed_requests'), '8', 'carol completed 1 + 2 + 5 requests');
is(role_stat('carol', 'mean_queue_time >= 0 AND total_queue_time >= mean_queue_time'), 't',
	'queue times');
is(role_stat('carol', 'queued_requests + running_requests'), '0', 'nothing queued or running now');
is($node->safe_psql('postgres', 'SELECT sum(completed_requests) = (SELECT completed_requests FROM llm_stats) FROM llm_role_stats'),
	't', 'the roles\' completed requests add up to llm_stats\'');

$node->stop;

# The same long prompts on SmolLM2 (a 135M model, in its chat format, with
# the default step time): bob's llm_generate('Hello', max_tokens => 4), a
# prompt of 31 tokens, sent beside alice's 64 prompts of ~1,340 tokens,
# finishes within 1 s of being sent.  Before the engine's fair shares it
# waited for every one of them (24 s beside 8, 51 s beside 16, on 2 cores).
# (The issue's 0.5-0.6 s on SmolLM2 was for 'Hello' as plain text, before
# llm.chat = auto: one token, no BOS, which the engine feeds in the decoding
# pass, ahead of every prompt; stories260K's 'Hello' is four, a prompt.)
# alice's batch, ~85,000 prompt tokens, is cancelled once he is served.
SKIP:
{
	my $dir = $ENV{LLM_REAL_MODEL_DIR};
	my $smol = 'SmolLM2-135M-Instruct.Q4_1.gguf';
	skip "SmolLM2 ($smol) is not in LLM_REAL_MODEL_DIR (run through tools/pg-test.sh)", 5
	  unless $dir && -f "$dir/$smol";
	my $sn = llm_node('fair_share_smollm2', 'llm.model_dir' => $dir, 'llm.model' => $smol,
		'llm.threads' => 2);
	llm_wait_state($sn);
	$sn->safe_psql('postgres', 'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN');
	my $hello = "SELECT llm_generate('Hello', max_tokens => 4)";
	# bob's request as he sees it: the finished query, with its engine steps
	# and its time from being sent (psql's \timing, without psql's start)
	my $bob = sub {
		my $steps = llm_stat($sn, 'steps');
		my $q = llm_finish_query(llm_start_query_as($sn, 'bob', '\timing on', $hello));
		$q->{steps} = llm_stat($sn, 'steps') - $steps;
		$q->{elapsed} = $q->{out} =~ s/\nTime: ([0-9.]+) ms.*//s ? $1 / 1000 : 9e9;
		return $q;
	};
	my $alone = $bob->();
	note(sprintf('SmolLM2, bob alone: %.3f s, %d engine steps', $alone->{elapsed}, $alone->{steps}));
	my $fl = llm_start_query_as($sn, 'alice', $long);
	llm_poll($sn, "SELECT running_requests > 0 FROM llm_role_stats WHERE role = 'alice'");
	Time::HiRes::sleep(1.5);
	my $beside = $bob->();
	my $left = $sn->safe_psql('postgres',
		"SELECT queued_requests + running_requests FROM llm_role_stats WHERE role = 'alice'");
	is($beside->{out}, $alone->{out}, "SmolLM2: bob, beside alice's long prompts, gets his answer");
	cmp_ok($beside->{elapsed}, '<', 1,
		sprintf('within 1 s of sending it (%.3f s; %.3f s alone)', $beside->{elapsed}, $alone->{elapsed}));
	cmp_ok($beside->{steps}, '<=', $alone->{steps} + 5,
		"within a few engine steps of his own ($beside->{steps} against $alone->{steps} alone)");
	cmp_ok($left, '>', 0, "while alice's prompts were still being fed ($left requests left)");
	$sn->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE usename = 'alice' AND pid <> pg_backend_pid()");
	llm_finish_query($fl);
	like($fl->{err}, qr/canceling statement due to user request/, "alice's batch is cancelled");
	$sn->stop;
}

done_testing();
