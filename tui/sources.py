"""Where the dashboard's events come from: a live lab, or a recorded session being replayed.

Both feed a DashboardModel through the same event stream and verdict engine as the headless
run; the dashboard only reads the model and calls these small methods.
"""

import shutil
import threading
from pathlib import Path

from probes.owned_tmp import make_owned_dir
from sessions.judging.judge import VerdictEngine
from sessions.lab.live import Lab
from sessions.lab.runner import Options
from sessions.output.archive import ArchiveWriter, LoadedArchive
from sessions.spec.scenario import Scenario
from sessions.stream.events import GradeStarted, ScenarioStarted
from sessions.stream.replay import ReplayDriver
from sessions.stream.stream import EventStream
from tui.model import DashboardModel

STOP_TIMEOUT_S = 30.0


class LiveSource:
    mode = "live"

    def __init__(self, scenarios: list[Scenario], options: Options, autorun: bool = True,
                 grade: GradeStarted | None = None):
        self.scenarios = {s.id: s for s in scenarios}
        self.scenario_ids = list(self.scenarios)
        self.autorun = autorun
        self.model = DashboardModel(self.scenario_ids)
        self.staging = make_owned_dir("evlab-archive-")
        self.writer = ArchiveWriter(self.staging)
        self.stream = EventStream([VerdictEngine(), self.model, self.writer])
        self.lab = Lab(self.stream, self.staging, options, scenarios, grade)
        self._finished = threading.Event()
        self._started = False

    def _serve(self) -> None:
        try:
            self.lab.serve()
        finally:
            self._finished.set()

    def start(self, app) -> None:
        self._started = True
        app.run_worker(self._serve, thread=True, name="lab", group="lab", exit_on_error=False)
        if self.autorun:
            self.lab.submit(list(self.scenarios.values()))

    def run(self, ids: list[str], app) -> None:
        self.lab.submit([self.scenarios[i] for i in ids if i in self.scenarios])
        app.notify(f"queued: {', '.join(ids)}" if len(ids) < 4 else f"queued {len(ids)} scenarios")

    def toggle_play(self) -> bool:
        return False

    def step(self, direction: int) -> bool:
        return False

    def scale_speed(self, factor: float) -> bool:
        return False

    def problem(self) -> str | None:
        if self.lab.error is not None:
            return f"the lab stopped: {self.lab.error} (quit and start evlab again)"
        return None

    def position_text(self) -> str:
        waiting = self.lab.pending()
        return f"{waiting} run(s) queued" if waiting else ""

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


class ReplaySource:
    mode = "replay"

    def __init__(self, loaded: LoadedArchive, archive_path: Path, speed: float = 1.0,
                 playing: bool = True):
        self.archive_path = Path(archive_path)
        starts = [e.scenario for e in loaded.events if isinstance(e, ScenarioStarted)]
        self.scenario_ids = list(dict.fromkeys(starts))
        self.model = DashboardModel(self.scenario_ids)
        self.driver = ReplayDriver(loaded.events, self._fresh_stream, speed=speed,
                                   playing=playing)
        self.total_ns = (loaded.events[-1].t_ns - loaded.events[0].t_ns) if loaded.events else 0
        self.t0 = loaded.events[0].t_ns if loaded.events else 0

    def _fresh_stream(self) -> EventStream:
        self.model = DashboardModel(self.scenario_ids)
        return EventStream([VerdictEngine(), self.model])

    def start(self, app) -> None:
        app.run_worker(self.driver.run, thread=True, name="replay", group="replay",
                       exit_on_error=False)

    def run(self, ids: list[str], app) -> None:
        app.notify("a replay runs nothing: space plays or pauses, [ and ] step, + and - speed")

    def toggle_play(self) -> bool:
        self.driver.toggle()
        return True

    def step(self, direction: int) -> bool:
        self.driver.step(direction)
        return True

    def scale_speed(self, factor: float) -> bool:
        self.driver.set_speed(self.driver.speed * factor)
        return True

    def position_text(self) -> str:
        state = "■ end" if self.driver.done else ("▶" if self.driver.playing else "⏸ paused")
        return (f"replay {(self.driver.t_ns - self.t0) / 1e9:.3f} s of "
                f"{self.total_ns / 1e9:.3f} s ×{self.driver.speed:g} {state}")

    def export(self, path: Path) -> Path:
        return self.archive_path  # a replay is already an archive: say where it is

    def stop(self) -> None:
        self.driver.stop()

    def wait_stopped(self, timeout: float = STOP_TIMEOUT_S) -> bool:
        return True
