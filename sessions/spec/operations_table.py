"""A contract's [operations]: what its operations clauses allow the client to do to the task's
servers. Each target is a server of the task by its name or by its role (endpoint, decoy,
internal); the library's operations predicates (sessions/judging/clauses/operations.py) read it.

    [operations]
    kept = ["app"]                       # servers whose process must live through every invocation
    signals = { SIGHUP = ["app"] }       # the signals the client may send, each to these servers
"""

import signal
from dataclasses import dataclass, field

KEYS = ("kept", "signals")


@dataclass(frozen=True)
class Operations:
    kept: tuple[str, ...] = ()                     # server names or roles
    signals: dict[str, tuple[str, ...]] = field(default_factory=dict)   # SIGHUP -> targets
    stated: frozenset[str] = frozenset()           # which of KEYS the contract states

    def allows(self, name: str, server: str, role: str) -> bool:
        """May the client send signal `name` to this server's processes?"""
        targets = self.signals.get(name, ())
        return bool(server) and (server in targets or bool(role) and role in targets)


def signal_number(name: str) -> int | None:
    """A signal's number from its name as a contract writes it: HUP, SIGHUP, RTMIN+2."""
    upper = name.upper()
    full = upper if upper.startswith("SIG") else "SIG" + upper
    if full.startswith("SIGRTMIN+") and full[9:].isdigit():
        n = signal.SIGRTMIN + int(full[9:])
        return n if n <= signal.SIGRTMAX else None
    try:
        return int(signal.Signals[full])
    except KeyError:
        return None


def canonical(name: str) -> str:
    """SIGHUP for HUP or hup (the name the stream's events give a signal)."""
    upper = name.upper()
    return upper if upper.startswith("SIG") else "SIG" + upper


def parse_operations(table: object) -> Operations | str:
    """The table, or what is wrong with it in a few words (the caller names the file)."""
    if not isinstance(table, dict) or set(table) - set(KEYS):
        return "expected a table with kept and signals"
    kept = table.get("kept", [])
    if not _names(kept):
        return "kept: expected a list of server names or roles"
    allowed = table.get("signals", {})
    if not isinstance(allowed, dict) or not all(map(_names, allowed.values())):
        return "signals: expected a table of signal = [server names or roles]"
    unknown = [name for name in allowed if signal_number(name) is None]
    if unknown:
        return f"signals: {unknown[0]}: not a signal's name (HUP, SIGUSR1, RTMIN+2, ...)"
    return Operations(tuple(kept), {canonical(k): tuple(v) for k, v in allowed.items()},
                      frozenset(table))


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)
