"""Key-to-screen latency of the dashboard under a synthetic 50,000 events/s stream.

FloodFeed (also used by tests/test_tui.py's 200 ms responsiveness test): a worker thread
publishes PacketSeen events into the dashboard's model at RATE per second. The app runs
headless (Textual's run_test) at 120x40; each key ("j"/"k", moving the scenario cursor) is
sent as the terminal driver sends it. Two latencies per key: until the key was handled
(`app.selected` changed; what the test measures) and until the first frame composed after
that (App._display called with an update while the new scenario is selected): key-to-screen.
The same keys without the stream give the dashboard's own latency, for comparison; the
process's CPU over the key phase says how busy the stream keeps it (one core = 1.0).
"""

import asyncio
import os
import threading
import time
from pathlib import Path

from bench.measure import median, say
from sessions.stream.events import PacketSeen, ScenarioStarted, SessionStarted
from tui.feed import Feed
from tui.model import DashboardModel

RATE = 50_000
KEYS = 20
WARMUP_S = 1.0
GAP_S = 0.1
KEY_TIMEOUT_S = 10.0


def press_like_a_terminal(app, key: str) -> None:
    """Post a key to the app as the terminal driver does. (Pilot.press also waits for the
    process to go idle, up to 2 s, which never happens under a flood: not what is measured.)"""
    from textual import events  # the bench's other sections need no Textual

    app.post_message(events.Key(key, key))


def scenario_key(app) -> str:
    """j moves down the three flood scenarios, k back up from the last."""
    return "j" if app.selected != "flood-c" else "k"


class FloodFeed(Feed):
    """A synthetic feed: RATE events per second into the model, for as long as it runs."""

    mode = "synthetic"

    def __init__(self, rate: int = RATE):
        self.rate = rate
        self._ids = ("flood-a", "flood-b", "flood-c")
        self._model = DashboardModel(self._ids)
        self.stream = self._model.stream
        self.published = 0
        self._stop = threading.Event()

    @property
    def position_text(self) -> str:
        return f"{self.published:,} events"

    def serve(self) -> None:
        self.stream.publish(SessionStarted(0, wall_ns=0, evlab_version="bench", kernel="k",
                                           collector="none", packets="on",
                                           contract_version="1", scenarios=self._ids))
        for sid in self._ids:
            self.stream.publish(ScenarioStarted(1, sid, "/x", "0" * 64, (), (), {}, 1, 2, 1, ""))
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate) - self.published
            for i in range(max(0, due)):
                sid = self._ids[i % 3]
                self.stream.publish(PacketSeen(time.monotonic_ns(), sid, 1, "127.0.0.1",
                                               40000, "127.0.0.1", 1, "PSH,ACK", i % 1500))
                self.published += 1   # counted as published: a long batch is seen as it goes
                if self._stop.is_set():
                    return
            time.sleep(0.001)

    def run(self, ids) -> None:
        return None  # nothing to run: the flood is all there is

    def export(self, path: Path) -> Path:
        return path

    def stop(self) -> None:
        self._stop.set()


async def _measure(keys: int, rate: int) -> dict:

    from tui.app import EvlabApp

    feed = FloodFeed(rate)
    app = EvlabApp(feed)
    frames: list[tuple[float, str]] = []
    display = app._display  # Textual has no public hook for "a frame was composed"

    def recording_display(screen, renderable):
        if renderable is not None:
            frames.append((time.perf_counter(), app.selected))
        display(screen, renderable)

    app._display = recording_display
    redraws: list[float] = []
    refresh_view = app.refresh_view

    def timed_refresh_view():
        t = time.perf_counter()
        refresh_view()
        redraws.append(time.perf_counter() - t)

    app.refresh_view = timed_refresh_view
    handled, screen = [], []
    async with app.run_test(size=(120, 40)):
        await asyncio.sleep(WARMUP_S)  # let the flood reach its rate
        start_count, t0, cpu0 = feed.published, time.monotonic(), _cpu()
        del redraws[:]
        for _ in range(keys):
            before, key = app.selected, scenario_key(app)
            pressed = time.perf_counter()
            press_like_a_terminal(app, key)
            deadline = pressed + KEY_TIMEOUT_S
            while app.selected == before and time.perf_counter() < deadline:
                await asyncio.sleep(0.002)
            handled.append(time.perf_counter() - pressed)
            after = app.selected
            while time.perf_counter() < deadline and not any(
                    t > pressed and sel == after for t, sel in frames):
                await asyncio.sleep(0.002)
            shown = [t for t, sel in frames if t > pressed and sel == after]
            screen.append(shown[0] - pressed if shown else None)
            await asyncio.sleep(GAP_S)
        elapsed = time.monotonic() - t0
        rate, cpu = (feed.published - start_count) / elapsed, (_cpu() - cpu0) / elapsed
        feed.stop()
    return {"keys": keys, "events_per_s": rate, "process_cpu_per_wall_s": cpu,
            "handled_s": handled, "screen_s": screen, "redraw_s": redraws,
            "median_redraw_s": median(redraws), "max_redraw_s": max(redraws, default=None),
            "redraws_per_s": len(redraws) / elapsed,
            "median_handled_s": median(handled), "max_handled_s": max(handled),
            "median_screen_s": median(screen),
            "max_screen_s": max((s for s in screen if s is not None), default=None),
            "keys_without_frame": sum(s is None for s in screen)}


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def measure(keys: int = KEYS) -> dict:
    say(f"dashboard under {RATE:,} events/s: {keys} key presses, then without the stream")
    result = asyncio.run(_measure(keys, RATE))
    result["without_stream"] = asyncio.run(_measure(keys, 0))
    return result
