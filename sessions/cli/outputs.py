"""Where the results go: checked before a run, written whole or not at all, never lost."""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from probes.owned_tmp import make_owned_dir
from sessions.cli.parser import UsageError
from sessions.output import document, html, report
from sessions.output.archive import ArchiveWriter
from sessions.output.grades import ClientGrade, grade_of
from sessions.output.judged import JudgedStream
from sessions.output.leaderboard import Board, board_of


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


class Outputs:
    """What a headless command was asked to write (--json, --report, --html, --archive):
    checked before anything runs, written whatever happens once it has run, each on its own
    (one that cannot be made is one line naming it, and the others are still written).

        with Outputs(args, stream) as outputs:
            work(stream, outputs.staging)
        outputs.document          # the JSON document (outputs.interrupted: Ctrl-C, SIGTERM)
        outputs.grade, outputs.board   # the typed grade and campaign board, when there is one

    The staging directory (pcaps and records for the archive) is a temporary one unless given
    (a campaign's directory keeps its own)."""

    def __init__(self, args, stream: JudgedStream, staging: Path | None = None):
        self.json, self.report, self.archive = (args.json, getattr(args, "report", None),
                                                args.archive)
        self.html = getattr(args, "html", None)
        check_outputs(("--json", self.json), ("--report", self.report), ("--html", self.html),
                      ("--archive", self.archive))
        self.book = stream.book
        self._temporary = staging is None
        self.staging = staging or make_owned_dir("evlab-archive-")
        self._writer = ArchiveWriter(self.staging, self.book, stream)
        self.document: dict = {}
        self.interrupted = False
        self.grade: ClientGrade | None = None
        self.board: Board | None = None

    def __enter__(self) -> "Outputs":
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        """Writes every output; an interrupt (Ctrl-C, SIGTERM) ends here, said once."""
        try:
            self._write_all()
        finally:
            if self._temporary:
                shutil.rmtree(self.staging, ignore_errors=True)
        if isinstance(error, KeyboardInterrupt):
            print("evlab: interrupted; partial results written", file=sys.stderr)
            self.interrupted = True
            return True
        return False

    def _write_all(self) -> None:
        self.grade, self.board = grade_of(self.book), board_of(self.book)
        doc = self.document = document.build(self.book, self.grade, self.board)
        if self.json:
            _each("--json", self.json,
                  lambda p: write_atomic(p, json.dumps(doc, indent=2) + "\n"))
        if self.report:
            _each("--report", self.report, lambda p: write_atomic(
                p, report.markdown(self.book, self.grade, self.board)))
        if self.html:
            _each("--html", self.html, lambda p: write_atomic(
                p, html.page(self.book, self.grade, self.board)))
        if self.archive:
            path = _each("--archive", self.archive, self._writer.finish)
            if path is not None:
                print(f"evlab: archive written to {path}", file=sys.stderr)


def _each(flag: str, path: Path, write) -> Path | None:
    """One output, delivered; a failure to make it is one line, and the others go on."""
    try:
        return deliver(flag, path, write)
    except Exception as e:   # noqa: BLE001 - said in one line; the other outputs still written
        print(f"evlab: could not write {flag} {path}: {type(e).__name__}: {e}"[:300],
              file=sys.stderr)
        return None
