"""The task's programs the lab runs, each to its end, and what they say as evidence: the
verifier after every invocation (VerifierResult) and a grading attempt's lifecycle check
(LifecycleCheck, one per check it prints). Each prints JSON objects, one per line
(docs/tasks.md). A program that fails says so in the harness's record: never a pass, never the
client's failure."""

import json
import time
from pathlib import Path

from sessions.judging.gates import lifecycle_gates_of
from sessions.lab.harness import ServerStartError, run_program
from sessions.lab.servers import LabServers, program_argv
from sessions.lab.spawner import Spawner
from sessions.spec.task import Program, Task
from sessions.stream.events import Event, LifecycleCheck, ServerRecord, VerifierResult

FIELDS_MAX = 4096   # bytes of a program's figures kept per result (its detail: one line)
DETAIL_MAX = 500


def verifier_result(task: Task, servers: LabServers, scenario: str, n: int, workdir: Path,
                    spawner: Spawner | None, netns: Path | None) -> Event:
    """The verifier's end state after invocation n (0: before the first); if it cannot say, a
    harness record of why (the clauses that read it are then inconclusive)."""
    program = task.verifier
    assert program is not None, "a task without a verifier has no result to ask for"
    try:
        found = _run(program, servers, workdir / "verifier", spawner, netns)
        v = found[-1] if found else {}
        if not isinstance(v.get("ok"), bool):
            raise ServerStartError("the verifier printed no JSON object with ok = true or false")
    except ServerStartError as e:
        return ServerRecord(time.monotonic_ns(), scenario, n, "harness", "verifier_failed",
                            {"error": str(e)})
    return VerifierResult(time.monotonic_ns(), scenario, n, v["ok"],
                          str(v.get("detail", ""))[:DETAIL_MAX], _figures(v, "ok", "detail"))


def lifecycle_checks(task: Task, servers: LabServers, scenario: str, workdir: Path,
                     spawner: Spawner | None, netns: Path | None) -> list[LifecycleCheck]:
    """The task's lifecycle check, once the endpoint was killed and started again."""
    program = task.lifecycle
    try:
        if program is None:
            raise ServerStartError("the task has no lifecycle check")
        found = [c for c in _run(program, servers, workdir / "lifecycle", spawner, netns)
                 if isinstance(c.get("check"), str)]
        if not found:
            raise ServerStartError("the lifecycle check printed no check")
    except ServerStartError as e:
        return blocked_checks(task, scenario, str(e))
    return [LifecycleCheck(time.monotonic_ns(), scenario, c["check"][:40], c.get("ok") is True,
                           str(c.get("detail", ""))[:DETAIL_MAX],
                           _figures(c, "check", "ok", "detail")) for c in found]


def blocked_checks(task: Task, scenario: str, why: str) -> list[LifecycleCheck]:
    """The harness could not check (a server would not restart, the program failed): not the
    client's doing, so the gates that read these are inconclusive."""
    return [LifecycleCheck(time.monotonic_ns(), scenario, check, False, f"harness: {why}",
                           {"harness_error": why})
            for check in lifecycle_gates_of(task.contract)]


def _run(program: Program, servers: LabServers, workdir: Path, spawner: Spawner | None,
         netns: Path | None) -> list[dict]:
    out = run_program(program.module, program.command,
                      program_argv(program, servers.program_values()), workdir, spawner, netns)
    found = []
    for line in out.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue   # a line of something else it printed
        if isinstance(value, dict):
            found.append(value)
    return found


def _figures(result: dict, *said: str) -> dict:
    figures = {k: v for k, v in result.items() if k not in said}
    if len(json.dumps(figures)) > FIELDS_MAX:
        return {"dropped": f"more than {FIELDS_MAX:,} bytes of figures"}
    return figures
