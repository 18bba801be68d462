"""What the dashboard shows: the session's EvidenceBook, which keeps every fact (verdicts, gates,
risks, attempt outcomes, counters, exits, claims, the verifier, the sandbox, missing
capabilities, the grade), plus the view's own state: the panes' lines, the transfer rates, the
client's latest process metrics, and the order of the scenarios (queued ones too).

The stream delivers on the lab's worker thread; the dashboard reads on its own timer. The model
follows a JudgedStream, whose book is fed first, and reads under the stream's lock
(`hold()`), so a read sees the book and the view state between two events. Every
change bumps `version`, so the UI redraws at its own pace (coalescing any burst) and only when
something changed. No Textual here: the model is tested (and replayed) on its own.
"""

import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from sessions.judging.gates import GATES, recorded_gates
from sessions.output.figures import invocation_count, task_figures
from sessions.output.file_effects import InvocationEffects, invocation_effects, made_from
from sessions.output.grades import ClientGrade, grade_of, outcome_word
from sessions.output.judged import JudgedStream
from sessions.output.leaderboard import Board, board_of
from sessions.output.load_over_time import LoadOverTime, load_over_time
from sessions.output.timeline import Timeline, timeline_of
from sessions.spec.task import record_of
from sessions.stream.campaign_events import AttemptDispatched, AttemptLost, CampaignStarted
from sessions.stream.events import (
    AttemptJudged,
    CapabilityMissing,
    CounterSample,
    Event,
    GateResult,
    GradeStarted,
    PhaseChanged,
    ProcessMetrics,
    SandboxSet,
    ScenarioStarted,
    ServerRecord,
    SessionEnded,
    SessionStarted,
    Verdict,
)
from sessions.stream.evidence import EvidenceBook, InvocationEvidence, ScenarioEvidence
from tui.lines import CLAIMS, EVENTS, PACKETS, PANES, pane_line

PANE_LINES = 500          # each scrolling pane keeps this many lines
PANE_FIGURES = 3          # the task's figures the counters pane has room for (the reports: all)
RATE_POINTS = 60          # sparkline history
LOAD_BUCKETS = 60         # the load view's buckets over the load's span, about (100 ms at least)
_generations = itertools.count(1)
# what a campaign's leaderboard and progress are made from (the rest leaves them as they are)
_CAMPAIGN_EVENTS = (CampaignStarted, AttemptDispatched, AttemptLost, AttemptJudged,
                    ScenarioStarted, SessionEnded)


@dataclass
class _ScenarioPanes:
    """One scenario's view state; a (re)run starts it afresh."""

    lines: dict[str, deque] = field(
        default_factory=lambda: {p: deque(maxlen=PANE_LINES) for p in PANES})
    rates: deque = field(default_factory=lambda: deque(maxlen=RATE_POINTS))
    moved: int = 0            # bytes moved at the last sample: a rate is the difference
    invocation: int = 0       # the invocation of the latest phase
    faults_fired: int = 0     # counted here: the book keeps no records outside an invocation
    # the client's two latest ProcessMetrics per invocation (CPU % is their difference)
    client: dict[int, tuple[ProcessMetrics | None, ProcessMetrics]] = field(default_factory=dict)
    # each invocation's file effects and what they were made from (sessions/output/file_effects)
    effects: dict[int, tuple[tuple, InvocationEffects | None]] = field(default_factory=dict)
    load: tuple[tuple, LoadOverTime | None] = ((), None)   # and what it was made from

    def note_sample(self, sample: CounterSample) -> None:
        moved = (sample.counters.get("source_read_bytes", 0)
                 + sample.counters.get("sock_sent_bytes", 0))
        if not sample.final:
            self.rates.append(max(0, moved - self.moved))
        self.moved = 0 if sample.final else moved

    def note_metrics(self, metrics: ProcessMetrics) -> None:
        previous = self.client.get(metrics.invocation, (None, None))[1]
        self.client[metrics.invocation] = (previous, metrics)


@dataclass(frozen=True)
class InvocationFigures:
    """One invocation's counters as the counters panel shows them."""

    sample: CounterSample | None          # the latest
    task: tuple[tuple[str, int | None], ...]   # the task's figures (sessions/output/figures)
    packets: int
    client: ProcessMetrics | None         # the client's latest process metrics
    client_cpu_percent: float | None

    def counter(self, name: str) -> int | None:
        return None if self.sample is None else self.sample.counters.get(name)

    def function(self, name: str) -> int | None:
        return None if self.sample is None else self.sample.functions.get(name)


@dataclass(frozen=True, eq=False)  # compared by identity: each draw takes a new one
class ScenarioView:
    """One scenario as the panels draw it: a copy, safe to read on the UI thread."""

    id: str
    generation: int           # the model it came from (a replay stepped back makes a new one)
    status: str               # queued, running, detected, missed, inconclusive; or an outcome
    phase: str
    invocation: int
    expected_failures: tuple[str, ...]
    judged_detail: str
    invocations: dict[int, InvocationFigures]
    rows: tuple[tuple[str, Verdict | GateResult | None], ...]   # clauses (and gates)
    rates: tuple[int, ...]
    packets: tuple[tuple[int, str], ...]     # (seq, line)
    events: tuple[tuple[int, str], ...]      # the servers' records and the kernel's events
    claims: tuple[tuple[int, str], ...]
    invocation_count: int = 2                 # the task's, per scenario
    figure_labels: tuple[str, ...] = ()       # the task's figures, by label
    effects: tuple[InvocationEffects, ...] = ()   # where its file changes landed, by invocation
    wire: bool | None = None                  # its task has servers to talk to (None: not started)
    load: LoadOverTime | None = None          # evlab's load over time (None: its task has none)


@dataclass(frozen=True)
class SessionFacts:
    """What the status line and the banner say about the whole session."""

    collector: str = "…"
    packets_mode: str = "…"
    sandbox: SandboxSet | None = None
    missing: tuple[CapabilityMissing, ...] = ()
    lost_events: int = 0
    overhead: dict = field(default_factory=dict)


def status_of(ev: ScenarioEvidence | None) -> str:
    """A scenario's status: queued until it starts; an attempt's status is its outcome."""
    if ev is None:
        return "queued"
    if ev.attempt is not None:
        return outcome_word(ev.attempt)
    if ev.judged is not None and ev.judged.instrument_check != "graded":
        return ev.judged.instrument_check
    return "running"


def verdict_rows(ev: ScenarioEvidence | None, clauses: list[str], gates: Iterable[str] = GATES
                 ) -> list[tuple[str, Verdict | GateResult | None]]:
    """The task's clauses (the session's record of them); for a grading attempt, its
    lifecycle gates too (the contract's, as recorded)."""
    verdicts = {v.clause: v for v in ev.verdicts} if ev else {}
    rows: list[tuple[str, Verdict | GateResult | None]] = [
        (c, verdicts.get(c)) for c in dict.fromkeys([*clauses, *verdicts])]
    if ev is not None and ev.started.attempt:
        judged = {g.gate: g for g in ev.gates}
        rows += [(f"gate {g}", judged.get(g)) for g in dict.fromkeys([*gates, *judged])]
    return rows


class DashboardModel:
    def __init__(self, scenario_ids: Iterable[str] = (), stream: JudgedStream | None = None):
        """Follows `stream` (a fresh one if none is given): subscribes to it."""
        self.stream = stream if stream is not None else JudgedStream()
        self.book: EvidenceBook = self.stream.book
        self.generation = next(_generations)
        self.version = 0
        self.campaign_version = 0     # bumped by what changes the leaderboard (_CAMPAIGN_EVENTS)
        self._board: tuple[int, Board | None] = (-1, None)
        self._lock = self.stream.hold()
        self._panes: dict[str, _ScenarioPanes] = {s: _ScenarioPanes() for s in scenario_ids}
        self.stream.subscribe(self)

    # --- consuming (the stream's thread) -------------------------------------------------
    def __call__(self, event: Event) -> None:
        with self._lock:
            self._note(event)
            self.version += 1
            if isinstance(event, _CAMPAIGN_EVENTS):
                self.campaign_version += 1

    def _note(self, event: Event) -> None:
        match event:
            case SessionStarted():
                for sid in event.scenarios:
                    self._panes.setdefault(sid, _ScenarioPanes())
                return
            case ScenarioStarted():
                self._panes[event.scenario] = _ScenarioPanes()
                return
        panes = self._panes.get(str(getattr(event, "scenario", "")))
        if panes is None:
            return
        match event:
            case PhaseChanged(invocation=n) if n:
                panes.invocation = n
            case CounterSample():
                panes.note_sample(event)
            case ProcessMetrics(role="client"):
                panes.note_metrics(event)
            case ServerRecord(event="fault_fired"):
                panes.faults_fired += 1
        line = pane_line(event, self.session_t0)
        if line is not None:
            panes.lines[line[0]].append((event.seq, line[1]))

    # --- reading (UI thread) -------------------------------------------------------------
    @property
    def grade(self) -> GradeStarted | None:
        return self.book.grade

    @property
    def campaign(self) -> CampaignStarted | None:
        return self.book.campaign

    def campaign_board(self) -> Board | None:
        """The campaign's board (sessions.output.leaderboard: its ranked leaderboard, clients'
        grades and progress); None when the session is not a campaign.
        Made again only when an attempt was dispatched, started, judged or lost."""
        with self._lock:
            if self._board[0] != self.campaign_version:
                self._board = (self.campaign_version, board_of(self.book))
            return self._board[1]

    @property
    def session_t0(self) -> int:
        session = self.book.session
        return session.t_ns if session else 0

    def snapshot_scenario(self, sid: str) -> ScenarioView | None:
        with self._lock:
            panes = self._panes.get(sid)
            if panes is None:
                return None
            ev = self.book.scenarios.get(sid)
            invocations = ({n: _figures(ev, inv, panes) for n, inv in ev.invocations.items()}
                           if ev else {})
            view = ScenarioView(
                sid, self.generation, status_of(ev), ev.phase if ev else "", panes.invocation,
                ev.started.expected_failures if ev else (),
                ev.judged.detail if ev and ev.judged else "", invocations,
                tuple(verdict_rows(ev, self._clauses(ev), self._gates(ev))),
                tuple(panes.rates),
                tuple(panes.lines[PACKETS]), tuple(panes.lines[EVENTS]),
                tuple(panes.lines[CLAIMS]), invocation_count(ev) if ev else 2,
                tuple(label for label, _ in task_figures(ev, None))[:PANE_FIGURES] if ev else (),
                wire=bool(ev.started.roles) if ev else None, load=_load(ev, panes))
            numbers, grown = _grown_effects(ev, panes)
        # made outside the lock: resolving thousands of paths must not hold up the stream
        return replace(view, effects=_effects(panes, numbers, grown))

    def conditions(self, sid: str) -> tuple[tuple[str, ...], int, int] | None:
        """(noise kinds, faults armed, faults fired) of a started scenario, without copying
        its panes: the status line asks for this on every tick."""
        with self._lock:
            ev, panes = self.book.scenarios.get(sid), self._panes.get(sid)
            if ev is None or panes is None:
                return None
            return tuple(ev.started.noise), len(ev.started.faults), panes.faults_fired

    def statuses(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(sid, status_of(self.book.scenarios.get(sid))) for sid in self._panes]

    def session_facts(self) -> SessionFacts:
        with self._lock:
            book = self.book
            samples = [inv.latest for ev in book.scenarios.values()
                       for inv in ev.invocations.values() if inv.latest is not None]
            costed = [s for s in samples if s.overhead]
            return SessionFacts(
                book.session.collector if book.session else "…",
                book.session.packets if book.session else "…", book.sandbox,
                tuple(book.missing),
                max((s.counters.get("lost_events", 0) for s in samples), default=0),
                max(costed, key=lambda s: s.seq).overhead if costed else {})

    def evidence(self, seqs: Iterable[int]) -> list[Event]:
        with self._lock:
            return [self.book.by_seq[s] for s in seqs if s in self.book.by_seq]

    def verdict_rows(self, sid: str) -> list[tuple[str, Verdict | GateResult | None]]:
        with self._lock:
            ev = self.book.scenarios.get(sid)
            return verdict_rows(ev, self._clauses(ev), self._gates(ev))

    def _session_of(self, ev: ScenarioEvidence | None) -> SessionStarted | None:
        """The session a scenario ran in (a campaign mixing tasks: its task's), else the
        latest."""
        return ev.session if ev is not None and ev.session is not None else self.book.session

    def _clauses(self, ev: ScenarioEvidence | None) -> list[str]:
        return record_of(self._session_of(ev))["clauses"]

    def _gates(self, ev: ScenarioEvidence | None) -> tuple[str, ...]:
        return recorded_gates(self._session_of(ev))

    def timeline(self, sid: str) -> Timeline | None:
        """A started scenario's timeline (sessions.output.timeline, as the HTML report's)."""
        with self._lock:
            ev = self.book.scenarios.get(sid)
            return timeline_of(ev) if ev is not None else None

    def client_grade(self) -> ClientGrade | None:
        """`evlab grade`'s grade so far (sessions.output.grades, as the reports have it)."""
        with self._lock:
            return grade_of(self.book)


def _load(ev: ScenarioEvidence | None, panes: _ScenarioPanes) -> LoadOverTime | None:
    """The load over time, made again only when a load record, a launch or an exit came."""
    if ev is None:
        return None
    key = tuple((n, len(inv.load), inv.launched is not None, inv.exited is not None)
                for n, inv in ev.invocations.items())
    if panes.load[0] != key or not key:
        panes.load = (key, load_over_time(ev, LOAD_BUCKETS))
    return panes.load[1]


def _grown_effects(ev: ScenarioEvidence | None, panes: _ScenarioPanes
                   ) -> tuple[list[int], list[tuple[tuple, InvocationEvidence]]]:
    """(the invocations, copies of what the file effects read of those whose evidence grew
    since their effects were made): taken under the lock."""
    if ev is None:
        return [], []
    grown = []
    for n, inv in ev.invocations.items():
        key = made_from(inv)
        if panes.effects.get(n, ((), None))[0] != key:
            grown.append((key, InvocationEvidence(
                n, launched=inv.launched, final=inv.final, latest=inv.latest,
                processes=list(inv.processes), files=list(inv.files))))
    return sorted(ev.invocations), grown


def _effects(panes: _ScenarioPanes, numbers: list[int],
             grown: list[tuple[tuple, InvocationEvidence]]) -> tuple[InvocationEffects, ...]:
    for key, inv in grown:
        panes.effects[inv.n] = (key, invocation_effects(inv))
    return tuple(e for n in numbers if (e := panes.effects[n][1]) is not None)


def _figures(ev: ScenarioEvidence, inv: InvocationEvidence,
             panes: _ScenarioPanes) -> InvocationFigures:
    previous, client = panes.client.get(inv.n, (None, None))
    return InvocationFigures(inv.latest, tuple(task_figures(ev, inv)), len(inv.packets), client,
                             _cpu_percent(previous, client, inv))


def _cpu_percent(previous: ProcessMetrics | None, latest: ProcessMetrics | None,
                 inv: InvocationEvidence) -> float | None:
    """The client's CPU over the last sampling interval (from its launch, for the first)."""
    if latest is None:
        return None
    if previous is not None:
        cpu_s, since_ns = latest.cpu_s - previous.cpu_s, previous.t_ns
    elif inv.launched is not None:
        cpu_s, since_ns = latest.cpu_s, inv.launched.t_ns
    else:
        return None
    wall_s = (latest.t_ns - since_ns) / 1e9
    return 100 * max(0.0, cpu_s) / wall_s if wall_s > 0 else None
