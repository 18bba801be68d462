"""The scenario list: each scenario and its status. The cursor picks the scenario the other
panels show (ScenarioSelected); enter runs it (RunRequested)."""

from collections.abc import Iterable

from textual import on
from textual.reactive import reactive
from textual.widgets import DataTable

from tui.messages import RunRequested, ScenarioSelected
from tui.styles import plain, status_label

ID_WIDTH = (17, 32)   # the scenario column fits the longest id known, within these bounds


class ScenarioList(DataTable):
    statuses: reactive[tuple[tuple[str, str], ...]] = reactive((), init=False)
    compact = reactive(False)   # a small terminal: the status as its symbol alone

    def __init__(self, scenario_ids: Iterable[str], **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._known = list(scenario_ids)

    def on_mount(self) -> None:
        self.border_title = "scenarios"

    @property
    def highlighted(self) -> str | None:
        """The scenario under the cursor."""
        if 0 <= self.cursor_row < self.row_count:
            return self.ordered_rows[self.cursor_row].key.value
        return None

    def move(self, delta: int) -> str | None:
        """Move the cursor by delta rows (within the list); returns the scenario it is on."""
        self.move_cursor(row=max(0, min(self.row_count - 1, self.cursor_row + delta)))
        return self.highlighted

    def show(self, sid: str) -> bool:
        """Put the cursor on a scenario; False when the list does not hold it."""
        if sid not in self.rows:
            return False
        self.move_cursor(row=self.get_row_index(sid))
        return True

    def watch_compact(self) -> None:
        """Full: the scenario, then its status in words. Compact (a small terminal): the status
        symbol first, so a long id is what gets cut, never the status."""
        current = self.highlighted
        self.clear(columns=True)
        width = max(ID_WIDTH[0], min(ID_WIDTH[1], max(map(len, self._known), default=0)))
        if width > ID_WIDTH[0]:   # long ids (a campaign's CLIENT:BASE@N): a wider list
            self.styles.width = width + (7 if self.compact else 20)
        self.show_header = not self.compact   # at 80x24 its row holds the eighth scenario
        if self.compact:
            self.add_column("", key="status", width=1)
            self.add_column("scenario", key="scenario", width=width)
        else:
            self.add_column("scenario", key="scenario", width=width)
            self.add_column("status", key="status", width=14)
        for sid in self._known:
            self._add(sid, "")
        self._fill()
        self.move_cursor(row=self._known.index(current) if current in self._known else 0)

    def watch_statuses(self) -> None:
        self._fill()

    def _fill(self) -> None:
        if len(self.columns) < 2:
            return  # not built yet: watch_compact fills it
        for sid, status in self.statuses:
            label = status_label(status, symbol_only=self.compact)
            if sid not in self.rows:
                self._add(sid, label)
                self._known.append(sid)
            else:
                self.update_cell(sid, "status", label)

    def _add(self, sid: str, label) -> None:
        cells = (label, plain(sid)) if self.compact else (plain(sid), label)
        self.add_row(*cells, key=sid)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(ScenarioSelected(str(event.row_key.value)))

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(RunRequested((str(event.row_key.value),)))
