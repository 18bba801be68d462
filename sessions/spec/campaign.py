"""A campaign file: several clients graded on the same scenarios, compared in one leaderboard.

    [campaign]
    name = "my-clients"
    scenarios = ["normal", "interrupted"]   # grade scenario ids or scenario .toml files
    task = "tasks/kv"                       # a built-in task's id or a task folder (default:
                                            # the default task)
    attempts = 3                            # per client and scenario
    retries = 2                             # runs of an attempt the engine lost, again
    noise = ["cpu"]                         # optional ambient noise (or "all")
    [sandbox]                               # as in a grade file, deny_egress included
    memory_mib = 512
    [[client]]
    name = "py-client"
    command = ["python3", "client.py", "{host}", "{port}", "{source}"]   # or one string
    env = { LOG_LEVEL = "debug" }
    timeout_s = 20
    ship = ["lib"]                          # more files or directories it needs on a node
    task = "kv"                             # this client's task, if not the campaign's

A campaign may mix tasks: each client is graded on its task's scenarios (`scenarios` names
grade scenarios every client's task has; without it, each task's whole grade suite) and ranked
only beside the clients of its task.

Relative paths are relative to the campaign file. What travels to a Ray node (`shipped`): the
command's own files (each regular file of a folder it names), its executable unless a system
one (/usr, /bin, ...), and `ship`; each is named by its path relative to the campaign file (or
`abs/<absolute path>` outside it) and its sha256 is the identity the node must reproduce.
"""

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from sessions.spec.client_spec import (
    MAX_ATTEMPTS,
    ClientSpec,
    ClientSpecError,
    build,
    check_sandbox,
    client_table,
    read_toml,
)
from sessions.spec.named_paths import FOLDER, folder_files, rewrite
from sessions.spec.scenario import NOISE_KINDS, Scenario, ScenarioError, load, load_suite
from sessions.spec.task import TaskError, load_task, task_named_in

MAX_CLIENTS = 200
MAX_CAMPAIGN_ATTEMPTS = 2000   # what one archive holds (sessions/output/archive.py's bounds)
MAX_RETRIES = 10
MAX_SHIPPED_BYTES = 64 << 20
SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/", "/etc/")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_KEYS = {"campaign": {"name", "scenarios", "attempts", "retries", "noise", "task"},
         "client": {"name", "command", "env", "timeout_s", "ship", "task"}}


class CampaignError(ValueError):
    """A campaign file evlab cannot run; the message is one line naming the file."""


@dataclass(frozen=True)
class CampaignClient:
    name: str
    spec: ClientSpec                # resolved here: the identity the campaign names
    tokens: tuple[str, ...]         # the command, its file words as shipped names
    ship: dict[str, Path]           # shipped name -> the file on this machine
    shipped: dict[str, str]         # shipped name -> sha256
    task: str = ""                  # its task: a built-in id or a folder ("": the default)
    scenarios: tuple[Scenario, ...] = ()   # its task's grade scenarios it is graded on

    def identity(self) -> dict:
        task = load_task(self.task or None)
        return {"command": list(self.spec.command), "executable": str(self.spec.executable),
                "sha256": self.spec.sha256, "files": dict(self.spec.files),
                "shipped": dict(self.shipped),
                "task": {"id": task.id, "version": task.version, "sha256": task.sha256},
                "scenarios": [s.id for s in self.scenarios]}


@dataclass(frozen=True)
class Campaign:
    name: str
    file: Path
    text: str                       # the file as read: a resumed campaign must be the same
    clients: tuple[CampaignClient, ...]
    scenarios: tuple[Scenario, ...] # every client's grade scenario templates, by id, once
    attempts: int
    retries: int
    noise: tuple[str, ...]
    sandbox: dict                   # a grade file's [sandbox]
    task: str = ""                  # every client's task: a built-in id or a folder ("": default)

    @property
    def size(self) -> int:
        return sum(len(c.scenarios) for c in self.clients) * self.attempts

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks its clients are graded on, each once."""
        return tuple(dict.fromkeys(c.task for c in self.clients))


def shipped_name(path: Path, root: Path) -> str:
    path = Path(path).resolve()
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return "abs" + path.as_posix()


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def load_campaign(path: Path, task: str | None = None) -> Campaign:
    """task: the command line's --task, which wins over the file's [campaign] task."""
    path = Path(path)
    try:
        text, data = read_toml(path)
        return _campaign(path, text, data, task)
    except ClientSpecError as e:   # already names the file
        raise CampaignError(str(e)) from None
    except ScenarioError as e:
        raise CampaignError(f"{path}: {e}") from None


def _campaign(path: Path, text: str, data: dict, given: str | None) -> Campaign:
    unknown = set(data) - {"campaign", "sandbox", "client"}
    head, sandbox, clients = data.get("campaign", {}), data.get("sandbox", {}), data.get("client")
    if unknown or not isinstance(head, dict) or not isinstance(sandbox, dict):
        raise CampaignError(f"{path}: expected [campaign], optional [sandbox] and [[client]] "
                            f"tables" + (f" (unknown: {', '.join(sorted(unknown))})"
                                         if unknown else ""))
    _known_keys(path, head, "campaign")
    check_sandbox(path, sandbox)
    if not isinstance(clients, list) or not clients or not all(isinstance(c, dict)
                                                               for c in clients):
        raise CampaignError(f"{path}: expected at least one [[client]] table")
    if len(clients) > MAX_CLIENTS:
        raise CampaignError(f"{path}: {len(clients)} clients; at most {MAX_CLIENTS}")
    root = path.parent.resolve()
    attempts = _whole(path, head, "attempts", 3, 1, MAX_ATTEMPTS)
    retries = _whole(path, head, "retries", 2, 0, MAX_RETRIES)
    name = head.get("name", path.stem)
    if not isinstance(name, str) or not _NAME.match(name):
        raise CampaignError(f"{path}: campaign.name: expected letters, digits, '-', '_' or "
                            f"'.' (at most 40), got {name!r}")
    task = given if given is not None else _task(path, head, "campaign.task")
    suites: dict[str, tuple[Scenario, ...]] = {}
    parsed = []
    for entry in clients:
        # --task names every client's task; else a client's own, else the campaign's
        own = task if given is not None or "task" not in entry \
            else _task(path, entry, f"client {entry.get('name')}: task")
        if own not in suites:
            suites[own] = _scenarios(path, root, head, own)
        parsed.append(_client(path, root, entry, attempts, own, suites[own]))
    names = [c.name for c in parsed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CampaignError(f"{path}: client name(s) used twice: {', '.join(twice)}")
    scenarios = tuple({s.id: s for s in (x for ss in suites.values() for x in ss)}.values())
    size = sum(len(c.scenarios) for c in parsed) * attempts
    if size > MAX_CAMPAIGN_ATTEMPTS:
        raise CampaignError(f"{path}: {len(parsed)} clients x their scenarios x {attempts} "
                            f"attempts is {size}, more than {MAX_CAMPAIGN_ATTEMPTS} attempts "
                            "(one archive's worth): split the campaign")
    return Campaign(name, path.resolve(), text, tuple(parsed), scenarios, attempts, retries,
                    _noise(path, head), dict(sandbox), task)


def _task(path: Path, table: dict, where: str) -> str:
    """A campaign's or a client's task: a folder beside the file, else a built-in task's id
    (or a folder)."""
    task = table.get("task", "")
    if not isinstance(task, str):
        raise CampaignError(f"{path}: {where}: expected a task's id or folder")
    if not task:
        return ""
    try:
        return task_named_in(path, task)
    except TaskError as e:
        raise CampaignError(f"{path}: {where}: {e}") from None


def _known_keys(path: Path, table: dict, where: str) -> None:
    extra = set(table) - _KEYS[where]
    if extra:
        raise CampaignError(f"{path}: {where}: unknown key(s) {', '.join(sorted(extra))} "
                            f"(known: {', '.join(sorted(_KEYS[where]))})")


def _whole(path: Path, table: dict, key: str, default: int, low: int, high: int) -> int:
    value = table.get(key, default)
    if type(value) is not int or not low <= value <= high:
        raise CampaignError(f"{path}: campaign.{key}: expected a whole number from {low} to "
                            f"{high}, got {value!r}")
    return value


def _noise(path: Path, head: dict) -> tuple[str, ...]:
    noise = head.get("noise", [])
    if noise == "all":
        return NOISE_KINDS
    if not isinstance(noise, list) or not set(noise) <= set(NOISE_KINDS) \
            or not all(isinstance(k, str) for k in noise):
        raise CampaignError(f"{path}: campaign.noise: expected \"all\" or a list from "
                            f"{', '.join(NOISE_KINDS)}")
    return tuple(dict.fromkeys(noise))


def _scenarios(path: Path, root: Path, head: dict, task: str) -> tuple[Scenario, ...]:
    chosen_task = load_task(task or None)
    builtin = {s.id: s for s in load_suite("grade", chosen_task)}
    wanted = head.get("scenarios", list(builtin))
    if not isinstance(wanted, list) or not wanted or not all(isinstance(w, str)
                                                             for w in wanted):
        raise CampaignError(f"{path}: campaign.scenarios: expected a list of grade scenario "
                            f"ids ({', '.join(builtin)}) or scenario .toml files")
    chosen: dict[str, Scenario] = {}
    for w in dict.fromkeys(wanted):
        if w.endswith(".toml"):
            s = load(root / w, chosen_task)
        elif w in builtin:
            s = builtin[w]
        else:
            raise CampaignError(f"{path}: campaign.scenarios: unknown grade scenario {w!r} of "
                                f"task {chosen_task.id}; choose from {', '.join(builtin)} or "
                                "name a .toml file")
        if s.id in chosen:
            raise CampaignError(f"{path}: campaign.scenarios: two scenarios have the id {s.id}")
        chosen[s.id] = s
    return tuple(chosen.values())


def _client(path: Path, root: Path, entry: dict, attempts: int, task: str,
            scenarios: tuple[Scenario, ...]) -> CampaignClient:
    _known_keys(path, entry, "client")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise CampaignError(f"{path}: client.name: expected letters, digits, '-', '_' or '.' "
                            f"(at most 40), got {name!r}")
    where = f"client {name}"
    command, env, timeout = client_table(entry, f"{path}: {where}: ")
    try:
        spec = build(command, root, env, timeout, attempts, task=task)
    except ClientSpecError as e:
        raise CampaignError(f"{path}: {where}: {e}") from None
    ship = _shipping(path, root, where, spec, entry.get("ship", []))
    return CampaignClient(name, spec, _shipped_tokens(spec, command, root), ship,
                          {n: sha256_file(p) for n, p in ship.items()}, task, scenarios)


def _is_system(path: Path) -> bool:
    return str(path.resolve()).startswith(SYSTEM_PREFIXES)


def _shipping(path: Path, root: Path, where: str, spec: ClientSpec, extra) -> dict[str, Path]:
    """Every file a node needs to run the client, by its shipped name."""
    if not isinstance(extra, list) or not all(isinstance(e, str) for e in extra):
        raise CampaignError(f"{path}: {where}: ship: expected a list of files or directories")
    ship: dict[str, Path] = {}
    for name in spec.files:
        if name.endswith(FOLDER):   # a named folder travels as its files, at their places in it
            folder, inside = Path(name), folder_files(Path(name))
            if not inside:   # it would not be there on a node: its word would name nothing
                raise CampaignError(f"{path}: {where}: {folder} is an empty folder: nothing "
                                    "of it can be shipped")
            ship.update({f"{shipped_name(folder, root)}/{rel}": (folder / rel).resolve()
                         for rel in inside})
        else:
            ship[shipped_name(Path(name), root)] = Path(name).resolve()
    files = [] if _is_system(spec.executable) else [spec.executable]
    for item in extra:
        target = (root / item).resolve()
        if target.is_dir():
            files += sorted(p for p in target.rglob("*") if p.is_file())
        elif target.is_file():
            files.append(target)
        else:
            raise CampaignError(f"{path}: {where}: ship: {item!r} is not a file or directory")
    ship.update({shipped_name(f, root): f.resolve() for f in files})
    size = sum(p.stat().st_size for p in ship.values())
    if size > MAX_SHIPPED_BYTES:
        raise CampaignError(f"{path}: {where}: {size >> 20} MiB to ship; at most "
                            f"{MAX_SHIPPED_BYTES >> 20} MiB")
    return ship


def _shipped_tokens(spec: ClientSpec, command: list[str], root: Path) -> tuple[str, ...]:
    """The command with the executable and file words as shipped names (relative to where
    the node lays the files out). A system executable is the node's own: a bare name stays a
    PATH name, a path (a link such as ./py -> /usr/bin/python3) becomes the file it names."""
    if not _is_system(spec.executable):
        exe = "./" + shipped_name(spec.executable, root)
    else:
        exe = command[0] if "/" not in command[0] else str(spec.executable.resolve())
    args = [rewrite(a, root, lambda p: shipped_name(p, root)) for a in spec.args]
    return (exe, *args)


def attempt_id(client: str, base: str, attempt: int) -> str:
    return f"{client}:{base}@{attempt}"


def client_attempt(spec: ClientSpec, template: Scenario, attempt: int,
                   client: str) -> Scenario:
    """One attempt of one campaign client, as `evlab grade` runs it, with a campaign-wide id."""
    return spec.attempt_of(template, attempt, attempt_id(client, template.id, attempt), client)
