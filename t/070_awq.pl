# Own quantization with AWQ at load: llm.quantize = int4_g32 with
# llm.quantize_calib naming a calibration text serves the model with
# activation-aware scales (the load is logged as such) and it generates; a
# calibration file that is missing, too short or outside llm.model_dir is a
# clear load error (the worker keeps serving the model it had and says
# why), fixed by a reload; a calibration file is ignored when llm.quantize
# is none.
use strict;
use warnings;
use Cwd qw(abs_path);
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

# The calibration text from ../shared, found as the model is (LLM_MODEL_DIR
# is ../shared/models).  tools/pg-test.sh copies only models/ and golden/
# into its scratch directory; there the golden continuations (also
# TinyStories text, longer than one 256-token chunk) stand in.
my $shared = "$ENV{LLM_MODEL_DIR}/..";
my ($calib) = grep { -r $_ } ("$shared/data/stories260K-samples.txt",
	"$shared/golden/stories260K-greedy.tsv");
BAIL_OUT("no calibration text in $shared/data or $shared/golden") unless defined $calib;
$calib = abs_path($calib);
note("calibration text: $calib");

# the calibration text must lie in llm.model_dir, as the model does: a directory of copies
my $dir = PostgreSQL::Test::Utils::tempdir;
my $model = $ENV{LLM_MODEL} // 'stories260K.gguf';
append_to_file("$dir/calib.txt", slurp_file($calib));
append_to_file("$dir/$model", slurp_file("$ENV{LLM_MODEL_DIR}/$model"));
my $outside = $calib;
$calib = "$dir/calib.txt";

my $node = llm_node('awq', 'llm.model_dir' => $dir, 'llm.quantize' => 'int4_g32', 'llm.quantize_calib' => $calib);
llm_wait_state($node);
my $pid = llm_worker_pid($node);

like($node->safe_psql('postgres', 'SELECT weight_types FROM llm_worker_status()'),
	qr/Q4_0/, 'llm.quantize = int4_g32 with a calibration text serves INT4 weights');
like(slurp_file($node->logfile),
	qr/llm worker loaded model ".*"\n.*DETAIL:  .*; weights [^;]*Q4_0[^;]* with AWQ scales from "\Q$calib\E"/,
	'the load is logged with AWQ scales and their calibration text');
isnt($node->safe_psql('postgres', "SELECT llm_generate('Once upon a time', 16)"), '',
	'the AWQ model generates text');

# Point the worker at a bad calibration text; check state, error ($why),
# log ($logged: the ERROR line and what follows) and llm_generate.
sub check_bad_calib
{
	my ($name, $file, $why, $logged) = @_;
	my $log_offset = -s $node->logfile;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET llm.quantize_calib = '$file'; SELECT pg_reload_conf()");
	$node->poll_query_until('postgres',
		"SELECT error ~* \$\$$why\$\$ FROM llm_worker_status()")
	  or die "$name: the worker did not report $why";
	like($node->safe_psql('postgres', 'SELECT state || error FROM llm_worker_status()'),
		qr/^ready.*Still serving/, "$name: the model loaded before keeps serving");
	like(slurp_file($node->logfile, $log_offset), qr/ERROR:  $logged/i,
		"$name: the error is logged");
	isnt($node->safe_psql('postgres', "SELECT llm_generate('Once upon a time', 4)"), '',
		"$name: llm_generate still answers");
}

my $tmp = $dir;
append_to_file("$tmp/short.txt", "Once upon a time there was a cat.\n");

check_bad_calib('missing calibration text', "$tmp/missing.txt",
	'could not access calibration text file ".*missing\.txt": No such file or directory',
	'could not access calibration text file ".*missing\.txt": No such file or directory');
check_bad_calib('calibration text outside llm.model_dir', $outside,
	'calibration text file ".*" is outside llm\.model_dir',
	'calibration text file ".*" is outside llm\.model_dir');
check_bad_calib('calibration text shorter than a chunk', "$tmp/short.txt",
	'with AWQ calibration text ".*short\.txt"\. The calibration text has \d+ tokens, BOS included; AWQ needs at least 256',
	'could not load model file ".*" with AWQ calibration text ".*short\.txt"\n.*DETAIL:  The calibration text has \d+ tokens');

# Ignored without llm.quantize: the float model loads.
$node->safe_psql('postgres',
	    "ALTER SYSTEM SET llm.quantize = 'none'; "
	  . "ALTER SYSTEM SET llm.quantize_calib = '$tmp/missing.txt'; SELECT pg_reload_conf()");
llm_poll($node, "SELECT state = 'ready' AND weight_types NOT LIKE '%Q4_0%' FROM llm_worker_status()");
pass('llm.quantize_calib is ignored when llm.quantize is none');

# Fixed: the AWQ model serves again after a reload, in the same worker.
$node->safe_psql('postgres',
	    "ALTER SYSTEM SET llm.quantize = 'int4_g32'; "
	  . "ALTER SYSTEM SET llm.quantize_calib = '$calib'; SELECT pg_reload_conf()");
llm_poll($node, "SELECT state = 'ready' AND weight_types LIKE '%Q4_0%' FROM llm_worker_status()");
isnt($node->safe_psql('postgres', "SELECT llm_generate('Once upon a time', 16)"), '',
	'after fixing the setting the AWQ model generates');
is(llm_worker_pid($node), $pid, 'the worker kept running throughout');
unlike(slurp_file($node->logfile), qr/"llm worker" \(PID \d+\) exited/,
	'no worker exits, no crash loop');

$node->stop;
done_testing();
