#!/usr/bin/perl
# An honest rotate client (issue 47), written from fixture/rotate/protocol.md alone, in Perl
# with its core modules only (no logrotate).
#
#     rotate_client.pl LOG PIDFILE
#
# The older logs moved along (LOG.N to LOG.N+1, LOG.N.gz to LOG.N+1.gz, the oldest first), LOG
# renamed to LOG.1, USR1 to nginx's master, then the fresh LOG nginx made confirmed.
use strict;
use warnings;
use File::Basename qw(basename dirname);
use Time::HiRes qw(sleep);

sub fail { print STDERR "rotate_client: @_\n"; exit 1; }

@ARGV == 2 or fail("usage: rotate_client.pl LOG PIDFILE");
my ($log, $pidfile) = @ARGV;

-f $log or fail("no log to rotate at $log");

# the master's pid, checked before anything is moved
open(my $pf, '<', $pidfile) or fail("cannot read $pidfile: $!");
my $pid = <$pf>;
close($pf);
defined $pid && $pid =~ /^\s*(\d+)\s*$/ or fail("no pid in $pidfile");
$pid = $1;
kill(0, $pid) or fail("nginx's master (pid $pid) is not running: $!");

# the older logs, LOG.N and LOG.N.gz, moved along from the oldest down: none overwritten
my ($dir, $base) = (dirname($log), basename($log));
opendir(my $dh, $dir) or fail("cannot list $dir: $!");
my @older;
for my $name (readdir($dh)) {
    push @older, [$1, $2 // ''] if $name =~ /^\Q$base\E\.(\d+)(\.gz)?$/ && $1 > 0;
}
closedir($dh);
for my $old (sort { $b->[0] <=> $a->[0] || $a->[1] cmp $b->[1] } @older) {
    my ($n, $gz) = @$old;
    my ($from, $to) = ("$log.$n$gz", "$log." . ($n + 1) . $gz);
    fail("$to is in the way of $from") if -e $to;
    rename($from, $to) or fail("cannot rename $from to $to: $!");
}

# LOG becomes LOG.1 by a rename: nginx keeps writing it until it reopens its logs
rename($log, "$log.1") or fail("cannot rename $log to $log.1: $!");
my $rotated = (stat("$log.1"))[1];

# nginx told to reopen its logs
kill('USR1', $pid) or fail("cannot signal nginx's master (pid $pid): $!");

# the fresh LOG nginx made (not the rotated one)
for (1 .. 100) {
    my @st = stat($log);
    if (@st && $st[1] != $rotated) {
        print "{\"claim\": \"completed\"}\n";
        exit 0;
    }
    sleep(0.1);
}
fail("nginx did not make a fresh $log within 10 s of USR1");
