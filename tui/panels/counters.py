"""Live counters: the selected scenario's counters per invocation, the client's process metrics,
and a sparkline of bytes moved per sample."""

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Sparkline

from tui.model import InvocationFigures, ScenarioView

# evlab's own rows, for every task; the task's figures follow (task.toml [[figures]])
COUNTER_ROWS = (
    ("connects", lambda f: f.counter("connects")),
    ("socket bytes sent", lambda f: f.counter("sock_sent_bytes")),
    ("switches out", lambda f: f.counter("switches_out")),
    ("CPU time ms", lambda f: None if (ns := f.counter("oncpu_ns")) is None
     else round(ns / 1e6, 1)),
    ("packets", lambda f: f.packets),
)
METRICS_ROW = "client RSS · CPU"   # the runner's ProcessMetrics, sampled while it runs


class CountersPanel(Vertical):
    view: reactive[ScenarioView | None] = reactive(None, init=False)
    compact = reactive(False)   # a small terminal: narrower columns

    def compose(self) -> ComposeResult:
        yield DataTable(id="counters", cursor_type="none", show_cursor=False)
        yield Sparkline([0], id="rates")

    def on_mount(self) -> None:
        self.border_title = "live counters"

    _shape: tuple[int, tuple[str, ...]] | None = None   # (invocations, the task's figures)

    def watch_compact(self) -> None:
        self._shape = None
        self._fill()

    def watch_view(self) -> None:
        self._fill()

    def _lay_out(self, shape: tuple[int, tuple[str, ...]]) -> None:
        """Columns for the task's invocations, rows for evlab's figures and the task's."""
        count, task_rows = shape
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_column("counter", key="name", width=18 if self.compact else 22)
        for n in range(1, count + 1):
            table.add_column(f"inv {n}", key=str(n), width=11 if self.compact else 14)
        for label in [*(label for label, _ in COUNTER_ROWS), *task_rows, METRICS_ROW]:
            table.add_row(label, *[""] * count, key=label)
        self._shape = shape

    def _fill(self) -> None:
        view = self.view
        shape = (view.invocation_count, view.figure_labels) if view else (2, ())
        if shape != self._shape:
            self._lay_out(shape)
        if view is None:
            return
        table = self.query_one(DataTable)
        for n in range(1, shape[0] + 1):
            figures = view.invocations.get(n)
            for label, get in COUNTER_ROWS:
                table.update_cell(label, str(n), _cell(figures, get))
            for label, value in figures.task if figures is not None else ():
                if label in view.figure_labels:
                    table.update_cell(label, str(n), _shown(figures, value))
            table.update_cell(METRICS_ROW, str(n), _metrics_cell(figures))
        phase = f"{view.phase} {view.invocation}" if view.phase == "invocation" else view.phase
        self.border_subtitle = f"{view.id}: {phase or 'waiting'}"
        rates = self.query_one(Sparkline)
        rates.data = list(view.rates) or [0]
        rates.set_class(not any(view.rates), "empty")  # no flat bar pretending to be a rate


def _cell(figures: InvocationFigures | None, get) -> Text | str:
    return _shown(figures, get(figures) if figures else None)


def _shown(figures: InvocationFigures | None, value) -> Text | str:
    if figures is not None and value is None:
        return Text("not observed", style="dim")
    return "" if value is None else f"{value:,}"


def _metrics_cell(figures: InvocationFigures | None) -> Text | str:
    if figures is None:
        return ""
    client = figures.client
    if client is None:
        return Text("–", style="dim")
    cpu = figures.client_cpu_percent
    return f"{client.rss_bytes / 2**20:.1f} MiB" + ("" if cpu is None else f" {cpu:.0f}%")
