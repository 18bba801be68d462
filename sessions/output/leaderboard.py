"""A campaign's leaderboard: per client its identity, Pass@1, pass^k, Best-of-N, mean score ±
SEM, invalid attempts, risk findings by severity and the clause or gate it fails most; overall
and per scenario, ranked. Also how far the campaign is (done, running, queued, per node, ETA).

Ranking: pass^k, then Pass@1, then mean score (higher first), then fewer high and medium risk
findings, then the name. A figure with no valid attempt behind it ranks last. A campaign that
mixes tasks ranks the clients of each task apart (ranks from 1 in each; per scenario keyed
TASK/SCENARIO): a figure on one contract says nothing against a figure on another.
"""

import collections
import dataclasses
from dataclasses import dataclass

from sessions.judging.metrics import Metrics, OverallMetrics
from sessions.output.grades import ClientGrade, client_grade, given_up
from sessions.stream.campaign_events import AttemptLost, CampaignStarted
from sessions.stream.compat import OLD_TASK
from sessions.stream.evidence import EvidenceBook, ScenarioEvidence

SEVERITIES = ("high", "medium", "low")


@dataclass(frozen=True)
class FailsMost:
    name: str       # a clause, or "gate NAME"
    count: int


@dataclass(frozen=True)
class ClientEntry:
    """One client of a campaign: its grade and what the leaderboard says of it."""

    name: str
    grade: ClientGrade
    engine_losses: int
    risks: dict[str, int]           # findings by severity
    fails_most: FailsMost | None
    lost: tuple[AttemptLost, ...]

    @property
    def invalid(self) -> int:
        return self.grade.overall.invalid

    def to_json(self) -> dict:
        return {"name": self.name, **self.grade.to_json(campaign=True),
                "invalid": self.invalid, "engine_losses": self.engine_losses,
                "risks": dict(self.risks),
                "fails_most": dataclasses.asdict(self.fails_most) if self.fails_most else None,
                "lost": [{"id": e.scenario, "run": e.run, "node": e.node, "reason": e.reason,
                          "retried": e.retried} for e in self.lost]}


@dataclass(frozen=True)
class Ranked:
    rank: int
    name: str
    figures: Metrics | OverallMetrics
    risks: dict[str, int]
    invalid: int
    fails_most: FailsMost | None
    task: str = ""   # the task its clients are ranked on

    def to_json(self) -> dict:
        return {"rank": self.rank, "name": self.name, "task": self.task,
                "figures": _figures(self.figures),
                "risks": dict(self.risks), "invalid": self.invalid,
                "fails_most": dataclasses.asdict(self.fails_most) if self.fails_most else None}


@dataclass(frozen=True)
class NodeProgress:
    done: int = 0
    running: int = 0
    lost: int = 0


@dataclass(frozen=True)
class Progress:
    total: int
    done: int
    running: int
    queued: int
    lost: int
    given_up: int
    nodes: dict[str, NodeProgress]
    eta_s: float | None

    def to_json(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                "nodes": {n: dataclasses.asdict(p) for n, p in self.nodes.items()}}


@dataclass(frozen=True)
class Board:
    """A campaign's section of the outputs: its ranking overall and per scenario, each client's
    grade, and how far it is."""

    name: str
    engine: str
    scenarios: tuple[str, ...]
    attempts_per_scenario: int
    retries: int
    progress: Progress
    leaderboard: tuple[Ranked, ...]
    per_scenario: dict[str, tuple[Ranked, ...]]
    clients: dict[str, ClientEntry]
    tasks: tuple[str, ...] = ()     # the tasks ranked apart, in the campaign's order

    def by_task(self) -> list[tuple[str, tuple[Ranked, ...]]]:
        """The leaderboard's rows, task by task (each ranked apart)."""
        return [(task, tuple(r for r in self.leaderboard if r.task == task))
                for task in self.tasks]

    def to_json(self) -> dict:
        return {"name": self.name, "engine": self.engine, "tasks": list(self.tasks),
                "scenarios": list(self.scenarios),
                "attempts_per_scenario": self.attempts_per_scenario, "retries": self.retries,
                "progress": self.progress.to_json(),
                "leaderboard": [r.to_json() for r in self.leaderboard],
                "per_scenario": {base: [r.to_json() for r in rows]
                                 for base, rows in self.per_scenario.items()},
                "clients": {name: e.to_json() for name, e in self.clients.items()}}


def _figures(m: Metrics | OverallMetrics) -> dict:
    return dataclasses.asdict(m)


def _fails_most(evs: list[ScenarioEvidence]) -> FailsMost | None:
    counts: collections.Counter[str] = collections.Counter()
    for ev in evs:
        if ev.attempt is None or not ev.attempt.valid:
            continue
        counts.update(f"{v.clause}" for v in ev.verdicts if v.status == "fail")
        counts.update(f"gate {g.gate}" for g in ev.gates if g.status == "fail")
    if not counts:
        return None
    name, count = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    return FailsMost(name, count)


def _entry(book: EvidenceBook, name: str, identity: dict) -> ClientEntry:
    c = book.campaign
    assert c is not None
    evs = [ev for ev in book.scenarios.values() if ev.started.client == name]
    lost = [e for e in book.lost if e.client == name]
    judged = {ev.id for ev in evs if ev.attempt is not None}
    env = next((ev.grade.env for ev in evs if ev.grade is not None), None)
    node = {d.scenario: d.node for d in book.dispatched if d.client == name}
    grade = client_grade({**identity, "env": env}, c.attempts, scenarios_of(c, identity), evs,
                         given_up(lost, judged), node)
    risks = collections.Counter(r.severity for ev in evs for r in ev.risks)
    return ClientEntry(name, grade, len(lost), {s: risks.get(s, 0) for s in SEVERITIES},
                       _fails_most(evs), tuple(lost))


def _key(row: Ranked) -> tuple:
    def high_first(value):
        return -value if value is not None else 1.0
    f = row.figures
    return (high_first(f.pass_hat_k), high_first(f.pass_at_1), high_first(f.mean_score),
            row.risks["high"], row.risks["medium"], row.name)


def _ranked(rows: list[Ranked]) -> tuple[Ranked, ...]:
    return tuple(dataclasses.replace(r, rank=i)
                 for i, r in enumerate(sorted(rows, key=_key), 1))


def scenarios_of(c: CampaignStarted, identity: dict) -> tuple[str, ...]:
    """A client's scenarios (a campaign from before clients had tasks: the campaign's)."""
    return tuple(identity.get("scenarios", c.scenarios))


def task_of(identity: dict) -> str:
    """A client's task id (a campaign from before clients had tasks: compat's OLD_TASK)."""
    return identity.get("task", {}).get("id", OLD_TASK)


def board_of(book: EvidenceBook) -> Board | None:
    """A campaign's board; None when the session is not a campaign."""
    c = book.campaign
    if c is None:
        return None
    # by name: a JSON round trip (the archive) sorts the keys, and a replay must read the same
    clients = {name: _entry(book, name, c.clients[name]) for name in sorted(c.clients)}
    tasks = tuple(dict.fromkeys(task_of(c.clients[n]) for n in c.clients))
    overall: list[Ranked] = []
    per_scenario: dict[str, tuple[Ranked, ...]] = {}
    for task in tasks:
        mine = {n: e for n, e in clients.items() if task_of(c.clients[n]) == task}
        overall += _ranked([Ranked(0, n, e.grade.overall, e.risks, e.invalid, e.fails_most,
                                   task) for n, e in mine.items()])
        for base in dict.fromkeys(b for n in mine for b in scenarios_of(c, c.clients[n])):
            key = base if len(tasks) == 1 else f"{task}/{base}"
            per_scenario[key] = _ranked([
                Ranked(0, n, e.grade.scenarios[base].metrics, e.risks,
                       e.grade.scenarios[base].metrics.invalid, None, task)
                for n, e in mine.items() if base in e.grade.scenarios])
    return Board(c.name, c.engine, tuple(c.scenarios), c.attempts, c.retries, progress(book),
                 tuple(overall), per_scenario, clients, tasks)


def _took_s(ev: ScenarioEvidence) -> float | None:
    """An attempt's own time where it ran: its GradeStarted to its `done` phase (one clock)."""
    start = ev.grade.t_ns if ev.grade is not None else ev.started.t_ns
    return (ev.done_ns - start) / 1e9 if ev.done_ns is not None else None


def progress(book: EvidenceBook) -> Progress:
    """Done, running and queued attempts (per node too) and an estimate of the time left:
    the attempts' mean time where they ran x what is left / the nodes at work."""
    c = book.campaign
    total = sum(len(scenarios_of(c, i)) for i in c.clients.values()) * c.attempts if c else 0
    judged = {ev.id: ev for ev in book.scenarios.values() if ev.attempt is not None}
    gave_up = {e.scenario for e in book.lost if not e.retried} - set(judged)
    latest = {}
    for d in book.dispatched:
        latest[d.scenario] = d
    lost_runs = {(e.scenario, e.run) for e in book.lost}
    running = [d for d in latest.values() if d.scenario not in judged
               and (d.scenario, d.run) not in lost_runs]
    nodes: dict[str, collections.Counter[str]] = {}
    for d in latest.values():
        nodes.setdefault(d.node, collections.Counter())["done"] += d.scenario in judged
    for d in running:
        nodes[d.node]["running"] += 1
    for e in book.lost:
        nodes.setdefault(e.node, collections.Counter())["lost"] += 1
    done = len(judged) + len(gave_up)
    queued = max(0, total - done - len(running))
    took = [t for t in map(_took_s, judged.values()) if t is not None]
    working = max(1, len([n for n in nodes.values()   # a node that lost one is gone
                          if (n["done"] or n["running"]) and not n["lost"]]))
    eta = (sum(took) / len(took) * (queued + len(running)) / working) if took else None
    return Progress(total, done, len(running), queued, len(book.lost), len(gave_up),
                    {name: NodeProgress(n["done"], n["running"], n["lost"])
                     for name, n in nodes.items()}, eta)
