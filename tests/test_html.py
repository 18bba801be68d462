"""The HTML report (`--html PATH`, `evlab report ARCHIVE --html PATH | --format html`).

Without a browser (fast): pages of the recorded session and campaign carry every verdict of the
JSON document and nothing else, load nothing from anywhere, and a client hostile to HTML (its
claims, file names, process names) changes no tag of the page; the timeline's SVG from
hand-built timelines. In Debian's chromium under Playwright (bench/html_shots.py, which `make
bench` uses for its screenshots): the pages load with no console or page error and every
verdict read from the live DOM equals the JSON document's — for `report ARCHIVE --html` of both
archives, a hostile page, and a real `grade --html` (root: the lab).
"""

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench import html_shots
from bench.html_shots import expected_verdicts, page_verdicts, verdicts_of
from sessions.output import document, html
from sessions.output.archive import load_archive
from sessions.output.escape import html as esc
from sessions.output.judged import JudgedStream
from sessions.output.timeline import MARK_KINDS, SPAN_KINDS, Mark, Span, Timeline, timeline_of
from sessions.output.timeline_svg import LABEL_W, MARKS, SPANS, WIDTH, legend, svg
from sessions.stream.events import (
    CleanupObserved,
    ClientClaim,
    FileObserved,
    ProcessObserved,
    ServerRecord,
)
from sessions.stream.evidence import EvidenceBook
from tests.backup_lab import client_path
from tests.support import Ran, evlab_in

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
ARCHIVES = ("session.tar.gz", "campaign.tar.gz")
HOSTILE = ("<script>alert(1)</script>\"'><img src=http://evil/x onerror=alert(2)>"
           "<style>@import url(http://evil/c.css)</style><a href=\"http://evil\">x</a>"
           "&amp;\x1b[31m]]><!--")


class _Parsed(HTMLParser):
    """A page's tags in order, their attributes, and the text of its <style> and <script>."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[dict[str, str | None]] = []
        self.code: dict[str, str] = {"style": "", "script": ""}
        self._in: str | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.append(dict(attrs))
        self._in = tag if tag in self.code else None

    def handle_endtag(self, tag):
        self.tags.append(f"/{tag}")
        self._in = None

    def handle_data(self, data):
        if self._in:
            self.code[self._in] += data

    def datasets(self) -> list[dict]:
        return [{k[5:]: v or "" for k, v in a.items() if k.startswith("data-")}
                for a in self.attrs]


def _book(name: str) -> EvidenceBook:
    return EvidenceBook.of(load_archive(DATA / name).events)


def _judged(events) -> EvidenceBook:
    """The events judged again (client text in verdict reasons and findings too)."""
    book = EvidenceBook()
    stream = JudgedStream(book=book)
    for e in events:
        if type(e).__name__ not in ("Verdict", "GateResult", "ScenarioJudged", "AttemptJudged",
                                    "RiskScan"):
            stream.publish(dataclasses.replace(e, seq=0))
    return book


def _poison(events, text: str) -> list:
    """Text in every field a client writes: claims, exec'd file names, paths it opens, what it
    leaves behind, what the receiver recorded of its bytes."""
    out = []
    for e in events:
        if isinstance(e, ClientClaim):
            e = dataclasses.replace(e, claim={**e.claim, "note": text, text[:40]: [text]})
        elif isinstance(e, ProcessObserved) and e.kind == "exec":
            e = dataclasses.replace(e, filename=f"/bin/{text}")
        elif isinstance(e, FileObserved):
            e = dataclasses.replace(e, path=f"/tmp/{text}", op="open", writes=True)
        elif isinstance(e, CleanupObserved):
            e = dataclasses.replace(e, leftover=(f"99 {text}",), cwd_files=(text,))
        elif isinstance(e, ServerRecord) and e.server == "receiver":
            e = dataclasses.replace(e, fields={**e.fields, "sample": text})
        out.append(e)
    return out


def _self_contained(page: str, parsed: _Parsed) -> None:
    """Nothing fetched: no src anywhere, links only to the page's own anchors, no @import or
    url() in its style, a policy that forbids every load."""
    assert not re.search(r"""(src|href)\s*=\s*["']\s*(https?:|//|data:)""", page, re.I)
    assert all("src" not in a for a in parsed.attrs)
    assert all(a["href"].startswith("#") for a in parsed.attrs if "href" in a)
    assert all(not name.startswith("on") for a in parsed.attrs for name in a)
    assert "@import" not in parsed.code["style"] and "url(" not in parsed.code["style"]
    assert "http" not in parsed.code["script"] and "fetch" not in parsed.code["script"]
    assert "default-src 'none'" in page
    assert parsed.tags.count("script") == 1 and parsed.tags.count("style") == 1


@pytest.mark.parametrize("name", ARCHIVES)
def test_a_recorded_sessions_page_carries_every_verdict_of_the_json_document(name):
    book = _book(name)
    page = html.page(book)
    parsed = _Parsed(page)
    doc = document.build(book)
    assert verdicts_of(parsed.datasets()) == expected_verdicts(doc)
    assert {kind for kind, *_ in expected_verdicts(doc)} >= {"clause", "check"}
    _self_contained(page, parsed)
    # each scenario or attempt: its section, and its timeline with every mark the model has
    for i, ev in enumerate(book.scenarios.values(), 1):
        section = page.split(f'id="a-{i}"', 1)[1].split("</details>\n", 1)[0]
        assert section.count('<g class="mark"') == len(timeline_of(ev).marks) > 0
        assert "Clauses and gates" in section and "<svg class=\"timeline\"" in section


def test_a_campaigns_page_has_its_leaderboard_and_each_clients_gates():
    doc = document.build(_book("campaign.tar.gz"))
    verdicts = verdicts_of(_Parsed(html.page(_book("campaign.tar.gz"))).datasets())
    ranks = {(name, rank) for kind, name, _, rank in verdicts if kind == "rank"}
    assert ranks == {(r["name"], str(r["rank"])) for r in doc["campaign"]["leaderboard"]}
    assert {kind for kind, *_ in verdicts} == {"clause", "check", "gate", "outcome", "rank"}


def test_a_client_hostile_to_html_changes_no_tag_and_shows_as_text():
    events = load_archive(DATA / "campaign.tar.gz").events
    base, hostile = (_judged(_poison(events, text)) for text in ("x", HOSTILE))
    page, base_page = html.page(hostile), html.page(base)
    parsed, base_parsed = _Parsed(page), _Parsed(base_page)
    assert parsed.tags == base_parsed.tags      # not one element more, less or other
    _self_contained(page, parsed)
    assert verdicts_of(parsed.datasets()) == expected_verdicts(document.build(hostile))
    assert esc(HOSTILE).startswith("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&gt;&lt;")
    script = "&lt;script&gt;alert(1)&lt;/script&gt;"
    for where in ("exec: exec /bin/", "<code>{&quot;", "still running: 99 ", "open /tmp/"):
        assert where + script in page, where   # the timeline, claims, a gate, a finding
    assert "\x1b" not in page and "\\x1b[31m" in page


def test_escape_html_makes_text_inert_in_an_element_or_an_attribute():
    assert esc('<a href="x">&\'\x1b\n') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;\\x1b\\n"
    assert esc("\ud800") == "\\ud800"


def _timeline(label: str = "a label") -> Timeline:
    rows = ("pid 10 client", "pid 11 helper", "receiver")
    spans = tuple(Span(1_000_000 * i, 1_000_000 * (i + 3), rows[i % 3], kind, label)
                  for i, kind in enumerate(SPAN_KINDS))
    marks = tuple(Mark(500_000 * i, rows[i % 3], kind, label) for i, kind in enumerate(MARK_KINDS))
    return Timeline("normal@1", rows, spans, (*marks, Mark(99_000_000, "receiver", "fault", label)),
                    8_000_000)


def test_every_kind_of_the_timeline_has_its_own_look_and_a_legend():
    assert set(MARKS) == set(MARK_KINDS) and set(SPANS) == set(SPAN_KINDS)
    looks = [(shape, colour) for shape, colour, _ in MARKS.values()]
    assert len(set(looks)) == len(looks)        # receiver connects and others included
    assert MARKS["connect-endpoint"][:2] != MARKS["connect-other"][:2]
    drawn = svg(_timeline())
    parsed = _Parsed(drawn)
    assert parsed.tags.count("g") == len(MARK_KINDS) + 1 + len(SPAN_KINDS)
    assert [d["kind"] for d in parsed.datasets() if "kind" in d][:len(SPAN_KINDS)] == \
        ["invocation", *[k for k in SPAN_KINDS if k != "invocation"]]   # bands under bars
    xs = [float(v) for a in parsed.attrs for k, v in a.items() if k in ("cx", "x1") and v]
    assert xs and all(LABEL_W - 10 <= x <= WIDTH for x in xs)   # a late mark stays inside
    key = legend(_timeline())
    for _, _, word in (*MARKS.values(), *SPANS.values()):
        assert f"</svg>{word}</li>" in key


def test_the_timelines_client_text_is_escaped_and_an_empty_one_says_so():
    drawn = svg(_timeline("<script>x</script>\x1b"))
    assert "<script>" not in drawn and "&lt;script&gt;x&lt;/script&gt;\\x1b</title>" in drawn
    assert "No timeline" in svg(Timeline("s", (), (), (), 0)) and legend(
        Timeline("s", (), (), (), 0)) == ""


def _evlab(*args: str, cwd: Path) -> Ran:
    return evlab_in(*args, cwd=cwd)   # in this process: no start-up or compile each


@pytest.mark.slow
def test_report_writes_the_page_where_asked_and_prints_it_with_format_html(tmp_path):
    archive = str(DATA / "session.tar.gz")
    done = _evlab("report", archive, "--html", "out/r.html", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["r.html"]
    printed = _evlab("report", archive, "--format", "html", cwd=tmp_path).stdout
    assert printed == (tmp_path / "out" / "r.html").read_text()
    both = _evlab("report", archive, "--format", "md", "--html", "b.html", cwd=tmp_path)
    assert both.stdout.startswith("# evlab session report") and (tmp_path / "b.html").exists()
    for argv in (["report", archive, "--html", "out"], ["run", "baseline", "--headless",
                                                          "--html", "/dev/full"]):
        bad = _evlab(*argv, cwd=tmp_path)
        assert bad.returncode == 2 and "not a regular file" in bad.stderr, bad.stderr


# --- in a real browser ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def chromium():
    if html_shots.chromium() is None:
        pytest.skip("Debian's chromium is not installed (`make setup` installs it)")
    with html_shots.browser() as b:
        yield b


def _check_in_browser(b, path: Path, doc: dict) -> None:
    """At 1280 and 390 pixels: no console or page error, the DOM's verdicts are the JSON's,
    nothing wider than the screen, and expand-all opens every attempt."""
    for width in html_shots.WIDTHS:
        page, problems = html_shots.open_page(b, path, width)
        assert page_verdicts(page) == expected_verdicts(doc)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.click("button[data-open='1']")
        assert page.evaluate("Array.from(document.querySelectorAll('details.attempt'))"
                             ".every(d => d.open)")
        assert page.locator("svg.timeline").count() == len(doc["scenarios"])
        assert problems == []
        page.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", ARCHIVES)
def test_report_archive_html_loads_in_chromium_with_the_json_documents_verdicts(
        chromium, tmp_path, name):
    archive = str(DATA / name)
    assert _evlab("report", archive, "--html", "r.html", cwd=tmp_path).returncode == 0
    doc = json.loads(_evlab("report", archive, "--format", "json", cwd=tmp_path).stdout)
    _check_in_browser(chromium, tmp_path / "r.html", doc)


@pytest.mark.slow
def test_a_hostile_clients_text_runs_nothing_in_chromium(chromium, tmp_path):
    book = _judged(_poison(load_archive(DATA / "campaign.tar.gz").events, HOSTILE))
    path = tmp_path / "hostile.html"
    path.write_text(html.page(book), encoding="utf-8")
    _check_in_browser(chromium, path, document.build(book))   # no alert() dialog either
    page, problems = html_shots.open_page(chromium, path, 1280)
    page.click("button[data-open='1']")
    assert "<script>alert(1)</script>" in page.evaluate("document.body.innerText")
    assert page.evaluate("document.querySelectorAll('script, img, link, iframe').length") == 1
    assert problems == []


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.root(reason="runs the lab with the BCC collector")
def test_grade_html_loads_in_chromium_with_the_json_documents_verdicts(
        chromium, tmp_path, built_clients):
    done = _evlab("grade", "--client", f"{client_path('baseline')} {{host}} {{port}} {{source}}",
                  "--attempts", "1", "--scenario", "normal", "--headless", "--json", "g.json",
                  "--html", "g.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["grade"]["overall"]["attempts"] == 1
    _check_in_browser(chromium, tmp_path / "g.html", doc)
    page = (tmp_path / "g.html").read_text()
    assert 'data-kind="connect-endpoint"' in page and 'data-kind="commit"' in page
