"""The words evlab shows for a status, an event and a figure: one table, used by the reports, the
headless progress lines and the dashboard alike. Pass/fail is never shown by colour alone: every
status has a symbol and a word."""

import json
from collections.abc import Collection

from sessions.judging.metrics import Metrics, OverallMetrics
from sessions.judging.views import EINPROGRESS, connect_outcome
from sessions.output.escape import visible
from sessions.output.operation_words import life_label, signal_label, truncate_label
from sessions.stream.compat import BOUND_REQUEST_EVENTS
from sessions.stream.events import (
    CleanupObserved,
    ClientClaim,
    ClientExited,
    ConnectObserved,
    EgressObserved,
    Event,
    LifecycleCheck,
    PacketSeen,
    PhaseChanged,
    ProcessObserved,
    RiskFinding,
    ServerRecord,
    VerifierResult,
)
from sessions.stream.operations import ProcessLife, SignalObserved, TruncateObserved

# status -> (symbol, word): clause and gate verdicts, a scenario's instrument check, a grading
# attempt's outcome, and a scenario's place in the queue
STATUS = {
    "pass": ("✓", "pass"),
    "fail": ("✗", "FAIL"),
    "inconclusive": ("?", "inconclusive"),
    "not-applicable": ("–", "n/a"),
    "detected": ("✓", "detected"),
    "missed": ("✗", "MISSED"),
    "invalid": ("⊘", "invalid"),
    "incomplete": ("…", "incomplete"),
    "success": ("✓", "success"),
    "failed": ("✗", "FAILED"),
    "queued": ("·", "queued"),
    "running": ("▶", "running"),
    "not-judged": ("…", "not judged"),
}


def status_symbol(status: str) -> str:
    return STATUS[status][0] if status in STATUS else status


def status_text(status: str) -> str:
    """'✓ pass', '✗ FAIL', …; an unknown status is shown as itself."""
    return " ".join(STATUS[status]) if status in STATUS else status


# a server's bookkeeping, left out of a report's timeline (in the archive): a connection's
# ends, its progress, a request (its answer says what came of it)
ROUTINE_RECORDS = {"connection_opened", "connection_closed", "listening", "stopped",
                   "bytes_received", "payload_progress", "upstream_connected",
                   *BOUND_REQUEST_EVENTS}
FAULT_FIELDS = ("id", "fault", "kind", "direction", "payload_bytes", "at_byte", "phase", "ms",
                "rate")
# a server record's fields first on its line, in this order; then any other short one a task's
# server writes, by name (`key=greeting`)
RECORD_FIELDS = ("conn", "reason", "answer", "length", "payload_bytes", "peer_port", "port",
                 "bytes")
SHORT_FIELD = 40   # characters: a longer value (a digest, a detail, a sample) is left to the
                   # evidence view


def event_line(e: Event) -> str | None:
    """One line for an event worth reading, the same words wherever it is read: the report's
    timeline and the dashboard's panes each choose which events they show (in_timeline,
    tui/lines.py). None for an event that has no line. Client text in it is made visible
    (sessions/output/escape.py): one line, nothing a terminal acts on."""
    line = _event_line(e)
    return None if line is None else visible(line)


def _event_line(e: Event) -> str | None:
    match e:
        case PhaseChanged(phase=phase, invocation=n):
            return f"phase {phase}" + (f" {n}" if n else "")
        case PacketSeen():   # only the packets pane shows these: no tag
            return f"{_end(e.src, e.sport)}→{_end(e.dst, e.dport)} {e.flags} {e.payload_len}"
        case ConnectObserved():
            return (f"[kernel] connect {e.address}:{e.port} → {e.result}"
                    + (f" ({connect_outcome(e.result)})" if e.result == EINPROGRESS else ""))
        case EgressObserved():
            return (f"[socket] {e.kind} {e.protocol} {e.address}:{e.port} pid {e.pid}"
                    + (" REFUSED" if e.refused else ""))
        case ProcessObserved():
            return f"[kernel] {e.kind} pid {e.pid}"
        case ServerRecord():
            return _record_line(e)
        case ClientClaim():
            return f"[claim] inv {e.invocation} {json.dumps(e.claim, sort_keys=True)}"
        case ClientExited():
            return (f"[client] inv {e.invocation} exited {e.exit_code}"
                    + (" (timed out, killed)" if e.timed_out else ""))
        case VerifierResult():
            return f"[verifier] {'ok' if e.match else 'not ok'}: {e.described}"
        case CleanupObserved():
            left = [*e.leftover, *e.listening, *e.cwd_files, *e.store_files]
            return (f"[harness] after invocation {e.invocation}: "
                    + (f"left {'; '.join(left[:4])}" if left else "nothing left behind"))
        case LifecycleCheck():
            return f"[harness] {e.check} {'ok' if e.ok else 'NOT ok'}: {e.detail}"
        case RiskFinding():
            return f"[risk] {e.severity} {e.kind}: {e.detail}"
        case SignalObserved():
            return f"[kernel] pid {e.pid} {signal_label(e)}"
        case TruncateObserved():
            return f"[kernel] pid {e.pid} {truncate_label(e)}"
        case ProcessLife():
            return f"[kernel] {life_label(e)}"
    return None


def in_timeline(e: Event, decoys: Collection[str] = ()) -> bool:
    """Whether the report's timeline shows the event: what happened, not every packet or a
    server's bookkeeping (but every record of a decoy, which nothing should contact)."""
    if isinstance(e, PacketSeen | ProcessObserved):
        return False
    if isinstance(e, ServerRecord):
        return e.server in decoys or not (e.event in ROUTINE_RECORDS
                                          or e.event.endswith("_request"))
    return True


def _record_line(e: ServerRecord) -> str:
    if e.event == "fault_fired":  # the fault band: what fired, where
        return f"[{e.server}] ⚡ FAULT FIRED {_named(e.fields, FAULT_FIELDS)}"
    others = tuple(sorted(k for k, v in e.fields.items() if k not in RECORD_FIELDS
                          and isinstance(v, str | int | float) and len(str(v)) <= SHORT_FIELD))
    return f"[{e.server}] {e.event} {_named(e.fields, RECORD_FIELDS + others)}".rstrip()


def _named(fields: dict, names: tuple[str, ...]) -> str:
    """name=value for the names the record has, in the names' order (an archive's JSON round
    trip sorts a record's keys: a replay must print the same line)."""
    return " ".join(f"{k}={fields[k]}" for k in names if k in fields)


def _end(address: str, port: int) -> str:
    return f":{port}" if address in ("127.0.0.1", "::1") else f"{address}:{port}"


def fields_line(event: Event, t0: int) -> str:
    """Every field of any event on one line (the evidence view: what decided a verdict)."""
    data = {k: v for k, v in vars(event).items() if k not in ("seq", "t_ns", "scenario")}
    when = f"{(event.t_ns - t0) / 1e9:8.3f}s" if t0 else ""
    fields = " ".join(f"{k}={v}" for k, v in data.items() if v not in (None, {}, (), ""))
    return f"{when} {type(event).__name__}: {fields}"


def figure(value: float | None, digits: int = 2) -> str:
    """A metric as the reports and the dashboard print it: n/a when there was nothing to count."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def score_text(metrics: Metrics | OverallMetrics, digits: int = 3, sep: str = " ± ") -> str:
    """mean score ± SEM (the SEM only when there were two valid attempts or more)."""
    if metrics.mean_score is None:
        return "n/a"
    return figure(metrics.mean_score, digits) + (
        f"{sep}{metrics.sem:.{digits}f}" if metrics.sem is not None else "")
