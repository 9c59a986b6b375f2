# Non-UTF-8 databases: in LATIN1 and SQL_ASCII, sampled text full of broken
# byte sequences (temperature 3 on stories260K's byte tokens, which the
# extension turns into U+FFFD) always converts: a character LATIN1 cannot
# hold becomes "?", and no row fails a batch; a LATIN1 prompt reaches the
# model as UTF-8.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Encode ();

my $node = llm_node('encodings', 'llm.threads' => 1);
llm_wait_state($node);

for my $enc ('LATIN1', 'SQL_ASCII')
{
	my $db = lc "db_$enc";
	$node->safe_psql('postgres',
		"CREATE DATABASE $db TEMPLATE template0 ENCODING '$enc' LC_COLLATE 'C' LC_CTYPE 'C'");
	$node->safe_psql($db, 'CREATE EXTENSION llm');
	my ($rc, $out, $err) = $node->psql($db,
		"SELECT count(*), count(completion) FROM llm_generate_batch(array_fill('Once upon a time'::text, ARRAY[400]), 24, temperature => 3)");
	is($rc, 0, "$enc: 400 prompts sampled at temperature 3 run without error") or diag($err);
	is($out, '400|400', "$enc: every prompt has a completion");
	($rc, $out, $err) = $node->psql($db,
		"SELECT count(*) FROM generate_series(1, 50) s WHERE llm_generate('Lily', 16, temperature => 3, seed => s) IS NOT NULL");
	is($out, '50', "$enc: 50 single calls at temperature 3 all answer") or diag($err);
}
# the same prompt, given in LATIN1 with a non-ASCII letter, is the same UTF-8 to the model
# (the client speaks UTF-8 in both sessions; the LATIN1 server converts)
is($node->safe_psql('db_latin1', "SET client_encoding = 'UTF8'; SELECT llm_generate('Zoé went to the park', 12)"),
	$node->safe_psql('postgres', "SELECT llm_generate('Zoé went to the park', 12)"),
	'a LATIN1 prompt reaches the model as the same UTF-8 as in a UTF-8 database');

# seeded samples: where the UTF-8 database shows U+FFFD, LATIN1 shows "?", and nothing else differs
my $samples = "SELECT string_agg(replace(llm_generate('Lily', 24, temperature => 3, seed => s), E'\\n', ' '), E'\\n' ORDER BY s) FROM generate_series(1, 200) s";
my $utf8 = $node->safe_psql('postgres', $samples);
my $latin1 = $node->safe_psql('db_latin1', "SET client_encoding = 'UTF8'; $samples");
my $n_fffd = () = $utf8 =~ /\xEF\xBF\xBD/g;
cmp_ok($n_fffd, '>', 0, "200 samples at temperature 3 hold $n_fffd U+FFFD in a UTF-8 database");
# LATIN1 holds U+0000..U+00FF: every other character must come back as "?"
my $expected = join '', map { ord($_) <= 0xFF ? $_ : '?' } split //, Encode::decode('UTF-8', $utf8);
is(Encode::decode('UTF-8', $latin1), $expected, 'in LATIN1 the same samples, with "?" where LATIN1 cannot hold a character');

$node->stop;
done_testing();
