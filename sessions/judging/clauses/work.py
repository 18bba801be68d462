"""Clauses about the work the client did, judged from the kernel's counters: hash-work (passes
over the source) and cpu-budget (no busy-waiting, CPU within a budget from the bytes moved)."""

from sessions.judging.judgement import ENVIRONMENT, PASS, Judgement, failed, seqs, unknown
from sessions.judging.views import blind, counter, invocations, mb
from sessions.spec.contract import Thresholds
from sessions.stream.evidence import ScenarioEvidence


def hash_work(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    size, judged, evidence, notes = ev.started.source_size, 0, [], []
    for inv in invocations(ev):
        why = blind(inv, ev.started.receiver_port)
        if why:
            return unknown(why, seqs([inv.final]))
        uploads = inv.receiver_events("upload_started")
        entries = inv.final.functions.get("hash_file") if inv.final else None
        source = counter(inv, "source_read_bytes")
        evidence += seqs([inv.final], uploads)
        if entries is not None and entries > t.hash_passes_allowed:
            return failed(f"invocation {inv.n}: hash_file entered {entries} times "
                          f"(at most {t.hash_passes_allowed})", evidence)
        allowed = size * (t.hash_passes_allowed + len(uploads))
        if source is not None and source > allowed:
            return failed(f"invocation {inv.n}: read {source:,} source bytes, {source / size:.0f}x "
                          f"the source; allowed {allowed:,} ({t.hash_passes_allowed} pass + "
                          f"{len(uploads)} upload(s))", evidence)
        if entries is None and source is None:
            continue
        if counter(inv, "source_mmaps"):
            return unknown(f"invocation {inv.n}: the source was mapped with mmap(); reads "
                           "through the mapping are page faults, not counted (cpu-budget is "
                           "the backstop)", evidence, "client")
        if counter(inv, "unattributed_bytes"):
            return unknown(f"invocation {inv.n}: {counter(inv, 'unattributed_bytes'):,} bytes "
                           "were spliced by io_uring from a registered file, which the kernel's "
                           "view of the request does not name: the source's reads are not "
                           "counted", evidence, "client")
        judged += 1
        notes.append(f"{entries if entries is not None else '?'} hash_file / "
                     f"{source / size if source is not None else float('nan'):.0f}x source read")
    if judged < len(ev.invocations) or not judged:
        return unknown("no kernel view of hashing: neither uprobe counts nor source-file reads "
                       "were observed", evidence, ENVIRONMENT)
    return Judgement(PASS, f"per invocation: {'; '.join(notes)}", tuple(evidence))


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
        why = blind(inv, ev.started.receiver_port)
        if why:
            return unknown(why, evidence)
        seen = {n: v for n, v in values.items() if v is not None}   # every one, as checked above
        # each stretch's upper bound: the lesser of the clock (which counts time the host took
        # the vCPU) and the scheduler's runtime plus a tick (probes/bcc/collector.bpf.c)
        stretch, start = seen["busy_max_ns"], seen["busy_start_max_ns"]
        cgroup = inv.boundary.cpu_ns if inv.boundary else None
        if stretch > stretch_allowed:
            return failed(f"invocation {inv.n}: ran {stretch / 1e6:.1f} ms on the CPU without a "
                          f"syscall that makes progress (busy-waiting or repeated in-memory "
                          f"work); allowed {stretch_allowed / 1e6:.1f} ms "
                          f"({t.cpu_stretch_allowance_ns / 1e6:.0f} ms + one pass over the "
                          f"source at {t.cpu_ns_per_byte} ns/byte{_paced(pace)})", evidence)
        if start > startup_allowed:
            return failed(f"invocation {inv.n}: ran {start / 1e6:.1f} ms on the CPU without a "
                          f"syscall that makes progress before it opened the source "
                          f"(busy-waiting); start-up may take "
                          f"{startup_allowed / 1e6:.0f} ms{_paced(pace)}", evidence)
        work = seen["source_read_bytes"] + seen["sock_sent_bytes"] + seen["sock_recv_bytes"]
        budget = pace * (t.cpu_startup_allowance_ns + t.cpu_ns_per_byte * work)
        oncpu = seen["oncpu_ns"]
        total, source = (cgroup, "its cgroup") if cgroup is not None else (oncpu, "its tree")
        if total > budget:
            return failed(f"invocation {inv.n}: {total / 1e6:.0f} ms of CPU ({source}) for "
                          f"{mb(work)} moved; budget {budget / 1e6:.0f} ms", evidence)
        if cgroup is not None and cgroup - oncpu > max(t.cpu_view_tolerance_ns, cgroup / 2):
            return unknown(f"invocation {inv.n}: its cgroup used {cgroup / 1e6:.1f} ms of CPU "
                           f"but the kernel's view of its tree saw {oncpu / 1e6:.1f} ms: the "
                           "view is incomplete", evidence)
        notes.append(f"longest stretch {stretch / 1e6:.1f} of {stretch_allowed / 1e6:.1f} ms "
                     f"(start-up {start / 1e6:.1f} of {startup_allowed / 1e6:.0f}), "
                     f"CPU {total / 1e6:.1f} of {budget / 1e6:.0f} ms"
                     + (f" (tree {oncpu / 1e6:.1f})" if cgroup is not None else ""))
    if not notes:
        return unknown("no invocation ran", failure_class="harness")
    return Judgement(PASS, f"no busy-waiting: {' / '.join(notes)}{_paced(pace)}",
                     tuple(evidence))


def _paced(pace: float) -> str:
    """How the allowances were scaled, said where they were (nothing on a machine as fast as
    the contract's)."""
    return f"; allowances x{pace:.2f} for this machine's pace" if pace > 1 else ""
