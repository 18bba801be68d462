"""The strace fallback collector: the same counters as the BCC collector where ptrace can see them.

Used when BPF cannot load. The client runs under `strace -f -yy`, whose `-yy` annotations name
each descriptor's file or socket, so source and socket bytes need no fd bookkeeping here.

Cannot see (reported as unobserved, never 0): function entries (no uprobes), context switches
and on-CPU time (no scheduler view). Overhead: ptrace stops the tracee twice per syscall, which
typically slows a syscall-heavy client several-fold.
"""

import errno
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from probes.capability import Capability
from probes.collectors.records import (
    COUNTERS,
    ConnectEvent,
    CounterSnapshot,
    KernelEvent,
    NoEgressView,
    NoProcessWatch,
    ProcessEvent,
)
from probes.owned_tmp import make_owned_dir
from probes.tail import LineTail
from probes.text import decoded

UNOBSERVED = ("switches_out", "oncpu_ns", "file_ops", "busy_ns", "busy_stretches", "busy_max_ns",
              "source_mmaps", "leftover_tasks", "egress_lost", "busy_start_max_ns",
              "softirq_ns", "switch_ins_missed", "source_mapped_bytes", "own_read_bytes",
              "busy_start_ns", "target_write_bytes", "target_read_bytes",
              "target_no_space")
_LINE = re.compile(r"^(\d+)\s+(\d+)\.(\d+) (.*)$")
_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|\?)(.*)$")
_FD = re.compile(r"(\d+)<([^>]*)>")
_SOCKET = re.compile(r"^(TCP|UDP|UNIX|TCPv6|UDPv6|NETLINK|socket|RAW|PACKET)")
_EXIT = re.compile(r"^\+\+\+ (exited with (\d+)|killed by (\w+))")
READS = {"read", "pread64", "readv", "preadv", "preadv2"}
RECVS = {"recvfrom", "recvmsg"}
WRITES = {"write", "pwrite64", "writev", "pwritev", "pwritev2"}
SENDS = {"sendto", "sendmsg"}
FORKS = {"clone", "clone3", "fork", "vfork"}


@dataclass
class _Trace:
    """Parse state for one invocation's strace output file."""

    invocation: int
    path: Path
    source: str | None
    tail: LineTail = field(init=False)
    counters: dict[str, int] = field(default_factory=lambda: {
        c: 0 for c in COUNTERS if c not in UNOBSERVED})
    syscalls: dict[str, int] = field(default_factory=dict)
    unfinished: dict[int, str] = field(default_factory=dict)
    events: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tail = LineTail(self.path)


class StraceCollector(NoEgressView, NoProcessWatch):
    name = "strace"

    def __init__(self, functions: tuple[str, ...] = ()):
        strace = shutil.which("strace")
        if not strace:
            raise FileNotFoundError("strace is not installed")
        self.strace = strace
        self.functions = tuple(functions)
        self._dir = make_owned_dir("evlab-strace-")
        self._traces: dict[int, _Trace] = {}
        # strace prints CLOCK_REALTIME; one anchor maps it onto CLOCK_MONOTONIC.
        self._realtime_minus_mono = time.time_ns() - time.monotonic_ns()

    def missing(self) -> list[Capability]:
        return [Capability("function-counts", False,
                           "the strace collector cannot count function entries (no uprobes)",
                           "use the BCC collector: run as root after `make setup`"),
                Capability("sched", False,
                           "the strace collector cannot see context switches or on-CPU time",
                           "use the BCC collector: run as root after `make setup`"),
                Capability("operations", False,
                           "the strace collector sees the kill family's calls and the "
                           "truncating calls as asked, not each process a signal reached, "
                           "whether another process had a truncated file open for writing, "
                           "nor the servers' processes",
                           "use the BCC collector: run as root after `make setup`")]

    def prepare(self, clients) -> None:
        pass   # strace attaches at each launch

    def launch(self, invocation: int, argv: list[str], source: Path | None,
               client: Path | None = None, target: Path | None = None,
               **popen_kwargs) -> subprocess.Popen:
        # strace follows the whole launch chain (the sandbox's own start-up included).
        out = self._dir / f"inv-{invocation}.strace"
        self._traces[invocation] = _Trace(invocation, out,
                                          str(Path(source).resolve()) if source else None)
        cmd = [self.strace, "-f", "-q", "-s", "0", "-yy", "--timestamps=unix,ns",
               "-o", str(out), "--", *map(str, argv)]
        return subprocess.Popen(cmd, start_new_session=True, **popen_kwargs)

    def stop_after(self, invocation: int, nbytes: int) -> bool:
        return False   # strace's counts come after the fact: the lab's poll kills

    def snapshot(self, invocation: int) -> CounterSnapshot:
        trace = self._traces[invocation]
        self._parse_new(trace)
        return CounterSnapshot(time.monotonic_ns(), invocation, dict(trace.counters), {},
                               dict(trace.syscalls), unobserved=UNOBSERVED)

    def live_tasks(self, invocation: int) -> list[int] | None:
        return None   # strace sees a tree's exits only once it has stopped tracing it

    def poll_events(self) -> list[KernelEvent]:
        out: list[KernelEvent] = []
        for trace in self._traces.values():
            self._parse_new(trace)
            out += trace.events
            trace.events = []
        return out

    def finish(self, invocation: int) -> CounterSnapshot:
        final = self.snapshot(invocation)
        self._traces[invocation].path.unlink(missing_ok=True)
        return final

    def overhead(self) -> dict:
        return {"bpf_run_time_ns": None, "bpf_run_count": None, "events": None,
                "events_per_s": None}

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    # --- parsing -----------------------------------------------------------------------
    def _parse_new(self, trace: _Trace) -> None:
        for raw in trace.tail.new_lines():
            self._parse_line(trace, decoded(raw))

    def _parse_line(self, trace: _Trace, line: str) -> None:
        m = _LINE.match(line)
        if not m:
            return
        pid = int(m.group(1))
        t_ns = int(m.group(2)) * 1_000_000_000 + int(m.group(3).ljust(9, "0")[:9])
        t_ns -= self._realtime_minus_mono
        body = m.group(4)
        if body.endswith("<unfinished ...>"):
            trace.unfinished[pid] = body[: -len("<unfinished ...>")].rstrip()
            return
        if body.startswith("<... "):
            resumed = re.match(r"^<\.\.\. \w+ resumed>\s?(.*)$", body)
            body = trace.unfinished.pop(pid, "") + (resumed.group(1) if resumed else "")
        exit_match = _EXIT.match(body)
        if exit_match:
            trace.events.append(ProcessEvent(t_ns, trace.invocation, "exit", pid, pid, ""))
            return
        call = _CALL.match(body)
        if call:
            self._count(trace, pid, t_ns, call.group(1), call.group(2), call.group(3),
                        call.group(4))

    def _count(self, trace: _Trace, pid: int, t_ns: int, name: str, args: str, ret: str,
               rest: str) -> None:
        c = trace.counters
        c["syscalls"] += 1
        trace.syscalls[name] = trace.syscalls.get(name, 0) + 1
        value = int(ret) if ret != "?" else None
        fds = _FD.findall(args)
        kind = self._kind(trace, fds[0][1]) if fds else None
        if name in READS | RECVS and value and value > 0:
            c["read_calls"] += 1
            c["read_bytes"] += value
            if name in RECVS or kind == "socket":
                c["sock_recv_bytes"] += value
            elif kind == "source":
                c["source_read_bytes"] += value
        elif name in WRITES | SENDS and value and value > 0:
            c["write_bytes"] += value
            if name in SENDS or kind == "socket":
                c["sock_sent_bytes"] += value
        elif name in ("sendfile", "splice") and value and value > 0:
            c["read_bytes"] += value
            c["write_bytes"] += value
            src_fd, dst_fd = (fds[1], fds[0]) if name == "sendfile" else (fds[0], fds[-1])
            src_kind, dst_kind = self._kind(trace, src_fd[1]), self._kind(trace, dst_fd[1])
            if src_kind == "source":
                c["source_read_bytes"] += value
            elif src_kind == "socket":
                c["sock_recv_bytes"] += value
            if dst_kind == "socket":
                c["sock_sent_bytes"] += value
        elif name in ("open", "openat", "openat2") and value is not None and value >= 0:
            opened = re.match(r"^<([^>]*)>", rest)  # -yy prints the new fd's path after it
            if opened and self._kind(trace, opened.group(1)) == "source":
                c["source_opens"] += 1
        elif name == "connect":
            c["connects"] += 1
            trace.events.append(_connect(trace.invocation, pid, t_ns, args, value, rest))
        elif name in FORKS and value and value > 0:
            c["forks"] += 1
            trace.events.append(ProcessEvent(t_ns, trace.invocation, "fork", pid, pid, "",
                                             child_pid=value))
        elif name in ("execve", "execveat") and value == 0:
            c["execs"] += 1
            filename = re.match(r'^"([^"]*)"', args)
            trace.events.append(ProcessEvent(t_ns, trace.invocation, "exec", pid, pid, "",
                                             filename=filename.group(1) if filename else None))

    @staticmethod
    def _kind(trace: _Trace, annotation: str) -> str:
        if _SOCKET.match(annotation):
            return "socket"
        if trace.source and annotation == trace.source:
            return "source"
        return "other"


def _connect(invocation: int, pid: int, t_ns: int, args: str, value: int | None,
             rest: str) -> ConnectEvent:
    family = re.search(r"sa_family=(AF_\w+)", args)
    port = re.search(r"sin6?_port=htons\((\d+)\)", args)
    addr = (re.search(r'inet_addr\("([^"]+)"\)', args)
            or re.search(r'inet_pton\(AF_INET6, "([^"]+)"', args))
    result = 0
    if value is not None and value < 0:
        name = re.match(r"\s*(E\w+)", rest)
        result = -getattr(errno, name.group(1), 0) if name else value
    return ConnectEvent(t_ns, invocation, pid, pid, "",
                        family.group(1) if family else "unknown",
                        addr.group(1) if addr else None,
                        int(port.group(1)) if port and addr else None, result)

