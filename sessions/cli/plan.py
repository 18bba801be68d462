"""What `evlab run`, `evlab grade` or bare `evlab` will run, read from its arguments once: the
headless session and the dashboard's lab are built from the same plan."""

from dataclasses import dataclass

from probes.boundary.limits import SandboxLimits
from sessions.cli.parser import LIMIT_FLAGS, TOML_KEYS, UsageError
from sessions.lab.cpus import default_jobs
from sessions.lab.session import Options
from sessions.spec.client_spec import ClientSpec, from_command, from_file, parse_env
from sessions.spec.scenario import Scenario, load_all, load_suite, select
from sessions.spec.suites import NOISE_KINDS
from sessions.spec.task import load_task, task_ref
from sessions.stream.events import GradeStarted


def chosen_scenarios(names: list[str], everything: bool, suite: str | None = None,
                     task: str = ""):
    if sum(map(bool, (names, everything, suite))) > 1:
        raise UsageError("give scenario names, --all or --suite, not several")
    chosen = load_task(task or None)
    if suite:
        return load_suite(suite, chosen)
    if everything or not names:
        return load_suite("seeded", chosen)
    return select(names, load_all(chosen), chosen)


def grade_spec(args) -> ClientSpec:
    if (args.spec is None) == (args.client is None):
        raise UsageError("grade: give --client 'COMMAND {host} {port} {source}' or a grade "
                         ".toml file (exactly one)")
    env = parse_env(args.env)
    task = _task_ref(args.task)
    if args.spec is not None:
        overrides = {"attempts": args.attempts, "timeout_s": args.timeout, "task": task,
                     "scenarios": tuple(args.scenario) if args.scenario else None}
        return from_file(args.spec, extra_env=env,
                         **{k: v for k, v in overrides.items() if v is not None})
    return from_command(args.client, env=env, timeout_s=args.timeout,
                        attempts=args.attempts if args.attempts is not None else 3,
                        scenarios=tuple(args.scenario or ()), task=task or "")



def _task_ref(given: str | None) -> str | None:
    return task_ref(given) if given is not None else None


def grade_started(spec: ClientSpec, attempts) -> GradeStarted:
    return spec.started(tuple(dict.fromkeys(a.base for a in attempts)))


def noise_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k for k in text.split(",") if k)
    unknown = set(kinds) - set(NOISE_KINDS)
    if unknown:
        raise UsageError(f"--noise: unknown kind(s) {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(NOISE_KINDS)}")
    return kinds


def options_of(args, grading: bool = False, from_file: dict | None = None,
               task: str = "") -> Options:
    """The runner's options from run's or grade's flags (a grade file's [sandbox] table fills
    what the flags leave out), on the task (a task_ref). A graded client is untrusted: grade
    refuses to run it unconfined unless --no-sandbox says so."""
    from_file, d = from_file or {}, SandboxLimits()
    limits = {}
    for _flag, field, _unit, scale in LIMIT_FLAGS:
        given = getattr(args, f"limit_{field}")
        if given is None:
            given = from_file.get(TOML_KEYS[field])
        limits[field] = given * scale if given is not None else getattr(d, field)
    sandbox = "off" if args.no_sandbox else "required" if grading else "auto"
    return Options(args.collector, args.packets, noise=noise_kinds(args.noise),
                   sandbox=sandbox, deny_egress=args.deny_egress or from_file.get(
                       "deny_egress", False), limits=SandboxLimits(**limits), task=task)


@dataclass(frozen=True)
class Plan:
    scenarios: list[Scenario]
    options: Options
    grade: GradeStarted | None = None   # `evlab grade`: who is graded
    spec: ClientSpec | None = None      # ...and the client, which each lab of --jobs resolves
    jobs: int = 1


def plan_of(args) -> Plan:
    if args.command == "grade":
        spec = grade_spec(args)
        attempts = spec.attempt_scenarios(load_suite("grade", spec.task_of()))
        return Plan(attempts, options_of(args, True, spec.sandbox, spec.task),
                    grade_started(spec, attempts), spec, _jobs(args))
    if args.command == "run":
        task = _task_ref(args.task) or ""
        return Plan(chosen_scenarios(args.scenarios, args.all, args.suite, task),
                    options_of(args, task=task), jobs=_jobs(args))
    return Plan(chosen_scenarios([], True), Options())   # bare `evlab`: the dashboard's suite


def _jobs(args) -> int:
    return args.jobs if args.jobs is not None else default_jobs()
