"""Who is graded: a user's client command, resolved to an identity and turned into attempts.

    spec = from_command("python3 my_client.py {host} {port} {source}")   # or from_file(toml)
    attempts = spec.attempt_scenarios(load_suite("grade", spec.task_of()))

The command is split like a shell would (shlex) but never run by one. Its placeholders are its
task's ([client.placeholders] in its task.toml), filled by evlab per
invocation. The executable is resolved (PATH for a bare name) and its sha256 recorded; the
files and folders its other words name (a script, a class-path folder; which words:
sessions/spec/named_paths.py) are made absolute — the client runs in its own empty directory —
and their sha256 recorded too; one evlab will not show a client is refused. The client gets
exactly the environment below plus what the user adds: HOME and TMPDIR point into its working
directory, so anything it leaves there is seen by the cleanup gate.

TOML form (relative paths are relative to the file):
    [client]
    command = ["python3", "my_client.py", "{host}", "{port}", "{source}"]   # or one string
    timeout_s = 20
    [client.env]
    LOG_LEVEL = "debug"
    [grade]
    task = "tasks/kv"              # a built-in task's id or a task folder (default: the default)
    attempts = 3
    scenarios = ["normal", "interrupted", "mismatch", "stale"]
    [sandbox]                      # optional; command-line flags win
    memory_mib = 512
    pids = 256
    cpu_seconds = 60
    open_files = 1024
    disk_mib = 256
    deny_egress = false
"""

import dataclasses
import os
import re
import shlex
import shutil
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sessions.spec.digest import sha256_of
from sessions.spec.named_paths import FOLDER, RefusedPath, folder_sha256, refusal, rewrite
from sessions.spec.scenario import Scenario, placeholders_of
from sessions.spec.task import Task, load_task, task_named_in
from sessions.stream.events import GradeStarted

# PATH: Debian's default for root, sbin included, so an operator's control commands (nginx,
# logrotate: /usr/sbin) are found by name as an operator's shell finds them
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8", "HOME": "{cwd}", "TMPDIR": "{cwd}"}
MAX_ATTEMPTS = 50
SANDBOX_KEYS = {"memory_mib": int, "pids": int, "cpu_seconds": int, "open_files": int,
                "disk_mib": int, "deny_egress": bool}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ClientSpecError(ValueError):
    """A client command or grade file evlab cannot use; the message is one line."""


@dataclass(frozen=True)
class ClientSpec:
    command: tuple[str, ...]        # as given, placeholders unfilled
    executable: Path                # the path exec'd (PATH resolved, symlinks kept)
    sha256: str                     # of the file behind it (symlinks followed)
    args: tuple[str, ...]           # everything after the executable, file paths absolute
    files: dict[str, str]           # absolute path -> sha256 of the files and folders (ending
                                    # in "/") it names (sessions/spec/named_paths.py)
    env: dict[str, str]
    timeout_s: float | None = None
    attempts: int = 3
    scenarios: tuple[str, ...] = ()
    sandbox: dict = dataclasses.field(default_factory=dict)   # the grade file's [sandbox]
    task: str = ""                  # its task: a built-in task's id or a folder ("": default)

    def task_of(self) -> Task:
        return load_task(self.task or None)

    def attempt_scenarios(self, templates: list[Scenario]) -> list[Scenario]:
        """Every template x attempt, each run from fresh state with this client."""
        return [self.attempt_of(t, k) for t in self._chosen(templates)
                for k in range(1, self.attempts + 1)]

    def attempt_of(self, t: Scenario, k: int, scenario_id: str = "",
                   client_name: str = "") -> Scenario:
        """Attempt k of grade scenario t with this client (id `normal@2` unless given)."""
        return dataclasses.replace(
            t, id=scenario_id or f"{t.id}@{k}", client=self.executable, args=self.args,
            attempt=k, base=t.id, env=tuple(sorted(self.env.items())),
            timeout_s=self.timeout_s or t.timeout_s, expect_fail=(), expect_pass=(),
            expect_invalid=False, own_files=tuple(self.files), client_name=client_name)

    def started(self, bases: tuple[str, ...], client: str = "",
                shipped: dict | None = None) -> GradeStarted:
        """The GradeStarted event: who is graded, on which scenarios."""
        return GradeStarted(time.monotonic_ns(), self.command, str(self.executable),
                            self.sha256, self.files, self.env, self.attempts, bases, client,
                            dict(shipped or {}))

    def _chosen(self, templates: list[Scenario]) -> list[Scenario]:
        if not self.scenarios:
            return templates
        by_id = {t.id: t for t in templates}
        wanted = list(dict.fromkeys(self.scenarios))   # a scenario named twice runs once
        unknown = [s for s in wanted if s not in by_id]
        if unknown:
            raise ClientSpecError(f"unknown grade scenario(s) {', '.join(unknown)}; choose from "
                                  f"{', '.join(by_id)}")
        return [by_id[s] for s in wanted]


def _resolve_executable(token: str, base: Path) -> Path:
    if "/" in token:
        path = Path(token) if Path(token).is_absolute() else base / token
    else:
        found = shutil.which(token, path=BASE_ENV["PATH"]) or shutil.which(token)
        if found is None:
            raise ClientSpecError(f"client executable {token!r} not found on PATH")
        path = Path(found)
    path = Path(os.path.abspath(path))
    if not path.is_file():
        raise ClientSpecError(f"client executable not found: {path}")
    if not os.access(path, os.X_OK):
        raise ClientSpecError(f"client executable is not executable: {path} (chmod +x?)")
    return path


def _check_placeholders(tokens: list[str], task: Task) -> None:
    used = set()
    for token in tokens:
        names = placeholders_of(token, task.placeholders)
        if names is None:
            raise ClientSpecError(f"client command: {token!r}: {task.id}'s placeholders are "
                                  f"{', '.join('{' + p + '}' for p in sorted(task.placeholders))}"
                                  " (a literal brace is written {{ or }})")
        used |= names
    missing = set(task.required) - used
    if missing:
        raise ClientSpecError(f"client command must contain "
                              f"{' and '.join('{' + r + '}' for r in task.required)} (missing "
                              + ", ".join("{" + m + "}" for m in sorted(missing)) + ")")


def build(tokens: list[str], base: Path, env: dict[str, str] | None = None,
          timeout_s: float | None = None, attempts: int = 3,
          scenarios: tuple[str, ...] = (), task: str = "") -> ClientSpec:
    if not tokens:
        raise ClientSpecError("client command is empty")
    if not isinstance(attempts, int) or isinstance(attempts, bool) \
            or not 1 <= attempts <= MAX_ATTEMPTS:
        raise ClientSpecError(f"attempts: expected a whole number from 1 to {MAX_ATTEMPTS}, "
                              f"got {attempts!r}")
    if timeout_s is not None and not 0 < timeout_s <= 600:
        raise ClientSpecError(f"timeout: expected seconds in (0, 600], got {timeout_s!r}")
    _check_placeholders(tokens, load_task(task or None))
    executable = _resolve_executable(tokens[0], base)
    _refuse(executable)
    files: dict[str, str] = {}

    def own(path: Path) -> str:
        _refuse(path)
        if path.is_dir():
            try:
                files[str(path) + FOLDER] = folder_sha256(path)
            except RefusedPath as e:
                raise ClientSpecError(f"client command: {e}") from None
        else:
            files[str(path)] = _digest(path)
        return str(path)

    args = [rewrite(token, base, own) for token in tokens[1:]]
    full_env = dict(BASE_ENV)
    for name, value in (env or {}).items():
        if not _ENV_NAME.match(name) or not isinstance(value, str):
            raise ClientSpecError(f"environment: {name!r}={value!r} is not NAME=text")
        full_env[name] = value
    return ClientSpec(tuple(tokens), executable, _digest(executable.resolve()), tuple(args),
                      files, full_env, timeout_s, attempts, tuple(scenarios), task=task)


def from_command(text: str, **options) -> ClientSpec:
    try:
        tokens = shlex.split(text)
    except ValueError as e:
        raise ClientSpecError(f"client command: {e}") from None
    return build(tokens, Path.cwd(), **options)


def parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME.match(name):
            raise ClientSpecError(f"--env: expected NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def read_toml(path: Path) -> tuple[str, dict]:
    """A grade or campaign file: its text and its tables, or one line saying why not."""
    try:
        text = Path(path).read_text()
        return text, tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as e:
        raise ClientSpecError(f"{path}: cannot read ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise ClientSpecError(f"{path}: not valid TOML ({e})") from None
    except RecursionError:
        raise ClientSpecError(f"{path}: not valid TOML (nested too deeply)") from None


def client_table(table: dict, where: str) -> tuple[list[str], dict, float | None]:
    """A file's client: its command (one string, split like a shell would, or a list), env
    and timeout_s, each checked; `where` prefixes every error ("FILE: client.")."""
    command, env, timeout = table.get("command"), table.get("env", {}), table.get("timeout_s")
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as e:
            raise ClientSpecError(f"{where}command: {e}") from None
    if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
        raise ClientSpecError(f"{where}command: expected a string or a list of strings")
    if not isinstance(env, dict):
        raise ClientSpecError(f"{where}env: expected a table of NAME = \"text\"")
    if timeout is not None and (isinstance(timeout, bool)
                                or not isinstance(timeout, (int, float))):
        raise ClientSpecError(f"{where}timeout_s: expected a number of seconds")
    return command, env, float(timeout) if timeout is not None else None


def _refuse(path: Path) -> None:
    why = refusal(path)
    if why:
        raise ClientSpecError(f"client command: {why}")


def _digest(path: Path) -> str:
    """The sha256 of a file of the client's (it exists: checked when it was named)."""
    digest = sha256_of(path)
    if digest is None:
        raise ClientSpecError(f"{path}: cannot be read")
    return digest


def check_sandbox(path: Path, sandbox: dict) -> None:
    """A file's [sandbox] table: known keys, each of its type and in range."""
    for key, value in sandbox.items():
        kind = SANDBOX_KEYS.get(key)
        if kind is None:
            raise ClientSpecError(f"{path}: sandbox.{key}: unknown key (one of "
                                  f"{', '.join(SANDBOX_KEYS)})")
        if type(value) is not kind or (isinstance(value, int) and kind is int
                                       and not 0 < value <= 1 << 40):
            raise ClientSpecError(f"{path}: sandbox.{key}: expected "
                                  + ("true or false" if kind is bool else "a positive number"))


def from_file(path: Path, extra_env: dict[str, str] | None = None, **overrides) -> ClientSpec:
    """A grade file; command-line options (attempts, timeout_s, scenarios, extra_env) win."""
    data = read_toml(path)[1]
    unknown = set(data) - {"client", "grade", "sandbox"}
    client, grade = data.get("client"), data.get("grade", {})
    sandbox = data.get("sandbox", {})
    if unknown or not isinstance(client, dict) or not isinstance(grade, dict) \
            or not isinstance(sandbox, dict):
        raise ClientSpecError(f"{path}: expected a [client] table and optional [grade] and "
                              "[sandbox] tables")
    check_sandbox(path, sandbox)
    extra = (set(client) - {"command", "env", "timeout_s"}) | (set(grade) -
                                                                {"attempts", "scenarios", "task"})
    if extra:
        raise ClientSpecError(f"{path}: unknown key(s) {', '.join(sorted(extra))}")
    command, env, timeout = client_table(client, f"{path}: client.")
    scenarios = grade.get("scenarios", [])
    if not isinstance(scenarios, list) or not all(isinstance(s, str) for s in scenarios):
        raise ClientSpecError(f"{path}: grade.scenarios: expected a list of scenario ids")
    task = grade.get("task", "")
    if not isinstance(task, str):
        raise ClientSpecError(f"{path}: grade.task: expected a task's id or folder")
    if task:
        task = task_named_in(path, task)
    options = {"timeout_s": timeout, "task": task,
               "attempts": grade.get("attempts", 3), "scenarios": tuple(scenarios), **overrides}
    try:
        spec = build(command, Path(path).parent.resolve(), {**env, **(extra_env or {})},
                     **options)
    except ClientSpecError as e:
        raise ClientSpecError(f"{path}: {e}") from None
    return dataclasses.replace(spec, sandbox=dict(sandbox))
