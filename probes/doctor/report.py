"""The preflight's output: an aligned table with each gap's fix and a readiness line per
observer, or JSON."""

import json

from probes.capability import Capability
from probes.doctor.needs import OBSERVERS, missing_for, needed_for


def _state(cap: Capability, unicode: bool) -> str:
    if cap.available:
        return "ok " + ("✓" if unicode else "+")
    if needed_for(cap.name):
        return "MISSING " + ("✗" if unicode else "x")
    return "absent " + ("·" if unicode else "-")


def format_text(caps: list[Capability], unicode: bool = True) -> str:
    """An aligned table; each gap is followed by its fix, and a readiness line per observer."""
    rows = [(_state(c, unicode), c.name, ", ".join(needed_for(c.name)) or "optional", c.detail)
            for c in caps]
    head = ("state", "capability", "needed for", "detail")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]

    def line(cells: tuple[str, ...]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells[:3], widths, strict=True)]
        return "  ".join([*padded, cells[3]])

    out = [line(head)]
    indent = " " * (sum(widths) + 2 * 3)
    for cap, row in zip(caps, rows, strict=True):
        out.append(line(row))
        if cap.fix and not cap.available:
            out.append(f"{indent}fix: {cap.fix}")
    out.append("")
    for observer in OBSERVERS:
        gaps = missing_for(caps, observer)
        names = ", ".join(c.name for c in gaps)
        verdict = f"NOT ready, missing {names}" if gaps else "ready"
        out.append(f"{observer}: {verdict}")
    return "\n".join(out) + "\n"


def to_json(caps: list[Capability]) -> str:
    return json.dumps({
        "capabilities": [
            {"name": c.name, "available": c.available, "detail": c.detail, "fix": c.fix,
             "needed_for": list(needed_for(c.name)), "required": bool(needed_for(c.name))}
            for c in caps
        ],
        "ready": {o: not missing_for(caps, o) for o in OBSERVERS},
    }, indent=2)
