"""What an observer can and cannot see on this machine, said explicitly.

A missing capability is a record, never a silent zero: downstream, every clause that
needed it becomes inconclusive.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Capability:
    name: str          # e.g. "bpf", "tracefs", "kernel-headers", "af-packet"
    available: bool
    detail: str        # what was found, or why it is unavailable
    fix: str = ""      # the exact command or step that makes it available ("" when available)
