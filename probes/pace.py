"""How fast this machine runs a client's kind of work, against the machine evlab's CPU figures
were measured on (a contract's pace_reference_ns): the thread CPU time of a
small fixed workload (interpreter bytecode, what a runtime's start-up is made of, and SHA-256,
what hashing the source is), the quickest of many short runs. Thread CPU time, so time-sharing
with other work does not count; the quickest of SAMPLES runs of ~0.2 ms each, so a moment of
contention (another vCPU's neighbour, a burst of interrupts) cannot inflate it either: only a
CPU that is slower all the time measures slower. A process that opens session after session
(the dashboard, evlab.grade in a loop, the tests) measures SAMPLES runs once and AGAIN runs at
each later session, keeping the quickest of all: more runs, the same machine."""

import hashlib
import time

SAMPLES = 64
AGAIN = 8
_quickest: int | None = None
_DATA = bytes(range(256)) * 64   # 16 KiB


def _work() -> int:
    t0 = time.thread_time_ns()
    table: dict[int, int] = {}
    for i in range(2_000):
        table[i & 1023] = table.get(i & 1023, 0) + i
    hashlib.sha256(_DATA).digest()
    return time.thread_time_ns() - t0


def pace_ns() -> int:
    """The reference workload's CPU time here, in ns (the quickest of every run so far)."""
    global _quickest
    runs = min(_work() for _ in range(SAMPLES if _quickest is None else AGAIN))
    _quickest = runs if _quickest is None else min(_quickest, runs)
    return _quickest
