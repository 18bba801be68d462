"""What grading costs (bench/__main__.py section `grade`).

The same four grade scenarios with the fixture's honest client, run two ways in alternation:
  plain   `evlab run --suite grade --headless` — the scenarios as the seeded suite runs them;
  graded  `evlab grade --client <baseline> --attempts 1 --headless` — the same scenarios as
          attempts: a fresh source copy and isolated working directories, the cleanup check
          after each invocation, the receiver SIGKILLed and restarted (durability), GET
          (restore), gates and risk findings.
graded / plain is the lifecycle's cost. Then a full default grade (3 attempts) of the Python
client written from fixture/backup/protocol.md, the figure a user waits for.
"""

from pathlib import Path

from bench.measure import median, ratio, say
from bench.suite import run_evlab

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "fixture" / "build" / "client-baseline"
PY_CLIENT = ROOT / "tests" / "clients" / "backup_client.py"


def _summary(runs: list[dict]) -> dict:
    return {"runs": runs, "median_wall_s": median(r["wall_s"] for r in runs),
            "median_peak_tree_rss_mb": median(r["peak_tree_rss_mb"] for r in runs),
            "exits": sorted({r["exit"] for r in runs}), "scenarios": runs[-1]["scenarios"],
            "summary": runs[-1]["summary"]}


def measure(repeats: int) -> dict:
    commands = {
        "plain": ["run", "--suite", "grade", "--headless"],
        "graded": ["grade", "--client", f"{BASELINE} {{host}} {{port}} {{source}}",
                   "--attempts", "1", "--headless"],
    }
    runs: dict[str, list[dict]] = {label: [] for label in commands}
    for i in range(repeats):
        for label, args in commands.items():
            say(f"grade: {label} run {i + 1}/{repeats}")
            runs[label].append(run_evlab(args))
    out = {f"command_{label}": " ".join(["evlab", *args]) for label, args in commands.items()}
    out.update({label: _summary(samples) for label, samples in runs.items()})
    out["ratio_graded_plain_wall"] = ratio(out["graded"]["median_wall_s"],
                                           out["plain"]["median_wall_s"])
    python = ["grade", "--client", f"/usr/bin/python3 {PY_CLIENT} {{host}} {{port}} {{source}}",
              "--headless"]
    say("grade: the Python client, 3 attempts of each scenario")
    out["python_default"] = {"command": " ".join(["evlab", *python]),
                             **_summary([run_evlab(python)])}
    return out
