"""Lifecycle gates of a grading attempt: is the end state right now, after an unchanged re-run,
after the endpoint is killed and restarted, when fetched back (the task's lifecycle checks) —
and did the client clean up and stay within its limits?

Each gate is judged from evidence events like a clause (sessions/judging/judge.py); a gate whose
evidence is missing is inconclusive, never pass.
"""

from collections.abc import Callable

from sessions.judging.judgement import (
    ENVIRONMENT,
    FAIL,
    NA,
    PASS,
    Judgement,
    failed,
    is_temp,
    unknown,
)
from sessions.spec.contract import Contract, ContractError, Thresholds
from sessions.stream.events import SessionStarted, Verdict
from sessions.stream.evidence import ScenarioEvidence


def immediate(ev: ScenarioEvidence, t: Thresholds, clauses: dict[str, Verdict]) -> Judgement:
    first = ev.invocations.get(1)
    v = first.verifier if first else None
    if v is None:
        return unknown("no verifier result after invocation 1", failure_class="harness")
    if v.match:
        return Judgement(PASS, f"right after invocation 1 {v.described}", (v.seq,))
    return failed(f"right after invocation 1 {v.described}", (v.seq,))


def rerun(ev: ScenarioEvidence, t: Thresholds, clauses: dict[str, Verdict]) -> Judgement:
    """The unchanged-no-transfer clause's verdict, and the end state still right after it."""
    unchanged = clauses.get("unchanged-no-transfer")
    if unchanged is None:
        return unknown("the task's contract has no clause judged by unchanged-no-transfer",
                       failure_class=ENVIRONMENT)
    if unchanged.status != PASS:
        return Judgement(unchanged.status, unchanged.reason, unchanged.evidence,
                         unchanged.failure_class)
    second = ev.invocations.get(2)
    if second is None or second.verifier is None:
        return unknown("no verifier result after the re-run", unchanged.evidence, "harness")
    if not second.verifier.match:
        return failed(f"after the unchanged re-run {second.verifier.described}",
                      (*unchanged.evidence, second.verifier.seq))
    return Judgement(PASS, unchanged.reason + "; the end state still holds",
                     (*unchanged.evidence, second.verifier.seq))


def _lifecycle_gate(name: str):
    def gate(ev: ScenarioEvidence, t: Thresholds, clauses: dict[str, Verdict]) -> Judgement:
        check = ev.lifecycle.get(name)
        if check is None or "harness_error" in check.fields:
            return unknown(check.detail if check else f"no {name} check was run",
                           (check.seq,) if check else (), "harness")
        last = ev.invocations.get(max(ev.invocations, default=0))
        if last is None or last.verifier is None:
            return unknown("no verifier result before the check", (check.seq,), "harness")
        if not last.verifier.match:
            return Judgement(NA, f"the end state did not hold after the invocations: nothing "
                                 f"to {'survive' if name == 'durability' else 'restore'}",
                             (check.seq,))
        return Judgement(PASS if check.ok else FAIL, check.detail, (check.seq,),
                         None if check.ok else "client")
    gate.__name__ = name
    return gate


# The gates that read a check of the task's lifecycle program by their name
LIFECYCLE_GATES = ("durability", "restore")


def cleanup(ev: ScenarioEvidence, t: Thresholds, clauses: dict[str, Verdict]) -> Judgement:
    problems, notes, evidence = [], [], []
    for n in sorted(ev.invocations):
        c = ev.invocations[n].cleanup
        if c is None:
            return unknown(f"invocation {n}: nothing observed after it exited",
                           failure_class="harness")
        evidence.append(c.seq)
        if not c.kernel_view:
            return unknown(f"invocation {n}: no kernel view of its process tree (only its "
                           "session was scanned; a child that left it would be invisible)",
                           evidence, ENVIRONMENT)
        temp = [f for f in c.cwd_files if is_temp(f)]
        # Killed at its timeout, its whole tree was killed by evlab (honest-outcome fails it):
        # what ran when it ended is evlab's kill, not what the client left behind.
        exited, killed = ev.invocations[n].exited, False
        if exited is not None and exited.timed_out:
            killed = True
            evidence.append(exited.seq)
            notes.append(f"invocation {n}'s tree was killed by evlab at its timeout")
        at_exit = () if killed else c.left_at_exit
        for what, items in (("process(es) still running", c.leftover),
                            ("process(es) running when it ended", at_exit),
                            ("listening socket(s)", c.listening),
                            ("temporary file(s) in its working directory", temp),
                            ("file(s) in the servers' state", c.store_files)):
            if items:
                problems.append(f"invocation {n} left {len(items)} {what}: "
                                f"{', '.join(items[:3])}")
        final = ev.invocations[n].final
        tasks = final.counters.get("leftover_tasks", 0) if final else 0
        if tasks and not c.left_at_exit and not killed:   # the kernel's, if exit events were lost
            problems.append(f"invocation {n} left {tasks} task(s) of its tree running when it "
                            "ended (kernel count)")
        kept = [f for f in c.cwd_files if f not in temp]
        if kept:
            notes.append(f"invocation {n} kept {', '.join(kept[:3])} in its working directory")
    if problems:
        return failed("; ".join(problems), evidence)
    return Judgement(PASS, f"no process, listening socket, temporary file or {t.names.state} "
                           "residue left after any invocation" + ("; " + "; ".join(notes)
                                                                  if notes else ""),
                     tuple(evidence))


LIMIT_NAMES = {"memory": "the memory limit (OOM kills)", "pids": "the task limit (forks refused)",
               "disk": "the working directory's size (its tmpfs filled up)"}


def limits(ev: ScenarioEvidence, t: Thresholds, clauses: dict[str, Verdict]) -> Judgement:
    """Did the client stay within its sandbox's limits? Hitting one is the client's failure,
    whatever it did to the evidence on the way (never an invalid attempt)."""
    hits, evidence = [], []
    for n in sorted(ev.invocations):
        b = ev.invocations[n].boundary
        if b is None:
            return Judgement(NA, "no cgroup: no limits were enforced")
        evidence.append(b.seq)
        hits += [f"invocation {n} hit {LIMIT_NAMES.get(name, name)}: {count}x"
                 for name, count in sorted(b.limit_hits.items()) if count]
    if hits:
        return failed("; ".join(hits), evidence)
    return Judgement(PASS, "within the memory, task and disk limits in every invocation",
                     tuple(evidence))


# Each gate gets the attempt's clause verdicts by the predicate that judged them (a task's
# contract may give a clause another id).
GATES: dict[str, Callable[[ScenarioEvidence, Thresholds, dict[str, Verdict]], Judgement]] = {
    "immediate": immediate,
    "re-run": rerun,
    **{name: _lifecycle_gate(name) for name in LIFECYCLE_GATES},
    "cleanup": cleanup,
    "limits": limits,
}


def recorded_gates(session: SessionStarted | None) -> tuple[str, ...]:
    """The gates a session's record says its grading attempts are judged by (an old record,
    from before contracts named them: every one)."""
    return session.gates if session is not None and session.gates is not None else tuple(GATES)


def lifecycle_gates_of(contract: Contract) -> list[str]:
    """The gates of the task that read its lifecycle program's checks (each by its name)."""
    return [g for g in gates_of(contract) if g in LIFECYCLE_GATES]


def gates_of(contract: Contract) -> dict[str, Callable[[ScenarioEvidence, Thresholds,
                                                         dict[str, Verdict]], Judgement]]:
    """The gates a task's contract names for its grading attempts, in GATES' order (every one
    when it names none: an archive's from before contracts named them)."""
    names = contract.gates if contract.gates is not None else tuple(GATES)
    unknown = [g for g in names if g not in GATES]
    if unknown:
        raise ContractError(f"{contract.source}: gates: no gate {unknown[0]!r} "
                            f"({', '.join(GATES)})")
    return {g: fn for g, fn in GATES.items() if g in names}
