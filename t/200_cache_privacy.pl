# The prefix cache is partitioned by role: bob's prompt is cached for bob
# only, so alice, sending the same text, computes it all again and sees no
# cached tokens in EXPLAIN ANALYZE, and llm_stats shows each role only its
# own cache hits (a superuser all of them); llm.prefix_cache_shared = on
# shares one cache among roles again.  Answers are the same either way.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = llm_node('cache_privacy', 'llm.threads' => 1);
llm_wait_state($node);
$node->safe_psql('postgres',
	'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; '
	  . 'CREATE TABLE memo (id int, body text); GRANT SELECT ON memo TO PUBLIC');

# A memo long enough for several cached blocks, different in its last words only.
sub memo
{
	my ($price) = @_;
	return 'Once upon a time there was a little girl named Lily. She liked to play in the park with her '
	  . 'friend Tom. One day they found a big red ball under a tree. The internal memo said the offer '
	  . "price is $price dollars per share.";
}

# Run the memo through an LLM Batch node as user: (its answer, its Cached Prompt Tokens).
sub ask
{
	my ($user, $text) = @_;
	$node->safe_psql('postgres', "TRUNCATE memo; INSERT INTO memo VALUES (1, '$text')");
	my $plan = $node->safe_psql('postgres',
		'EXPLAIN (ANALYZE, FORMAT JSON) SELECT llm_generate(body, max_tokens => 4) FROM memo',
		extra_params => [ '-U', $user ]);
	my ($cached) = $plan =~ /"Cached Prompt Tokens": (\d+)/;
	my $answer = $node->safe_psql('postgres', 'SELECT llm_generate(body, max_tokens => 4) FROM memo',
		extra_params => [ '-U', $user ]);
	return ($answer, $cached);
}

# llm_stats' prefix-cache hits as user sees them (undef: the superuser).
sub hits
{
	my ($user) = @_;
	return $node->safe_psql('postgres', 'SELECT coalesce(prefix_cache_hit_tokens::text, \'null\') FROM llm_stats',
		extra_params => [ defined $user ? ('-U', $user) : () ]);
}

my ($bob_first, $c1) = ask('bob', memo(47));
is($c1, 0, 'bob\'s first memo finds nothing cached');
my ($bob_again, $c2) = ask('bob', memo(47));
cmp_ok($c2, '>=', 32, "bob's own repeat takes its prefix from the cache ($c2 tokens)");
is($bob_again, $bob_first, 'bob gets the same answer from the cache');

my ($alice_answer, $c3) = ask('alice', memo(47));
is($c3, 0, 'alice sending bob\'s memo finds nothing of it cached');
is($alice_answer, $bob_first, 'alice gets the answer bob got');

# alice probing the price of bob's new memo, as the exploit did: every
# price finds the same blocks cached, those her own memo left before the price
ask('bob', memo(1047)) for 1 .. 2;
my @probe = map { (ask('alice', memo($_)))[1] } 1045 .. 1048;
is(join(' ', @probe), join(' ', ($probe[0]) x 4), "alice's probes of 1045 to 1048 find the same cached tokens (@probe)");

# llm_stats: each role its own hits
my $alice_hits = hits('alice');
my $bob_hits = hits('bob');
cmp_ok($bob_hits, '>=', 2 * 32, "bob sees his own hits ($bob_hits)");
ask('bob', memo(47));
cmp_ok(hits('bob'), '>', $bob_hits, 'bob\'s hits grow with his repeat');
is(hits('alice'), $alice_hits, 'alice\'s hits do not move with bob\'s');
cmp_ok(hits(undef), '>=', hits('bob') + $alice_hits, 'a superuser sees every role\'s hits');

# shared: roles take each other's cached blocks again
$node->safe_psql('postgres', 'ALTER SYSTEM SET llm.prefix_cache_shared = on; SELECT pg_reload_conf()');
my $shared = 0;
for my $i (1 .. 50)
{
	my ($b, $cb) = ask('bob', memo(100 + $i));
	my ($a, $ca) = ask('alice', memo(100 + $i));
	is($a, $b, "shared, attempt $i: alice gets bob's answer") if $ca > 0;
	if ($ca > 0) { $shared = $ca; last; }
	usleep(100_000);
}
cmp_ok($shared, '>=', 32, "with llm.prefix_cache_shared, alice takes bob's prefix from the cache ($shared tokens)");

$node->stop;
done_testing();
