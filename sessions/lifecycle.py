"""The harness's lifecycle checks for a grading attempt, each returned as one evidence event.

- cleanup: once an invocation has exited — which processes of its tree still run (the kernel's
  view when BCC tracks the tree, else a scan of its session), what they listen on, what files it
  left in its working directory and in the receiver's store. Leftover processes are then killed:
  nothing the client started outlives the attempt.
- durability: after the receiver was SIGKILLed and restarted on its store, does it still hold the
  backup (CHECK over the protocol, and the file's sha256)?
- restore: can the backup be fetched back (GET) into a fresh directory, byte for byte?
"""

import hashlib
import os
import signal
import time
from pathlib import Path

import psutil

from fixture.receiver import BACKUP_NAME
from fixture.restore import check, fetch
from sessions.events import CleanupObserved, LifecycleCheck

MAX_LISTED = 50   # files named in one event; more are summarised as a count


def _tgid(tid: int) -> int | None:
    try:
        for line in Path(f"/proc/{tid}/status").read_text().splitlines():
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _session_members(client_pid: int) -> set[int]:
    """Processes still in the client's session or process group (it was started in its own)."""
    found = set()
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == client_pid or os.getpgid(proc.pid) == client_pid:
                found.add(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def _describe(pid: int) -> str:
    try:
        cmd = " ".join(psutil.Process(pid).cmdline()) or psutil.Process(pid).name()
    except psutil.Error:
        cmd = "?"
    return f"{pid} {cmd[:200]}"


def _listening(pids: set[int]) -> list[str]:
    out = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            out.append(f"{conn.laddr.ip}:{conn.laddr.port} ({conn.pid})")
    return sorted(out)


def _files(root: Path, skip: set[str] = frozenset()) -> tuple[str, ...]:
    names = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        names += [str(rel / name) for name in filenames if str(rel / name) not in skip]
        names += [str(rel / d) + "/" for d in dirnames if not os.listdir(Path(dirpath) / d)]
    names.sort()
    if len(names) > MAX_LISTED:
        names = names[:MAX_LISTED] + [f"... and {len(names) - MAX_LISTED} more"]
    return tuple(names)


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.01)


def _running(pid: int) -> bool:
    # A killed orphan stays a zombie until init reaps it (which may be never in a container).
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def cleanup_check(scenario: str, n: int, client_pid: int, live_tasks: list[int] | None,
                  cwd: Path, store: Path) -> CleanupObserved:
    pids = _session_members(client_pid)
    for tid in live_tasks or ():
        tgid = _tgid(tid)
        if tgid is not None and tgid != os.getpid():
            pids.add(tgid)
    event = CleanupObserved(
        time.monotonic_ns(), scenario, n, tuple(_describe(p) for p in sorted(pids)),
        tuple(_listening(pids)), _files(cwd), _files(store, skip={BACKUP_NAME}),
        kernel_view=live_tasks is not None)
    _kill(pids)
    return event


def _sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def durability_check(scenario: str, host: str, port: int, digest: str,
                     store: Path) -> LifecycleCheck:
    answer = check(host, port, digest)
    saved = _sha256(store / BACKUP_NAME)
    ok = answer == "HAVE" and saved == digest
    detail = (f"after SIGKILL and restart on its store the receiver answers {answer} for the "
              f"source's digest; the saved file's sha256 is "
              f"{saved[:12] + '…' if saved else 'absent'}")
    return LifecycleCheck(time.monotonic_ns(), scenario, "durability", ok, detail,
                          {"answer": answer, "saved_sha256": saved})


def restore_check(scenario: str, host: str, port: int, digest: str,
                  dest_dir: Path) -> LifecycleCheck:
    dest_dir.mkdir(parents=True, exist_ok=True)
    got = fetch(host, port, digest, dest_dir / "restored.bin")
    ok = got["answer"] == "DATA" and got["sha256"] == digest
    if got["answer"] == "DATA":
        detail = (f"GET returned {got['length']:,} bytes with sha256 {str(got['sha256'])[:12]}…"
                  + (" = the source's" if ok else f", the source's is {digest[:12]}…"))
    elif got["answer"] == "NONE":
        detail = "GET: the receiver holds no backup with the source's digest"
    else:
        detail = f"GET failed: {got['error']}"
    return LifecycleCheck(time.monotonic_ns(), scenario, "restore", ok, detail,
                          {"answer": got["answer"], "length": got["length"],
                           "sha256": got["sha256"]})
