# Background fills (llm_fill): a job fills a column over 2,000 rows with
# the answers llm_generate gives each row alone; it survives a kill -9 of
# its worker at about a third and an immediate-mode stop of the server at
# about two thirds, filling every row exactly once, sending at most 1.05x
# the rows' requests, and putting a failing row into the error table; a
# row another session holds is neither overwritten nor lost; cancel, pause
# and resume; a continuous job fills rows inserted or updated later; a role cannot fill a table it cannot update, nor escape
# itself through where_clause, and row-level security holds.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

# llm.debug_step_delay: each engine step takes 10 ms more, so that the faults land mid-job
my $node = llm_node('fill', 'llm.threads' => 1, 'max_worker_processes' => 16, 'llm.debug_step_delay' => 10);
llm_wait_state($node);

my $rows = 2000;
my $tokens = 12;

# The rows: distinct prompts, and one over the model's context (it fails).
# Every UPDATE of summary is logged (committed ones only stay), so that
# "exactly once" can be counted.
$node->safe_psql('postgres', qq{
CREATE TABLE docs (id int PRIMARY KEY, body text, summary text);
INSERT INTO docs SELECT i, 'Once upon a time, ' || (ARRAY['Tom','Lily','Ben','Sue','Max'])[1 + i % 5]
    || ' had ' || i || ' ' || (ARRAY['apples','toys','cats','books'])[1 + i % 4] || '. One day'
  FROM generate_series(1, $rows) i;
UPDATE docs SET body = repeat('Once upon a time ', 700) WHERE id = 777;
CREATE TABLE fill_log (id int, summary text);
CREATE FUNCTION log_fill() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN INSERT INTO fill_log VALUES (NEW.id, NEW.summary); RETURN NEW; END \$\$;
CREATE TRIGGER docs_log AFTER UPDATE OF summary ON docs FOR EACH ROW EXECUTE FUNCTION log_fill();
});

# requests completed, failed and cancelled since the server started, and
# (before a fault) those in flight, which the fault loses
my $requests_sql = 'SELECT completed_requests + failed_requests + cancelled_requests FROM llm_stats';
my $in_flight_sql = 'SELECT completed_requests + failed_requests + cancelled_requests + queued_requests + running_requests FROM llm_stats';

my $job = $node->safe_psql('postgres',
	"SELECT llm_fill('docs', 'summary', 'body', max_tokens => $tokens, batch_rows => 32)");
like($job, qr/^\d+$/, "llm_fill returns a job id ($job)");

# wait until rows_done reaches a fraction of the rows
sub wait_done
{
	my ($fraction) = @_;
	$node->poll_query_until('postgres',
		"SELECT rows_done >= $rows * $fraction OR state NOT IN ('queued', 'running') FROM llm_jobs WHERE id = $job")
	  or die "job $job never reached $fraction of the rows";
	my $state = $node->safe_psql('postgres', "SELECT state || ' ' || coalesce(error, '') || ' ' || rows_done || '/' || rows_total || ' errors ' || errors FROM llm_jobs WHERE id = $job");
	die "job $job is $state: " . $node->safe_psql('postgres', "SELECT string_agg(DISTINCT sqlstate || ' ' || message, ' / ') FROM llm_job_errors") unless $state =~ /^(queued|running) /;
}

# ---- kill -9 of the job's worker at about a third ----
wait_done(1 / 3);
my ($pid, $requests_1) = split /\|/, $node->safe_psql('postgres',
	"SELECT (SELECT pid FROM pg_stat_activity WHERE backend_type = 'llm job'), ($in_flight_sql)");
ok($pid, "the job runs in a background worker of its own (pid $pid)");
kill 'KILL', $pid;
# the postmaster restarts every process; the job's worker comes back
llm_poll_through_restart($node,
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'llm job' AND pid <> $pid")
  or die 'the job did not come back after kill -9';
pass('the job resumes after kill -9 of its worker');

# ---- an immediate-mode stop at about two thirds ----
wait_done(2 / 3);
my $requests_2 = $node->safe_psql('postgres', $in_flight_sql);
$node->stop('immediate');
$node->start;
llm_wait_state($node);

is($node->safe_psql('postgres', "SELECT llm_job_wait($job, '10 min')"), 'done', 'the job completes');
my $requests_3 = $node->safe_psql('postgres', $requests_sql);
my $requests = $requests_1 + $requests_2 + $requests_3;

is($node->safe_psql('postgres', 'SELECT count(*) FROM docs WHERE summary IS NULL'), '1',
	'every row is filled but the failing one');
is($node->safe_psql('postgres', 'SELECT count(*) FROM (SELECT id FROM fill_log GROUP BY id HAVING count(*) <> 1) s'),
	'0', 'every row is filled exactly once');
is($node->safe_psql('postgres', 'SELECT count(*) FROM fill_log'), $rows - 1, 'by committed updates of one each');
cmp_ok($requests, '<=', 1.05 * $rows, "requests sent: $requests for $rows rows (at most 1.05x)");
like($node->safe_psql('postgres', "SELECT row_key || ' ' || sqlstate || ' ' || message FROM llm_job_errors WHERE job_id = $job"),
	qr/^777 54000 prompt is too long: The prompt has \d+ tokens; the model's context length is \d+\.$/,
	'the failing row is in the error table, with its SQLSTATE and message');
is($node->safe_psql('postgres', "SELECT state || ' ' || rows_done || ' ' || rows_total || ' ' || errors FROM llm_jobs WHERE id = $job"),
	"done " . ($rows - 1) . ' ' . ($rows - 1) . ' 1', 'llm_jobs: done, rows done and total, one error');

# every answer is llm_generate's for the row alone: all rows through the
# LLM Batch node, a sample row by row (llm.batch_rows = 0: no batching)
is($node->safe_psql('postgres',
	"SELECT count(*) FROM docs WHERE id <> 777 AND summary IS DISTINCT FROM llm_generate(body, max_tokens => $tokens)"),
	'0', 'every answer equals llm_generate of the row');
is($node->safe_psql('postgres',
	"SET llm.batch_rows = 0; SELECT count(*) FROM docs WHERE id % 97 = 0 AND summary IS DISTINCT FROM llm_generate(body, max_tokens => $tokens)"),
	'0', 'and llm_generate of the row alone');

# ---- a row another session holds is neither overwritten nor lost ----
$node->safe_psql('postgres', 'CREATE TABLE held (id int PRIMARY KEY, body text, answer text);
INSERT INTO held SELECT i, $$Once upon a time $$ || i FROM generate_series(1, 40) i');
my $holder = $node->background_psql('postgres');
$holder->query_safe("BEGIN; UPDATE held SET answer = 'by hand' WHERE id = 7");
my $held_job = $node->safe_psql('postgres', "SELECT llm_fill('held', 'answer', 'body', max_tokens => 4, batch_rows => 8)");
$node->poll_query_until('postgres', 'SELECT count(*) = 39 FROM held WHERE answer IS NOT NULL')
  or die 'the job did not fill the rows that are not held';
is($node->safe_psql('postgres', "SELECT state FROM llm_jobs WHERE id = $held_job"), 'running',
	'the job waits for the held row');
$holder->query_safe('COMMIT');
$holder->quit;
is($node->safe_psql('postgres', "SELECT llm_job_wait($held_job, '1 min')"), 'done', 'and ends once it is released');
is($node->safe_psql('postgres', 'SELECT answer FROM held WHERE id = 7'), 'by hand', 'the held row keeps its update');

# ---- pause, resume, cancel ----
$node->safe_psql('postgres', q{CREATE TABLE slow (id int PRIMARY KEY, body text, answer text);
INSERT INTO slow SELECT i, 'Lily saw ' || i || ' birds.' FROM generate_series(1, 400) i});
my $slow = $node->safe_psql('postgres', "SELECT llm_fill('slow', 'answer', 'body', max_tokens => 48, batch_rows => 4)");
$node->poll_query_until('postgres', "SELECT rows_done > 0 FROM llm_jobs WHERE id = $slow");
is($node->safe_psql('postgres', "SELECT llm_job_pause($slow)"), 't', 'llm_job_pause');
is($node->safe_psql('postgres', "SELECT llm_job_wait($slow, '1 min')"), 'paused', 'llm_job_wait returns on pause');
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'llm job'");
my $paused_at = $node->safe_psql('postgres', 'SELECT count(*) FROM slow WHERE answer IS NOT NULL');
sleep 1;
is($node->safe_psql('postgres', 'SELECT count(*) FROM slow WHERE answer IS NOT NULL'), $paused_at,
	"a paused job fills nothing ($paused_at rows filled)");
cmp_ok($paused_at, '<', 400, 'it paused before the end');
is($node->safe_psql('postgres', "SELECT llm_job_resume($slow)"), 't', 'llm_job_resume');
$node->poll_query_until('postgres', "SELECT count(*) > $paused_at FROM slow WHERE answer IS NOT NULL")
  or die 'the resumed job filled nothing';
is($node->safe_psql('postgres', "SELECT llm_job_cancel($slow)"), 't', 'llm_job_cancel');
is($node->safe_psql('postgres', "SELECT llm_job_wait($slow)"), 'cancelled', 'llm_job_wait returns cancelled');
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'llm job'");
my $cancelled_at = $node->safe_psql('postgres', 'SELECT count(*) FROM slow WHERE answer IS NOT NULL');
sleep 1;
is($node->safe_psql('postgres', 'SELECT count(*) FROM slow WHERE answer IS NOT NULL'), $cancelled_at,
	"a cancelled job fills nothing more ($cancelled_at rows filled)");
is($node->safe_psql('postgres', "SELECT llm_job_resume($slow)"), 'f', 'a cancelled job does not resume');

# ---- a continuous job: rows inserted or updated later get filled ----
$node->safe_psql('postgres', q{CREATE TABLE live (id serial PRIMARY KEY, body text, answer text);
INSERT INTO live (body) SELECT 'Sue found ' || i || ' shells.' FROM generate_series(1, 5) i});
my $live = $node->safe_psql('postgres',
	"SELECT llm_fill('live', 'answer', 'body', max_tokens => 6, batch_rows => 8, continuous => true)");
$node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM live WHERE answer IS NULL')
  or die 'the continuous job did not fill the first rows';
is($node->safe_psql('postgres', "SELECT state || ' ' || continuous FROM llm_jobs WHERE id = $live"), 'running true',
	'a continuous job keeps running when its rows are filled');
$node->safe_psql('postgres', q{INSERT INTO live (body) SELECT 'Max ate ' || i || ' pies.' FROM generate_series(1, 20) i});
$node->safe_psql('postgres', q{UPDATE live SET body = 'Tom sang a song.', answer = NULL WHERE id = 2});
my $secs = llm_poll($node, 'SELECT count(*) = 0 FROM live WHERE answer IS NULL');
pass(sprintf('rows inserted and updated later are filled (%.1f s)', $secs));
cmp_ok($secs, '<', 8, 'woken by the trigger, not by its 10 s timeout');
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM live WHERE answer IS DISTINCT FROM llm_generate(body, max_tokens => 6)}),
	'0', "they are llm_generate's answers");
is($node->safe_psql('postgres', "SELECT llm_job_cancel($live)"), 't', 'a continuous job is cancelled');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'live'::regclass"), '0',
	'with its trigger');

# ---- privileges ----
$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
CREATE TABLE secret (s text);
INSERT INTO secret VALUES ('the launch codes');
CREATE TABLE readonly (id int PRIMARY KEY, body text, answer text);
INSERT INTO readonly VALUES (1, 'Once upon a time');
GRANT SELECT ON readonly TO alice;
CREATE TABLE notes (id int PRIMARY KEY, owner name, body text, answer text);
INSERT INTO notes SELECT i, CASE WHEN i % 2 = 0 THEN 'alice' ELSE 'bob' END, 'Ben had ' || i || ' hats.'
  FROM generate_series(1, 20) i;
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON notes USING (owner = current_user);
GRANT SELECT, UPDATE ON notes TO alice;
});
my ($rc, $out, $err) = $node->psql('postgres',
	"SELECT llm_fill('readonly', 'answer', 'body', max_tokens => 4)", extra_params => ['-U', 'alice']);
like($err, qr/permission denied to fill column "answer" of table "readonly"/, 'a role cannot fill a table it cannot update');
($rc, $out, $err) = $node->psql('postgres',
	"SELECT llm_fill('notes', 'answer', 'body', max_tokens => 4, continuous => true)", extra_params => ['-U', 'alice']);
like($err, qr/permission denied to keep column "answer" of table "notes" filled/,
	'nor keep it filled without the TRIGGER privilege');
($rc, $out, $err) = $node->psql('postgres',
	"SELECT llm_fill('notes', 'answer', 'body', max_tokens => 4, where_clause => 'EXISTS (SELECT FROM secret)')",
	extra_params => ['-U', 'alice']);
like($err, qr/permission denied for table secret/, "where_clause runs with the role's privileges");
($rc, $out, $err) = $node->psql('postgres',
	"SELECT llm_fill('notes', 'answer', 'body', max_tokens => 4, where_clause => 'true) OR (true')",
	extra_params => ['-U', 'alice']);
like($err, qr/syntax error at or near "\)"/, 'where_clause cannot leave its parentheses');
($rc, $out, $err) = $node->psql('postgres',
	"SELECT llm_fill('notes', 'answer', 'body', max_tokens => 4, where_clause => 'true; DELETE FROM notes')",
	extra_params => ['-U', 'alice']);
like($err, qr/where_clause must be a single SQL expression/, 'nor add a statement');
($rc, $out, $err) = $node->psql('postgres',
	"SELECT llm_fill('notes', 'answer', 'body', max_tokens => 4, where_clause => 'true UNION SELECT true')",
	extra_params => ['-U', 'alice']);
like($err, qr/where_clause must be a single SQL expression/, 'nor make a query of it');
my $alice_job = $node->safe_psql('postgres', "SELECT llm_fill('notes', 'answer', 'body', max_tokens => 4)",
	extra_params => ['-U', 'alice']);
is($node->safe_psql('postgres', "SELECT llm_job_wait($alice_job, '1 min')", extra_params => ['-U', 'alice']),
	'done', "alice's job is done");
is($node->safe_psql('postgres', "SELECT string_agg(DISTINCT owner, ',') FROM notes WHERE answer IS NOT NULL"),
	'alice', 'the job fills only the rows row-level security lets its role see');
is($node->safe_psql('postgres', 'SELECT count(*) FROM llm_jobs', extra_params => ['-U', 'alice']),
	'1', 'llm_jobs shows a role its own jobs');
($rc, $out, $err) = $node->psql('postgres', "SELECT llm_job_cancel($slow)", extra_params => ['-U', 'alice']);
like($err, qr/llm job $slow does not exist/, "a role cannot touch another's job");

# The catalog is written as its owner, a superuser: an operator of alice's
# own, first in her search_path, must not run with those privileges, when
# she calls llm_job_cancel nor in her job's worker (which keeps her
# search_path for her expressions).
$node->safe_psql('postgres', 'CREATE SCHEMA evil AUTHORIZATION alice');
$node->safe_psql('postgres', q{
CREATE FUNCTION evil.eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF current_user <> 'alice' THEN EXECUTE 'ALTER ROLE alice SUPERUSER'; END IF;
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq);
}, extra_params => ['-U', 'alice']);
$node->safe_psql('postgres', q{UPDATE notes SET answer = NULL WHERE owner = 'alice'});
my $evil_job = $node->safe_psql('postgres',
	"SET search_path = evil, public, pg_catalog; SELECT llm_fill('notes', 'answer', 'body', max_tokens => 4)",
	extra_params => ['-U', 'alice']);
is($node->safe_psql('postgres', "SET search_path = evil, public, pg_catalog; SELECT llm_job_wait($evil_job, '1 min')",
	extra_params => ['-U', 'alice']), 'done', "alice's job under her own operator is done");
is($node->safe_psql('postgres', "SET search_path = evil, public, pg_catalog; SELECT llm_job_cancel($evil_job)",
	extra_params => ['-U', 'alice']), 'f', 'llm_job_cancel under her own operator');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'alice'}),
	'f', "neither ran alice's operator as the catalog's owner");

# ---- bad calls ----
for my $case (
	[ "SELECT llm_fill('docs', 'nope', 'body')", qr/column "nope" of relation "docs" does not exist/ ],
	[ "SELECT llm_fill('llm_jobs', 'state', 'id')", qr/"llm_jobs" is not a table/ ],
	[ "SELECT llm_fill('docs', 'summary', 'body', function => 'poem')", qr/unknown fill function "poem"/ ],
	[ "SELECT llm_fill('docs', 'summary', 'body', batch_rows => 0)", qr/batch_rows must be between 1 and 65536/ ],
	[ "SELECT llm_fill('docs', 'summary', 'body', max_tokens => -1)", qr/max_tokens must not be negative/ ],
	[ "SELECT llm_fill('docs', 'summary', 'no_such_column')", qr/column "no_such_column" does not exist/ ],
	[ "SELECT llm_fill('docs', 'summary', 'body', function => 'classify')", qr/labels must not be null/ ],
	[ "SELECT llm_job_wait(424242)", qr/llm job 424242 does not exist/ ],
	[ "BEGIN; SELECT llm_job_wait(llm_fill('docs', 'summary', 'body'), '1 min')",
	  qr/llm_job_wait cannot wait for llm job \d+ in the transaction that started it/ ])
{
	($rc, $out, $err) = $node->psql('postgres', $case->[0]);
	like($err, $case->[1], "$case->[0] fails clearly");
}

# ---- a classify job into a label column ----
$node->safe_psql('postgres', q{CREATE TABLE moods (id int PRIMARY KEY, body text, mood text);
INSERT INTO moods SELECT i, (ARRAY['Tom was happy.', 'Lily was sad and cried.'])[1 + i % 2] FROM generate_series(1, 10) i});
my $classify = $node->safe_psql('postgres',
	"SELECT llm_fill('moods', 'mood', 'body', function => 'classify', labels => ARRAY['happy', 'sad'])");
is($node->safe_psql('postgres', "SELECT llm_job_wait($classify, '1 min')"), 'done', 'a classify job');
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM moods WHERE mood IS DISTINCT FROM llm_classify(body, ARRAY['happy', 'sad'])}),
	'0', "its labels are llm_classify's");

# ---- a trigger that skips a row or clears the column ----
# Such a row is not counted done (it would be taken again by every batch,
# and the job would never end): it goes into the error table.
$node->safe_psql('postgres', q{CREATE TABLE guarded (id int PRIMARY KEY, body text, answer text);
INSERT INTO guarded SELECT i, 'Sue had ' || i || ' kites.' FROM generate_series(1, 6) i;
CREATE FUNCTION guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id = 3 THEN RETURN NULL; END IF;
    IF NEW.id = 4 THEN NEW.answer := NULL; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER guarded_guard BEFORE UPDATE ON guarded FOR EACH ROW EXECUTE FUNCTION guard();});
my $guarded = $node->safe_psql('postgres', "SELECT llm_fill('guarded', 'answer', 'body', max_tokens => 4)");
is($node->safe_psql('postgres', "SELECT llm_job_wait($guarded, '1 min')"), 'done',
	'a job whose rows a trigger skips or clears ends');
is($node->safe_psql('postgres', "SELECT rows_done || ' ' || errors FROM llm_jobs WHERE id = $guarded"),
	'4 2', 'those rows are errors, not rows done');
like($node->safe_psql('postgres', "SELECT string_agg(row_key || ': ' || sqlstate || ' ' || message, '; ' ORDER BY row_key) FROM llm_job_errors WHERE job_id = $guarded"),
	qr/^3: 09000 the answer was not written.*; 4: 09000 the answer was not kept/, 'and say why');

$node->stop;
done_testing();
