"""The harness's cleanup census of a grading attempt's invocation, returned as one evidence
event: once an invocation has exited, which processes of its tree still run (the kernel's view
when BCC tracks the tree, else a scan of its session), what they listen on, what files it left
in its working directory and in the servers' state (the task's residue_dir). Leftover processes
are then killed: nothing the client started outlives the attempt. (The task's own lifecycle
checks are its program: task.toml [lifecycle].)"""

import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

from probes.proc.entries import stat_fields, status_fields
from probes.proc.sockets import listeners
from probes.text import cleaned
from sessions.judging.judgement import is_temp
from sessions.stream.events import CleanupObserved

MAX_LISTED = 50   # files named in one event; more are summarised as a count
KILL_ROUNDS = 5
def _tgid(tid: int) -> int | None:
    try:
        return int(status_fields(tid)["Tgid"])
    except (OSError, KeyError, ValueError):
        return None


def _session_members(client_pid: int) -> set[int]:
    """Live processes in the client's session or process group (it was started in its own).
    If the client's pid already belongs to another process, the kernel has reused it, which it
    does only once no session or group of that id has members left: there is nothing to find
    (and scanning would mistake the newcomer's own session for the client's)."""
    if running(client_pid):
        return set()
    found = set()
    for proc in psutil.process_iter():
        try:
            if (os.getsid(proc.pid) == client_pid or os.getpgid(proc.pid) == client_pid) \
                    and running(proc.pid):
                found.add(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def leftovers(client_pid: int, live_tasks: list[int] | None) -> set[int]:
    """Processes of an exited client's tree still running: its session, plus every process
    the kernel still tracks for the invocation (a setsid() child included)."""
    pids = _session_members(client_pid)
    for tid in live_tasks or ():
        tgid = _tgid(tid)
        if tgid is not None and tgid != os.getpid() and running(tgid):
            pids.add(tgid)
    return pids


def kill_leftovers(client_pid: int, live_tasks: Callable[[], list[int] | None]) -> set[int]:
    """Kill the tree's leftovers until none is found (one may fork while being killed): the
    processes it killed."""
    killed: set[int] = set()
    for _ in range(KILL_ROUNDS):
        pids = leftovers(client_pid, live_tasks())
        if not pids:
            break
        _kill(pids)
        killed |= pids
    return killed


def _describe(pid: int) -> str:
    try:
        cmd = " ".join(psutil.Process(pid).cmdline()) or psutil.Process(pid).name()
    except psutil.Error:
        cmd = "?"
    return f"{pid} {cleaned(cmd[:200])}"


def _listening(pids: set[int]) -> list[str]:
    """What the processes listen on (TCP), read in each one's own network namespace (psutil
    reads only evlab's, and the client's is the lab's)."""
    return sorted(f"{local} ({pid})" for pid in pids for local, _ in listeners(pid))


def _files(root: Path, skip: frozenset[str] | set[str] = frozenset()) -> tuple[str, ...]:
    """Files (and empty directories, as `dir/`) under root; temporary-looking ones first, so
    the MAX_LISTED cut never hides one."""
    names = []
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk ignores vanished entries
        rel = Path(dirpath).relative_to(root)
        names += [str(rel / name) for name in filenames if str(rel / name) not in skip]
        for d in dirnames:
            try:
                if not os.listdir(Path(dirpath) / d):
                    names.append(str(rel / d) + "/")
            except OSError:
                pass  # removed meanwhile by a process still running (listed as a leftover)
    names = sorted((cleaned(name) for name in names), key=lambda name: (not is_temp(name), name))
    if len(names) > MAX_LISTED:
        names = names[:MAX_LISTED] + [f"... and {len(names) - MAX_LISTED} more"]
    return tuple(names)


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_gone(pids, 2.0)


def wait_gone(pids: Iterable[int], within_s: float) -> None:
    """Until none of pids is running (a zombie is not), within_s at most."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(running(p) for p in pids):
        time.sleep(0.005)


# The signals whose default action ends a process (signal(7): "Term" and "Core")
FATAL = frozenset(range(1, 32)) - {signal.SIGCHLD, signal.SIGCONT, signal.SIGSTOP, signal.SIGTSTP,
                                   signal.SIGTTIN, signal.SIGTTOU, signal.SIGURG, signal.SIGWINCH}
PF_EXITING = 0x4   # <linux/sched.h>: a task's flags (/proc/PID/stat, field 9) while it exits


def doomed(pid: int) -> bool:
    """Is it ending, or about to: exiting already, or a signal that ends it pending (one whose
    default action ends a process that it neither catches nor ignores)? kill(2) returns once
    the signal is queued; the target acts on it when it next runs."""
    try:
        flags = int(stat_fields(pid)[6])
        status = status_fields(pid)
        pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
        handled = int(status["SigCgt"], 16) | int(status["SigIgn"], 16)
    except (OSError, KeyError, ValueError, IndexError):
        return False
    return bool(flags & PF_EXITING) or any(
        pending >> (s - 1) & 1 and not handled >> (s - 1) & 1 for s in FATAL)


def running(pid: int) -> bool:
    # A killed orphan stays a zombie until init reaps it (which may be never in a container).
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def cleanup_check(scenario: str, n: int, client_pid: int,
                  live_tasks: Callable[[], list[int] | None], cwd: Path,
                  residue: Path | None, keep: tuple[str, ...] = (),
                  left_at_exit: tuple[str, ...] = (),
                  killed: frozenset[int] = frozenset()) -> CleanupObserved:
    """What the exited invocation left behind; its leftover processes are killed whatever
    happens while looking. killed: what evlab itself killed (its tree at the timeout, waited
    for before this census), never a leftover even if the kernel has not finished with it."""
    try:
        tasks = live_tasks()
        pids = leftovers(client_pid, tasks) - killed
        return CleanupObserved(
            time.monotonic_ns(), scenario, n, tuple(_describe(p) for p in sorted(pids)),
            tuple(_listening(pids)), _files(cwd),
            _files(residue, skip=set(keep)) if residue else (),
            kernel_view=tasks is not None, left_at_exit=left_at_exit)
    finally:
        kill_leftovers(client_pid, live_tasks)
