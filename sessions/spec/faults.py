"""Faults declared in scenario files: checked, given ids, and split by where they are injected.

    [[faults]]
    kind = "drop"          # receiver: drop, stall, disk-full, reject, crash
    invocation = 1         # wire (through evlab's loopback proxy): reset, corrupt, latency,
    after_bytes = 65536    #   bandwidth, blackhole — each with direction = "up" | "down"

Triggers: a byte offset (after_bytes, at_byte), a commit phase (crash), or a time into the
upload (after_ms, for drop, stall and disk-full).

Several faults may be declared; each fires at most once (latency and bandwidth act on every
chunk and count as fired when they first act). An armed fault that never fires makes the
attempt invalid, never a pass.
"""

RECEIVER_KINDS = ("drop", "stall", "disk-full", "reject", "crash")
WIRE_KINDS = ("reset", "corrupt", "latency", "bandwidth", "blackhole")
# A fault that interrupts a transfer, so the client must recover (bounded-recovery applies).
INTERRUPTIONS = ("drop", "disk-full", "reject", "crash", "reset", "corrupt")
PHASES = ("after-write", "before-rename", "after-rename")
# Receiver faults that strike during a payload: at a byte offset, or at a time into the upload.
TRIGGERED = ("drop", "stall", "disk-full")
TRIGGERS = {"after_bytes": "a byte count", "after_ms": "milliseconds into the upload"}

# kind -> {key: (type, description)} beyond the common kind/invocation/upload/direction
_PARAMS = {
    "drop": {},
    "stall": {"seconds": ((int, float), "seconds from 0 to 600")},
    "disk-full": {},
    "reject": {},
    "crash": {"phase": (str, f"one of {', '.join(PHASES)}")},
    "reset": {"at_byte": (int, "a byte offset")},
    "corrupt": {"at_byte": (int, "a byte offset")},
    "latency": {"ms": (int, "milliseconds from 0 to 600,000")},
    "bandwidth": {"bytes_per_s": (int, "bytes per second from 1 to 10^12")},
    "blackhole": {},
}
# Upper bounds (a fault longer than any invocation's timeout is a mistake, not a scenario);
# byte offsets and counts are bounded by what 64 bits and the protocol allow.
_MAX = {"seconds": 600, "ms": 600_000, "bytes_per_s": 10 ** 12, "at_byte": 2 ** 62,
        "after_bytes": 2 ** 62, "after_ms": 600_000}


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
        if not isinstance(spec, dict):
            raise FaultSpecError(where, "a table")
        kind = spec.get("kind")
        if kind not in _PARAMS:
            raise FaultSpecError(f"{where}.kind", f"one of {', '.join(_PARAMS)}")
        allowed = {"kind", "invocation", *_PARAMS[kind]}
        if kind in TRIGGERED:
            allowed |= set(TRIGGERS)
        allowed |= {"upload"} if kind in RECEIVER_KINDS else {"direction"}
        for key in spec:
            if key not in allowed:
                raise FaultSpecError(f"{where}.{key}", f"one of {', '.join(sorted(allowed))}")
        fault = {"id": f"{scenario_id}-f{index + 1}", "kind": kind,
                 "invocation": _positive(spec, "invocation", where, 1)}
        if kind in RECEIVER_KINDS:
            fault["upload"] = _positive(spec, "upload", where, 1)
        else:
            direction = spec.get("direction")
            if direction not in ("up", "down"):
                raise FaultSpecError(f"{where}.direction", '"up" or "down"')
            fault["direction"] = direction
        for key, (kind_type, expected) in _PARAMS[kind].items():
            value = spec.get(key)
            if value is None or isinstance(value, bool) or not isinstance(value, kind_type) \
                    or (not isinstance(value, str)
                        and not 0 <= value <= _MAX.get(key, float("inf"))) \
                    or (key == "bytes_per_s" and value < 1):
                raise FaultSpecError(f"{where}.{key}", expected)
            if key == "phase" and value not in PHASES:
                raise FaultSpecError(f"{where}.{key}", expected)
            fault[key] = value
        if kind in TRIGGERED:
            given = [k for k in TRIGGERS if k in spec]
            if len(given) != 1:
                raise FaultSpecError(f"{where}.after_bytes",
                                     "exactly one trigger: after_bytes or after_ms")
            value = spec[given[0]]
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not 0 <= value <= _MAX[given[0]]:
                raise FaultSpecError(f"{where}.{given[0]}", TRIGGERS[given[0]])
            fault[given[0]] = value
        faults.append(fault)
    return tuple(faults)


def _positive(spec: dict, key: str, where: str, default: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise FaultSpecError(f"{where}.{key}", "a whole number from 1 to 1000")
    return value


def armed(faults) -> list[dict]:
    """Faults as recorded in a ScenarioStarted event."""
    return [dict(f) for f in faults]


def for_invocation(faults, n: int, kinds: tuple[str, ...]) -> list[dict]:
    return [f for f in armed(faults) if f["invocation"] == n and f["kind"] in kinds]
