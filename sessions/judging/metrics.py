"""The metrics of a grade over repeated attempts.

Per grade scenario over its n valid attempts, c of them successes (every clause and gate pass
or not-applicable):
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

from sessions.stream.events import AttemptJudged


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that k attempts drawn from n (c successes) all succeed."""
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k attempts drawn from n (c successes) succeeds."""
    return 1 - math.comb(n - c, k) / math.comb(n, k)


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
