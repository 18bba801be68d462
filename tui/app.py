"""The evlab dashboard: scenarios, live counters, packets, servers' records, claims and verdicts.

Data flows one way. A feed (a live Lab or a ReplayDriver, on a Textual thread worker) drives
the event stream; the DashboardModel consumes it; a timer hands the panels a fresh view of the
model at REFRESH_S when something changed (attributes down). A burst of events therefore costs
the UI one redraw, and nothing on the UI thread ever waits for the lab. The panels post
messages for what the user asks (messages up); the app acts on them.
"""

import asyncio
import os
import signal
import time
from pathlib import Path

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widgets import Footer, Header

from sessions.output.vocabulary import fields_line, status_text
from tui.feed import Feed
from tui.follow_log import FollowLog
from tui.grade import GradeScreen
from tui.leaderboard import LeaderboardScreen
from tui.messages import EvidenceRequested, FilterChanged, RunRequested, ScenarioSelected
from tui.model import DashboardModel, SessionFacts
from tui.panels import (
    Banner,
    CountersPanel,
    FilterBox,
    LoadPanel,
    PanesPanel,
    ScenarioList,
    StatusFacts,
    StatusLine,
    VerdictTable,
)
from tui.screens import EvidenceScreen, HelpScreen
from tui.timeline import TimelineScreen

REFRESH_S = 0.2   # 5 redraws a second at most
# the dashboard's own keys (its list, panes, filter): not on the leaderboard or the timeline
DASHBOARD_ONLY = ("move", "run_all", "filter", "follow", "show", "timeline")
COMPACT_BELOW = (100, 32)
# keys 1-6, in order: the verdicts, one evidence pane or the load view (by its widget id)
PANELS = {"verdicts": "Verdicts", "packets": "Packets", "events": "Events", "claims": "Claims",
          "effects": "File effects", "load": "Load"}


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
        *(Binding(str(n), f"show('{panel}')", label, show=False)
          for n, (panel, label) in enumerate(PANELS.items(), 1)),
        Binding("t", "timeline", "Timeline"),
        Binding("e", "export", "Export"),
        Binding("g", "grade", "Grade"),
        Binding("l", "leaderboard", "Leaderboard"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]
    compact = reactive(False)     # below COMPACT_BELOW: symbols, one panel below at a time
    shown = reactive("verdicts")  # compact: that panel (keys 1-5: verdicts or a pane)
    filter_text = reactive("")    # what the panes show only lines containing

    def __init__(self, feed: Feed):
        super().__init__()
        self.feed = feed
        self.paused = False
        ids = feed.scenario_ids
        self.selected = ids[0] if ids else ""
        self.follow_running = True  # show the scenario that is running until the user moves
        self._drawn_key: tuple = ()
        self._grade_key_shown = False
        self._board_shown = False   # a campaign opens on its leaderboard, once

    # --- layout -------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Banner("", id="banner")
        with Horizontal(id="top"):
            yield ScenarioList(self.feed.scenario_ids, id="scenarios").data_bind(
                EvlabApp.compact)
            yield CountersPanel(id="counters-box").data_bind(EvlabApp.compact)
        yield LoadPanel(id="load")   # a task with evlab's load only (class has-load)
        yield VerdictTable(id="verdicts")
        yield PanesPanel(id="panes").data_bind(EvlabApp.filter_text)
        yield FilterBox(id="filter")
        yield StatusLine("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.feed.mode
        self.compact = _small(self.size.width, self.size.height)
        self.add_class(f"show-{self.shown}")
        self.feed.start()
        self.run_worker(self.feed.serve, thread=True, name=self.feed.mode, group="feed",
                        exit_on_error=False)
        self._redraw_timer = self.set_interval(REFRESH_S, self.refresh_view)
        self.query_one(ScenarioList).focus()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._quit_on_signal)
        loop.add_signal_handler(signal.SIGHUP, self._terminal_closed)

    def on_unmount(self) -> None:
        self._redraw_timer.stop()  # no redraw into widgets that are being taken down
        self.feed.stop()  # however the app ends, its feed's worker must end too

    def _quit_on_signal(self) -> None:
        self.feed.stop()
        self.exit()

    def _terminal_closed(self) -> None:
        # The terminal is gone: Textual's orderly shutdown can block writing to it, so clean
        # up the lab here and leave at once (exit status 129 = SIGHUP).
        self.feed.stop()
        self.feed.wait_stopped()
        os._exit(129)

    def on_resize(self, event) -> None:
        self.compact = _small(event.size.width, event.size.height)

    def watch_compact(self, compact: bool) -> None:
        self.set_class(compact, "compact")
        # a small terminal: ctrl+p in the help only (room for t, g and q in the footer)
        self.query_one(Footer).show_command_palette = not compact

    def watch_shown(self, old: str, new: str) -> None:
        self.remove_class(f"show-{old}")
        self.add_class(f"show-{new}")

    def action_show(self, panel: str) -> None:
        """Keys 1-6: the verdicts, one evidence pane or the load view, in the room below the
        scenarios (a small terminal shows one at a time; a larger one shows them all, and the
        key focuses it). Packets and file effects share a column on a larger one: 2 or 5
        chooses. The load view is for a task with evlab's load (app.tcss, has-load)."""
        self.shown = panel
        if panel in ("packets", "effects"):
            self.set_class(panel == "packets", "pick-packets")
            self.set_class(panel == "effects", "pick-effects")
        target = "#verdicts" if panel == "verdicts" else f"#{panel}"
        self.query_one(target).focus()

    # --- redraw (timer, UI thread) ------------------------------------------------------
    def refresh_view(self) -> None:
        try:
            self._refresh_view()
        except NoMatches:
            pass  # the app is shutting down and its widgets are already gone

    def _refresh_view(self) -> None:
        model = self.feed.model
        if model.grade is not None and not self._grade_key_shown:
            self._grade_key_shown = True
            self.refresh_bindings()  # the session said it is a grade: show `g` in the footer
        if model.campaign is not None and not self._board_shown:
            self._board_shown = True
            self.refresh_bindings()  # `l` in the footer, `g` hidden (each client has its own)
            self.action_leaderboard()
        if self.follow_running and not self.paused:
            self._follow_running(model)
        facts = model.session_facts()
        key = (model.generation, model.version, self.selected, self.filter_text)
        if not self.paused and key != self._drawn_key:
            self._drawn_key = key
            self._draw(model, facts)
        self._draw_status(model, facts)
        if isinstance(self.screen, LeaderboardScreen) and not self.paused:
            self.screen.draw(model)

    def _draw(self, model: DashboardModel, facts: SessionFacts) -> None:
        self.query_one(ScenarioList).statuses = tuple(model.statuses())
        view = model.snapshot_scenario(self.selected)
        if view is not None and view.wire is not None:
            self.set_class(not view.wire, "no-wire")   # its file effects take the packets' place
        if view is not None:
            self.set_class(view.load is not None, "has-load")
            self.query_one(LoadPanel).view = view
            self.query_one(CountersPanel).view = view
            self.query_one(VerdictTable).view = view
            self.query_one(PanesPanel).view = view
        banner = self.query_one(Banner)
        banner.problem = self.feed.problem
        banner.missing = facts.missing

    def _draw_status(self, model: DashboardModel, facts: SessionFacts) -> None:
        conditions = self._scenario_conditions(model)
        mode = self.feed.mode
        header = f"{mode} · {conditions}" if conditions else mode
        if self.sub_title != header:
            self.sub_title = header  # noise on/off and faults for the selected scenario
        self.query_one(StatusLine).facts = StatusFacts(facts, self.feed.position_text,
                                                       self.paused, self.filter_text)

    def _scenario_conditions(self, model: DashboardModel) -> str:
        conditions = model.conditions(self.selected)
        if conditions is None:
            return ""
        kinds, armed, fired = conditions
        noise = f"noise {','.join(kinds)}" if kinds else "noise off"
        faults = f"faults {fired}/{armed} fired" if armed else "no faults"
        return f"{noise} · {faults}"

    def _follow_running(self, model: DashboardModel) -> None:
        running = next((sid for sid, status in model.statuses() if status == "running"), None)
        if running and running != self.selected and self.query_one(ScenarioList).show(running):
            self.selected = running

    # --- what the panels ask for -----------------------------------------------------------
    def on_scenario_selected(self, message: ScenarioSelected) -> None:
        self.selected = message.scenario
        self.refresh_view()

    def on_run_requested(self, message: RunRequested) -> None:
        notice = self.feed.run(message.scenarios)
        if notice:
            self.notify(notice)

    def on_evidence_requested(self, message: EvidenceRequested) -> None:
        verdict = message.verdict
        if verdict is None:
            self.notify(f"{message.clause}: not judged yet", severity="warning")
            return
        model = self.feed.model
        lines = [f"#{e.seq:<6} {fields_line(e, model.session_t0)}"
                 for e in model.evidence(message.seqs)]
        missing = len(message.seqs) - len(lines)
        if missing:
            lines.append(f"({missing} cited events are no longer held in memory; "
                         "export the archive for all)")
        title = (f"{message.scenario} · {message.clause}: {status_text(verdict.status)} "
                 f"(expected {getattr(verdict, 'expected', 'not-fail')})\n{verdict.reason}")
        self.push_screen(EvidenceScreen(title, lines))

    def on_filter_changed(self, message: FilterChanged) -> None:
        self.filter_text = message.text
        self.query_one(ScenarioList).focus()
        self.refresh_view()

    def open_evidence(self, clause: str) -> None:
        """Open a clause's evidence for the selected scenario, as enter on its row does."""
        verdict = dict(self.feed.model.verdict_rows(self.selected)).get(clause)
        self.post_message(EvidenceRequested(self.selected, clause, verdict))

    # --- actions ------------------------------------------------------------------------
    def action_move(self, delta: int) -> None:
        self.follow_running = False  # the user chose; End hands the choice back
        sid = self.query_one(ScenarioList).move(delta)
        if sid is not None:
            self.selected = sid
            self.refresh_view()

    def action_run_all(self) -> None:
        self.post_message(RunRequested(self.feed.scenario_ids))

    def action_pause(self) -> None:
        if self.feed.toggle_play():
            return  # replay: space plays and pauses the recording
        self.paused = not self.paused
        self.notify("live updates paused" if self.paused else "live updates resumed")
        self.refresh_view()

    def action_step(self, direction: int) -> None:
        if not self.feed.step(direction):
            self.notify("stepping is for replays (evlab replay ARCHIVE)")

    def action_speed(self, factor: float) -> None:
        if not self.feed.scale_speed(factor):
            self.notify("speed is for replays (evlab replay ARCHIVE)")

    def action_filter(self) -> None:
        self.query_one(FilterBox).open(self.filter_text)

    def on_key(self, event) -> None:
        box = self.query_one(FilterBox)
        if event.key == "escape" and box.display:  # escape cancels the filter being typed
            box.close()
            self.query_one(ScenarioList).focus()
            event.stop()

    def action_follow(self) -> None:
        self.follow_running = True
        for log in self.query(FollowLog):
            log.follow()

    def action_export(self) -> None:
        path = Path.cwd() / time.strftime("evlab-session-%Y%m%d-%H%M%S.tar.gz")
        try:
            written = self.feed.export(path)
        except Exception as e:  # shown, not raised: the dashboard keeps running
            self.notify(f"export failed: {e}", severity="error", timeout=10)
            return
        self.notify(f"archive written to {written}", timeout=10)

    def check_action(self, action: str, parameters) -> bool | None:
        # The grade view exists only in an `evlab grade` session, the leaderboard only in a
        # campaign (their keys hidden otherwise); the leaderboard has no scenario list or panes.
        model = self.feed.model
        if action == "grade":
            return model.grade is not None and model.campaign is None
        if action == "leaderboard":
            return model.campaign is not None
        if action == "run_all" and model.campaign is not None:
            return False
        return not (action in DASHBOARD_ONLY
                    and isinstance(self.screen, LeaderboardScreen | TimelineScreen))

    def action_grade(self) -> None:
        self.push_screen(GradeScreen(self.feed.model))

    def action_leaderboard(self) -> None:
        if self.feed.model.campaign is None:
            self.notify("the leaderboard is for campaigns: evlab campaign FILE.toml")
        elif not isinstance(self.screen, LeaderboardScreen):
            self.push_screen(LeaderboardScreen(self.feed))

    def action_timeline(self) -> None:
        if not isinstance(self.screen, TimelineScreen):
            self.push_screen(TimelineScreen(self.feed.model, self.selected))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self.notify("stopping the client, servers and probes…")
        self.feed.stop()
        self.exit()

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for title, help_text, action in (
            ("Run all scenarios", "run every scenario", self.action_run_all),
            ("Run selected scenario", "run or rerun the highlighted scenario",
             lambda: self.post_message(RunRequested((self.selected,)))),
            ("Pause / resume", "pause live updates (replay: play/pause)", self.action_pause),
            ("Filter panes", "filter packets, servers' records and claims", self.action_filter),
            ("Follow panes", "resume following after scrolling up", self.action_follow),
            ("Timeline", "the selected scenario's timeline: processes, servers, marks",
             self.action_timeline),
            ("Export archive", "write the session archive (.tar.gz)", self.action_export),
            ("Leaderboard", "a campaign's clients, ranked", self.action_leaderboard),
            ("Help", "keys and symbols", self.action_help),
        ):
            yield SystemCommand(title, help_text, action)


def _small(width: int, height: int) -> bool:
    return width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
