"""The work the client did, judged from the kernel's counters: cpu-budget (no busy-waiting, CPU
within a budget from the bytes moved and the processes started). The reasons call the watched
input what the contract's vocabulary does (`input`)."""

from sessions.judging.judgement import ENVIRONMENT, PASS, Judgement, failed, seqs, unknown
from sessions.judging.views import blind, counter, invocations, mb
from sessions.spec.contract import Thresholds, Vocabulary
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence


def cpu_budget(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    notes, evidence = [], []
    # Every allowance is this machine's: the contract's figures were measured on a machine
    # the reference work ran `pace` times faster on (at least 1, at most the contract's cap).
    pace = min(ev.cpu_pace, t.pace_max) if ev.cpu_pace >= t.pace_noise else 1.0
    stretch_allowed = pace * (t.cpu_stretch_allowance_ns
                              + t.cpu_ns_per_byte * ev.started.source_size)
    startup_allowed = pace * t.cpu_startup_stretch_ns
    for inv in invocations(ev):
        needed = ("oncpu_ns", "busy_max_ns", "busy_start_max_ns", "source_read_bytes",
                  "sock_sent_bytes", "sock_recv_bytes")
        values = {name: counter(inv, name) for name in needed}
        evidence += seqs([inv.final, inv.boundary])
        if any(v is None for v in values.values()):
            missing = [n for n, v in values.items() if v is None]
            return unknown(f"invocation {inv.n}: no kernel view of {', '.join(missing)}",
                           evidence, ENVIRONMENT)
        why = blind(ev, inv, t.names)
        if why:
            return unknown(why, evidence)
        seen = {n: v for n, v in values.items() if v is not None}   # every one, as checked above
        # each stretch's upper bound: the lesser of the clock (which counts time the host took
        # the vCPU) and the scheduler's runtime plus a tick (probes/bcc/collector.bpf.c)
        stretch, start = seen["busy_max_ns"], seen["busy_start_max_ns"]
        cgroup = inv.boundary.cpu_ns if inv.boundary else None
        busy = _busy(inv.n, t, pace, (stretch, stretch_allowed), (start, startup_allowed),
                     ev.started.source_size)
        if busy:
            return failed(busy, evidence)
        waste = _wasted(inv, t, ev.started.source_size)
        if waste.startswith("invocation"):
            return failed(waste, evidence)
        work = seen["source_read_bytes"] + seen["sock_sent_bytes"] + seen["sock_recv_bytes"]
        # a program started (fork + exec of a tool: a shell's honest work) is work too; the
        # launch itself is the start-up allowance's. Without the counter (an archive's evlab
        # did not read it) the budget is judged as that evlab judged it: without programs.
        started = max((counter(inv, "execs") or 1) - 1, 0)
        budget = pace * (t.cpu_startup_allowance_ns + t.cpu_ns_per_byte * work
                         + t.cpu_ns_per_exec * started)
        oncpu = seen["oncpu_ns"]
        total, whose = (cgroup, "its cgroup") if cgroup is not None else (oncpu, "its tree")
        if total > budget:
            return failed(f"invocation {inv.n}: {total / 1e6:.0f} ms of CPU ({whose}) for "
                          f"{mb(work)} moved and {started} program(s) started; budget "
                          f"{budget / 1e6:.0f} ms ({t.cpu_startup_allowance_ns / 1e6:.0f} ms + "
                          f"{t.cpu_ns_per_byte} ns/byte + {t.cpu_ns_per_exec / 1e6:g} ms per "
                          f"program started{_paced(pace)})", evidence)
        unseen = _unexplained(inv, t, cgroup, oncpu)
        if unseen:
            return unknown(unseen, evidence)
        notes.append(f"longest stretch {stretch / 1e6:.1f} of {stretch_allowed / 1e6:.1f} ms "
                     f"(start-up {start / 1e6:.1f} of {startup_allowed / 1e6:.0f}){waste}, "
                     f"CPU {total / 1e6:.1f} of {budget / 1e6:.0f} ms"
                     + (f" (tree {oncpu / 1e6:.1f})" if cgroup is not None else "")
                     + (f" with {started} program(s) started" if started else ""))
    if not notes:
        return unknown("no invocation ran", failure_class="harness")
    return Judgement(PASS, f"no busy-waiting: {' / '.join(notes)}{_paced(pace)}",
                     tuple(evidence))


def _busy(n: int, t: Thresholds, pace: float, stretch: tuple[float, float],
          start: tuple[float, float], size: int) -> str | None:
    """Why the longest busy stretch, or the longest before the watched input was opened, is too
    long: each (ns, allowed ns)."""
    if stretch[0] > stretch[1]:
        over = (f" + one pass over {_input(t.names)} at {t.cpu_ns_per_byte} ns/byte"
                if size or t.names.input else "")
        return (f"invocation {n}: ran {stretch[0] / 1e6:.1f} ms on the CPU without a syscall "
                f"that makes progress (busy-waiting or repeated in-memory work); allowed "
                f"{stretch[1] / 1e6:.1f} ms ({t.cpu_stretch_allowance_ns / 1e6:.0f} ms"
                f"{over}{_paced(pace)})")
    if start[0] > start[1]:
        return (f"invocation {n}: ran {start[0] / 1e6:.1f} ms on the CPU without a syscall that "
                f"makes progress {_before(t.names)} (busy-waiting); start-up may take "
                f"{start[1] / 1e6:.0f} ms{_paced(pace)}")
    return None


def _input(w: Vocabulary) -> str:
    """The watched input, in the task's word for it."""
    return f"the {w.input}" if w.input else "the watched input"


def _before(w: Vocabulary) -> str:
    """Start-up, in the task's words: before its tree opened the watched input (which a task
    that names none may not have: then its start-up)."""
    return f"before it opened {_input(w)}" if w.input else "at start-up"


def _unexplained(inv: InvocationEvidence, t: Thresholds, cgroup: int | None, oncpu: int) -> str:
    """Why the kernel's view of the tree is incomplete, if the cgroup's CPU says so: the launch
    chain (sh, prlimit, setpriv, bwrap) runs in the cgroup before the tree, counted apart."""
    if cgroup is None:
        return ""
    launch = counter(inv, "launch_oncpu_ns") or 0
    if cgroup - oncpu - launch <= max(t.cpu_view_tolerance_ns, cgroup / 2):
        return ""
    chain = f" and its launch chain {launch / 1e6:.1f} ms" if launch else ""
    return (f"invocation {inv.n}: its cgroup used {cgroup / 1e6:.1f} ms of CPU but the "
            f"kernel's view of its tree saw {oncpu / 1e6:.1f} ms{chain}: the view is incomplete")


def _wasted(inv: InvocationEvidence, t: Thresholds, size: int) -> str:
    """Waste spread thin: the on-CPU time of every task of the tree in stretches of at least
    BUSY_MIN_NS without progress, summed over the invocation (split for the reason: before
    the watched input was opened, start-up, and after it, work). Spinning costs the same CPU on any
    machine, so this allowance is not scaled by its pace: it is sized for the slowest machine
    the contract allows (contract.toml). A failure's reason (starting "invocation"), else a
    note for the pass (empty when an archive's evlab did not sum them yet)."""
    total, start = counter(inv, "busy_ns"), counter(inv, "busy_start_ns")
    if total is None or start is None:
        return ""
    allowed = t.cpu_waste_ns + t.cpu_ns_per_byte * size
    split = f"{start / 1e6:.0f} ms {_before(t.names)}, {(total - start) / 1e6:.0f} after"
    if total > allowed:
        return (f"invocation {inv.n}: its tasks ran {total / 1e6:.0f} ms on the CPU in "
                f"stretches without progress ({split}: busy-waiting or repeated in-memory work "
                f"spread over threads or pieces); allowed {allowed / 1e6:.0f} ms in all, on "
                f"any machine")
    return f"; without progress {total / 1e6:.0f} of {allowed / 1e6:.0f} ms in all (any pace)"


def _paced(pace: float) -> str:
    """How the allowances were scaled, said where they were (nothing on a machine as fast as
    the contract's)."""
    return f"; allowances x{pace:.2f} for this machine's pace" if pace > 1 else ""
