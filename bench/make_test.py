"""`make test` as a user runs it once set-up is done (make setup is then a no-op): its wall time,
whether it passed, and pytest's own summary line (tests on xdist workers, the lint before); a
failed test's name and report are kept in results.json."""

import re
import subprocess
import time
from pathlib import Path

from bench.measure import say

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 180
TIMEOUT_S = 1800


def measure() -> dict:
    subprocess.run(["make", "-s", "setup"], cwd=ROOT, check=True, capture_output=True)
    say("make test ...")
    started = time.monotonic()
    done = subprocess.run(["make", "test"], cwd=ROOT, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    wall = time.monotonic() - started
    summary = next((line.strip("= ") for line in reversed(done.stdout.splitlines())
                    if re.search(r"\d+ (passed|failed)", line)), "")
    failed = [line.split()[1] for line in done.stdout.splitlines()
              if line.startswith("FAILED ")]   # kept, so a flaky test can be found again
    say(f"make test: {wall:.0f} s, exit {done.returncode}: {summary}")
    # and why: pytest's failure reports (its `E` lines and the test's lines around them)
    reports = done.stdout.partition("= FAILURES =")[2].partition("short test summary")[0]
    return {"wall_s": wall, "returncode": done.returncode, "summary": summary,
            "failed": failed, "failures": reports[-20_000:] if failed else ""}


def targets(result: dict) -> list[dict]:
    """The section's rows of the targets table (bench/report.py's targets())."""
    wall = result.get("wall_s")
    passed = result.get("returncode") == 0 if result else None
    counts = re.search(r"(\d+) passed", result.get("summary", ""))
    return [{"target": "make test wall time (set-up done), every test passing", "value": wall,
             "goal": f"<= {GOAL_S} s", "unit": "s",
             "met": None if wall is None else bool(passed and wall <= GOAL_S)},
            {"target": "make test: tests passed", "value": int(counts[1]) if counts else None,
             "goal": "report", "unit": "", "met": None if not counts else "report"}]
