"""What the dashboard shows, as plain data: a stream consumer that keeps bounded panes.

The stream delivers on the lab's worker thread; the dashboard reads on its own timer. Every
change bumps `version`, so the UI redraws at its own pace (coalescing any burst) and only when
something changed. No Textual here: the model is tested (and replayed) on its own.
"""

import threading
from collections import deque
from dataclasses import dataclass, field

from sessions.judging.gates import GATES
from sessions.judging.grading import overall_metrics, scenario_metrics
from sessions.spec.contract import CLAUSE_IDS
from sessions.stream.events import (
    AttemptJudged,
    CapabilityMissing,
    ClientClaim,
    ClientExited,
    ConnectObserved,
    CounterSample,
    EgressObserved,
    Event,
    GateResult,
    GradeStarted,
    PacketSeen,
    PacketStats,
    PhaseChanged,
    ProcessMetrics,
    ProcessObserved,
    RiskFinding,
    RiskScan,
    SandboxSet,
    ScenarioJudged,
    ScenarioStarted,
    ServerRecord,
    SessionEnded,
    SessionStarted,
    Verdict,
    VerifierResult,
)

PANE_LINES = 500          # each scrolling pane keeps this many lines
RATE_POINTS = 60          # sparkline history
EVIDENCE_KEEP = 50_000    # events kept for "evidence on demand", oldest dropped first
# Kinds too numerous to keep for evidence lookup; verdicts cite their final samples instead.
_BULK = (PacketSeen, ProcessMetrics)


@dataclass
class InvocationView:
    counters: dict[str, int] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)
    unobserved: tuple[str, ...] = ()
    receiver_payload: int = 0
    packets: int = 0
    final: bool = False


@dataclass
class ScenarioView:
    id: str
    status: str = "queued"    # queued, running, detected, missed, inconclusive
    phase: str = ""
    invocation: int = 0
    expected_failures: tuple[str, ...] = ()
    client: str = ""
    receiver_port: int = 0
    noise: tuple[str, ...] = ()
    faults_armed: int = 0
    faults_fired: int = 0
    invocations: dict[int, InvocationView] = field(default_factory=dict)
    rates: deque = field(default_factory=lambda: deque(maxlen=RATE_POINTS))
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    judged_detail: str = ""
    packets: deque = field(default_factory=lambda: deque(maxlen=PANE_LINES))
    receiver: deque = field(default_factory=lambda: deque(maxlen=PANE_LINES))
    claims: deque = field(default_factory=lambda: deque(maxlen=PANE_LINES))
    _last_bytes: int = 0
    # grading attempts (`evlab grade`)
    base: str = ""
    attempt: int = 0
    gates: dict[str, GateResult] = field(default_factory=dict)
    risks: list[RiskFinding] = field(default_factory=list)
    risk_scan: RiskScan | None = None
    outcome: AttemptJudged | None = None

    def inv(self, n: int) -> InvocationView:
        return self.invocations.setdefault(n, InvocationView())


class DashboardModel:
    def __init__(self, scenario_ids: list[str] = ()):
        self._lock = threading.Lock()
        self.version = 0
        self.scenarios: dict[str, ScenarioView] = {s: ScenarioView(s) for s in scenario_ids}
        self.collector = "…"
        self.packets_mode = "…"
        self.missing: list[CapabilityMissing] = []
        self.sandbox: SandboxSet | None = None
        self.overhead: dict = {}
        self.lost_events = 0
        self.ended: SessionEnded | None = None
        self.session_t0 = 0
        self.grade: GradeStarted | None = None
        self.last_t_ns = 0
        self.events_seen = 0
        self._evidence: dict[int, Event] = {}
        self._evidence_order: deque[int] = deque()

    # --- consuming (any thread) ---------------------------------------------------------
    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events_seen += 1
            self.last_t_ns = max(self.last_t_ns, event.t_ns)
            if not isinstance(event, _BULK) or (isinstance(event, PacketSeen)
                                                and "SYN" in event.flags):
                self._remember(event)
            self._apply(event)
            self.version += 1

    def _remember(self, event: Event) -> None:
        self._evidence[event.seq] = event
        self._evidence_order.append(event.seq)
        if len(self._evidence_order) > EVIDENCE_KEEP:
            self._evidence.pop(self._evidence_order.popleft(), None)

    def _apply(self, event: Event) -> None:
        match event:
            case SessionStarted():
                self.collector, self.packets_mode = event.collector, event.packets
                self.session_t0 = event.t_ns
                for sid in event.scenarios:
                    self.scenarios.setdefault(sid, ScenarioView(sid))
                return
            case CapabilityMissing():
                self.missing.append(event)
                return
            case SandboxSet():
                self.sandbox = event
                return
            case SessionEnded():
                self.ended = event
                return
            case GradeStarted():
                self.grade = event
                return
            case ScenarioStarted():
                view = ScenarioView(event.scenario, status="running",
                                    expected_failures=event.expected_failures,
                                    client=event.client_path, receiver_port=event.receiver_port,
                                    noise=tuple(event.noise), faults_armed=len(event.faults),
                                    base=event.base, attempt=event.attempt)
                self.scenarios[event.scenario] = view
                return
        view = self.scenarios.get(getattr(event, "scenario", None))
        if view is not None:
            self._apply_scenario(view, event)

    def _apply_scenario(self, view: ScenarioView, event: Event) -> None:
        match event:
            case PhaseChanged():
                view.phase = event.phase
                if event.invocation:
                    view.invocation = event.invocation
            case CounterSample():
                inv = view.inv(event.invocation)
                inv.counters, inv.functions = event.counters, event.functions
                inv.unobserved, inv.final = event.unobserved, event.final
                self.lost_events = max(self.lost_events, event.counters.get("lost_events", 0))
                if event.overhead:
                    self.overhead = event.overhead
                moved = (event.counters.get("source_read_bytes", 0)
                         + event.counters.get("sock_sent_bytes", 0))
                if not event.final:
                    view.rates.append(max(0, moved - view._last_bytes))
                view._last_bytes = 0 if event.final else moved
            case PacketSeen():
                view.inv(event.invocation).packets += 1
                view.packets.append((event.seq, f"{_ms(self, event)} {_end(event.src, event.sport)}"
                                     f"→{_end(event.dst, event.dport)} {event.flags} "
                                     f"{event.payload_len}"))
            case ServerRecord():
                if event.event == "fault_fired":
                    view.faults_fired += 1
                if event.server == "receiver" and event.event == "connection_closed":
                    view.inv(event.invocation).receiver_payload += event.fields.get(
                        "payload_bytes", 0)
                if event.event != "payload_progress":
                    detail = " ".join(f"{k}={v}" for k, v in event.fields.items()
                                      if k in ("conn", "reason", "answer", "length",
                                               "payload_bytes", "peer_port", "port", "bytes"))
                    view.receiver.append((event.seq, f"{_ms(self, event)} {event.server} "
                                                     f"{event.event} {detail}".rstrip()))
            case ConnectObserved():
                view.receiver.append((event.seq, f"{_ms(self, event)} kernel connect "
                                                 f"{event.address}:{event.port} → {event.result}"))
            case EgressObserved():
                view.receiver.append((event.seq, f"{_ms(self, event)} socket {event.kind} "
                                                 f"{event.protocol} {event.address}:{event.port}"
                                                 f" pid {event.pid}"
                                                 + (" REFUSED" if event.refused else "")))
            case ProcessObserved():
                view.claims.append((event.seq, f"{_ms(self, event)} kernel {event.kind} "
                                               f"pid {event.pid}"))
            case ClientClaim():
                text = " ".join(f"{k}={v}" for k, v in event.claim.items())
                view.claims.append((event.seq, f"{_ms(self, event)} inv {event.invocation} "
                                               f"claim {text}"))
            case ClientExited():
                view.claims.append((event.seq, f"{_ms(self, event)} inv {event.invocation} exit "
                                               f"{event.exit_code}"
                                               + (" (timed out, killed)" if event.timed_out
                                                  else "")))
            case VerifierResult() if event.invocation:
                view.claims.append((event.seq, f"{_ms(self, event)} verifier saved={event.saved} "
                                               f"match={event.match}"))
            case PacketStats():
                pass
            case Verdict():
                view.verdicts[event.clause] = event
            case GateResult():
                view.gates[event.gate] = event
            case RiskFinding():
                view.risks.append(event)
                view.claims.append((event.seq, f"{_ms(self, event)} RISK {event.severity} "
                                               f"{event.kind}: {event.detail}"))
            case RiskScan():
                view.risk_scan = event
            case AttemptJudged():
                view.outcome = event
                view.status = ("invalid" if not event.valid
                               else "success" if event.success else "failed")
            case ScenarioJudged():
                if event.instrument_check != "graded":  # an attempt's status is its outcome
                    view.status = event.instrument_check
                view.judged_detail = event.detail

    # --- reading (UI thread) ------------------------------------------------------------
    def snapshot_scenario(self, sid: str) -> ScenarioView | None:
        with self._lock:
            view = self.scenarios.get(sid)
            if view is None:
                return None
            copy = ScenarioView(view.id, view.status, view.phase, view.invocation,
                                view.expected_failures, view.client, view.receiver_port,
                                view.noise, view.faults_armed, view.faults_fired,
                                {n: InvocationView(dict(i.counters), dict(i.functions),
                                                   i.unobserved, i.receiver_payload, i.packets,
                                                   i.final)
                                 for n, i in view.invocations.items()},
                                deque(view.rates, maxlen=RATE_POINTS), dict(view.verdicts),
                                view.judged_detail)
            copy.packets.extend(view.packets)
            copy.receiver.extend(view.receiver)
            copy.claims.extend(view.claims)
            return copy

    def conditions(self, sid: str) -> tuple[tuple[str, ...], int, int] | None:
        """(noise kinds, faults armed, faults fired) of a started scenario, without copying
        its panes: the status line asks for this on every tick."""
        with self._lock:
            view = self.scenarios.get(sid)
            if view is None or view.status == "queued":
                return None
            return view.noise, view.faults_armed, view.faults_fired

    def statuses(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(sid, v.status) for sid, v in self.scenarios.items()]

    def evidence(self, seqs) -> list[Event]:
        with self._lock:
            return [self._evidence[s] for s in seqs if s in self._evidence]

    def verdict_rows(self, sid: str) -> list[tuple[str, Verdict | GateResult | None]]:
        """The contract's clauses; for a grading attempt, its lifecycle gates too."""
        with self._lock:
            view = self.scenarios.get(sid)
            rows = [(c, view.verdicts.get(c) if view else None) for c in CLAUSE_IDS]
            if view is not None and view.attempt:
                rows += [(f"gate {g}", view.gates.get(g)) for g in GATES]
            return rows

    def grade_summary(self) -> dict | None:
        """What the grade view shows: identity, per scenario its attempts' outcomes (None while
        not judged) and metrics, overall metrics, risk findings."""
        with self._lock:
            if self.grade is None:
                return None
            by_base: dict[str, list[ScenarioView]] = {b: [] for b in self.grade.scenarios}
            for view in self.scenarios.values():
                if view.base:
                    by_base.setdefault(view.base, []).append(view)
            judged = {b: [v.outcome for v in views if v.outcome] for b, views in by_base.items()}
            return {
                "grade": self.grade,
                "attempts": {b: [(v.id, v.status) for v in views]
                             for b, views in by_base.items()},
                "metrics": {b: scenario_metrics(j) for b, j in judged.items()},
                "overall": overall_metrics(judged),
                "risks": [(v.id, r) for views in by_base.values() for v in views
                          for r in v.risks],
                "blind": [(v.id, v.risk_scan.detail) for views in by_base.values()
                          for v in views if v.risk_scan and not v.risk_scan.complete],
            }


def _end(address: str, port: int) -> str:
    return f":{port}" if address in ("127.0.0.1", "::1") else f"{address}:{port}"


def _ms(model: DashboardModel, event: Event) -> str:
    return f"{(event.t_ns - model.session_t0) / 1e9:8.3f}s"
