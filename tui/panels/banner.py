"""The warning banner: the feed's problem (the lab stopped) and missing capabilities, with
their fix. Hidden while there is nothing to say."""

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from sessions.stream.events import CapabilityMissing
from tui.styles import plain


class Banner(Static):
    problem: reactive[str | None] = reactive(None)   # (watched on mount: hidden until needed)
    missing: reactive[tuple[CapabilityMissing, ...]] = reactive(())

    def watch_problem(self) -> None:
        self._show()

    def watch_missing(self) -> None:
        self._show()

    def _show(self) -> None:
        if not self.missing and not self.problem:
            self.display = False
            return
        self.display = True
        lines = [f"⚠ {self.problem}"] if self.problem else []
        lines += [f"⚠ missing: {m.name} — {m.detail}. Fix: {m.fix}" for m in self.missing[:4]]
        if self.missing:
            lines.append("Clauses that need it show '? inconclusive'.")
        self.update(Text("\n").join(plain(line) for line in lines))
