"""What a task.toml says of its lab (docs/tasks.md): the client's inputs, the servers the lab
starts, the programs it runs (the verifier, the lifecycle check), the client's placeholders and
what fills each; and the checks every part of the file shares. Each malformed key is a
TaskError: one line naming the file, the key and what was expected."""

import re
from dataclasses import dataclass
from pathlib import Path

from sessions.spec.task_programs import mistake, resolved
from sessions.spec.template import template_names

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_KEYS = {"": {"id", "version", "summary", "contract", "documents", "suites", "client",
              "inputs", "lab", "servers", "verifier", "lifecycle", "figures", "marks",
              "states", "predicates", "outputs", "steps", "load"},
         "client": {"args", "placeholders", "required", "functions", "reference", "tools"},
         "placeholder": {"fill", "about"},
         "input": {"generate", "file", "watched"},
         "output": {"file", "folder", "filesystem"},
         "lab": {"invocations", "residue_dir", "residue_keep"},
         "server": {"module", "command", "args", "role", "restart", "faults", "bind", "clock",
                    "settle", "operable"},
         "program": {"module", "command", "args"},
         "load": {"target", "protocol", "request", "rate", "timeout_ms"}}
ROLES = ("endpoint", "decoy", "internal")
CLOCKS = ("monotonic", "wall")   # a record's time: t_ns (CLOCK_MONOTONIC ns) or t_wall (Unix s)
SETTLES = ("records", "sockets")  # how the lab knows a server has finished with a client
# Records of evlab's own, under names no server may take: the harness's, the fault proxy's,
# the file watcher's (the client's outputs folder), the task's states' and steps', the load's
OWN_RECORDS = ("harness", "proxy", "files", "lab", "load")
# the lab's own servers a task may start by module (the proxy is the lab's alone to start)
LAB_SERVERS = ("sessions.lab.decoy",)
# evlab's deterministic file (sessions/lab/inputs/source.py) and tree (sessions/lab/inputs/tree.py)
GENERATORS = ("source", "tree")
MAX_INVOCATIONS = 8
# What a server's or a program's arguments may use besides the inputs (docs/tasks.md)
PROGRAM_WORDS = ("events", "port", "state", "faults", "task", "host", "service")
# A value each scenario gives (its [environment] values): `{scenario.NAME}` in a placeholder's
# fill or a program's arguments (reload's version to serve)
SCENARIO_WORD = re.compile(r"^scenario\.[a-z][a-z0-9_]{0,31}$")

class TaskError(ValueError):
    """A task that cannot be used, in one line."""


@dataclass(frozen=True)
class Program:
    """A program of the task's: a Python module of a built-in task (run by evlab's interpreter)
    or a command (its relative paths in the task's folder), and its arguments' templates."""

    module: str
    command: tuple[str, ...]
    args: tuple[str, ...]


@dataclass(frozen=True)
class ServerSpec:
    name: str
    program: Program
    role: str          # endpoint, decoy or internal
    restart: bool      # started again on its state and port when it dies
    faults: bool       # reads server faults from {faults}; wire faults through a proxy
    bind: str = ""     # the request line a one-shot wire fault strikes (a pattern; {digest})
    clock: str = "monotonic"   # its records' time: t_ns, or t_wall (a real server's log)
    settle: str = "records"    # finished with a client: its connection records, or sockets
    operable: bool = False     # the program operates it (issue 46): it runs in the service's
                               # pid namespace as the sandbox user, with no record of its own


@dataclass(frozen=True)
class InputSpec:
    name: str
    generate: str      # a generator of GENERATORS, or "" with a file
    file: Path | None  # a file of the task's folder, copied in
    watched: bool      # the collector counts reads of it: "the source"


@dataclass(frozen=True)
class OutputSpec:
    name: str
    file: str          # its name in the client's outputs folder (writable, kept between runs)
    folder: bool = False      # a folder the client fills, not a file
    filesystem: bool = False  # that folder a filesystem of its own (the kernel's "target")


def table_of(file: Path, data: dict, key: str) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise TaskError(f"{file}: {key}: expected a table")
    return value


def parse_inputs(file: Path, folder: Path, table: dict) -> tuple[InputSpec, ...]:
    inputs = []
    for name, spec in table.items():
        key = f"inputs.{name}"
        if not _NAME.match(name) or not isinstance(spec, dict):
            raise TaskError(f"{file}: {key}: expected a table named by lowercase letters, "
                            "digits and '_'")
        check_keys(file, spec, "input", key)
        generate, given = spec.get("generate", ""), spec.get("file")
        if (generate == "") == (given is None) or generate not in ("", *GENERATORS):
            raise TaskError(f"{file}: {key}: expected generate = "
                            f"{' | '.join(repr(g) for g in GENERATORS)} or file = \"PATH\"")
        watched = spec.get("watched", False)
        if not isinstance(watched, bool):
            raise TaskError(f"{file}: {key}.watched: expected true or false")
        inputs.append(InputSpec(name, generate, inside(file, folder, given, f"{key}.file")
                                if given is not None else None, watched))
    if sum(i.watched for i in inputs) > 1:
        raise TaskError(f"{file}: inputs: at most one input is watched (the source)")
    return tuple(inputs)


def parse_outputs(file: Path, table: dict, inputs) -> tuple[OutputSpec, ...]:
    """[outputs.NAME]: a file the client writes in its outputs folder, which the lab keeps
    between invocations, watches (the `files` records) and the verifier may read."""
    outputs = []
    for name, spec in table.items():
        key = f"outputs.{name}"
        if not _NAME.match(name) or not isinstance(spec, dict) or \
                name in {i.name for i in inputs}:
            raise TaskError(f"{file}: {key}: expected a table named like a word (not an "
                            "input's name)")
        check_keys(file, spec, "output", key)
        folder = "folder" in spec
        given = spec.get("folder" if folder else "file")
        if folder == ("file" in spec) or not isinstance(given, str) or \
                not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", given):
            raise TaskError(f"{file}: {key}: expected file = \"NAME\" or folder = \"NAME\" "
                            "(letters, digits, '.', '_', '-')")
        own = spec.get("filesystem", False)
        if not isinstance(own, bool) or own and not folder:
            raise TaskError(f"{file}: {key}.filesystem: true or false, and only for a folder")
        outputs.append(OutputSpec(name, given, folder, own))
    if sum(o.filesystem for o in outputs) > 1:
        raise TaskError(f"{file}: outputs: at most one folder is a filesystem of its own (the "
                        "target)")
    return tuple(outputs)


def parse_servers(file: Path, folder: Path, table: dict, inputs) -> tuple[ServerSpec, ...]:
    """[servers.NAME], started in the order declared; inputs: the inputs and outputs, which
    its arguments may name (each by its name) besides evlab's words."""
    servers: list[ServerSpec] = []
    for name, spec in table.items():
        key = f"servers.{name}"
        if not _NAME.match(name) or name in OWN_RECORDS or not isinstance(spec, dict):
            raise TaskError(f"{file}: {key}: expected a table named by lowercase letters, "
                            f"digits and '_' (not {', '.join(OWN_RECORDS)}: evlab's own "
                            "records)")
        check_keys(file, spec, "server", key)
        role = spec.get("role", "internal")
        if role not in ROLES:
            raise TaskError(f"{file}: {key}.role: expected one of {', '.join(ROLES)}")
        flags = [spec.get(f, False) for f in ("restart", "faults", "operable")]
        if not all(isinstance(f, bool) for f in flags):
            raise TaskError(f"{file}: {key}: restart, faults and operable are true or false")
        if flags[2] and flags[1]:
            raise TaskError(f"{file}: {key}: an operable server takes no faults (the program "
                            "may rewrite what it reads)")
        if flags[2] and any("{events}" in a or "{faults}" in a for a in spec.get("args", ())
                            if isinstance(a, str)):
            raise TaskError(f"{file}: {key}.args: an operable server has no record and no "
                            "fault file ({events}, {faults}): the program could make it write "
                            "what it likes there; the lab records its `listening` itself")
        if flags[2] and "module" in spec:
            raise TaskError(f"{file}: {key}: an operable server is a command (the program's "
                            "sandbox user runs it), not a module of evlab's")
        # the servers declared before it are started before it: their ports are known
        program = _program_of(file, folder, spec, key, _words(inputs, servers))
        clock, settle = spec.get("clock", "monotonic"), spec.get("settle", "records")
        if clock not in CLOCKS or settle not in SETTLES:
            raise TaskError(f"{file}: {key}: clock is {' or '.join(map(repr, CLOCKS))}, "
                            f"settle {' or '.join(map(repr, SETTLES))}")
        servers.append(ServerSpec(name, program, role, flags[0], flags[1],
                                  _bind(file, key, spec), clock, settle, flags[2]))
    for what, many in (("endpoint", [s for s in servers if s.role == "endpoint"]),
                       ("server with faults", [s for s in servers if s.faults])):
        if len(many) > 1:
            raise TaskError(f"{file}: servers: at most one {what} "
                            f"({', '.join(s.name for s in many)})")
    return tuple(servers)


def _bind(file: Path, key: str, spec: dict) -> str:
    """A server's `bind`: a regular expression a request line must match whole; `{digest}`
    stands for the watched input's sha256 (hex digits: nothing to escape)."""
    bind = spec.get("bind", "")
    if not isinstance(bind, str) or len(bind) > 400:
        raise TaskError(f"{file}: {key}.bind: expected a regular expression (at most 400 "
                        "characters)")
    if bind and not spec.get("faults", False):
        raise TaskError(f"{file}: {key}.bind: only a server with faults = true binds them")
    try:
        re.compile(bind.replace("{digest}", "0" * 64))
    except re.error as e:
        raise TaskError(f"{file}: {key}.bind: not a regular expression ({e})") from None
    return bind


def _words(inputs, servers) -> set[str]:
    """What a server's or program's argument may name: evlab's words, the inputs and outputs
    (each by its name), and (for a program run after the servers started) servers.NAME.port."""
    return {*PROGRAM_WORDS, *(i.name for i in inputs),
            *(f"servers.{s.name}.port" for s in servers)}


def parse_program(file: Path, folder: Path, data: dict, key: str, inputs,
                  servers) -> Program | None:
    spec = data.get(key)
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise TaskError(f"{file}: {key}: expected a table")
    check_keys(file, spec, "program", key)
    return _program_of(file, folder, spec, key, _words(inputs, servers))


def parse_states(file: Path, folder: Path, table: dict, inputs, kind: str = "states",
                 servers=()) -> dict[str, Program]:
    """[states.NAME]: a program that makes the servers' state a scenario may start from
    (environment.state = "NAME"), run before the servers start: no server's port to name.
    [steps.NAME]: one run between invocations (environment.between = "NAME"), servers up."""
    states = {}
    for name, spec in table.items():
        if not _NAME.match(name) or not isinstance(spec, dict):
            raise TaskError(f"{file}: {kind}.{name}: expected a table named like a word")
        check_keys(file, spec, "program", f"{kind}.{name}")
        states[name] = _program_of(file, folder, spec, f"{kind}.{name}",
                                   _words(inputs, servers))
    return states


def _program_of(file: Path, folder: Path, spec: dict, key: str, words: set[str]) -> Program:
    module, command = spec.get("module", ""), spec.get("command", [])
    if isinstance(command, str):
        command = [command]
    if (module == "") == (command == []) or not isinstance(module, str) or \
            not isinstance(command, list) or not all(isinstance(c, str) and c for c in command):
        raise TaskError(f"{file}: {key}: expected module = \"NAME\" or command = [\"PROGRAM\", "
                        "...]")
    if module and module not in LAB_SERVERS and \
            not re.fullmatch(r"fixture(\.[a-z_][a-z0-9_]*)+", module):
        raise TaskError(f"{file}: {key}.module: expected a built-in task's module (fixture.*) "
                        f"or one of the lab's servers ({', '.join(LAB_SERVERS)}); a server or "
                        "program of your own is a command")
    args = spec.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise TaskError(f"{file}: {key}.args: expected a list of strings")
    for arg in args:
        used = {w for w in _names(file, f"{key}.args", arg) if not SCENARIO_WORD.match(w)}
        if used - words:
            raise TaskError(f"{file}: {key}.args: {arg!r} uses {', '.join(sorted(used - words))}"
                            f" (expected {', '.join(sorted(words))})")
    # everything it names is there now, or the folder is refused before any lab starts
    wrong = mistake(folder, module, tuple(command), tuple(args))
    if wrong:
        raise TaskError(f"{file}: {key}.{wrong}")
    return Program(module, resolved(folder, tuple(command)), tuple(args))


def parse_client(file: Path, client: dict, inputs: tuple[InputSpec, ...],
                 servers: tuple[ServerSpec, ...], outputs=()) -> tuple[
                     tuple[str, ...], dict[str, str], tuple[str, ...], dict[str, str]]:
    table = client.get("placeholders", {})
    if not isinstance(table, dict):
        raise TaskError(f"{file}: client.placeholders: expected a table of name = "
                        "{ fill = ..., about = ... }")
    fillers = {"host", *(f"inputs.{i.name}" for i in inputs),
               *(["service"] if any(s.operable for s in servers) else []),
               *(f"outputs.{o.name}" for o in outputs),
               *(f"servers.{s.name}.port" for s in servers)}
    names, fills = {}, {}
    for name, spec in table.items():
        key = f"client.placeholders.{name}"
        if not _NAME.match(name):
            raise TaskError(f"{file}: client.placeholders: {name!r} is not a name (lowercase "
                            "letters, digits, '_')")
        if not isinstance(spec, dict):
            raise TaskError(f"{file}: {key}: expected {{ fill = ..., about = \"what it is\" }}")
        check_keys(file, spec, "placeholder", key)
        fill = spec.get("fill")
        # a fill is one filler, or a template of them (a URL: http://{host}:{servers.web.port}/f)
        words = template_names(fill) if isinstance(fill, str) and "{" in fill else None
        known = fillers | {w for w in words or () if SCENARIO_WORD.match(w)}
        if not (isinstance(fill, str) and (fill in fillers or SCENARIO_WORD.match(fill))) \
                and not (words and words <= known):
            raise TaskError(f"{file}: {key}.fill: expected one of {', '.join(sorted(fillers))}"
                            ", scenario.NAME, or a text of them in braces")
        fills[name], names[name] = spec["fill"], str(spec.get("about", ""))
    args = client.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise TaskError(f"{file}: client.args: expected a list of strings")
    for arg in args:
        used = _names(file, "client.args", arg)
        if used - set(names):
            raise TaskError(f"{file}: client.args: {arg!r} uses a placeholder the task does "
                            f"not declare ({', '.join(sorted(used - set(names)))})")
    required = client.get("required", [])
    if not isinstance(required, list) or not set(required) <= set(names):
        raise TaskError(f"{file}: client.required: expected a list of the task's placeholders")
    return tuple(args), names, tuple(required), fills


def _names(file: Path, key: str, arg: str) -> set[str]:
    names = template_names(arg)
    if names is None:
        raise TaskError(f"{file}: {key}: {arg!r} is not a template (a brace alone: write {{{{ "
                        "or }})")
    return names


def inside(file: Path, folder: Path, relative, key: str) -> Path:
    """A path the task names, which must stay in its folder (a task is what its folder holds)."""
    if not isinstance(relative, str) or not relative:
        raise TaskError(f"{file}: {key}: expected a path relative to the task's folder")
    path = (folder / relative).resolve()
    if not path.is_relative_to(folder):
        raise TaskError(f"{file}: {key}: {relative!r} is outside the task's folder")
    if not path.exists():
        raise TaskError(f"{file}: {key}: {relative!r} does not exist")
    return path


def check_keys(file: Path, table: dict, kind: str, where: str | None = None) -> None:
    where = kind if where is None else where
    for key in table:
        if key not in _KEYS[kind]:
            full = f"{where}.{key}" if where else key
            raise TaskError(f"{file}: {full}: expected one of {', '.join(sorted(_KEYS[kind]))}")


def text_of(file: Path, data: dict, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"{file}: {key}: expected a non-empty string")
    return value


def texts_of(file: Path, data: dict, key: str) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskError(f"{file}: {key}: expected a list of strings")
    return value
