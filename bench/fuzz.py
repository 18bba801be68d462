"""The fuzzers at full breadth (bench/__main__.py section `fuzz`): the hypothesis fuzzers of
tests/test_receiver_fuzz.py (frames at the receiver) and tests/test_archive_fuzz.py (an event
of the wrong type in an archive) run the same 200 and 30 examples in every `make test`
(derandomized, so the suite's outcome never depends on a draw); here they run REPEATS times
with EXAMPLES new random examples each (EVLAB_FUZZ_EXAMPLES), where the breadth of a random
search is the point: whether each run passed, its wall time, and a failing run's report (with
hypothesis' @reproduce_failure blob)."""

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import say

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = 1000
REPEATS = 3
TIMEOUT_S = 900


def measure(repeats: int = REPEATS) -> dict:
    runs = []
    for n in range(1, repeats + 1):
        say(f"fuzz {n}/{repeats}: {EXAMPLES} random examples a fuzzer ...")
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
             "tests/test_receiver_fuzz.py", "tests/test_archive_fuzz.py", "-k",
             "test_fuzz_frames_keep_the_receiver_serving or field_of_the_wrong_type"],
            cwd=ROOT, env={**os.environ, "EVLAB_FUZZ_EXAMPLES": str(EXAMPLES)},
            capture_output=True, text=True, timeout=TIMEOUT_S)
        wall = time.monotonic() - started
        stats = next((line for line in done.stdout.splitlines() if line.startswith("fuzz: {")), "")
        runs.append({"wall_s": wall, "passed": done.returncode == 0, "stats": stats,
                     "report": "" if done.returncode == 0 else done.stdout[-20_000:]})
        say(f"fuzz {n}/{repeats}: {'passed' if done.returncode == 0 else 'FAILED'} "
            f"in {wall:.0f} s")
    return {"examples": EXAMPLES, "runs": runs}


def targets(result: dict) -> list[dict]:
    """The section's rows of the targets table (bench/report.py's targets())."""
    runs = result.get("runs") if result else None
    passed = sum(r["passed"] for r in runs) if runs else None
    return [{"target": f"receiver fuzz: runs of {EXAMPLES:,} random examples that passed",
             "value": None if runs is None else f"{passed} of {len(runs)}",
             "goal": "all", "unit": "", "met": None if runs is None else passed == len(runs)}]
