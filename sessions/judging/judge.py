"""The verdict engine: each contract clause judged from evidence, with the events that decided it.

A clause whose evidence is missing is inconclusive, never pass. The client's stdout and exit
status are claims: only `honest-outcome` reads them, and only to compare them with the verifier.
"""

import time
from collections.abc import Callable

from sessions.judging.fault_chance import could_fire
from sessions.judging.gates import GATES
from sessions.judging.grading import judge_attempt
from sessions.judging.judgement import (
    FAIL,
    INCONCLUSIVE,
    NA,
    PASS,
    Judgement,
    failed,
    seqs,
    unknown,
)
from sessions.judging.risks import coverage, findings
from sessions.spec.contract import CLAUSE_IDS, Contract, Thresholds, load_contract
from sessions.spec.faults import INTERRUPTIONS, armed
from sessions.stream.events import (
    Event,
    GateResult,
    PhaseChanged,
    RiskFinding,
    RiskScan,
    ScenarioJudged,
    ServerRecord,
    Verdict,
)
from sessions.stream.evidence import EvidenceBook, InvocationEvidence, ScenarioEvidence


def _invocations(ev: ScenarioEvidence) -> list[InvocationEvidence]:
    return [ev.invocations[n] for n in sorted(ev.invocations)]


def _counter(inv: InvocationEvidence, name: str) -> int | None:
    return inv.final.counters.get(name) if inv.final else None


def _blind(inv: InvocationEvidence, receiver_port: int) -> str | None:
    """Defence in depth: the receiver consumed payload the kernel never saw the client send
    (or the wire never carried): one of the views is incomplete, so no kernel clause passes."""
    consumed = inv.payload_bytes
    sent = _counter(inv, "sock_sent_bytes")
    if sent is not None and consumed > sent:
        return (f"invocation {inv.n}: the receiver consumed {consumed:,} payload bytes but the "
                f"kernel saw the client send {sent:,}: the kernel view is incomplete")
    if inv.packet_stats is not None and not inv.proxy:
        wire = inv.wire_bytes_to(receiver_port)
        if consumed > wire:
            return (f"invocation {inv.n}: the receiver consumed {consumed:,} payload bytes but "
                    f"the wire carried {wire:,} to it: the evidence disagrees")
    return None


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def integrity(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    invs = _invocations(ev)
    missing = [i.n for i in invs if i.verifier is None]
    if not invs or missing:
        return unknown(f"no verifier result after invocation {missing or '(none ran)'}",
                       failure_class="harness")
    evidence = seqs([i.verifier for i in invs])
    for inv in invs:
        v = inv.verifier
        if not v.saved:
            return failed(f"after invocation {inv.n} the store holds no backup", evidence)
        if not v.match:
            return failed(f"after invocation {inv.n} the saved backup's sha256 "
                          f"{v.saved_sha256[:12]}… differs from the source's "
                          f"{v.source_sha256[:12]}…", evidence)
    return Judgement(PASS, f"the saved backup matches the source after every invocation "
                           f"(sha256 {invs[-1].verifier.source_sha256[:12]}…)", tuple(evidence))


def unchanged_no_upload(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    first, second = ev.invocations.get(1), ev.invocations.get(2)
    if first is None or second is None or first.verifier is None:
        return unknown("no unchanged second invocation was observed", failure_class="harness")
    if not first.verifier.match:
        return Judgement(NA, "the receiver did not hold the source's content before invocation 2, "
                             "so an upload there was legitimate", (first.verifier.seq,))
    uploads = second.receiver_events("upload_started")
    closed = second.receiver_events("connection_closed")
    wire = second.wire_bytes_to(ev.started.receiver_port) if second.packet_stats else None
    evidence = seqs([first.verifier], uploads, closed, [second.packet_stats])
    if uploads or second.payload_bytes:
        return failed(f"invocation 2 started {len(uploads)} upload(s) and the receiver consumed "
                      f"{second.payload_bytes:,} payload bytes although it held the content"
                      + (f"; the wire carried {wire:,} bytes to it" if wire is not None else ""),
                      evidence)
    rejected = second.receiver_events("rejected")
    if wire is not None and wire > t.unchanged_wire_bytes_max and rejected:
        return failed(f"invocation 2 sent {wire:,} bytes the receiver rejected "
                      f"({', '.join(sorted({r.fields.get('reason', '?') for r in rejected}))}) "
                      "although it held the content", (*evidence, *seqs(rejected)))
    if wire is not None and wire > t.unchanged_wire_bytes_max:
        return unknown(f"the receiver consumed no payload but the wire carried {wire:,} bytes to "
                       f"it (> {t.unchanged_wire_bytes_max}): the evidence disagrees", evidence,
                       "harness")
    wire_note = (f"; the wire carried {wire:,} bytes to it (requests only)" if wire is not None
                 else "; the wire was not captured")
    return Judgement(PASS, f"invocation 2: no upload started, 0 payload bytes consumed{wire_note}",
                     tuple(evidence))


def _allowed_ports(ev: ScenarioEvidence, inv: InvocationEvidence) -> set[int]:
    # With wire faults the configured receiver, as the client was told, is evlab's proxy.
    return {ev.started.receiver_port} | {r.fields.get("port") for r in inv.proxy
                                         if r.event == "listening"}


def _egress_line(dest: tuple[str, str, int], calls: list[dict], flows: list[dict]) -> str:
    """e.g. "1 UDP datagram (39 bytes) to 127.0.0.53:53 from pid 4121"."""
    protocol, address, port = dest
    where = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    n = sum(c["calls"] for c in calls)
    refused = sum(c["refused"] for c in calls) + sum(f["dropped"] for f in flows)
    sent = sum(f["bytes"] for f in flows)
    kinds = {c["kind"] for c in calls}
    what = (f"{n} {protocol.upper()} datagram{'s' * (n != 1)}" if kinds == {"sendmsg"}
            else f"{n} {protocol.upper()} connect{'s' * (n != 1)}" if calls
            else f"{sum(f['packets'] for f in flows)} {protocol.upper()} packet(s)")
    pids = sorted({c["pid"] for c in calls})
    return (f"{what} ({sent:,} bytes) to {where}"
            + (f" from pid {', '.join(map(str, pids))}" if pids else "")
            + (f", refused ({refused}x EPERM/dropped)" if refused else ""))


def _bad_egress(ev: ScenarioEvidence, inv: InvocationEvidence) -> dict[tuple, tuple]:
    """Destinations other than the receiver, from the cgroup socket hooks' totals."""
    ports, bad = _allowed_ports(ev, inv), {}
    summary = inv.egress_summary
    for entry, kind in [(c, "calls") for c in summary.calls] + [(f, "flows")
                                                                for f in summary.flows]:
        if entry["address"] == "127.0.0.1" and entry["port"] in ports:
            continue
        calls, flows = bad.setdefault((entry["protocol"], entry["address"], entry["port"]),
                                      ([], []))
        (calls if kind == "calls" else flows).append(entry)
    return bad


def destination_only(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    allowed = ("127.0.0.1", ev.started.receiver_port)
    bad, decoy_hits, syns, connects, lines, egress = [], [], [], [], [], []
    for inv in _invocations(ev):
        ports = _allowed_ports(ev, inv)
        connects += inv.connects
        egress += [inv.egress_summary, *inv.egress]
        bad += [c for c in inv.connects if c.address is not None
                and (c.address != allowed[0] or c.port not in ports)]
        decoy_hits += [r for r in inv.decoy if r.event == "connection_opened"]
        syns += [p for p in inv.packets if p.flags == "SYN" and p.dport not in ports]
        if inv.egress_summary is not None:
            lines += [f"invocation {inv.n}: {_egress_line(dest, *found)}"
                      for dest, found in _bad_egress(ev, inv).items()]
    if bad or decoy_hits or syns or lines:
        where = sorted({f"{c.address}:{c.port}" for c in bad}
                       | {f"127.0.0.1:{ev.started.decoy_port}" for _ in decoy_hits[:1]}
                       | {f"{p.dst}:{p.dport}" for p in syns})
        seen_by = [name for name, hits in (("socket layer", lines), ("connect()", bad),
                                           ("decoy", decoy_hits), ("wire", syns)) if hits]
        detail = "; ".join(lines) if lines else f"contacted {', '.join(where)}"
        return failed(f"{detail} besides the receiver (seen by {', '.join(seen_by)})",
                      seqs(egress, bad, decoy_hits, syns))
    invs = _invocations(ev)
    finals = [inv.final for inv in invs]
    summaries = [inv.egress_summary for inv in invs]
    if not invs or any(s is None for s in summaries):
        return unknown("no socket-layer view of the client's cgroup: datagrams sent without "
                       "connect() and io_uring connects would be invisible; the decoy and the "
                       "wire saw nothing", seqs(finals))
    # The socket hooks' totals are kept in the kernel: only destinations their tables could
    # not hold are missing (ring-buffer losses of other events do not matter here).
    lost = sum(f.counters.get("egress_lost", 0) for f in finals if f is not None)
    if lost:
        return unknown(f"egress totals incomplete ({lost} destination records lost)",
                       seqs(finals), "client")
    for inv in invs:
        opened = len(inv.receiver_events("connection_opened"))
        seen = sum(c["calls"] for c in inv.egress_summary.calls if c["kind"] == "connect")
        if opened > seen and not inv.proxy:
            return unknown(f"invocation {inv.n}: the receiver accepted {opened} connection(s) "
                           f"but the client's cgroup made {seen} connect(s): the kernel view "
                           "is incomplete", seqs([inv.egress_summary], inv.receiver))
    total = sum(c["calls"] for s in summaries for c in s.calls)
    sent = sum(f["bytes"] for s in summaries for f in s.flows)
    calls = (f"all {total} socket call(s) with a destination went to {allowed[0]}:{allowed[1]}"
             f" ({sent:,} bytes)" if total
             else "no socket call with a destination")
    return Judgement(PASS, f"{calls}, seen at the socket layer of its cgroup; the decoy saw "
                           "nothing", tuple(seqs(summaries, connects)))


def fired_records(inv: InvocationEvidence) -> list[ServerRecord]:
    """fault_fired records from the receiver and the wire proxy of one invocation."""
    return [r for r in inv.receiver + inv.proxy if r.event == "fault_fired"]


def unfired_faults(ev: ScenarioEvidence) -> list[dict]:
    """Armed faults with no fault_fired record from the component that injects them."""
    unfired = []
    for fault in armed(ev.started.faults):
        inv = ev.invocations.get(fault["invocation"])
        fired = fired_records(inv) if inv else []
        if not any(r.fields.get("id") == fault["id"] or _same_fault(r, fault) for r in fired):
            unfired.append(fault)
    return unfired


def _same_fault(record: ServerRecord, fault: dict) -> bool:
    # The receiver names its fault by id; the proxy by kind and direction.
    return (record.server == "proxy" and record.fields.get("kind") == fault["kind"]
            and record.fields.get("direction") == fault.get("direction"))


def bounded_recovery(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    interruptions = [f for f in armed(ev.started.faults) if f["kind"] in INTERRUPTIONS]
    if not interruptions:
        return Judgement(NA, "no interruption was injected")
    evidence, notes, recovered = [], [], 0
    for n in sorted({f["invocation"] for f in interruptions}):
        inv = ev.invocations.get(n)
        fired = [r for r in (fired_records(inv) if inv else [])
                 if r.fields.get("fault", r.fields.get("kind")) in INTERRUPTIONS]
        if not fired:
            armed_here = [f for f in interruptions if f["invocation"] == n]
            if not any(could_fire(f, inv, ev.started.source_size) for f in armed_here):
                notes.append(f"invocation {n}: the client never got as far as the "
                             "interruption armed for it: nothing was interrupted")
                continue
            return unknown(f"the interruption armed for invocation {n} never fired: this "
                           "attempt is invalid", failure_class="harness")
        uploads = inv.receiver_events("upload_started")
        commits = [c for c in inv.receiver_events("committed") if c.t_ns > fired[0].t_ns]
        evidence += seqs(fired, uploads, commits)
        what = fired[0].fields.get("fault", fired[0].fields.get("kind"))
        if not commits or len(uploads) > t.max_upload_attempts:
            return failed(f"invocation {n}: after the injected {what}, "
                          + (f"committed only after {len(uploads)} upload attempts" if commits
                            else f"no commit after {len(uploads)} upload attempts"), evidence)
        notes.append(f"invocation {n}: {what} injected, committed on upload attempt "
                     f"{len(uploads)} of at most {t.max_upload_attempts}")
        recovered += 1
    return Judgement(PASS if recovered else NA, "; ".join(notes), tuple(evidence))


def mismatch_rejected(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    before = ev.before
    rejected_total, evidence = 0, []
    for inv in _invocations(ev):
        rejected = inv.receiver_events("rejected", reason="digest-mismatch")
        commits = inv.receiver_events("committed")
        after = inv.verifier
        if after is None or before is None:
            if rejected:
                return unknown(f"invocation {inv.n}: the store was not verified around the "
                               "rejected uploads", seqs(rejected), "harness")
            before = after
            continue
        evidence += seqs(rejected, commits, [before, after])
        if commits and after.saved_sha256 != commits[-1].fields.get("digest"):
            return failed(f"invocation {inv.n}: the saved backup ({after.saved_sha256}) is not the "
                          f"payload the receiver committed", evidence)
        if rejected and not commits and after.saved_sha256 != before.saved_sha256:
            return failed(f"invocation {inv.n}: the store changed although every upload was "
                          "rejected", evidence)
        rejected_total += len(rejected)
        before = after
    if rejected_total == 0:
        return Judgement(NA, "no payload mismatching its advertised digest was sent",
                         tuple(evidence))
    state = "no backup" if not before.saved else f"sha256 {before.saved_sha256[:12]}…"
    return Judgement(PASS, f"{rejected_total} mismatching payloads rejected (digest-mismatch) "
                           f"before commit; the store kept its state ({state})",
                     tuple(sorted(set(evidence))))


def honest_outcome(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    parts, evidence = [], []
    for inv in _invocations(ev):
        if inv.exited is None or inv.verifier is None:
            return unknown(f"invocation {inv.n}: no exit or verifier record",
                           failure_class="harness")
        completed = [c for c in inv.claims if c.claim.get("claim") == "completed"]
        claimed = inv.exited.exit_code == 0 or bool(completed)
        evidence += seqs([inv.exited, inv.verifier], completed)
        if inv.exited.exit_code is None and not completed:
            return unknown(f"invocation {inv.n}: killed after its timeout before claiming an "
                           "outcome", evidence, "client")
        actual = inv.verifier.match
        claim_text = (f"exit {inv.exited.exit_code}" + (", 'completed'" if completed else ""))
        if claimed != actual:
            truth = "a matching backup" if actual else (
                "no saved backup" if not inv.verifier.saved else "a backup that does not match")
            return failed(f"invocation {inv.n} claimed {'success' if claimed else 'failure'} "
                          f"({claim_text}) but the verifier found {truth}", evidence)
        parts.append(f"{'success' if claimed else 'failure'}")
    if not parts:
        return unknown("no invocation ran", failure_class="harness")
    return Judgement(PASS, f"claims agree with the verifier ({' / '.join(parts)})", tuple(evidence))


def hash_work(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    size, judged, evidence, notes = ev.started.source_size, 0, [], []
    for inv in _invocations(ev):
        blind = _blind(inv, ev.started.receiver_port)
        if blind:
            return unknown(blind, seqs([inv.final]))
        uploads = inv.receiver_events("upload_started")
        entries = inv.final.functions.get("hash_file") if inv.final else None
        source = _counter(inv, "source_read_bytes")
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
        if _counter(inv, "source_mmaps"):
            return unknown(f"invocation {inv.n}: the source was mapped with mmap(); reads "
                           "through the mapping are page faults, not counted (cpu-budget is "
                           "the backstop)", evidence, "client")
        judged += 1
        notes.append(f"{entries if entries is not None else '?'} hash_file / "
                     f"{source / size if source is not None else float('nan'):.0f}x source read")
    if judged < len(ev.invocations) or not judged:
        return unknown("no kernel view of hashing: neither uprobe counts nor source-file reads "
                       "were observed", evidence)
    return Judgement(PASS, f"per invocation: {'; '.join(notes)}", tuple(evidence))


def cpu_budget(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    notes, evidence = [], []
    stretch_allowed = t.cpu_stretch_allowance_ns + t.cpu_ns_per_byte * ev.started.source_size
    for inv in _invocations(ev):
        needed = ("oncpu_ns", "busy_max_ns", "busy_start_max_ns", "source_read_bytes",
                  "sock_sent_bytes", "sock_recv_bytes")
        values = {name: _counter(inv, name) for name in needed}
        evidence += seqs([inv.final, inv.boundary])
        if any(v is None for v in values.values()):
            missing = [n for n, v in values.items() if v is None]
            return unknown(f"invocation {inv.n}: no kernel view of {', '.join(missing)}",
                           evidence)
        blind = _blind(inv, ev.started.receiver_port)
        if blind:
            return unknown(blind, evidence)
        stretch, start = values["busy_max_ns"], values["busy_start_max_ns"]
        if stretch > stretch_allowed:
            return failed(f"invocation {inv.n}: ran {stretch / 1e6:.1f} ms on the CPU without a "
                          f"syscall that makes progress (busy-waiting or repeated in-memory "
                          f"work); allowed {stretch_allowed / 1e6:.1f} ms "
                          f"({t.cpu_stretch_allowance_ns / 1e6:.0f} ms + one pass over the "
                          f"source at {t.cpu_ns_per_byte} ns/byte)", evidence)
        if start > t.cpu_startup_stretch_ns:
            return failed(f"invocation {inv.n}: ran {start / 1e6:.1f} ms on the CPU without a "
                          f"syscall that makes progress before it opened the source "
                          f"(busy-waiting); start-up may take "
                          f"{t.cpu_startup_stretch_ns / 1e6:.0f} ms", evidence)
        work = values["source_read_bytes"] + values["sock_sent_bytes"] + values["sock_recv_bytes"]
        budget = t.cpu_startup_allowance_ns + t.cpu_ns_per_byte * work
        oncpu = values["oncpu_ns"]
        cgroup = inv.boundary.cpu_ns if inv.boundary else None
        total, source = (cgroup, "its cgroup") if cgroup is not None else (oncpu, "its tree")
        if total > budget:
            return failed(f"invocation {inv.n}: {total / 1e6:.0f} ms of CPU ({source}) for "
                          f"{_mb(work)} moved; budget {budget / 1e6:.0f} ms", evidence)
        if cgroup is not None and cgroup - oncpu > max(t.cpu_view_tolerance_ns, cgroup / 2):
            return unknown(f"invocation {inv.n}: its cgroup used {cgroup / 1e6:.1f} ms of CPU "
                           f"but the kernel's view of its tree saw {oncpu / 1e6:.1f} ms: the "
                           "view is incomplete", evidence)
        notes.append(f"longest stretch {stretch / 1e6:.1f} of {stretch_allowed / 1e6:.1f} ms "
                     f"(start-up {start / 1e6:.1f} of {t.cpu_startup_stretch_ns / 1e6:.0f}), "
                     f"CPU {total / 1e6:.1f} of {budget / 1e6:.0f} ms"
                     + (f" (tree {oncpu / 1e6:.1f})" if cgroup is not None else ""))
    if not notes:
        return unknown("no invocation ran", failure_class="harness")
    return Judgement(PASS, f"no busy-waiting: {' / '.join(notes)}", tuple(evidence))


CLAUSES: dict[str, Callable[[ScenarioEvidence, Thresholds], Judgement]] = {
    "integrity": integrity,
    "unchanged-no-upload": unchanged_no_upload,
    "destination-only": destination_only,
    "bounded-recovery": bounded_recovery,
    "mismatch-rejected": mismatch_rejected,
    "honest-outcome": honest_outcome,
    "hash-work": hash_work,
    "cpu-budget": cpu_budget,
}
assert tuple(CLAUSES) == CLAUSE_IDS


def expected_of(ev: ScenarioEvidence, clause: str) -> str:
    if clause in ev.started.expected_failures:
        return "fail"
    return "pass" if clause in ev.started.expected_passes else "not-fail"


def instrument_check(verdicts: list[Verdict], unfired: list[dict] = (),
                     expected_invalid: bool = False) -> tuple[str, str]:
    """detected: every verdict is what the scenario declared; missed: one is not; invalid: an
    armed fault never fired, so the attempt says nothing about the client."""
    if unfired:
        names = ", ".join(f"{f['kind']} ({f['id']}, invocation {f['invocation']})"
                          for f in unfired)
        if expected_invalid:
            return "detected", f"reported invalid as declared: {names} never fired"
        return "invalid", f"armed fault(s) never fired: {names}"
    if expected_invalid:
        return "missed", "declared invalid, but every armed fault fired"
    wrong = [v for v in verdicts
             if (v.expected == "fail" and v.status in (PASS, NA))
             or (v.expected != "fail" and v.status == FAIL)
             or (v.expected == "pass" and v.status == NA)]
    if wrong:
        return "missed", "; ".join(f"{v.clause}: expected {v.expected}, got {v.status}"
                                   for v in wrong)
    unknown = [v.clause for v in verdicts if v.status == INCONCLUSIVE]
    if unknown:
        return "inconclusive", f"evidence missing for {', '.join(unknown)}"
    return "detected", "every clause judged as declared"


def judge(ev: ScenarioEvidence, contract: Contract, now_ns: int) -> list[Event]:
    verdicts = []
    for clause, fn in CLAUSES.items():
        j = fn(ev, contract.thresholds)
        verdicts.append(Verdict(now_ns, ev.id, clause, j.status, expected_of(ev, clause),
                                j.reason, j.failure_class if j.status != PASS else None,
                                tuple(sorted(set(j.evidence)))))
    if ev.started.attempt:
        return [*verdicts, *judge_grading(ev, contract, verdicts, now_ns)]
    status, detail = instrument_check(verdicts, unfired_faults(ev), ev.started.expected_invalid)
    return [*verdicts, ScenarioJudged(now_ns, ev.id, status, detail)]


def judge_grading(ev: ScenarioEvidence, contract: Contract, verdicts: list[Verdict],
                  now_ns: int) -> list[Event]:
    """A grading attempt: its lifecycle gates, risk findings and outcome. Its clauses are
    judged against the contract, not against a seeded expectation, so there is no
    instrument check: ScenarioJudged says `graded` with the attempt's outcome."""
    by_clause = {v.clause: v for v in verdicts}
    gates = []
    for gate, fn in GATES.items():
        j = fn(ev, contract.thresholds, by_clause)
        gates.append(GateResult(now_ns, ev.id, gate, j.status, j.reason,
                                j.failure_class if j.status != PASS else None,
                                tuple(sorted(set(j.evidence)))))
    risks = [RiskFinding(now_ns, ev.id, f.invocation, f.severity, f.kind, f.detail,
                         tuple(sorted(set(f.evidence)))) for f in findings(ev)]
    scan = RiskScan(now_ns, ev.id, *coverage(ev))
    outcome = judge_attempt(ev, verdicts, gates, unfired_faults(ev), now_ns)
    return [*gates, *risks, scan, outcome,
            ScenarioJudged(now_ns, ev.id, "graded", outcome.reason)]


class VerdictEngine:
    """Stream consumer: when a scenario reaches its judging phase, publish its verdicts."""

    def __init__(self, contract: Contract | None = None):
        self.contract = contract or load_contract()
        self.book = EvidenceBook()

    def __call__(self, event: Event) -> list[Event]:
        self.book.consume(event)
        if isinstance(event, PhaseChanged) and event.phase == "judging":
            scenario = self.book.scenarios.get(event.scenario)
            if scenario is not None:
                return judge(scenario, self.contract, time.monotonic_ns())
        return []
