"""A judgement of one clause or gate: status, reason, the events that decided it."""

from dataclasses import dataclass

PASS, FAIL, INCONCLUSIVE, NA = "pass", "fail", "inconclusive", "not-applicable"


@dataclass(frozen=True)
class Judgement:
    status: str
    reason: str
    evidence: tuple[int, ...] = ()
    failure_class: str | None = None   # client, environment, harness — for anything not a pass


def failed(reason, evidence=()):
    return Judgement(FAIL, reason, tuple(evidence), "client")


def unknown(reason, evidence=(), failure_class="environment"):
    return Judgement(INCONCLUSIVE, reason, tuple(evidence), failure_class)


def seqs(*groups) -> list[int]:
    return sorted({e.seq for group in groups for e in group if e is not None})
