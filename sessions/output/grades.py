"""A grade's section of the outputs: the client's identity, per scenario its attempts and
metrics, overall (`evlab grade`, and each client of a campaign)."""

from sessions.judging.metrics import overall_metrics, scenario_metrics
from sessions.stream.events import AttemptJudged
from sessions.stream.evidence import EvidenceBook, ScenarioEvidence


def _attempt_run(ev: ScenarioEvidence) -> dict:
    a = ev.attempt
    return {
        "id": ev.id, "attempt": ev.started.attempt,
        "collector": ev.collector, "packets": ev.packets_mode,   # where it ran, as it ran
        "valid": a.valid if a else None, "success": a.success if a else None,
        "score": a.score if a else None, "reason": a.reason if a else "not judged",
        "clauses": {v.clause: v.status for v in ev.verdicts},
        "gates": {g.gate: {"status": g.status, "reason": g.reason,
                           "failure_class": g.failure_class, "evidence": list(g.evidence)}
                  for g in ev.gates},
        "risk_scan": ({"complete": ev.risk_scan.complete, "detail": ev.risk_scan.detail}
                      if ev.risk_scan else {"complete": False, "detail": "not judged"}),
        "risk_findings": [{"invocation": r.invocation, "severity": r.severity, "kind": r.kind,
                           "detail": r.detail, "evidence": list(r.evidence)} for r in ev.risks],
    }


def grade_section(book: EvidenceBook) -> dict | None:
    """`evlab grade`: the client's identity, per scenario its attempts and metrics, overall."""
    g = book.grade
    if g is None or book.campaign is not None:
        return None
    identity = {"command": list(g.command), "executable": g.executable, "sha256": g.sha256,
                "files": g.files, "env": g.env}
    return client_grade(identity, g.attempts, g.scenarios,
                        [ev for ev in book.scenarios.values() if ev.started.attempt])


def client_grade(identity: dict, attempts: int, bases, evs: list[ScenarioEvidence],
                 given_up: list[AttemptJudged] = ()) -> dict:
    """One client's grade from its attempts' evidence (and, in a campaign, the attempts the
    engine lost for good, counted as invalid)."""
    runs: dict[str, list[ScenarioEvidence]] = {base: [] for base in bases}
    for ev in evs:
        runs.setdefault(ev.started.base, []).append(ev)
    judged = {base: [ev.attempt for ev in evs if ev.attempt] for base, evs in runs.items()}
    for a in given_up:
        judged.setdefault(a.base, []).append(a)
    return {
        "client": identity,
        "attempts_per_scenario": attempts,
        "scenarios": {base: {**scenario_metrics(judged[base]),
                             "runs": [_attempt_run(ev) for ev in evs]}
                      for base, evs in runs.items()},
        "overall": overall_metrics(judged),
        "metric_definitions": "pass_at_1 = c/n; pass_hat_k = C(c,k)/C(n,k) with k = n; "
                              "best_of_n = 1 - C(n-c,k)/C(n,k) with k = n; n = valid attempts "
                              "(invalid ones excluded), c = successes; score = passed / "
                              "(passed + failed) over clauses and gates, mean ± SEM",
    }


