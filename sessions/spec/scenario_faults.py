"""Faults declared in scenario files: checked, given ids, and split by where they are injected.

    [[faults]]
    kind = "drop"          # the server's own: drop, stall, disk-full, reject, crash
    invocation = 1         # wire (through evlab's loopback proxy): reset, corrupt, latency,
    after_bytes = 65536    #   bandwidth, blackhole — each with direction = "up" | "down"

Triggers: a byte offset (after_bytes, at_byte), a commit phase (crash), or a time into the
transfer (after_ms, for drop, stall and disk-full).

Several faults may be declared; each fires at most once (latency and bandwidth act on every
chunk and count as fired when they first act). An armed fault that never fires makes the
attempt invalid, never a pass.

The kinds and every parameter's type and bounds are sessions/spec/fault_kinds.py's: what a
scenario file may declare is exactly what a task's server (`faults = true`) and the proxy accept.
"""

from sessions.spec.fault_kinds import (
    BURST_S,
    CONTINUOUS,
    HEADER_MAX,
    INTERRUPTIONS,
    LAB_KINDS,
    ONE_SHOT,
    PHASES,
    SERVER_KINDS,
    TRIGGERED,
    TRIGGERS,
    WIRE_KINDS,
    FaultError,
    check,
)

# Re-exported for the judge, the injector and fault_chance: judging reaches the fixture's
# vocabulary only through the spec (an import-linter contract).
__all__ = ["BURST_S", "CONTINUOUS", "HEADER_MAX", "INTERRUPTIONS", "LAB_KINDS", "ONE_SHOT",
           "PHASES",
           "SERVER_KINDS", "TRIGGERED", "TRIGGERS", "WIRE_KINDS", "FaultSpecError", "armed",
           "for_invocation", "parse_faults"]


class FaultSpecError(ValueError):
    """(key, expected) of a malformed fault; the scenario loader adds the file name."""

    def __init__(self, key: str, expected: str):
        super().__init__(key)
        self.key, self.expected = key, expected


def parse_faults(raw, scenario_id: str) -> tuple[dict, ...]:
    if not isinstance(raw, list):
        raise FaultSpecError("faults", "an array of tables: [[faults]]")
    faults = []
    for index, spec in enumerate(raw):
        where = f"faults[{index}]"
        try:
            fault = check(spec, optional=("invocation",))
        except FaultError as e:
            raise FaultSpecError(f"{where}.{e.key}" if e.key else where, e.expected) from None
        faults.append({"id": f"{scenario_id}-f{index + 1}", **fault})
    return tuple(faults)


def armed(faults) -> list[dict]:
    """Faults as recorded in a ScenarioStarted event."""
    return [dict(f) for f in faults]


def for_invocation(faults, n: int, kinds: tuple[str, ...]) -> list[dict]:
    return [f for f in armed(faults) if f["invocation"] == n and f["kind"] in kinds]
