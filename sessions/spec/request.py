"""What evlab is asked to run, as one frozen value: a run of scenarios, a grade of a client, a
campaign or a replay; on which task; with which observers, boundary and outputs.

The command line builds it from its flags (sessions/cli/parser.py `request_of`) and
`evlab.grade/run/campaign` from their keyword arguments (sessions/cli/api.py), both through
the builders here: a value is refused by the same check in the same line either way, worded as
argparse words the command line's (`grade: argument --attempts: invalid int value: 'x'`).
The dashboard, the headless commands and campaigns take the request; sessions/lab/plan.py
turns one into the scenarios and options a session runs.
"""

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from probes.collectors.kinds import KINDS
from sessions.spec.client_spec import parse_env
from sessions.spec.suites import NOISE_KINDS
from sessions.spec.task import SUITE_NAMES

T = TypeVar("T")
PACKETS = ("on", "off", "required")
# the client's cgroup limits: keyword (a grade file's [sandbox] key), flag, unit,
# SandboxLimits field, scale from the flag's unit
LIMITS = (("memory_mib", "--memory", "MiB", "memory_bytes", 1 << 20),
          ("pids", "--pids", "tasks", "pids", 1),
          ("cpu_seconds", "--cpu-seconds", "s", "cpu_s", 1),
          ("open_files", "--open-files", "files", "open_files", 1),
          ("disk_mib", "--disk", "MiB", "disk_bytes", 1 << 20))
LAB_KEYS = ("collector", "packets", "noise", "sandbox", "deny_egress",
            *(key for key, *_ in LIMITS))
FILE_KEYS = ("json", "report", "html", "archive", "reward", "ctrf")
# the keyword options of each command besides its own arguments (`run` writes no --report)
OPTIONS = {"run": frozenset({"jobs", *LAB_KEYS, *FILE_KEYS} - {"report"}),
           "grade": frozenset({"jobs", *LAB_KEYS, *FILE_KEYS}),
           "campaign": frozenset({"jobs", *LAB_KEYS, *FILE_KEYS})}


class UsageError(Exception):
    """A user's mistake: printed as one line, exit status 2."""


class Refused(ValueError):
    """A value its check refuses, in the words that follow `argument --FLAG: `."""


def bounded_float(low: float, high: float, what: str) -> Callable[[str], float]:
    """A number in [low, high] (so a replay cannot take 10^300 times as long as the recording,
    nor a timeout outlast the machine)."""
    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not low <= value <= high:   # also rejects nan and ±inf
            raise Refused(f"expected {what} from {low:g} to {high:g}, got {text!r}")
        return value
    return check


SPEED = bounded_float(0.01, 1000, "a speed")
SECONDS = bounded_float(0.1, 600, "seconds")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise Refused(f"expected a whole number, got {text!r}") from None
    if not 0 < value <= 1 << 40:
        raise Refused(f"expected a positive number, got {text!r}")
    return value


def one_of(choices: Sequence[str]) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text not in choices:
            raise Refused(f"invalid choice: {text!r} (choose from "
                          f"{', '.join(map(repr, choices))})")
        return text
    return check


def noise_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k for k in text.split(",") if k)
    unknown = set(kinds) - set(NOISE_KINDS)
    if unknown:
        raise UsageError(f"--noise: unknown kind(s) {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(NOISE_KINDS)}")
    return kinds


@dataclass(frozen=True)
class Limits:
    """The client's cgroup limits as given, in the flags' units (None: the grade or campaign
    file's [sandbox] value, else the default)."""
    memory_mib: int | None = None
    pids: int | None = None
    cpu_seconds: int | None = None
    open_files: int | None = None
    disk_mib: int | None = None


@dataclass(frozen=True)
class Lab:
    """How the lab observes the client and confines it."""
    collector: str = "auto"         # probes/collectors/kinds.py
    packets: str = "on"             # on, off, required
    noise: tuple[str, ...] = ()     # ambient noise kinds (none: a campaign file's, if any)
    sandbox: bool = True            # False: unconfined (--no-sandbox)
    deny_egress: bool = False       # refuse every destination but the endpoint
    limits: Limits = Limits()


@dataclass(frozen=True)
class Files:
    """What the session writes when it ends (None: not asked for)."""
    json: Path | None = None
    report: Path | None = None      # Markdown (not `run`'s)
    html: Path | None = None
    archive: Path | None = None
    reward: Path | None = None      # Harbor's reward.json
    ctrf: Path | None = None


@dataclass(frozen=True)
class RunRequest:
    """`evlab run`: scenarios judged (and bare `evlab`: RunRequest(), the seeded suite)."""
    scenarios: tuple[str, ...] = ()     # ids or scenario files; none: the seeded suite
    everything: bool = False            # --all: the seeded suite
    suite: str | None = None
    task: str | None = None             # a built-in task's id or a folder; None: the default
    lab: Lab = Lab()
    files: Files = Files()
    jobs: int | None = None             # labs at once; None: the machine's default


@dataclass(frozen=True)
class GradeRequest:
    """`evlab grade`: a client (its command line, or a grade file) through its grade suite."""
    client: str | None = None           # a command line with the task's placeholders
    spec: Path | None = None            # ...or a grade file (exactly one of the two)
    task: str | None = None
    attempts: int | None = None         # per scenario; None: the file's, else 3
    scenarios: tuple[str, ...] = ()     # grade scenario ids; none: all
    env: tuple[tuple[str, str], ...] = ()
    timeout: float | None = None        # seconds per invocation
    lab: Lab = Lab()
    files: Files = Files()
    jobs: int | None = None


@dataclass(frozen=True)
class CampaignRequest:
    """`evlab campaign FILE`: several clients graded and ranked."""
    file: Path
    task: str | None = None
    dir: Path | None = None             # None: ./evlab-campaign-NAME
    resume: bool = False
    ray: str | None = None              # auto or an address: on a Ray cluster
    lab: Lab = Lab()
    files: Files = Files()
    jobs: int | None = None             # attempts at once on each node


@dataclass(frozen=True)
class ReplayRequest:
    """`evlab replay ARCHIVE`: a saved session judged again."""
    archive: Path
    speed: float | None = None          # 1.0 as recorded; None: as fast as possible
    task: str | None = None             # a folder whose own predicates re-judge its clauses


Request = RunRequest | GradeRequest | CampaignRequest | ReplayRequest


class _Given:
    """The values given to one command, each checked as its flag is: a mistake is the line
    argparse would print for it (`COMMAND: argument --FLAG: ...`)."""

    def __init__(self, command: str):
        self.command = command

    def refuse(self, flag: str, words: str) -> UsageError:
        return UsageError(f"{self.command}: argument {flag}: {words}")

    def value(self, flag: str, check: Callable[[str], T], value: Any) -> T | None:
        if value is None:
            return None
        text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        try:
            return check(text)
        except Refused as e:
            raise self.refuse(flag, str(e)) from None
        except (TypeError, ValueError):
            name = getattr(check, "__name__", repr(check))
            raise self.refuse(flag, f"invalid {name} value: {text!r}") from None

    def words(self, values: Iterable[Any], flag: str = "") -> tuple[str, ...]:
        if isinstance(values, (str, os.PathLike)):
            values = [values]   # one name, not its letters
        if not isinstance(values, Iterable):
            raise self.refuse(flag, f"expected a list of words, got {values!r}")
        return tuple(os.fspath(v) if isinstance(v, os.PathLike) else str(v) for v in values)

    def switch(self, flag: str, value: Any, default: bool = False) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.refuse(flag, f"expected True or False, got {value!r}")
        return value

    def task(self, value: Any) -> str | None:
        return None if value is None else self.words([value])[0]

    def lab(self, options: dict[str, Any]) -> Lab:
        noise = options.pop("noise", "")
        noise = noise if isinstance(noise, str) else ",".join(self.words(noise or (), "--noise"))
        limits = {key: self.value(flag, positive_int, options.pop(key, None))
                  for key, flag, *_ in LIMITS}
        return Lab(self.value("--collector", one_of(KINDS), options.pop("collector", None))
                   or "auto",
                   self.value("--packets", one_of(PACKETS), options.pop("packets", None)) or "on",
                   noise_kinds(noise),
                   self.switch("sandbox", options.pop("sandbox", None), default=True),
                   self.switch("--deny-egress", options.pop("deny_egress", None)),
                   Limits(**limits))

    def files(self, options: dict[str, Any]) -> Files:
        files = {key: self.value(f"--{key}", Path, options.pop(key, None)) for key in FILE_KEYS
                 if key in OPTIONS[self.command]}
        if options:   # the command line has no such flag; the library checks its names first
            raise TypeError(f"{self.command}: unknown option(s) {', '.join(sorted(options))}")
        return Files(**files)

    def jobs(self, value: Any) -> int | None:
        return self.value("--jobs", positive_int, value)


def run_request(scenarios: Iterable[str | os.PathLike[str]] = (), *, everything: bool = False,
                suite: str | None = None, task: Any = None, jobs: Any = None,
                **options: Any) -> RunRequest:
    """`evlab run`'s request; options: LAB_KEYS and FILE_KEYS but report."""
    given = _Given("run")
    names = given.words(scenarios, "SCENARIO")
    chosen = given.value("--suite", one_of(SUITE_NAMES), suite)
    everything = given.switch("--all", everything)
    if sum(map(bool, (names, everything, chosen))) > 1:
        raise UsageError("give scenario names, --all or --suite, not several")
    return RunRequest(names, everything, chosen, given.task(task), given.lab(options),
                      given.files(options), given.jobs(jobs))


def grade_request(client: str | None = None, *, spec: Any = None, task: Any = None,
                  attempts: Any = None, scenarios: Iterable[str] = (),
                  env: Iterable[str] = (), timeout: Any = None, jobs: Any = None,
                  **options: Any) -> GradeRequest:
    """`evlab grade`'s request; env: NAME=VALUE words; options: LAB_KEYS and FILE_KEYS."""
    given = _Given("grade")
    attempts, timeout = (given.value("--attempts", int, attempts),
                         given.value("--timeout", SECONDS, timeout))
    lab, files, jobs = given.lab(options), given.files(options), given.jobs(jobs)
    if (spec is None) == (client is None):
        raise UsageError("grade: give --client 'COMMAND {host} {port} {source}' or a grade "
                         ".toml file (exactly one)")
    return GradeRequest(client, given.value("GRADE.toml", Path, spec), given.task(task),
                        attempts, given.words(scenarios, "--scenario"),
                        tuple(parse_env(list(given.words(env, "--env"))).items()), timeout, lab,
                        files, jobs)


def campaign_request(file: Any, *, task: Any = None, dir: Any = None, resume: bool = False,
                     ray: str | None = None, jobs: Any = None,
                     **options: Any) -> CampaignRequest:
    """`evlab campaign`'s request; options: LAB_KEYS and FILE_KEYS."""
    given = _Given("campaign")
    return CampaignRequest(Path(given.words([file])[0]), given.task(task),
                           given.value("--dir", Path, dir), given.switch("--resume", resume),
                           given.value("--ray", str, ray), given.lab(options),
                           given.files(options), given.jobs(jobs))


def replay_request(archive: Any, *, speed: Any = None, task: Any = None) -> ReplayRequest:
    given = _Given("replay")
    return ReplayRequest(Path(given.words([archive])[0]), given.value("--speed", SPEED, speed),
                         given.task(task))
