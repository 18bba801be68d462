"""A bounded plain-text log that follows new lines until the user scrolls up."""

from textual.widgets import Log


class FollowLog(Log):
    """Textual's fast line log, following its newest line until the user scrolls up; End (the
    app's follow action) resumes following."""

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
