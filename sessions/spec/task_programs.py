"""Whether a program a task names (a server, the verifier, the lifecycle check, a state, a
step) can run, checked when the folder is read: a mistake found there is the task's, said in
one line before any lab starts, not an invalid attempt after every attempt (docs/tasks.md).

    command = resolved(folder, ("check.py",))       # a file of the folder: its absolute path
    mistake(folder, "", command, ("{task}/x.py",))  # "args: {task}/x.py: no such file in ..."
"""

import importlib.util
import os
import re
import shutil
from pathlib import Path

# `{task}/PATH` in an argument names a file of the folder (python3 {task}/verify.py)
_TASK_FILE = re.compile(r"\{task\}/([^\s{}]+)")
# what exec(2) runs: a script names its interpreter, a binary is ELF
_RUNNABLE_STARTS = (b"#!", b"\x7fELF")


def resolved(folder: Path, command: tuple[str, ...]) -> tuple[str, ...]:
    """A command whose first word names a file of the folder (check.py, bin/check) runs that
    file, by its absolute path; any other first word is found on PATH (python3)."""
    path = _in_folder(folder, command[0]) if command else None
    return (str(path), *command[1:]) if path is not None else command


def mistake(folder: Path, module: str, command: tuple[str, ...],
            args: tuple[str, ...]) -> str | None:
    """What keeps the program from running, as `KEY: what` (KEY: module, command or args);
    None when everything it names is there. `command` is as the task wrote it."""
    if module:
        return None if _importable(module) else f"module: no module {module!r} in evlab"
    first = command[0]
    path = _in_folder(folder, first)
    if os.path.isabs(first):   # a program of the machine's (/usr/bin/python3)
        if not os.access(first, os.X_OK) or not os.path.isfile(first):
            return f"command: {first}: no such program on this machine"
    elif path is not None:
        wrong = _not_runnable(folder, path)
        if wrong:
            return f"command: {first}: {wrong}"
    elif shutil.which(first) is None:
        return f"command: {first}: no such file in {folder}, nor a program on PATH"
    for arg in args:
        for name in _TASK_FILE.findall(arg):
            if not (folder / name).resolve().is_relative_to(folder):
                return f"args: {{task}}/{name}: outside the task's folder"
            if not (folder / name).exists():
                return f"args: {{task}}/{name}: no such file in {folder}"
    return None


def _in_folder(folder: Path, word: str) -> Path | None:
    """The file a command's first word names in the folder (a relative path, or a name the
    folder holds); None: a program on PATH, or the machine's by its absolute path."""
    if os.path.isabs(word):
        return None
    if "/" in word or (folder / word).exists():
        return (folder / word).resolve()
    return None


def _not_runnable(folder: Path, path: Path) -> str | None:
    if not path.is_relative_to(folder):
        return "outside the task's folder"
    if not path.exists():
        return f"no such file in {folder}"
    if not path.is_file():
        return "not a file"
    if not os.access(path, os.X_OK):
        return f"not executable (chmod +x {path})"
    with open(path, "rb") as f:
        if not f.read(4).startswith(_RUNNABLE_STARTS):
            return "has no #! line naming its interpreter (nor is it a binary)"
    return None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:   # a parent package that is not there
        return False
