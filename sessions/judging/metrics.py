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
from dataclasses import dataclass

from sessions.stream.events import AttemptJudged


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that k attempts drawn from n (c successes) all succeed."""
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k attempts drawn from n (c successes) succeeds."""
    return 1 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class Metrics:
    """One grade scenario's figures over its attempts (None: no valid attempt behind it)."""

    attempts: int
    valid: int
    invalid: int
    successes: int
    pass_at_1: float | None
    pass_hat_k: float | None
    k: int
    best_of_n: float | None
    best_score: float | None
    mean_score: float | None
    sem: float | None


@dataclass(frozen=True)
class OverallMetrics:
    """A client's figures over every scenario: each scenario weighs the same."""

    scenarios: int
    scenarios_with_valid_attempts: int
    attempts: int
    invalid: int
    pass_at_1: float | None
    pass_hat_k: float | None
    best_of_n: float | None
    mean_score: float | None
    sem: float | None


def scenario_metrics(attempts: Iterable[AttemptJudged]) -> Metrics:
    attempts = list(attempts)
    valid = [a for a in attempts if a.valid]
    n, c = len(valid), sum(a.success for a in valid)
    scores = [a.score for a in valid if a.score is not None]
    mean, sem = _mean_sem(scores)
    return Metrics(len(attempts), n, len(attempts) - n, c,
                   c / n if n else None, pass_hat_k(n, c, n) if n else None, n,
                   pass_at_k(n, c, n) if n else None, max(scores) if scores else None, mean, sem)


def _mean_sem(scores: list[float]) -> tuple[float | None, float | None]:
    return (statistics.fmean(scores) if scores else None,
            statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1 else None)


def overall_metrics(by_scenario: dict[str, list[AttemptJudged]]) -> OverallMetrics:
    per = {name: scenario_metrics(a) for name, a in by_scenario.items()}
    judged = [m for m in per.values() if m.valid]

    def average(values) -> float | None:
        values = [v for v in values if v is not None]
        return statistics.fmean(values) if judged else None

    scores = [a.score for attempts in by_scenario.values() for a in attempts
              if a.valid and a.score is not None]
    return OverallMetrics(
        len(per), len(judged), sum(m.attempts for m in per.values()),
        sum(m.invalid for m in per.values()), average(m.pass_at_1 for m in judged),
        average(m.pass_hat_k for m in judged), average(m.best_of_n for m in judged),
        *_mean_sem(scores))
