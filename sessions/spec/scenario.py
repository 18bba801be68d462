"""Scenarios are data: one TOML file each (a task's suites, fixture/<task>/scenarios/, or any
file you name), read against a task: its clauses, its placeholders, its default arguments.

A malformed file is a ScenarioError naming the file, the key and what was expected.
"""

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sessions.spec.digest import sha256_of
from sessions.spec.scenario_faults import FaultSpecError, parse_faults
from sessions.spec.suites import NOISE_KINDS
from sessions.spec.task import Task, TaskError, load_task
from sessions.spec.task_load import RATE_MAX
from sessions.spec.template import expand, placeholders_of

_SHELL_SYNTAX = re.compile(r"[;&|`$<>(){}*?!\n\\\"']")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class ScenarioError(ValueError):
    def __init__(self, file: Path | str, key: str, expected: str):
        super().__init__(f"{file}: {key}: expected {expected}")


@dataclass(frozen=True)
class Scenario:
    id: str
    description: str
    client: Path
    args: tuple[str, ...]
    timeout_s: float
    faults: tuple[dict, ...] = ()
    noise: tuple[str, ...] = ()
    expect_fail: tuple[str, ...] = ()
    expect_pass: tuple[str, ...] = ()
    expect_invalid: bool = False    # e.g. a fault that cannot fire: the attempt must be invalid
    state: str = ""                 # the servers' state at the start: "" fresh, or the task's
    deny_egress: bool = False       # refuse every destination but the endpoint (EPERM)
    between: str = ""               # the task's step run before each invocation after the first
    before_first: str = ""          # the task's step run once before the first, servers up
    load_rates: tuple[tuple[str, float], ...] = ()   # [environment] load_rates: a load's rate
    values: tuple[tuple[str, str], ...] = ()   # [environment] values: {scenario.NAME}
    order: int = 100
    file: Path | None = None
    # Grading (`evlab grade`): attempt k of grade scenario `base`, run from fresh state with the
    # lifecycle checks, in an isolated working directory with exactly this environment.
    attempt: int = 0
    base: str = ""
    env: tuple[tuple[str, str], ...] | None = None   # None: inherit evlab's environment
    own_files: tuple[str, ...] = ()                  # files of the command (a script)
    client_name: str = ""                            # a campaign's client

    @property
    def lifecycle(self) -> bool:
        return self.attempt > 0

    def client_sha256(self) -> str:
        digest = sha256_of(self.client)
        if digest is None:
            raise FileNotFoundError(f"{self.client}: no such file")
        return digest

    @property
    def words(self) -> dict[str, str]:
        """Its values as the task's templates name them: `scenario.NAME`."""
        return {f"scenario.{name}": value for name, value in self.values}

    def argv(self, values: dict[str, str]) -> list[str]:
        """The command line with the task's placeholders filled (values: name -> its text)."""
        return [str(self.client), *(expand(a, values) for a in self.args)]


_SCHEMA = {
    "": {"id", "description", "order", "client", "environment", "faults", "noise", "expect"},
    "client": {"behaviour", "path", "args", "timeout_s"},
    # store: the old name of state
    "environment": {"source", "state", "store", "deny_egress", "between", "before_first",
                    "values", "load_rates"},
    "noise": {"kinds"},
    "expect": {"fail", "pass", "invalid"},
}


def _check_keys(file, table: dict, where: str) -> None:
    allowed = _SCHEMA[where]
    for key in table:
        if key not in allowed:
            full = f"{where}.{key}" if where else key
            raise ScenarioError(file, full, f"one of {', '.join(sorted(allowed)) or 'no keys'}")


def _typed(file, table: dict, key: str, where: str, kind, expected: str, default=None):
    value = table.get(key, default)
    if value is None:
        return None
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise ScenarioError(file, f"{where}.{key}" if where else key, expected)
    return value


def _clauses(file, expect: dict, key: str, clause_ids: tuple[str, ...]) -> tuple[str, ...]:
    value = expect.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScenarioError(file, f"expect.{key}", "a list of clause ids")
    for clause in value:
        if clause not in clause_ids:
            raise ScenarioError(file, f"expect.{key}", f"clause ids ({', '.join(clause_ids)}), "
                                f"got {clause!r}")
    return tuple(value)


def _client(file, client: dict, task: Task) -> Path:
    behaviour = _typed(file, client, "behaviour", "client", str, "a fixture behaviour name")
    path = _typed(file, client, "path", "client", str, "a path to an executable")
    if (behaviour is None) == (path is None):
        raise ScenarioError(file, "client", "exactly one of behaviour or path")
    if behaviour is not None:
        if not _ID.match(behaviour):
            raise ScenarioError(file, "client.behaviour", "a name like 'baseline'")
        if not task.reference:
            raise ScenarioError(file, "client.behaviour", "a client.path: the task has no "
                                "reference client (task.toml [client] reference)")
        return (task.folder / expand(task.reference, {"behaviour": behaviour})).resolve()
    if _SHELL_SYNTAX.search(path):
        raise ScenarioError(file, "client.path",
                            f"a file path, got shell syntax in {path!r} (no shell is used)")
    resolved = Path(path) if Path(path).is_absolute() else Path(file).parent / path
    return resolved.resolve()


def _state(file, environment: dict, task: Task) -> str:
    """environment.state: one of the task's [states], or "fresh" (the default). `store` is its
    name from before tasks were folders ("empty": fresh)."""
    key = "state" if "state" in environment or "store" not in environment else "store"
    state = environment.get(key, "fresh")
    state = "fresh" if state == "empty" and key == "store" else state
    if state != "fresh" and state not in task.states:
        raise ScenarioError(file, f"environment.{key}", " or ".join(
            f'"{s}"' for s in ("fresh", *task.states)))
    return "" if state == "fresh" else state


def _step(file, environment: dict, task: Task, key: str) -> str:
    """environment.between: one of the task's [steps], run before each invocation after the
    first; environment.before_first: one run once before the first ("": none)."""
    step = environment.get(key, "")
    if step != "" and step not in task.steps:
        raise ScenarioError(file, f"environment.{key}", " or ".join(
            f'"{s}"' for s in task.steps) or "nothing: the task has no [steps]")
    return str(step)


def _load_rates(file, environment: dict, task: Task) -> tuple[tuple[str, float], ...]:
    """environment.load_rates: requests per second for some of the task's loads, by name, in
    place of task.toml's rate (a fault suite's heavier traffic)."""
    rates = environment.get("load_rates", {})
    names = [spec.name for spec in task.loads]
    if not isinstance(rates, dict) or not set(rates) <= set(names) or not all(
            isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= RATE_MAX
            for r in rates.values()):
        raise ScenarioError(file, "environment.load_rates", (
            f"a table of requests per second in (0, {RATE_MAX}] by load name "
            f"({', '.join(names)})") if names else "nothing: the task has no [load]")
    return tuple(sorted((name, float(rate)) for name, rate in rates.items()))


def _values(file, environment: dict, task: Task) -> tuple[tuple[str, str], ...]:
    """environment.values: a text for each `{scenario.NAME}` the task's placeholders and
    programs use (reload's version to serve), and only those."""
    values = environment.get("values", {})
    wanted = task.scenario_words
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()) \
            or set(values) != wanted:
        raise ScenarioError(file, "environment.values", "a table of texts, one for each of "
                            f"{', '.join(sorted(wanted)) or 'nothing: the task names none'}")
    return tuple(sorted(values.items()))


def _environment(file, environment: dict, task: Task) -> dict:
    """What the scenario changes of the task's environment ([environment]), as its fields."""
    return {"state": _state(file, environment, task),
            "deny_egress": _typed(file, environment, "deny_egress", "environment", bool,
                                  "true or false", False),
            "between": _step(file, environment, task, "between"),
            "before_first": _step(file, environment, task, "before_first"),
            "values": _values(file, environment, task),
            "load_rates": _load_rates(file, environment, task)}


def parse(text: str, file: Path | str, task: Task | None = None) -> Scenario:
    task = task or load_task()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(file, "(syntax)", f"valid TOML ({e})") from None
    except RecursionError:
        raise ScenarioError(file, "(syntax)", "TOML nested less deeply") from None
    _check_keys(file, data, "")
    for table in ("client", "environment", "noise", "expect"):
        if not isinstance(data.get(table, {}), dict):
            raise ScenarioError(file, table, "a table")
        _check_keys(file, data.get(table, {}), table)
    stem = Path(file).stem
    scenario_id = _typed(file, data, "id", "", str, "a string id", default=stem)
    if not _ID.match(scenario_id):
        raise ScenarioError(file, "id", "lowercase letters, digits and dashes")
    client = data.get("client")
    if client is None:
        raise ScenarioError(file, "client", "a [client] table")
    args = _typed(file, client, "args", "client", list, "a list of strings", list(task.args))
    for arg in args:
        if not isinstance(arg, str):
            raise ScenarioError(file, "client.args", "a list of strings")
        if placeholders_of(arg, task.placeholders) is None:
            raise ScenarioError(file, "client.args", f"placeholders from "
                                f"{sorted(task.placeholders)}, got {arg!r}")
    timeout = _typed(file, client, "timeout_s", "client", (int, float), "a number of seconds",
                     20)
    if not 0 < timeout <= 600:
        raise ScenarioError(file, "client.timeout_s", "a number of seconds in (0, 600]")
    source = data.get("environment", {}).get("source", "builtin")
    if source != "builtin":
        raise ScenarioError(file, "environment.source", "\"builtin\" (the deterministic source)")
    try:
        faults = parse_faults(data.get("faults", []), scenario_id)
    except FaultSpecError as e:
        raise ScenarioError(file, e.key, e.expected) from None
    noise = data.get("noise", {}).get("kinds", [])
    if not isinstance(noise, list) or not set(noise) <= set(NOISE_KINDS):
        raise ScenarioError(file, "noise.kinds", f"a list from {', '.join(NOISE_KINDS)}")
    expect = data.get("expect", {})
    expect_fail = _clauses(file, expect, "fail", task.clause_ids)
    expect_pass = _clauses(file, expect, "pass", task.clause_ids)
    if set(expect_fail) & set(expect_pass):
        raise ScenarioError(file, "expect", "a clause in fail or pass, not both")
    expect_invalid = _typed(file, expect, "invalid", "expect", bool, "true or false", False)
    return Scenario(
        id=scenario_id,
        description=_typed(file, data, "description", "", str, "a string", "") or "",
        client=_client(file, client, task), args=tuple(args), timeout_s=float(timeout),
        faults=faults, noise=tuple(noise), expect_fail=expect_fail,
        expect_invalid=expect_invalid,
        expect_pass=expect_pass, order=_typed(file, data, "order", "", int, "an integer", 100),
        file=Path(file), **_environment(file, data.get("environment", {}), task))


def load(path: Path, task: Task | None = None) -> Scenario:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(path, "(file)", f"a readable UTF-8 TOML file ({e})") from None
    return parse(text, path, task)


def suite_dir(name: str, task: Task | None = None) -> Path:
    """A built-in suite's folder in the task (seeded, faults, grade)."""
    task = task or load_task()
    if name not in task.suites:
        raise TaskError(f"task {task.id} has no {name} suite (it has "
                        f"{', '.join(task.suites)})")
    return task.suites[name]


def load_suite(name: str, task: Task | None = None) -> list[Scenario]:
    return load_dir(suite_dir(name, task), task)


def load_dir(directory: Path | None = None, task: Task | None = None) -> list[Scenario]:
    """The scenarios of a folder (by default the task's seeded suite), read against the task."""
    task = task or load_task()
    directory = directory if directory is not None else suite_dir("seeded", task)
    scenarios = [load(p, task) for p in sorted(Path(directory).glob("*.toml"))]
    seen: dict[str, Path | None] = {}
    for s in scenarios:
        if s.id in seen:
            raise ScenarioError(s.file or Path(directory), "id",
                                f"a unique id ({s.id!r} is also in {seen[s.id]})")
        seen[s.id] = s.file
    return sorted(scenarios, key=lambda s: (s.order, s.id))


def load_all(task: Task | None = None) -> list[Scenario]:
    """Every built-in scenario of the task: its seeded suite, then its fault suite."""
    task = task or load_task()
    return [s for name in ("seeded", "faults") if name in task.suites
            for s in load_suite(name, task)]


def select(names: list[str], available: list[Scenario], task: Task | None = None) -> list[Scenario]:
    """Scenarios by id, or by file path for a scenario outside the built-in folder."""
    by_id = {s.id: s for s in available}
    chosen: dict[str, Scenario] = {}
    for name in names:
        if name in by_id:
            scenario = by_id[name]
        elif name.endswith(".toml"):
            scenario = load(Path(name), task)
        else:
            raise ScenarioError(name, "(scenario)",
                                f"a scenario id ({', '.join(by_id)}) or a .toml file")
        other = chosen.get(scenario.id)
        if other is not None and other.file != scenario.file:
            # one id, two files: the second would silently replace the first's evidence
            raise ScenarioError(scenario.file or name, "id",
                                f"an id not already used by {other.file} ({scenario.id!r})")
        chosen[scenario.id] = scenario
    return list(chosen.values())
