"""Grading any client: one attempt's outcome.

An attempt is *invalid* only when evlab, not the client, decided it: its own machinery failed
by itself (a server that could not start or died without an injected crash and with no act
of the client's tree behind it, a proxy that failed), what it runs changed under it
(identity), an armed fault had its chance and did not fire, or a clause or gate is
inconclusive for a harness or environment reason (a capability this machine lacks;
judgement.py says whose doing each inconclusive is, and an unknown cause is
the client's). Everything else the client's behaviour causes is judged against it. Each
attempt names the rule applied (RULES, the table in docs/grading.md). Invalid attempts are
shown and left out of every denominator (sessions/judging/metrics.py).
"""

from sessions.judging.fault_chance import could_fire, input_digest
from sessions.judging.judgement import CLIENT, HARNESS
from sessions.judging.server_acts import Act, explains, program_acts
from sessions.spec.contract import Thresholds
from sessions.stream.events import AttemptJudged, GateResult, Verdict
from sessions.stream.evidence import ScenarioEvidence

# the lab's records of a failure that a server the client ended or stopped explains
ACTED_ON = ("verifier_failed", "upstream_failed")


def _acted_on(event: str) -> bool:
    return event in ACTED_ON or event.endswith("_restarted")


# The rule that decided an attempt, by the first that applies, in this order.
RULES = {
    "harness-failed": "invalid: evlab's lab failed by itself (a server, the proxy)",
    "identity-changed": "invalid: the graded program changed since the grade started",
    "fault-unfired": "invalid: an armed fault had its chance and did not fire",
    "evidence-missing": "invalid: a clause or gate inconclusive for a harness or environment "
                        "reason",
    "client-failed": "valid, failed: a clause or gate failed, or was inconclusive by the "
                     "client's doing (what the lab could not do once the client's tree had "
                     "ended or stopped a server is the client's doing)",
    "all-passed": "valid, success: every clause and gate passed or did not apply",
}


def judge_attempt(ev: ScenarioEvidence, verdicts: list[Verdict], gates: list[GateResult],
                  unfired: list[dict], t: Thresholds, now_ns: int) -> AttemptJudged:
    s = ev.started
    for rule, broken in (("harness-failed", harness_failures(ev)),
                         ("identity-changed", identity_failures(ev))):
        if broken:   # e.g. a port clash, a server that died by itself: not the client's doing
            return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, False, False, None,
                                 "invalid: " + "; ".join(broken), rule)
    judged: list[Verdict | GateResult] = [*verdicts, *gates]
    acts = program_acts(ev)
    # Fail closed: an inconclusive that is not the client's own doing blocks the attempt; once
    # the client's tree ended or stopped a server, what the lab then could not check is its doing
    blocked = [j for j in judged if j.status == "inconclusive"
               and _whose(j.failure_class, acts) != CLIENT]
    digest = input_digest(ev)
    had_chance = [f for f in unfired if could_fire(f, ev.invocations.get(f["invocation"]),
                                                   s.source_size, t, digest)]
    passed = [j for j in judged if j.status == "pass"]
    failed = [j for j in judged if j.status == "fail"
              or (j.status == "inconclusive" and _whose(j.failure_class, acts) == CLIENT)]
    score = len(passed) / (len(passed) + len(failed)) if passed or failed else None
    if had_chance or blocked:
        why = [f"{f['kind']} fault armed for invocation {f['invocation']} never fired"
               for f in had_chance]
        why += [f"{_name(j)} inconclusive ({j.failure_class}): {j.reason}" for j in blocked]
        return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, False, False, score,
                             "invalid: " + "; ".join(why),
                             "fault-unfired" if had_chance else "evidence-missing")
    if failed:
        hung = timed_out(ev) + [f"its tree: {a.line}" for a in acts[:1]]
        return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, True, False, score,
                             "failed: " + ", ".join(_name(j) for j in failed)
                             + (f" ({'; '.join(hung)})" if hung else ""), "client-failed")
    return AttemptJudged(now_ns, s.scenario, s.base, s.attempt, True, True, score,
                         f"every clause and gate passed ({len(passed)} judged, "
                         f"{len(judged) - len(passed)} not applicable)", "all-passed")


def harness_failures(ev: ScenarioEvidence) -> list[str]:
    """What went wrong in the lab itself, from its own records: a server that could not start,
    a server that died without an injected crash, a proxy that failed or lost its upstream."""
    out, acts = [], program_acts(ev)
    for n in sorted(ev.invocations):
        inv = ev.invocations[n]
        crashed = any(r.fields.get("fault") == "crash" for r in inv.endpoint
                      if r.event == "fault_fired")
        for r in [*inv.harness, *inv.proxy]:
            if _acted_on(r.event) and explains(acts, n, r) is not None:
                continue   # the client's tree ended or stopped that server: its failure
            if r.event == "start_failed":
                out.append(str(r.fields.get("error")))
            elif r.event == "verifier_failed":
                out.append(f"invocation {n}: the task's verifier could not say: "
                           f"{r.fields.get('error')}")
            elif r.event.endswith("_restarted") and (not crashed or r.fields.get("failed")):
                died = (f"died (exit {r.fields.get('exit_status')})" if crashed else
                        "died with no injected crash and no act of the client's tree behind "
                        f"it (exit {r.fields.get('exit_status')})")
                again = (f" and could not be started again: {r.fields['failed']}"
                         if r.fields.get("failed") else "")
                out.append(f"invocation {n}: the {r.event.removesuffix('_restarted')} "
                           f"{died}{again}")
            elif r.event == "proxy_error" or (r.event == "upstream_failed" and not crashed):
                out.append(f"invocation {n}: wire proxy {r.event} {r.fields.get('error', '')}"
                           .rstrip())
    return [f"harness: {line}" for line in out]


def _whose(failure_class: str | None, acts: list[Act]) -> str | None:
    """Whose doing an inconclusive is, once the client's tree ended or stopped a server."""
    return CLIENT if acts and failure_class == HARNESS else failure_class


def timed_out(ev: ScenarioEvidence) -> list[str]:
    """The invocations that never exited: killed by evlab at their timeout."""
    out = []
    for n in sorted(ev.invocations):
        exited = ev.invocations[n].exited
        if exited is not None and exited.timed_out:
            out.append(f"invocation {n} killed by evlab at its "
                       + (f"{exited.timeout_s:g} s " if exited.timeout_s is not None else "")
                       + "timeout")
    return out


def identity_failures(ev: ScenarioEvidence) -> list[str]:
    """An attempt must run what is graded. Each attempt re-hashes the executable and the
    command's files as it begins (ScenarioStarted): a change since the grade started is not
    averaged into the grade of the first sha256. A campaign attempt also runs what the campaign
    named: the node's own sha256 of the executable, its files and everything shipped."""
    want, got = ev.expected, ev.grade
    if want is None:
        return _changed_since_start(ev)
    if got is None or got.client != ev.started.client:
        return ["identity: the attempt does not record which client it ran"]
    wrong = []
    if got.sha256 != want.get("sha256"):
        wrong.append(f"executable {got.executable} is {got.sha256[:12]}, the campaign named "
                     f"{str(want.get('sha256'))[:12]}")
    if sorted(got.files.values()) != sorted(dict(want.get("files", {})).values()):
        wrong.append("the command's files differ from the campaign's")
    named = dict(want.get("shipped", {}))
    for name in sorted(set(named) | set(got.shipped)):
        if named.get(name) != got.shipped.get(name):
            wrong.append(f"{name} is {str(got.shipped.get(name, 'missing'))[:12]}, the "
                         f"campaign named {str(named.get(name, 'nothing'))[:12]}")
    return [f"identity: {'; '.join(wrong)}"] if wrong else []


def _changed_since_start(ev: ScenarioEvidence) -> list[str]:
    """What of the graded program this attempt found changed since the grade started (an
    archive from before attempts were re-hashed records no files: nothing to compare)."""
    got, s = ev.grade, ev.started
    if got is None or not s.attempt:
        return []
    wrong = []
    if s.client_sha256 != got.sha256:
        wrong.append(f"executable {got.executable} is now {s.client_sha256[:12]}, the grade "
                     f"started with {got.sha256[:12]}")
    for path, digest in sorted(s.files_sha256.items()):
        if got.files.get(path) != digest:
            wrong.append(f"{path} is now {digest[:12]}, the grade started with "
                         f"{str(got.files.get(path, 'nothing'))[:12]}")
    return [f"identity: changed since the grade started: {'; '.join(wrong)}"] if wrong else []


def _name(j: Verdict | GateResult) -> str:
    return j.clause if isinstance(j, Verdict) else f"gate {j.gate}"
