"""The dashboard's modal screens: help, and the evidence behind one clause."""

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from sessions.output.escape import visible
from sessions.output.vocabulary import status_text as t
from tui.follow_log import FollowLog
from tui.styles import plain

HELP = f"""\
[b]evlab dashboard[/b] — evidence, not claims

  j / k, ↓ / ↑    move between scenarios
  enter           on a scenario: run or rerun it · on a clause: open its evidence
  tab             move focus (scenarios → verdicts → panes)
  a               run all scenarios
  space / p       pause or resume live updates (replay: play / pause)
  [ / ]           replay: step back / forward one phase
  + / -           replay: faster / slower
  /               filter the packet, server and claim panes (empty: clear)
  end             resume following: the panes' newest lines and the running scenario
  1 2 3 4 5 6     verdicts · packets · servers & kernel · claims · file effects · load
                  (a small terminal: one below the scenarios; a larger one: all,
                  file effects in the packets' column: no servers, or key 5; the
                  load: a task with evlab's load, answered/s, failed, slowest)
  t               timeline of the selected scenario: a lane per process and per server;
                  + / - zoom, ← / → move, 0 the whole, j / k scenario; t or esc: back
  e               export the session archive (.tar.gz)
  g               grade view (`evlab grade`): attempts as dots, Pass@1, pass^k, Best-of-N
  l               leaderboard (`evlab campaign`): clients ranked, progress; enter: a
                  client's grade; l or esc: back to the dashboard
  ctrl+p          command palette: the same actions
  ?               this help     q  quit (stops the client, servers and probes)

Verdicts: {t('pass')}  {t('fail')}  {t('inconclusive')} (evidence missing)  \
{t('not-applicable')}
Scenario: {t('detected')} (verdicts as declared)  {t('missed')}  {t('inconclusive')}
Grading attempt: {t('success')}  {t('failed')}  {t('invalid')} (an environment or harness reason)
"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help-text")


class EvidenceScreen(ModalScreen):
    """The events that decided one clause."""

    BINDINGS = [Binding("escape,q", "dismiss", "Back")]

    def __init__(self, title: str, lines: list[str]):
        """title: its first line, then the verdict's reason; each drawn as plain text."""
        super().__init__()
        self.title_text = Text("\n").join(plain(line) for line in title.split("\n", 1))
        self.lines = [visible(line) for line in lines]

    def compose(self) -> ComposeResult:
        with Vertical(id="evidence-box"):
            yield Static(self.title_text, id="evidence-title")
            yield FollowLog(id="evidence-log")

    def on_mount(self) -> None:
        log = self.query_one("#evidence-log", FollowLog)
        log.write_lines(self.lines or ["(no events cited: nothing was needed to decide it)"])
        log.scroll_home(animate=False)
