"""The library of clause predicates: each a pure function of a scenario's evidence and the
contract's thresholds and vocabulary. A task's contract names, for each of its clauses, the
predicate that judges it (by default the one of the clause's own id)."""

from collections.abc import Callable

from sessions.judging.clauses.egress import destination_only
from sessions.judging.clauses.store import honest_outcome, integrity, mismatch_rejected
from sessions.judging.clauses.transfer import bounded_recovery, unchanged_no_transfer
from sessions.judging.clauses.work import cpu_budget, hash_work
from sessions.judging.judgement import Judgement
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


def predicates_of(contract: Contract) -> dict[str, Predicate]:
    """Each clause of the contract, in its order, with the predicate that judges it."""
    unknown = [c for c in contract.clause_ids if contract.predicate(c) not in PREDICATES]
    if unknown:
        raise ContractError(f"clause {unknown[0]}: no predicate {contract.predicate(unknown[0])!r}"
                            f" in the library ({', '.join(PREDICATES)})")
    return {c: PREDICATES[contract.predicate(c)] for c in contract.clause_ids}
