"""A task is a folder: its task.toml names the contract, the suites of scenarios, the client's
command-line placeholders and the documents a client is written from (docs/tasks.md).

    task = load_task("fetch")          # a built-in task by its id (fixture/<id>/task.toml)
    task = load_task("path/to/task")   # a folder of your own (or its task.toml)

A malformed folder is a TaskError: one line naming the file, the key and what was expected.
"""

import dataclasses
import functools
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sessions.spec.contract import Contract, ContractError, load_contract
from sessions.spec.task_display import parse_figures, parse_functions, parse_marks, parse_tools
from sessions.spec.task_lab import (
    MAX_INVOCATIONS,
    SCENARIO_WORD,
    InputSpec,
    OutputSpec,
    Program,
    ServerSpec,
    TaskError,
    check_keys,
    inside,
    parse_client,
    parse_inputs,
    parse_outputs,
    parse_program,
    parse_servers,
    parse_states,
    table_of,
    text_of,
    texts_of,
)
from sessions.spec.task_load import LoadSpec, parse_loads
from sessions.spec.task_predicates import load_predicates, moved_predicates
from sessions.spec.template import template_names
from sessions.stream.compat import OLD_TASK
from sessions.stream.events import ScenarioStarted, SessionStarted

TASKS_DIR = Path(__file__).resolve().parent.parent.parent / "fixture"
TASK_FILE = "task.toml"
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
SUITE_NAMES = ("seeded", "faults", "grade")   # grade: what `evlab grade` runs a client through
# What a folder's digest leaves out: what building and running it leaves behind
_UNHASHED = {"__pycache__", "build"}


@dataclass(frozen=True)
class Task:
    id: str
    version: str
    summary: str
    folder: Path
    contract: Contract
    suites: dict[str, Path]            # suite name -> its scenarios' folder
    args: tuple[str, ...]              # a scenario's arguments when it names none
    placeholders: dict[str, str]       # {name} in a command -> what fills it
    required: tuple[str, ...]          # placeholders a graded client's command must use
    documents: tuple[Path, ...]
    sha256: str                        # of every file of the folder (folder_sha256)
    fills: dict[str, str]              # {name} -> host | servers.NAME.port | inputs.NAME
    inputs: tuple[InputSpec, ...]
    invocations: int                   # per scenario
    servers: tuple[ServerSpec, ...]
    verifier: Program | None
    lifecycle: Program | None
    residue_dir: str                   # the servers' state where a client's leftovers show
    residue_keep: tuple[str, ...]      # what belongs there (the saved state itself)
    figures: tuple[dict, ...]          # the task's counter rows (sessions/spec/task_display.py)
    marks: dict[str, str]              # an endpoint's record event -> a timeline mark
    functions: tuple[str, ...]         # client functions whose entries the collector counts
    states: dict[str, Program]         # a scenario's environment.state -> what makes it
    reference: str                     # the reference client's path for a behaviour, with
                                       # {behaviour} (relative to the folder); "": none
    outputs: tuple[OutputSpec, ...] = ()   # files the client writes in its outputs folder
    steps: dict[str, Program] = dataclasses.field(default_factory=dict)   # between invocations
    loads: tuple[LoadSpec, ...] = ()   # evlab's load against its servers, every invocation
    tools: tuple[str, ...] = ()        # programs its protocol has a client run (client.tools)

    def display(self) -> dict:
        """What ScenarioStarted records of how the task's evidence is shown."""
        return {"invocations": self.invocations, "figures": [dict(f) for f in self.figures],
                "marks": dict(self.marks),
                **({"loads": {x.name: x.target for x in self.loads}} if self.loads else {})}

    @property
    def scenario_words(self) -> set[str]:
        """The NAMEs of `{scenario.NAME}` its placeholders and programs use: each scenario
        gives each in its [environment] values."""
        programs = [*(x.program for x in self.servers), self.verifier, self.lifecycle,
                    *self.states.values(), *self.steps.values()]
        texts = [*self.fills.values(), *(a for p in programs if p for a in p.args)]
        return {w.removeprefix("scenario.") for text in texts
                for w in template_names(text) or () if SCENARIO_WORD.match(w)}

    @property
    def endpoint(self) -> ServerSpec | None:
        """The one server the client may contact (none: the task allows no egress at all)."""
        return next((s for s in self.servers if s.role == "endpoint"), None)

    @property
    def faulted(self) -> ServerSpec | None:
        """The one server that takes faults (server faults, and the wire proxy in front)."""
        return next((s for s in self.servers if s.faults), None)

    @property
    def watched(self) -> InputSpec | None:
        return next((i for i in self.inputs if i.watched), None)

    @property
    def clause_ids(self) -> tuple[str, ...]:
        return self.contract.clause_ids

    def record(self) -> dict:
        """What a session's records say of the task it judged."""
        return {"id": self.id, "version": self.version, "sha256": self.sha256,
                "clauses": list(self.clause_ids)}


def builtin_tasks() -> list[Path]:
    """The folders of the built-in tasks, by id."""
    return sorted(p.parent for p in TASKS_DIR.glob(f"*/{TASK_FILE}"))


def load_task(ref: str | Path | None = None) -> Task:
    """A task by its id (a built-in one) or its folder. None: what a command, grade file or
    campaign that names no task meant before tasks were folders (compat's OLD_TASK); the
    command line says so in its parser."""
    return _load(_folder_of(ref).resolve())


def task_ref(given: str | Path) -> str:
    """A task named so that every process of the session finds it again (each lab of --jobs,
    a campaign's node): a built-in one by its id, another by its folder made absolute. Loaded
    now, so a wrong one is a one-line error before anything runs."""
    task = load_task(given)
    return task.id if task.folder == (TASKS_DIR / task.id).resolve() else str(task.folder)


def task_named_in(file: Path, given: str) -> str:
    """A task a grade or campaign file names: a folder beside the file, else a built-in
    task's id (or an absolute folder); as task_ref gives it."""
    beside = Path(file).parent / given
    return task_ref(beside if (beside / TASK_FILE).is_file() else given)


def _folder_of(ref: str | Path | None) -> Path:
    text = str(ref if ref is not None else OLD_TASK)
    if _ID.match(text) and "/" not in text:
        folder = TASKS_DIR / text
        if (folder / TASK_FILE).is_file():
            return folder
        if not Path(text).exists():
            ids = ", ".join(p.name for p in builtin_tasks())
            raise TaskError(f"no task {text!r}: the built-in tasks are {ids} (or give a "
                            "task folder's path)")
    path = Path(text)
    if path.name == TASK_FILE and path.is_file():
        return path.parent
    if not (path / TASK_FILE).is_file():
        raise TaskError(f"{path}: not a task folder (it has no {TASK_FILE})")
    return path


_LOADED: dict[str, Task] = {}   # sha256 -> a task this process loaded (what its sessions ran)


def task_of_record(task_id: str, sha256: str) -> Task:
    """The task a session's record names: the one with that digest that this process loaded or
    that is built in; else the built-in task of that id as it is now; a record from before
    tasks were folders (no id) ran compat's OLD_TASK."""
    if sha256 in _LOADED:
        return _LOADED[sha256]
    name = task_id or OLD_TASK   # an archive's word: only ever a built-in folder's name
    folder = TASKS_DIR / name
    if _ID.match(name) and (folder / TASK_FILE).is_file():
        return load_task(folder)
    raise TaskError(f"the session judged task {task_id!r}, which is not built in here and "
                    "whose contract the record does not carry")


def own_predicates_of(task_id: str, sha256: str) -> dict:
    """The own predicates of the task a record names, if that task is here (loaded by this
    process or built in): an archive's contract is text, so a replay takes them from here.
    Those the library had once are found where they are now (compat: an archive's contract
    names them as the library's, its task's folder or not)."""
    try:
        own = task_of_record(task_id, sha256).contract.own
    except TaskError:
        own = {}
    return {**moved_predicates(), **own}


def display_of(started: ScenarioStarted) -> dict:
    """How a scenario's evidence is shown (Task.display), as its record says; a record from
    before tasks said so shows the one it ran (compat's OLD_TASK)."""
    return started.display or load_task(OLD_TASK).display()


def record_of(session: SessionStarted | None) -> dict:
    """The task a session's record names, as the document shows it: id, version, digest and
    its clauses in order (a record from before tasks were folders names none: the task it
    ran, as it is now)."""
    task_id, sha = (session.task_id, session.task_sha256) if session else ("", "")
    if session is not None and session.clauses:
        return {"id": task_id, "version": session.task_version, "sha256": sha,
                "clauses": list(session.clauses)}
    return {**task_of_record(task_id, sha).record(), "recorded": False}


def _load(folder: Path) -> Task:
    """This folder's task (never another folder's of the same digest: that one may be gone or
    moved since); the registry names the folder loaded last for each digest."""
    task = _parse(folder)
    _LOADED[task.sha256] = task
    return task


@functools.lru_cache(maxsize=16)
def _parse(folder: Path) -> Task:
    file = folder / TASK_FILE
    try:
        data = tomllib.loads(file.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise TaskError(f"{file}: cannot be read as TOML ({e})") from None
    check_keys(file, data, "")
    task_id = text_of(file, data, "id")
    if not _ID.match(task_id):
        raise TaskError(f"{file}: id: expected lowercase letters, digits and '-', got "
                        f"{task_id!r}")
    client = data.get("client", {})
    if not isinstance(client, dict):
        raise TaskError(f"{file}: client: expected a table")
    check_keys(file, client, "client")
    try:
        contract = load_contract(inside(file, folder, text_of(file, data, "contract"), "contract"))
    except ContractError as e:
        raise TaskError(str(e)) from None
    inputs = parse_inputs(file, folder, table_of(file, data, "inputs"))
    outputs = parse_outputs(file, table_of(file, data, "outputs"), inputs)
    files = (*inputs, *outputs)   # what a server or program may name besides evlab's words
    servers = parse_servers(file, folder, table_of(file, data, "servers"), files)
    args, about, required, fills = parse_client(file, client, inputs, servers, outputs)
    lab = table_of(file, data, "lab")
    check_keys(file, lab, "lab", "lab")
    invocations = lab.get("invocations", 1)
    if not isinstance(invocations, int) or isinstance(invocations, bool) or \
            not 1 <= invocations <= MAX_INVOCATIONS:
        raise TaskError(f"{file}: lab.invocations: expected a whole number from 1 to "
                        f"{MAX_INVOCATIONS}")
    residue_dir, keep = lab.get("residue_dir", ""), lab.get("residue_keep", [])
    if not isinstance(residue_dir, str) or ".." in Path(residue_dir).parts or \
            Path(residue_dir).is_absolute() or not isinstance(keep, list) or \
            not all(isinstance(k, str) for k in keep):
        raise TaskError(f"{file}: lab: residue_dir is a folder in the servers' state, "
                        "residue_keep a list of the names that belong there")
    contract = dataclasses.replace(contract, own=load_predicates(
        file, folder, table_of(file, data, "predicates")))
    return Task(task_id, text_of(file, data, "version"), text_of(file, data, "summary"), folder,
                contract, _suites(file, folder, data.get("suites")), args, about, required,
                tuple(inside(file, folder, d, "documents") for d in texts_of(file, data,
                                                                            "documents")),
                folder_sha256(folder), fills, inputs, invocations, servers,
                parse_program(file, folder, data, "verifier", files, servers),
                parse_program(file, folder, data, "lifecycle", files, servers), residue_dir,
                tuple(keep), parse_figures(file, data.get("figures", []), servers),
                parse_marks(file, data.get("marks", {})),
                parse_functions(file, client.get("functions", [])),
                parse_states(file, folder, table_of(file, data, "states"), files),
                _reference(file, client), outputs,
                parse_states(file, folder, table_of(file, data, "steps"), files, "steps",
                             servers), parse_loads(file, table_of(file, data, "load"), servers),
                parse_tools(file, client.get("tools", [])))


def _reference(file: Path, client: dict) -> str:
    reference = client.get("reference", "")
    if not isinstance(reference, str) or reference and template_names(reference) != {
            "behaviour"}:
        raise TaskError(f"{file}: client.reference: expected a path with {{behaviour}} (the "
                        "seeded behaviour a scenario's client.behaviour names)")
    return reference


def _suites(file: Path, folder: Path, table) -> dict[str, Path]:
    if not isinstance(table, dict) or "grade" not in table:
        raise TaskError(f"{file}: suites: expected a table with at least grade = \"DIR\"")
    unknown = set(table) - set(SUITE_NAMES)
    if unknown:
        raise TaskError(f"{file}: suites: expected names from {', '.join(SUITE_NAMES)}, got "
                        f"{', '.join(sorted(unknown))}")
    suites = {}
    for name in SUITE_NAMES:
        if name in table:
            where = inside(file, folder, table[name], f"suites.{name}")
            if not where.is_dir():
                raise TaskError(f"{file}: suites.{name}: {table[name]!r} is not a folder")
            suites[name] = where
    return suites


def task_files(folder: Path) -> list[Path]:
    """The files that make a task folder what it is (what building or running it leaves,
    _UNHASHED, aside), in path order."""
    return sorted(p for p in folder.rglob("*") if p.is_file()
                  and not _UNHASHED & set(p.relative_to(folder).parts))


def folder_sha256(folder: Path) -> str:
    """Every file of the folder, by its path in it and its bytes, in path order: a changed,
    added or removed file changes it (what building or running it leaves, _UNHASHED, not)."""
    digest = hashlib.sha256()
    for path in task_files(folder):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
