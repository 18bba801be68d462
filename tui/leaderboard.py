"""The campaign view (`evlab campaign`): the clients ranked, and how far the campaign is.

One row per client: rank, Pass@1, pass^k, Best-of-N, mean score ± SEM, invalid attempts, risk
findings by severity and the clause or gate it fails most (sessions.output.leaderboard, the same
section the JSON document and the reports carry). Enter on a row opens that client's grade view.
The app redraws it from its model on its own timer, only when an attempt was dispatched,
started, judged or lost (DashboardModel.campaign_version).
"""

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from sessions.output.escape import visible
from sessions.output.grades import ClientGrade
from sessions.output.leaderboard import Board, Ranked
from sessions.output.vocabulary import figure, score_text
from tui.feed import Feed
from tui.grade import GradeScreen
from tui.model import DashboardModel
from tui.styles import plain

COLUMNS = ("#", "client", "Pass@1", "pass^k", "Best-of-N", "score ± SEM", "invalid",
           "risks h/m/l", "fails most")


class LeaderboardScreen(Screen):
    """The leaderboard over the dashboard: `l` or escape goes back to it; the app's own keys
    (e export, space pause, ? help, q quit) work here too."""

    BINDINGS = [
        Binding("l,escape", "dismiss", "Dashboard", key_display="l/esc"),
        # priority: before the table's own (hidden) enter, so the footer shows it
        Binding("enter", "open_client", "Client's grade", priority=True),
        Binding("j", "cursor(1)", "Next", show=False),
        Binding("k", "cursor(-1)", "Prev", show=False),
    ]

    def __init__(self, feed: Feed):
        super().__init__()
        self.feed = feed
        self._drawn: tuple = ()

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static("", id="campaign-progress")
        yield DataTable(id="leaderboard", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#leaderboard", DataTable)
        table.border_title = "leaderboard (enter: the client's grade · l or esc: dashboard)"
        table.focus()
        self.draw(self.feed.model)

    def draw(self, model: DashboardModel) -> None:
        """Show the model's campaign (nothing to do when no attempt changed since)."""
        key = (model.generation, model.campaign_version)
        if key == self._drawn or not self.is_mounted:
            return   # (pushed but not mounted yet: its on_mount draws)
        board = model.campaign_board()
        self.query_one("#campaign-progress", Static).update(progress_text(board, model))
        table = self.query_one("#leaderboard", DataTable)
        current = self.highlighted
        mixed = board is not None and len(board.tasks) > 1   # ranks restart in each task
        ranked = board.leaderboard if board else []
        rows = [leaderboard_row(row, mixed) for row in ranked]
        # each column as wide as its widest cell, set as the rows are: measured when the
        # table next idles, a client's name was drawn cut ("c-base") and could stay so
        table.clear(columns=True)
        for n, column in enumerate(COLUMNS):
            table.add_column(column, key=column, width=max(
                [len(column)] + [Text(c).cell_len if isinstance(c, str) else c.cell_len
                                 for c in (cells[n] for cells in rows)]))
        for row, cells in zip(ranked, rows, strict=True):
            table.add_row(*cells, key=row.name)
        if current is not None and current in table.rows:
            table.move_cursor(row=table.get_row_index(current))
        self._drawn = key

    @property
    def highlighted(self) -> str | None:
        """The client under the cursor."""
        table = self.query_one("#leaderboard", DataTable)
        if 0 <= table.cursor_row < table.row_count:
            return table.ordered_rows[table.cursor_row].key.value
        return None

    def action_cursor(self, delta: int) -> None:
        table = self.query_one("#leaderboard", DataTable)
        table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + delta)))

    def action_open_client(self) -> None:
        self.open_client(self.highlighted)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.open_client(event.row_key.value)

    def open_client(self, name: str | None) -> None:
        """Open a client's grade view, as enter on its row does."""
        if name is not None:
            self.app.push_screen(ClientGradeScreen(self.feed, name))


class ClientGradeScreen(GradeScreen):
    """One client's grade in a campaign: the grade view of `evlab grade`, from its section."""

    inherit_bindings = False
    BINDINGS = [
        Binding("escape", "dismiss", "Leaderboard"),
        Binding("e", "app.export", "Export"),
        Binding("question_mark", "app.help", "Help"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, feed: Feed, client: str):
        super().__init__(feed.model)
        self.feed, self.client = feed, client
        self.border_text = plain(f"{client}: grade in the campaign (esc: leaderboard)")

    def grade(self) -> ClientGrade | None:
        board = self.feed.model.campaign_board()   # a replay stepped back: a new model
        entry = board.clients.get(self.client) if board else None
        return entry.grade if entry else None

    def compose(self) -> ComposeResult:
        yield from super().compose()
        yield Footer()


def leaderboard_row(row: Ranked, mixed: bool = False) -> tuple:
    """One ranked row of sessions.output.leaderboard as the table shows it (mixed: the
    campaign ranks several tasks apart, so the rank says which)."""
    f, risks, most = row.figures, row.risks, row.fails_most
    risk_text = Text(f"{risks['high']}/{risks['medium']}/{risks['low']}",
                     "bold red" if risks["high"] else "yellow" if risks["medium"] else "")
    rank = plain(f"{row.task} {row.rank}") if mixed else str(row.rank)
    return (rank, plain(row.name), figure(f.pass_at_1), figure(f.pass_hat_k),
            figure(f.best_of_n), score_text(f, 2), str(row.invalid), risk_text,
            plain(f"{most.name} ×{most.count}") if most else "–")


def progress_text(board: Board | None, model: DashboardModel) -> Text:
    """The campaign's progress on one line: attempts done, running, queued and lost, per node,
    the time left; and how it ended."""
    if board is None:
        return Text("not a campaign: `evlab campaign FILE.toml` runs one", "dim")
    p = board.progress
    out = Text()
    out.append(visible(board.name), "bold").append(f" on {board.engine} · ")
    out.append(f"{p.done}/{p.total} attempts done", "bold")
    out.append(f" · {p.running} running · {p.queued} queued · {p.lost} lost")
    if p.given_up:
        out.append(f" ({p.given_up} given up)", "bold red")
    for node, n in sorted(p.nodes.items()):
        out.append(visible(f" · {node}: {n.done} done, {n.running} running"
                           + (f", {n.lost} lost" if n.lost else "")))
    ended = model.book.ended
    if ended is not None:
        out.append(" · ended: " + ended.reason, "bold" if ended.partial else "")
    elif p.eta_s is not None and (p.queued or p.running):
        out.append(f" · about {p.eta_s:.0f} s left")
    return out
