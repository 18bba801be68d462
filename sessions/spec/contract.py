"""A task's contract file (its task.toml names it): the clauses in order, what each means, the
predicate that judges it (sessions/judging/clauses: its library), and the thresholds."""

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path


class ContractError(ValueError):
    """A contract that cannot be used, in one line."""


@dataclass(frozen=True)
class Thresholds:
    max_upload_attempts: int
    unchanged_wire_bytes_max: int
    hash_passes_allowed: int
    relay_passes_allowed: int
    relay_slack_bytes: int
    cpu_startup_allowance_ns: int
    cpu_ns_per_byte: float
    cpu_stretch_allowance_ns: int
    cpu_startup_stretch_ns: int
    cpu_waste_ns: int
    cpu_view_tolerance_ns: int
    pace_reference_ns: int
    pace_noise: float
    pace_max: float


@dataclass(frozen=True)
class Contract:
    version: str
    clauses: dict[str, dict]        # id -> {"holds_when", "decided_by"[, "predicate"]}
    thresholds: Thresholds
    text: str = ""                  # the file as read: what an archive keeps to re-judge

    @property
    def clause_ids(self) -> tuple[str, ...]:
        return tuple(self.clauses)

    def predicate(self, clause: str) -> str:
        """The library predicate that judges a clause: its own id unless it names another."""
        return str(self.clauses[clause].get("predicate", clause))


_CLAUSE_KEYS = {"holds_when", "decided_by", "predicate"}


def load_contract(path: Path) -> Contract:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ContractError(f"{path}: cannot be read as TOML ({e})") from None
    return parse_contract(text, path)


def parse_contract(text: str, path: Path | str) -> Contract:
    """A contract from its text (a task folder's file, or an archive's copy of it)."""
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
    table = data.get("thresholds", {})
    names = {f.name for f in dataclasses.fields(Thresholds)}
    if not isinstance(table, dict) or set(table) != names:
        got = set(table) if isinstance(table, dict) else set()
        wrong = sorted((names - got) | (got - names))
        raise ContractError(f"{path}: thresholds: expected exactly "
                            f"{', '.join(sorted(names))} (differs in {', '.join(wrong)})")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in table.values()):
        raise ContractError(f"{path}: thresholds: expected numbers")
    return Contract(str(data.get("version", "")), clauses, Thresholds(**table), text)
