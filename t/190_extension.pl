# The extension as a package: an installed 1.0, 1.1, 1.2, 1.3, 1.4 or 1.5 upgrades to
# the same objects as a fresh install, and the new library serves their
# definitions (1.3 adds llm_chat and llm_schema_outline, 1.4 llm_stats's
# speculative decoding columns, 1.5 the background fill jobs: llm_fill,
# llm_jobs and their catalog, and llm_stats's and llm_role_stats's answer
# cache columns, 1.6 the remote inference nodes: llm_remote_batch,
# llm_model_identity and llm_remote_stats);
# no role can take over its SQL functions through its search_path (not even
# inside another role's SECURITY DEFINER function);
# it works in a schema of its own that is not in the search_path, and it
# cannot be moved; llm_worker_status() says which device the worker uses,
# and llm.device = cuda without the CUDA module fails clearly.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = llm_node('extension', 'llm.threads' => 1);
llm_wait_state($node);

# ---- the device ----
my ($device, $note) = split /\|/,
  $node->safe_psql('postgres', 'SELECT device, device_note FROM llm_worker_status()');
like($device, qr/^cpu \(/, "llm.device = auto without a GPU computes on the CPU ($device)");
like($note, qr/\S/, "and says why not on a GPU ($note)");

# 18 names the library and its version among the loaded modules
SKIP:
{
	skip 'pg_get_loaded_modules() is new in 18', 1
	  if $node->safe_psql('postgres', 'SHOW server_version_num') < 180000;
	is($node->safe_psql('postgres', "SELECT version FROM pg_get_loaded_modules() WHERE module_name = 'llm'"),
		$node->safe_psql('postgres', "SELECT default_version FROM pg_available_extensions WHERE name = 'llm'"),
		"the library's version is the extension's");
}

# ---- upgrade: 1.0 then ALTER EXTENSION UPDATE, against a fresh install ----

# Every member of the extension, with its definition, comment and privileges.
my $objects_sql = q{
SELECT e.extversion || ' relocatable=' || e.extrelocatable || ' schema=' || e.extnamespace::regnamespace
       || E'\n' || string_agg(o.descr, E'\n--\n' ORDER BY o.descr)
FROM pg_extension e,
LATERAL (
    SELECT pg_describe_object(d.classid, d.objid, 0)
           || E'\n' || coalesce(obj_description(d.objid, d.classid::regclass::text), '(no comment)')
           || E'\n' || coalesce(
                  CASE d.classid
                  WHEN 'pg_proc'::regclass THEN
                      (SELECT CASE WHEN p.prokind = 'a'
                                   THEN (SELECT format('aggregate sfunc=%s stype=%s finalfunc=%s extra=%s',
                                                       a.aggtransfn, a.aggtranstype::regtype,
                                                       a.aggfinalfn, a.aggfinalextra)
                                         FROM pg_aggregate a WHERE a.aggfnoid = p.oid)
                                   ELSE pg_get_functiondef(p.oid) END
                              || E'\nacl=' || coalesce(p.proacl::text, 'default')
                       FROM pg_proc p WHERE p.oid = d.objid)
                  WHEN 'pg_class'::regclass THEN
                      (SELECT c.relkind::text || ' ' || coalesce(pg_get_viewdef(c.oid), '')
                              || E'\nacl=' || coalesce(c.relacl::text, 'default')
                       FROM pg_class c WHERE c.oid = d.objid)
                  END, '') AS descr
    FROM pg_depend d
    WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid AND d.deptype = 'e') o
WHERE e.extname = 'llm'
GROUP BY e.extversion, e.extrelocatable, e.extnamespace};

$node->safe_psql('postgres', 'CREATE DATABASE upgraded');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('postgres', 'CREATE DATABASE from_1_1');
$node->safe_psql('postgres', 'CREATE DATABASE from_1_2');
$node->safe_psql('postgres', 'CREATE DATABASE from_1_3');
$node->safe_psql('postgres', 'CREATE DATABASE from_1_4');
$node->safe_psql('postgres', 'CREATE DATABASE from_1_5');
$node->safe_psql('upgraded', "CREATE EXTENSION llm VERSION '1.0'");
$node->safe_psql('from_1_1', "CREATE EXTENSION llm VERSION '1.1'");
$node->safe_psql('from_1_2', "CREATE EXTENSION llm VERSION '1.2'");
$node->safe_psql('from_1_3', "CREATE EXTENSION llm VERSION '1.3'");
$node->safe_psql('from_1_4', "CREATE EXTENSION llm VERSION '1.4'");
$node->safe_psql('from_1_5', "CREATE EXTENSION llm VERSION '1.5'");
$node->safe_psql('fresh', 'CREATE EXTENSION llm');

is($node->safe_psql('fresh', 'SELECT extversion FROM pg_extension WHERE extname = $$llm$$'),
	'1.6', 'a fresh install is version 1.6');
my @old_status = split /\|/, $node->safe_psql('upgraded', 'SELECT * FROM llm_worker_status()'), -1;
is(scalar @old_status, 13, "1.0's llm_worker_status() still gives its 13 columns from the new library");
my @old_stats = split /\|/, $node->safe_psql('from_1_3', 'SELECT * FROM llm_stats'), -1;
is(scalar @old_stats, 17, "1.3's llm_stats still gives its 17 columns from the new library");
is($node->safe_psql('fresh', 'SELECT draft_tokens >= 0 AND draft_accepted_tokens >= 0 FROM llm_stats'), 't',
	'1.4: llm_stats has the drafted and accepted tokens');
@old_stats = split /\|/, $node->safe_psql('from_1_4', 'SELECT * FROM llm_stats'), -1;
is(scalar @old_stats, 19, "1.4's llm_stats still gives its 19 columns from the new library");
$node->safe_psql('from_1_4', "SELECT llm_generate('Once upon a time', 2)");
my @old_roles = split /\|/, $node->safe_psql('from_1_4', 'SELECT * FROM llm_role_stats LIMIT 1'), -1;
is(scalar @old_roles, 12, "1.4's llm_role_stats still gives its 12 columns from the new library");
is($node->safe_psql('fresh',
		'SELECT answer_cache_hits >= 0 AND answer_cache_entries >= 0 AND answer_cache_bytes >= 0 FROM llm_stats'),
	't', '1.5: llm_stats has the answer cache columns');
is($node->safe_psql('fresh', 'SELECT bool_and(answer_cache_hits >= 0) FROM llm_role_stats'), 't',
	'1.5: llm_role_stats has the answer cache hits');

# llm_generate_batch: a prompt over the context fails; NULL by on_error, and
# 1.2 and later say why in its error column, which 1.0 and 1.1 lack
my $failing = "SELECT * FROM llm_generate_batch(ARRAY['Once upon a time', repeat('Once upon a time ', 700)], 2, "
  . "on_error => 'null') ORDER BY ord";
for my $db ('upgraded', 'from_1_1')
{
	my @rows = split /\n/, $node->safe_psql($db, $failing);
	is(scalar(split /\|/, $rows[1], -1), 5, "$db: the old llm_generate_batch still gives its 5 columns");
	like($rows[1], qr/^2\|\|\d+\|0\|error$/, "$db: a failed prompt: NULL completion, finish_reason error");
}
my @rows = split /\n/, $node->safe_psql('fresh', $failing);
like($rows[0], qr/^1\|.+\|5\|2\|length\|$/, '1.5: an answered prompt has no error');
like($rows[1], qr/^2\|\|0\|0\|error\|prompt is too long: The prompt has \d+ tokens; the model's context length is \d+\.$/,
	"1.5: a failed prompt has the error's message and detail ($rows[1])");

# llm_chat is new in 1.3
my $has_chat = q{SELECT count(*) FROM pg_proc WHERE proname = 'llm_chat'};
is($node->safe_psql('from_1_2', $has_chat), '0', '1.2 has no llm_chat');
is($node->safe_psql('fresh', $has_chat), '1', '1.5 has llm_chat');

# ---- search_path: a hostile role and a superuser's SECURITY DEFINER function ----
my $schema = '{"type":"object","properties":{"who":{"type":"string","maxLength":12}},"required":["who"]}';
my $text = 'Tom has a red ball.';
my $setup = qq{
CREATE TABLE public.secret (s text);
INSERT INTO public.secret VALUES ('the launch codes');
REVOKE ALL ON public.secret FROM PUBLIC;
CREATE FUNCTION public.definer_extract(t text) RETURNS jsonb
LANGUAGE sql SECURITY DEFINER
AS \$\$ SELECT public.llm_extract(t, '$schema', max_tokens => 64) \$\$;
CREATE SCHEMA evil AUTHORIZATION mallory;
SET ROLE mallory;
CREATE TABLE evil.loot (who name, what text);
-- the same signature as the real llm_generate, so it wins when evil comes first
CREATE FUNCTION evil.llm_generate(prompt text, max_tokens int DEFAULT 128, temperature float8 DEFAULT 0,
                                  top_p float8 DEFAULT 1, top_k int DEFAULT 0, seed bigint DEFAULT NULL,
                                  stop text[] DEFAULT NULL, chat boolean DEFAULT NULL,
                                  on_error text DEFAULT 'error', system text DEFAULT NULL,
                                  json_schema jsonb DEFAULT NULL, choices text[] DEFAULT NULL)
RETURNS text LANGUAGE plpgsql
AS \$\$
BEGIN
    INSERT INTO evil.loot SELECT current_user, string_agg(s, ',') FROM public.secret;
    RETURN '{"who": "stolen"}';
END
\$\$;
CREATE FUNCTION evil.cat(a text, b text) RETURNS text LANGUAGE plpgsql
AS \$\$
BEGIN
    INSERT INTO evil.loot VALUES (current_user, 'ran ||');
    RETURN a OPERATOR(pg_catalog.||) b;
END
\$\$;
CREATE OPERATOR evil.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.cat);
-- and the outline llm_extract shows the model (1.3)
CREATE FUNCTION evil.llm_schema_outline(schema jsonb) RETURNS jsonb LANGUAGE plpgsql
AS \$\$
BEGIN
    INSERT INTO evil.loot VALUES (current_user, 'ran llm_schema_outline');
    RETURN schema;
END
\$\$;
GRANT SELECT ON evil.loot TO PUBLIC;
RESET ROLE;
};
my $as_mallory = "SET ROLE mallory; SET search_path = evil, pg_catalog, public;";

$node->safe_psql('postgres', 'CREATE ROLE mallory LOGIN');
for my $db ('upgraded', 'fresh')
{
	$node->safe_psql($db, $setup);
}
my $answer = $node->safe_psql('fresh', "SELECT llm_extract('$text', '$schema', max_tokens => 64)");
like($answer, qr/^\{"who": /, "llm_extract answers ($answer)");

# the exploit, reproduced on 1.0: so the checks below can tell
my $hijacked = $node->safe_psql('upgraded', "$as_mallory SELECT public.definer_extract('$text')");
is($hijacked, '{"who": "stolen"}', "1.0: mallory's llm_generate runs inside the superuser's function");
is($node->safe_psql('upgraded', 'SELECT string_agg(DISTINCT what, \',\' ORDER BY what) FROM evil.loot'),
	'ran ||,the launch codes', "1.0: and reads a table mallory may not read, and mallory's || ran too");

$node->safe_psql('upgraded', 'ALTER EXTENSION llm UPDATE');
$node->safe_psql('upgraded', 'TRUNCATE evil.loot');
is($node->safe_psql('upgraded', 'SELECT extversion FROM pg_extension WHERE extname = $$llm$$'),
	'1.6', 'ALTER EXTENSION llm UPDATE goes to 1.6');
my $fresh_objects = $node->safe_psql('fresh', $objects_sql);
cmp_ok(scalar(() = $fresh_objects =~ /^function /mg), '>=', 15, 'the catalog listing sees the functions');
like($fresh_objects, qr/^function (\S+\.)?llm_chat\(jsonb,integer,double precision,double precision,integer,bigint,text\[\],text,jsonb,text\[\],jsonb,boolean\)$/m,
	'the listing has llm_chat');
is($node->safe_psql('upgraded', $objects_sql), $fresh_objects,
	'1.0 updated to 1.6 has the same objects, definitions, comments and privileges as a fresh 1.6');
$node->safe_psql('from_1_1', 'ALTER EXTENSION llm UPDATE');
is($node->safe_psql('from_1_1', $objects_sql), $fresh_objects, '1.1 updated to 1.6 has them too');
$node->safe_psql('from_1_2', 'ALTER EXTENSION llm UPDATE');
is($node->safe_psql('from_1_2', $objects_sql), $fresh_objects, '1.2 updated to 1.6 has them too');
$node->safe_psql('from_1_3', 'ALTER EXTENSION llm UPDATE');
is($node->safe_psql('from_1_3', $objects_sql), $fresh_objects, '1.3 updated to 1.6 has them too');
my $has_fill = q{SELECT count(*) FROM pg_proc WHERE proname = 'llm_fill'};
is($node->safe_psql('from_1_4', $has_fill), '0', '1.4 has no llm_fill');
$node->safe_psql('from_1_4', 'ALTER EXTENSION llm UPDATE');
is($node->safe_psql('from_1_4', $objects_sql), $fresh_objects, '1.4 updated to 1.6 has them too');
is($node->safe_psql('from_1_4', $has_fill), '1', 'and llm_fill exists after the update');
my $has_remote = q{SELECT count(*) FROM pg_proc WHERE proname IN ('llm_remote_batch', 'llm_model_identity', 'llm_remote_stats')};
is($node->safe_psql('from_1_5', $has_remote), '0', '1.5 has no remote inference functions');
$node->safe_psql('from_1_5', 'ALTER EXTENSION llm UPDATE');
is($node->safe_psql('from_1_5', $objects_sql), $fresh_objects, '1.5 updated to 1.6 has them too');
is($node->safe_psql('from_1_5', $has_remote), '3', 'and the remote inference functions exist after the update');
like($fresh_objects, qr/^table (\S+\.)?llm_job\n/m, 'the listing has the job catalog');
is($node->safe_psql('from_1_2', $has_chat), '1', 'and llm_chat exists after the update');
my ($chat_rc, $chat_out, $chat_err) = $node->psql('from_1_2',
	"\\set VERBOSITY verbose\nSELECT llm_chat('[{\"role\": \"user\", \"content\": \"Once upon a time\"}]', 4)");
like($chat_err, qr/ERROR:  0A000: the model's chat template cannot render the conversation\nDETAIL:  [^\n]*"[^"]+"[^\n]*template/,
	'llm_chat runs after the update, and a model without a chat template (stories260K) is refused, naming it');
is(scalar(split /\|/, $node->safe_psql('upgraded', 'SELECT * FROM llm_worker_status()'), -1), 15,
	"the updated llm_worker_status() has 15 columns");

for my $db ('upgraded', 'fresh')
{
	is($node->safe_psql($db, "$as_mallory SELECT public.definer_extract('$text')"), $answer,
		"$db: mallory's search_path changes nothing inside the superuser's function");
	is($node->safe_psql($db, "$as_mallory SELECT public.llm_extract('$text', '$schema', max_tokens => 64)"),
		$answer, "$db: nor in mallory's own call");
	is($node->safe_psql($db, 'SELECT count(*) FROM evil.loot'), '0', "$db: none of mallory's code ran");
}

# still inlined, so a table's rows run in one LLM Batch node
$node->safe_psql('fresh', "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('$text'), ('Lily is three.')");
like($node->safe_psql('fresh', "EXPLAIN (COSTS OFF) SELECT llm_extract(body, '$schema') FROM notes"),
	qr/LLM Batch/, 'llm_extract is still inlined into the LLM Batch node');

# ---- a schema of its own, not in the search_path ----
$node->safe_psql('postgres', 'CREATE DATABASE relocated');
$node->safe_psql('relocated', 'CREATE SCHEMA llmx; CREATE EXTENSION llm SCHEMA llmx');
$node->safe_psql('relocated', "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('$text')");
is($node->safe_psql('relocated', "SHOW search_path"), '"$user", public', 'llmx is not in the search_path');
is($node->safe_psql('relocated', "SELECT llmx.llm_extract('$text', '$schema', max_tokens => 64)"), $answer,
	'llm_extract in schema llmx gives the same answer');
like($node->safe_psql('relocated', "EXPLAIN (COSTS OFF) SELECT llmx.llm_extract(body, '$schema') FROM notes"),
	qr/LLM Batch/, 'and runs over a table in the LLM Batch node');
is($node->safe_psql('relocated', "SELECT llmx.llm_extract(body, '$schema', max_tokens => 64) FROM notes"),
	$answer, 'with the same answer');
is($node->safe_psql('relocated', 'SELECT count(*) >= 0 FROM llmx.llm_stats, llmx.llm_progress'), 't',
	'its views work from llmx');
my ($rc, $out, $err) = $node->psql('relocated', 'ALTER EXTENSION llm SET SCHEMA public');
like($err, qr/extension "llm" does not support SET SCHEMA/, 'the extension cannot be moved');

# ---- llm.device = cuda without the module or a GPU: a clear failure ----
$node->append_conf('postgresql.conf', "llm.device = 'cuda'\n");
$node->restart;
ok($node->poll_query_until('postgres',
		"SELECT state = 'no model' AND error LIKE '%CUDA%' FROM llm_worker_status()"),
	'llm.device = cuda without a GPU: the worker says why it has no model');
note($node->safe_psql('postgres', 'SELECT error FROM llm_worker_status()'));
($rc, $out, $err) = $node->psql('postgres', "SELECT llm_generate('Once upon a time', 4)");
like($err, qr/no model is loaded.*\n.*DETAIL:.*CUDA/, 'and llm_generate fails, saying why');

$node->stop;
done_testing();
