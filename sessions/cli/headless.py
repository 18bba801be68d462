"""A headless session: the scenarios run with progress lines on stderr, the JSON document,
the report, the HTML page and the archive written whatever happens (an interrupt leaves
partial results), then its summary line and exit status (endings.py)."""

import json
import shutil
import signal
import sys
import threading
from pathlib import Path

from probes.interrupts import SIGNALS, interrupt_once
from probes.owned_tmp import make_owned_dir
from sessions.cli.outputs import check_outputs, write_atomic, write_each
from sessions.cli.progress import Progress
from sessions.lab.plan import Plan, plan_of
from sessions.lab.schedule import run_session
from sessions.output import document, harbor, html, report
from sessions.output.archive import ArchiveWriter
from sessions.output.endings import ending
from sessions.output.grades import ClientGrade
from sessions.output.judged import JudgedStream
from sessions.output.leaderboard import Board
from sessions.spec.contract import ContractError
from sessions.spec.request import Files, GradeRequest, RunRequest
from sessions.spec.task import TaskError
from sessions.stream.stream import Consumer

TASK_MISTAKES = (TaskError, ContractError)


def cmd_session(request: RunRequest | GradeRequest) -> int:
    """`evlab run` or `evlab grade`, headless."""
    return record_session(plan_of(request), request.files).status


def record_session(plan: Plan, files: Files, progress: Consumer | None = None,
                   quiet: bool = False) -> "Outputs":
    """Run a plan (sessions/lab/plan.py) headless, writing the request's files: what it wrote
    and judged (its exit status: 130 when interrupted)."""
    stream = JudgedStream()
    return record(files, stream, progress or Progress(len(plan.scenarios)),
                  lambda staging: run_session(stream, plan.scenarios, staging, plan.options,
                                              plan.grade, plan.jobs, plan.spec), quiet=quiet)


def record(files: Files, stream: JudgedStream, progress: Consumer, work,
           staging: Path | None = None, directory: Path | None = None,
           quiet: bool = False) -> "Outputs":
    """Run work(staging) headless with the outputs written whatever happens and progress
    printing its lines; the outputs (their exit status: 130 when interrupted). `directory` is
    named in the summary line (a campaign's); quiet: the summary line is kept, not printed."""
    stream.subscribe(progress)
    with Outputs(files, stream, staging, directory, quiet) as outputs:
        # deferred inside BCC's callbacks, where an exception would be lost (probes/interrupts.py);
        # a library caller's thread other than the main one gets no signals to defer
        main = threading.current_thread() is threading.main_thread()
        previous = {sig: signal.signal(sig, interrupt_once) for sig in SIGNALS} if main else {}
        try:
            work(outputs.staging)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return outputs


class Outputs:
    """What a headless command was asked to write (--json, --report, --html, --archive):
    checked before anything runs, written whatever happens once it has run, each on its own
    (one that cannot be made is one line naming it, and the others are still written); then
    the session's summary line, and its exit status in `status`.

        with Outputs(files, stream) as outputs:
            work(outputs.staging)
        outputs.status            # 130 when interrupted (Ctrl-C, SIGTERM): partial results

    The staging directory (pcaps and records for the archive) is a temporary one unless given
    (a campaign's directory keeps its own). Once written, `document`, `grade`, `board`,
    `summary` and `archive_path` are what was judged and where the archive went."""

    def __init__(self, files: Files, stream: JudgedStream, staging: Path | None = None,
                 directory: Path | None = None, quiet: bool = False):
        self.json, self.report, self.archive = files.json, files.report, files.archive
        self.html, self.reward, self.ctrf = files.html, files.reward, files.ctrf
        check_outputs(("--json", self.json), ("--report", self.report), ("--html", self.html),
                      ("--archive", self.archive), ("--reward", self.reward),
                      ("--ctrf", self.ctrf))
        self.quiet = quiet
        self.document: dict = {}
        self.grade: ClientGrade | None = None
        self.board: Board | None = None
        self.summary = ""
        self.archive_path: Path | None = None
        self.book = stream.book
        self._temporary = staging is None
        self.staging = staging or make_owned_dir("evlab-archive-")
        self._writer = ArchiveWriter(self.staging, self.book, stream)
        self.directory = directory
        self.status = 130   # until the session's end is known

    def __enter__(self) -> "Outputs":
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        """Writes every output, then says how the session ended; an interrupt (Ctrl-C,
        SIGTERM) ends here, said once. A task's mistake found as the session opened or its
        first lab started (a contract's unknown predicate, a server dead before it listened)
        writes nothing: the session judged nothing of the program."""
        try:
            if isinstance(error, TASK_MISTAKES):
                return False
            line, status = self._write_all()
        finally:
            if self._temporary:
                shutil.rmtree(self.staging, ignore_errors=True)
        if isinstance(error, KeyboardInterrupt):
            print("evlab: interrupted; partial results written", file=sys.stderr)
            return True
        if error is None:
            if not self.quiet:
                print(line, file=sys.stderr)
            self.status, self.summary = status, line
        return False

    def _write_all(self) -> tuple[str, int]:
        doc, grade, board = document.judged(self.book)
        self.document, self.grade, self.board = doc, grade, board
        if self.json:
            write_each("--json", self.json,
                       lambda p: write_atomic(p, json.dumps(doc, indent=2) + "\n"))
        if self.report:
            write_each("--report", self.report, lambda p: write_atomic(
                p, report.markdown(self.book, grade, board)))
        if self.html:
            write_each("--html", self.html, lambda p: write_atomic(
                p, html.page(self.book, grade, board)))
        if self.reward:
            write_each("--reward", self.reward, lambda p: write_atomic(
                p, json.dumps(harbor.reward(doc, grade), indent=2) + "\n"))
        if self.ctrf:
            write_each("--ctrf", self.ctrf, lambda p: write_atomic(
                p, json.dumps(harbor.ctrf(doc, self.book), indent=2) + "\n"))
        if self.archive:
            self.archive_path = write_each("--archive", self.archive, self._writer.finish)
            if self.archive_path is not None and not self.quiet:
                print(f"evlab: archive written to {self.archive_path}", file=sys.stderr)
        return ending(doc, grade, board, self.directory)
