"""Replay: a recorded session fed back through the same stream, at recorded speed or faster.

Observations are replayed with their recorded numbers and timestamps; verdicts are not replayed
but derived again by whatever verdict engine consumes the stream, so every consumer behaves as
it did live (and a test can check the derived verdicts equal the recorded ones).
"""

import threading
import time
from collections.abc import Callable

from sessions.stream.events import DERIVED, Event, PhaseChanged
from sessions.stream.stream import EventStream

MAX_GAP_S = 2.0  # a long pause in the recording is shortened to this


def observations(events: list[Event]) -> list[Event]:
    return [e for e in events if not isinstance(e, DERIVED)]


def replay(events: list[Event], stream: EventStream, speed: float | None = None,
           sleep: Callable[[float], None] = time.sleep,
           should_stop: Callable[[], bool] = lambda: False) -> None:
    """Publish the recorded observations; speed None = as fast as possible, 1.0 = as recorded."""
    last_t = None
    for event in observations(events):
        if should_stop():
            return
        if speed and last_t is not None and event.t_ns > last_t:
            sleep(min((event.t_ns - last_t) / 1e9 / speed, MAX_GAP_S))
        if last_t is None or event.t_ns > last_t:
            last_t = event.t_ns
        stream.publish(event, keep_seq=True)


class ReplayDriver:
    """Interactive replay for a front end: play/pause, speed, and steps between phases.

    make_stream() builds a fresh stream (with its consumers) for a fresh start; stepping back
    replays from the beginning up to the previous phase boundary, as fast as possible. Commands
    may come from any thread; run() is the loop, on a worker thread of its own.
    """

    def __init__(self, events: list[Event], make_stream: Callable[[], EventStream],
                 speed: float = 1.0, playing: bool = True):
        self.events = observations(events)
        self.make_stream = make_stream
        self.speed = speed
        self.playing = playing
        self.position = 0                 # events published so far
        self.stream = make_stream()
        self._stopped = False
        self._cond = threading.Condition()
        self._boundaries = [i + 1 for i, e in enumerate(self.events)
                            if isinstance(e, PhaseChanged)]

    @property
    def done(self) -> bool:
        return self.position >= len(self.events)

    @property
    def t_ns(self) -> int:
        """The recording's clock at the current position."""
        return self.events[self.position - 1].t_ns if self.position else (
            self.events[0].t_ns if self.events else 0)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def toggle(self) -> None:
        self.playing = not self.playing
        self._wake()

    def set_speed(self, speed: float) -> None:
        self.speed = min(64.0, max(0.125, speed))
        self._wake()

    def step(self, direction: int) -> None:
        with self._cond:
            self.playing = False
            if direction > 0:
                target = next((b for b in self._boundaries if b > self.position),
                              len(self.events))
                self._publish_to(target)
            else:
                target = max([0] + [b for b in self._boundaries if b < self.position])
                self.stream = self.make_stream()
                self.position = 0
                self._publish_to(target)
            self._cond.notify_all()

    def stop(self) -> None:
        self._stopped = True
        self._wake()

    def _publish_to(self, target: int) -> None:
        while self.position < target:
            self.stream.publish(self.events[self.position], keep_seq=True)
            self.position += 1

    def run(self) -> None:
        """Play while playing; wait while paused; return on stop()."""
        while not self._stopped:
            with self._cond:
                if not self.playing or self.done:
                    self._cond.wait(0.1)
                    continue
                event = self.events[self.position]
                gap = 0.0
                if self.position:
                    gap = max(0, event.t_ns - self.events[self.position - 1].t_ns) / 1e9
                gap = min(gap / self.speed, MAX_GAP_S)
                if gap > 0.0005:
                    self._cond.wait(gap)  # a command (pause, step, speed) may cut the wait
                    if not self.playing or self._stopped:
                        continue
                self._publish_to(self.position + 1)
