"""The library of clause predicates: each a pure function of a scenario's evidence and the
contract's thresholds and vocabulary. A task's contract names, for each of its clauses, the
predicate that judges it (by default the one of the clause's own id)."""

from collections.abc import Callable

from sessions.judging.clauses.egress import destination_only
from sessions.judging.clauses.store import honest_outcome, integrity, mismatch_rejected
from sessions.judging.clauses.transfer import bounded_recovery, unchanged_no_transfer
from sessions.judging.clauses.work import cpu_budget, hash_work
from sessions.judging.judgement import ENVIRONMENT, Judgement, unknown
from sessions.spec.contract import Contract, ContractError, Thresholds
from sessions.stream.evidence import ScenarioEvidence

Predicate = Callable[[ScenarioEvidence, Thresholds], Judgement]
PREDICATES: dict[str, Predicate] = {
    "integrity": integrity,
    "unchanged-no-transfer": unchanged_no_transfer,
    "destination-only": destination_only,
    "bounded-recovery": bounded_recovery,
    "mismatch-rejected": mismatch_rejected,
    "honest-outcome": honest_outcome,
    "hash-work": hash_work,
    "cpu-budget": cpu_budget,
}


def predicates_of(contract: Contract, strict: bool = True) -> dict[str, Predicate]:
    """Each clause of the contract, in its order, with the predicate that judges it: the
    library's, else the task's own. One neither has is refused (strict: before a session
    runs); a replay without the task's own (its folder is not here) judges it inconclusive."""
    found = {**contract.own, **PREDICATES}
    unknown = [c for c in contract.clause_ids if contract.predicate(c) not in found]
    if unknown and strict:
        raise ContractError(f"{contract.source}: clauses.{unknown[0]}: no predicate "
                            f"{contract.predicate(unknown[0])!r}"
                            f" in the library ({', '.join(PREDICATES)}) or the task's own"
                            f" ({', '.join(contract.own) or 'none'})")
    return {c: found.get(contract.predicate(c)) or _not_here(contract.predicate(c))
            for c in contract.clause_ids}


def _not_here(name: str) -> Predicate:
    def stand_in(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
        return unknown(f"the task's own predicate {name!r} is not here to judge it: the "
                       "session's record carries the contract, not the task's code (its folder "
                       "was not loaded where it is judged)", failure_class=ENVIRONMENT)
    return stand_in
