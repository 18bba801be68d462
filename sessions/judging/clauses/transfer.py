"""Clauses about the transfers themselves, judged from the endpoint's records (by the names of
the contract's vocabulary) and the wire: unchanged-no-transfer (none on an unchanged re-run)
and bounded-recovery (a transfer completes within N attempts after a fault)."""

from sessions.judging.fault_chance import (
    could_fire,
    fired_records,
    source_digest,
    struck_refused,
)
from sessions.judging.judgement import NA, PASS, Judgement, failed, seqs, unknown
from sessions.judging.views import consumed_bytes, endpoint_name, wire_lost
from sessions.spec.contract import Thresholds, Vocabulary
from sessions.spec.scenario_faults import CONTINUOUS, INTERRUPTIONS, armed
from sessions.stream.evidence import ScenarioEvidence


def unchanged_no_transfer(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    w, endpoint = t.names, endpoint_name(ev)
    first, second = ev.invocations.get(1), ev.invocations.get(2)
    if first is None or second is None or first.verifier is None:
        return unknown("no unchanged second invocation was observed", failure_class="harness")
    if not first.verifier.match:
        return Judgement(NA, f"the {endpoint} did not hold the source's content before "
                             f"invocation 2, so an {w.transfer} there was legitimate",
                         (first.verifier.seq,))
    attempts = second.endpoint_events(w.started)
    closed = second.endpoint_events(w.closed)
    consumed = consumed_bytes(second, w)
    wire = second.wire_bytes_to(ev.started.endpoint_port) if second.packet_stats else None
    evidence = seqs([first.verifier], attempts, closed, [second.packet_stats])
    if attempts or consumed:
        return failed(f"invocation 2 started {len(attempts)} {w.transfer}(s) and the {endpoint} "
                      f"consumed {consumed:,} payload bytes although it held the content"
                      + (f"; the wire carried {wire:,} bytes to it" if wire is not None else ""),
                      evidence)
    rejected = second.endpoint_events(w.refused)
    if wire is not None and wire > t.unchanged_wire_bytes_max and rejected:
        return failed(f"invocation 2 sent {wire:,} bytes the {endpoint} rejected "
                      f"({', '.join(sorted({r.fields.get('reason', '?') for r in rejected}))}) "
                      "although it held the content", (*evidence, *seqs(rejected)))
    if wire is not None and wire > t.unchanged_wire_bytes_max:
        return unknown(f"the {endpoint} consumed no payload but the wire carried {wire:,} bytes "
                       f"to it (> {t.unchanged_wire_bytes_max}): requests beyond what a CHECK "
                       "takes", evidence)
    lost = wire_lost(second)
    if lost:
        return unknown(lost, evidence, "harness")
    wire_note = (f"; the wire carried {wire:,} bytes to it (requests only)" if wire is not None
                 else "; the wire was not captured")
    return Judgement(PASS, f"invocation 2: no {w.transfer} started, 0 payload bytes consumed"
                           f"{wire_note}", tuple(evidence))


def bounded_recovery(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    judged = _recovery(ev, t)
    return (judged.status in (PASS, NA) and _spoiled(ev, t.names)) or judged


def _recovery(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    interruptions = [f for f in armed(ev.started.faults) if f["kind"] in INTERRUPTIONS]
    if not interruptions:
        return Judgement(NA, f"no interruption was injected; every {t.names.transfer} "
                             f"{t.names.committed}")
    evidence, notes, recovered = [], [], 0
    for n in sorted({f["invocation"] for f in interruptions}):
        inv = ev.invocations.get(n)
        fired = [r for r in (fired_records(inv) if inv else [])
                 if r.fields.get("fault", r.fields.get("kind")) in INTERRUPTIONS]
        if inv is None or not fired:   # no invocation: nothing fired (one and the same case)
            armed_here = [f for f in interruptions if f["invocation"] == n]
            if not any(could_fire(f, inv, ev.started.source_size, t.names, source_digest(ev))
                       for f in armed_here):
                notes.append(f"invocation {n}: the client never got as far as the "
                             "interruption armed for it: nothing was interrupted")
                continue
            return unknown(f"the interruption armed for invocation {n} never fired: this "
                           "attempt is invalid", failure_class="harness")
        w, most = t.names, t.max_transfer_attempts
        spent = struck_refused(inv, w)
        if spent:
            record, reason = spent[0]
            return failed(f"invocation {n}: the injected {record.fields.get('kind')} struck a "
                          f"request the {endpoint_name(ev)} had refused ({reason}), not a "
                          f"{w.transfer}: the client spent the interruption instead of "
                          "recovering from it", seqs(fired))
        attempts = inv.endpoint_events(w.started)
        commits = [c for c in inv.endpoint_events(w.committed) if c.t_ns > fired[0].t_ns]
        evidence += seqs(fired, attempts, commits)
        what = fired[0].fields.get("fault", fired[0].fields.get("kind"))
        if not commits or len(attempts) > most:
            return failed(f"invocation {n}: after the injected {what}, "
                          + (f"{w.committed} only after {len(attempts)} {w.transfer} attempts"
                             if commits else f"no commit after {len(attempts)} "
                             f"{w.transfer} attempts"), evidence)
        notes.append(f"invocation {n}: {what} injected, {w.committed} on {w.transfer} attempt "
                     f"{len(attempts)} of at most {most}")
        recovered += 1
    return Judgement(PASS if recovered else NA, "; ".join(notes), tuple(evidence))


def _spoiled(ev: ScenarioEvidence, w: Vocabulary) -> Judgement | None:
    """A transfer that did not commit, beyond those a fault struck (each strikes one): the
    client gave it up or sent the wrong bytes unprompted. Inside a fault scenario a sacrificial
    transfer sent first looks like a recovery (the fault strikes it, the next one commits); here
    is where such a client fails, in every scenario it plays that trick without a fault."""
    for inv in ev.invocations.values():
        attempts = inv.endpoint_events(w.started)
        committed = {r.fields.get("conn") for r in inv.endpoint_events(w.committed)}
        given_up = [u for u in attempts if u.fields.get("conn") not in committed]
        fired = fired_records(inv)
        struck = {r.fields.get("id") for r in fired
                  if r.fields.get("fault", r.fields.get("kind")) not in CONTINUOUS}
        if len(given_up) > len(struck):
            ends = {r.fields.get("conn"): r.fields.get("reason") for r in inv.endpoint
                    if r.event == w.refused}
            how = ", ".join(f"{ends.get(u.fields.get('conn')) or 'abandoned'}"
                            for u in given_up)
            return failed(f"invocation {inv.n}: {len(given_up)} {w.transfer}(s) ended "
                          f"without a commit ({how}) and {len(struck)} fault(s) struck one: an "
                          f"{w.transfer} given up or spoiled with no fault to recover from",
                          seqs(attempts, fired))
    return None
