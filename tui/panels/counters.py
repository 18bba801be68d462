"""Live counters: the selected scenario's counters per invocation, the client's process metrics,
and a sparkline of bytes moved per sample."""

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Sparkline

from tui.model import InvocationFigures, ScenarioView

COUNTER_ROWS = (
    ("connects", lambda f: f.counter("connects")),
    ("source bytes read", lambda f: f.counter("source_read_bytes")),
    ("socket bytes sent", lambda f: f.counter("sock_sent_bytes")),
    ("hash_file entries", lambda f: f.function("hash_file")),
    ("switches out", lambda f: f.counter("switches_out")),
    ("CPU time ms", lambda f: None if (ns := f.counter("oncpu_ns")) is None
     else round(ns / 1e6, 1)),
    ("receiver payload bytes", lambda f: f.receiver_payload),
    ("packets", lambda f: f.packets),
)
METRICS_ROW = "client RSS · CPU"   # the runner's ProcessMetrics, sampled while it runs
INVOCATIONS = (1, 2)


class CountersPanel(Vertical):
    view: reactive[ScenarioView | None] = reactive(None, init=False)
    compact = reactive(False)   # a small terminal: narrower columns

    def compose(self) -> ComposeResult:
        yield DataTable(id="counters", cursor_type="none", show_cursor=False)
        yield Sparkline([0], id="rates")

    def on_mount(self) -> None:
        self.border_title = "live counters"

    def watch_compact(self) -> None:
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_column("counter", key="name", width=18 if self.compact else 22)
        for n in INVOCATIONS:
            table.add_column(f"inv {n}", key=str(n), width=11 if self.compact else 14)
        for label in [label for label, _ in COUNTER_ROWS] + [METRICS_ROW]:
            table.add_row(label, "", "", key=label)
        self._fill()

    def watch_view(self) -> None:
        self._fill()

    def _fill(self) -> None:
        view = self.view
        if view is None:
            return
        table = self.query_one(DataTable)
        for n in INVOCATIONS:
            figures = view.invocations.get(n)
            for label, get in COUNTER_ROWS:
                table.update_cell(label, str(n), _cell(figures, get))
            table.update_cell(METRICS_ROW, str(n), _metrics_cell(figures))
        phase = f"{view.phase} {view.invocation}" if view.phase == "invocation" else view.phase
        self.border_subtitle = f"{view.id}: {phase or 'waiting'}"
        rates = self.query_one(Sparkline)
        rates.data = list(view.rates) or [0]
        rates.set_class(not any(view.rates), "empty")  # no flat bar pretending to be a rate


def _cell(figures: InvocationFigures | None, get) -> Text | str:
    value = get(figures) if figures else None
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
