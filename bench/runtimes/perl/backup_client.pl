#!/usr/bin/perl
# A backup client for evlab's receiver in Perl 5 (core modules only), written from
# fixture/backup/protocol.md.
#
# Usage: perl backup_client.pl HOST PORT SOURCE
#
# 1. hash SOURCE with SHA-256 in one streaming pass;
# 2. `CHECK <digest>` -> `HAVE` (done) or `NEED`;
# 3. on NEED, `PUT <digest> <length>` on the same connection, stream SOURCE from byte 0 and
#    expect `OK <digest>`; a REJECT, a dropped connection or a timeout is retried from byte 0
#    on a new connection, at most 3 upload attempts in all, 0.2 s apart.
# Claims go to stdout as JSON lines; exit status 0 only with {"claim": "completed"}.
use strict;
use warnings;
use Digest::SHA;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use Time::HiRes qw(sleep);

use constant { CHUNK => 64 * 1024, TIMEOUT => 10, MAX_ATTEMPTS => 3, BACKOFF => 0.2,
               MAX_LINE => 256 };

# A write to a connection the receiver reset must be an error we retry, not a fatal signal.
$SIG{PIPE} = 'IGNORE';
$| = 1;
my $JSON = JSON::PP->new->canonical;

sub claim {
    my ($name, %fields) = @_;
    print $JSON->encode({claim => $name, %fields}), "\n";
}

# SHA-256 hex digest and length of a file, in one streaming pass.
sub hash_file {
    my ($path) = @_;
    open(my $fh, '<:raw', $path) or die "cannot read source: $!\n";
    my ($sha, $length, $buf, $n) = (Digest::SHA->new(256), 0);
    while ($n = sysread($fh, $buf, CHUNK)) {
        $sha->add($buf);
        $length += $n;
    }
    defined $n or die "cannot read source: $!\n";
    close($fh);
    return ($sha->hexdigest, $length);
}

sub connect_to {
    my ($host, $port) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp',
                                     Timeout => TIMEOUT)
        or die "cannot connect: $@\n";
    return $sock;
}

sub send_all {
    my ($sock, $data) = @_;
    while (length $data) {
        my $n = syswrite($sock, $data) // die "send failed: $!\n";
        substr($data, 0, $n) = '';
    }
}

# One answer line without its "\n", read byte by byte so nothing past it is consumed.
sub read_line {
    my ($sock) = @_;
    my ($line, $byte) = ('');
    my $ready = IO::Select->new($sock);
    while (1) {
        $ready->can_read(TIMEOUT) or die "no answer within " . TIMEOUT . " s\n";
        my $n = sysread($sock, $byte, 1) // die "receive failed: $!\n";
        $n or die "connection closed before a full answer\n";
        return $line if $byte eq "\n";
        length($line) < MAX_LINE or die "answer line too long\n";
        $line .= $byte;
    }
}

# One PUT: the header, SOURCE from byte 0, then the answer must be `OK <digest>`.
sub put {
    my ($sock, $path, $digest, $length) = @_;
    send_all($sock, "PUT $digest $length\n");
    open(my $fh, '<:raw', $path) or die "cannot read source: $!\n";
    my ($sent, $buf) = (0);
    while ($sent < $length) {
        my $want = $length - $sent < CHUNK ? $length - $sent : CHUNK;
        my $n = sysread($fh, $buf, $want) // die "cannot read source: $!\n";
        $n or die "source shrank to $sent bytes during the upload\n";
        send_all($sock, $buf);
        $sent += $n;
    }
    close($fh);
    my $answer = read_line($sock);
    return if lc($answer) eq lc("OK $digest");
    die(($answer =~ /^REJECT (.*)/ ? $1 : "unexpected answer: $answer") . "\n");
}

# The backup; dies with the reason when it fails.
sub backup {
    my ($host, $port, $path) = @_;
    my ($digest, $length) = hash_file($path);
    my $sock = connect_to($host, $port);
    my $answer = eval { send_all($sock, "CHECK $digest\n"); read_line($sock) }
        // die "check failed: $@";
    $answer eq 'HAVE' || $answer eq 'NEED' or die "unexpected answer to CHECK: $answer\n";
    claim('checked', receiver_has => ($answer eq 'HAVE' ? JSON::PP::true : JSON::PP::false),
          digest => $digest);
    if ($answer eq 'HAVE') {
        close($sock);
        return;
    }
    my $reason;
    for my $attempt (1 .. MAX_ATTEMPTS) {
        my $ok = eval {
            if ($attempt > 1) {  # a retry starts over on a new connection
                sleep(BACKOFF);
                $sock = connect_to($host, $port);
            }
            put($sock, $path, $digest, $length);
            1;
        };
        $reason = $@;
        close($sock) if $sock;
        $sock = undef;
        if ($ok) {
            claim('uploaded', bytes => $length, attempts => $attempt);
            return;
        }
    }
    die "upload failed after " . MAX_ATTEMPTS . " attempts: $reason";
}

@ARGV >= 3 or die "usage: perl backup_client.pl HOST PORT SOURCE\n";
my ($host, $port, $source) = @ARGV;
claim('started', source => $source);
if (eval { backup($host, $port, $source); 1 }) {
    claim('completed');
    exit 0;
}
(my $reason = $@) =~ s/\s+\z//;
claim('failed', reason => $reason);
exit 1;
