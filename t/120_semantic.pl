# The semantic functions through the worker on a real instruction model
# (SmolLM2-135M-Instruct, scored as plain text after 'Text: "..."', the
# question and "Answer:"): a label's answer and probabilities are the same
# alone and from four concurrent sessions, the raw probabilities are the
# softmax of llm_score on that prompt, glowing reviews are positive, a cancelled
# classification frees the worker for the next query, and a table of rows
# gets the labels, probabilities and rankings it gets row by row (calibrated,
# the default, which changes the probabilities and keeps their sum at 1).
# tools/pg-test.sh passes the models' folder as LLM_REAL_MODEL_DIR.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $dir = $ENV{LLM_REAL_MODEL_DIR};
plan skip_all => 'LLM_REAL_MODEL_DIR is not set (run through tools/pg-test.sh)' unless $dir;

my $node = llm_node('semantic', 'llm.model_dir' => $dir,
	'llm.model' => 'SmolLM2-135M-Instruct.Q4_1.gguf', 'llm.threads' => 2);
llm_wait_state($node);

my @texts = (
	'I love this phone, the battery lasts for days.',
	'The package arrived broken and support never answered.',
	'The meeting is moved to Tuesday at ten.',
	'Best pizza I have had in years, we will be back!');
my $labels = q{ARRAY['positive', 'negative', 'neutral']};
sub scores_sql
{
	my ($t) = @_;
	return "SELECT string_agg(label || '=' || probability, ' ' ORDER BY label) "
	  . "FROM llm_classify_scores('$t', $labels, 'What is the sentiment of the text?')";
}

my @alone = map { $node->safe_psql('postgres', scores_sql($_)) } @texts;
like($alone[$_], qr/^negative=\S+ neutral=\S+ positive=\S+$/, "text $_ has three probabilities") for 0 .. $#texts;

# four sessions at once: the same probabilities, to the last digit
my @q = map { llm_start_query($node, scores_sql($texts[$_])) } 0 .. $#texts;
llm_finish_query($_) for @q;
for my $i (0 .. $#texts)
{
	is($q[$i]{rc}, 0, "session $i succeeds");
	is($q[$i]{out}, $alone[$i], "session $i gets the probabilities it gets alone");
}

# llm_classify picks the likeliest of llm_classify_scores
for my $i (0 .. $#texts)
{
	my %p = map { split /=/ } split / /, $alone[$i];
	my ($best) = sort { $p{$b} <=> $p{$a} || $a cmp $b } keys %p;
	my $label = $node->safe_psql('postgres',
		"SELECT llm_classify('$texts[$i]', $labels, 'What is the sentiment of the text?')");
	ok(defined $p{$label} && $p{$label} == $p{$best}, "text $i: llm_classify gives the likeliest label ($label)");
}

# calibrated (the default) against raw: other probabilities, still summing to 1
for my $i (0 .. $#texts)
{
	my ($raw, $cal, $sum) = split /\|/, $node->safe_psql('postgres',
		"SELECT string_agg(r.label || '=' || r.probability, ' ' ORDER BY r.label), "
		  . "string_agg(c.label || '=' || c.probability, ' ' ORDER BY c.label), round(sum(c.probability)::numeric, 12) "
		  . "FROM llm_classify_scores('$texts[$i]', $labels, 'What is the sentiment of the text?', false) r "
		  . "JOIN llm_classify_scores('$texts[$i]', $labels, 'What is the sentiment of the text?') c USING (label)");
	isnt($cal, $raw, "text $i: calibration changes the probabilities");
	is($sum, '1.000000000000', "text $i: the calibrated probabilities sum to 1");
}

# uncalibrated, the probabilities are the softmax of llm_score on the documented prompt
for my $i (0, 1)
{
	my $prompt = "Text: \"$texts[$i]\"\nQuestion: What is the sentiment of the text?\nAnswer:";
	my $same = $node->safe_psql('postgres',
		"WITH s AS (SELECT l, llm_score(E'" . ($prompt =~ s/'/''/gr =~ s/\n/\\n/gr) . "', ' ' || l) AS lp "
		  . "FROM unnest($labels) l), "
		  . "p AS (SELECT l, exp(lp - (SELECT max(lp) FROM s)) / (SELECT sum(exp(lp - (SELECT max(lp) FROM s))) FROM s) AS p FROM s) "
		  . "SELECT bool_and(abs(p.p - c.probability) < 1e-12) FROM p JOIN "
		  . "llm_classify_scores('$texts[$i]', $labels, 'What is the sentiment of the text?', false) c ON c.label = p.l");
	is($same, 't', "text $i: the raw probabilities are the softmax of llm_score on the prompt");
}

# calibrated, two glowing reviews are positive, and the four texts do not all get one label
my %seen;
for my $i (0 .. $#texts)
{
	my $label = $node->safe_psql('postgres',
		"SELECT llm_classify('$texts[$i]', $labels, 'What is the sentiment of the text?')");
	$seen{$label} = 1;
	is($label, 'positive', "text $i, a glowing review, is positive") if $i == 0 || $i == 3;
}
ok(keys %seen > 1, 'the four texts get ' . join(', ', sort keys %seen));

# a yes/no question's probability is between 0 and 1, and the filter agrees with it
my $p = $node->safe_psql('postgres',
	"SELECT llm_probability('Please refund my order, it never arrived.', 'Is the customer asking for a refund?')");
ok($p > 0 && $p < 1, "P(yes) = $p");
is($node->safe_psql('postgres',
	"SELECT llm_filter('Please refund my order, it never arrived.', 'Is the customer asking for a refund?', $p)"),
	't', 'llm_filter at P(yes) itself is true');

# a table: the labels are those row by row
$node->safe_psql('postgres', 'CREATE TABLE reviews(id int PRIMARY KEY, body text)');
$node->safe_psql('postgres', "INSERT INTO reviews VALUES ($_, '" . $texts[$_ % 4] . " (review $_)')") for 1 .. 12;
my $table = $node->safe_psql('postgres',
	"SELECT string_agg(llm_classify(body, $labels), ',' ORDER BY id) FROM reviews");
my $rows = join(',', map { $node->safe_psql('postgres',
	"SELECT llm_classify(body, $labels) FROM reviews WHERE id = $_") } 1 .. 12);
is($table, $rows, 'a table classified in one query gives the labels of row-by-row calls');

# the set-returning functions over the table, batched (LATERAL and in the
# target list): each row's probabilities and ranking are those it gets alone
my $lateral = $node->safe_psql('postgres',
	"SELECT string_agg(s.label || '=' || s.probability, ' ' ORDER BY r.id, s.label) "
	  . "FROM reviews r, LATERAL llm_classify_scores(r.body, $labels, 'What is the sentiment of the text?') s");
my $lateral_rows = join(' ', map { $node->safe_psql('postgres',
	"SELECT string_agg(label || '=' || probability, ' ' ORDER BY label) FROM reviews, "
	  . "llm_classify_scores(body, $labels, 'What is the sentiment of the text?') WHERE id = $_") } 1 .. 12);
is($lateral, $lateral_rows, 'LATERAL llm_classify_scores over a table gives each row its probabilities alone');
like($node->safe_psql('postgres',
	"EXPLAIN SELECT * FROM reviews r, LATERAL llm_classify_scores(r.body, $labels) s"),
	qr/LLM Batch/, 'the LATERAL calls run in an LLM Batch node');
my $docs = q{ARRAY['a phone', 'a delivery', 'a meeting', 'a restaurant']};
my $ranked = $node->safe_psql('postgres',
	"SELECT string_agg(x.candidate || '=' || x.score, ' ' ORDER BY id, x.rank) "
	  . "FROM (SELECT id, (llm_rank(body, $docs)).* FROM reviews) x");
my $ranked_rows = join(' ', map { $node->safe_psql('postgres',
	"SELECT string_agg(candidate || '=' || score, ' ' ORDER BY rank) FROM reviews, llm_rank(body, $docs) "
	  . "WHERE id = $_") } 1 .. 12);
is($ranked, $ranked_rows, 'llm_rank in the target list over a table ranks each row as alone');

# cancel: a statement_timeout ends a long classification, and the worker serves the next query
my ($rc, $out, $err) = $node->psql('postgres',
	"SET statement_timeout = '300ms'; SELECT count(llm_classify(body || repeat(' more', 200), $labels)) FROM reviews, generate_series(1, 20)");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels a classification');
is($node->safe_psql('postgres', scores_sql($texts[0])), $alone[0], 'after the cancel, the same answer as before');
ok(llm_poll($node, "SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats") < 30,
	'the cancelled requests leave the worker');
($rc, $out, $err) = $node->psql('postgres',
	"SET statement_timeout = '300ms'; SELECT count(*) FROM reviews, generate_series(1, 20), "
	  . "LATERAL llm_rank(body || repeat(' more', 200), $docs)");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels a batched LATERAL llm_rank');
ok(llm_poll($node, "SELECT running_requests = 0 AND queued_requests = 0 FROM llm_stats") < 30,
	'its cancelled requests leave the worker');

$node->stop;
done_testing();
