"""evlab's load over time (sessions/output/load_over_time.py): exact buckets from hand-made
records, the reports' table, the lab's restart of a service on the timeline, and the
dashboard's load view (key 6) on a reload session recorded here (tui/panels/load.py)."""

import pytest

from sessions.output import html, report
from sessions.output.archive import load_archive
from sessions.output.load_over_time import load_over_time, table_rows
from sessions.output.timeline import timeline_of
from sessions.stream.events import ClientExited, ClientLaunched, ScenarioStarted, ServerRecord
from sessions.stream.evidence import EvidenceBook
from tests.support import evlab_in
from tests.test_tui_sizes import app_of, to_end, until
from tui.panels.load import columns, marks

MS = 1_000_000
T0 = 10_000 * MS   # the scenario's start


def _request(t_ms: float, n: int, k: int, outcome: str = "answered", status: int = 200,
             latency_ms: float = 2) -> ServerRecord:
    return ServerRecord(T0 + int(t_ms * MS), "s", n, "load", "request", {
        "load": "traffic", "id": f"traffic-{n}-{k}", "outcome": outcome, "status": status,
        "latency_ns": int(latency_ms * MS), "sport": 40000 + 100 * n + k})


def _book(requests: list[ServerRecord], runs=((1, 50, 420), (2, 600, 700)),
          harness=()) -> EvidenceBook:
    started = ScenarioStarted(T0, "s", "/bin/c", "0" * 64, (), (), (), 8080, 0, 0, "",
                              servers={"web": {"role": "endpoint", "port": 8080}},
                              display={"figures": [], "invocations": 2, "marks": {},
                                       "loads": {"traffic": "web"}})
    events: list = [started]
    for n, launch_ms, exit_ms in runs:
        events.append(ClientLaunched(T0 + launch_ms * MS, "s", n, 10 + n, ("/bin/c",), "/w", ""))
        events += [r for r in requests if r.invocation == n]
        events += [r for r in harness if r.invocation == n]
        events.append(ClientExited(T0 + exit_ms * MS, "s", n, 0, False,
                                   (exit_ms - launch_ms) * MS, None))
    return EvidenceBook.of(events)


REQUESTS = [
    _request(40, 1, 1, latency_ms=7), _request(65, 1, 2), _request(90, 1, 3, latency_ms=3),
    _request(130, 1, 4, "refused", 0), _request(160, 1, 5, status=502),   # two failed
    _request(190, 1, 6, latency_ms=250), _request(410, 1, 7),
    _request(610, 2, 1), _request(640, 2, 2, latency_ms=9),
]


def test_each_request_is_counted_in_the_bucket_it_began_in():
    load = load_over_time(_book(REQUESTS).scenarios["s"], 60)
    assert load is not None and load.loads == ("traffic",) and load.bucket_ns == 100 * MS
    one, two = load.invocations
    assert (one.n, one.launched_ns, one.exited_ns) == (1, 50 * MS, 420 * MS)
    assert [(b.slot, b.answered, b.failed, b.slowest_ns) for b in one.buckets] == [
        (0, 3, 0, 7 * MS), (1, 1, 2, 250 * MS), (2, 0, 0, None), (3, 0, 0, None),
        (4, 1, 0, 2 * MS)]   # a failed request's latency is never the slowest answer
    assert [(b.slot, b.answered) for b in two.buckets] == [(6, 2), (7, 0)]   # to its exit
    assert [(b.slot, b.answered, b.failed) for b in load.series()] == [
        (-1, 0, 0), (0, 3, 0), (1, 1, 2), (2, 0, 0), (3, 0, 0), (4, 1, 0), (5, 0, 0),
        (6, 2, 0), (7, 0, 0), (8, 0, 0)]   # zero before, between and after the invocations
    assert load.per_second(4) == 40


def test_the_bucket_is_a_round_size_chosen_from_the_span_and_a_task_without_load_has_none():
    spread = [_request(t, 1, k) for k, t in enumerate(range(0, 30_000, 25), start=1)]
    book = _book(spread, runs=((1, 0, 30_000),))
    assert load_over_time(book.scenarios["s"], 60).bucket_ns == 500 * MS   # 30 s / 60
    assert load_over_time(book.scenarios["s"], 12).bucket_ns == 5000 * MS
    ev = book.scenarios["s"]
    ev.started = ScenarioStarted(T0, "s", "/bin/c", "0" * 64, (), (), (), 0, 0, 0, "")
    assert load_over_time(ev, 60) is None
    no_requests = _book([])
    assert all(not i.buckets for i in load_over_time(no_requests.scenarios["s"], 60).invocations)


def test_the_reports_have_a_load_table_per_invocation():
    book = _book(REQUESTS)
    load = load_over_time(book.scenarios["s"], 12)
    assert table_rows(load, load.invocations[0])[:2] == [
        ("0.0", "3", "0", "7.0", "launched"), ("0.1", "1", "2", "250.0", "")]
    assert table_rows(load, load.invocations[1])[-1] == ("0.7", "0", "0", "–", "exited")
    md, page = report.markdown(book), html.page(book)
    assert "- invocation 1: launched 0.050 s, exited 0.420 s; 100 ms buckets" in md
    assert "| 0.1 | 1 | 2 | 250.0 |  |" in md
    assert "<h4>Load over time (traffic)</h4>" in page and "<td>250.0</td>" in page


def test_the_labs_restart_of_a_service_is_on_its_timeline_row():
    restarted = ServerRecord(T0 + 300 * MS, "s", 1, "harness", "web_restarted",
                             {"exit_status": 0, "port": 8080, "pid": 77})
    failed = ServerRecord(T0 + 650 * MS, "s", 2, "harness", "web_restarted",
                          {"exit_status": 1, "port": 8080, "pid": 78, "failed": "port held"})
    tl = timeline_of(_book(REQUESTS, harness=(restarted, failed)).scenarios["s"])
    assert [(m.t_ns, m.kind, m.label) for m in tl.marks if m.row == "web"] == [
        (300 * MS, "server-start", "web started again by the lab (pid 77 had ended, status 0)"),
        (650 * MS, "server-exit", "web could not be started again by the lab: port held")]


def test_the_marks_fall_in_their_buckets_columns():
    assert [columns(i, 4, 12) for i in range(4)] == [(0, 2), (3, 5), (6, 8), (9, 11)]
    assert [columns(i, 10, 5) for i in (0, 1, 2, 9)] == [(0, 0), (0, 0), (1, 1), (4, 4)]
    load = load_over_time(_book(REQUESTS).scenarios["s"], 60)
    series = load.series()   # 10 buckets, two columns each: a launch at 50 ms in the second
    assert str(marks(load, series, 20)) == "   [1─────]   [2]   "
    assert str(marks(load, series, 10)) == " [1──] [] "   # a column a bucket
    close = _book(REQUESTS, runs=((1, 50, 420), (2, 450, 700)))   # exit, launch: one bucket
    load = load_over_time(close.scenarios["s"], 60)
    assert str(marks(load, load.series(), 10)) == " [1──][2] "   # the launch a column late


@pytest.fixture(scope="module")
def reload_archive(tmp_path_factory):
    import os
    if os.geteuid() != 0:
        pytest.skip("the operable service needs root (BCC)")
    path = tmp_path_factory.mktemp("reload") / "reload.tar.gz"
    done = evlab_in("run", "--task", "reload", "baseline", "--headless", "--archive", path)
    assert done.returncode == 0, done.stdout + done.stderr
    return path


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_dashboard_shows_a_reload_sessions_load_and_marks_its_invocations(
        reload_archive, size):
    book = EvidenceBook.of(load_archive(reload_archive).events)
    ends = [r for inv in book.scenarios["baseline"].invocations.values() for r in inv.load
            if r.event == "load_stopped"]
    answered = sum(r.fields["answered"] for r in ends)
    app = app_of(reload_archive)
    async with app.run_test(size=size) as pilot:
        await to_end(pilot)
        if size == (80, 24):   # one panel below the scenarios: key 6 shows the load
            assert not app.query_one("#load").display
            await pilot.press("6")
        await until(pilot, lambda: app.query_one("#load").region.area > 0)
        said = str(app.query_one("#load-answered-said").render())
        assert said.startswith(f"{answered} answered · ") and answered > 0
        assert str(app.query_one("#load-failed-said").render()) == f"0 of {answered}"
        drawn = str(app.query_one("#load-marks").render())
        # each invocation from its launch to its exit (its number only where it has room)
        assert drawn.count("[") == drawn.count("]") == 2
        assert drawn.index("[") < drawn.index("]") < drawn.rindex("[") < drawn.rindex("]")
        assert app.query_one("#load-answered").data   # the sparkline has its buckets
        assert "traffic · 100 ms buckets" in str(app.query_one("#load").border_subtitle)
