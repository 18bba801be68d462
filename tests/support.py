"""Helpers more than one test module uses (not a test module: tests import from here, never from
each other)."""

import contextlib
import io
import json
import os
import re
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from sessions.lab.plan import grade_started
from sessions.lab.schedule import run_session
from sessions.lab.session import Options
from sessions.output import document
from sessions.output.judged import JudgedStream
from sessions.spec.client_spec import from_command
from sessions.spec.scenario import load_suite
from sessions.stream.evidence import EvidenceBook

EVLAB = str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "evlab")
DOC = Path(__file__).resolve().parent.parent / "docs" / "tasks.md"


def write_kv(where: Path) -> Path:
    """The files of docs/tasks.md's "Write a task of your own", as the document gives them."""
    files = re.findall(r"^`kv/([^`]+)`:\n\n```\w*\n(.*?)^```", DOC.read_text(), re.M | re.S)
    assert len(files) == 8, [name for name, _ in files]   # predicates.py: used when named
    for name, text in files:
        path = where / "kv" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (where / "kv" / "client.py").chmod(0o755)   # as the document says
    return where / "kv"


@dataclass
class Ran:
    """What `evlab_in` saw: as subprocess.CompletedProcess's fields of the same names."""
    returncode: int
    stdout: str
    stderr: str


def operated(tmp_path_factory, task: str, scenarios: list[str],
             tools=None) -> tuple[dict[str, dict], "Ran"]:
    """One session (`evlab run`, in this process) of an operations task's scenarios and the
    tools' scenario files: the document's scenarios by id, and the run. The tools' folder is
    the sandbox user's to read and run. Skipped without root: the operable service and the
    operations probes need it (BCC)."""
    if os.geteuid() != 0:
        import pytest
        pytest.skip("the operable service and the operations probes need root (BCC)")
    root = tmp_path_factory.mktemp(task)
    root.chmod(0o755)
    out = root / "run.json"
    done = evlab_in("run", "--task", task, *scenarios, *(tools(root) if tools else ()),
                    "--headless", "--json", out)
    assert out.exists(), done.stdout + done.stderr
    return {s["id"]: s for s in json.loads(out.read_text())["scenarios"]}, done


def tool_scenario(root: Path, name: str, script: str, body: str, fails: list[str],
                  environment: str = "") -> Path:
    """A real tool's scenario in root: its script (root/SCRIPT.sh, written once, executable)
    and root/NAME.toml running it, expected to fail exactly `fails`; environment: the lines of
    its [environment] table."""
    path = root / f"{script}.sh"
    if not path.exists():
        path.write_text(body)
        path.chmod(0o755)
    scenario = root / f"{name}.toml"
    scenario.write_text(f'description = "{name}"\norder = 50\n[client]\npath = "{path.name}"\n'
                        + (f"[environment]\n{environment}\n" if environment else "")
                        + f"[expect]\nfail = {json.dumps(fails)}\n")
    return scenario


def clauses(scenario: dict) -> dict[str, tuple[str, str]]:
    """A document scenario's clauses: id -> (status, reason)."""
    return {c["id"]: (c["status"], c["reason"]) for c in scenario["clauses"]}


def evlab_in(*args: str | Path, cwd: Path | None = None) -> Ran:
    """`evlab ARGS` run in this process (sessions.cli.dispatch.main, what the console script
    runs after its start-up), for a test about what a command does, not about its being a
    process of its own: the session takes the collector the last one here closed instead of
    compiling its own (~2 s of CPU). Its exit status (a usage error's SystemExit as the
    console script turns it into one), stdout and stderr."""
    from sessions.cli.dispatch import main
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:   # argparse's usage errors and --help
                code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    finally:
        os.chdir(here)
    return Ran(code, out.getvalue(), err.getvalue())


def evlab_run(tmp_path: Path, task: str, *args: str) -> dict:
    """`evlab run --task TASK ARGS --headless --json PATH` (in this process, evlab_in): its
    JSON document, once it exited 0 (every scenario judged as it declared)."""
    out = tmp_path / "run.json"
    done = evlab_in("run", "--task", task, *args, "--headless", "--json", out)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


class Sink:
    """A loopback server that reads everything sent to it and counts the bytes."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)  # so the thread notices close() promptly
        self.port = self.sock.getsockname()[1]
        self.received = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                while data := conn.recv(65536):
                    self.received += len(data)

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


def grade(command: str, tmp_path: Path, collector: str = "auto", book: EvidenceBook = None,
          deny_egress: bool = False, **options) -> dict:
    """Grade in-process, as `evlab grade --headless` does; the JSON document."""
    spec = from_command(command, **options)
    attempts = spec.attempt_scenarios(load_suite("grade", spec.task_of()))
    book = book if book is not None else EvidenceBook()
    run_session(JudgedStream(book=book), attempts, tmp_path / "out",
                Options(collector, deny_egress=deny_egress, task=spec.task),
                grade_started(spec, attempts))
    return document.build(book)


def runs(doc: dict, scenario: str = "normal") -> list[dict]:
    return doc["grade"]["scenarios"][scenario]["runs"]
