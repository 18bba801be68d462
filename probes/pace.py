"""How fast this machine runs a client's kind of work, against the machine evlab's CPU figures
were measured on (sessions/spec/contract.toml: pace_reference_ns): the thread CPU time of a
small fixed workload — interpreter bytecode (what a runtime's start-up is made of) and SHA-256
(what hashing the source is) — the quickest of a few runs. Thread CPU time, so a machine
busy with other work measures the same as an idle one; only a slower CPU measures slower."""

import hashlib
import time

ROUNDS = 3
_DATA = bytes(range(256)) * 512   # 128 KiB


def _work() -> int:
    t0 = time.thread_time_ns()
    table: dict[int, int] = {}
    for i in range(20_000):
        table[i & 1023] = table.get(i & 1023, 0) + i
    hashlib.sha256(_DATA).digest()
    return time.thread_time_ns() - t0


def pace_ns() -> int:
    """The reference workload's CPU time here, in ns (the quickest of ROUNDS)."""
    return min(_work() for _ in range(ROUNDS))
