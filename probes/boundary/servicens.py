"""A pid namespace of the lab's own for an operable service (issue 46): where the program reaches
the service as an operator does, and nothing of the judge.

    ns = ServiceNamespace.create(network)        # as root; network: the lab's (its .path)
    argv = [*ns.argv(), *sandbox.wrap(...)]      # a process started in it (the service, a client)
    ns.host_pid(ns_pid)                          # a pid file's pid, as the kernel evidence names it
    ns.close()                                   # SIGKILL its init: everything in it ends

Its init is a tiny reaper run by root (`unshare --pid --fork --kill-child`) inside the lab's
network namespace; the sandboxed user cannot signal it (another user's process), and every
process it can see and signal is in the namespace (the service and its own), so the load
generator, the verifier and evlab are out of its reach (ESRCH: they have no pid there). Each
process started by `argv()` joins the namespace (nsenter forks into it) and gets a mount
namespace with a /proc of it (`unshare --mount-proc`), then the sandbox's chain drops root.
"""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from probes.proc.entries import stat_fields, status_fields

# the init: reaps what is re-parented to it while its owner (the evlab that made it: pid and
# start time, so a reused pid is not it) lives; then it ends, and the namespace with it (an
# evlab killed with SIGKILL leaves no service behind)
REAPER = ("import os, sys, time\n"
          "def since(pid):\n"
          "    try:\n"
          "        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[19]\n"
          "    except (OSError, IndexError):\n"
          "        return None\n"
          "while since(sys.argv[1]) == sys.argv[2]:\n"
          "    try:\n"
          "        while os.waitpid(-1, os.WNOHANG)[0]:\n"
          "            pass\n"
          "    except ChildProcessError:\n"
          "        pass\n"
          "    time.sleep(0.5)\n")
START_TIMEOUT = 5.0


class ServiceNamespaceError(OSError):
    """The namespace could not be made (the message says why, in one line)."""


class ServiceNamespace:
    def __init__(self, proc: subprocess.Popen, init: int, network: Path | None):
        self._proc = proc          # `unshare` (host pid namespace), the init's parent
        self.init = init           # the init's host pid
        self.network = network

    @classmethod
    def create(cls, network: Path | None, python: str = sys.executable) -> "ServiceNamespace":
        enter = ["nsenter", f"--net={network}", "--"] if network is not None else []
        try:
            proc = subprocess.Popen([*enter, "unshare", "--pid", "--fork", "--kill-child",
                                     python, "-c", REAPER, str(os.getpid()), _since(os.getpid())],
                                    stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as e:
            raise ServiceNamespaceError(e.errno, f"cannot start the service's init: "
                                        f"{e.strerror}") from None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            init = _first_child(proc.pid)
            if init and _ns_pids(init)[-1:] == [1]:
                return cls(proc, init, network)
            if proc.poll() is not None:
                break
            time.sleep(0.005)
        proc.kill()
        proc.wait()
        raise ServiceNamespaceError(0, "the service's init did not start")

    def argv(self) -> list[str]:
        """The prefix (run as root) that starts a command in the namespace, with a /proc of it
        in a mount namespace of its own; the sandbox's chain follows it."""
        net = [f"--net={self.network}"] if self.network is not None else []
        return ["nsenter", *net, f"--pid=/proc/{self.init}/ns/pid", "--",
                "unshare", "--mount", "--propagation", "private", "--mount-proc", "--"]

    def host_pid(self, ns_pid: int) -> int | None:
        """The host pid of the namespace's process ns_pid (a pid file's), or None."""
        for pid in self._inside():
            pids = _ns_pids(pid)
            if len(pids) >= 2 and pids[-1] == ns_pid:
                return pid
        return None

    def _inside(self) -> Iterator[int]:
        """Host pids of every process in the namespace, its init's included (OSError: the
        init is gone)."""
        mine = os.readlink(f"/proc/{self.init}/ns/pid")
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if os.readlink(f"/proc/{entry.name}/ns/pid") == mine:
                        yield int(entry.name)
                except OSError:
                    continue

    def started(self, launcher: int, timeout: float = START_TIMEOUT,
                skip: tuple[str, ...] = ("nsenter", "unshare", "prlimit", "setpriv",
                                         "bwrap")) -> int:
        """The host pid of what a launcher (a Popen of `argv()`'s prefix) started in the
        namespace: the first process down its line of first children that is in the namespace
        and none of the launch chain's programs (once it has exec'd); 0 if none within
        timeout."""
        mine = os.readlink(f"/proc/{self.init}/ns/pid")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = launcher
            while current:
                try:
                    inside = os.readlink(f"/proc/{current}/ns/pid") == mine
                    comm = Path(f"/proc/{current}/comm").read_text().strip()
                except OSError:
                    break
                if inside and comm not in skip:
                    return current
                current = _first_child(current)
            time.sleep(0.005)
        return 0

    def members(self) -> list[int]:
        """Host pids of every process in the namespace but its init."""
        try:
            return sorted(pid for pid in self._inside() if pid != self.init)
        except OSError:
            return []

    def close(self) -> None:
        """SIGKILL the init: the kernel kills every process in the namespace. Once only: its
        pid may be another process's after it is reaped."""
        if self._proc.returncode is not None:
            return
        try:
            os.kill(self.init, signal.SIGKILL)   # `unshare` reaps it, then exits
        except ProcessLookupError:
            pass
        try:
            self._proc.wait(START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _first_child(pid: int) -> int:
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            children = Path(task.path, "children").read_text().split()
            if children:
                return int(children[0])
    except OSError:
        pass
    return 0


def _ns_pids(pid: int) -> list[int]:
    try:
        return [int(p) for p in status_fields(pid).get("NSpid", "").split()]
    except OSError:
        return []


def _since(pid: int) -> str:
    """A process's start time (in clock ticks since boot): with its pid, which process it is."""
    return stat_fields(pid)[19]
