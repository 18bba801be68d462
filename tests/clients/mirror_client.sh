#!/bin/bash
# A mirror client in Bash, written from fixture/mirror/protocol.md alone, the way a shell script
# usually does it: one `find` per tree to list names, types, sizes and modification times, then
# one process per change (cp --preserve=timestamps to a temporary name and mv over the final
# name; ln -s for a link; mkdir; rm for what the source lacks). Usage: mirror_client.sh SRC DST
set -u
src=${1%/} dst=${2%/}
failed=0

# name -> "TYPE SIZE MTIME" (TYPE as find's %y), and a link's target apart
declare -A have want have_link want_link

# find's listings go through files in the working directory, not `< <(find)`: `wait $!` on a
# process substitution that bash has already reaped says 127 now and then, a failure that
# never was
listing=.mirror-listing.$$
trap 'rm -f -- "$listing"' EXIT

list() {   # list TREE MAP LINKS: fill the maps from one find over TREE
    local -n kinds=$2 targets=$3
    local rel kind stamp link
    find "$1" -mindepth 1 -printf '%P\0%y\0%s %T@\0%l\0' > "$listing" || return 1
    while IFS= read -r -d '' rel && IFS= read -r -d '' kind && IFS= read -r -d '' stamp \
            && IFS= read -r -d '' link; do
        kinds[$rel]="$kind $stamp"
        [[ $kind == l ]] && targets[$rel]=$link
    done < "$listing"
    return 0
}

temp_for() {   # tmp: a temporary name beside the target's NAME, in its folder (set, not
    # printed: $(...) would fork a subshell per file)
    local dir=${1%/*}
    [[ $1 == */* ]] || dir=.
    tmp=$dst/$dir/.${1##*/}.mirror-$$
}

list "$src" want want_link || failed=1
list "$dst" have have_link || failed=1

# 1. what the target holds that the source lacks, or holds as another type: removed
gone=()
for rel in "${!have[@]}"; do
    kind=${have[$rel]%% *}
    [[ ${want[$rel]-} == "$kind "* ]] && continue
    gone+=("$rel")
done
for rel in "${gone[@]}"; do
    [[ -e $dst/$rel || -L $dst/$rel ]] || continue   # inside a folder already removed
    rm -rf -- "${dst:?}/$rel" || failed=1
    have[$rel]=""
done

# 2. the source's names in find's order (a folder before what it holds): made or copied
find "$src" -mindepth 1 -printf '%P\0' > "$listing" || failed=1
while IFS= read -r -d '' rel; do
    kind=${want[$rel]%% *}
    case $kind in
    d)
        [[ ${have[$rel]-} == "d "* ]] || mkdir -- "$dst/$rel" || failed=1
        ;;
    f)
        [[ ${have[$rel]-} == "${want[$rel]}" ]] && continue
        temp_for "$rel"
        if cp --preserve=timestamps -- "$src/$rel" "$tmp" && mv -f -- "$tmp" "$dst/$rel"; then
            :
        else
            rm -f -- "$tmp"
            failed=1
        fi
        ;;
    l)
        [[ ${have[$rel]-} == "l "* && ${have_link[$rel]} == "${want_link[$rel]}" ]] && continue
        temp_for "$rel"
        if ln -s -- "${want_link[$rel]}" "$tmp" && mv -fT -- "$tmp" "$dst/$rel"; then
            :
        else
            rm -f -- "$tmp"
            failed=1
        fi
        ;;
    esac
done < "$listing"

if ((failed)); then
    echo "mirror: not every change could be made" >&2
    exit 1
fi
echo '{"claim": "completed"}'
