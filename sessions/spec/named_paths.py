"""The files and folders a client's command names: what the sandbox shows it read-only, what
each attempt re-hashes, what a campaign ships — and what evlab refuses to show.

Which words name a path (the command is never run by a shell, so this is evlab's reading):
  1. a word that is an existing file or folder, absolute or relative to where the command was
     given (`client.py`, `classes`, `/opt/app/lib`);
  2. else the value of a `--opt=VALUE` or `-Dkey=VALUE` word (after its first `=`), read by
     rule 1 or 3;
  3. else each part of a `:`-separated list (`-cp classes:lib/a.jar`), a part `DIR/*` (Java's
     class-path wildcard) naming DIR; a word holding `://` (a URL) is not split.
A part holding a brace is the lab's placeholder, filled with the lab's own paths: left alone.
Paths under /proc, /sys, /dev (but /dev/shm) and /run name nothing of the program's (the
sandbox has its own /proc and /dev): left alone, shown nothing. A relative named path is made
absolute: the client runs in its own empty directory.

A named folder is shown whole, read-only. A named file is shown with its folder (a script's
modules beside it), except where that folder is shared by every program (/tmp), is or holds
evlab's own, or holds a secret at its top (`~/.ssh`): then the file alone.

Refused, with one line (a client could otherwise read or guess the lab's evidence): a named
folder that is `/`, a shared folder, or holds evlab's own — its repository, its temporary
folder (every session's store, records and fault files are there), the home of the user evlab
runs as — or holds a secret anywhere in its tree; anything inside one of evlab's own temporary
folders (but the client folders a campaign node lays shipped files out in); a folder of more
than MAX_FOLDER_FILES files.
"""

import hashlib
import os
import pwd
import tempfile
from collections.abc import Callable
from pathlib import Path

from probes.owned_tmp import PREFIXES
from sessions.spec.digest import sha256_of
from sessions.spec.secret_paths import may_lead_to_secret, sensitive

SHARED_DIRS = (Path("/"), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
NOT_THE_PROGRAMS = (Path("/proc"), Path("/sys"), Path("/dev"), Path("/run"))
SHIP_PREFIX = "evlab-ship-"   # a campaign node's shipped clients, each in a folder of its own
MAX_FOLDER_FILES = 20_000
REPOSITORY = Path(__file__).resolve().parents[2]
NAME_YOURS = "name the folder of your program"
FOLDER = "/"   # a named folder's own-file name ends with it: "/abs/classes/"


class RefusedPath(ValueError):
    """A named path evlab will not show a client; the message is one line."""


def rewrite(word: str, base: Path, to: Callable[[Path], str]) -> str:
    """The word with each path it names (absolute, symlinks kept) replaced by to(path)."""
    whole = _part(word, base, to)
    if whole is not None:
        return whole
    key, eq, value = word.partition("=")
    if eq and key:
        return key + eq + _listed(value, base, to)
    return _listed(word, base, to)


def _listed(text: str, base: Path, to: Callable[[Path], str]) -> str:
    if ":" not in text or "://" in text:
        got = _part(text, base, to)
        return text if got is None else got
    return ":".join(p if (got := _part(p, base, to)) is None else got
                    for p in text.split(":"))


def _part(text: str, base: Path, to: Callable[[Path], str]) -> str | None:
    if not text or "{" in text or "}" in text:
        return None
    wildcard = text.endswith("/*")
    name = text[:-2] if wildcard else text
    if not name:
        return None
    path = Path(os.path.abspath(name if os.path.isabs(name) else base / name))
    real = Path(os.path.realpath(path))
    if any(_within(real, d) for d in NOT_THE_PROGRAMS) and not _within(real, Path("/dev/shm")):
        return None
    if not (real.is_dir() if wildcard else real.is_file() or real.is_dir()):
        return None
    return to(path) + ("/*" if wildcard else "")


# --- what may be shown --------------------------------------------------------------------------
def refusal(path: Path) -> str | None:
    """Why a named file or folder may not be shown to a client, or None."""
    real = Path(os.path.realpath(path))
    said = str(path) if real == path else f"{path} (that is {real})"
    if _in_evlab_temp(real):
        return f"{said} is inside evlab's own temporary folder {_temp()}"
    if not real.is_dir():
        return None
    if real in SHARED_DIRS:
        return f"{said} is a folder every program shares: {NAME_YOURS}"
    for own, what in ((REPOSITORY, "evlab's repository"),
                      (_temp(), "evlab's temporary folder, where sessions keep their records"),
                      (_evlab_home(), "the home of the user evlab runs as")):
        if own is not None and _within(own, real):
            return (f"{said} is {what}" if own == real else f"{said} holds {what} {own}") \
                + f": {NAME_YOURS}"
    return None


def folder_files(folder: Path) -> list[str]:
    """A named folder's regular files (links not followed), relative and sorted; RefusedPath
    when it holds a secret or too many files."""
    out: list[str] = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        for f in files:
            full = os.path.join(top, f)
            if sensitive(full):
                raise RefusedPath(f"{folder} holds {full}, a secret: {NAME_YOURS}")
            if os.path.isfile(full) and not os.path.islink(full):
                out.append(os.path.relpath(full, folder))
        if len(out) > MAX_FOLDER_FILES:
            raise RefusedPath(f"{folder} holds more than {MAX_FOLDER_FILES:,} files: {NAME_YOURS}")
    return sorted(out)


def folder_sha256(folder: Path) -> str:
    """One digest of a folder's files: their relative names and contents."""
    h = hashlib.sha256()
    for rel in folder_files(folder):
        h.update(f"{rel}\0{sha256_of(folder / rel)}\n".encode())
    return h.hexdigest()


def own_digest(name: str) -> str | None:
    """An own file's sha256, or a named folder's ("/abs/classes/"); None when it is gone."""
    path = Path(name)
    if name.endswith(FOLDER):
        try:
            return folder_sha256(path) if path.is_dir() else None
        except RefusedPath:
            return None
    return sha256_of(path)


def shown(name: str) -> Path:
    """What the sandbox shows of an own file or folder: a folder itself; a file with its
    folder, or alone where its folder may not be shown whole."""
    path = Path(name)
    if name.endswith(FOLDER):
        return path
    folder = path.parent
    if refusal(folder) or _secret_at_top(folder):
        return path
    return folder


def _secret_at_top(folder: Path) -> bool:
    try:
        return any(may_lead_to_secret(e) for e in os.listdir(folder))
    except OSError:   # gone: nothing there to hide (and nothing is staged)
        return False


def _in_evlab_temp(real: Path) -> bool:
    """Inside one of evlab's own temporary folders; a campaign node's client folders (one
    level down in its shipping folder) are the clients' own."""
    try:
        parts = real.relative_to(_temp()).parts
    except ValueError:
        return False
    if not parts or not parts[0].startswith(PREFIXES):
        return False
    return not (parts[0].startswith(SHIP_PREFIX) and len(parts) >= 2
                and not parts[1].startswith("."))


def _temp() -> Path:
    return Path(os.path.realpath(tempfile.gettempdir()))


def _evlab_home() -> Path | None:
    try:
        return Path(os.path.realpath(pwd.getpwuid(os.geteuid()).pw_dir))
    except KeyError:
        return None


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents
