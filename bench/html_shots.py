"""The HTML report in a real browser (bench/__main__.py section `html`), and the helpers
tests/test_html.py drives it with.

Debian's chromium (installed by `make setup`), driven by Playwright through `executable_path`
(Playwright's own browser download is never used). Two pages: a fresh `evlab grade` of the C
baseline (one attempt of each grade scenario, `--html`) and `evlab report
tests/data/campaign.tar.gz --html`. Each is loaded at 1280 and 390 pixels wide with its first
attempt open (`#a-1`); a full-page screenshot of each goes to bench/shots/ for review, and the
section records whether any console message of type error or page error appeared and whether
every verdict the page carries (its data-* attributes) equals the JSON document's.
"""

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from bench.measure import say

ROOT = Path(__file__).resolve().parent.parent
EVLAB = ROOT / ".venv" / "bin" / "evlab"
SHOTS = Path(__file__).resolve().parent / "shots"
BASELINE = ROOT / "fixture" / "build" / "client-baseline"
WIDTHS = (1280, 390)
CHROMIUM = ("chromium", "chromium-headless-shell")

# every element carrying a verdict: its data-* attributes (dataset), read in the page
DATASETS_JS = """() => Array.from(document.querySelectorAll(
    "[data-verdict], [data-check], [data-outcome], [data-rank]"))
    .map(e => Object.assign({}, e.dataset))"""


def chromium() -> str | None:
    """Debian's chromium, or None when it is not installed."""
    return next((path for name in CHROMIUM if (path := shutil.which(name))), None)


@contextlib.contextmanager
def browser() -> Iterator:
    """A headless chromium under Playwright (as root, without chromium's own sandbox: it
    refuses to start as root with it)."""
    from playwright.sync_api import sync_playwright
    path = chromium()
    if path is None:
        raise FileNotFoundError("chromium is not installed (make setup installs it)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path,
                              args=["--no-sandbox"] if os.geteuid() == 0 else [])
        try:
            yield b
        finally:
            b.close()


def open_page(b, path: Path, width: int, fragment: str = ""):
    """The page loaded at `width` pixels; (page, problems): every console error and page error."""
    page = b.new_page(viewport={"width": width, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(path.resolve().as_uri() + fragment, wait_until="load")
    return page, problems


def verdicts_of(datasets: Iterable[dict]) -> set[tuple[str, str, str, str]]:
    """The verdicts a page carries, from its elements' data-* attributes."""
    out = set()
    for d in datasets:
        if "verdict" in d:
            kind = "clause" if "clause" in d else "gate"
            out.add((kind, d.get("scenario", ""), d.get(kind, ""), d["verdict"]))
        if "check" in d:
            out.add(("check", d.get("scenario", ""), "", d["check"]))
        if "outcome" in d:
            out.add(("outcome", d.get("scenario", ""), "", d["outcome"]))
        if "rank" in d:
            out.add(("rank", d.get("client", ""), "", d["rank"]))
    return out


def page_verdicts(page) -> set[tuple[str, str, str, str]]:
    return verdicts_of(page.evaluate(DATASETS_JS))


def expected_verdicts(doc: dict) -> set[tuple[str, str, str, str]]:
    """Every verdict of a JSON document: clauses, instrument checks, each grading attempt's
    gates and outcome, the leaderboard's ranks."""
    out = set()
    for s in doc["scenarios"]:
        out.add(("check", s["id"], "", s["instrument_check"]))
        out |= {("clause", s["id"], c["id"], c["status"]) for c in s["clauses"]}
    campaign = doc["campaign"] or {}
    grades = [doc["grade"]] if doc["grade"] else list(campaign.get("clients", {}).values())
    for run in (run for g in grades for sc in g["scenarios"].values() for run in sc["runs"]):
        outcome = ("running" if run["valid"] is None else "invalid" if not run["valid"]
                   else "success" if run["success"] else "failed")
        out.add(("outcome", run["id"], "", outcome))
        out |= {("clause", run["id"], c, status) for c, status in run["clauses"].items()}
        out |= {("gate", run["id"], g, v["status"]) for g, v in run["gates"].items()}
    out |= {("rank", r["name"], "", str(r["rank"])) for r in campaign.get("leaderboard", ())}
    return out


def _pages(where: Path) -> dict[str, tuple[Path, dict]]:
    """The two pages and their JSON documents: a fresh grade, the recorded campaign."""
    grade = subprocess.run(
        [str(EVLAB), "grade", "--client", f"{BASELINE} {{host}} {{port}} {{source}}",
         "--attempts", "1", "--headless", "--json", "grade.json", "--html", "grade.html"],
        cwd=where, capture_output=True, text=True, timeout=600)
    if not (where / "grade.html").exists():
        raise RuntimeError(f"evlab grade wrote no page (exit {grade.returncode}): "
                           f"{grade.stderr[-500:]}")
    archive = ROOT / "tests" / "data" / "campaign.tar.gz"
    subprocess.run([str(EVLAB), "report", str(archive), "--html", "campaign.html"], cwd=where,
                   check=True, timeout=120)
    campaign = subprocess.run([str(EVLAB), "report", str(archive), "--format", "json"],
                              check=True, capture_output=True, text=True, timeout=120).stdout
    return {"grade": (where / "grade.html", json.loads((where / "grade.json").read_text())),
            "campaign": (where / "campaign.html", json.loads(campaign))}


def measure() -> dict:
    SHOTS.mkdir(exist_ok=True)
    out: dict = {"chromium": chromium(), "pages": {}}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-html-") as tmp:
        say("html: a grade of the C baseline (--html) and the recorded campaign's page")
        pages = _pages(Path(tmp))
        with browser() as b:
            out["browser_version"] = b.version
            for name, (path, doc) in pages.items():
                result = out["pages"][name] = {"bytes": path.stat().st_size, "shots": [],
                                               "problems": []}
                for width in WIDTHS:
                    page, problems = open_page(b, path, width, "#a-1")
                    shot = SHOTS / f"{name}-{width}.png"
                    page.screenshot(path=str(shot), full_page=True)
                    result["shots"].append(str(shot.relative_to(ROOT)))
                    result["problems"] += problems
                    result[f"verdicts_equal_{width}"] = page_verdicts(page) == \
                        expected_verdicts(doc)
                    result[f"page_width_{width}"] = page.evaluate(
                        "document.documentElement.scrollWidth")
                    page.close()
                say(f"html: {name}: {result}")
    return out
