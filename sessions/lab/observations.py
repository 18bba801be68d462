"""Turning the observers' output into events: the collector's counters and kernel events, the
captured packets, the servers' record files, the client's stdout claims and psutil samples."""

import json
import threading
import time

from probes import procmetrics
from probes.collectors import Collector
from probes.kernel import ConnectEvent, EgressEvent, FileEvent, ProcessEvent
from probes.tail import LineTail
from sessions.lab.running import Running
from sessions.stream.events import (
    ClientClaim,
    ConnectObserved,
    CounterSample,
    EgressObserved,
    FileObserved,
    PacketSeen,
    PacketStats,
    ProcessMetrics,
    ProcessObserved,
    ServerRecord,
)
from sessions.stream.stream import EventStream

KERNEL_EVENTS_MAX = 20_000   # kernel events kept per invocation (an honest client makes ~500)


class Tail(LineTail):
    """New complete JSON records of a server's record file since the last call."""

    def new(self) -> list[dict]:
        return [json.loads(line) for line in self.new_lines() if line.strip()]


class Observations:
    """Publishes what the observers saw of one scenario's invocation, as events."""

    def __init__(self, stream: EventStream, collector: Collector):
        self.stream, self.collector = stream, collector
        # Kernel events come from one ring buffer for every invocation: each goes to the
        # scenario and invocation that own its id (several attempts may run at once).
        self._owners: dict[int, tuple[Running, int]] = {}
        self._poll = threading.Lock()

    def own(self, inv_id: int, live: Running, n: int) -> None:
        self._owners[inv_id] = (live, n)

    def disown(self, live: Running) -> None:
        for inv_id, (owner, _) in list(self._owners.items()):
            if owner is live:
                del self._owners[inv_id]

    def pump(self, live: Running, n: int, inv_id: int) -> None:
        self.kernel(live, live.scenario.id, n, inv_id)
        self.packets(live, n)
        self.records(live, n)

    def kernel(self, live: Running, s: str, n: int, inv_id: int) -> None:
        snap = self.collector.snapshot(inv_id)
        self.stream.publish(CounterSample(snap.t_ns, s, n, snap.counters, snap.functions,
                                          snap.unobserved))
        with self._poll:
            events = self.collector.poll_events()
        for e in events:
            owner = self._owners.get(e.invocation)
            if owner is not None:
                self._kernel_event(e, *owner)

    def _kernel_event(self, e, live: Running, n: int) -> None:
        s = live.scenario.id
        if isinstance(e, ProcessEvent):
            _note_exit(live, e)
        # A client that floods events cannot grow evlab without end: past the cap they are
        # counted by the kernel and not kept (the risk scan then says incomplete).
        if live.kernel_events >= KERNEL_EVENTS_MAX:
            return
        live.kernel_events += 1
        if isinstance(e, EgressEvent):
            self.stream.publish(EgressObserved(e.t_ns, s, n, e.pid, e.kind, e.family,
                                               e.protocol, e.address, e.port, e.refused))
        elif isinstance(e, ConnectEvent):
            self.stream.publish(ConnectObserved(e.t_ns, s, n, e.pid, e.family, e.address,
                                                e.port, e.result))
        elif isinstance(e, FileEvent):
            self.stream.publish(FileObserved(e.t_ns, s, n, e.pid, e.op, e.path, e.writes,
                                             e.dfd, e.old_path, e.old_dfd, e.fd))
        else:
            self.stream.publish(ProcessObserved(e.t_ns, s, n, e.kind, e.pid, e.child_pid,
                                                e.filename))

    def packets(self, live: Running, n: int) -> None:
        if live.capture is not None:
            for p in live.capture.drain():
                self.stream.publish(PacketSeen(p.t_ns, live.scenario.id, n, p.src, p.sport,
                                               p.dst, p.dport, p.flags, p.payload_len,
                                               tcp_seq=p.seq))

    def records(self, live: Running, n: int) -> None:
        for server, tail in live.tails.items():
            for record in tail.new():
                if server == "receiver":
                    delta = {"connection_opened": 1, "connection_closed": -1}
                    live.open_connections += delta.get(record.get("event"), 0)
                fields = {k: v for k, v in record.items() if k not in ("t_ns", "event")}
                self.stream.publish(ServerRecord(record.get("t_ns", 0), live.scenario.id, n,
                                                 server, record.get("event", "?"), fields))

    def process_metrics(self, live: Running, n: int, client_pid: int) -> None:
        for role, pid in (("client", client_pid), ("receiver", live.injector.receiver.pid)):
            sample = procmetrics.sample(pid)
            if sample is not None:
                self.stream.publish(ProcessMetrics(
                    sample.t_ns, live.scenario.id, n, role, pid, sample.tree_cpu_s,
                    sample.tree_rss_bytes, sample.ctx_voluntary + sample.ctx_involuntary,
                    sample.open_fds, sample.children))

    def claims(self, scenario: str, n: int, stdout) -> None:
        """The client's stdout, line by line: claims, judged only by honest-outcome."""
        for raw in stdout:
            text = raw.decode(errors="replace").strip()
            if not text:
                continue
            try:
                claim = json.loads(text)
                if not isinstance(claim, dict):
                    raise ValueError
            except ValueError:
                claim = {"unparsed": text[:500]}
            self.stream.publish(ClientClaim(time.monotonic_ns(), scenario, n, claim))
        stdout.close()

    def packet_stats(self, live: Running, n: int) -> None:
        """The capture's totals for an invocation, and why it stopped if it died early (the
        wire clauses are then inconclusive, not passed on a silent wire)."""
        if live.capture is not None:
            stats = live.capture.stats()
            self.stream.publish(PacketStats(time.monotonic_ns(), live.scenario.id, n,
                                            stats.kept, stats.dropped_by_kernel,
                                            f"{live.scenario.id}.pcap", stats.error))


def _note_exit(live: Running, e) -> None:
    """Processes of the tree that were still running when the launched one ended: in the
    sandbox the end of its pid namespace kills them at once, so the kernel's exit events
    are the record of what the client left running."""
    if e.kind != "exit" or e.invocation != live.inv_id:
        return
    if e.root:
        live.root_exited = True
    elif live.root_exited:
        live.left_at_exit.append(f"{e.pid} {e.comm}")

