"""Where the results go: checked before a run, written whole or not at all, never lost
(headless.py's Outputs says which are asked for)."""

import os
import sys
import tempfile
from pathlib import Path

from sessions.spec.request import UsageError


def check_outputs(*outputs: tuple[str, Path | None]) -> None:
    """Before anything runs: every output can go where it is asked to (a regular file in a
    directory evlab may write), so a long run is never lost to a typo."""
    for flag, path in outputs:
        if path is None:
            continue
        if path.exists() and not path.is_file():
            raise UsageError(f"{flag} {path}: not a regular file (a directory or a device)")
        where = path.parent
        while not where.exists() and where != where.parent:
            where = where.parent
        try:
            tempfile.TemporaryFile(dir=where).close()
        except OSError as e:
            raise UsageError(f"{flag} {path}: cannot write in {where} ({e.strerror})") from None


def deliver(flag: str, path: Path, write) -> Path:
    """Write an output; if that still fails at the end, keep it in the temp directory and say
    where, instead of losing the run's result."""
    try:
        write(path)
        return path
    except OSError as e:
        fd, kept = tempfile.mkstemp(prefix="evlab-kept-", suffix="".join(path.suffixes))
        os.close(fd)
        write(Path(kept))
        print(f"evlab: could not write {flag} {path} ({e.strerror or e}); kept at {kept}",
              file=sys.stderr)
        return Path(kept)


def write_atomic(path: Path, text: str) -> None:
    """Whole or not at all: a reader (or a leftover of the client's) never sees a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial-write")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_each(flag: str, path: Path, write) -> Path | None:
    """One output, delivered; a failure to make it is one line, and the others go on."""
    try:
        return deliver(flag, path, write)
    except Exception as e:   # noqa: BLE001 - said in one line; the other outputs still written
        print(f"evlab: could not write {flag} {path}: {type(e).__name__}: {e}"[:300],
              file=sys.stderr)
        return None
