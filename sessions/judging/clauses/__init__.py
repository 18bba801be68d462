"""The library of clause predicates, for any task: each a pure function of a scenario's evidence
and the contract's thresholds and vocabulary. A task's contract names, for each of its clauses,
the predicate that judges it (by default the one of the clause's own id): the library's, or one
of the task's own (its folder's predicates module)."""

from collections.abc import Callable

from sessions.judging.clauses.egress import destination_only
from sessions.judging.clauses.load import latency_bound, no_request_failed
from sessions.judging.clauses.operations import no_live_truncate, service_kept, signals_as_allowed
from sessions.judging.clauses.store import honest_outcome, integrity
from sessions.judging.clauses.work import cpu_budget
from sessions.judging.judgement import ENVIRONMENT, Judgement, unknown
from sessions.spec.contract import Contract, ContractError, Thresholds
from sessions.stream.evidence import ScenarioEvidence

Predicate = Callable[[ScenarioEvidence, Thresholds], Judgement]
PREDICATES: dict[str, Predicate] = {
    "integrity": integrity,
    "destination-only": destination_only,
    "honest-outcome": honest_outcome,
    "cpu-budget": cpu_budget,
    "service-kept": service_kept,
    "signals-as-allowed": signals_as_allowed,
    "no-live-truncate": no_live_truncate,
    "no-request-failed": no_request_failed,
    "latency-bound": latency_bound,
}
# The thresholds each library predicate reads: a contract using it states them
NEEDS: dict[str, tuple[str, ...]] = {
    "cpu-budget": ("cpu_startup_allowance_ns", "cpu_ns_per_byte", "cpu_ns_per_exec",
                   "cpu_stretch_allowance_ns", "cpu_startup_stretch_ns", "cpu_waste_ns",
                   "cpu_view_tolerance_ns", "pace_reference_ns", "pace_noise", "pace_max"),
    "service-kept": ("operations.kept",),          # [operations] kept
    "signals-as-allowed": ("operations.signals",),  # [operations] signals
    "latency-bound": ("load_latency_max_ms",),
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
    lacking = {c: missing for c in contract.clause_ids if (missing := unstated(contract, c))}
    if lacking and strict:
        clause, missing = next(iter(lacking.items()))
        raise ContractError(f"{contract.source}: clauses.{clause}: its predicate "
                            f"{contract.predicate(clause)!r} needs {_tables(missing)}")
    return {c: (_unstated(lacking[c]) if c in lacking else found.get(contract.predicate(c))
                or _not_here(contract.predicate(c))) for c in contract.clause_ids}


def unstated(contract: Contract, clause: str) -> list[str]:
    """The thresholds a clause's library predicate reads that its contract does not state."""
    t = contract.thresholds
    stated = t.stated | {f"operations.{key}" for key in t.operations.stated}
    return [n for n in NEEDS.get(contract.predicate(clause), ()) if n not in stated]


def _tables(missing: list[str]) -> str:
    """What the contract does not state, by its table: thresholds, or [operations]' keys."""
    keys = [n.removeprefix("operations.") for n in missing if n.startswith("operations.")]
    figures = [n for n in missing if not n.startswith("operations.")]
    if figures:
        return f"thresholds the contract does not state: [thresholds] {', '.join(figures)}"
    return f"what the contract does not state: [operations] {', '.join(keys)}"


def _unstated(missing: list[str]) -> Predicate:
    def stand_in(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
        return unknown(f"the contract states no {', '.join(missing)}, which its predicate "
                       "reads", failure_class="harness")
    return stand_in


def _not_here(name: str) -> Predicate:
    def stand_in(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
        return unknown(f"the task's own predicate {name!r} is not here to judge it: the "
                       "session's record carries the contract, not the task's code (its folder "
                       "was not loaded where it is judged)", failure_class=ENVIRONMENT)
    return stand_in
