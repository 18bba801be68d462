#!/usr/bin/env bash
# The project's venv: evlab and its dev tools, plus Debian's BCC bindings made importable.
# BCC's Python package is pure Python (it loads libbcc.so.0 through ctypes); PyPI's "bcc"
# is an unrelated project, so link Debian's copy in rather than exposing all of dist-packages.
set -euo pipefail
venv="$1"; python="${2:-python3}"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
log=$(mktemp); trap 'rm -f "$log"' EXIT
# editable_mode=compat: the project's folder on sys.path through a plain .pth line, where the
# default's import hook costs every Python start from the venv ~13 ms of CPU (24 -> 11 ms for
# `python -c pass`), and a run of the tests starts hundreds (spawners, labs, Ray's workers)
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev,ray,inspect]' \
    --config-settings editable_mode=compat >"$log" 2>&1; then
  grep -v 'is ignored: it is neither a file nor a directory' "$log" >&2; exit 1
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -d /usr/lib/python3/dist-packages/bcc ]; then
  ln -sfn /usr/lib/python3/dist-packages/bcc "$site/bcc"
else
  echo "setup: Debian's python3-bpfcc is missing; the BCC collector will be unavailable" >&2
fi
