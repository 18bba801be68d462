"""The dashboard, driven as a user drives it: Pilot for keys and widget contents, snapshots for
the screens (deterministic: a recorded session replayed), and a responsiveness check under a
synthetic 50,000 events/s stream."""

import asyncio
import json
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable

from bench.flood import FloodFeed, press_like_a_terminal, scenario_key
from sessions.lab.plan import grade_started
from sessions.lab.session import Options
from sessions.output.archive import load_archive
from sessions.spec.client_spec import from_command
from sessions.spec.scenario import load_dir, load_suite
from sessions.stream.events import ClientLaunched, ProcessMetrics, ScenarioStarted
from tui.app import EvlabApp
from tui.feed import Feed
from tui.feeds import LiveFeed, ReplayFeed
from tui.grade import GradeScreen
from tui.messages import EvidenceRequested, RunRequested, ScenarioSelected
from tui.model import DashboardModel
from tui.screens import EvidenceScreen, HelpScreen

DATA = Path(__file__).parent / "data" / "session.tar.gz"  # baseline, corrupt-upload, retry
ROOT = Path(__file__).resolve().parent.parent
root_only = pytest.mark.root(reason="the live lab needs root for BCC")


def cell(app, table_id: str, row: str, column: int) -> str:
    table = app.query_one(table_id, DataTable)
    return str(table.get_row(row)[column])


async def wait_for(pilot, condition, timeout=90.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the dashboard")
        await pilot.pause(0.1)


def replay_app(playing=False) -> EvlabApp:
    return EvlabApp(ReplayFeed(load_archive(DATA), DATA, playing=playing))


# --- live, with the real lab -------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.live
@root_only
async def test_live_dashboard_keys_and_verdicts_match_headless(tmp_path, built_clients,
                                                               monkeypatch, seeded_run):
    monkeypatch.chdir(tmp_path)
    chosen = [s for s in load_dir() if s.id in ("baseline", "hash-storm", "retry")]
    feed = LiveFeed(chosen, Options(), autorun=False)
    app = EvlabApp(feed)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("a")  # run all
            await wait_for(pilot, lambda: all(s != "queued" and s != "running"
                                              for _, s in feed.model.statuses()))
            await pilot.pause(0.5)
            for sid in ("baseline", "hash-storm", "retry"):
                assert cell(app, "#scenarios", sid, 1) == "✓ detected"
            # the view followed the running scenario to the last one; k moves up to hash-storm
            assert app.selected == "retry"
            await pilot.press("k")
            await pilot.pause(0.4)
            assert app.selected == "hash-storm" and not app.follow_running
            assert cell(app, "#verdicts", "hash-work", 1) == "✗ FAIL"
            assert "256 times" in cell(app, "#verdicts", "hash-work", 3)
            ui_verdicts = {sid: {c: v.status for c, v in feed.model.verdict_rows(sid)}
                           for sid in ("baseline", "hash-storm", "retry")}
            # evidence on demand: focus the verdict panel, Enter on a row, Esc back
            app.query_one("#verdicts", DataTable).focus()
            await pilot.press("down", "down", "down", "down", "down", "down")  # hash-work
            await pilot.press("enter")
            await pilot.pause(0.3)
            assert isinstance(app.screen, EvidenceScreen)
            assert "hash-work" in app.screen.title_text
            assert any("CounterSample" in line and "hash_file" in line
                       for line in app.screen.lines)
            await pilot.press("escape")
            await pilot.pause(0.2)
            assert not isinstance(app.screen, EvidenceScreen)
            # filter the panes
            await pilot.press("slash", *"SYN", "enter")
            await pilot.pause(0.5)
            assert app.filter_text == "SYN"
            packets = list(app.query_one("#packets").lines)
            assert packets and all("SYN" in line for line in packets)
            # pause and resume live updates
            await pilot.press("p")
            assert app.paused
            await pilot.press("p")
            assert not app.paused
            # export
            await pilot.press("e")
            await pilot.pause(0.5)
            exported = list(tmp_path.glob("evlab-session-*.tar.gz"))
            assert len(exported) == 1 and load_archive(exported[0]).manifest["collector"] == "bcc"
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.press("q")
    finally:
        feed.stop()
        assert feed.wait_stopped()

    # headless: the same scenarios in the seeded suite's headless run (conftest.py seeded_run)
    headless, out = seeded_run
    assert headless.returncode == 0, headless.stderr
    doc = json.loads((out / "out.json").read_text())
    assert ui_verdicts == {s["id"]: {c["id"]: c["status"] for c in s["clauses"]}
                           for s in doc["scenarios"] if s["id"] in ui_verdicts}


# --- replay ----------------------------------------------------------------------------

async def test_replay_steps_and_rejudges_like_the_recording():
    app = replay_app(playing=False)
    recorded = load_archive(DATA)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.feed.driver.position == 0
        await pilot.press("right_square_bracket")
        first = app.feed.driver.position
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert app.feed.driver.position > first
        await pilot.press("left_square_bracket")
        assert 0 < app.feed.driver.position
        await pilot.press("plus")
        assert app.feed.driver.speed == 2.0
        app.feed.driver.set_speed(64)
        await pilot.press("space")  # play to the end
        await wait_for(pilot, lambda: app.feed.driver.done, timeout=60)
        await pilot.pause(0.5)
        assert "replay" in str(app.query_one("#status").render())
        for sid in ("baseline", "corrupt-upload", "retry"):
            assert cell(app, "#scenarios", sid, 1) == "✓ detected"
        recorded_verdicts = {(e.scenario, e.clause): e.status for e in recorded.events
                             if type(e).__name__ == "Verdict"}
        shown = {(sid, clause): v.status for sid in ("baseline", "corrupt-upload", "retry")
                 for clause, v in app.feed.model.verdict_rows(sid)}
        assert shown == recorded_verdicts


# --- snapshots -------------------------------------------------------------------------

async def _settle(pilot):
    """Wait until the redraw timer has drawn what the model holds, with the view on the
    running scenario (a fixed wait pictured the scenario before it under load), then pin every
    pane to its end, as a following user sees it (a pane's scroll position before its first
    layout would otherwise depend on timing)."""
    await _until(pilot, _drawn)
    pilot.app.action_follow()
    await pilot.pause(0.3)


def _drawn(app) -> bool:
    model = app.feed.model
    running = next((sid for sid, status in model.statuses() if status == "running"), None)
    return (app._drawn_key == (model.generation, model.version, app.selected, app.filter_text)
            and running in (None, app.selected))


async def _step_to(pilot, boundaries: int):
    for _ in range(boundaries):
        await pilot.press("right_square_bracket")
        # the redraw a user stepping sees between two steps: the view follows a scenario
        # while it runs, and a loaded machine's timer may skip the steps it ran in
        pilot.app.refresh_view()
    await _settle(pilot)


def test_snapshot_mid_run(snap_compare):
    assert snap_compare(replay_app(), terminal_size=(120, 40),
                        run_before=lambda pilot: _step_to(pilot, 11))


def test_snapshot_after_completion(snap_compare):
    async def to_end(pilot):
        app = pilot.app
        app.feed.driver.step(1)
        while not app.feed.driver.done:
            app.feed.driver.step(1)
        await _settle(pilot)
    assert snap_compare(replay_app(), terminal_size=(120, 40), run_before=to_end)


@pytest.mark.slow
def test_snapshot_small_terminal_collapses(snap_compare):
    assert snap_compare(replay_app(), terminal_size=(80, 24),
                        run_before=lambda pilot: _step_to(pilot, 40))


@pytest.mark.slow
def test_snapshot_evidence_screen(snap_compare):
    async def open_evidence(pilot):
        await _step_to(pilot, 40)   # retry judged, as the test below asserts
        pilot.app.open_evidence("integrity")
        await _until(pilot, lambda app: isinstance(app.screen, EvidenceScreen))
        await pilot.pause(0.3)
    assert snap_compare(replay_app(), terminal_size=(120, 40), run_before=open_evidence)


async def _until(pilot, done, seconds: float = 30.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if done(pilot.app):
            return
        await pilot.pause(0.05)
    raise AssertionError(f"the dashboard did not get there within {seconds} s")


# --- panels: data down, messages up -----------------------------------------------------

def posted(messages, kind) -> list:
    """Each message of a kind once (the hook sees it again at every widget it bubbles to)."""
    return list(dict.fromkeys(m for m in messages if isinstance(m, kind)))


@pytest.mark.slow
async def test_enter_on_a_verdict_posts_its_evidence_and_the_screen_shows_those_events():
    messages = []
    app = replay_app()
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await _step_to(pilot, 40)  # retry judged
        assert app.selected == "retry"
        app.query_one("#verdicts", DataTable).focus()
        await pilot.press("enter")  # the first clause: integrity
        await pilot.pause(0.3)
        [request] = posted(messages, EvidenceRequested)
        verdict = dict(app.feed.model.verdict_rows("retry"))["integrity"]
        assert (request.scenario, request.clause) == ("retry", "integrity")
        assert request.seqs == verdict.evidence and request.seqs
        assert isinstance(app.screen, EvidenceScreen)
        assert "retry · integrity: ✓ pass" in app.screen.title_text
        shown = list(app.screen.query_one("#evidence-log").lines)
        assert [line.split()[0] for line in shown] == [f"#{seq}" for seq in request.seqs]
        assert all("VerifierResult" in line for line in shown)
        await pilot.press("escape")
        assert not isinstance(app.screen, EvidenceScreen)


async def test_the_scenario_list_posts_the_selection_and_runs():
    messages = []
    app = replay_app()
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await pilot.press("j")
        await pilot.pause(0.2)
        assert "corrupt-upload" in [m.scenario for m in posted(messages, ScenarioSelected)]
        assert app.selected == "corrupt-upload" and not app.follow_running
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert [m.scenarios for m in posted(messages, RunRequested)] == [("corrupt-upload",)]
        await pilot.press("a")
        await pilot.pause(0.2)
        assert posted(messages, RunRequested)[-1].scenarios == app.feed.scenario_ids


async def test_the_counters_show_the_clients_process_metrics():
    app = replay_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _step_to(pilot, 3)  # baseline: invocation 1 verified, 2 not started
        recorded = [e for e in load_archive(DATA).events if isinstance(e, ProcessMetrics)
                    and (e.scenario, e.invocation, e.role) == ("baseline", 1, "client")]
        shown = cell(app, "#counters", "client RSS · CPU", 1)
        assert shown.startswith(f"{recorded[-1].rss_bytes / 2**20:.1f} MiB "), shown
        assert cell(app, "#counters", "client RSS · CPU", 2) == ""  # not started yet


def test_client_cpu_percent_is_over_the_last_sampling_interval():
    model = DashboardModel(["s"])
    stream = model.stream
    stream.publish(ScenarioStarted(0, "s", "/c", "0" * 64, (), (), (), 1, 2, 1, ""))
    stream.publish(ClientLaunched(1_000_000_000, "s", 1, 42, ("/c",), "/", "/src"))
    for t_s, cpu_s in ((1.5, 0.25), (2.0, 0.5)):
        stream.publish(ProcessMetrics(int(t_s * 1e9), "s", 1, "client", 42, cpu_s, 2**21, 3,
                                      4, 0))
        figures = model.snapshot_scenario("s").invocations[1]
        assert figures.client.rss_bytes == 2**21
        assert figures.client_cpu_percent == 50.0  # from launch, then since the last sample
    assert model.snapshot_scenario("s").invocations.get(2) is None


def test_every_source_implements_the_protocol_and_is_only_read():
    for feed in (FloodFeed(), ReplayFeed(load_archive(DATA), DATA, playing=False)):
        assert isinstance(feed, Feed)
        assert isinstance(feed.scenario_ids, tuple)  # the UI cannot write into it
        assert feed.problem is None
        assert isinstance(feed.model, DashboardModel)


# --- responsiveness under a flood --------------------------------------------------------

@pytest.mark.slow
async def test_keys_are_handled_under_an_event_flood():
    # Liveness, not speed: every key is handled while tens of thousands of events per second
    # arrive, and the panes stay bounded. The latency figure is `make bench`'s (a ratio-free
    # threshold on time would depend on this machine's speed).
    feed = FloodFeed()
    app = EvlabApp(feed)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(1.0)  # let the flood reach its rate
        start_count = feed.published
        for _ in range(10):
            before, key = app.selected, scenario_key(app)
            press_like_a_terminal(app, key)
            deadline = time.monotonic() + 30
            while app.selected == before and time.monotonic() < deadline:
                await asyncio.sleep(0.002)
            assert app.selected != before, "a key was not handled during the flood"
            await asyncio.sleep(0.1)
        flooded = feed.published - start_count
        feed.stop()
    assert flooded > 10_000, f"the flood published only {flooded} events"
    assert len(feed.model.snapshot_scenario("flood-a").packets) <= 500  # panes stay bounded


@pytest.mark.live
async def test_degraded_mode_says_what_is_missing(tmp_path, built_clients, monkeypatch):
    monkeypatch.chdir(tmp_path)
    chosen = [s for s in load_dir() if s.id == "baseline"]
    feed = LiveFeed(chosen, Options(collector="none", packets="off"))
    app = EvlabApp(feed)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: feed.model.statuses()[0][1] not in ("queued",
                                                                                 "running"))
            await pilot.pause(0.5)
            banner = str(app.query_one("#banner").render())
            assert "missing: kernel-events" in banner and "Fix:" in banner
            assert "inconclusive" in banner
            assert cell(app, "#verdicts", "hash-work", 1) == "? inconclusive"
            assert cell(app, "#verdicts", "cpu-budget", 1) == "? inconclusive"
            assert cell(app, "#scenarios", "baseline", 1) == "? inconclusive"
            assert "collector none" in str(app.query_one("#status").render())
            await pilot.press("q")
    finally:
        feed.stop()
        assert feed.wait_stopped()


@pytest.mark.slow
async def test_new_lines_are_appended_not_redrawn():
    """While the same scenario is shown, new pane lines are appended: the panes are not
    cleared and rewritten on every change (a user who scrolled up keeps their place)."""
    app = replay_app(playing=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(10):  # into corrupt-upload's invocation 1: the view follows it there
            await pilot.press("right_square_bracket")
        await pilot.pause(0.5)
        assert app.selected == "corrupt-upload"
        log = app.query_one("#events")
        cleared, before = [], log.line_count
        original = log.clear
        log.clear = lambda: cleared.append(1) or original()
        for _ in range(2):  # its verification and invocation 2: more lines
            await pilot.press("right_square_bracket")
            await pilot.pause(0.3)
        assert app.selected == "corrupt-upload"
        assert log.line_count > before and cleared == []


# --- grading -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.live
@root_only
async def test_grade_view_shows_attempts_metrics_and_risks(tmp_path):
    client = ROOT / "tests" / "clients" / "backup_client.py"
    spec = from_command(f"/usr/bin/python3 {client} --variant chdir-write {{host}} {{port}} "
                        "{source}", attempts=2, scenarios=("normal",))
    attempts = spec.attempt_scenarios(load_suite("grade"))
    feed = LiveFeed(attempts, Options(), grade=grade_started(spec, attempts))
    app = EvlabApp(feed)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: all(s == "success"
                                              for _, s in app.feed.model.statuses()))
            await pilot.pause(0.5)
            assert cell(app, "#scenarios", "normal@2", 1) == "✓ success"
            rows = [clause for clause, _ in app.feed.model.verdict_rows("normal@1")]
            assert rows[-6:] == ["gate immediate", "gate re-run", "gate durability",
                                 "gate restore", "gate cleanup", "gate limits"]
            await pilot.press("g")
            assert isinstance(app.screen, GradeScreen)
            text = str(app.screen.query_one("#grade").render())
            assert "normal       ✓ ✓ " in text
            assert "Pass@1 1.00  pass^k 1.00  Best-of-N 1.00" in text
            # 2 attempts x 2 runs x (mkdir /outside, open, unlink in it): the sandbox's root,
            # bubblewrap's tmpfs, which its sandbox lets it write
            assert "risk findings (12, reported, not judged)" in text
            assert "medium normal@1 inv 1 write-outside" in text
            await pilot.press("escape")
            assert not isinstance(app.screen, GradeScreen)
    finally:
        feed.stop()
        assert feed.wait_stopped()   # and its staging directory is gone
