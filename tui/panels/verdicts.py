"""The verdict panel: each clause (and, for a grading attempt, each gate) of the selected
scenario; enter on one asks for the events that decided it (EvidenceRequested)."""

from rich.text import Text
from textual import on
from textual.reactive import reactive
from textual.widgets import DataTable

from sessions.output.vocabulary import status_text
from tui.messages import EvidenceRequested
from tui.model import ScenarioView
from tui.styles import plain, status_label


class VerdictTable(DataTable):
    view: reactive[ScenarioView | None] = reactive(None, init=False)

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", **kwargs)
        self._clauses: list[str] = []

    def on_mount(self) -> None:
        self.border_title = "1 verdicts"   # the key that shows it (a small terminal: 1-4)
        self.add_column("clause", key="clause", width=19)
        self.add_column("verdict", key="verdict", width=14)
        self.add_column("expected", key="expected", width=8)
        self.add_column("reason", key="reason", width=150)

    def watch_view(self, view: ScenarioView | None) -> None:
        if view is None:
            return
        clauses = [c for c, _ in view.rows]
        if clauses != self._clauses:
            self.clear()
            for clause in clauses:
                self.add_row(clause, "", "", "", key=clause)
            self._clauses = clauses
        for clause, verdict in view.rows:
            expected = "fail" if clause in view.expected_failures else "not-fail"
            cells: tuple[Text, str, Text | str]
            if verdict is None:
                cells = (Text("… pending", style="dim"), expected, "")
            else:  # a gate has no expectation of its own
                cells = (status_label(verdict.status), getattr(verdict, "expected", expected),
                         plain(verdict.reason))
            for column, value in zip(("verdict", "expected", "reason"), cells, strict=True):
                self.update_cell(clause, column, value)
        self.border_subtitle = plain(f"{view.id}: {status_text(view.status)}"
                                     + (f" — {view.judged_detail}" if view.judged_detail
                                        else ""))

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if self.view is not None and event.cursor_row < len(self.view.rows):
            clause, verdict = self.view.rows[event.cursor_row]
            self.post_message(EvidenceRequested(self.view.id, clause, verdict))
