"""The evlab dashboard: scenarios, live counters, packets, receiver events, claims and verdicts.

Data flows one way. A source (a live Lab or a ReplayDriver, on a Textual thread worker) feeds
the event stream; the DashboardModel consumes it; a timer redraws from the model at REFRESH_S
when something changed. A burst of events therefore costs the UI one redraw, and nothing on the
UI thread ever waits for the lab.
"""

import asyncio
import os
import signal
import time
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Input, Sparkline, Static

from sessions.judging.grading import figure, score_text
from tui.model import DashboardModel, ScenarioView
from tui.sources import LiveSource, ReplaySource
from tui.widgets import STATUS_STYLE, STATUS_TEXT, VERDICT_CLASS, VERDICT_TEXT, FollowLog

REFRESH_S = 0.2   # 5 redraws a second at most
PANE_BURST = 200  # lines a pane takes per redraw
COMPACT_BELOW = (100, 32)
COUNTER_ROWS = (
    ("connects", lambda i: i.counters.get("connects")),
    ("source bytes read", lambda i: i.counters.get("source_read_bytes")),
    ("socket bytes sent", lambda i: i.counters.get("sock_sent_bytes")),
    ("hash_file entries", lambda i: i.functions.get("hash_file")),
    ("switches out", lambda i: i.counters.get("switches_out")),
    ("CPU time ms", lambda i: None if "oncpu_ns" not in i.counters
     else round(i.counters["oncpu_ns"] / 1e6, 1)),
    ("receiver payload bytes", lambda i: i.receiver_payload),
    ("packets", lambda i: i.packets),
)
HELP = """\
[b]evlab dashboard[/b] — evidence, not claims

  j / k, ↓ / ↑    move between scenarios
  enter           on a scenario: run or rerun it · on a clause: open its evidence
  tab             move focus (scenarios → verdicts → panes)
  a               run all scenarios
  space / p       pause or resume live updates (replay: play / pause)
  [ / ]           replay: step back / forward one phase
  + / -           replay: faster / slower
  /               filter the packet, receiver and claim panes (empty: clear)
  end             resume following: the panes' newest lines and the running scenario
  e               export the session archive (.tar.gz)
  g               grade view (`evlab grade`): attempts as dots, Pass@1, pass^k, Best-of-N
  ctrl+p          command palette: the same actions
  ?               this help     q  quit (stops the client, receiver and probes)

Verdicts: ✓ pass  ✗ FAIL  ? inconclusive (evidence missing)  – n/a
Scenario: ✓ detected (verdicts as declared)  ✗ MISSED  ? inconclusive
Grading attempt: ✓ success  ✗ FAILED  ⊘ invalid (an environment or harness reason)
"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help-text")


class EvidenceScreen(ModalScreen):
    """The events that decided one clause."""

    BINDINGS = [Binding("escape,q", "dismiss", "Back")]

    def __init__(self, title: str, lines: list[str]):
        super().__init__()
        self.title_text, self.lines = title, lines

    def compose(self) -> ComposeResult:
        with Vertical(id="evidence-box"):
            yield Static(self.title_text, id="evidence-title")
            log = FollowLog(id="evidence-log")
            yield log

    def on_mount(self) -> None:
        log = self.query_one("#evidence-log", FollowLog)
        log.write_lines(self.lines or ["(no events cited: nothing was needed to decide it)"])
        log.scroll_home(animate=False)


class GradeScreen(ModalScreen):
    """`evlab grade`: who is graded, each scenario's attempts as dots, the metrics, the risks."""

    BINDINGS = [Binding("escape,q,g", "dismiss", "Back")]
    # never colour alone: each outcome has its own symbol
    DOTS = {"success": ("✓", "green"), "failed": ("✗", "bold red"), "invalid": ("⊘", "magenta"),
            "running": ("▶", "bold cyan"), "queued": ("·", "dim")}

    def __init__(self, model: DashboardModel):
        super().__init__()
        self.model = model

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="grade-box"):
            yield Static(self.render_grade(), id="grade")

    def on_mount(self) -> None:
        self.query_one("#grade-box").border_title = "grade (g or esc: back)"
        self.set_interval(0.5, self._refresh)

    def _refresh(self) -> None:
        self.query_one("#grade", Static).update(self.render_grade())

    def render_grade(self) -> Text:
        summary = self.model.grade_summary()
        if summary is None:
            return Text("This session is not a grade: run `evlab grade --client ...`.")
        g = summary["grade"]
        out = Text()
        out.append("client  ", "bold").append(" ".join(g.command) + "\n")
        out.append(f"        {g.executable}  sha256 {g.sha256[:16]}…\n", "dim")
        out.append(f"        {g.attempts} attempt(s) per scenario, each from fresh state\n\n")
        for base, attempts in summary["attempts"].items():
            out.append(f"{base:<13}")
            for _, status in attempts:
                dot, style = self.DOTS.get(status, ("?", "yellow"))
                out.append(dot + " ", style)
            out.append(" " * max(1, 2 * (g.attempts - len(attempts)) + 2))
            out.append(_metrics_text(summary["metrics"][base]) + "\n")
        out.append(f"\n{'overall':<13}" + " " * (2 * g.attempts + 2)
                   + _metrics_text(summary["overall"]) + "\n\n", "bold")
        out.append("✓ success  ✗ failed  ⊘ invalid (left out of the metrics)  ▶ running  · queued"
                   "\n\n", "dim")
        risks = summary["risks"]
        out.append(f"risk findings ({len(risks)}, reported, not judged)\n", "bold")
        for sid, r in risks[:30]:
            style = {"high": "bold red", "medium": "yellow"}.get(r.severity, "")
            out.append(f"  {r.severity:<6} ", style).append(f"{sid} inv {r.invocation} "
                                                             f"{r.kind}: {r.detail}\n")
        for sid, detail in summary["blind"][:10]:
            out.append("  scan   ", "yellow").append(f"{sid} {detail}\n")
        if not risks and not summary["blind"]:
            done = all(status in ("success", "failed", "invalid")
                       for attempts in summary["attempts"].values() for _, status in attempts)
            out.append("  none: every attempt's scan saw all its file, exec and connect events\n"
                       if done else "  none so far\n", "dim")
        return out


def _metrics_text(m: dict) -> str:
    return (f"Pass@1 {figure(m['pass_at_1'])}  pass^k {figure(m['pass_hat_k'])}  "
            f"Best-of-N {figure(m['best_of_n'])}  score {score_text(m, 2, '±')}  "
            f"invalid {m['invalid']}")


class EvlabApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "evlab"
    BINDINGS = [
        Binding("j,down", "move(1)", "Next", show=False),
        Binding("k,up", "move(-1)", "Prev", show=False),
        Binding("a", "run_all", "Run all"),
        Binding("space,p", "pause", "Pause"),
        Binding("left_square_bracket", "step(-1)", "Step back", show=False),
        Binding("right_square_bracket", "step(1)", "Step", show=False),
        Binding("plus,equals_sign", "speed(2)", "Faster", show=False),
        Binding("minus", "speed(0.5)", "Slower", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("end", "follow", "Follow"),
        Binding("e", "export", "Export"),
        Binding("g", "grade", "Grade"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, source: LiveSource | ReplaySource):
        super().__init__()
        self.source = source
        self.paused = False
        self.filter_text = ""
        self.selected = source.scenario_ids[0] if source.scenario_ids else ""
        self.follow_running = True  # show the scenario that is running until the user moves
        self._drawn_version = -1
        self._drawn_key: tuple = ()
        self._verdict_clauses: list[str] = []
        self._compact: bool | None = None
        self._grade_key_shown = False

    # --- layout -------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static("", id="banner")
        with Horizontal(id="top"):
            yield DataTable(id="scenarios", cursor_type="row", zebra_stripes=False)
            with Vertical(id="counters-box"):
                yield DataTable(id="counters", cursor_type="none", show_cursor=False)
                yield Sparkline([0], id="rates")
        yield DataTable(id="verdicts", cursor_type="row")
        with Horizontal(id="panes"):
            yield FollowLog(id="packets")
            yield FollowLog(id="receiver")
            yield FollowLog(id="claims")
        yield Input(placeholder="filter panes (enter to apply, empty to clear, esc to cancel)",
                    id="filter")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.source.mode
        self._apply_compact(self.size.width, self.size.height)
        verdicts = self.query_one("#verdicts", DataTable)
        verdicts.add_column("clause", key="clause", width=19)
        verdicts.add_column("verdict", key="verdict", width=14)
        verdicts.add_column("expected", key="expected", width=8)
        verdicts.add_column("reason", key="reason", width=150)
        for titles, pane in (("packets", "#packets"), ("receiver & kernel events", "#receiver"),
                             ("client claims & exits", "#claims")):
            self.query_one(pane).border_title = titles
        counters_box = self.query_one("#counters-box")
        counters_box.border_title = "live counters"
        verdicts.border_title = "verdicts"
        scenarios = self.query_one("#scenarios", DataTable)
        scenarios.border_title = "scenarios"
        self.query_one("#filter", Input).display = False
        self.source.start(self)
        self._redraw_timer = self.set_interval(REFRESH_S, self.refresh_view)
        scenarios.focus()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._quit_on_signal)
        loop.add_signal_handler(signal.SIGHUP, self._terminal_closed)

    def on_unmount(self) -> None:
        self._redraw_timer.stop()  # no redraw into widgets that are being taken down
        self.source.stop()  # however the app ends, its source's worker must end too

    def _quit_on_signal(self) -> None:
        self.source.stop()
        self.exit()

    def _terminal_closed(self) -> None:
        # The terminal is gone: Textual's orderly shutdown can block writing to it, so clean
        # up the lab here and leave at once (exit status 129 = SIGHUP).
        self.source.stop()
        self.source.wait_stopped()
        os._exit(129)

    def on_resize(self, event) -> None:
        if self.is_mounted:
            self._apply_compact(event.size.width, event.size.height)

    def _apply_compact(self, width: int, height: int) -> None:
        compact = width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
        if compact == self._compact:
            return
        self._compact = compact
        self.set_class(compact, "compact")
        self._build_tables(compact)
        self._drawn_key = ()  # everything is drawn again into the rebuilt tables

    def _build_tables(self, compact: bool) -> None:
        """Scenario and counter tables, narrower on a small terminal (status as a symbol)."""
        scenarios = self.query_one("#scenarios", DataTable)
        scenarios.clear(columns=True)
        scenarios.add_column("scenario", width=17)
        scenarios.add_column("" if compact else "status", width=1 if compact else 14)
        for sid in self.source.scenario_ids:
            scenarios.add_row(sid, "", key=sid)
        scenarios.move_cursor(row=self.source.scenario_ids.index(self.selected)
                              if self.selected in self.source.scenario_ids else 0)
        counters = self.query_one("#counters", DataTable)
        counters.clear(columns=True)
        counters.add_column("counter", key="name", width=18 if compact else 22)
        counters.add_column("inv 1", key="1", width=11 if compact else 14)
        counters.add_column("inv 2", key="2", width=11 if compact else 14)
        for label, _ in COUNTER_ROWS:
            counters.add_row(label, "", "", key=label)

    # --- redraw (timer, UI thread) ------------------------------------------------------
    def refresh_view(self) -> None:
        try:
            self._refresh_view()
        except NoMatches:
            pass  # the app is shutting down and its widgets are already gone

    def _refresh_view(self) -> None:
        model = self.source.model
        if model.grade is not None and not self._grade_key_shown:
            self._grade_key_shown = True
            self.refresh_bindings()  # the session said it is a grade: show `g` in the footer
        if self.follow_running and not self.paused:
            self._follow_running(model)
        key = (id(model), model.version, self.selected, self.filter_text)
        if self.paused or key == self._drawn_key:
            self._draw_status(model)
            return
        # Panes are appended to while the same model and view are shown; a new model (replay
        # stepped back), another scenario or another filter draws them afresh.
        previous, self._drawn_key = self._drawn_key, key
        redraw_panes = not previous or previous[0] != key[0] or previous[2:] != key[2:]
        self._draw_scenarios(model)
        view = model.snapshot_scenario(self.selected)
        if view is not None:
            self._draw_counters(view)
            self._draw_verdicts(view)
            self._draw_panes(view, redraw_panes)
        self._draw_banner(model)
        self._draw_status(model)

    def _draw_scenarios(self, model: DashboardModel) -> None:
        table = self.query_one("#scenarios", DataTable)
        for sid, status in model.statuses():
            text = STATUS_TEXT.get(status, status)
            label = Text(text[0] if self._compact else text, style=STATUS_STYLE.get(status, ""))
            if sid not in table.rows:
                table.add_row(sid, label, key=sid)
                self.source.scenario_ids.append(sid)
            else:
                table.update_cell(sid, table.ordered_columns[1].key, label)

    def _draw_counters(self, view: ScenarioView) -> None:
        table = self.query_one("#counters", DataTable)
        for n in (1, 2):
            inv = view.invocations.get(n)
            for label, get in COUNTER_ROWS:
                value = get(inv) if inv else None
                if inv is not None and value is None:
                    text = Text("not observed", style="dim")
                else:
                    text = "" if value is None else f"{value:,}"
                table.update_cell(label, str(n), text)
        phase = f"{view.phase} {view.invocation}" if view.phase == "invocation" else view.phase
        self.query_one("#counters-box").border_subtitle = f"{view.id}: {phase or 'waiting'}"
        rates = self.query_one("#rates", Sparkline)
        rates.data = list(view.rates) or [0]
        rates.set_class(not any(view.rates), "empty")  # no flat bar pretending to be a rate

    def _draw_verdicts(self, view: ScenarioView) -> None:
        table = self.query_one("#verdicts", DataTable)
        rows = self.source.model.verdict_rows(view.id)
        if [c for c, _ in rows] != self._verdict_clauses:
            table.clear()
            for clause, _ in rows:
                table.add_row(clause, "", "", "", key=clause)
            self._verdict_clauses = [c for c, _ in rows]
        for clause, verdict in rows:
            expected = "fail" if clause in view.expected_failures else "not-fail"
            if verdict is None:
                cells = (Text("… pending", style="dim"), expected, "")
            else:
                cells = (Text(VERDICT_TEXT[verdict.status], style=VERDICT_CLASS[verdict.status]),
                         getattr(verdict, "expected", expected), verdict.reason)
            for column, value in zip(("verdict", "expected", "reason"), cells, strict=True):
                table.update_cell(clause, column, value)
        table.border_subtitle = (f"{view.id}: {STATUS_TEXT.get(view.status, view.status)}"
                                 + (f" — {view.judged_detail}" if view.judged_detail else ""))

    def _draw_panes(self, view: ScenarioView, redraw: bool) -> None:
        needle = self.filter_text.lower()
        for pane_id, lines in (("#packets", view.packets), ("#receiver", view.receiver),
                               ("#claims", view.claims)):
            log = self.query_one(pane_id, FollowLog)
            if redraw:
                log.clear()
                log.shown = 0
            new = [(seq, text) for seq, text in lines if seq > log.shown]
            if not new:
                continue
            log.shown = new[-1][0]
            shown = [text for _, text in new if not needle or needle in text.lower()]
            if len(shown) > PANE_BURST:
                # A burst faster than anyone reads: show its newest lines, say what was skipped.
                skipped = len(shown) - PANE_BURST
                shown = [f"… {skipped:,} lines skipped (burst; filter or pause to inspect)",
                         *shown[-PANE_BURST:]]
            log.write_lines(shown)

    def _draw_banner(self, model: DashboardModel) -> None:
        banner = self.query_one("#banner", Static)
        problem = self.source.problem() if hasattr(self.source, "problem") else None
        if not model.missing and not problem:
            banner.display = False
            return
        banner.display = True
        lines = [f"⚠ {problem}"] if problem else []
        lines += [f"⚠ missing: {m.name} — {m.detail}. Fix: {m.fix}" for m in model.missing[:4]]
        if model.missing:
            lines.append("Clauses that need it show '? inconclusive'.")
        banner.update("\n".join(lines))

    def _draw_status(self, model: DashboardModel) -> None:
        overhead = model.overhead or {}
        bpf = overhead.get("bpf_run_time_ns")
        eps = overhead.get("events_per_s")
        capabilities = (f"{len(model.missing)} capabilities missing" if model.missing
                        else "all capabilities present")
        conditions = self._scenario_conditions(model)
        header = f"{self.source.mode} · {conditions}" if conditions else self.source.mode
        if self.sub_title != header:
            self.sub_title = header  # noise on/off and faults for the selected scenario
        box = model.sandbox
        sandbox = ("" if box is None else "sandboxed" if box.enabled else "NOT SANDBOXED")
        parts = [f"collector {model.collector}", f"packets {model.packets_mode}", sandbox,
                 capabilities,
                 f"lost events {model.lost_events}",
                 f"probe cost {bpf / 1e6:.1f} ms BPF" if bpf is not None else "probe cost n/a",
                 f"{eps:.0f} ev/s" if eps is not None else "",
                 self.source.position_text(),
                 "PAUSED" if self.paused else "",
                 f"filter '{self.filter_text}'" if self.filter_text else ""]
        self.query_one("#status", Static).update(" · ".join(p for p in parts if p))

    def _scenario_conditions(self, model: DashboardModel) -> str:
        conditions = model.conditions(self.selected)
        if conditions is None:
            return ""
        kinds, armed, fired = conditions
        noise = f"noise {','.join(kinds)}" if kinds else "noise off"
        faults = f"faults {fired}/{armed} fired" if armed else "no faults"
        return f"{noise} · {faults}"

    # --- actions ------------------------------------------------------------------------
    def action_move(self, delta: int) -> None:
        self.follow_running = False  # the user chose; End hands the choice back
        table = self.query_one("#scenarios", DataTable)
        table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + delta)))
        self._select_row(table.cursor_row)

    def _follow_running(self, model: DashboardModel) -> None:
        running = next((sid for sid, status in model.statuses() if status == "running"), None)
        if running and running != self.selected and running in self.source.scenario_ids:
            self.query_one("#scenarios", DataTable).move_cursor(
                row=self.source.scenario_ids.index(running))
            self.selected = running

    def _select_row(self, row: int) -> None:
        if 0 <= row < len(self.source.scenario_ids):
            self.selected = self.source.scenario_ids[row]
            self.refresh_view()

    @on(DataTable.RowHighlighted, "#scenarios")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._select_row(event.cursor_row)

    @on(DataTable.RowSelected, "#scenarios")
    def _run_selected(self, event: DataTable.RowSelected) -> None:
        self.source.run([self.source.scenario_ids[event.cursor_row]], self)

    @on(DataTable.RowSelected, "#verdicts")
    def _open_evidence(self, event: DataTable.RowSelected) -> None:
        clause = self._verdict_clauses[event.cursor_row]
        self.open_evidence(clause)

    def open_evidence(self, clause: str) -> None:
        model = self.source.model
        verdict = dict(model.verdict_rows(self.selected)).get(clause)
        if verdict is None:
            self.notify(f"{clause}: not judged yet", severity="warning")
            return
        lines = [f"#{e.seq:<6} {describe(e, model.session_t0)}"
                 for e in model.evidence(verdict.evidence)]
        missing = len(verdict.evidence) - len(lines)
        if missing:
            lines.append(f"({missing} cited events are no longer held in memory; "
                         "export the archive for all)")
        title = (f"{self.selected} · {clause}: {VERDICT_TEXT[verdict.status]} "
                 f"(expected {getattr(verdict, 'expected', 'not-fail')})\n{verdict.reason}")
        self.push_screen(EvidenceScreen(title, lines))

    def action_run_all(self) -> None:
        self.source.run(list(self.source.scenario_ids), self)

    def action_pause(self) -> None:
        if self.source.toggle_play():
            return  # replay: space plays and pauses the recording
        self.paused = not self.paused
        self.notify("live updates paused" if self.paused else "live updates resumed")
        self.refresh_view()

    def action_step(self, direction: int) -> None:
        if not self.source.step(direction):
            self.notify("stepping is for replays (evlab replay ARCHIVE)")

    def action_speed(self, factor: float) -> None:
        if not self.source.scale_speed(factor):
            self.notify("speed is for replays (evlab replay ARCHIVE)")

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.value = self.filter_text
        box.focus()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.filter_text = event.value.strip()
        event.input.display = False
        self.query_one("#scenarios").focus()
        self.refresh_view()

    def on_key(self, event) -> None:
        box = self.query_one("#filter", Input)
        if event.key == "escape" and box.display:
            box.display = False
            self.query_one("#scenarios").focus()
            event.stop()

    def action_follow(self) -> None:
        self.follow_running = True
        for log in self.query(FollowLog):
            log.follow()

    def action_export(self) -> None:
        path = Path.cwd() / time.strftime("evlab-session-%Y%m%d-%H%M%S.tar.gz")
        try:
            written = self.source.export(path)
        except Exception as e:  # shown, not raised: the dashboard keeps running
            self.notify(f"export failed: {e}", severity="error", timeout=10)
            return
        self.notify(f"archive written to {written}", timeout=10)

    def check_action(self, action: str, parameters) -> bool | None:
        # The grade view exists only in an `evlab grade` session (its key hidden otherwise).
        if action == "grade":
            return self.source.model.grade is not None
        return True

    def action_grade(self) -> None:
        self.push_screen(GradeScreen(self.source.model))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self.notify("stopping the client, receiver and probes…")
        self.source.stop()
        self.exit()

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for title, help_text, action in (
            ("Run all scenarios", "run every scenario", self.action_run_all),
            ("Run selected scenario", "run or rerun the highlighted scenario",
             lambda: self.source.run([self.selected], self)),
            ("Pause / resume", "pause live updates (replay: play/pause)", self.action_pause),
            ("Filter panes", "filter packets, receiver events and claims", self.action_filter),
            ("Follow panes", "resume following after scrolling up", self.action_follow),
            ("Export archive", "write the session archive (.tar.gz)", self.action_export),
            ("Help", "keys and symbols", self.action_help),
        ):
            yield SystemCommand(title, help_text, action)


def describe(event, t0: int) -> str:
    """One line for an event in the evidence view."""
    data = {k: v for k, v in vars(event).items() if k not in ("seq", "t_ns", "scenario")}
    when = f"{(event.t_ns - t0) / 1e9:8.3f}s" if t0 else ""
    fields = " ".join(f"{k}={v}" for k, v in data.items() if v not in (None, {}, ()))
    return f"{when} {type(event).__name__}: {fields}"
