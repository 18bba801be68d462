"""What a run or grade request (sessions/spec/request.py) will run, worked out once: the
headless session and the dashboard's lab are built from the same plan."""

from collections.abc import Sequence
from dataclasses import dataclass

from probes.boundary.limits import SandboxLimits
from sessions.lab.cpus import default_jobs
from sessions.lab.session import Options
from sessions.spec.client_spec import ClientSpec, from_command, from_file
from sessions.spec.request import LIMITS, GradeRequest, Lab, RunRequest
from sessions.spec.scenario import Scenario, load_all, load_suite, select
from sessions.spec.task import load_task, task_ref
from sessions.stream.events import GradeStarted


def chosen_scenarios(names: Sequence[str], everything: bool, suite: str | None = None,
                     task: str = ""):
    chosen = load_task(task or None)
    if suite:
        return load_suite(suite, chosen)
    if everything or not names:
        return load_suite("seeded", chosen)
    return select(list(names), load_all(chosen), chosen)


def grade_spec(request: GradeRequest) -> ClientSpec:
    env, task = dict(request.env), _task_ref(request.task)
    if request.spec is not None:
        overrides = {"attempts": request.attempts, "timeout_s": request.timeout, "task": task,
                     "scenarios": request.scenarios or None}
        return from_file(request.spec, extra_env=env,
                         **{k: v for k, v in overrides.items() if v is not None})
    assert request.client is not None   # exactly one of the two (grade_request)
    return from_command(request.client, env=env, timeout_s=request.timeout,
                        attempts=request.attempts if request.attempts is not None else 3,
                        scenarios=request.scenarios, task=task or "")


def _task_ref(given: str | None) -> str | None:
    return task_ref(given) if given is not None else None


def grade_started(spec: ClientSpec, attempts) -> GradeStarted:
    return spec.started(tuple(dict.fromkeys(a.base for a in attempts)))


def options_of(lab: Lab, grading: bool = False, from_file: dict | None = None,
               task: str = "") -> Options:
    """The runner's options from a request's lab (a grade file's [sandbox] table fills what
    the request leaves out), on the task (a task_ref). A graded client is untrusted: grade
    refuses to run it unconfined unless the request says so (--no-sandbox)."""
    from_file, d = from_file or {}, SandboxLimits()
    limits = {}
    for key, _flag, _unit, field, scale in LIMITS:
        given = getattr(lab.limits, key)
        if given is None:
            given = from_file.get(key)
        limits[field] = given * scale if given is not None else getattr(d, field)
    sandbox = "off" if not lab.sandbox else "required" if grading else "auto"
    return Options(lab.collector, lab.packets, noise=lab.noise, sandbox=sandbox,
                   deny_egress=lab.deny_egress or from_file.get("deny_egress", False),
                   limits=SandboxLimits(**limits), task=task)


@dataclass(frozen=True)
class Plan:
    scenarios: list[Scenario]
    options: Options
    grade: GradeStarted | None = None   # `evlab grade`: who is graded
    spec: ClientSpec | None = None      # ...and the client, which each lab of --jobs resolves
    jobs: int = 1


def plan_of(request: RunRequest | GradeRequest) -> Plan:
    if isinstance(request, GradeRequest):
        spec = grade_spec(request)
        attempts = spec.attempt_scenarios(load_suite("grade", spec.task_of()))
        return Plan(attempts, options_of(request.lab, True, spec.sandbox, spec.task),
                    grade_started(spec, attempts), spec, _jobs(request.jobs))
    task = _task_ref(request.task) or ""
    return Plan(chosen_scenarios(request.scenarios, request.everything, request.suite, task),
                options_of(request.lab, task=task), jobs=_jobs(request.jobs))


def _jobs(given: int | None) -> int:
    return given if given is not None else default_jobs()
