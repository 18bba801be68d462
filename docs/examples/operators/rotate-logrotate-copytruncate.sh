#!/bin/sh
# logrotate with copytruncate (the log copied, then the live one truncated), run as an
# operator runs it on demand: its configuration and state in the working
# directory, forced (its state is new each run)
log=$1 pidfile=$2
cat > rotate.conf <<CONF
$log {
    rotate 5
    compress
    delaycompress
    copytruncate
}
CONF
exec logrotate -f -s "$PWD/rotate.state" "$PWD/rotate.conf"
