"""A task's own predicates (task.toml [predicates]): clauses the library cannot judge, written by
the task as pure functions of the evidence, `(ScenarioEvidence, Thresholds) -> Judgement`, in a
Python file of its folder (file = "predicates.py") or a module of a built-in task (module =
"fixture.NAME.predicates"), which lists them by name in a dict `PREDICATES`.

They are held to the judge's own contract: no I/O, no lab, no observer. Their source is read
before it is imported and refused if it imports anything but the public module's readings of
the evidence (`from evlab.task import ...`, PREDICATE_NAMES) and pure standard modules, or
names open/exec/eval: a replay then judges as the live run did, on any machine.
(A purity contract, not a sandbox: the task's author is trusted with
the lab already.) The built-in tasks' modules are also held to it by import-linter."""

import ast
import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

from sessions.spec.task_lab import TaskError, inside
from sessions.stream.compat import MOVED_PREDICATES

# What a predicate may import: the public module's readings of the evidence (evlab/task.py,
# which re-exports these names; nothing there with I/O), and pure standard modules
PUBLIC = "evlab.task"
PREDICATE_NAMES = (
    "FAIL", "INCONCLUSIVE", "NA", "PASS", "Judgement", "failed", "is_temp", "seqs", "unknown",
    "FILE_EVENTS", "FILES", "arrived_whole", "file_records", "written_in_place",
    "MOVES", "SOURCE_BY_DESCRIPTOR", "counter", "invocations", "resolved_files", "under",
    "unjudgeable", "Thresholds", "ServerRecord", "InvocationEvidence", "ScenarioEvidence",
    "CLIENT", "ENVIRONMENT", "HARNESS", "blind", "consumed_bytes", "endpoint_name", "wire_lost",
    "Vocabulary", "CONTINUOUS", "INTERRUPTIONS", "armed", "could_fire", "fired_records",
    "input_digest", "struck_refused", "operations_unseen", "Act", "program_acts",
    "watched_pids", "Operations", "OTHER", "OWN", "SERVER", "ProcessLife", "SignalObserved",
    "TruncateObserved",
)
ALLOWED = ("__future__", "collections", "dataclasses", "enum", "fractions", "functools",
           "ipaddress", "itertools", "math", "operator", "re", "statistics", "typing")
FORBIDDEN_NAMES = {"open", "exec", "eval", "compile", "__import__", "breakpoint", "input",
                   "globals", "vars"}


def load_predicates(file: Path, folder: Path, table: dict) -> dict[str, Callable]:
    """[predicates]: the task's own, by name (none: {})."""
    if not table:
        return {}
    module, path = table.get("module"), table.get("file")
    if (module is None) == (path is None) or set(table) - {"module", "file"}:
        raise TaskError(f"{file}: predicates: expected file = \"predicates.py\" (in the "
                        "folder) or module = \"fixture.NAME.predicates\"")
    if module is not None:
        found = importlib.util.find_spec(str(module)) if _is_fixture(module) else None
        if found is None or found.origin is None:
            raise TaskError(f"{file}: predicates.module: expected one of evlab's modules "
                            "(fixture.NAME.predicates); a task of your own names a file")
        source, name = Path(found.origin), str(module)
    else:
        source = inside(file, folder, path, "predicates.file")
        name = f"evlab_task_predicates_{abs(hash(source))}"
    _check_pure(file, source)
    loaded = (importlib.import_module(name) if module is not None else _import_file(name, source))
    predicates = getattr(loaded, "PREDICATES", None)
    if not isinstance(predicates, dict) or not predicates or not all(
            isinstance(k, str) and callable(v) for k, v in predicates.items()):
        raise TaskError(f"{file}: predicates: {source.name} defines no PREDICATES dict of "
                        "name -> function")
    return dict(predicates)


def moved_predicates() -> dict[str, Callable]:
    """The predicates the library once had, from the built-in task modules that have them now
    (compat's MOVED_PREDICATES), by name."""
    found = {}
    for name, module in MOVED_PREDICATES.items():
        table = getattr(importlib.import_module(module), "PREDICATES", {})
        if name in table:
            found[name] = table[name]
    return found


def _is_fixture(module) -> bool:
    parts = str(module).split(".")
    return len(parts) >= 2 and parts[0] == "fixture" and all(p.isidentifier() for p in parts)


def _check_pure(file: Path, source: Path) -> None:
    try:
        tree = ast.parse(source.read_text(), str(source))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as e:
        raise TaskError(f"{file}: predicates: {source.name} cannot be read as Python "
                        f"({e})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == PUBLIC and not node.level:
            impure = [a.name for a in node.names if a.name not in PREDICATE_NAMES]
            if impure:
                raise TaskError(f"{file}: predicates: {source.name} line {_line(node)} imports "
                                f"{PUBLIC}.{impure[0]}: a predicate may import only the "
                                "evidence's readings (docs/tasks.md, \"The public module\")")
            continue
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if isinstance(node, ast.ImportFrom) and node.level:
            names = [f".{node.module or ''}"]
        bad = [n for n in names if not any(n == a or n.startswith(a + ".") for a in ALLOWED)]
        if bad:
            raise TaskError(f"{file}: predicates: {source.name} line {_line(node)} imports "
                            f"{bad[0]}: a predicate may import only `from {PUBLIC} import ...` "
                            "and pure standard modules (no I/O, no lab)")
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            raise TaskError(f"{file}: predicates: {source.name} line {_line(node)} uses "
                            f"{node.id}: a predicate is a pure function of the evidence")


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def _import_file(name: str, source: Path):
    spec = importlib.util.spec_from_file_location(name, source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:   # the task's own code: its error, in one line
        raise TaskError(f"predicates: {source} failed to load: {type(e).__name__}: "
                        f"{e}") from None
    return module
