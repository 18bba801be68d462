"""The contract's clauses: each a pure function of a scenario's evidence and the thresholds."""

from collections.abc import Callable

from sessions.judging.clauses.egress import destination_only
from sessions.judging.clauses.store import honest_outcome, integrity, mismatch_rejected
from sessions.judging.clauses.transfer import bounded_recovery, unchanged_no_upload
from sessions.judging.clauses.work import cpu_budget, hash_work
from sessions.judging.judgement import Judgement
from sessions.spec.contract import CLAUSE_IDS, Thresholds
from sessions.stream.evidence import ScenarioEvidence

CLAUSES: dict[str, Callable[[ScenarioEvidence, Thresholds], Judgement]] = {
    "integrity": integrity,
    "unchanged-no-upload": unchanged_no_upload,
    "destination-only": destination_only,
    "bounded-recovery": bounded_recovery,
    "mismatch-rejected": mismatch_rejected,
    "honest-outcome": honest_outcome,
    "hash-work": hash_work,
    "cpu-budget": cpu_budget,
}
assert tuple(CLAUSES) == CLAUSE_IDS
