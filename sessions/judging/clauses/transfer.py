"""Clauses about the transfers themselves, judged from the receiver's records and the wire:
unchanged-no-upload and bounded-recovery."""

from sessions.judging.fault_chance import could_fire, fired_records, source_digest
from sessions.judging.judgement import NA, PASS, Judgement, failed, seqs, unknown
from sessions.judging.views import wire_lost
from sessions.spec.contract import Thresholds
from sessions.spec.faults import CONTINUOUS, INTERRUPTIONS, armed
from sessions.stream.evidence import ScenarioEvidence


def unchanged_no_upload(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    first, second = ev.invocations.get(1), ev.invocations.get(2)
    if first is None or second is None or first.verifier is None:
        return unknown("no unchanged second invocation was observed", failure_class="harness")
    if not first.verifier.match:
        return Judgement(NA, "the receiver did not hold the source's content before invocation 2, "
                             "so an upload there was legitimate", (first.verifier.seq,))
    uploads = second.endpoint_events("upload_started")
    closed = second.endpoint_events("connection_closed")
    wire = second.wire_bytes_to(ev.started.receiver_port) if second.packet_stats else None
    evidence = seqs([first.verifier], uploads, closed, [second.packet_stats])
    if uploads or second.payload_bytes:
        return failed(f"invocation 2 started {len(uploads)} upload(s) and the receiver consumed "
                      f"{second.payload_bytes:,} payload bytes although it held the content"
                      + (f"; the wire carried {wire:,} bytes to it" if wire is not None else ""),
                      evidence)
    rejected = second.endpoint_events("rejected")
    if wire is not None and wire > t.unchanged_wire_bytes_max and rejected:
        return failed(f"invocation 2 sent {wire:,} bytes the receiver rejected "
                      f"({', '.join(sorted({r.fields.get('reason', '?') for r in rejected}))}) "
                      "although it held the content", (*evidence, *seqs(rejected)))
    if wire is not None and wire > t.unchanged_wire_bytes_max:
        return unknown(f"the receiver consumed no payload but the wire carried {wire:,} bytes to "
                       f"it (> {t.unchanged_wire_bytes_max}): requests beyond what a CHECK "
                       "takes", evidence)
    lost = wire_lost(second)
    if lost:
        return unknown(lost, evidence, "harness")
    wire_note = (f"; the wire carried {wire:,} bytes to it (requests only)" if wire is not None
                 else "; the wire was not captured")
    return Judgement(PASS, f"invocation 2: no upload started, 0 payload bytes consumed{wire_note}",
                     tuple(evidence))


def bounded_recovery(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    judged = _recovery(ev, t)
    return (judged.status in (PASS, NA) and _spoiled(ev)) or judged


def _recovery(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    interruptions = [f for f in armed(ev.started.faults) if f["kind"] in INTERRUPTIONS]
    if not interruptions:
        return Judgement(NA, "no interruption was injected; every upload committed")
    evidence, notes, recovered = [], [], 0
    for n in sorted({f["invocation"] for f in interruptions}):
        inv = ev.invocations.get(n)
        fired = [r for r in (fired_records(inv) if inv else [])
                 if r.fields.get("fault", r.fields.get("kind")) in INTERRUPTIONS]
        if inv is None or not fired:   # no invocation: nothing fired (one and the same case)
            armed_here = [f for f in interruptions if f["invocation"] == n]
            if not any(could_fire(f, inv, ev.started.source_size, source_digest(ev))
                       for f in armed_here):
                notes.append(f"invocation {n}: the client never got as far as the "
                             "interruption armed for it: nothing was interrupted")
                continue
            return unknown(f"the interruption armed for invocation {n} never fired: this "
                           "attempt is invalid", failure_class="harness")
        uploads = inv.endpoint_events("upload_started")
        commits = [c for c in inv.endpoint_events("committed") if c.t_ns > fired[0].t_ns]
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


def _spoiled(ev: ScenarioEvidence) -> Judgement | None:
    """An upload that did not commit, beyond those a fault struck (each strikes one): the client
    gave it up or sent the wrong bytes unprompted. Inside a fault scenario a sacrificial upload
    sent first looks like a recovery (the fault strikes it, the next one commits); here is where
    such a client fails, in every scenario it plays that trick without a fault to absorb."""
    for inv in ev.invocations.values():
        uploads = inv.endpoint_events("upload_started")
        committed = {r.fields.get("conn") for r in inv.endpoint_events("committed")}
        failed_uploads = [u for u in uploads if u.fields.get("conn") not in committed]
        fired = fired_records(inv)
        struck = {r.fields.get("id") for r in fired
                  if r.fields.get("fault", r.fields.get("kind")) not in CONTINUOUS}
        if len(failed_uploads) > len(struck):
            ends = {r.fields.get("conn"): r.fields.get("reason") for r in inv.endpoint
                    if r.event == "rejected"}
            how = ", ".join(f"{ends.get(u.fields.get('conn')) or 'abandoned'}"
                            for u in failed_uploads)
            return failed(f"invocation {inv.n}: {len(failed_uploads)} upload(s) ended without a "
                          f"commit ({how}) and {len(struck)} fault(s) struck one: an upload given "
                          "up or spoiled with no fault to recover from",
                          seqs(uploads, fired))
    return None
