"""Evidence gathered from the stream, per scenario and invocation. A consumer like any other:
the verdict engine, the JSON document and the report each build their own from the events."""

from dataclasses import dataclass, field

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
    cleanup: CleanupObserved | None = None
    packets: list[PacketSeen] = field(default_factory=list)
    packet_stats: PacketStats | None = None
    receiver: list[ServerRecord] = field(default_factory=list)
    decoy: list[ServerRecord] = field(default_factory=list)
    proxy: list[ServerRecord] = field(default_factory=list)
    harness: list[ServerRecord] = field(default_factory=list)
    claims: list[ClientClaim] = field(default_factory=list)
    exited: ClientExited | None = None
    verifier: VerifierResult | None = None

    def receiver_events(self, name: str, **match) -> list[ServerRecord]:
        return [r for r in self.receiver if r.event == name
                and all(r.fields.get(k) == v for k, v in match.items())]

    @property
    def payload_bytes(self) -> int:
        return sum(r.fields.get("payload_bytes", 0) for r in self.receiver_events(
            "connection_closed"))

    def wire_bytes_to(self, port: int) -> int:
        return sum(p.payload_len for p in self.packets if p.dport == port)


@dataclass
class ScenarioEvidence:
    started: ScenarioStarted
    collector: str
    packets_mode: str
    missing: list[CapabilityMissing]
    before: VerifierResult | None = None
    invocations: dict[int, InvocationEvidence] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    judged: ScenarioJudged | None = None
    phase: str = "setup"
    lifecycle: dict[str, LifecycleCheck] = field(default_factory=dict)   # grading attempts
    gates: list[GateResult] = field(default_factory=list)
    risks: list[RiskFinding] = field(default_factory=list)
    risk_scan: RiskScan | None = None
    attempt: AttemptJudged | None = None

    @property
    def id(self) -> str:
        return self.started.scenario

    def invocation(self, n: int) -> InvocationEvidence:
        return self.invocations.setdefault(n, InvocationEvidence(n))


class EvidenceBook:
    """Consumes events; keeps everything the judges and reports need, by scenario."""

    def __init__(self):
        self.session: SessionStarted | None = None
        self.grade: GradeStarted | None = None
        self.sandbox: SandboxSet | None = None
        self.ended: SessionEnded | None = None
        self.missing: list[CapabilityMissing] = []
        self.scenarios: dict[str, ScenarioEvidence] = {}
        self.by_seq: dict[int, Event] = {}

    def __call__(self, event: Event) -> None:
        self.consume(event)

    def consume(self, event: Event) -> None:
        self.by_seq[event.seq] = event
        match event:
            case SessionStarted():
                self.session = event
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
                    self.session.packets if self.session else "off", list(self.missing))
            case _:
                self._scenario_event(event)

    def _scenario_event(self, event: Event) -> None:
        scenario = self.scenarios.get(getattr(event, "scenario", None))
        if scenario is None:
            return
        if isinstance(event, PhaseChanged):
            scenario.phase = event.phase
            return
        if isinstance(event, Verdict):
            scenario.verdicts.append(event)
            return
        if isinstance(event, ScenarioJudged):
            scenario.judged = event
            return
        match event:
            case LifecycleCheck():
                scenario.lifecycle[event.check] = event
                return
            case GateResult():
                scenario.gates.append(event)
                return
            case RiskFinding():
                scenario.risks.append(event)
                return
            case RiskScan():
                scenario.risk_scan = event
                return
            case AttemptJudged():
                scenario.attempt = event
                return
        if isinstance(event, VerifierResult) and event.invocation == 0:
            scenario.before = event
            return
        n = getattr(event, "invocation", 0)
        if n <= 0:
            return
        inv = scenario.invocation(n)
        match event:
            case CounterSample(final=True):
                inv.final = inv.latest = event
            case CounterSample():
                inv.latest = event
            case ConnectObserved():
                inv.connects.append(event)
            case EgressObserved():
                inv.egress.append(event)
            case EgressSummary():
                inv.egress_summary = event
            case BoundaryObserved():
                inv.boundary = event
            case ProcessObserved():
                inv.processes.append(event)
            case FileObserved():
                inv.files.append(event)
            case ClientLaunched():
                inv.launched = event
            case CleanupObserved():
                inv.cleanup = event
            case PacketSeen():
                inv.packets.append(event)
            case PacketStats():
                inv.packet_stats = event
            case ServerRecord(server="receiver"):
                inv.receiver.append(event)
            case ServerRecord(server="decoy"):
                inv.decoy.append(event)
            case ServerRecord(server="proxy"):
                inv.proxy.append(event)
            case ServerRecord(server="harness"):
                inv.harness.append(event)
            case ClientClaim():
                inv.claims.append(event)
            case ClientExited():
                inv.exited = event
            case VerifierResult():
                inv.verifier = event
