"""Replay: a recorded session fed back through the same stream, at recorded speed or faster.

Observations are replayed with their recorded numbers and timestamps; verdicts are not replayed
but derived again by whatever verdict engine consumes the stream, so every consumer behaves as
it did live (and a test can check the derived verdicts equal the recorded ones).
"""

import time
from collections.abc import Callable

from sessions.events import Event, ScenarioJudged, Verdict
from sessions.stream import EventStream

DERIVED = (Verdict, ScenarioJudged)
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
