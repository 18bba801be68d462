"""The collector's per-invocation counters: one slot of the per-CPU `counters` array each (ids:
probes/bcc/abi.py), owned through the `slots` array, which the BPF programs check before
they count (a task left over from a finished invocation counts nowhere).

    slots = CounterSlots(bpf)
    slot = slots.assign(invocation)   # zeroed and owned; again: the same slot
    slots.read(invocation)            # {counter id: value over all CPUs} (maxima: the largest)
    slots.release(invocation)         # counters zeroed, slot free

A slot is assigned when an invocation is armed for launch or its cgroup is watched, and freed
by finish(). An invocation never finished (an interrupted session) holds its slot until the
slots run out; then the oldest one whose tasks have all exited is taken back.
"""

import ctypes
import operator
import threading

from probes.bcc.abi import COUNTER_SPACE, INV_SLOTS
from probes.collectors.records import COUNTERS, MAXIMA

_MAXIMA = frozenset(COUNTERS.index(name) for name in MAXIMA)


class CounterSlots:
    def __init__(self, bpf):
        self._bpf = bpf
        self._slot_of: dict[int, int] = {}    # invocation -> slot, in order of assignment
        self._lock = threading.Lock()         # scenarios run at once: assign/release race

    def assign(self, invocation: int) -> int:
        with self._lock:
            return self._assign(invocation)

    def _assign(self, invocation: int) -> int:
        if invocation in self._slot_of:
            return self._slot_of[invocation]
        taken = set(self._slot_of.values())
        free = [s for s in range(INV_SLOTS) if s not in taken]
        slot = free[0] if free else self._reclaim()
        self._zero(slot)
        owner = self._bpf["slots"].Leaf()
        owner.inv, owner.source_seen = invocation, 0
        self._bpf["slots"][ctypes.c_int(slot)] = owner
        self._slot_of[invocation] = slot
        return slot

    def _reclaim(self) -> int:
        alive = {v.inv for v in self._bpf["tracked"].values()}
        for invocation, slot in self._slot_of.items():
            if invocation not in alive:
                self._release(invocation)
                return slot
        raise RuntimeError(f"more than {INV_SLOTS} invocations with live tasks at once")

    def release(self, invocation: int) -> None:
        with self._lock:
            self._release(invocation)

    def _release(self, invocation: int) -> None:
        slot = self._slot_of.pop(invocation, None)
        if slot is None:
            return
        self._bpf["slots"][ctypes.c_int(slot)] = self._bpf["slots"].Leaf()   # owned by none
        self._zero(slot)

    def _zero(self, slot: int) -> None:
        table = self._bpf["counters"]
        table[ctypes.c_int(slot)] = table.Leaf()

    def read(self, invocation: int) -> dict[int, int]:
        """Every nonzero counter of the invocation: summed over CPUs, maxima by max."""
        slot = self._slot_of.get(invocation)
        if slot is None:
            return {}
        per_cpu = self._bpf["counters"][ctypes.c_int(slot)]
        flat = memoryview(per_cpu).cast("B").cast("Q")
        rows = [flat[i * COUNTER_SPACE:(i + 1) * COUNTER_SPACE].tolist()
                for i in range(len(flat) // COUNTER_SPACE)]
        # summed a row at a time (map: no tuple a column), then the few maxima put right;
        # read every sampling tick, it was the collector's costliest call
        totals = rows[0]
        for row in rows[1:]:
            totals = list(map(operator.add, totals, row))
        for cid in _MAXIMA:
            totals[cid] = max(row[cid] for row in rows)
        return {cid: value for cid, value in enumerate(totals) if value}
