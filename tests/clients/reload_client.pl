#!/usr/bin/perl
# A reload client written from fixture/reload/protocol.md alone (Perl 5, its core modules):
# the tests grade it as any user would, `evlab grade --task reload`.
use strict; use warnings; use IO::Socket::INET; use Time::HiRes qw(sleep);
my ($conf, $version) = @ARGV;
open(my $fh, '<', $conf) or die "cannot read $conf: $!";
my $text = do { local $/; <$fh> }; close $fh;
my ($port) = $text =~ /listen\s+127\.0\.0\.1:(\d+);/ or die "no listen port in $conf\n";
my ($pidfile) = $text =~ /^\s*pid\s+([^;]+);/m or die "no pid directive in $conf\n";
sub served {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 2) or return '';
    print $s "GET /version HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    my $answer = do { local $/; <$s> }; close $s;
    my ($body) = ($answer // '') =~ /\r\n\r\n(.*)\z/s;
    return $body // '';
}
if (served() eq $version) { print qq({"claim": "completed"}\n); exit 0; }
(my $new = $text) =~ s/(location = \/version \{ return 200 ")[^"]*(";)/$1$version$2/
    or die "no version line in $conf\n";
my $tmp = "$conf.new.$$";
open(my $out, '>', $tmp) or die "cannot write $tmp: $!"; print $out $new; close $out or die;
if (system('nginx', '-t', '-q', '-c', $tmp) != 0) { unlink $tmp; print STDERR "nginx -t refused $version\n"; exit 1; }
rename($tmp, $conf) or do { unlink $tmp; die "rename: $!" };
open(my $p, '<', $pidfile) or die "cannot read $pidfile: $!"; my $pid = <$p>; close $p; chomp $pid;
kill 'HUP', $pid or die "cannot signal $pid: $!";
for (1 .. 50) { if (served() eq $version) { print qq({"claim": "completed"}\n); exit 0; } sleep 0.1; }
print STDERR "nginx does not serve $version\n"; exit 1;
