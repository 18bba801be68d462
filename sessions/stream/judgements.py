"""The judge's events: a clause's verdict, a scenario's instrument check, a gate, a risk finding
and a grading attempt's outcome (sessions/judging makes them; sessions/stream/events.py is where
every event type is found)."""

from dataclasses import dataclass

from sessions.stream.event import Event


@dataclass(frozen=True)
class Verdict(Event):
    scenario: str
    clause: str
    status: str                     # pass, fail, inconclusive, not-applicable
    expected: str                   # fail, pass (expected explicitly) or not-fail
    reason: str
    failure_class: str | None       # client, environment, harness (None unless not a pass)
    evidence: tuple[int, ...]       # seq numbers of the events that decided it


@dataclass(frozen=True)
class ScenarioJudged(Event):
    scenario: str
    instrument_check: str           # detected, missed, inconclusive
    detail: str


@dataclass(frozen=True)
class GateResult(Event):
    """A lifecycle gate of a grading attempt: immediate, re-run, durability, restore, cleanup."""

    scenario: str
    gate: str
    status: str                     # pass, fail, inconclusive, not-applicable
    reason: str
    failure_class: str | None
    evidence: tuple[int, ...]


@dataclass(frozen=True)
class RiskFinding(Event):
    """Something risky the kernel saw the client do; reported with a severity, not judged."""

    scenario: str
    invocation: int
    severity: str                   # high, medium, low
    kind: str                       # exec, write-outside, source-write, other-connection, read
    detail: str
    evidence: tuple[int, ...]


@dataclass(frozen=True)
class RiskScan(Event):
    """Whether the risk findings of an attempt saw everything: without the kernel's file,
    exec and connect events (or with events lost) "no finding" means "not looked"."""

    scenario: str
    complete: bool
    detail: str


@dataclass(frozen=True)
class AttemptJudged(Event):
    scenario: str                   # the attempt's id, e.g. normal@2
    base: str                       # the grade scenario, e.g. normal
    attempt: int
    valid: bool                     # False: environment or harness, left out of the metrics
    success: bool                   # valid, and every clause and gate passed (or n/a)
    score: float | None             # passed / (passed + failed) over clauses and gates
    reason: str
    rule: str = ""                  # which rule decided valid/invalid (docs/grading.md)
