"""Grading any client: one attempt's outcome.

An attempt is *invalid* when something other than the client decided it — an armed fault that
had its chance and never fired, or a clause or gate left inconclusive for an environment or
harness reason (evidence missing, a port clash). Invalid attempts are shown and left out of
every denominator (sessions/judging/metrics.py): they count neither as the client's success
nor its failure.
"""

from sessions.judging.fault_chance import could_fire
from sessions.stream.events import AttemptJudged, GateResult, Verdict
from sessions.stream.evidence import ScenarioEvidence


def judge_attempt(ev: ScenarioEvidence, verdicts: list[Verdict], gates: list[GateResult],
                  unfired: list[dict], now_ns: int) -> AttemptJudged:
    s = ev.started
    broken = harness_failures(ev)
    if broken:   # e.g. a port clash, a receiver that died by itself: not the client's doing
        return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, False, False, None,
                             "invalid: harness: " + "; ".join(broken))
    judged: list[Verdict | GateResult] = [*verdicts, *gates]
    # Fail closed: an inconclusive that is not the client's own doing blocks the attempt.
    blocked = [j for j in judged if j.status == "inconclusive" and j.failure_class != "client"]
    had_chance = [f for f in unfired if could_fire(f, ev.invocations.get(f["invocation"]),
                                                   s.source_size)]
    passed = [j for j in judged if j.status == "pass"]
    failed = [j for j in judged if j.status == "fail"
              or (j.status == "inconclusive" and j.failure_class == "client")]
    score = len(passed) / (len(passed) + len(failed)) if passed or failed else None
    if had_chance or blocked:
        why = [f"{f['kind']} fault armed for invocation {f['invocation']} never fired"
               for f in had_chance]
        why += [f"{_name(j)} inconclusive ({j.failure_class}): {j.reason}" for j in blocked]
        return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, False, False, score,
                             "invalid: " + "; ".join(why))
    if failed:
        return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, True, False, score,
                             "failed: " + ", ".join(_name(j) for j in failed))
    return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, True, True, score,
                         f"every clause and gate passed ({len(passed)} judged, "
                         f"{len(judged) - len(passed)} not applicable)")


def harness_failures(ev: ScenarioEvidence) -> list[str]:
    """What went wrong in the lab itself, from its own records: a server that could not start,
    a receiver that died without an injected crash, a proxy that failed or lost its upstream."""
    out = []
    for n in sorted(ev.invocations):
        inv = ev.invocations[n]
        crashed = any(r.fields.get("fault") == "crash" for r in inv.receiver
                      if r.event == "fault_fired")
        for r in inv.harness:
            if r.event == "start_failed":
                out.append(str(r.fields.get("error")))
            elif r.event == "receiver_restarted" and not crashed:
                out.append(f"invocation {n}: the receiver died without an injected crash "
                           f"(exit {r.fields.get('exit_status')})")
        for r in inv.proxy:
            if r.event == "proxy_error" or (r.event == "upstream_failed" and not crashed):
                out.append(f"invocation {n}: wire proxy {r.event} {r.fields.get('error', '')}"
                           .rstrip())
    return out


def _name(j: Verdict | GateResult) -> str:
    return j.clause if isinstance(j, Verdict) else f"gate {j.gate}"
