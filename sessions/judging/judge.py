"""The verdict engine: each contract clause judged from evidence, with the events that decided it.

A clause whose evidence is missing is inconclusive, never pass. The client's stdout and exit
status are claims: only `honest-outcome` reads them, and only to compare them with the verifier.
"""

import dataclasses
import time
from collections.abc import Sequence

from sessions.judging.clauses import predicates_of
from sessions.judging.fault_chance import unfired_faults
from sessions.judging.gates import gates_of
from sessions.judging.grading import harness_failures, judge_attempt
from sessions.judging.judgement import FAIL, INCONCLUSIVE, NA, PASS, unknown
from sessions.judging.risks import coverage, findings
from sessions.judging.views import swamped
from sessions.spec.contract import Contract
from sessions.spec.task import own_predicates_of, task_of_record
from sessions.stream.events import (
    Event,
    GateResult,
    PhaseChanged,
    RiskFinding,
    RiskScan,
    ScenarioJudged,
    Verdict,
)
from sessions.stream.evidence import EvidenceBook, ScenarioEvidence

# Predicates of evidence no flood can crowd out: the verifier reads the store itself.
FLOOD_PROOF = ("integrity",)


def expected_of(ev: ScenarioEvidence, clause: str) -> str:
    if clause in ev.started.expected_failures:
        return "fail"
    return "pass" if clause in ev.started.expected_passes else "not-fail"


def instrument_check(verdicts: list[Verdict], unfired: Sequence[dict] = (),
                     expected_invalid: bool = False,
                     harness: Sequence[str] = ()) -> tuple[str, str]:
    """detected: every verdict is what the scenario declared; missed: one is not; invalid: an
    armed fault never fired, or the lab failed by itself (harness_failures: a server that died
    with no act of the client behind it), so the attempt says nothing about the client.
    Evidence missing says the lab's own first failure (a verifier that printed no result),
    which is what the task's author has to fix."""
    if unfired:
        names = ", ".join(f"{f['kind']} ({f['id']}, invocation {f['invocation']})"
                          for f in unfired)
        if expected_invalid:
            return "detected", f"reported invalid as declared: {names} never fired"
        return "invalid", f"armed fault(s) never fired: {names}"
    if expected_invalid:
        return "missed", "declared invalid, but every armed fault fired"
    unknown = [v.clause for v in verdicts if v.status == INCONCLUSIVE]
    if harness and not unknown:   # judged on a lab that failed by itself: it says nothing
        return "invalid", ("the lab failed by itself: "
                           + "; ".join(h.removeprefix("harness: ") for h in harness))
    wrong = [v for v in verdicts
             if (v.expected == "fail" and v.status in (PASS, NA))
             or (v.expected != "fail" and v.status == FAIL)
             or (v.expected == "pass" and v.status == NA)]
    if wrong:
        return "missed", "; ".join(f"{v.clause}: expected {v.expected}, got {v.status}"
                                   for v in wrong)
    if unknown:
        why = f" ({harness[0]})" if harness else ""
        return "inconclusive", f"evidence missing for {', '.join(unknown)}{why}"
    return "detected", "every clause judged as declared"


def judge(ev: ScenarioEvidence, contract: Contract, now_ns: int) -> list[Event]:
    verdicts, flood = [], swamped(ev)
    for clause, fn in predicates_of(contract, strict=False).items():
        j = fn(ev, contract.thresholds)
        if flood and j.status in (PASS, NA) and contract.predicate(clause) not in FLOOD_PROOF:
            j = unknown(flood, j.evidence)   # the client's doing: counted against it
        verdicts.append(Verdict(now_ns, ev.id, clause, j.status, expected_of(ev, clause),
                                j.reason, j.failure_class if j.status != PASS else None,
                                tuple(sorted(set(j.evidence)))))
    if ev.started.attempt:
        return [*verdicts, *judge_grading(ev, contract, verdicts, now_ns)]
    status, detail = instrument_check(verdicts, unfired_faults(ev), ev.started.expected_invalid,
                                      harness_failures(ev))
    return [*verdicts, ScenarioJudged(now_ns, ev.id, status, detail)]


def judge_grading(ev: ScenarioEvidence, contract: Contract, verdicts: list[Verdict],
                  now_ns: int) -> list[Event]:
    """A grading attempt: its lifecycle gates, risk findings and outcome. Its clauses are
    judged against the contract, not against a seeded expectation, so there is no
    instrument check: ScenarioJudged says `graded` with the attempt's outcome."""
    # the gates read a clause's verdict by the predicate that judged it, whatever its id
    by_predicate = {contract.predicate(v.clause): v for v in verdicts}
    # the re-run gate reads the clause a contract names for it, whatever judges it
    for v in verdicts:
        if v.clause == contract.re_run:
            by_predicate["unchanged-no-transfer"] = v
    gates = []
    for gate, fn in gates_of(contract).items():
        j = fn(ev, contract.thresholds, by_predicate)
        gates.append(GateResult(now_ns, ev.id, gate, j.status, j.reason,
                                j.failure_class if j.status != PASS else None,
                                tuple(sorted(set(j.evidence)))))
    risks = [RiskFinding(now_ns, ev.id, f.invocation, f.severity, f.kind, f.detail,
                         tuple(sorted(set(f.evidence)))) for f in findings(ev)]
    scan = RiskScan(now_ns, ev.id, *coverage(ev))
    outcome = judge_attempt(ev, verdicts, gates, unfired_faults(ev), contract.thresholds,
                            now_ns)
    return [*gates, *risks, scan, outcome,
            ScenarioJudged(now_ns, ev.id, "graded", outcome.reason)]


class VerdictEngine:
    """Stream consumer: when a scenario reaches its judging phase, publish its verdicts, read
    from the session's book (which the stream fed before it: JudgedStream)."""

    def __init__(self, book: EvidenceBook, contract: Contract | None = None,
                 recorded: dict[str, Contract] | None = None):
        self.contract = contract   # None: the contract of the task the session records:
        self.recorded = recorded or {}   # an archive's copy of it (by the task's digest)
        self.book = book

    def __call__(self, event: Event) -> list[Event]:
        if isinstance(event, PhaseChanged) and event.phase == "judging":
            scenario = self.book.scenarios.get(event.scenario)
            if scenario is not None:
                return judge(scenario, self.contract or self._recorded(), time.monotonic_ns())
        return []

    def _recorded(self) -> Contract:
        session = self.book.session
        sha = session.task_sha256 if session else ""
        if sha in self.recorded:   # its text; the task's own predicates, if the task is here
            own = own_predicates_of(session.task_id if session else "", sha)
            return dataclasses.replace(self.recorded[sha], own=own)
        return task_of_record(session.task_id if session else "", sha).contract

