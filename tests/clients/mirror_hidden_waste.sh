#!/bin/bash
# An adversary of cpu-budget's allowance per program started (#44): the honest Bash mirror
# client (mirror_client.sh, sourced: the same work, the same programs), with waste hidden
# behind every program it starts. Usage: mirror_hidden_waste.sh SRC DST MODE N
#   spin N   each program started comes with N ms of the shell's own CPU, burnt in pieces of
#            well under the collector's 2 ms busy stretch with a progress syscall (a read of
#            /proc) between them: only the CPU total can see it
#   idle N   each program started comes with N more that do nothing (/bin/true)
set -u
mode=$3 n=$4

burn() {   # burn N ms of this shell's CPU time (its scheduler runtime, not the clock's)
    local start now _ i
    read -r start _ < "/proc/$BASHPID/schedstat"
    now=$start
    while ((now - start < n * 1000000)); do
        for ((i = 0; i < 250; i++)); do :; done   # ~0.5 ms here: a few reads a program
        read -r now _ < "/proc/$BASHPID/schedstat"
    done
}

extra() {
    case $mode in
    spin) burn ;;
    idle) for ((k = 0; k < n; k++)); do /bin/true; done ;;
    *) echo "mirror_hidden_waste: unknown mode $mode" >&2; exit 2 ;;
    esac
}

# the honest client's programs, each with its extra; `command` runs the real one
cp() { extra; command cp "$@"; }
mv() { extra; command mv "$@"; }
ln() { extra; command ln "$@"; }
rm() { extra; command rm "$@"; }
mkdir() { extra; command mkdir "$@"; }

set -- "$1" "$2"
source "$(dirname -- "${BASH_SOURCE[0]}")/mirror_client.sh"
