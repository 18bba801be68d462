"""Temporary directories that know their owner, so a run killed with SIGKILL can be swept up
by the next one: a directory whose owning process is gone is stale.

Each directory holds `.evlab-owner` with the owner's pid and its start time (pids are reused,
start times are not). Sweeping also kills what still runs from a stale directory (e.g. a client
of the killed run, which lives in its own session and so outlived it).
"""

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import psutil

from probes.boundary.sandbox import unmount_under

PREFIXES = ("evlab-session-", "evlab-archive-", "evlab-strace-", "evlab-client-", "evlab-worker-",
            "evlab-ship-")
OWNER_FILE = ".evlab-owner"


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def make_owned_dir(prefix: str) -> Path:
    """A new temp dir PREFIX<pid>-XXXX holding its owner record. The name says the owner too:
    a run killed before it wrote the record (between the two calls) still left a dir whose
    owner can be told to be gone."""
    if not prefix.startswith(PREFIXES):
        raise ValueError(f"unknown evlab temp prefix {prefix!r}")
    record = f"{os.getpid()} {_start_time(os.getpid())}\n"
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    (path / OWNER_FILE).write_text(record)
    return path


UNOWNED_GRACE_S = 3600  # a dir without an owner record is left alone this long


def _owner_alive(path: Path) -> bool:
    try:
        pid_text, started = (path / OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        # No record yet (it is being created, or its maker was killed first) or one from an
        # older evlab: it is stale once the pid its name gives has gone, or once it is old, so
        # a concurrent run is never swept from under its feet.
        try:
            young = time.time() - path.stat().st_mtime < UNOWNED_GRACE_S
        except OSError:
            return True
        named = _named_pid(path)
        return young and (named is None or psutil.pid_exists(named))
    return str(_start_time(pid)) == started


def _named_pid(path: Path) -> int | None:
    """The pid in a PREFIX<pid>-XXXX name (None for names from an older evlab)."""
    rest = next((path.name[len(p):] for p in PREFIXES if path.name.startswith(p)), "")
    pid, sep, _ = rest.partition("-")
    return int(pid) if sep and pid.isdigit() else None


def _others(path: Path) -> bool:
    """Another user's directory, which only root sweeps (an unprivileged evlab in a shared /tmp
    can neither remove it nor kill what runs from it)."""
    euid = os.geteuid()
    try:
        return euid != 0 and path.lstat().st_uid != euid
    except OSError:
        return True   # gone already


def sweep_stale(tmp: Path | None = None) -> list[str]:
    """Remove evlab temp dirs whose owner is gone, killing processes still using them.
    Returns one line per thing cleaned, for the record: only what was."""
    tmp = Path(tmp or tempfile.gettempdir())
    cleaned = []
    for path in sorted(tmp.iterdir()):
        if not path.is_dir() or not path.name.startswith(PREFIXES) or _others(path) \
                or _owner_alive(path):
            continue
        for proc in psutil.process_iter(["pid", "cmdline"]):
            if str(path) in " ".join(proc.info["cmdline"] or []):
                try:
                    os.kill(proc.info["pid"], signal.SIGKILL)
                    cleaned.append(f"killed pid {proc.info['pid']} left running from {path}")
                except (ProcessLookupError, PermissionError):   # gone, or not ours to kill
                    pass
        unmount_under(path)   # a sandboxed client's tmpfs home
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            cleaned.append(f"removed stale {path}")
    return cleaned
