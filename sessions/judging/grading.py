"""Grading any client: one attempt's outcome, and the metrics over repeated attempts.

An attempt is *invalid* when something other than the client decided it — an armed fault that
had its chance and never fired, or a clause or gate left inconclusive for an environment or
harness reason (evidence missing, a port clash). Invalid attempts are shown and left out of
every denominator: they count neither as the client's success nor its failure.

Metrics per grade scenario over its n valid attempts, c of them successes (every clause and
gate pass or not-applicable):
  Pass@1      c / n — the chance one attempt succeeds.
  pass^k      C(c, k) / C(n, k) with k = n: 1 when all k attempts succeed, else 0 — reliability.
  Best-of-N   1 - C(n - c, k) / C(n, k) with k = n: 1 when any attempt succeeds.
  score       per attempt: passed / (passed + failed) over clauses and gates (n/a left out);
              reported as the mean over valid attempts ± its standard error (sample sd / sqrt n).
Overall figures average the scenarios (each scenario weighs the same, as tau-bench does) and
pool every valid attempt's score for the mean ± SEM.
"""

import math
import statistics
from collections.abc import Iterable

from sessions.judging.fault_chance import could_fire
from sessions.stream.events import AttemptJudged, GateResult, Verdict
from sessions.stream.evidence import ScenarioEvidence


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that k attempts drawn from n (c successes) all succeed."""
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k attempts drawn from n (c successes) succeeds."""
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def judge_attempt(ev: ScenarioEvidence, verdicts: list[Verdict], gates: list[GateResult],
                  unfired: list[dict], now_ns: int) -> AttemptJudged:
    s = ev.started
    broken = harness_failures(ev)
    if broken:   # e.g. a port clash, a receiver that died by itself: not the client's doing
        return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, False, False, None,
                             "invalid: harness: " + "; ".join(broken))
    judged = [*verdicts, *gates]
    # Fail closed: an inconclusive that is not the client's own doing blocks the attempt.
    blocked = [j for j in judged if j.status == "inconclusive" and j.failure_class != "client"]
    had_chance = [f for f in unfired if could_fire(f, ev.invocations.get(f["invocation"]),
                                                   s.source_size)]
    passed = [j for j in judged if j.status == "pass"]
    failed = [j for j in judged if j.status == "fail"
              or (j.status == "inconclusive" and j.failure_class == "client")]
    score = len(passed) / (len(passed) + len(failed)) if passed or failed else None
    if had_chance or blocked:
        why = [f"{f['kind']} fault armed for invocation {f['invocation']} never fired"
               for f in had_chance]
        why += [f"{_name(j)} inconclusive ({j.failure_class}): {j.reason}" for j in blocked]
        return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, False, False, score,
                             "invalid: " + "; ".join(why))
    if failed:
        return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, True, False, score,
                             "failed: " + ", ".join(_name(j) for j in failed))
    return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, True, True, score,
                         f"every clause and gate passed ({len(passed)} judged, "
                         f"{len(judged) - len(passed)} not applicable)")


def harness_failures(ev: ScenarioEvidence) -> list[str]:
    """What went wrong in the lab itself, from its own records: a server that could not start,
    a receiver that died without an injected crash, a proxy that failed or lost its upstream."""
    out = []
    for n in sorted(ev.invocations):
        inv = ev.invocations[n]
        crashed = any(r.fields.get("fault") == "crash" for r in inv.receiver
                      if r.event == "fault_fired")
        for r in inv.harness:
            if r.event == "start_failed":
                out.append(str(r.fields.get("error")))
            elif r.event == "receiver_restarted" and not crashed:
                out.append(f"invocation {n}: the receiver died without an injected crash "
                           f"(exit {r.fields.get('exit_status')})")
        for r in inv.proxy:
            if r.event == "proxy_error" or (r.event == "upstream_failed" and not crashed):
                out.append(f"invocation {n}: wire proxy {r.event} {r.fields.get('error', '')}"
                           .rstrip())
    return out


def _name(j: Verdict | GateResult) -> str:
    return j.clause if isinstance(j, Verdict) else f"gate {j.gate}"


def scenario_metrics(attempts: Iterable[AttemptJudged]) -> dict:
    attempts = list(attempts)
    valid = [a for a in attempts if a.valid]
    n, c = len(valid), sum(a.success for a in valid)
    scores = [a.score for a in valid if a.score is not None]
    return {
        "attempts": len(attempts), "valid": n, "invalid": len(attempts) - n, "successes": c,
        "pass_at_1": c / n if n else None,
        "pass_hat_k": pass_hat_k(n, c, n) if n else None, "k": n,
        "best_of_n": pass_at_k(n, c, n) if n else None,
        "best_score": max(scores) if scores else None,
        **_mean_sem(scores),
    }


def _mean_sem(scores: list[float]) -> dict:
    return {"mean_score": statistics.fmean(scores) if scores else None,
            "sem": statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1
            else None}


def overall_metrics(by_scenario: dict[str, list[AttemptJudged]]) -> dict:
    per = {name: scenario_metrics(a) for name, a in by_scenario.items()}
    judged = [m for m in per.values() if m["valid"]]

    def average(key):
        return statistics.fmean(m[key] for m in judged) if judged else None

    scores = [a.score for attempts in by_scenario.values() for a in attempts
              if a.valid and a.score is not None]
    return {
        "scenarios": len(per), "scenarios_with_valid_attempts": len(judged),
        "attempts": sum(m["attempts"] for m in per.values()),
        "invalid": sum(m["invalid"] for m in per.values()),
        "pass_at_1": average("pass_at_1"), "pass_hat_k": average("pass_hat_k"),
        "best_of_n": average("best_of_n"), **_mean_sem(scores),
    }


def figure(value: float | None, digits: int = 2) -> str:
    """A metric as the reports and the dashboard print it: n/a when there was nothing to count."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def score_text(metrics: dict, digits: int = 3, sep: str = " ± ") -> str:
    """mean score ± SEM (the SEM only when there were two valid attempts or more)."""
    if metrics["mean_score"] is None:
        return "n/a"
    return figure(metrics["mean_score"], digits) + (
        f"{sep}{metrics['sem']:.{digits}f}" if metrics["sem"] is not None else "")


def grade_status(overall: dict) -> int:
    """Exit status of `evlab grade`: 0 every valid attempt of every scenario succeeded; 1 an
    attempt failed; 3 nothing failed but some scenario had no valid attempt."""
    if overall["pass_hat_k"] is not None and overall["pass_hat_k"] < 1:
        return 1
    if overall["scenarios_with_valid_attempts"] < overall["scenarios"]:
        return 3
    return 0
