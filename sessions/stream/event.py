"""What every event of the stream is: a time on CLOCK_MONOTONIC and, once published, its place
in the stream (sessions/stream/events.py has every event type)."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Event:
    t_ns: int
    seq: int = field(default=0, kw_only=True)
