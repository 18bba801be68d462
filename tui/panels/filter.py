"""The pane filter: shown by `/`, applied with enter (FilterChanged), cancelled with escape."""

from textual import on
from textual.widgets import Input

from tui.messages import FilterChanged


class FilterBox(Input):
    def __init__(self, **kwargs):
        super().__init__(placeholder="filter panes (enter to apply, empty to clear, esc to "
                                     "cancel)", **kwargs)

    def on_mount(self) -> None:
        self.display = False

    def open(self, text: str) -> None:
        self.display = True
        self.value = text
        self.focus()

    def close(self) -> None:
        self.display = False

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.close()
        self.post_message(FilterChanged(event.value.strip()))
