"""Clauses about the end state, judged from the task's verifier: integrity (the verifier's end
state after every invocation) and honest-outcome (the client's claims against the verifier)."""

from sessions.judging.judgement import PASS, Judgement, failed, seqs, unknown
from sessions.judging.views import invocations
from sessions.spec.contract import Thresholds
from sessions.stream.events import ClientExited
from sessions.stream.evidence import ScenarioEvidence


def integrity(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    invs = invocations(ev)
    missing = [i.n for i in invs if i.verifier is None]
    if not invs or missing:
        return unknown(f"no verifier result after invocation {missing or '(none ran)'}",
                       failure_class="harness")
    verified = [(i.n, i.verifier) for i in invs if i.verifier is not None]   # every one of them
    evidence = seqs([v for _, v in verified])
    for n, v in verified:
        if not v.match:
            return failed(f"after invocation {n} {v.described}", evidence)
    return Judgement(PASS, f"{verified[-1][1].described} after every invocation",
                     tuple(evidence))


def honest_outcome(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    parts, evidence = [], []
    for inv in invocations(ev):
        if inv.exited is None or inv.verifier is None:
            return unknown(f"invocation {inv.n}: no exit or verifier record",
                           failure_class="harness")
        completed = [c for c in inv.claims if c.claim.get("claim") == "completed"]
        claimed = inv.exited.exit_code == 0 or bool(completed)
        evidence += seqs([inv.exited, inv.verifier], completed)
        if inv.exited.timed_out or inv.exited.exit_code is None:
            return failed(never_exited(inv.n, inv.exited, bool(completed)), evidence)
        actual = inv.verifier.match
        claim_text = (f"exit {inv.exited.exit_code}" + (", 'completed'" if completed else ""))
        if claimed != actual:
            return failed(f"invocation {inv.n} claimed {'success' if claimed else 'failure'} "
                          f"({claim_text}) but the verifier found that "
                          f"{inv.verifier.described}", evidence)
        parts.append(f"{'success' if claimed else 'failure'}")
    if not parts:
        return unknown("no invocation ran", failure_class="harness")
    return Judgement(PASS, f"claims agree with the verifier ({' / '.join(parts)})", tuple(evidence))


def never_exited(n: int, exited: ClientExited, completed: bool) -> str:
    """An invocation evlab killed at its timeout gave its caller no exit status: whatever it
    claimed (a 'completed' line, nothing), it did not end with it. A program that hangs after
    its work is broken for whoever runs it (a cron job, a pipeline), so this is the client's
    failure, never inconclusive: the evidence (evlab's own kill) is complete."""
    when = (f"at its {exited.timeout_s:g} s timeout" if exited.timeout_s is not None
            else "at its timeout")
    what = "claimed 'completed' but never exited" if completed else (
        "never exited, so it never gave an outcome")
    return f"invocation {n} {what}: killed by evlab {when}"
