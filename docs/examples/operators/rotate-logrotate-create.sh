#!/bin/sh
# logrotate with create and a postrotate that sends USR1 to nginx's master, run as an
# operator runs it on demand: its configuration and state in the working
# directory, forced (its state is new each run)
log=$1 pidfile=$2
cat > rotate.conf <<CONF
$log {
    rotate 5
    compress
    delaycompress
    create
    postrotate
        kill -USR1 \$(cat $pidfile)
    endscript
}
CONF
exec logrotate -f -s "$PWD/rotate.state" "$PWD/rotate.conf"
