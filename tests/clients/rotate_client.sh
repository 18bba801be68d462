#!/bin/bash
# An honest rotate client (issue 47), written from fixture/rotate/protocol.md alone, in Bash
# with coreutils (no logrotate).
#
#     rotate_client.sh LOG PIDFILE
#
# The older logs moved along (LOG.N to LOG.N+1, LOG.N.gz to LOG.N+1.gz, the oldest first), LOG
# renamed to LOG.1, USR1 to nginx's master, then the fresh LOG nginx made confirmed.
set -u
shopt -s nullglob

fail() { echo "rotate_client: $*" >&2; exit 1; }

[ $# -eq 2 ] || fail "usage: rotate_client.sh LOG PIDFILE"
log=$1
pidfile=$2

[ -f "$log" ] || fail "no log to rotate at $log"

# the master's pid, checked before anything is moved
read -r pid < "$pidfile" || [ -n "${pid:-}" ] || fail "cannot read $pidfile"
pid=${pid//[[:space:]]/}
[[ $pid =~ ^[0-9]+$ ]] || fail "no pid in $pidfile"
kill -0 "$pid" 2>/dev/null || fail "nginx's master (pid $pid) is not running"

# the older logs, LOG.N and LOG.N.gz, moved along from the oldest down: none overwritten
older=()
for f in "$log".*; do
    suffix=${f#"$log".}
    [[ $suffix =~ ^([0-9]+)(\.gz)?$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] &&
        older+=("$((10#${BASH_REMATCH[1]})) ${BASH_REMATCH[2]}")
done
while read -r n gz; do
    [ -n "$n" ] || continue
    from="$log.$n${gz:-}" to="$log.$((n + 1))${gz:-}"
    [ -e "$to" ] && fail "$to is in the way of $from"
    mv -- "$from" "$to" || fail "cannot rename $from to $to"
done < <(printf '%s\n' "${older[@]}" | sort -rn)

# LOG becomes LOG.1 by a rename: nginx keeps writing it until it reopens its logs
[ -e "$log.1" ] && fail "$log.1 is in the way of $log"
mv -- "$log" "$log.1" || fail "cannot rename $log to $log.1"
rotated=$(stat -c %i -- "$log.1") || fail "cannot stat $log.1"

# nginx told to reopen its logs
kill -USR1 "$pid" || fail "cannot signal nginx's master (pid $pid)"

# the fresh LOG nginx made (not the rotated one)
for _ in $(seq 1 100); do
    if [ -e "$log" ] && [ "$(stat -c %i -- "$log" 2>/dev/null)" != "$rotated" ]; then
        echo '{"claim": "completed"}'
        exit 0
    fi
    sleep 0.1
done
fail "nginx did not make a fresh $log within 10 s of USR1"
