"""The event stream: numbers events and hands each one, in order, to every consumer.

Consumers are callables `consume(event) -> iterable of new events | None`. What a consumer
returns (the verdict engine returns verdicts) is published after the current event has reached
every consumer, so all consumers see one and the same order. Thread-safe: producers in several
threads may publish; delivery is serialised.
"""

import threading
from collections import deque
from collections.abc import Callable, Iterable

from sessions.stream.events import Event

Consumer = Callable[[Event], Iterable[Event] | None]


def _numbered(event: Event, seq: int) -> Event:
    """A copy of the event with its number: its fields as they are (an event has no
    __post_init__ to run again), a tenth of dataclasses.replace's cost, paid on every event."""
    numbered = object.__new__(type(event))
    numbered.__dict__.update(event.__dict__)
    object.__setattr__(numbered, "seq", seq)
    return numbered


class EventStream:
    def __init__(self, consumers: Iterable[Consumer] = ()):
        self._consumers: list[Consumer] = list(consumers)
        self._lock = threading.RLock()
        self._queue: deque[Event] = deque()
        self._delivering = False
        self._next_seq = 1

    def hold(self) -> threading.RLock:
        """`with stream.hold():` no event is being delivered, so every consumer's view is
        consistent (a snapshot for an export from another thread)."""
        return self._lock

    def subscribe(self, consumer: Consumer) -> None:
        with self._lock:
            self._consumers.append(consumer)

    def publish(self, event: Event, keep_seq: bool = False) -> Event:
        """Number the event, deliver it (and whatever consumers derive from it); return it.

        keep_seq: a replayed event keeps the number it was recorded with.
        """
        with self._lock:
            if keep_seq and event.seq:
                numbered = event
                self._next_seq = max(self._next_seq, event.seq + 1)
            else:
                numbered = _numbered(event, self._next_seq)
                self._next_seq += 1
            self._queue.append(numbered)
            if not self._delivering:  # a consumer publishing from inside delivery just queues
                self._delivering = True
                try:
                    while self._queue:
                        self._deliver(self._queue.popleft())
                finally:
                    self._delivering = False
            return numbered

    def _deliver(self, event: Event) -> None:
        for consumer in list(self._consumers):
            for derived in consumer(event) or ():
                self.publish(derived)
