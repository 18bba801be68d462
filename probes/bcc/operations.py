"""Operations as kernel evidence (operations.bpf.c beside this file): the `ops` ring buffer's
records read into the kernel vocabulary (signals, truncations, process lifetimes), and the
processes the lab watches (a task's servers and whatever they fork).

    watches = Watches(bpf)
    watches.watch(invocation, {"app": 1234})   # their records go to this invocation
    watches.lost(invocation)                   # records of its watches the ring could not take
    watches.unwatch(invocation)
    operation(record, watches.names)           # one `ops` record as a SignalEvent, ...
"""

import ctypes
import threading

from probes import syscalls
from probes.bcc.abi import WATCH_SLOTS, OpsFlag, OpsKind, Trunc
from probes.collectors.records import LifeEvent, SignalEvent, TruncateEvent
from probes.text import decoded


class Watches:
    """Watch ids, each a process the lab named (and what it forks), bound to the invocation
    whose records they go to."""

    def __init__(self, bpf):
        self._bpf = bpf
        self.names: dict[int, str] = {}          # watch id -> the name the lab gave
        self._inv: dict[int, int] = {}           # watch id -> its invocation
        self._lock = threading.Lock()

    def watch(self, invocation: int, pids: dict[str, int]) -> None:
        """Watch each named process (by pid) for this invocation: a process already watched
        keeps its id (its children with it) and is bound to this invocation."""
        with self._lock:
            for name, pid in pids.items():
                key = ctypes.c_uint(pid)
                found = self._bpf["watched"].get(key)
                wid = found.value if found is not None else self._free_id()
                self._bpf["watched"][key] = ctypes.c_uint(wid)
                self.names[wid] = name
                self._bind(wid, invocation)

    def _free_id(self) -> int:
        free = [w for w in range(1, WATCH_SLOTS) if w not in self.names]
        if not free:
            raise RuntimeError(f"more than {WATCH_SLOTS - 1} watched processes at once")
        return free[0]

    def _bind(self, wid: int, invocation: int) -> None:
        self._inv[wid] = invocation
        self._bpf["watch_inv"][ctypes.c_int(wid)] = ctypes.c_uint(invocation)
        self._bpf["watch_lost"][ctypes.c_int(wid)] = ctypes.c_ulonglong(0)

    def unwatch(self, invocation: int) -> None:
        """Its watches end: their processes (and those they forked) are no longer watched."""
        with self._lock:
            ended = {w for w, inv in self._inv.items() if inv == invocation}
            table = self._bpf["watched"]
            for key in [k for k, v in table.items() if v.value in ended]:
                table.pop(key, None)
            for wid in ended:
                self._bpf["watch_inv"][ctypes.c_int(wid)] = ctypes.c_uint(0)
                del self._inv[wid]
                self.names.pop(wid, None)

    def lost(self, invocation: int) -> int:
        return sum(self._bpf["watch_lost"][ctypes.c_int(w)].value
                   for w, inv in list(self._inv.items()) if inv == invocation)

    def forget(self) -> None:
        """A new session: nothing watched."""
        with self._lock:
            for wid in list(self._inv):
                self._bpf["watch_inv"][ctypes.c_int(wid)] = ctypes.c_uint(0)
            self._bpf["watched"].clear()
            self._inv.clear()
            self.names.clear()


_TRUNC_HOW = {Trunc.PATH: "truncate", Trunc.FD: "ftruncate", Trunc.OPEN: "open",
              Trunc.FALLOCATE: "fallocate", Trunc.URING_FD: "io_uring ftruncate",
              Trunc.URING_OPEN: "io_uring open", Trunc.URING_FALLOCATE: "io_uring fallocate"}


def operation(e, names: dict[int, str]) -> SignalEvent | TruncateEvent | LifeEvent:
    """One record of the `ops` ring buffer; names: the watches' names by id."""
    comm = decoded(e.comm)
    flags = OpsFlag(e.flags)
    if e.kind in (OpsKind.SIGNAL, OpsKind.KILL_CALL):
        sent = e.kind == OpsKind.SIGNAL
        return SignalEvent(
            e.ts, e.inv, e.tgid, e.tid, comm, syscalls.names().get(e.nr, f"sys_{e.nr}"),
            e.arg, e.arg2, e.sig, e.ret,
            target=e.target if sent else None, target_tid=e.target_tid if sent else None,
            target_comm=decoded(e.comm2), group=OpsFlag.GROUP in flags,
            own=OpsFlag.OWN in flags, watch=e.watch, server=names.get(e.watch, ""))
    if e.kind == OpsKind.TRUNCATE:
        known = OpsFlag.NO_INODE not in flags
        return TruncateEvent(
            e.ts, e.inv, e.tgid, e.tid, comm, _TRUNC_HOW.get(e.code, str(e.code)),
            decoded(e.name), e.fd, e.length, e.length2, e.mode, e.ret,
            e.ino if known else None, e.dev if known else None,
            e.writers if known else None, e.own if known else None,
            OpsFlag.UNCOUNTED not in flags)
    started = e.kind == OpsKind.STARTED
    sender = OpsFlag.SENDER in flags
    return LifeEvent(
        e.ts, e.inv, "started" if started else "exited", e.tgid, comm, OpsFlag.OWN in flags,
        e.watch, names.get(e.watch, ""), parent=e.target if started else 0,
        status=None if started else e.ret, signal=0 if started else e.sig,
        sender=e.length if sender else None, sender_invocation=e.length2 if sender else 0,
        code=e.code if sender else 0)
