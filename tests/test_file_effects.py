"""Where a client's file changes landed (sessions/output/file_effects.py): exact counts from
hand-built evidence (under the target, the source, the working directory, elsewhere, not
resolved), and the dashboard's file-effects pane on a recorded mirror session (the `outside`
seeded behaviour: the reference client, keeping a copy of each file in /tmp as well)."""

from pathlib import Path

from sessions.output import html, report
from sessions.output.archive import load_archive
from sessions.output.escape import code
from sessions.output.file_effects import details, file_effects, rows
from sessions.stream.events import (
    ClientLaunched,
    CounterSample,
    FileObserved,
    ProcessObserved,
    ScenarioStarted,
)
from sessions.stream.evidence import EvidenceBook, ScenarioEvidence
from tests.test_tui_sizes import until
from tui.app import EvlabApp
from tui.feeds import ReplayFeed
from tui.panels.effects import effects_lines

MIRROR = Path(__file__).parent / "data" / "mirror.tar.gz"   # mirror's `outside`, 3 invocations
SESSION = Path(__file__).parent / "data" / "session.tar.gz"  # backup: no outputs folder
HOME, SRC, OUT = "/w/run-1", "/w/inputs/src", "/w/outputs"
LONG = "/w/outputs/" + "x" * 300   # past what the kernel reads of a path: not resolved


def _evidence(files, outputs=OUT, counters=None, scratch=((), ()), source=SRC
              ) -> ScenarioEvidence:
    started = ScenarioStarted(0, "s", "/bin/client", "0" * 64, (), (), (), 0, 0, 0, "")
    ev = ScenarioEvidence(started, "bcc", "on", [])
    inv = ev.invocation(1)
    inv.launched = ClientLaunched(0, "s", 1, 10, ("/bin/client",), HOME, source, (), outputs,
                                  *scratch)
    inv.processes = [ProcessObserved(1, "s", 1, "fork", 10, child_pid=11, seq=1)]
    inv.files = [FileObserved(t, "s", 1, pid, op, path, writes, dfd, old, seq=t)
                 for t, (pid, op, path, writes, dfd, old) in enumerate(files, start=2)]
    inv.final = CounterSample(99, "s", 1, counters if counters is not None else {
        "file_ops": len(files), "lost_events": 0, "target_write_bytes": 4096,
        "elsewhere_write_bytes": 300, "target_read_bytes": 0, "source_read_bytes": 8192}, {}, (),
        final=True, seq=99)
    return ev


FILES = [  # (pid, op, path, writes, dfd, old_path)
    (10, "open", f"{OUT}/a", True, -100, None),               # target
    (10, "open", "part.tmp", True, -100, None),               # relative: the working directory
    (10, "rename", f"{OUT}/b", True, -100, "part.tmp"),       # into the target from the cwd
    (11, "mkdir", f"{OUT}/d", True, -100, None),              # the forked child: target
    (10, "unlink", f"{SRC}/x", True, -100, None),             # the source
    (10, "rename", f"{OUT}/y", True, -100, f"{SRC}/y"),       # out of the source, into the target
    (10, "open", f"{SRC}/z", False, -100, None),              # a read: changes nothing
    (10, "open", "/tmp/e1", True, -100, None),                # elsewhere, four distinct paths
    (10, "truncate", "/tmp/e2", True, -100, None),
    (11, "open", "/tmp/e3", True, -100, None),
    (10, "open", "/tmp/e1", True, -100, None),                # the same path again
    (10, "unlink", "/var/tmp/e4", True, -100, None),
    (10, "open", "rel", True, 7, None),                       # relative to an fd never opened
    (10, "truncate", LONG, True, -100, None),                 # cut at the kernel's buffer
    (10, "chdir", "/etc", False, -100, None),
    (10, "open", "passwd", True, -100, None),                 # /etc/passwd: elsewhere
]


def test_each_change_is_counted_where_its_path_resolved():
    (e,) = file_effects(_evidence(FILES))
    assert e.ops == {"target": {"open": 1, "rename": 2, "mkdir": 1},
                     "source": {"unlink": 1, "rename": 1},
                     "cwd": {"open": 1, "rename": 1},
                     "elsewhere": {"open": 4, "truncate": 1, "unlink": 1},
                     "unknown": {"open": 1, "truncate": 1}}
    assert [e.count(p) for p in ("target", "source", "cwd", "elsewhere", "unknown")] == \
        [4, 2, 2, 6, 2]
    assert e.elsewhere == ("/tmp/e1", "/tmp/e2", "/tmp/e3") and e.elsewhere_more == 2
    assert e.bytes == {"target_write_bytes": 4096, "elsewhere_write_bytes": 300,
                       "source_read_bytes": 8192, "target_read_bytes": 0}
    assert e.observed and e.gap == ""
    assert rows([e]) == [("target", [4]), ("source", [2]), ("work dir", [2]),
                         ("elsewhere", [6]), ("unknown", [2]), ("target bytes written", [4096]),
                         ("elsewhere bytes written", [300]), ("source bytes read", [8192]),
                         ("target bytes read", [0])]
    assert details([e], str) == [
        (1, "elsewhere", ["/tmp/e1", "/tmp/e2", "/tmp/e3", "… 2 more"]),
        (1, "target ops", ["2 rename · 1 mkdir · 1 open for writing"]),
        (1, "source ops", ["1 rename · 1 unlink"]),
        (1, "work dir ops", ["1 open for writing · 1 rename"]),
        (1, "elsewhere ops", ["4 open for writing · 1 truncate · 1 unlink"]),
        (1, "unknown ops", ["1 open for writing · 1 truncate"])]


def test_the_sandboxs_tmp_and_shm_are_counted_with_the_working_directory():
    """#44: in the sandbox /tmp and /dev/shm are folders of the client's home, as its working
    directory; its root is not."""
    shm = [(10, "open", "/dev/shm/sem.mp-1", True, -100, None),
           (10, "unlink", "/dev/shm/sem.mp-1", True, -100, None),
           (10, "mkdir", "/outside", True, -100, None)]
    (e,) = file_effects(_evidence(FILES + shm, scratch=(("/tmp", "/dev/shm"), ("/w/inputs",))))
    assert e.ops["cwd"] == {"open": 5, "rename": 1, "truncate": 1, "unlink": 1}
    assert e.ops["elsewhere"] == {"unlink": 1, "open": 1, "mkdir": 1}
    assert e.elsewhere == ("/var/tmp/e4", "/etc/passwd", "/outside")
    (e,) = file_effects(_evidence(shm))   # no sandbox: the host's /dev/shm is elsewhere
    assert e.ops["elsewhere"] == {"open": 1, "unlink": 1, "mkdir": 1}


def test_without_an_outputs_folder_there_is_no_target_and_missing_evidence_is_not_zero():
    (e,) = file_effects(_evidence(FILES[4:7], outputs=""))   # backup's and fetch's shape
    assert e.count("target") is None and e.bytes["target_write_bytes"] is None
    assert e.bytes["elsewhere_write_bytes"] is None   # counted only beside a target
    assert e.count("elsewhere") == 1 and e.elsewhere == ("/w/outputs/y",)   # a folder like any
    assert [label for label, _ in rows([e])] == ["source", "work dir", "elsewhere", "unknown",
                                                 "source bytes read"]
    # a task that watches no input (fetch's shape) has no source: no row, never 0
    (e,) = file_effects(_evidence(FILES[4:7], source=""))
    assert e.count("source") is None and e.bytes["source_read_bytes"] is None
    assert e.ops["source"] == {} and e.count("elsewhere") == 2   # what was the source's is not
    assert [label for label, _ in rows([e])] == [
        "target", "work dir", "elsewhere", "unknown", "target bytes written",
        "elsewhere bytes written", "target bytes read"]
    (lost,) = file_effects(_evidence(FILES, counters={"file_ops": 30, "lost_events": 0}))
    assert lost.gap == f"{len(FILES)} of the kernel's 30 file events arrived"
    assert lost.bytes["target_write_bytes"] is None   # not observed, never 0
    (blind,) = file_effects(_evidence([], counters={}))   # a collector without file events
    assert not blind.observed and blind.count("cwd") is None
    assert details([blind], str) == [(1, "not observed",
                                      ["the collector delivers no file events"])]


def test_client_paths_are_shown_as_data():
    (e,) = file_effects(_evidence([(10, "open", "/tmp/\x1b[2Jx|`y", True, -100, None)]))
    assert "inv 1 elsewhere: /tmp/\\x1b[2Jx|`y" in effects_lines([e], 1)
    assert details([e], code)[0] == (1, "elsewhere", ["``/tmp/\\x1b[2Jx|`y``"])


def test_the_reports_show_the_same_table_as_the_pane():
    book = EvidenceBook.of(load_archive(MIRROR).events)
    md, page = report.markdown(book), html.page(book)
    assert "| target | 495 | 63 | 0 |" in md and "| elsewhere | 241 | 16 | 0 |" in md
    assert "- invocation 1, elsewhere: `/tmp/f239.dat`, `/tmp/f229.dat`, `/tmp/f219.dat`, " \
           "… 238 more" in md
    assert "<h4>File effects</h4>" in page and "<td>9,548,278</td>" in page


def _app(archive: Path) -> EvlabApp:
    return EvlabApp(ReplayFeed(load_archive(archive), archive, playing=False))


async def _to_end(pilot) -> None:
    driver = pilot.app.feed.driver
    while not driver.done:
        driver.step(1)
    await pilot.pause()


# each layout waited for, not a pause of so long: a busy machine lays out later


async def test_at_80x24_key_5_shows_a_mirror_scenarios_file_effects():
    app = _app(MIRROR)
    async with app.run_test(size=(80, 24)) as pilot:
        await _to_end(pilot)
        await pilot.press("5")
        pane = app.query_one("#effects")
        await until(pilot, lambda: pane.display and app.focused is pane
                    and pane.region.width == 80)
        assert not app.query_one("#verdicts").display   # one panel at a time
        lines = list(pane.lines)
        assert lines[0].split() == ["changes", "inv", "1", "inv", "2", "inv", "3"]
        assert lines[1].split() == ["target", "495", "63", "0"]
        assert lines[4].split() == ["elsewhere", "241", "16", "0"]
        assert lines[6].split() == ["target", "bytes", "written", "9,548,278", "193,394", "0"]
        assert lines[7].split() == ["elsewhere", "bytes", "written", "9,548,278", "193,394", "0"]
        assert lines[10:14] == ["inv 1 elsewhere: /tmp/f239.dat", " " * 17 + "/tmp/f229.dat",
                               " " * 17 + "/tmp/f219.dat", " " * 17 + "… 238 more"]
        assert "inv 1 target ops: 242 rename · 241 open for writing · 11 mkdir · 1 symlink" \
            in lines


async def test_on_a_larger_terminal_the_effects_take_the_packets_column_of_a_serverless_task():
    app = _app(MIRROR)
    async with app.run_test(size=(120, 40)) as pilot:
        await _to_end(pilot)
        packets, effects = app.query_one("#packets"), app.query_one("#effects")
        await until(pilot, lambda: effects.display and effects.region.width >= 54
                    and packets.region.area == 0)
        await pilot.press("2")   # the packets, chosen
        await until(pilot, lambda: packets.region.area > 0 and effects.region.area == 0)
        await pilot.press("5")
        await until(pilot, lambda: effects.region.area > 0 and packets.region.area == 0)
    app = _app(SESSION)   # backup: servers, so the packets keep their column until 5
    async with app.run_test(size=(120, 40)) as pilot:
        await _to_end(pilot)
        packets, effects = app.query_one("#packets"), app.query_one("#effects")
        await until(pilot, lambda: packets.region.area > 0 and effects.region.area == 0)
        await pilot.press("5")
        await until(pilot, lambda: effects.region.area > 0 and packets.region.area == 0)
        assert list(effects.lines)[1].split() == ["source", "0", "0"]
