"""The timeline view (key `t`): the selected scenario's or attempt's Timeline
(sessions/output/timeline.py, from the evidence book alone, so a replay draws the same picture).
Time runs across; one lane per process of the client's tree, then the task's servers (and the
fault proxy); each kind of mark has its own glyph and colour (never colour alone), the
endpoint's connects another colour than the rest. `+`/`-` zoom, `left`/`right` move, `0` the
whole; below the chart, every mark and span in view with its time and label.

Drawn by hand with Rich Text: plotext (textual-plotext) plots numeric series on framed axes, not
lanes of glyphs per row with a priority per cell, and would be a new dependency for ~100 lines.
"""

import math
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header, Static

from sessions.output.timeline import Timeline, round_step
from tui.model import DashboardModel
from tui.styles import plain

# mark kind -> glyph, style, words; drawn in this order, so a later kind wins a shared cell
MARKS = {
    "invocation-start": ("[", "bold", "invocation"),
    "invocation-end": ("]", "bold", ""),
    "claim": ("•", "blue", "claim"),
    "exec": ("▸", "yellow", "exec"),
    "exit": ("■", "yellow", "exit"),
    "connect-endpoint": ("→", "bold cyan", "endpoint connect"),
    "start": ("↑", "bold cyan", "start"),
    "commit": ("✓", "bold green", "commit"),
    "connect-other": ("↗", "bold magenta", "other connect"),
    "reject": ("✗", "bold red", "reject"),
    "fault": ("!", "bold white on red", "fault"),
    "signal": ("⚑", "bold magenta", "signal"),
    "truncate": ("✂", "bold red", ""),   # (the legend has room for one more word)
    "server-start": ("+", "cyan", ""),
    "server-exit": ("×", "bold red", ""),
}
SPANS = {   # span kind -> glyph, style, words; a later kind is drawn over an earlier one
    "invocation": ("┈", "dim", "running"),
    "alive": ("─", "yellow", "alive"),
    "connection": ("━", "blue", "connection"),
    "busy": ("▒", "red", "busy"),
}
MIN_SPAN_NS = 10_000        # the closest zoom: 10 µs across the chart
LABEL_MIN, LABEL_MAX = 10, 30
LIST_MAX = 1000             # lines of the list of what is in view


@dataclass(frozen=True)
class Window:
    """The stretch of time in view: [start_ns, start_ns + span_ns]."""

    start_ns: int
    span_ns: int

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.span_ns

    def column(self, t_ns: int, width: int) -> int | None:
        """The chart column of an instant (the window's end is its last column); None if out."""
        if not self.start_ns <= t_ns <= self.end_ns:
            return None
        return min(width - 1, (t_ns - self.start_ns) * width // max(1, self.span_ns))

    def zoomed(self, factor: float, whole_ns: int) -> "Window":
        span = int(min(max(self.span_ns / factor, MIN_SPAN_NS), max(whole_ns, MIN_SPAN_NS)))
        return Window(self.start_ns + (self.span_ns - span) // 2, span).clamped(whole_ns)

    def moved(self, fraction: float, whole_ns: int) -> "Window":
        return Window(self.start_ns + int(self.span_ns * fraction), self.span_ns).clamped(
            whole_ns)

    def clamped(self, whole_ns: int) -> "Window":
        return Window(max(0, min(self.start_ns, whole_ns - self.span_ns)), self.span_ns)


def whole(timeline: Timeline) -> Window:
    return Window(0, max(timeline.end_ns, MIN_SPAN_NS))


def when(t_ns: float, step_ns: float, scale_ns: float | None = None) -> str:
    """An instant to the digit of step_ns, in a unit for scale_ns (the stretch shown; ten
    steps by default): seconds from 10 s, milliseconds from 100 µs, else microseconds."""
    scale = scale_ns or step_ns * 10
    unit, name = (1e9, "s") if scale >= 1e10 else (1e6, "ms") if scale >= 1e5 else (1e3, "µs")
    digits = max(0, min(6, -math.floor(math.log10(max(step_ns, 1) / unit))))
    return f"{t_ns / unit:.{digits}f} {name}"


def _step(span_ns: int, width: int) -> int:
    """A round interval between ticks, one every ~14 columns at most."""
    return int(round_step(max(span_ns * 14 / max(1, width), 1)))


def axis(window: Window, label_w: int, width: int) -> Text:
    """The time axis: a tick label where it fits, starting at its tick's column."""
    chart_w = width - label_w - 1
    line = [" "] * chart_w
    step = _step(window.span_ns, chart_w)
    t = -(-window.start_ns // step) * step
    while t <= window.end_ns:
        column = window.column(t, chart_w)
        text = "┆" + when(t, step)
        if column is not None and column + len(text) <= chart_w and (
                column == 0 or line[column - 1] == " "):
            line[column:column + len(text)] = list(text)
        t += step
    return Text(" " * (label_w + 1)) + Text("".join(line), style="dim")


def lane(timeline: Timeline, row: str, window: Window, label_w: int, width: int) -> Text:
    """One row: its name, then its spans and marks across the window."""
    chart_w = width - label_w - 1
    cells: list[tuple[str, str]] = [(" ", "")] * chart_w
    for span in sorted((s for s in timeline.spans if s.row == row),
                       key=lambda s: list(SPANS).index(s.kind) if s.kind in SPANS else 0):
        if span.end_ns < window.start_ns or span.start_ns > window.end_ns:
            continue
        glyph, style, _ = SPANS.get(span.kind, ("─", "", ""))
        first = window.column(max(span.start_ns, window.start_ns), chart_w) or 0
        last = window.column(min(span.end_ns, window.end_ns), chart_w)
        for c in range(first, (chart_w - 1 if last is None else last) + 1):
            cells[c] = (glyph, style)
    order = list(MARKS)
    for mark in sorted((m for m in timeline.marks if m.row == row),
                       key=lambda m: order.index(m.kind) if m.kind in order else -1):
        column = window.column(mark.t_ns, chart_w)
        if column is not None:
            glyph, style, _ = MARKS.get(mark.kind, ("?", "bold", ""))
            cells[column] = (glyph, style)
    name = row if len(row) <= label_w else row[:label_w - 1] + "…"
    out = plain(f"{name:<{label_w}} ", "bold" if row in timeline.servers else "")
    for glyph, style in cells:
        out.append(glyph, style)
    return out


def legend(width: int) -> list[Text]:
    """Every glyph and what it means, packed into lines of the width."""
    entries = [(g, s, w) for g, s, w in MARKS.values() if w] + [
        (g, s, w) for k, (g, s, w) in SPANS.items() if k != "busy"]
    entries[0] = ("[ ]", entries[0][1], entries[0][2])
    lines, line = [], Text()
    for glyph, style, words in entries:
        piece = Text(glyph, style) + Text(f" {words}")
        if line.cell_len and line.cell_len + 2 + piece.cell_len > width:
            lines.append(line)
            line = Text()
        line += (Text("  ") if line.cell_len else Text()) + piece
    return [*lines, line]


def in_view(timeline: Timeline, window: Window, width: int = 200) -> Text:
    """Every mark and span in the window (lives aside: the lanes show them), in time order."""
    step, span = max(1, window.span_ns // 1000), window.span_ns
    items = [(m.t_ns, m.row, when(m.t_ns, step, span), MARKS.get(m.kind), m.label)
             for m in timeline.marks if window.start_ns <= m.t_ns <= window.end_ns]
    items += [(s.start_ns, s.row, f"{when(s.start_ns, step, span)}–{when(s.end_ns, step, span)}",
               SPANS.get(s.kind), s.label) for s in timeline.spans
              if s.kind != "alive" and s.start_ns <= window.end_ns and s.end_ns >= window.start_ns]
    stamp_w = max((len(x[2]) for x in items), default=0)
    row_w = min(max(LABEL_MIN, width // 4), max((len(x[1]) for x in items), default=0))
    items.sort(key=lambda x: (x[0], x[1]))
    shown = []   # one line each (no wrapping: tui/app.tcss); a wide terminal shows them whole
    for _, row, stamp, drawn, label in items[:LIST_MAX]:
        glyph, style, _ = drawn or ("?", "", "")
        shown.append(Text(f"{stamp:>{stamp_w}} ").append(glyph, style).append_text(
            plain(f" {row[:row_w]:<{row_w}} {label}")))
    if len(items) > LIST_MAX:
        shown.append(Text(f"({len(items) - LIST_MAX:,} more: + zooms in)", "dim"))
    return Text("\n").join(shown) if items else Text(
        "(nothing in view: - zooms out, 0 shows the whole)", "dim")


class TimelineChart(Widget):
    """The axis, one lane per row and the legend, for the window given."""

    DEFAULT_CSS = "TimelineChart { height: auto; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.timeline: Timeline | None = None
        self.window = Window(0, MIN_SPAN_NS)
        self.first_row = 0          # rows scrolled past (more rows than fit)
        self.rows_max = 30

    def show(self, timeline: Timeline | None, window: Window) -> None:
        self.timeline, self.window = timeline, window
        self.refresh(layout=True)

    def render(self) -> Text:
        width = self.size.width or 80
        tl = self.timeline
        if tl is None:
            return Text("This scenario has not started: nothing to draw yet.", "dim")
        label_w = max(LABEL_MIN, min(LABEL_MAX, width // 4, max(map(len, tl.rows), default=0)))
        rows = tl.rows[self.first_row:self.first_row + self.rows_max]
        lines = [axis(self.window, label_w, width)]
        lines += [lane(tl, row, self.window, label_w, width) for row in rows]
        hidden = len(tl.rows) - len(rows)
        if hidden:
            lines.append(Text(f"({hidden} more row(s): up/down)", "dim"))
        lines += legend(width)
        return Text("\n").join(lines)


ZOOM, MOVE = Binding.Group("Zoom", compact=True), Binding.Group("Move", compact=True)


class TimelineScreen(Screen):
    """The timeline over the dashboard; `t` or escape goes back."""

    BINDINGS = [
        Binding("t,escape", "dismiss", "Back", key_display="t/esc"),
        Binding("plus,equals_sign", "zoom(2)", "Zoom in", key_display="+", group=ZOOM),
        Binding("minus", "zoom(0.5)", "Zoom out", key_display="-", group=ZOOM),
        Binding("left", "move(-0.25)", "Earlier", key_display="←", group=MOVE),
        Binding("right", "move(0.25)", "Later", key_display="→", group=MOVE),
        Binding("0,home", "whole", "Whole"),
        Binding("j", "scenario(1)", "Next", show=False),
        Binding("k", "scenario(-1)", "Prev", show=False),
        Binding("down", "rows(1)", "Rows down", show=False),
        Binding("up", "rows(-1)", "Rows up", show=False),
        Binding("pagedown", "page(1)", "List down", show=False),
        Binding("pageup", "page(-1)", "List up", show=False),
    ]

    def __init__(self, model: DashboardModel, scenario: str):
        super().__init__()
        self.model, self.scenario = model, scenario
        self.timeline: Timeline | None = None
        self.window: Window | None = None   # None: the whole, following a live run
        self._drawn: tuple = ()

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static("", id="timeline-title")
        yield TimelineChart(id="timeline-chart")
        with VerticalScroll(id="timeline-list", can_focus=False):   # the keys are the chart's
            yield Static("", id="timeline-items")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#timeline-list").border_title = "in view (pgup/pgdn)"
        self.set_interval(0.25, self._refresh)
        self._refresh()

    def on_resize(self) -> None:
        # a small terminal: ctrl+p in the help only (room for q Quit), as on the dashboard
        self.query_one(Footer).show_command_palette = self.size.width >= 100
        self._draw()

    def _refresh(self) -> None:
        key = (self.model.generation, self.model.version, self.scenario)
        if key != self._drawn:
            self._drawn = key
            self.timeline = self.model.timeline(self.scenario)
            self._draw()

    def shown_window(self) -> Window:
        whole_window = whole(self.timeline) if self.timeline else Window(0, MIN_SPAN_NS)
        return whole_window if self.window is None else self.window

    def _draw(self) -> None:
        tl, window = self.timeline, self.shown_window()
        chart = self.query_one(TimelineChart)
        chart.rows_max = max(2, self.size.height - 16)
        chart.show(tl, window)
        end = tl.end_ns if tl else 0
        title = Text.assemble(
            ("timeline ", "bold"), plain(self.scenario, "bold"),
            f"  {when(window.start_ns, window.span_ns // 100, window.span_ns)} to "
            f"{when(window.end_ns, window.span_ns // 100, window.span_ns)} of "
            f"{when(end, end // 100 or 1, end)}"
            f"  (zoom {max(1, end) / window.span_ns:.3g}x)", ("  j/k: scenario", "dim"))
        self.query_one("#timeline-title", Static).update(title)
        self.query_one("#timeline-items", Static).update(
            in_view(tl, window, self.size.width) if tl else Text(""))

    def action_zoom(self, factor: float) -> None:
        if self.timeline is not None:
            self.window = self.shown_window().zoomed(factor, self.timeline.end_ns)
            self._draw()

    def action_move(self, fraction: float) -> None:
        if self.timeline is not None:
            self.window = self.shown_window().moved(fraction, self.timeline.end_ns)
            self._draw()

    def action_whole(self) -> None:
        self.window = None
        self._draw()

    def action_rows(self, delta: int) -> None:
        chart = self.query_one(TimelineChart)
        rows = len(self.timeline.rows) if self.timeline else 0
        chart.first_row = max(0, min(chart.first_row + delta, rows - chart.rows_max))
        self._draw()

    def action_page(self, direction: int) -> None:
        box = self.query_one("#timeline-list", VerticalScroll)
        (box.scroll_page_down if direction > 0 else box.scroll_page_up)(animate=False)

    def action_scenario(self, delta: int) -> None:
        """The next or previous scenario that has started (its attempt, in a grade)."""
        started = [sid for sid, status in self.model.statuses() if status != "queued"]
        if self.scenario in started:
            i = started.index(self.scenario) + delta
            if 0 <= i < len(started):
                self.scenario, self.window, self._drawn = started[i], None, ()
                self.query_one(TimelineChart).first_row = 0
                self._refresh()
