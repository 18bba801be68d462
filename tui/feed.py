"""What the dashboard needs from where its events come from (tui.feeds: a live lab or a
replay; bench.flood: a synthetic flood). The dashboard reads a feed and asks it to act; it
never writes into one."""

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from tui.model import DashboardModel

STOP_TIMEOUT_S = 30.0


@runtime_checkable
class Feed(Protocol):
    """What the dashboard needs from a feed of events. Implementations subclass it, and
    inherit the defaults for what does not apply to them (no problem, no replay controls)."""

    mode: str   # "live", "replay", …: shown in the header and the status line
    _ids: tuple[str, ...]
    _model: DashboardModel

    @property
    def scenario_ids(self) -> tuple[str, ...]:
        """The scenarios known before anything runs (more may start later)."""
        return self._ids

    @property
    def model(self) -> DashboardModel:
        """What to show now (a replay makes a new one when it steps back)."""
        return self._model

    @property
    def problem(self) -> str | None:
        """Something the user must know (the lab stopped), or None."""
        return None

    @property
    def position_text(self) -> str:
        """Where the feed is (runs queued, a replay's clock); '' when there is nothing."""
        return ""

    def start(self) -> None:
        """On the UI thread, once, before serve() runs: queue what runs at once."""
        return None

    def serve(self) -> None:
        """The feed's loop, on a thread of its own (a Textual thread worker); it returns
        after stop()."""
        ...

    def run(self, ids: Sequence[str]) -> str | None:
        """Queue runs of these scenarios; returns what to tell the user."""
        ...

    def toggle_play(self) -> bool:
        """Play or pause a replay; False: not a replay (the dashboard pauses its view)."""
        return False

    def step(self, direction: int) -> bool:
        """Step a replay to the next (1) or previous (-1) phase; False: not a replay."""
        return False

    def scale_speed(self, factor: float) -> bool:
        """Multiply a replay's speed; False: not a replay."""
        return False

    def export(self, path: Path) -> Path:
        """Write the session archive (or say where it already is); returns its path."""
        ...

    def stop(self) -> None:
        """Ask serve() to end: stops the client, servers and probes. Any thread, any time."""
        ...

    def wait_stopped(self, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Block until everything the feed started is torn down; False on timeout."""
        return True
