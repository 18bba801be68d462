"""Where the dashboard's events come from: a live lab, or a recorded session being replayed.

Each source feeds a DashboardModel through the same event stream and verdict engine as the
headless run, with one EvidenceBook per session that the model, the verdict engine and the
archive all read. The dashboard reads a source and asks it to act; it never writes into one.
"""

import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

from probes.owned_tmp import make_owned_dir
from sessions.judging.judge import VerdictEngine
from sessions.lab.live import Lab
from sessions.lab.runner import Options
from sessions.output.archive import ArchiveWriter, LoadedArchive
from sessions.spec.scenario import Scenario
from sessions.stream.events import GradeStarted, ScenarioStarted
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import ReplayDriver
from sessions.stream.stream import EventStream
from tui.model import DashboardModel
from tui.source import STOP_TIMEOUT_S, Source


class LiveSource(Source):
    mode = "live"

    def __init__(self, scenarios: list[Scenario], options: Options, autorun: bool = True,
                 grade: GradeStarted | None = None):
        self.scenarios = {s.id: s for s in scenarios}
        self.autorun = autorun
        book = EvidenceBook()
        self._model = DashboardModel(list(self.scenarios), book)
        self.staging = make_owned_dir("evlab-archive-")
        # The model first: it feeds the book under its own lock, so the UI reads it whole.
        self.stream = EventStream([self._model, VerdictEngine(book)])
        self.writer = ArchiveWriter(self.staging, book, self.stream)
        self.lab = Lab(self.stream, self.staging, options, scenarios, grade)
        self._finished = threading.Event()
        self._started = False

    @property
    def scenario_ids(self) -> tuple[str, ...]:
        return tuple(self.scenarios)

    @property
    def model(self) -> DashboardModel:
        return self._model

    @property
    def problem(self) -> str | None:
        if self.lab.error is not None:
            return f"the lab stopped: {self.lab.error} (quit and start evlab again)"
        return None

    @property
    def position_text(self) -> str:
        waiting = self.lab.pending()
        return f"{waiting} run(s) queued" if waiting else ""

    def start(self) -> None:
        self._started = True  # from now on, wait_stopped waits for serve() to finish
        if self.autorun:
            self.lab.submit(list(self.scenarios.values()))

    def serve(self) -> None:
        try:
            self.lab.serve()
        finally:
            self._finished.set()

    def run(self, ids: Sequence[str]) -> str:
        self.lab.submit([self.scenarios[i] for i in ids if i in self.scenarios])
        return f"queued: {', '.join(ids)}" if len(ids) < 4 else f"queued {len(ids)} scenarios"

    def export(self, path: Path) -> Path:
        return self.writer.write(path)

    def stop(self) -> None:
        self.lab.close()

    def wait_stopped(self, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Block until the lab has torn everything down; then remove the staging directory."""
        done = self._finished.wait(timeout) if self._started else True
        if done:
            self.writer.close()
            shutil.rmtree(self.staging, ignore_errors=True)
        return done


class ReplaySource(Source):
    mode = "replay"

    def __init__(self, loaded: LoadedArchive, archive_path: Path, speed: float = 1.0,
                 playing: bool = True):
        self.archive_path = Path(archive_path)
        starts = [e.scenario for e in loaded.events if isinstance(e, ScenarioStarted)]
        self._ids = tuple(dict.fromkeys(starts))
        # the driver makes the first stream (and so the first model) at once
        self.driver = ReplayDriver(loaded.events, self._fresh_stream, speed=speed,
                                   playing=playing)
        self.total_ns = (loaded.events[-1].t_ns - loaded.events[0].t_ns) if loaded.events else 0
        self.t0 = loaded.events[0].t_ns if loaded.events else 0

    def _fresh_stream(self) -> EventStream:
        book = EvidenceBook()
        self._model = DashboardModel(self._ids, book)
        return EventStream([self._model, VerdictEngine(book)])

    @property
    def scenario_ids(self) -> tuple[str, ...]:
        return self._ids

    @property
    def model(self) -> DashboardModel:
        return self._model

    @property
    def position_text(self) -> str:
        state = "■ end" if self.driver.done else ("▶" if self.driver.playing else "⏸ paused")
        return (f"replay {(self.driver.t_ns - self.t0) / 1e9:.3f} s of "
                f"{self.total_ns / 1e9:.3f} s ×{self.driver.speed:g} {state}")

    def serve(self) -> None:
        self.driver.run()

    def run(self, ids: Sequence[str]) -> str:
        return "a replay runs nothing: space plays or pauses, [ and ] step, + and - speed"

    def toggle_play(self) -> bool:
        self.driver.toggle()
        return True

    def step(self, direction: int) -> bool:
        self.driver.step(direction)
        return True

    def scale_speed(self, factor: float) -> bool:
        self.driver.set_speed(self.driver.speed * factor)
        return True

    def export(self, path: Path) -> Path:
        return self.archive_path  # a replay is already an archive: say where it is

    def stop(self) -> None:
        self.driver.stop()
