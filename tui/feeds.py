"""Where the dashboard's events come from: a live lab, a campaign, or a recorded session being
replayed.

Each feed drives a DashboardModel through the same event stream and verdict engine as the
headless run, with one EvidenceBook per session that the model, the verdict engine and the
archive all read. The dashboard reads a feed and asks it to act; it never writes into one.
"""

import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

from probes.owned_tmp import make_owned_dir
from sessions.campaign.driver import run_campaign
from sessions.campaign.jobs import plan
from sessions.campaign.journal import Journal
from sessions.lab.live import Lab
from sessions.lab.session import Options
from sessions.output.archive import ArchiveWriter, LoadedArchive
from sessions.output.judged import JudgedStream
from sessions.spec.campaign import Campaign
from sessions.spec.scenario import Scenario
from sessions.stream.events import Event, GradeStarted, ScenarioStarted
from sessions.stream.replay import ReplayDriver
from tui.feed import STOP_TIMEOUT_S, Feed
from tui.model import DashboardModel


class LiveFeed(Feed):
    mode = "live"

    def __init__(self, scenarios: list[Scenario], options: Options, autorun: bool = True,
                 grade: GradeStarted | None = None):
        self.scenarios = {s.id: s for s in scenarios}
        self.autorun = autorun
        self.stream = JudgedStream()
        self._ids = tuple(self.scenarios)
        self._model = DashboardModel(self._ids, self.stream)
        self.staging = make_owned_dir("evlab-archive-")
        self.writer = ArchiveWriter(self.staging, self.stream.book, self.stream)
        self.lab = Lab(self.stream, self.staging, options, scenarios, grade)
        self._finished = threading.Event()
        self._started = False

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


class ReplayFeed(Feed):
    mode = "replay"

    def __init__(self, loaded: LoadedArchive, archive_path: Path, speed: float = 1.0,
                 playing: bool = True):
        self.archive_path = Path(archive_path)
        starts = [e.scenario for e in loaded.events if isinstance(e, ScenarioStarted)]
        self._ids = tuple(dict.fromkeys(starts))
        self._contracts = loaded.contracts   # its tasks' contracts, as the session judged
        # the driver makes the first stream (and so the first model) at once
        self.driver = ReplayDriver(loaded.events, self._fresh_stream, speed=speed,
                                   playing=playing)
        self.total_ns = (loaded.events[-1].t_ns - loaded.events[0].t_ns) if loaded.events else 0
        self.t0 = loaded.events[0].t_ns if loaded.events else 0

    def _fresh_stream(self) -> JudgedStream:
        stream = JudgedStream(contracts=self._contracts)
        self._model = DashboardModel(self._ids, stream)
        return stream

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


class CampaignFeed(Feed):
    """`evlab campaign` in the dashboard: run_campaign on a worker thread, on the engine (this
    machine, one attempt at a time, or a Ray cluster), into the same stream as headless (the
    model feeding the book, the verdict engine, the journal that keeps the campaign directory
    resumable). The campaign runs its plan at once; stop() cancels the engine."""

    mode = "campaign"

    def __init__(self, campaign: Campaign, engine, journal: Journal,
                 resumed: Sequence[Event] = ()):
        self.campaign, self.engine, self.journal = campaign, engine, journal
        self.resumed = list(resumed)
        self._ids = tuple(job.id for job in plan(campaign))
        self.stream = JudgedStream(journal)
        self._model = DashboardModel(self._ids, self.stream)
        self.writer = ArchiveWriter(journal.evidence, self.stream.book, self.stream)
        self.error: BaseException | None = None
        self._finished = threading.Event()
        self._started = False
        self._engine_open = True
        self._engine_lock = threading.Lock()

    @property
    def problem(self) -> str | None:
        if self.error is not None:
            return (f"the campaign stopped: {self.error} (quit; `--resume` continues it from "
                    f"{self.journal.dir})")
        return None

    @property
    def position_text(self) -> str:
        board = self._model.campaign_board()
        if board is None:
            return ""
        return f"{board.progress.done}/{board.progress.total} attempts done"

    def start(self) -> None:
        self._started = True  # from now on, wait_stopped waits for serve() to finish

    def serve(self) -> None:
        try:
            run_campaign(self.stream, self._model.book, self.campaign, self.journal,
                         self.engine, self.resumed)
        except KeyboardInterrupt:
            pass  # stop(): the running attempt was torn down; SessionEnded says interrupted
        except BaseException as e:  # shown by the dashboard; never a silent stop
            self.error = e
        finally:
            try:
                self._close_engine()
            finally:
                self._finished.set()

    def run(self, ids: Sequence[str]) -> str:
        return "a campaign runs its own plan: l shows the leaderboard"

    def export(self, path: Path) -> Path:
        return self.writer.write(path)

    def stop(self) -> None:
        self.engine.cancel()

    def wait_stopped(self, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Block until the engine has torn everything down and is closed (the campaign
        directory stays: --resume continues it)."""
        done = self._finished.wait(timeout) if self._started else True
        if done:
            self._close_engine()
            self.writer.close()
        return done

    def _close_engine(self) -> None:
        with self._engine_lock:
            if self._engine_open:
                self._engine_open = False
                self.engine.close()
