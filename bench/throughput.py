"""What an attempt costs beyond its client, and attempts at once (bench/__main__.py section
`throughput`).

Harness cost per attempt: a grade of the fixture's C baseline client (4 grade scenarios x
ATTEMPTS), read back from its archive: each attempt's wall time from its `setup` phase to its
`done` phase, minus the wall time of its two client invocations (ClientExited.wall_ns: launch
through the sandbox chain to the client's reaped exit). The median over the attempts.

Attempts at once: the same grade with --jobs 1 and --jobs 2, alternated; attempts per minute
of each, their ratio, and whether every clause, gate and outcome was identical across all the
runs (a concurrent attempt must be judged as a sequential one is). The peak summed RSS of the
evlab process tree during the grade is sampled as bench/suite.py does.
"""

import json
import subprocess
import tempfile
from pathlib import Path

from bench.measure import median, ratio, say
from bench.suite import EVLAB, run_evlab
from sessions.output.archive import load_archive
from sessions.stream.events import ClientExited, PhaseChanged

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "fixture" / "build" / "client-baseline"
ATTEMPTS = 3


def _grade(jobs: int, archive: Path) -> dict:
    args = ["grade", "--client", f"{BASELINE} {{host}} {{port}} {{source}}", "--attempts",
            str(ATTEMPTS), "--headless", "--jobs", str(jobs), "--archive", str(archive)]
    run = run_evlab(args)
    run["attempts"], run["harness_ms"], run["judged"] = _read(archive)
    run["attempts_per_min"] = run["attempts"] / run["wall_s"] * 60 if run["wall_s"] else None
    return run


def _read(archive: Path) -> tuple[int, list[float], dict]:
    """(attempts, harness cost of each in ms, every attempt's judgements) from the archive."""
    out = subprocess.run([str(EVLAB), "report", str(archive), "--format", "json"],
                         capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    judged = {r["id"]: (r["clauses"], {g: v["status"] for g, v in r["gates"].items()},
                        r["valid"], r["success"])
              for s in doc["grade"]["scenarios"].values() for r in s["runs"]}
    events = subprocess.run([str(EVLAB), "replay", str(archive), "--headless"],
                            capture_output=True, text=True)   # the archive re-judges cleanly
    if events.returncode not in (0, 1, 3):
        raise RuntimeError(f"replay of {archive} failed: {events.stderr.strip()[-200:]}")
    return len(judged), _harness_ms(archive), judged


def _harness_ms(archive: Path) -> list[float]:
    start, done, client = {}, {}, {}
    for e in load_archive(archive).events:
        if isinstance(e, PhaseChanged) and e.phase in ("setup", "done"):
            (start if e.phase == "setup" else done)[e.scenario] = e.t_ns
        elif isinstance(e, ClientExited):
            client[e.scenario] = client.get(e.scenario, 0) + e.wall_ns
    return [(done[s] - start[s] - client.get(s, 0)) / 1e6 for s in done if s in start]


def measure(repeats: int) -> dict:
    runs: dict[int, list[dict]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-throughput-") as tmp:
        for i in range(repeats):
            for jobs in runs:
                say(f"throughput: grade --jobs {jobs}, run {i + 1}/{repeats}")
                runs[jobs].append(_grade(jobs, Path(tmp) / f"g{jobs}-{i}.tar.gz"))
    sequential = runs[1]
    reference = sequential[0]["judged"]
    identical = all(r["judged"] == reference for rs in runs.values() for r in rs)
    per_min = {jobs: median(r["attempts_per_min"] for r in rs) for jobs, rs in runs.items()}
    return {
        "command": f"evlab grade --client '{BASELINE} {{host}} {{port}} {{source}}' "
                   f"--attempts {ATTEMPTS} --headless --jobs 1|2",
        "harness_ms_per_attempt": median(ms for r in sequential for ms in r["harness_ms"]),
        "attempts_per_grade": sequential[0]["attempts"],
        "attempts_per_min": per_min,
        "ratio_jobs2_jobs1": ratio(per_min[2], per_min[1]),
        "verdicts_identical": identical,
        "peak_tree_rss_mb": max(r["peak_tree_rss_mb"] for rs in runs.values() for r in rs),
        "peak_tree_rss_mb_jobs1": max(r["peak_tree_rss_mb"] for r in sequential),
        "runs": {jobs: [{k: v for k, v in r.items() if k not in ("rss_samples", "judged")}
                        for r in rs] for jobs, rs in runs.items()},
    }
