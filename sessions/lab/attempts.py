"""A campaign node's lab: one session kept open (one compiled collector, one warm spawner) that
runs grade attempts one at a time and hands each back as a self-contained piece of stream.

    worker = AttemptWorker(options, node="local")
    piece = worker.run(client, scenario)   # AttemptPiece: events as JSON lines, evidence files
    worker.close()

A piece is the session's opening (where it ran: SessionStarted naming only this attempt, the
capabilities missing there, the sandbox), the client's GradeStarted as resolved *here* (the
sha256 of what this node actually runs), and every observation of the attempt. Nothing is
judged here: the campaign's stream judges the piece as `evlab replay` would.
"""

import contextlib
import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path

from probes.owned_tmp import make_owned_dir
from sessions.lab.session import Options, RunError, Session
from sessions.spec.campaign import sha256_file
from sessions.spec.client_spec import ClientSpec
from sessions.spec.scenario import Scenario
from sessions.stream.codec import to_json
from sessions.stream.events import CapabilityMissing, Event, SandboxSet, SessionStarted
from sessions.stream.stream import EventStream


@dataclass(frozen=True)
class AttemptPiece:
    scenario: str
    node: str
    lines: tuple[str, ...]          # the attempt's events, codec JSON lines
    files: dict[str, bytes]         # evidence files by name: <scenario>.pcap, .SERVER.jsonl


@dataclass(frozen=True)
class AttemptOrder:
    """What a node needs to run one attempt (picklable: it travels to Ray nodes)."""

    client: str                     # a campaign's client name ("" for a plain grade)
    spec: ClientSpec | None         # resolved where it runs; None: not a grade (a seeded one)
    shipped: dict[str, Path]        # shipped name -> the file here
    scenario: Scenario              # the attempt, from ClientSpec.attempt_of
    bases: tuple[str, ...] = ()     # the grade's scenarios (default: this one's)


class AttemptWorker:
    def __init__(self, options: Options, node: str):
        self.node = node
        self._events: list[Event] = []
        self._stream = EventStream([self._events.append])
        self._out = make_owned_dir("evlab-worker-")
        self._open = contextlib.ExitStack()   # the session, open until close()
        try:   # a task's mistake (Session refuses its contract) leaves no folder either
            self._session = Session(self._stream, self._out, options)
            self._open.enter_context(self._session.opened([]))
        except BaseException:
            self.close()
            raise
        self._opening: list[Event] = [e for e in self._events
                         if isinstance(e, (SessionStarted, CapabilityMissing, SandboxSet))]
        self._events.clear()

    def run(self, order: AttemptOrder) -> AttemptPiece:
        s = order.scenario
        boundary = self._session.boundary
        if boundary is not None:
            try:
                boundary.check_reachable([s])
            except Exception as e:   # noqa: BLE001 - the client cannot run on this node
                raise RunError(str(e)) from None
        shipped = {name: sha256_file(path) for name, path in order.shipped.items()}
        started = self._opening[0]
        assert isinstance(started, SessionStarted)   # a session's first event
        opening = [dataclasses.replace(started, scenarios=(s.id,)),
                   *self._opening[1:]]
        try:
            if order.spec is not None:
                self._stream.publish(order.spec.started(order.bases or (s.base,), order.client,
                                                        shipped))
            self._session.run_scenario(s)
            events = opening + self._events
            return AttemptPiece(s.id, self.node, tuple(to_json(e) for e in events),
                                self._take_files(s.id))
        finally:
            self._events.clear()

    def _take_files(self, scenario: str) -> dict[str, bytes]:
        files = {}
        for path in sorted(self._out.iterdir()):
            if path.name.startswith(scenario + ".") and path.is_file():
                files[path.name] = path.read_bytes()
                path.unlink()
        return files

    def cancel(self) -> None:
        """Stop the attempt running now, from another thread (it unwinds through teardown)."""
        self._session.cancel.set()

    def close(self) -> None:
        try:
            self._open.close()
        finally:
            shutil.rmtree(self._out, ignore_errors=True)
