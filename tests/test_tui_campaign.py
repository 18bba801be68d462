"""The dashboard on a campaign (`evlab campaign FILE.toml` without --headless): the leaderboard
opens by itself, ranks the clients as the outputs do, and enter opens a client's grade view;
the campaign's feed stops its engine cleanly. No root: a recorded campaign is replayed
(tests/data/campaign.tar.gz: c-baseline and c-redundant, one attempt of `normal` each, packets
off), and the live feed runs on an engine that hands back the recorded attempts."""

import dataclasses
import threading
import time
from pathlib import Path

from textual.widgets import DataTable

from sessions.campaign.journal import Journal
from sessions.cli.dispatch import main
from sessions.lab.attempts import AttemptPiece
from sessions.lab.session import Cancelled
from sessions.output.archive import load_archive
from sessions.output.grades import given_up
from sessions.output.judged import JudgedStream
from sessions.output.leaderboard import Board, board_of
from sessions.spec.campaign import load_campaign
from sessions.spec.task import load_task
from sessions.stream.campaign_events import AttemptDispatched, AttemptLost, CampaignStarted
from sessions.stream.codec import to_json
from sessions.stream.events import SessionEnded, SessionStarted
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import observations, replay
from tests.backup_lab import client_path
from tui.app import EvlabApp
from tui.feeds import CampaignFeed, ReplayFeed
from tui.grade import GradeScreen, grade_text
from tui.leaderboard import ClientGradeScreen, LeaderboardScreen, leaderboard_row

DATA = Path(__file__).parent / "data" / "campaign.tar.gz"
CLIENTS = {"c-baseline": "baseline", "c-redundant": "redundant-upload"}


async def wait_for(pilot, condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the dashboard")
        await pilot.pause(0.05)


def board_rows(app) -> list[tuple[str, str]]:
    table = app.screen.query_one("#leaderboard", DataTable)
    return [tuple(str(c) for c in table.get_row(r.key)[:2]) for r in table.ordered_rows]


def screen_text(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


def recorded_board() -> Board:
    book = EvidenceBook()
    replay(load_archive(DATA).events, JudgedStream(book=book))
    board = board_of(book)
    assert board is not None
    return board


# --- a recorded campaign, replayed ---------------------------------------------------------

async def test_a_replayed_campaign_opens_on_its_leaderboard_and_each_clients_grade():
    app = EvlabApp(ReplayFeed(load_archive(DATA), DATA, speed=1000))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LeaderboardScreen)
                       and "2/2 attempts done" in screen_text(app, "#campaign-progress"))
        assert board_rows(app) == [("1", "c-baseline"), ("2", "c-redundant")]
        assert "ended: complete" in screen_text(app, "#campaign-progress")
        assert "local: 2 done" in screen_text(app, "#campaign-progress")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ClientGradeScreen))
        text = screen_text(app, "#grade")
        assert "fixture/build/client-baseline " in text and "Pass@1 1.00" in text   # as recorded
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, LeaderboardScreen))
        await pilot.press("j", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ClientGradeScreen))
        text = screen_text(app, "#grade")
        assert "fixture/build/client-redundant-upload" in text and "Pass@1 0.00" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, LeaderboardScreen))
        assert app.screen.highlighted == "c-redundant"   # the cursor stays on its client
        await pilot.press("l")                           # l toggles: the dashboard...
        await wait_for(pilot, lambda: not isinstance(app.screen, LeaderboardScreen))
        await pilot.press("l")                           # ...and the leaderboard again
        await wait_for(pilot, lambda: isinstance(app.screen, LeaderboardScreen))
        await pilot.press("q")
    assert app.return_code in (0, None)


async def test_the_leaderboard_rows_are_the_outputs_leaderboard():
    board = recorded_board()
    app = EvlabApp(ReplayFeed(load_archive(DATA), DATA, speed=1000))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LeaderboardScreen)
                       and "ended" in screen_text(app, "#campaign-progress"))
        table = app.screen.query_one("#leaderboard", DataTable)
        shown = [[str(c) for c in table.get_row(r.key)] for r in table.ordered_rows]
        assert shown == [[str(c) for c in leaderboard_row(row)] for row in board.leaderboard]
        assert shown[1][2:6] == ["0.00", "0.00", "0.00", "0.83"]
        assert shown[1][8] == "gate re-run ×1"


async def test_a_session_that_is_not_a_campaign_has_no_leaderboard():
    data = Path(__file__).parent / "data" / "session.tar.gz"
    app = EvlabApp(ReplayFeed(load_archive(data), data, speed=1000))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        await pilot.press("l")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, LeaderboardScreen)


def test_a_clients_grade_reads_as_the_grade_view():
    grade = recorded_board().clients["c-redundant"].grade
    assert grade.statuses() == {"normal": [("c-redundant:normal@1", "failed")]}
    assert grade.identity["executable"].endswith("/fixture/build/client-redundant-upload")
    # an attempt the engine lost for good is shown invalid, as the metrics count it
    lost = AttemptLost(0, "c-redundant", "c-redundant:normal@2", "normal", 2, 3, "n",
                       "node lost", False)
    gone = dataclasses.replace(grade, given_up=tuple(given_up([lost], set())))
    assert gone.statuses()["normal"][-1] == ("c-redundant:normal@2", "invalid")
    text = grade_text(grade).plain
    assert "client-redundant-upload" in text and "✗" in text
    assert "not a grade" in grade_text(None).plain
    assert issubclass(ClientGradeScreen, GradeScreen)


# --- the campaign's own feed -------------------------------------------------------------

def recorded_pieces() -> dict[str, AttemptPiece]:
    """Each recorded attempt as its node handed it back: its opening and observations, from a
    node running this evlab (the contract and task files it was recorded under may be earlier
    ones)."""
    pieces: dict[str, list] = {}
    current = None
    for e in observations(load_archive(DATA).events):
        if isinstance(e, SessionStarted):
            e = dataclasses.replace(e, contract_version=load_task().contract.version,
                                    task_id=load_task().id, task_sha256=load_task().sha256)
            current = pieces.setdefault(e.scenarios[0], [])
        if current is not None and not isinstance(
                e, (CampaignStarted, AttemptDispatched, AttemptLost, SessionEnded)):
            current.append(e)
    return {sid: AttemptPiece(sid, "node-a", tuple(to_json(e) for e in events), {})
            for sid, events in pieces.items()}


class RecordedEngine:
    """Hands back the first attempt as recorded; runs the next one until cancel()."""

    name = "recorded"

    def __init__(self):
        self.pieces = recorded_pieces()
        self.cancelled = threading.Event()
        self.closed = 0

    def run(self, jobs, files, sink) -> None:
        first, second = jobs
        sink.dispatched(first, "node-a")
        sink.finished(first, self.pieces[first.id])
        sink.dispatched(second, "node-b")
        if not self.cancelled.wait(30):
            raise AssertionError("never cancelled")
        raise Cancelled()

    def cancel(self) -> None:
        self.cancelled.set()

    def close(self) -> None:
        self.closed += 1


def write_campaign(tmp_path: Path) -> Path:
    clients = "".join(f'[[client]]\nname = "{name}"\ncommand = ["{client_path(b)}", "{{host}}", '
                      f'"{{port}}", "{{source}}"]\n' for name, b in CLIENTS.items())
    path = tmp_path / "c.toml"
    path.write_text('[campaign]\nname = "tui-test"\nscenarios = ["normal"]\nattempts = 1\n'
                    + clients)
    return path


async def test_the_campaign_source_shows_progress_exports_and_stops_its_engine(
        tmp_path, built_clients, monkeypatch):
    monkeypatch.chdir(tmp_path)
    campaign = load_campaign(write_campaign(tmp_path))
    journal = Journal.create(tmp_path / "dir", campaign.text)
    engine = RecordedEngine()
    feed = CampaignFeed(campaign, engine, journal)
    app = EvlabApp(feed)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            # the engine's second dispatch drawn (after the first attempt came back)
            await wait_for(pilot, lambda: isinstance(app.screen, LeaderboardScreen)
                           and "node-b: 0 done, 1 running" in screen_text(
                               app, "#campaign-progress"))
            progress = screen_text(app, "#campaign-progress")
            assert "1/2 attempts done" in progress and "0 queued" in progress
            assert "node-a: 1 done" in progress and "node-b: 0 done, 1 running" in progress
            assert [name for _, name in board_rows(app)] == ["c-baseline", "c-redundant"]
            await pilot.press("e")
            await wait_for(pilot, lambda: list(tmp_path.glob("evlab-session-*.tar.gz")))
            await pilot.press("q")
    finally:
        feed.stop()
        assert feed.wait_stopped(10)
    assert engine.cancelled.is_set() and engine.closed == 1
    assert feed.model.book.ended.reason == "interrupted" and feed.problem is None
    exported = load_archive(next(tmp_path.glob("evlab-session-*.tar.gz")))
    assert exported.manifest is not None
    assert sorted(board_of(EvidenceBook.of(exported.events)).clients) == sorted(
        CLIENTS)
    assert "CampaignStarted" in (tmp_path / "dir" / "journal.jsonl").read_text()


def test_a_campaign_the_dashboard_cannot_open_is_a_usage_error(tmp_path, capsys):
    assert main(["campaign", str(tmp_path / "missing.toml"), "--dir",
                 str(tmp_path / "d")]) == 2
    assert "missing.toml" in capsys.readouterr().err
