# Shared memory goes back to the system: after a batch of 120 prompts of
# 1 MB (each failing, NULL by on_error, as too long for the context), the
# DSA segments that held them are unmapped by the worker and by the
# session that sent them, which stays connected, within 10 s of the worker
# going idle: the server's processes map less than 32 MB of /dev/shm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;

use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
no warnings 'portable';    # 64-bit addresses in /proc/PID/maps

plan skip_all => 'no /proc' unless -d '/proc/self';

my $node = llm_node('shm_return', 'llm.threads' => 1);
llm_wait_state($node);

# MB of /dev/shm segments mapped by the postmaster and its children (unlinked ones too: their memory stays
# while mapped); with who, also a line per process mapping any.
sub mapped_mb
{
	my ($who) = @_;
	my ($pm) = split /\n/, slurp_file($node->data_dir . '/postmaster.pid');
	my @pids = ($pm);
	opendir(my $proc, '/proc') or die "opendir /proc: $!";
	for my $p (grep { /^\d+$/ } readdir $proc)
	{
		open(my $f, '<', "/proc/$p/stat") or next;
		my $stat = <$f> // '';
		close $f;
		push @pids, $p if $stat =~ /\) \S+ (\d+)/ && $1 == $pm;
	}
	closedir $proc;
	my %size;
	for my $p (@pids)
	{
		my $mine = 0;
		open(my $m, '<', "/proc/$p/maps") or next;
		while (<$m>)
		{
			next unless m{^([0-9a-f]+)-([0-9a-f]+) .*(/dev/shm/PostgreSQL\.\d+)};
			my $bytes = hex($2) - hex($1);
			$mine += $bytes;
			$size{$3} = $bytes if !defined $size{$3} || $bytes > $size{$3};
		}
		close $m;
		if ($who && $mine > 0)
		{
			my $cmd = slurp_file("/proc/$p/cmdline") =~ s/\0/ /gr;
			diag(sprintf('pid %d (%s) maps %.1f MB', $p, $cmd, $mine / 1048576));
		}
	}
	my $total = 0;
	$total += $_ for values %size;
	return $total / 1048576;
}

my $before = mapped_mb();
note(sprintf('mapped before: %.1f MB', $before));

# the session sends the batch, then stays connected (sleeping) while we look
my $q = llm_start_query($node,
	"SELECT count(*), count(error) FROM llm_generate_batch(array_fill(repeat('a ', 500000), ARRAY[120]), 1, "
	  . "on_error => 'null')",
	'SELECT pg_sleep(60)');
$q->{h}->pump until $q->{out} =~ /\n/;
is((split /\n/, $q->{out})[0], '120|120', 'the 120 prompts of 1 MB each failed, NULL, with a reason');

# within 10 s of idle the segments are gone from every process
my $start = time;
my $mb = mapped_mb();
while ($mb >= 32 && time - $start < 10)
{
	usleep(200_000);
	$mb = mapped_mb();
}
cmp_ok($mb, '<', 32, sprintf('%.1f MB of /dev/shm mapped %.1f s after the batch, the session still connected', $mb, time - $start))
  or mapped_mb(1);

$q->{h}->kill_kill;
$node->stop;
done_testing();
