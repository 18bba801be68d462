"""A grade, computed once from the evidence book as typed values: the client's identity, per
scenario its attempts and metrics, overall (`evlab grade`, and each client of a campaign).
The JSON document, the Markdown and JUnit reports and the dashboard all render these."""

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sessions.judging.metrics import Metrics, OverallMetrics, overall_metrics, scenario_metrics
from sessions.stream.campaign_events import AttemptLost
from sessions.stream.events import AttemptJudged, GateResult, RiskFinding, RiskScan
from sessions.stream.evidence import EvidenceBook, ScenarioEvidence

# an executable that runs the script its first word names: a grade is of that script
_INTERPRETER = re.compile(r"(python|pypy|node|nodejs|ruby|perl|bash|sh|dash|zsh|php|deno|bun|"
                          r"lua|java)[0-9.]*")
METRIC_DEFINITIONS = ("pass_at_1 = c/n; pass_hat_k = C(c,k)/C(n,k) with k = n; best_of_n = 1 - "
                      "C(n-c,k)/C(n,k) with k = n; n = valid attempts (invalid ones excluded), "
                      "c = successes; score = passed / (passed + failed) over clauses and "
                      "gates, mean ± SEM")


def outcome_word(a: AttemptJudged) -> str:
    """The one word for a judged attempt's outcome: invalid, success or failed."""
    return "invalid" if not a.valid else "success" if a.success else "failed"


@dataclass(frozen=True)
class AttemptRow:
    """One attempt as judged (or not yet): its clauses, gates, risk findings and outcome."""

    id: str
    base: str
    attempt: int
    collector: str | None          # where it ran, as it ran
    packets: str | None
    judged: AttemptJudged | None
    clauses: dict[str, str]
    gates: tuple[GateResult, ...]
    risk_scan: RiskScan | None
    risks: tuple[RiskFinding, ...]
    node: str | None = None        # a campaign's: the node it ran on

    @property
    def status(self) -> str:
        """running, or the attempt's outcome: invalid, success or failed."""
        return "running" if self.judged is None else outcome_word(self.judged)

    @property
    def scan_complete(self) -> bool:
        return self.risk_scan is not None and self.risk_scan.complete

    @property
    def scan_detail(self) -> str:
        return self.risk_scan.detail if self.risk_scan is not None else "not judged"

    def to_json(self, campaign: bool = False) -> dict:
        a = self.judged
        out = {
            "id": self.id, "attempt": self.attempt,
            "collector": self.collector, "packets": self.packets,
            "valid": a.valid if a else None, "success": a.success if a else None,
            "score": a.score if a else None, "reason": a.reason if a else "not judged",
            "rule": a.rule if a else None,
            "clauses": dict(self.clauses),
            "gates": {g.gate: {"status": g.status, "reason": g.reason,
                               "failure_class": g.failure_class, "evidence": list(g.evidence)}
                      for g in self.gates},
            "risk_scan": {"complete": self.scan_complete, "detail": self.scan_detail},
            "risk_findings": [{"invocation": r.invocation, "severity": r.severity,
                               "kind": r.kind, "detail": r.detail,
                               "evidence": list(r.evidence)} for r in self.risks],
        }
        return {**out, "node": self.node} if campaign else out


@dataclass(frozen=True)
class ScenarioGrade:
    metrics: Metrics
    runs: tuple[AttemptRow, ...]


def gates_of_runs(runs) -> list[str]:
    """The gates the attempts were judged by, in their contract's order."""
    return list(dict.fromkeys(g.gate for r in runs for g in r.gates))


def clauses_of(runs) -> list[str]:
    """The clauses the attempts were judged on, in their contract's order (every attempt's
    verdicts come in it)."""
    return list(dict.fromkeys(c for r in runs for c in r.clauses))


@dataclass(frozen=True)
class ClientGrade:
    identity: dict                  # command, executable, sha256, files, (shipped), env
    attempts_per_scenario: int
    scenarios: dict[str, ScenarioGrade]
    overall: OverallMetrics
    given_up: tuple[AttemptJudged, ...] = ()   # a campaign's attempts the engine lost for good

    @property
    def command(self) -> tuple[str, ...]:
        return tuple(self.identity["command"])

    @property
    def name(self) -> str:
        """What the grade is of: the script an interpreter runs (`python3 my_client.py ...`:
        my_client.py, as the command wrote it), else the executable."""
        files = {Path(f).name for f in self.identity.get("files", {})}
        words = [w for w in self.command[1:] if not w.startswith("-")]
        if words and _INTERPRETER.fullmatch(Path(self.identity["executable"]).name) \
                and "{" not in words[0] and Path(words[0]).name in files:
            return words[0]
        return str(self.identity["executable"])

    @property
    def runs(self) -> list[AttemptRow]:
        return [run for s in self.scenarios.values() for run in s.runs]

    def statuses(self) -> dict[str, list[tuple[str, str]]]:
        """Per scenario, each attempt's id and status; those the engine gave up on, invalid."""
        out = {base: [(run.id, run.status) for run in s.runs]
               for base, s in self.scenarios.items()}
        for a in self.given_up:
            out.setdefault(a.base, []).append((a.scenario, "invalid"))
        return out

    def blind_scans(self) -> list[tuple[str, str]]:
        """Judged attempts whose risk scan could not see everything: (id, why)."""
        return [(run.id, run.scan_detail) for run in self.runs
                if run.judged is not None and not run.scan_complete]

    def to_json(self, campaign: bool = False) -> dict:
        return {
            "client": dict(self.identity),
            "attempts_per_scenario": self.attempts_per_scenario,
            "scenarios": {base: {**dataclasses.asdict(s.metrics),
                                 "runs": [run.to_json(campaign) for run in s.runs]}
                          for base, s in self.scenarios.items()},
            "overall": dataclasses.asdict(self.overall),
            "metric_definitions": METRIC_DEFINITIONS,
        }


def _row(ev: ScenarioEvidence, node: str | None) -> AttemptRow:
    return AttemptRow(ev.id, ev.started.base, ev.started.attempt, ev.collector,
                      ev.packets_mode, ev.attempt, {v.clause: v.status for v in ev.verdicts},
                      tuple(ev.gates), ev.risk_scan, tuple(ev.risks), node)


def grade_of(book: EvidenceBook) -> ClientGrade | None:
    """`evlab grade`'s: None when the session is not a grade (or is a campaign)."""
    g = book.grade
    if g is None or book.campaign is not None:
        return None
    identity = {"command": list(g.command), "executable": g.executable, "sha256": g.sha256,
                "files": g.files, "env": g.env}
    return client_grade(identity, g.attempts, g.scenarios,
                        [ev for ev in book.scenarios.values() if ev.started.attempt])


def client_grade(identity: dict, attempts: int, bases, evs: list[ScenarioEvidence],
                 given_up: Sequence[AttemptJudged] = (),
                 nodes: dict[str, str] | None = None) -> ClientGrade:
    """One client's grade from its attempts' evidence (and, in a campaign, the attempts the
    engine lost for good, counted as invalid, and the node each attempt ran on)."""
    runs: dict[str, list[ScenarioEvidence]] = {base: [] for base in bases}
    for ev in evs:
        runs.setdefault(ev.started.base, []).append(ev)
    judged = {base: [ev.attempt for ev in evs if ev.attempt] for base, evs in runs.items()}
    for a in given_up:
        judged.setdefault(a.base, []).append(a)
    nodes = nodes or {}
    return ClientGrade(
        identity, attempts,
        {base: ScenarioGrade(scenario_metrics(judged[base]),
                             tuple(_row(ev, nodes.get(ev.id)) for ev in evs))
         for base, evs in runs.items()},
        overall_metrics(judged), tuple(given_up))


def given_up(lost: list[AttemptLost], judged: set[str]) -> list[AttemptJudged]:
    """Attempts the engine lost and did not run again (and no later run judged): invalid."""
    final = {}
    for e in lost:
        final[e.scenario] = e
    return [AttemptJudged(e.t_ns, e.scenario, e.base, e.attempt, False, False, None,
                          f"invalid: {e.reason} (run {e.run}, not retried)")
            for e in final.values() if not e.retried and e.scenario not in judged]
