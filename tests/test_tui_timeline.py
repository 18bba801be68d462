"""The dashboard's timeline (key `t`, tui/timeline.py), driven as a user drives it over a recorded
session (tests/data/session.tar.gz: baseline, corrupt-upload, retry): opened by its key, zoomed,
moved, flipped between scenarios, at 80x24 and 200x50; and its drawing on hand-made timelines."""

from pathlib import Path

import pytest

from sessions.output.timeline import Mark, Span, Timeline
from tests.test_tui_sizes import app_of, to_end, until
from tui.timeline import MARKS, TimelineChart, TimelineScreen, Window, lane, legend, when

RUN = Path(__file__).parent / "data" / "session.tar.gz"
MS = 1_000_000


def chart_text(app) -> str:
    return str(app.screen.query_one(TimelineChart).render())


def listed(app) -> str:
    return str(app.screen.query_one("#timeline-items").render())


def lanes(app) -> dict[str, str]:
    """Each row's lane, by the row's name as drawn (cut to the label column)."""
    chart = app.screen.query_one(TimelineChart)
    return {line.split("  ")[0].strip(): line for line in chart_text(app).splitlines()[1:]
            if line.startswith(("pid", "receiver"))} if chart.timeline else {}


def assert_drawn_as_modelled(app) -> None:
    """The receiver's lane has a commit, and the list a line, for what the window holds."""
    screen = app.screen
    window, tl = screen.shown_window(), screen.timeline
    inside = [m for m in tl.marks if window.start_ns <= m.t_ns <= window.end_ns]
    spans = [s for s in tl.spans if s.kind != "alive"
             and s.start_ns <= window.end_ns and s.end_ns >= window.start_ns]
    assert len(listed(app).splitlines()) == len(inside) + len(spans) or not inside + spans
    receiver = chart_text(app).splitlines()[tl.rows.index("receiver") + 1]
    assert ("✓" in receiver) == any(m.kind == "commit" for m in inside)


async def test_t_opens_the_selected_scenarios_timeline_and_keys_zoom_move_and_flip():
    app = app_of(RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        await to_end(pilot)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen)
                    and app.screen.timeline is not None)
        await pilot.pause(0.2)
        screen = app.screen
        assert screen.scenario == "baseline"
        text = chart_text(app)
        rows = text.splitlines()
        # a lane per process (one per invocation) and the receiver's, then the legend
        assert [r[:4] for r in rows[1:4]] == ["pid ", "pid ", "rece"] and rows[1] != rows[2]
        receiver = rows[3]
        assert "✓" in receiver and "✗" not in receiver and "!" not in receiver   # a commit
        assert "→" in rows[1] and "→" in rows[2]      # each invocation's receiver connects
        assert "[" in rows[1] and "]" in rows[1] and "▸" in rows[1] and "■" in rows[1]
        assert "✓ commit" in text and "! fault" in text and "↗ other connect" in text
        chart = screen.query_one(TimelineChart)
        assert chart.region.width <= 80 and chart.region.height == len(rows)
        assert all(len(r) <= 80 for r in rows)
        assert "committed (conn 2, 524,288 bytes)" in listed(app)

        whole = screen.shown_window()
        assert whole.start_ns == 0 and whole.span_ns == screen.timeline.end_ns
        await pilot.press("plus", "plus")       # 4x, around the middle
        zoomed = screen.shown_window()
        assert zoomed.span_ns == whole.span_ns // 4
        assert "(zoom 4x)" in str(screen.query_one("#timeline-title").render())
        await pilot.press("right")
        moved = screen.shown_window()
        assert moved.start_ns == zoomed.start_ns + zoomed.span_ns // 4
        assert_drawn_as_modelled(app)
        for _ in range(10):
            await pilot.press("left")           # stops at the start
        assert screen.shown_window().start_ns == 0
        assert_drawn_as_modelled(app)
        await pilot.press("minus", "minus", "minus")    # never wider than the whole
        assert screen.shown_window() == whole
        await pilot.press("plus", "0")
        assert screen.shown_window() == whole

        await pilot.press("j")
        await until(pilot, lambda: screen.scenario == "corrupt-upload")
        assert "✗" in chart_text(app).splitlines()[3] and "✓" not in chart_text(app).splitlines()[3]
        assert listed(app).count("rejected (conn") == 6
        await pilot.press("j")
        await until(pilot, lambda: screen.scenario == "retry")
        receiver = chart_text(app).splitlines()[3]
        assert "!" in receiver and "✓" in receiver
        assert "fault fired: drop" in listed(app)

        await pilot.press("t")                  # back to the dashboard
        await until(pilot, lambda: not isinstance(app.screen, TimelineScreen))


async def test_at_200x50_the_chart_takes_the_width_and_the_list_every_line():
    app = app_of(RUN)
    async with app.run_test(size=(200, 50)) as pilot:
        await to_end(pilot)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen)
                    and app.screen.timeline is not None)
        await pilot.pause(0.2)
        rows = chart_text(app).splitlines()
        assert max(len(r) for r in rows) >= 190
        # wide enough that an upload's start and its commit are cells apart
        assert "↑" in rows[3] and "✓" in rows[3] and "→" in rows[1] and "→" in rows[2]
        assert rows[1].startswith("pid ") and rows[1].split()[2] == "client-baseline"   # whole
        assert len([r for r in rows if "commit" in r or "fault" in r]) == 1   # a one-line legend
        items = listed(app).splitlines()
        assert len(items) == len(app.screen.timeline.marks) + len(
            [s for s in app.screen.timeline.spans if s.kind != "alive"])
        assert any("upload started (conn 2, 524,288 bytes)" in line for line in items)


async def test_a_timeline_opened_before_the_scenario_ran_follows_it():
    app = app_of(RUN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen))
        assert "not started" in chart_text(app)
        await to_end(pilot)
        await until(pilot, lambda: "✓" in chart_text(app))
        assert app.screen.shown_window().span_ns == app.screen.timeline.end_ns


def _drawn(*marks: Mark, spans: tuple[Span, ...] = ()) -> Timeline:
    return Timeline("s", ("pid 1 c", "receiver"), spans, marks, 100 * MS)


def test_receiver_connects_and_other_connects_differ_in_glyph_and_colour():
    tl = _drawn(Mark(10 * MS, "pid 1 c", "connect-endpoint", "connect 127.0.0.1:1"),
                Mark(50 * MS, "pid 1 c", "connect-other", "connect 10.0.0.1:53"))
    text = lane(tl, "pid 1 c", Window(0, 100 * MS), 10, 111)
    glyphs = {str(text)[s.start:s.end]: str(s.style) for s in text.spans if s.style}
    assert glyphs["→"] != glyphs["↗"]
    assert str(text).index("→") == 11 + 10 and str(text).index("↗") == 11 + 50


def test_a_cell_shows_its_weightiest_mark_and_spans_lie_under_marks():
    tl = _drawn(Mark(20 * MS, "receiver", "start", "u"),
                Mark(20 * MS, "receiver", "fault", "f"),
                Mark(20 * MS, "receiver", "reject", "r"),
                spans=(Span(10 * MS, 30 * MS, "receiver", "connection", "conn 1"),))
    line = str(lane(tl, "receiver", Window(0, 100 * MS), 10, 111))[11:]
    assert line[20] == "!" and line[10:20] == "━" * 10 and line[21:31] == "━" * 10
    assert line[31:].strip() == ""


def test_every_mark_kind_has_its_own_glyph_and_the_legend_fits_80_columns_in_two_lines():
    glyphs = [g for g, _, _ in MARKS.values()]
    assert len(set(glyphs)) == len(glyphs)
    lines = legend(78)
    assert len(lines) == 2 and all(line.cell_len <= 78 for line in lines)


@pytest.mark.parametrize(("t_ns", "step_ns", "shown"), [
    (150 * MS, 50 * MS, "150 ms"), (3_500 * MS, 500 * MS, "3500 ms"),
    (12_000 * MS, 2_000 * MS, "12 s"), (1_234_567, 10_000, "1.23 ms"), (40_000, 5_000, "40 µs")])
def test_times_are_printed_to_the_digit_of_their_step(t_ns, step_ns, shown):
    assert when(t_ns, step_ns) == shown


def test_the_window_zooms_about_its_middle_and_never_leaves_the_timeline():
    whole = Window(0, 400 * MS)
    assert whole.zoomed(2, 400 * MS) == Window(100 * MS, 200 * MS)
    assert whole.zoomed(0.5, 400 * MS) == whole
    assert Window(300 * MS, 100 * MS).moved(0.5, 400 * MS) == Window(300 * MS, 100 * MS)
    assert Window(0, 100 * MS).moved(-0.25, 400 * MS) == Window(0, 100 * MS)
    deepest = whole
    for _ in range(40):
        deepest = deepest.zoomed(2, 400 * MS)
    assert deepest.span_ns == 10_000 and deepest.column(deepest.end_ns, 50) == 49
