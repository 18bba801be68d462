"""Small widgets the dashboard is made of."""

from textual.widgets import Log

from sessions.judging.judge import FAIL, INCONCLUSIVE, NA, PASS

# pass/fail never by colour alone: a symbol and a word in every cell
VERDICT_TEXT = {PASS: "✓ pass", FAIL: "✗ FAIL", INCONCLUSIVE: "? inconclusive", NA: "– n/a"}
VERDICT_CLASS = {PASS: "green", FAIL: "red", INCONCLUSIVE: "yellow", NA: "dim"}
STATUS_TEXT = {"queued": "· queued", "running": "▶ running", "detected": "✓ detected",
               "missed": "✗ MISSED", "inconclusive": "? inconclusive", "invalid": "⊘ invalid",
               "success": "✓ success", "failed": "✗ FAILED"}   # the last two: grading attempts
STATUS_STYLE = {"queued": "dim", "running": "bold cyan", "detected": "green", "missed": "bold red",
                "inconclusive": "yellow", "invalid": "magenta", "success": "green",
                "failed": "bold red"}


class FollowLog(Log):
    """A bounded plain-text log (Textual's fast line log) that follows new lines until the user
    scrolls up; End resumes following."""

    def __init__(self, **kwargs):
        super().__init__(max_lines=500, auto_scroll=True, **kwargs)
        self.shown = 0          # the seq of the newest pane line on screen

    def _stop_following(self) -> None:
        self.auto_scroll = False

    def follow(self) -> None:
        self.auto_scroll = True
        self.scroll_end(animate=False)

    def _on_mouse_scroll_up(self, event) -> None:
        self._stop_following()
        super()._on_mouse_scroll_up(event)

    def action_scroll_up(self) -> None:
        self._stop_following()
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self._stop_following()
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self._stop_following()
        super().action_scroll_home()
