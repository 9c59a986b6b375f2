# The model file: missing, invalid, outside llm.model_dir or not set, the
# worker logs a clear error and keeps running without a model (no crash
# loop), llm_generate says no model is loaded, and llm_worker_status()
# says why; fixing the setting and reloading brings the model in.  A role
# outside pg_read_all_settings gets the model's file name and no path under
# llm.model_dir, in errors as in llm_worker_status().  Also: the library
# refuses to load unless preloaded.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use Cwd qw(realpath);
use LlmTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $model_dir = $ENV{LLM_MODEL_DIR};
my $model = $ENV{LLM_MODEL} // 'stories260K.gguf';

my $node = llm_node('model', 'llm.model' => 'missing.gguf');
llm_wait_state($node, 'no model');
my $pid = llm_worker_pid($node);
$node->safe_psql('postgres', 'CREATE ROLE llm_plain');

# Point the worker at a model; check state, error, log and llm_generate.
sub check_bad_model
{
	my ($name, $dir, $file, $why) = @_;
	my $log_offset = -s $node->logfile;
	$node->safe_psql('postgres',
		    "ALTER SYSTEM SET llm.model_dir = '$dir'; "
		  . "ALTER SYSTEM SET llm.model = '$file'; SELECT pg_reload_conf()");
	$node->poll_query_until('postgres',
		"SELECT error ~* \$\$$why\$\$ FROM llm_worker_status()")
	  or die "$name: the worker did not report $why";
	is($node->safe_psql('postgres', 'SELECT state FROM llm_worker_status()'),
		'no model', "$name: no model");
	like(slurp_file($node->logfile, $log_offset), qr/ERROR:  .*$why/i,
		"$name: the error is logged");
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT llm_generate('Once upon a time', 4)");
	like($err, qr/ERROR:  no model is loaded\nDETAIL:  .*$why.*\nHINT:  Set llm.model/i,
		"$name: llm_generate says no model is loaded, and why");
	check_plain_role($name, $dir, $file);
}

# A role outside pg_read_all_settings: the file's name, no path under the directory.
sub check_plain_role
{
	my ($name, $dir, $file) = @_;
	my $base = $file =~ s{.*/}{}r;
	my $paths = join('|', map { quotemeta } grep { defined } $dir, realpath($dir), $model_dir, realpath($model_dir));
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET ROLE llm_plain; SELECT llm_generate('Once upon a time', 4)");
	like($err,
		qr/ERROR:  no model is loaded\nDETAIL:  Model file "\Q$base\E" could not be loaded \(members of pg_read_all_settings see why\)\.\nHINT:  Set llm.model/,
		"$name: a plain role is told the file's name");
	unlike($err, qr/$paths/, "$name: and no path under llm.model_dir");
	($rc, $out, $err) = $node->psql('postgres',
		"SET ROLE llm_plain; SELECT error FROM llm_generate_batch(ARRAY['Once upon a time'], 4, on_error => 'null')");
	like($out, qr/^no model is loaded: Model file "\Q$base\E" could not be loaded/,
		"$name: llm_generate_batch's error column tells a plain role the file's name");
	unlike($out, qr/$paths/, "$name: and no path under llm.model_dir");
	my $status = $node->safe_psql('postgres',
		"SET ROLE llm_plain; SELECT error, model_path IS NULL FROM llm_worker_status()");
	like($status, qr/^Model file "\Q$base\E" could not be loaded.*\|t$/,
		"$name: llm_worker_status() tells a plain role the same");
	unlike($status, qr/$paths/, "$name: and no path under llm.model_dir");
}

my $bad_dir = PostgreSQL::Test::Utils::tempdir;
append_to_file("$bad_dir/garbage.gguf", "this is not a model\n" x 10);
my $real = slurp_file("$model_dir/$model");
append_to_file("$bad_dir/truncated.gguf", substr($real, 0, 4096));

like($node->safe_psql('postgres', 'SELECT error FROM llm_worker_status()'),
	qr/Could not access model file ".*missing\.gguf": No such file or directory/,
	'missing file: llm_worker_status says why');
check_bad_model('missing file', $model_dir, 'missing.gguf', 'missing\.gguf');
check_bad_model('missing secret file', $model_dir, 'nonexistent-secret-name.gguf',
	'nonexistent-secret-name\.gguf');
my ($rc, $out, $err) = $node->psql('postgres', "SELECT llm_generate('Once upon a time', 4)");
like($err, qr/DETAIL:  Could not access model file "\Q$model_dir\E\/nonexistent-secret-name\.gguf": No such file/,
	'a superuser sees the full path');
check_bad_model('garbage file', $bad_dir, 'garbage.gguf', 'garbage\.gguf');
check_bad_model('truncated file', $bad_dir, 'truncated.gguf', 'truncated\.gguf');
check_bad_model('outside the directory', $bad_dir, "$model_dir/$model",
	'is outside llm\.model_dir');
check_bad_model('escaping the directory', $bad_dir, "../$model", 'outside llm\.model_dir|could not access');
check_bad_model('missing directory', "$bad_dir/nope", $model,
	'could not access model directory');

is(llm_worker_pid($node), $pid, 'the worker kept running throughout');
unlike(slurp_file($node->logfile), qr/"llm worker" \(PID \d+\) exited/,
	'no worker exits, no crash loop');

# Not set at all.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.model = ''; SELECT pg_reload_conf()");
$node->poll_query_until('postgres',
	"SELECT error = 'llm.model is not set.' FROM llm_worker_status()")
  or die 'empty llm.model not reported';
pass('an empty llm.model is reported');

# Fixed: the worker loads the model on reload.
$node->safe_psql('postgres',
	    "ALTER SYSTEM SET llm.model_dir = '$model_dir'; "
	  . "ALTER SYSTEM SET llm.model = '$model'; SELECT pg_reload_conf()");
llm_wait_state($node);
is($node->safe_psql('postgres', "SELECT llm_generate('Once upon a time', 4)"),
	', there was a', 'after fixing the setting the model serves');
is(llm_worker_pid($node), $pid, 'in the same worker');

# A failed reload beside a serving model: a plain role is told the serving
# model's file name and no path under llm.model_dir; a superuser sees why.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.model = 'nonexistent-secret-name.gguf'; SELECT pg_reload_conf()");
llm_poll($node, 'SELECT error IS NOT NULL FROM llm_worker_status()');
is($node->safe_psql('postgres', 'SET ROLE llm_plain; SELECT state, error FROM llm_worker_status()'),
	qq{ready|The new settings were not applied (members of pg_read_all_settings see why). Still serving "$model".},
	'a failed reload: a plain role sees the serving file name, no path');
like($node->safe_psql('postgres', 'SELECT error FROM llm_worker_status()'),
	qr/^The new settings were not applied: Could not access model file "\Q$model_dir\E\/nonexistent-secret-name\.gguf"/,
	'a failed reload: a superuser sees the path');
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.model = '$model'; SELECT pg_reload_conf()");
llm_poll($node, 'SELECT error IS NULL FROM llm_worker_status()');
like(slurp_file($node->logfile), qr/llm worker loaded model ".*\Q$model\E"\n.*DETAIL:  Architecture llama, \d+ parameters/,
	'the load is logged with the model\'s description');

# Own quantization at load: llm.quantize = int8 serves the float model as INT8 (Q8_0 blocks).
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.quantize = 'int8'; SELECT pg_reload_conf()");
llm_poll($node, "SELECT weight_types LIKE '%Q8_0%' FROM llm_worker_status() WHERE state = 'ready'");
like($node->safe_psql('postgres', 'SELECT weight_types FROM llm_worker_status()'),
	qr/Q8_0/, 'llm.quantize = int8 reloads the model with INT8 weights');
isnt($node->safe_psql('postgres', "SELECT llm_generate('Once upon a time', 8)"), '',
	'the INT8 model generates');
$node->safe_psql('postgres', "ALTER SYSTEM RESET llm.quantize; SELECT pg_reload_conf()");
llm_poll($node, "SELECT weight_types NOT LIKE '%Q8_0%' FROM llm_worker_status() WHERE state = 'ready'");

# A device this machine lacks (a build without CUDA, or no GPU visible):
# the worker runs without a model and says why.
$node->append_conf('postgresql.conf', "llm.device = 'cuda'");
$node->restart;
llm_wait_state($node, 'no model');
like($node->safe_psql('postgres', 'SELECT error FROM llm_worker_status()'),
	qr/Could not start the inference engine .*CUDA/,
	'llm.device = cuda without a usable GPU is refused with the reason');
$node->stop;

# Without shared_preload_libraries the library refuses to load.
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->start;
($rc, $out, $err) = $plain->psql('postgres', 'CREATE EXTENSION llm');
like($err, qr/ERROR:  llm must be loaded via shared_preload_libraries\nHINT:  Add "llm" to shared_preload_libraries and restart the server\./,
	'CREATE EXTENSION without preloading fails with a hint');
$plain->stop;

done_testing();
