"""A task's contract file (its task.toml names it): the clauses in order, what each means, the
predicate that judges it (sessions/judging/clauses: its library), and the thresholds."""

import dataclasses
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sessions.spec.operations_table import Operations, parse_operations
from sessions.stream import compat


class ContractError(ValueError):
    """A contract that cannot be used, in one line."""


@dataclass(frozen=True)
class Vocabulary:
    """The names the library's predicates read of the endpoint's records and of the client, and
    the words their reasons use: a contract's [vocabulary], each one the task's own. One a
    contract leaves out is neutral below (an archive's copy of a contract: what evlab gave it
    when it was judged, sessions/stream/compat.py)."""

    transfer: str = "transfer"          # what a reason calls a transfer attempt
    state: str = "state"                # ... the endpoint's state
    saved: str = "saved copy"           # ... what that state keeps
    started: str = "transfer_started"   # record: a transfer attempt began
    committed: str = "committed"        # record: it changed the state
    refused: str = "refused"            # record: a request refused (reason)
    closed: str = "connection_closed"   # record: a connection ended
    bytes: str = "payload_bytes"        # field of `closed`: payload bytes taken
    mismatch: str = "mismatch"          # a refusal's reason: payload != digest
    digest_function: str = ""           # the client's function hashing (none named)
    input: str = ""                     # what a reason calls the watched input ("": the task
                                        # folder's name for it, or none watched)


@dataclass(frozen=True)
class Thresholds:
    """The figures the predicates read, as the contract's [thresholds] states them: each the
    task's own, measured for it (a built-in task's contract.toml says where each was). One
    the contract does not state is 0, and not in `stated`: a contract whose clauses' library
    predicates need one it does not state is refused (sessions/judging/clauses: NEEDS)."""

    max_transfer_attempts: int = 0
    unchanged_wire_bytes_max: int = 0
    hash_passes_allowed: int = 0
    relay_passes_allowed: int = 0
    relay_slack_bytes: int = 0
    request_overhead_bytes: int = 0    # what a correct client sends beyond its input, at most
    cpu_startup_allowance_ns: int = 0
    cpu_ns_per_byte: float = 0
    cpu_ns_per_exec: int = 0
    cpu_stretch_allowance_ns: int = 0
    cpu_startup_stretch_ns: int = 0
    cpu_waste_ns: int = 0
    cpu_view_tolerance_ns: int = 0
    pace_reference_ns: int = 0
    pace_noise: float = 0
    pace_max: float = 0
    load_latency_max_ms: float = 0     # evlab's load: the slowest answer allowed (latency-bound)
    names: Vocabulary = Vocabulary()   # the contract's [vocabulary]
    operations: Operations = Operations()   # the contract's [operations]
    stated: frozenset[str] = frozenset()   # the thresholds the contract states


@dataclass(frozen=True)
class Contract:
    version: str
    clauses: dict[str, dict]        # id -> {"holds_when", "decided_by"[, "predicate"]}
    thresholds: Thresholds
    text: str = ""                  # the file as read: what an archive keeps to re-judge
    gates: tuple[str, ...] | None = None   # a grading attempt's gates (None: every one)
    re_run: str = ""                # the clause the re-run gate reads ("": the one judged by
                                    # unchanged-no-transfer)
    # the task's own predicates by name (sessions/spec/task_predicates.py): code, not text, so
    # an archive's copy of the contract has none; a replay gets them from the task's folder
    own: dict[str, Callable] = field(default_factory=dict, compare=False)
    # the file it was read from, which a mistake found when it is judged names
    source: str = field(default="contract", compare=False)

    @property
    def clause_ids(self) -> tuple[str, ...]:
        return tuple(self.clauses)

    def predicate(self, clause: str) -> str:
        """The library predicate that judges a clause: its own id unless it names another."""
        name = str(self.clauses[clause].get("predicate", clause))
        return compat.PREDICATE_NAMES.get(name, name)


_CLAUSE_KEYS = {"holds_when", "decided_by", "predicate"}


def load_contract(path: Path) -> Contract:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ContractError(f"{path}: cannot be read as TOML ({e})") from None
    return parse_contract(text, path)


def parse_contract(text: str, path: Path | str, archived: bool = False) -> Contract:
    """A contract from its text: a task folder's file, or an archive's copy of it (archived:
    what it leaves out is what evlab gave it when it was judged, compat's)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise ContractError(f"{path}: cannot be read as TOML ({e})") from None
    clauses = data.get("clauses")
    if not isinstance(clauses, dict) or not clauses:
        raise ContractError(f"{path}: clauses: expected a table of clauses, [clauses.ID]")
    for cid, clause in clauses.items():
        if not isinstance(clause, dict) or set(clause) - _CLAUSE_KEYS or not all(
                isinstance(clause.get(k), str) for k in ("holds_when", "decided_by")):
            raise ContractError(f"{path}: clauses.{cid}: expected holds_when and decided_by "
                                "(strings), and optionally predicate")
    unknown = set(data) - {"version", "clauses", "thresholds", "gates", "vocabulary", "re_run",
                           "operations"}
    if unknown:
        raise ContractError(f"{path}: {sorted(unknown)[0]}: expected version, clauses, "
                            "thresholds, vocabulary, operations, gates or re_run")
    operations = parse_operations(data.get("operations", {}))
    if isinstance(operations, str):
        raise ContractError(f"{path}: operations: {operations}")
    re_run = data.get("re_run", "")
    if re_run != "" and re_run not in clauses:
        raise ContractError(f"{path}: re_run: expected one of the contract's clauses")
    table = data.get("thresholds", {})
    if isinstance(table, dict):
        table = {compat.THRESHOLD_NAMES.get(k, k): v for k, v in table.items()}
    names = {f.name for f in dataclasses.fields(Thresholds)} - {"names", "stated", "operations"}
    if not isinstance(table, dict) or set(table) - names:
        got = set(table) if isinstance(table, dict) else {"(not a table)"}
        raise ContractError(f"{path}: thresholds: {', '.join(sorted(got - names))}: expected "
                            f"names from {', '.join(sorted(names))}")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in table.values()):
        raise ContractError(f"{path}: thresholds: expected numbers")
    gates = data.get("gates")
    if gates is not None and (not isinstance(gates, list)
                              or not all(isinstance(g, str) for g in gates)):
        raise ContractError(f"{path}: gates: expected a list of gate names")
    words = data.get("vocabulary", {})
    known = {f.name for f in dataclasses.fields(Vocabulary)}
    if not isinstance(words, dict) or set(words) - known \
            or not all(isinstance(v, str) and v for v in words.values()):
        raise ContractError(f"{path}: vocabulary: expected names (non-empty strings) from "
                            f"{', '.join(sorted(known))}")
    if archived:
        table = {**compat.ARCHIVED_THRESHOLDS, **table}
        words = {**compat.ARCHIVED_VOCABULARY, **words}
    return Contract(str(data.get("version", "")), clauses,
                    Thresholds(**table, names=Vocabulary(**words), operations=operations,
                               stated=frozenset(table)), text,
                    tuple(gates) if gates is not None else None, re_run, source=str(path))
