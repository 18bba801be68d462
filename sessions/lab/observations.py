"""The observers' output as events: the collector's counters and kernel events, the captured
packets, the servers' record lines, the client's stdout claims and psutil samples. Pure
conversions; who owns what they describe is the scenario run's (sessions/lab/scenario_run.py)."""

import json
import time

from probes.collectors.records import (
    ConnectEvent,
    EgressEvent,
    FileEvent,
    LifeEvent,
    SignalEvent,
    TruncateEvent,
)
from probes.text import cleaned, decoded
from sessions.lab.operations import operation_event
from sessions.stream.codec import fits
from sessions.stream.events import (
    ClientClaim,
    ConnectObserved,
    CounterSample,
    EgressObserved,
    Event,
    FileObserved,
    PacketSeen,
    PacketStats,
    ProcessMetrics,
    ProcessObserved,
    ServerRecord,
)


def counter_sample(snap, scenario: str, n: int) -> CounterSample:
    return CounterSample(snap.t_ns, scenario, n, snap.counters, snap.functions, snap.unobserved)


def final_sample(final, scenario: str, n: int, overhead: dict) -> CounterSample:
    """The invocation's final counters, with what observing it cost."""
    return CounterSample(time.monotonic_ns(), scenario, n, final.counters, final.functions,
                         final.unobserved, final=True, overhead=overhead,
                         target_files={str(ino): b for ino, b in final.target_files.items()})


def kernel_event(e, scenario: str, n: int, roles: dict[str, str] | None = None) -> Event:
    """roles: the task's servers' roles by name (a signal's target, a server's exit)."""
    if isinstance(e, SignalEvent | TruncateEvent | LifeEvent):
        return operation_event(e, scenario, n, roles or {})
    if isinstance(e, EgressEvent):
        return EgressObserved(e.t_ns, scenario, n, e.pid, e.kind, e.family, e.protocol,
                              e.address, e.port, e.refused)
    if isinstance(e, ConnectEvent):
        return ConnectObserved(e.t_ns, scenario, n, e.pid, e.family, e.address, e.port,
                               e.result)
    if isinstance(e, FileEvent):
        return FileObserved(e.t_ns, scenario, n, e.pid, e.op, e.path, e.writes, e.dfd,
                            e.old_path, e.old_dfd, e.fd)
    return ProcessObserved(e.t_ns, scenario, n, e.kind, e.pid, e.child_pid, e.filename)


def packet_event(p, scenario: str, n: int) -> PacketSeen:
    return PacketSeen(p.t_ns, scenario, n, p.src, p.sport, p.dst, p.dport, p.flags,
                      p.payload_len, tcp_seq=p.seq)


def server_event(server: str, record: dict, scenario: str, n: int) -> ServerRecord:
    fields = {k: v for k, v in record.items() if k not in ("t_ns", "event")}
    return ServerRecord(record.get("t_ns", 0), scenario, n, server, record.get("event", "?"),
                        fields)


def metrics_event(sample, scenario: str, n: int, role: str, pid: int) -> ProcessMetrics:
    return ProcessMetrics(sample.t_ns, scenario, n, role, pid, sample.tree_cpu_s,
                          sample.tree_rss_bytes, sample.ctx_voluntary + sample.ctx_involuntary,
                          sample.open_fds, sample.children)


CLAIM_BYTES_MAX = 65_536   # one line of the client's stdout
CLAIM_SHOWN = 500          # characters of a claim kept when it cannot be kept whole


def claim_event(raw: bytes, scenario: str, n: int) -> ClientClaim | None:
    """One line of the client's stdout: a claim, judged only by honest-outcome. A line that is
    not a JSON object, is longer than CLAIM_BYTES_MAX, or holds what an event cannot carry
    (nesting past the codec's bound, NaN, integers past 64 bits) is kept as a malformed claim
    (its start, as text), never as structure evlab must carry."""
    text = decoded(raw[:CLAIM_BYTES_MAX + 1]).strip()
    if not text:
        return None
    why = ""
    if len(raw.rstrip(b"\r\n")) > CLAIM_BYTES_MAX:
        why = f"longer than {CLAIM_BYTES_MAX:,} bytes"
    else:
        try:
            claim = _cleaned(json.loads(text))
            if not isinstance(claim, dict):
                why = "not a JSON object"
            elif not fits(claim, dict):
                why = "nesting or numbers an event cannot carry"
        except RecursionError:
            why = "nested too deep to read"
        except ValueError:
            why = "not JSON"
    if why:
        claim = {"malformed": why, "text": text[:CLAIM_SHOWN]}
    return ClientClaim(time.monotonic_ns(), scenario, n, claim)


def _cleaned(value):
    """Every string of a claim (keys too) as probes/text.py carries client text."""
    if isinstance(value, str):
        return cleaned(value)
    if isinstance(value, dict):
        return {cleaned(str(k)): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


def packet_stats(stats, scenario: str, n: int) -> PacketStats:
    """The capture's totals for an invocation, and why it stopped if it died early (the wire
    clauses are then inconclusive, not passed on a silent wire)."""
    return PacketStats(time.monotonic_ns(), scenario, n, stats.kept, stats.dropped_by_kernel,
                       f"{scenario}.pcap", stats.error)


def last_object(text: str) -> dict:
    """The last line of a program's stdout that is a JSON object (what it says it did)."""
    for line in reversed(text.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k not in ("event", "t_ns")}
    return {}


def on_session_clock(record: dict) -> dict:
    """A real server's record stamped with the wall clock (`t_wall`, Unix seconds: nginx's
    $msec) placed on the session's monotonic clock by the offset between the two now."""
    wall = record.get("t_wall")
    if "t_ns" in record or not isinstance(wall, int | float) or isinstance(wall, bool):
        return record
    return {**record, "t_ns": int(wall * 1e9) - (time.time_ns() - time.monotonic_ns())}
