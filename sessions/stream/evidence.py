"""The one projection of the event stream: everything the judges, the outputs and the dashboard
read, by scenario and invocation. A session builds one book; the verdict engine, the archive,
the reports and the dashboard's model all read it (a replay or a report builds one from an
archive's events)."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from sessions.stream.campaign_events import AttemptDispatched, AttemptLost, CampaignStarted
from sessions.stream.events import (
    AttemptJudged,
    BoundaryObserved,
    CapabilityMissing,
    CleanupObserved,
    ClientClaim,
    ClientExited,
    ClientLaunched,
    ConnectObserved,
    CounterSample,
    EgressObserved,
    EgressSummary,
    Event,
    FileObserved,
    GateResult,
    GradeStarted,
    LifecycleCheck,
    PacketSeen,
    PacketStats,
    PhaseChanged,
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
from sessions.stream.operations import ProcessLife, SignalObserved, TruncateObserved


@dataclass
class InvocationEvidence:
    n: int
    launched: ClientLaunched | None = None
    final: CounterSample | None = None
    latest: CounterSample | None = None
    connects: list[ConnectObserved] = field(default_factory=list)
    egress: list[EgressObserved] = field(default_factory=list)
    egress_summary: EgressSummary | None = None
    boundary: BoundaryObserved | None = None
    processes: list[ProcessObserved] = field(default_factory=list)
    files: list[FileObserved] = field(default_factory=list)
    signals: list[SignalObserved] = field(default_factory=list)       # calls and signals sent
    truncations: list[TruncateObserved] = field(default_factory=list)
    lives: list[ProcessLife] = field(default_factory=list)   # its processes' ends, the servers'
    cleanup: CleanupObserved | None = None
    packets: list[PacketSeen] = field(default_factory=list)
    packet_stats: PacketStats | None = None
    endpoint: list[ServerRecord] = field(default_factory=list)   # the task's endpoint's
    decoy: list[ServerRecord] = field(default_factory=list)      # every decoy's
    proxy: list[ServerRecord] = field(default_factory=list)      # evlab's fault proxy's
    harness: list[ServerRecord] = field(default_factory=list)    # evlab's own
    load: list[ServerRecord] = field(default_factory=list)       # evlab's load generator's
    records: dict[str, list[ServerRecord]] = field(default_factory=dict)   # each by its name
    claims: list[ClientClaim] = field(default_factory=list)
    exited: ClientExited | None = None
    verifier: VerifierResult | None = None

    def endpoint_events(self, name: str, **match) -> list[ServerRecord]:
        """The endpoint's records of that event (the client's: client_records)."""
        return [r for r in self.client_records(self.endpoint) if r.event == name
                and all(r.fields.get(k) == v for k, v in match.items())]

    def client_records(self, records: list[ServerRecord]) -> list[ServerRecord]:
        """A server's records but those of evlab's load's connections (by their `conn`)."""
        theirs = self.load_conns(records)
        return [r for r in records if r.fields.get("conn") not in theirs] if theirs else records

    def load_ports(self) -> set[int]:
        """The source ports of evlab's load's connections (its own record of each request)."""
        return {r.fields["sport"] for r in self.load
                if r.event == "request" and isinstance(r.fields.get("sport"), int)}

    def load_conns(self, records: list[ServerRecord] | None = None) -> set:
        """A server's connections (the endpoint's by default) that were the load's: opened
        from one of its source ports, as the server's `connection_opened` says (peer_port)."""
        ports = self.load_ports()
        if not ports:   # no load (every task but those with one): nothing to walk
            return set()
        return {r.fields.get("conn") for r in (self.endpoint if records is None else records)
                if r.event == "connection_opened" and r.fields.get("conn") is not None
                and r.fields.get("peer_port") in ports}

    def wire_bytes_to(self, port: int) -> int:
        """Bytes to that port on the wire: the client's (the load's flows left out)."""
        theirs = self.load_ports()
        return sequence_bytes(p for p in self.packets if p.dport == port
                              and p.sport not in theirs)


def sequence_bytes(packets: Iterable[PacketSeen]) -> int:
    """TCP payload bytes of these segments, each byte of a connection's sequence space counted
    once: a segment TCP sent again (its retransmission timer fires on loopback when the machine
    is loaded) is not data sent twice. A segment without a recorded sequence number (an older
    archive) counts in full."""
    total = 0
    flows: dict[tuple[str, int, str, int], list[tuple[int, int]]] = {}
    for p in packets:
        if p.payload_len <= 0:
            continue
        if p.tcp_seq < 0:
            total += p.payload_len
        else:
            flows.setdefault((p.src, p.sport, p.dst, p.dport), []).append(
                (p.tcp_seq, p.payload_len))
    for segments in flows.values():
        base = segments[0][0]
        # offsets from the flow's first segment, signed modulo 2**32 (sequence numbers wrap)
        spans = sorted(((seq - base + 2**31) % 2**32 - 2**31, n) for seq, n in segments)
        covered = None
        for start, n in spans:
            lo = start if covered is None else max(start, covered)
            if start + n > lo:
                total += start + n - lo
            covered = start + n if covered is None else max(covered, start + n)
    return total


@dataclass
class ScenarioEvidence:
    started: ScenarioStarted
    collector: str
    packets_mode: str
    missing: list[CapabilityMissing]
    grade: GradeStarted | None = None     # who is graded, as recorded where the attempt ran
    expected: dict | None = None          # a campaign's identity for that client
    before: VerifierResult | None = None
    # the servers' records written before invocation 1 (set-up: a state a server loaded), by
    # server: counted toward the first invocation's figures, never judged as the client's
    setup_records: dict[str, list[ServerRecord]] = field(default_factory=dict)
    invocations: dict[int, InvocationEvidence] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    judged: ScenarioJudged | None = None
    phase: str = "setup"
    done_ns: int | None = None            # its `done` phase (the clock where it ran)
    lifecycle: dict[str, LifecycleCheck] = field(default_factory=dict)   # grading attempts
    gates: list[GateResult] = field(default_factory=list)
    risks: list[RiskFinding] = field(default_factory=list)
    risk_scan: RiskScan | None = None
    attempt: AttemptJudged | None = None
    cpu_pace: float = 1.0                 # where it ran (SessionStarted.cpu_pace)
    session: SessionStarted | None = None # the session it ran in (a campaign: its node's, on
                                          # its task: its clauses and gates)

    @property
    def id(self) -> str:
        return self.started.scenario

    def invocation(self, n: int) -> InvocationEvidence:
        inv = self.invocations.get(n)   # not setdefault: a new one built per event is costly
        if inv is None:
            inv = self.invocations[n] = InvocationEvidence(n)
        return inv


# Per-invocation records, by event type: (attribute, keep every one or only the latest)
_INVOCATION_LISTS = {ConnectObserved: "connects", EgressObserved: "egress",
                     ProcessObserved: "processes", FileObserved: "files",
                     PacketSeen: "packets", ClientClaim: "claims", SignalObserved: "signals",
                     TruncateObserved: "truncations", ProcessLife: "lives"}
_INVOCATION_LATEST = {EgressSummary: "egress_summary", BoundaryObserved: "boundary",
                      ClientLaunched: "launched", CleanupObserved: "cleanup",
                      PacketStats: "packet_stats", ClientExited: "exited",
                      VerifierResult: "verifier"}
_EVLAB_RECORDS = ("proxy", "harness", "load")   # evlab's own, never a task's server's name


class EvidenceBook:
    """Consumes events; keeps everything the judges and reports need, by scenario.

    Not locked itself: it is mutated only while the stream delivers, so a consistent view from
    another thread is taken under the stream's lock (EventStream.hold())."""

    def __init__(self):
        self.session: SessionStarted | None = None
        self.grade: GradeStarted | None = None
        self.sandbox: SandboxSet | None = None
        self.ended: SessionEnded | None = None
        self.missing: list[CapabilityMissing] = []
        self.campaign: CampaignStarted | None = None
        self.dispatched: list[AttemptDispatched] = []
        self.lost: list[AttemptLost] = []
        self.scenarios: dict[str, ScenarioEvidence] = {}
        self.events: list[Event] = []          # in stream order
        self.by_seq: dict[int, Event] = {}

    @classmethod
    def of(cls, events) -> "EvidenceBook":
        book = cls()
        for e in events:
            book.consume(e)
        return book

    def __call__(self, event: Event) -> None:
        self.consume(event)

    def consume(self, event: Event) -> None:
        self.events.append(event)
        self.by_seq[event.seq] = event
        match event:
            case SessionStarted():   # a campaign has one per attempt: where it ran
                self.session, self.missing, self.sandbox = event, [], None
            case SessionEnded():
                self.ended = event
            case GradeStarted():
                self.grade = event
            case SandboxSet():
                self.sandbox = event
            case CapabilityMissing():
                self.missing.append(event)
            case ScenarioStarted():
                self.scenarios[event.scenario] = ScenarioEvidence(
                    event, self.session.collector if self.session else "none",
                    self.session.packets if self.session else "off", list(self.missing),
                    self.grade, self.campaign.clients.get(event.client)
                    if self.campaign is not None and event.client else None,
                    cpu_pace=self.session.cpu_pace if self.session else 1.0,
                    session=self.session)
            case CampaignStarted():
                self.campaign = event
            case AttemptDispatched():
                self.dispatched.append(event)
            case AttemptLost():
                self.lost.append(event)
            case _:
                name = getattr(event, "scenario", None)
                scenario = self.scenarios.get(name) if name is not None else None
                if scenario is not None:
                    _scenario_event(scenario, event)

    def complete_through(self) -> tuple[int, str | None]:
        """How many scenarios, from the first, have been judged; and the last of them."""
        done, last = 0, None
        for ev in self.scenarios.values():
            if ev.judged is None:
                break
            done, last = done + 1, ev.id
        return done, last


def _scenario_event(scenario: ScenarioEvidence, event: Event) -> None:
    match event:
        case PhaseChanged():
            scenario.phase = event.phase
            if event.phase == "done":
                scenario.done_ns = event.t_ns
        case Verdict():
            scenario.verdicts.append(event)
        case ScenarioJudged():
            scenario.judged = event
        case LifecycleCheck():
            scenario.lifecycle[event.check] = event
        case GateResult():
            scenario.gates.append(event)
        case RiskFinding():
            scenario.risks.append(event)
        case RiskScan():
            scenario.risk_scan = event
        case AttemptJudged():
            scenario.attempt = event
        case VerifierResult(invocation=0):
            scenario.before = event
        case ServerRecord(invocation=0):
            scenario.setup_records.setdefault(event.server, []).append(event)
        case _:
            n = getattr(event, "invocation", 0)   # per-invocation events carry one; 0: none
            if n > 0:
                _invocation_event(scenario.invocation(n), event, scenario.started)


def _invocation_event(inv: InvocationEvidence, event: Event, started: ScenarioStarted) -> None:
    kind = type(event)
    if kind in _INVOCATION_LISTS:
        getattr(inv, _INVOCATION_LISTS[kind]).append(event)
    elif kind in _INVOCATION_LATEST:
        setattr(inv, _INVOCATION_LATEST[kind], event)
    elif isinstance(event, CounterSample):
        inv.latest = event
        if event.final:
            inv.final = event
    elif isinstance(event, ServerRecord):
        inv.records.setdefault(event.server, []).append(event)
        if event.server in _EVLAB_RECORDS:
            getattr(inv, event.server).append(event)
        else:   # the roles are worked out here alone: most events are not a server's
            role = started.roles.get(event.server)
            if role == "endpoint":
                inv.endpoint.append(event)
            elif role == "decoy":
                inv.decoy.append(event)
