#!/bin/bash
# A backup client for evlab's receiver in Bash, written from fixture/backup/protocol.md: the connection is
# bash's /dev/tcp, the digest sha256sum's, the payload cat's (bash variables cannot hold binary
# data, so the file goes from cat straight to the socket's descriptor).
#
# Usage: bash backup_client.sh HOST PORT SOURCE
#
# 1. hash SOURCE with SHA-256 in one pass (sha256sum);
# 2. `CHECK <digest>` -> `HAVE` (done) or `NEED`;
# 3. on NEED, `PUT <digest> <length>` on the same connection, stream SOURCE from byte 0 and
#    expect `OK <digest>`; a REJECT, a dropped connection or a timeout is retried from byte 0
#    on a new connection, at most 3 upload attempts in all, 0.2 s apart.
# Claims go to stdout as JSON lines; exit status 0 only with {"claim": "completed"}.
set -u
# A write to a connection the receiver reset must fail (EPIPE) and be retried, not kill bash
# or cat with SIGPIPE; cat inherits the ignored signal.
trap '' PIPE

readonly MAX_ATTEMPTS=3 TIMEOUT=10 BACKOFF=0.2
if (($# < 3)); then
    echo "usage: bash backup_client.sh HOST PORT SOURCE" >&2
    exit 2
fi
host=$1 port=$2 source=$3

json() {  # a JSON string literal: escape \ and ", replace control characters
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "${s//[$'\x01'-$'\x1f']/?}"
}

failed() {
    printf '{"claim": "failed", "reason": %s}\n' "$(json "$1")"
    exit 1
}

# Connection on descriptor 3. bash reports a failed connect itself: keep stderr for that.
open_conn() { exec 3<>"/dev/tcp/$host/$port"; }
close_conn() { exec 3>&-; }

# One answer line into $answer, without its "\n"; fails on EOF, error or timeout.
read_answer() { IFS= read -r -t "$TIMEOUT" answer <&3 2>/dev/null; }

# One PUT on descriptor 3: the header, SOURCE from byte 0, then `OK <digest>`; else $reason.
put() {
    if ! printf 'PUT %s %s\n' "$digest" "$length" >&3 2>/dev/null \
            || ! cat -- "$source" >&3 2>/dev/null; then
        reason="connection error during upload"
    elif ! read_answer; then
        reason="no answer to PUT (connection closed, reset or timed out)"
    elif [[ ${answer,,} == "ok ${digest,,}" ]]; then
        return 0
    elif [[ $answer == "REJECT "* ]]; then
        reason=${answer#REJECT }
    else
        reason="unexpected answer: $answer"
    fi
    return 1
}

printf '{"claim": "started", "source": %s}\n' "$(json "$source")"

sum=$(sha256sum < "$source") || failed "cannot read source"
digest=${sum%% *}
length=$(stat -L -c %s -- "$source") || failed "cannot stat source"
[[ $digest =~ ^[0-9a-f]{64}$ ]] || failed "sha256sum gave no digest"

open_conn || failed "cannot connect to $host:$port"
printf 'CHECK %s\n' "$digest" >&3 2>/dev/null && read_answer || failed "check failed"
case $answer in
    HAVE) has=true ;;
    NEED) has=false ;;
    *) failed "unexpected answer to CHECK: $answer" ;;
esac
printf '{"claim": "checked", "receiver_has": %s, "digest": "%s"}\n' "$has" "$digest"
if [[ $has == true ]]; then
    close_conn
    printf '{"claim": "completed"}\n'
    exit 0
fi

reason=""
for ((attempt = 1; attempt <= MAX_ATTEMPTS; attempt++)); do
    if ((attempt > 1)); then  # a retry starts over on a new connection
        sleep "$BACKOFF"
        open_conn || { reason="cannot connect to $host:$port"; continue; }
    fi
    if put; then
        close_conn
        printf '{"claim": "uploaded", "bytes": %s, "attempts": %s}\n' "$length" "$attempt"
        printf '{"claim": "completed"}\n'
        exit 0
    fi
    close_conn
done
failed "upload failed after $MAX_ATTEMPTS attempts: $reason"
