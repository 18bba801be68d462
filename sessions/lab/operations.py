"""The collector's operations (probes/collectors/records.py: signals, truncations, process
lifetimes) as the stream's events (sessions/stream/operations.py), their processes named: the
client's own tree, a server of the task by name and role, or another process."""

import signal
import time

from probes.collectors.records import LifeEvent, SignalEvent, TruncateEvent
from sessions.stream.events import ServerRecord
from sessions.stream.operations import (
    OTHER,
    OWN,
    SERVER,
    WATCHED,
    ProcessLife,
    SignalObserved,
    TruncateObserved,
)

SI_KERNEL = 0x80   # a signal's si_code when the kernel itself sent it


def watch_servers(collector, stream, scenario: str, n: int, inv_id: int,
                  pids: dict[str, int]) -> None:
    """Watch the servers' processes through invocation n (their ends, the client's signals to
    them) and say which: service-kept reads whether the process it started is the one that
    ended. A collector without the operations probes watches nothing, and nothing is said."""
    if collector.watch_processes(inv_id, pids):
        stream.publish(ServerRecord(time.monotonic_ns(), scenario, n, "harness", WATCHED,
                                    {"pids": dict(pids)}))


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        if signal.SIGRTMIN < n <= signal.SIGRTMAX:
            return f"SIGRTMIN+{n - signal.SIGRTMIN}"
        return str(n)


def operation_event(e: SignalEvent | TruncateEvent | LifeEvent, scenario: str, n: int,
                    roles: dict[str, str]):
    """roles: the task's servers' roles by name."""
    if isinstance(e, SignalEvent):
        whose = "" if e.target is None else OWN if e.own else SERVER if e.watch else OTHER
        return SignalObserved(e.t_ns, scenario, n, e.pid, e.syscall, e.asked, e.signal,
                              signal_name(e.signal), e.result, e.target, e.target_comm, whose,
                              e.server, roles.get(e.server, ""), e.group, e.asked_tid)
    if isinstance(e, TruncateEvent):
        return TruncateObserved(e.t_ns, scenario, n, e.pid, e.how, e.name, e.length, e.result,
                                e.inode, e.writers, e.own, e.others_writing, _unknown(e),
                                e.fd, e.length2, e.mode)
    return ProcessLife(e.t_ns, scenario, n, e.kind, e.pid, e.comm, OWN if e.own else SERVER,
                       e.server, roles.get(e.server, ""), e.parent, e.status, e.signal,
                       signal_name(e.signal) if e.signal else "", e.sender, _sender(e))


def _unknown(e: TruncateEvent) -> str:
    """Why whether another process held the file open for writing is not known ("": known)."""
    if e.inode is None:
        return "truncated by path: its file is not reachable when the call returns"
    if not e.counted:
        return "the process's own writable opens of it were not all counted"
    return ""


def _sender(e: LifeEvent) -> str:
    if not e.signal:
        return ""
    if e.sender is None:
        return OTHER   # a signal whose sending was not seen (its record was lost)
    if e.sender_invocation and e.sender_invocation == e.invocation:
        return OWN
    return "kernel" if e.code == SI_KERNEL or e.code > 0 else OTHER
