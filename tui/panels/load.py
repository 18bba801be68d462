"""The load view (key 6), shown for a task with evlab's load (task.toml [load.NAME]): per time
bucket of the selected scenario, the requests answered per second, the failed ones and the
slowest answer, each a Sparkline over the scenario, and below them each invocation from the
client's launch `[` to its exit `]` (sessions/output/load_over_time.py, which the reports read).

A sparkline gives each bucket the same whole number of columns while they fit, so the marks
below fall in their buckets' columns; a narrower one takes several buckets a column, as
Sparkline does (the marks follow its partition)."""

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Label, Sparkline, Static

from sessions.output.load_over_time import Bucket, LoadOverTime, size_words
from tui.model import ScenarioView
from tui.styles import plain

LABEL_W, SAID_W = 12, 26   # the rows' names, and what each says in figures
ROWS = (("answered", "answered/s"), ("failed", "failed"), ("slowest", "slowest ms"))


def columns(i: int, count: int, width: int) -> tuple[int, int]:
    """The first and last column of bucket i of count drawn in width columns: k columns each
    when width is k times count, several a column when narrower (Sparkline's partition)."""
    i = max(0, min(i, count - 1))   # a launch before the load's first bucket: its first
    if count <= width:
        k = width // count
        return i * k, i * k + k - 1
    c = next(c for c in range(width) if (c + 1) * count // width > i)
    return c, c


def at(load: LoadOverTime, series: tuple[Bucket, ...], width: int, t_ns: int) -> int:
    """The column of an instant: its bucket's, and within a bucket drawn k columns wide, the
    one its time falls in."""
    i = load.slot(t_ns) - series[0].slot
    first, last = columns(i, len(series), width)
    if not 0 <= i < len(series):
        return first if i < 0 else last
    return first + (t_ns % load.bucket_ns) * (last - first + 1) // load.bucket_ns


def marks(load: LoadOverTime, series: tuple[Bucket, ...], width: int) -> Text:
    """Each invocation from its launch `[` to its exit `]`, its number after the `[`. An exit
    and the next launch in one column (the verifier ran between them in less than a column's
    time) are drawn side by side, the launch a column late."""
    cells, after = [" "] * width, -1
    for inv in load.invocations:
        start = 0 if inv.launched_ns is None else at(load, series, width, inv.launched_ns)
        end = width - 1 if inv.exited_ns is None else at(load, series, width, inv.exited_ns)
        start = min(max(start, after + 1), width - 1)
        end = max(end, start)
        cells[start:end + 1] = "─" * (end + 1 - start)
        if inv.exited_ns is not None:
            cells[end] = "]"
        if inv.launched_ns is not None:
            cells[start] = "["
        if start + 1 < end:
            cells[start + 1] = str(inv.n)[-1]
        after = end
    return Text("".join(cells), style="bold")


def said(load: LoadOverTime, series: tuple[Bucket, ...]) -> dict[str, Text]:
    """What each row says in figures: totals and the extremes."""
    answered, failed = sum(b.answered for b in series), sum(b.failed for b in series)
    slowest = max((b.slowest_ns for b in series if b.slowest_ns is not None), default=None)
    top = max(load.per_second(b.answered) for b in series)
    return {"answered": Text(f"{answered:,} answered · {top:.0f}/s at most"),
            "failed": Text(f"{failed:,} of {answered + failed:,}",
                           style="bold red" if failed else ""),
            "slowest": Text("–" if slowest is None else f"{slowest / 1e6:.1f} ms at most")}


class LoadPanel(Vertical):
    view: reactive[ScenarioView | None] = reactive(None, init=False)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._drawn: tuple = ()

    def compose(self) -> ComposeResult:
        for key, words in (*ROWS, ("marks", "invocations")):
            with Horizontal(classes="load-row"):
                yield Label(words, classes="load-name")
                if key == "marks":
                    yield Static("", id="load-marks")
                else:
                    yield Sparkline([], id=f"load-{key}")
                    yield Label("", id=f"load-{key}-said", classes="load-said")

    def on_mount(self) -> None:
        self.border_title = "6 load"

    def on_resize(self) -> None:
        self._draw()

    def watch_view(self) -> None:
        self._draw()

    def _draw(self) -> None:
        view = self.view
        load = view.load if view is not None else None
        key = (view.generation, view.id, load, self.size.width) if view else ()
        if load is None or key == self._drawn:
            return
        self._drawn = key
        series = load.series()
        room = max(1, self.size.width - LABEL_W - SAID_W - 4)
        # a whole number of columns a bucket while they fit, so each mark is in its bucket's;
        # repeated here (Sparkline's own stretching steps by a float, and drifts a column)
        k = max(1, room // len(series)) if series else 1
        width = min(len(series) * k, room) if series else room
        values: dict[str, list[float]] = {
            "answered": [load.per_second(b.answered) for b in series],
            "failed": [b.failed for b in series],
            "slowest": [(b.slowest_ns or 0) / 1e6 for b in series]}
        words = said(load, series) if series else {}
        for name, data in values.items():
            line = self.query_one(f"#load-{name}", Sparkline)
            line.styles.width = width
            line.data = [v for v in data for _ in range(k)]
            self.query_one(f"#load-{name}-said", Label).update(
                words.get(name, Text("no request yet", "dim")))
        self.query_one("#load-marks", Static).update(
            marks(load, series, width) if series else "")
        self.border_subtitle = plain(
            f"{view.id if view else ''}: {', '.join(load.loads)} · {size_words(load.bucket_ns)}"
            " buckets · requests by when they began")
