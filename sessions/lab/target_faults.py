"""The lab's own faults on a task's target, a filesystem of its own (sessions/spec/fault_kinds.py
LAB_KINDS), armed for one invocation each:

- `target-full`: the target's tmpfs is remounted with room for after_bytes more than it holds
  as the invocation begins (rounded up to a page): past them the client's writes fail ENOSPC.
  Fired when the kernel saw a write to the target refused for want of space (ENOSPC), or the
  filesystem has no free block left; healed (the room given back) when the invocation ends.
- `kill`: the client's tree is SIGKILLed once the kernel counted after_bytes written to the
  target. With the BCC collector the process whose write reached them is stopped by the kernel
  as that write returns (collector.stop_after), so nothing more is written and nothing ends by
  itself whatever the machine's load; the lab's poll (every KILL_POLL_S while the invocation
  runs) then kills the tree. Without it, the poll alone: at most that late.

Each that fires is a `lab` record `fault_fired` of its invocation (sessions/judging/
fault_chance.py reads it), with what the kernel had counted then.

    faults = TargetFaults(scenario.faults, target, collector)
    poll_s = faults.arm(n, inv.id)  # before the launch; how often to strike (None: no hurry)
    record = faults.strike(inv)     # while it runs: a fired kill's record, or None
    records = faults.disarm(inv)    # once it ended
"""

import os
import time
from pathlib import Path

from probes.boundary.sandbox import remount_size
from sessions.spec.scenario_faults import LAB_KINDS, for_invocation

KILL_POLL_S = 0.005
PAGE = 4096


class TargetFaults:
    def __init__(self, faults, target: Path | None, collector, full_size: int):
        self.faults, self.target, self.collector = faults, target, collector
        self.full_size = full_size     # the target's own size, given back when healed
        self.armed: list[dict] = []
        self.room = 0                  # a target-full fault's: bytes it had left

    def arm(self, n: int, inv_id: int) -> float | None:
        target = self.target
        self.armed = for_invocation(self.faults, n, LAB_KINDS) if target else []
        for f in self.armed:
            if f["kind"] == "kill":
                self.collector.stop_after(inv_id, f["after_bytes"])
            if f["kind"] == "target-full" and target is not None:
                st = os.statvfs(target)
                used = (st.f_blocks - st.f_bfree) * st.f_frsize
                self.room = -(-f["after_bytes"] // PAGE) * PAGE
                remount_size(target, used + self.room)
        return KILL_POLL_S if any(f["kind"] == "kill" for f in self.armed) else None

    def _written(self, inv_id: int) -> int:
        snap = self.collector.snapshot(inv_id)
        return int(snap.counters.get("target_write_bytes", 0))

    def strike(self, inv) -> dict | None:
        """Kill the invocation's tree once it wrote a kill fault's bytes: its record."""
        for f in self.armed:
            if f["kind"] == "kill" and not f.get("fired"):
                written = self._written(inv.id)
                if written >= f["after_bytes"]:
                    f["fired"] = True
                    inv.kill_tree()
                    return {"event": "fault_fired", "t_ns": time.monotonic_ns(),
                            "id": f["id"], "kind": "kill", "after_bytes": f["after_bytes"],
                            "written": written}
        return None

    def disarm(self, inv) -> list[dict]:
        """Heal: the target's room given back; a target-full fault's record if it struck."""
        out, target = [], self.target
        for f in self.armed:
            if f["kind"] != "target-full" or target is None:
                continue
            snap = self.collector.snapshot(inv.id).counters
            written = int(snap.get("target_write_bytes", 0))
            if snap.get("target_no_space") or os.statvfs(target).f_bfree == 0:
                out.append({"event": "fault_fired", "t_ns": time.monotonic_ns(),
                            "id": f["id"], "kind": "target-full",
                            "after_bytes": f["after_bytes"], "written": written})
            remount_size(target, self.full_size)
        self.armed = []
        return out
