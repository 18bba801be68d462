#!/bin/bash
# An honest reload client (issue 47), written from fixture/reload/protocol.md alone, in Bash
# with coreutils and the nginx binary (no curl: HTTP by bash's /dev/tcp).
#
#     reload_client.sh CONF VERSION
#
# Make nginx serve VERSION at /version: a new configuration written beside CONF, tested with
# `nginx -t`, renamed over CONF, applied by `nginx -s reload`; then /version confirmed.
set -u

conf=$1
version=$2

fail() { echo "reload_client: $*" >&2; exit 1; }

[ -f "$conf" ] || fail "no configuration at $conf"

# the port from CONF's listen directive (`listen 127.0.0.1:PORT;` or `listen PORT;`)
port=
while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line =~ ^[[:space:]]*listen[[:space:]]+([^;[:space:]]+) ]]; then
        port=${BASH_REMATCH[1]##*:}
        break
    fi
done < "$conf"
[[ $port =~ ^[0-9]+$ ]] || fail "no port in $conf's listen directive"

# GET /version: its body on stdout, status 0 only for a 200
served() {
    local status body line
    exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
    printf 'GET /version HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
    IFS= read -r status <&3 || { exec 3<&-; return 1; }
    while IFS= read -r line <&3; do          # the headers, up to the empty line
        [ "${line%$'\r'}" = "" ] && break
    done
    body=$(cat <&3)
    exec 3<&-
    [[ $status =~ ^HTTP/[0-9.]+\ 200 ]] || return 1
    printf '%s' "$body"
}

done_() { echo '{"claim": "completed"}'; exit 0; }

# a re-run: nothing to change, nothing to send
now=$(served) && [ "$now" = "$version" ] && done_

# the new configuration, beside CONF: the version line's string replaced, all else as it was
dir=$(dirname -- "$conf")
new=$(mktemp -- "$dir/.nginx.conf.XXXXXX") || fail "cannot create a file beside $conf"
trap 'rm -f -- "$new"' EXIT
found=0
while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line =~ ^(.*location[[:space:]]*=[[:space:]]*/version[[:space:]]*\{[[:space:]]*return[[:space:]]+200[[:space:]]+\")[^\"]*(\".*)$ ]]; then
        line="${BASH_REMATCH[1]}${version}${BASH_REMATCH[2]}"
        found=1
    fi
    printf '%s\n' "$line"
done < "$conf" > "$new" || fail "cannot write $new"
[ "$found" = 1 ] || fail "no 'location = /version { return 200 \"...\"; }' line in $conf"
chmod --reference="$conf" -- "$new" 2>/dev/null

# tested before it is applied
if ! out=$(nginx -t -c "$new" 2>&1); then
    fail "the configuration with version '$version' is invalid, nothing changed: $out"
fi

mv -f -- "$new" "$conf" || fail "cannot rename the new configuration over $conf"
trap - EXIT

out=$(nginx -s reload -c "$conf" 2>&1) || fail "nginx -s reload failed: $out"

# confirmed: /version answers VERSION (the workers replaced within a few seconds)
for _ in $(seq 1 100); do
    now=$(served) && [ "$now" = "$version" ] && done_
    sleep 0.1
done
fail "nginx still serves '${now:-nothing}' at /version, not '$version'"
