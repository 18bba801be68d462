"""A timeline of one scenario or attempt, from its evidence book alone (so a replay, which builds
the same book, draws the same picture): time across, one row per process of the client's tree,
then each of the task's servers and the fault proxy that recorded anything.

Times are nanoseconds from the scenario's start (its ScenarioStarted). Everything drawn has a
timestamp in the book; what has none is left out rather than placed by guess:
- a process's life (`alive`) needs its start (fork, or its first exec) and its exit event;
- a server connection (`connection`) needs both its opened and closed records (a server killed
  by an injected crash never closes its connections);
- `busy` stretches are not drawn: the book holds the longest on-CPU stretches' lengths per
  invocation (`busy_max_ns`, `busy_start_max_ns`), not when they ran, so they are given in the
  invocation's label;
- a fork whose child never appears as a process of its own (a thread: its events are its
  process's) gets no row.

Labels hold client text (file names, claims, rejection details) made visible
(sessions/output/escape.py): one line, nothing a terminal acts on. The dashboard draws this model
(tui/timeline.py) and the HTML report draws it as SVG.
"""

import json
import math
import os
from dataclasses import dataclass, field

from sessions.judging.views import (
    connect_outcome,
    endpoint_name,
    endpoint_of,
    given_ports,
    is_given,
)
from sessions.output.escape import visible
from sessions.output.operation_words import life_label, signal_label, truncate_label
from sessions.spec.task import display_of
from sessions.spec.task_display import RECORD_MARK_KINDS
from sessions.stream.evidence import EvidenceBook, InvocationEvidence, ScenarioEvidence

MARK_KINDS = ("exec", "exit", *RECORD_MARK_KINDS, "connect-endpoint", "connect-other", "claim",
              "invocation-start", "invocation-end", "signal", "truncate", "server-start",
              "server-exit")
SPAN_KINDS = ("invocation", "alive", "busy", "connection")
LABEL_MAX = 160   # characters of a label (a claim can be long)


@dataclass(frozen=True)
class Mark:
    """An instant."""

    t_ns: int       # ns from the scenario's start
    row: str
    kind: str       # one of MARK_KINDS
    label: str


@dataclass(frozen=True)
class Span:
    """A stretch of time."""

    start_ns: int
    end_ns: int
    row: str
    kind: str       # one of SPAN_KINDS
    label: str


@dataclass(frozen=True)
class Timeline:
    scenario: str              # the scenario's or attempt's id, as in the book
    rows: tuple[str, ...]      # the client's processes, then the task's servers (the endpoint,
    spans: tuple[Span, ...]    #   a fault proxy, the others that recorded something); by start
    marks: tuple[Mark, ...]    # by time
    end_ns: int                # the scenario's end (its `done` phase) or its last thing drawn
    servers: tuple[str, ...] = ()   # which rows are servers' (the rest: processes)


def round_step(rough_ns: float) -> float:
    """The round interval between ticks at or above rough_ns: 1, 2 or 5 x 10^k ns (both
    drawings' axes: the dashboard's and the HTML report's)."""
    power = 10 ** math.floor(math.log10(rough_ns))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= rough_ns)


def timelines(book: EvidenceBook) -> list[Timeline]:
    """Every scenario or attempt of the book, in the book's order."""
    return [timeline_of(ev) for ev in book.scenarios.values()]


def timeline_of(ev: ScenarioEvidence) -> Timeline:
    b = _Builder(ev.started.t_ns)
    for n in sorted(ev.invocations):
        inv = ev.invocations[n]
        root = _processes(b, inv)
        _invocation(b, inv, root)
        _connects(b, ev, inv)
        _operations(b, inv)
    roles, endpoint = ev.started.roles, endpoint_of(ev)
    if endpoint is not None:
        b.rows.append(endpoint)   # the endpoint's row is there even when it recorded nothing
    marks = {**display_of(ev.started)["marks"], **EVLAB_MARKS}
    # the task's servers, the proxy, and evlab's own views of the task's files (the outputs
    # folder's `files`, the states' and steps' `lab`)
    for server in dict.fromkeys([*([endpoint] if endpoint else []), "proxy", *roles, "files",
                                 "lab"]):
        _server(b, server, [r for n in sorted(ev.invocations)
                            for r in ev.invocations[n].records.get(server, [])], marks)
    end = max([b.rel(ev.done_ns) or 0, *(s.end_ns for s in b.spans),
               *(m.t_ns for m in b.marks)])
    rows = tuple(dict.fromkeys(b.rows))
    return Timeline(ev.id, rows, tuple(sorted(b.spans, key=lambda s: (s.start_ns, s.end_ns))),
                    tuple(sorted(b.marks, key=lambda m: m.t_ns)), end,
                    tuple(r for r in rows if r in roles or r == "proxy"))


@dataclass
class _Builder:
    t0: int
    rows: list[str] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    by_pid: dict[int, str] = field(default_factory=dict)   # the current invocation's rows

    def rel(self, t_ns: int | None) -> int | None:
        """ns from the start; None for a missing stamp (a record without one carries 0)."""
        return None if t_ns is None or t_ns <= 0 else t_ns - self.t0

    def mark(self, t_ns: int | None, row: str, kind: str, label: str) -> None:
        t = self.rel(t_ns)
        if t is not None:
            self.marks.append(Mark(t, row, kind, visible(label, LABEL_MAX)))

    def span(self, start_ns: int | None, end_ns: int | None, row: str, kind: str,
             label: str) -> None:
        start, end = self.rel(start_ns), self.rel(end_ns)
        if start is not None and end is not None and end >= start:
            self.spans.append(Span(start, end, row, kind, visible(label, LABEL_MAX)))

    def row(self, pid: int, name: str, n: int) -> str:
        """A process's row, named once (a pid reused by a later invocation gets its own)."""
        if pid not in self.by_pid:
            label = f"pid {pid} {visible(name)}".rstrip()
            if label in self.rows:
                label += f" (inv {n})"
            self.by_pid[pid] = label
            self.rows.append(label)
        return self.by_pid[pid]


@dataclass
class _Process:
    start: int | None = None
    end: int | None = None
    name: str = ""


def _processes(b: _Builder, inv: InvocationEvidence) -> str | None:
    """The invocation's process rows, their lives, execs and exits; returns its root's row."""
    b.by_pid = {}
    own = ({p.pid for p in inv.processes} | {c.pid for c in inv.connects}
           | {e.pid for e in inv.egress} | {f.pid for f in inv.files})
    procs: dict[int, _Process] = {}
    events = sorted(inv.processes, key=lambda p: p.t_ns)
    argv0 = inv.launched.argv[0] if inv.launched and inv.launched.argv else ""
    for p in events:   # names first: a row is labelled by what its process ran
        proc = procs.setdefault(p.pid, _Process())
        if p.kind == "exec" and p.filename:
            proc.name = os.path.basename(_whole(p.filename, argv0))
        elif p.kind == "fork" and p.child_pid in own and p.child_pid not in procs:
            procs[p.child_pid] = _Process(start=p.t_ns, name=proc.name)
    for p in events:
        proc, row = procs[p.pid], b.row(p.pid, procs[p.pid].name, inv.n)
        if p.kind == "exec":
            proc.start = proc.start or p.t_ns
            b.mark(p.t_ns, row, "exec", f"exec {_whole(p.filename or '?', argv0)} (pid {p.pid})")
        elif p.kind == "exit":
            proc.end = p.t_ns
            b.mark(p.t_ns, row, "exit", f"pid {p.pid} exited")
        elif p.kind == "fork" and p.child_pid in procs:
            b.row(p.child_pid, procs[p.child_pid].name, inv.n)
    for pid, proc in procs.items():
        if pid in b.by_pid:
            b.span(proc.start, proc.end, b.by_pid[pid], "alive",
                   f"{b.by_pid[pid]} alive {((proc.end or 0) - (proc.start or 0)) / 1e6:.1f} ms")
    if b.by_pid:
        return next(iter(b.by_pid.values()))
    if inv.launched is not None:   # no kernel view of the tree: the process evlab launched
        return b.row(inv.launched.pid, os.path.basename(argv0), inv.n)
    return None


FILENAME_KEPT = 63   # the collector keeps an exec's file name to 63 bytes (probes/bcc)


def _whole(filename: str, argv0: str) -> str:
    """An exec's file name as the kernel event kept it, made whole from the command evlab
    launched when it is that command cut short; a name cut short otherwise ends in '…'."""
    if len(filename.encode()) < FILENAME_KEPT:
        return filename
    return argv0 if argv0.startswith(filename) else filename + "…"


def _invocation(b: _Builder, inv: InvocationEvidence, root: str | None) -> None:
    """Its launch, exit, life and claims, on its root process's row."""
    row = root or f"invocation {inv.n}"
    b.rows.append(row)
    launched, exited = inv.launched, inv.exited
    if launched is not None:
        b.mark(launched.t_ns, row, "invocation-start",
               f"invocation {inv.n} launched (pid {launched.pid})")
    if exited is not None:
        how = ("killed at its timeout" if exited.timed_out else f"exit {exited.exit_code}")
        b.mark(exited.t_ns, row, "invocation-end", f"invocation {inv.n}: {how}")
        if launched is not None:
            b.span(launched.t_ns, launched.t_ns + exited.wall_ns, row, "invocation",
                   f"invocation {inv.n}: {exited.wall_ns / 1e6:.1f} ms, {how}{_busy(inv)}")
    for c in inv.claims:
        b.mark(c.t_ns, row, "claim",
               "claim " + json.dumps(c.claim, sort_keys=True, ensure_ascii=False))


def _busy(inv: InvocationEvidence) -> str:
    """The longest on-CPU stretches without a progress syscall, as the collector measured them
    (cpu-budget's evidence): their lengths, not when they ran."""
    counters = inv.final.counters if inv.final else {}
    work, start = counters.get("busy_max_ns"), counters.get("busy_start_max_ns")
    if work is None and start is None:
        return ""
    return (f"; longest on-CPU stretch without progress {(work or 0) / 1e6:.1f} ms"
            f" ({(start or 0) / 1e6:.1f} ms in start-up)")


def _connects(b: _Builder, ev: ScenarioEvidence, inv: InvocationEvidence) -> None:
    """Every connect (the kernel's connect() events, and what the socket hooks saw that those
    missed: datagrams, an io_uring connect), the endpoint's in one kind, the rest in another."""
    ports = given_ports(ev, inv)

    def row(pid: int) -> str:
        return b.by_pid.get(pid) or b.row(pid, "", inv.n)

    seen = set()
    for c in inv.connects:
        seen.add((c.pid, c.address, c.port))
        given = is_given(c.address, c.port, ports)
        b.mark(c.t_ns, row(c.pid), "connect-endpoint" if given else "connect-other",
               f"connect {c.address}:{c.port}" + (_given(ev, c.port) if given else "")
               + (f" {connect_outcome(c.result)}" if c.result else ""))
    for e in inv.egress:
        if e.kind == "connect" and (e.pid, e.address, e.port) in seen:
            continue
        given = is_given(e.address, e.port, ports)
        what = "datagram to" if e.kind == "sendmsg" else "connect"
        b.mark(e.t_ns, row(e.pid), "connect-endpoint" if given else "connect-other",
               f"{what} {e.protocol} {e.address}:{e.port} (socket layer)"
               + (" REFUSED" if e.refused else ""))


def _operations(b: _Builder, inv: InvocationEvidence) -> None:
    """Signals the tree sent and truncations it made (on the sender's row), and the servers'
    processes begun and ended, and started again by the lab (on the server's row)."""
    def row(pid: int) -> str:
        return b.by_pid.get(pid) or b.row(pid, "", inv.n)

    for s in inv.signals:
        if s.target is not None:
            b.mark(s.t_ns, row(s.pid), "signal", signal_label(s))
    for t in inv.truncations:
        b.mark(t.t_ns, row(t.pid), "truncate", truncate_label(t))
    for life in inv.lives:
        if life.whose == "server":
            b.rows.append(life.server)
            kind = "server-start" if life.kind == "started" else "server-exit"
            b.mark(life.t_ns, life.server, kind, life_label(life))
    for r in inv.harness:   # the lab, the service's supervisor, started it again
        server = r.event.removesuffix("_restarted")
        if server != r.event:
            b.rows.append(server)
            f = r.fields
            b.mark(r.t_ns, server, "server-start" if not f.get("failed") else "server-exit",
                   f"{server} could not be started again by the lab: {f['failed']}"
                   if f.get("failed") else f"{server} started again by the lab (pid "
                   f"{f.get('pid', '?')} had ended, status {f.get('exit_status', '?')})")


def _given(ev: ScenarioEvidence, port: int | None) -> str:
    endpoint = endpoint_name(ev)
    return (f" (the {endpoint})" if port == ev.started.endpoint_port
            else f" (the {endpoint}, through the fault proxy)")


EVLAB_MARKS = {"fault_fired": "fault"}   # the fault proxy's (and any server's that says so)


def _server(b: _Builder, server: str, records: list, marks: dict[str, str]) -> None:
    """A server's connections (opened..closed) and the marks its records make (the task's
    [marks]; and a fault that fired)."""
    if not records:
        return
    b.rows.append(server)
    opened: dict[object, tuple[int, list[str]]] = {}
    for r in records:
        conn = r.fields.get("conn")
        if r.event == "connection_opened":
            opened[conn] = (r.t_ns, [])   # a conn number again: the server was restarted
        elif r.event == "connection_closed" and conn in opened:
            start, did = opened.pop(conn)
            b.span(start, r.t_ns, server, "connection",
                   f"{server} conn {conn}: {', '.join(did) or 'opened and closed'}; "
                   + _closed(r.fields))
        elif conn in opened and r.event.split("_")[0] not in opened[conn][1]:
            opened[conn][1].append(r.event.split("_")[0])   # what it did: its record's first word
        if r.event in marks:
            b.mark(r.t_ns, server, marks[r.event], _record_label(server, r))


def _closed(fields: dict) -> str:
    """A closed record's figures, as it names them: "524,288 payload bytes", "ended eof"."""
    said = [f"{v:,} {k.replace('_', ' ')}" for k, v in fields.items()
            if isinstance(v, int) and not isinstance(v, bool) and k not in ("conn", "peer_port")]
    if isinstance(fields.get("end"), str):
        said.append(f"ended {fields['end']}")
    return ", ".join(said) or "closed"


def _record_label(server: str, r) -> str:
    """A marked record in words: its event, its connection, its length and reason if any."""
    f, conn = r.fields, r.fields.get("conn", "?")
    if isinstance(f.get("name"), str):   # the outputs folder's: a file's name (and its old one)
        old = f.get("old")
        return f"{r.event.replace('_', ' ')} {visible(old) + ' → ' if old else ''}" \
               f"{visible(f['name'])}"
    if isinstance(f.get("request"), str):   # a web server's access log: ended at its time
        body = f.get("body_bytes")
        return (f"{r.event.replace('_', ' ')}: {visible(f['request'], 60)} → "
                f"{f.get('status', '?')}" + (f", {body:,} body bytes" if isinstance(body, int)
                                              else "") + f" (conn {conn}, at its end)")
    if r.event != "fault_fired":
        length, reason = f.get("length"), f.get("reason")
        return (f"{r.event.replace('_', ' ')} (conn {conn}"
                + (f", {length:,} bytes)" if isinstance(length, int) else ")")
                + (f": {reason}" if reason else ""))
    what = f.get("fault") or f.get("kind") or "?"
    where = f", {f['direction']}" if "direction" in f else ""
    return f"{server} fault fired: {what} ({f.get('id', '?')}{where}, conn {conn})"
