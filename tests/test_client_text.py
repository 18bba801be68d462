"""Client text is data: hostile strings in every field a client controls, in a real recorded
stream (a campaign's grade attempts), re-judged as a replay would, then rendered everywhere. No
output crashes, none gets structure it did not have (a heading, a table row, an XML element, a
line), nothing a terminal would act on reaches a terminal, and the JSON and the archive give
the same text back."""

import asyncio
import dataclasses
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.text import cleaned
from sessions.lab.observations import CLAIM_BYTES_MAX, claim_event
from sessions.output import document, report
from sessions.output.archive import ArchiveWriter, load_archive
from sessions.output.escape import code, markdown, visible, xml
from sessions.output.judged import JudgedStream
from sessions.stream.codec import from_json, to_json
from sessions.stream.events import (
    CleanupObserved,
    ClientClaim,
    FileObserved,
    GradeStarted,
    ProcessObserved,
    ServerRecord,
)
from sessions.stream.evidence import EvidenceBook
from tui.app import EvlabApp
from tui.feeds import ReplayFeed

DATA = Path(__file__).parent / "data" / "campaign.tar.gz"
RECORDED = load_archive(DATA).events
OBSERVED = [e for e in RECORDED if type(e).__name__ not in
            ("Verdict", "GateResult", "ScenarioJudged", "AttemptJudged", "RiskScan")]

NASTY = ["[/]", "[bold red]x[/bold red]", "[link=http://e]x[/link]", "\x1b]0;pwned\x07",
         "\x1b]52;c;cHduZWQ=\x07", "\x1b[32m✓ success\x1b[0m", "\n## Grade\n| a | b |\n",
         "a\nb", "\r", "\x00", "\x7f\x9b", "\ud800", "\udcff", "\ufffe", "]]><!--", "&amp;<x/>",
         "`code`", "| x |", "*_~", "\\", "#", "A" * (1 << 20)]
TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")   # \t and \n may be layout


def hostile() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(NASTY), st.text(max_size=40),
                     st.lists(st.sampled_from(NASTY), min_size=2, max_size=4).map("".join))


NAME_MAX, CLAIM_MAX = 255, CLAIM_BYTES_MAX   # what the kernel and the claims' intake pass


def _poison(events, text: str):
    """The stream with text in every client-controlled field (and the user's command), each
    as long as its way in lets it be (a path the kernel reports, a file name, a claim)."""
    name, claim = text[:NAME_MAX], text[:CLAIM_MAX // 2]
    out = []
    for e in events:
        if isinstance(e, FileObserved):
            e = dataclasses.replace(e, path=f"/tmp/{name}", op="open", writes=True)
        elif isinstance(e, ProcessObserved) and e.kind == "exec":
            e = dataclasses.replace(e, filename=f"/bin/{name}")
        elif isinstance(e, ClientClaim):
            e = dataclasses.replace(e, claim={**e.claim, "note": claim, name[:50]: [name]})
        elif isinstance(e, CleanupObserved):
            e = dataclasses.replace(e, leftover=(f"99 {name}",), cwd_files=(name,),
                                    listening=(f"127.0.0.1:1 ({name})",), left_at_exit=(name,))
        elif isinstance(e, ServerRecord) and e.server == "receiver":
            e = dataclasses.replace(e, fields={**e.fields, "sample": name})
        elif isinstance(e, GradeStarted):
            e = dataclasses.replace(e, command=(*e.command, claim))
        out.append(e)
    return out


def _judged(events) -> EvidenceBook:
    book = EvidenceBook()
    stream = JudgedStream(book=book)
    for e in events:
        stream.publish(dataclasses.replace(e, seq=0))
    return book


BASE = _judged(_poison(OBSERVED, "x"))   # the same stream with harmless text in those fields
BASE_MD = report.render(BASE.events, "md")


CELL = re.compile(r"(?<!\\)\|")   # a pipe that is not escaped: a table cell's edge


def _structure(md: str) -> list[str]:
    """What Markdown structure a report has: its headings, and each table row's cell count."""
    out = []
    for line in md.splitlines():
        if line.startswith("#"):
            out.append(line.split(" ")[0])
        elif line.startswith("|"):
            out.append(f"row of {len(CELL.findall(line))}")
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile())
def test_hostile_client_text_leaves_every_output_whole(text, tmp_path_factory):
    book = _judged(_poison(OBSERVED, cleaned(text)))   # as probes/text.py carries it
    assert [v.clause for v in book.events if type(v).__name__ == "Verdict"] == \
        [v.clause for v in BASE.events if type(v).__name__ == "Verdict"]
    md = report.render(book.events, "md")
    assert _structure(md) == _structure(BASE_MD)
    assert len(md.splitlines()) == len(BASE_MD.splitlines())
    assert not TERMINAL.search(md)
    junit = report.render(book.events, "junit")
    assert not TERMINAL.search(junit)
    assert len(ET.fromstring(junit).findall(".//testcase")) == \
        len(ET.fromstring(report.render(BASE.events, "junit")).findall(".//testcase"))
    doc = document.build(book)
    written = json.dumps(doc, ensure_ascii=False).encode("utf-8")   # no lone surrogate in it
    assert json.loads(written) == json.loads(json.dumps(doc))
    for e in book.events:   # each event's text comes back from the archive's codec
        assert from_json(to_json(e)) == dataclasses.replace(e, seq=e.seq)
    archive = tmp_path_factory.mktemp("a") / "s.tar.gz"
    writer = ArchiveWriter(tmp_path_factory.mktemp("staging"), book)
    writer.finish(archive)
    loaded = load_archive(archive)
    assert loaded.events == book.events
    assert report.render(loaded.events, "md") == md


def test_hostile_client_text_never_reaches_the_terminal_through_the_dashboard(tmp_path):
    """The markup and the terminal's escapes of NASTY all at once in every field (one
    dashboard driven through its screens, not one per string)."""
    book = _judged(_poison(OBSERVED, cleaned("".join(NASTY[:13]))))
    archive = tmp_path / "s.tar.gz"
    (tmp_path / "staging").mkdir()
    ArchiveWriter(tmp_path / "staging", book).finish(archive)
    shots = []

    async def drive():
        app = EvlabApp(ReplayFeed(load_archive(archive), archive, playing=False))
        async with app.run_test(size=(80, 24)) as pilot:
            app.feed.driver.set_speed(1000)
            await pilot.press("space")   # play to the end: every verdict and gate judged
            for _ in range(600):
                if app.feed.driver.done:
                    break
                await pilot.pause(0.05)
            for keys in (("down",), ("tab", "down", "down", "down"), ("enter",), ("escape",),
                         ("g",), ("escape", "l"), ("enter",)):
                await pilot.press(*keys)
                await pilot.pause(0.2)
                shots.append(app.export_screenshot())
            assert app.feed.driver.done
    asyncio.run(drive())
    for shot in shots:   # what the terminal was given to draw, as text
        assert not TERMINAL.search(shot.replace("\n", "").replace("\t", ""))


def test_escapes_keep_every_character_visible_and_inert():
    assert visible("a\x1b]0;x\x07\nb\udcff\u009b") == "a\\x1b]0;x\\x07\\nb\\udcff\\x9b"
    assert markdown("| x\n## h [l](u) <b> `c`") == \
        "\\| x\\\\n\\#\\# h \\[l\\](u) \\<b\\> \\`c\\`"
    assert code("a `b`") == "`` a `b` ``" and code("x") == "`x`"
    assert xml("\x00a\ufffe") == "\\x00a\\ufffe"
    assert visible("x" * 10, limit=5) == "xxxx…"


@pytest.mark.parametrize("raw, why", [
    (b"[" * 985 + b"]" * 985, "nested too deep to read"),
    (b'{"a": ' + b"[" * 9 + b"]" * 9 + b"}", "nesting or numbers an event cannot carry"),
    (b'{"a": NaN}', "nesting or numbers an event cannot carry"),
    (b'{"a": 100000000000000000000000}', "nesting or numbers an event cannot carry"),
    (b"x" * (CLAIM_BYTES_MAX + 1), f"longer than {CLAIM_BYTES_MAX:,} bytes"),
    (b"[1, 2]", "not a JSON object"),
    (b"\xff\xfe not json", "not JSON"),
])
def test_claims_beyond_the_bounds_are_kept_as_malformed_claims(raw, why):
    claim = claim_event(raw + b"\n", "s", 1)
    assert claim.claim["malformed"] == why
    assert len(claim.claim["text"]) <= 500
    assert from_json(to_json(claim)) == claim   # and the archive can carry it


def test_an_archive_written_elsewhere_with_lone_surrogates_is_read_as_escapes(tmp_path):
    """Only a hand-made document holds "\\ud800": it is judged and rendered like any text."""
    line = to_json(next(e for e in OBSERVED if isinstance(e, FileObserved)))
    crafted = from_json(line.replace('"path":"', '"path":"/root/\\ud800')
                        .replace('"writes":false', '"writes":true'))
    assert crafted.path.startswith("/root/\\ud800")   # the escape, not a surrogate
    events = [crafted if e.seq == crafted.seq else e for e in OBSERVED]
    md = report.render(_judged(events).events, "md")
    assert "/root/\\\\ud800" in md and not TERMINAL.search(md)


def test_a_claims_text_that_is_not_utf8_is_kept_as_escapes():
    claim = claim_event(b'{"claim": "completed", "name": "caf\xc3\xa9 \\ud800"}\n', "s", 1)
    assert claim.claim == {"claim": "completed", "name": "café \\ud800"}
    assert from_json(to_json(claim)) == claim


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.root(reason="runs the lab")
def test_a_client_hostile_to_every_output_gets_each_one_written_and_whole(tmp_path):
    """tests/clients/texts.py for real: markup, escapes, newlines, undecodable bytes, a deep and
    an over-long claim, in its claims, file names and paths."""
    evlab = str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "evlab")
    client = Path(__file__).parent / "clients" / "texts.py"
    done = subprocess.run(
        [evlab, "grade", "--client", f"/usr/bin/python3 {client} {{host}} {{port}} {{source}}",
         "--attempts", "1", "--scenario", "normal", "--headless", "--json", "t.json",
         "--report", "t.md", "--archive", "t.tar.gz"], cwd=tmp_path, capture_output=True,
        timeout=300)
    assert done.returncode == 1, done.stderr   # the grade failed (cleanup): nothing crashed
    assert not TERMINAL.search(done.stderr.decode().replace("\n", ""))
    doc = json.loads((tmp_path / "t.json").read_bytes())
    claims = doc["scenarios"][0]["invocations"][0]["claims"]
    assert {c.get("malformed") for c in claims} >= {"nested too deep to read", "not JSON",
                                                    "longer than 65,536 bytes"}
    md = (tmp_path / "t.md").read_text()
    assert [line for line in md.splitlines() if line.startswith("## ")] == \
        ["## Grade", "## Verdicts", "## normal@1"]
    assert not TERMINAL.search(md) and "\\#\\# Grade" in md
    replay = subprocess.run([evlab, "replay", "t.tar.gz", "--headless"], cwd=tmp_path,
                            capture_output=True, timeout=120)
    assert replay.returncode == 1 and not TERMINAL.search(replay.stderr.decode()
                                                          .replace("\n", ""))
    junit = subprocess.run([evlab, "report", "t.tar.gz", "--format", "junit"], cwd=tmp_path,
                           capture_output=True, check=True, timeout=60).stdout.decode()
    assert ET.fromstring(junit).findall(".//testcase") and not TERMINAL.search(
        junit.replace("\n", ""))
