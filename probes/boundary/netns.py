"""A network of the lab's own: one network namespace per attempt, with loopback only.

    net = LabNetwork.create("grade-1")      # NetworkUnavailable when the host refuses
    net.run(fn, *args)                      # fn in a thread inside it: its sockets are the lab's
    argv = [*net.argv(), *command]          # a process started in it (nsenter, at its exec)
    net.path                                # for a process of its own to enter (setns)
    net.remove()

Processes are started by `argv()`, never from `run`'s thread: a child whose parent thread ends
gets its parent-death signal (bubblewrap's --die-with-parent), so a launch from a thread that
ends at once could kill the client's sandbox under it.

`HostNetwork` is the same interface where the host refuses (fn runs where it is called).

The task's servers, a wire-fault proxy, the packet capture, ambient noise and every client
invocation of one attempt live in it: nothing in it can reach the host's loopback or its
abstract AF_UNIX sockets (they belong to a network namespace too), another lab, a Ray process or
the internet (there is no interface but `lo`, so no route), and nothing outside can reach in.

It is named like a client cgroup (`evlab-<pid>-<start>-<label>`, probes/boundary/owner.py) and
bind-mounted where `ip netns` looks (`ip netns exec evlab-… ss -tn` shows a lab), so a run
killed with SIGKILL has its networks swept by the next one (`sweep_stale`); the kernel frees one
when its mount and the last process and socket in it are gone.
"""

import ctypes
import fcntl
import os
import socket
import struct
import threading
from pathlib import Path

from probes.boundary.owner import owner_alive, owner_tag
from probes.capability import Capability
from probes.interrupts import deferred

RUN_DIR = Path("/run/netns")
PREFIX = "evlab-"
CLONE_NEWNET = 0x40000000
MS_BIND, MNT_DETACH = 0x1000, 0x2
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1

_libc = ctypes.CDLL(None, use_errno=True)


class NetworkUnavailable(OSError):
    """The host will not make a lab network (not root, no network namespaces)."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise NetworkUnavailable(err, f"{what}: {os.strerror(err)}")


def _in_thread(enter, fn, *args):
    """fn(*args) in a new thread that first calls enter(): namespaces are per thread, and the
    thread ends with it, so no other thread ever moves. Its result, or what it raised."""
    out: dict = {}

    def body() -> None:
        try:
            enter()
            out["result"] = fn(*args)
        except BaseException as e:  # handed to the caller
            out["error"] = e

    thread = threading.Thread(target=body, name="evlab-lab-network", daemon=True)
    thread.start()
    with deferred():   # an interrupt waits for it: what it made (a process, a socket) is returned
        thread.join()
    if "error" in out:
        raise out["error"]
    return out["result"]


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        name = b"lo".ljust(16, b"\0")
        flags = struct.unpack_from("h", fcntl.ioctl(s, SIOCGIFFLAGS, name + bytes(16)), 16)[0]
        fcntl.ioctl(s, SIOCSIFFLAGS, name + struct.pack("h", flags | IFF_UP) + bytes(14))


class LabNetwork:
    def __init__(self, name: str, fd: int):
        self.name = name
        self.path: Path | None = RUN_DIR / name
        self._fd = fd

    @classmethod
    def create(cls, label: str) -> "LabNetwork":
        name = f"{PREFIX}{owner_tag()}-{label}"
        path = RUN_DIR / name
        try:
            RUN_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
            path.touch(0o444, exist_ok=False)
        except OSError as e:
            raise NetworkUnavailable(e.errno, f"cannot name a lab network at {path}: "
                                     f"{e.strerror}") from None

        def make() -> int:
            _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
            _check(_libc.mount(b"/proc/thread-self/ns/net", os.fsencode(path), None, MS_BIND,
                               None), f"bind-mount the namespace on {path}")
            _loopback_up()
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)

        try:
            return cls(name, _in_thread(lambda: None, make))
        except BaseException:
            _unmount(path)
            raise

    def argv(self) -> list[str]:
        """The prefix that starts a command inside the lab network (as root)."""
        return ["nsenter", f"--net={self.path}", "--"]

    def run(self, fn, *args):
        """fn(*args) in a thread inside the lab network; what it returns or raises. For
        sockets; a process is started with argv()."""
        return _in_thread(lambda: _check(_libc.setns(self._fd, CLONE_NEWNET),
                                         f"setns({self.name})"), fn, *args)

    def remove(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            _unmount(RUN_DIR / self.name)


def run_in(path: Path | None, fn, *args):
    """fn(*args) in a thread inside the network namespace at path (the host's: None)."""
    if path is None:
        return fn(*args)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _in_thread(lambda: _check(_libc.setns(fd, CLONE_NEWNET), f"setns({path})"),
                          fn, *args)
    finally:
        os.close(fd)


class HostNetwork:
    """Where no lab network can be made: the host's (the fallback, recorded as a gap)."""

    name = ""
    path: Path | None = None

    def argv(self) -> list[str]:
        return []

    def run(self, fn, *args):
        return fn(*args)

    def remove(self) -> None:
        pass


Network = LabNetwork | HostNetwork


def _unmount(path: Path) -> None:
    _libc.umount2(os.fsencode(path), MNT_DETACH)   # not mounted (a half-made one): nothing to do
    path.unlink(missing_ok=True)


def sweep_stale() -> list[str]:
    """Remove lab networks whose evlab is gone (killed with SIGKILL)."""
    try:
        names = sorted(p.name for p in RUN_DIR.iterdir() if p.name.startswith(PREFIX))
    except OSError:
        return []
    cleaned = []
    for name in names:
        if not owner_alive(name[len(PREFIX):]):
            try:
                _unmount(RUN_DIR / name)
            except OSError:   # not ours to remove (evlab without root), or already gone
                continue
            cleaned.append(f"removed stale lab network {RUN_DIR / name}")
    return cleaned


def capability() -> Capability | None:
    """None when a lab network can be made here, else why not (for the session and doctor)."""
    try:
        if os.geteuid() != 0:
            raise NetworkUnavailable(1, "it needs root")
        LabNetwork.create("probe").remove()
    except NetworkUnavailable as e:
        return Capability("lab-network", False,
                          f"no network of the lab's own ({e.strerror}): every client shares the "
                          "host's network, where it can reach other labs and the host's "
                          "services", "run evlab as root on a kernel with network namespaces")
    return None
