"""The contract file (sessions/contract.toml): clause ids, what each means, its thresholds."""

import tomllib
from dataclasses import dataclass
from pathlib import Path

CONTRACT_FILE = Path(__file__).with_name("contract.toml")
CLAUSE_IDS = ("integrity", "unchanged-no-upload", "destination-only", "bounded-recovery",
              "mismatch-rejected", "honest-outcome", "hash-work", "cpu-budget")


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
    clauses: dict[str, dict]        # id -> {"holds_when": ..., "decided_by": ...}
    thresholds: Thresholds


def load_contract(path: Path = CONTRACT_FILE) -> Contract:
    data = tomllib.loads(Path(path).read_text())
    clauses = data["clauses"]
    if tuple(clauses) != CLAUSE_IDS:
        raise ValueError(f"{path}: clauses: expected {CLAUSE_IDS}, got {tuple(clauses)}")
    return Contract(str(data["version"]), clauses, Thresholds(**data["thresholds"]))
