"""The dashboard at the sizes terminals open at: 80x24 shows every scenario's status and reaches
the verdicts and each evidence pane by a key; 120x40 and 200x50 show them all. Snapshots of a
finished run, a campaign's leaderboard and a client's grade, each at the three sizes (recorded
sessions replayed: deterministic)."""

import time
from pathlib import Path

import pytest
from textual.widgets import DataTable

from sessions.output.archive import load_archive
from tui.app import EvlabApp
from tui.feeds import ReplayFeed
from tui.grade import GradeScreen
from tui.leaderboard import LeaderboardScreen

DATA = Path(__file__).parent / "data"
RUN, CAMPAIGN = DATA / "session.tar.gz", DATA / "campaign.tar.gz"
SIZES = [(80, 24), (120, 40), (200, 50)]
IDS = ["80x24", "120x40", "200x50"]


def app_of(archive: Path, speed: float = 1.0) -> EvlabApp:
    return EvlabApp(ReplayFeed(load_archive(archive), archive, speed=speed, playing=False))


async def until(pilot, condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the dashboard")
        await pilot.pause(0.05)


async def to_end(pilot) -> None:
    """Every event replayed, every pane pinned to its end (as a following user sees it)."""
    driver = pilot.app.feed.driver
    while not driver.done:
        driver.step(1)
    await pilot.pause(0.5)
    pilot.app.action_follow()
    await pilot.pause(0.3)


async def on_leaderboard(pilot) -> None:
    await to_end(pilot)
    await until(pilot, lambda: isinstance(pilot.app.screen, LeaderboardScreen)
                and "ended" in str(pilot.app.screen.query_one("#campaign-progress").render()))
    # and its columns sized to the rows (the table measures new rows when it next idles,
    # which a loaded machine can put off past a fixed pause), and focused (its cursor drawn:
    # a fresh clone's make test once took the picture before the focus had moved to it)
    table = pilot.app.screen.query_one("#leaderboard", DataTable)
    await until(pilot, lambda: _measured(table) and pilot.app.screen.focused is table)
    # ... and drawn so: a fresh clone's make test once pictured the measured table with the
    # widths it had before (its client names cut, "c-base" for "c-baseline")
    names = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]   # after the rank
    await until(pilot, lambda: all(n.replace(" ", "&#160;") in pilot.app.export_screenshot()
                                   for n in names))
    await pilot.pause(0.3)


def _measured(table: DataTable) -> bool:
    """Every column of the table is as wide as the longest cell it holds."""
    for n, column in enumerate(table.ordered_columns):
        cells = [str(row[n]) for row in (table.get_row_at(i) for i in range(table.row_count))]
        if table.row_count and column.content_width < max(len(c) for c in cells):
            return False
    return table.row_count > 0


async def on_a_grade(pilot) -> None:
    await on_leaderboard(pilot)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(pilot.app.screen, GradeScreen))
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_snapshot_a_finished_run(snap_compare, size):
    assert snap_compare(app_of(RUN), terminal_size=size, run_before=to_end)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_snapshot_a_campaigns_leaderboard(snap_compare, size):
    assert snap_compare(app_of(CAMPAIGN), terminal_size=size, run_before=on_leaderboard)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_a_clients_grade_shows_at_every_size(size):
    """(Not a snapshot: the modal's redraw over the leaderboard is not deterministic enough.)"""
    app = app_of(CAMPAIGN)
    async with app.run_test(size=size) as pilot:
        await on_a_grade(pilot)
        text = str(app.screen.query_one("#grade").render())
        assert "client-baseline" in text and "Pass@1 1.00" in text
        assert app.screen.query_one("#grade-box").region.width >= size[0] * 0.9


def test_snapshot_80x24_shows_a_pane_by_its_key(snap_compare):
    async def receiver_pane(pilot):
        await to_end(pilot)
        await pilot.press("3")
        await pilot.pause(0.3)
    assert snap_compare(app_of(RUN), terminal_size=(80, 24), run_before=receiver_pane)


async def test_at_80x24_every_status_shows_and_each_panel_is_a_key_away():
    app = app_of(RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        await to_end(pilot)
        table = app.query_one("#scenarios", DataTable)
        statuses = [str(table.get_row(r.key)[0]) for r in table.ordered_rows]
        assert statuses == ["✓", "✓", "✓"]   # baseline, corrupt-upload, retry: detected
        assert table.ordered_columns[0].width <= table.size.width   # never cut: it is first
        for key, shown in (("2", "#packets"), ("3", "#events"), ("4", "#claims"),
                           ("1", "#verdicts")):
            await pilot.press(key)
            await pilot.pause(0.1)
            widget = app.query_one(shown)
            assert widget.display and widget.region.width >= 70 and widget.region.height >= 5
            assert app.focused is widget
        assert app.query_one("#packets").region.area == 0   # one panel at a time here


async def test_at_120x40_every_panel_shows_at_once():
    app = app_of(RUN)
    async with app.run_test(size=(120, 40)) as pilot:
        await to_end(pilot)
        for panel in ("#scenarios", "#verdicts", "#packets", "#events", "#claims"):
            assert app.query_one(panel).region.area > 0, panel
        await pilot.press("3")   # a key focuses that pane
        assert app.focused is app.query_one("#events")
