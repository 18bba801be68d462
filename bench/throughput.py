"""What an attempt costs beyond its client, and attempts at once (bench/__main__.py section
`throughput`).

Harness cost per attempt: a grade of the fixture's C baseline client (4 grade scenarios x
ATTEMPTS), read back from its archive: each attempt's wall time from its `setup` phase to its
`done` phase, minus the wall time of its two client invocations (ClientExited.wall_ns: launch
through the sandbox chain to the client's reaped exit). The median over the attempts. Beside
it, in the same loop, the fetch task's: a grade of the Python client written from its
protocol (tests/clients/fetch_client.py, 5 grade scenarios x ATTEMPTS; nginx as its server);
and each task's endpoint's start-up, from its start to its `listening` record (a fresh
interpreter each: the receiver's Python; fetch's wrapper and nginx), STARTS times,
alternating, median, and their ratio.

The lab network's share of it: LabNetwork.create + remove (probes/boundary/netns.py: a
network namespace per attempt), and one `run` in it (a thread entering it: an attempt makes
about six: capture, two launches, durability, restore), each timed NETWORKS times in this
process, median. (The kernel frees a namespace after remove() returns, on its own workqueue:
not an attempt's wall time.)

Repeated REPEATS times: attempts per minute, whether every clause, gate and outcome was
identical across the runs, and the peak summed RSS of the evlab process tree during the grade
(sampled as bench/suite.py does). Attempts at once (--jobs) are bench/jobs.py's.
"""

import json
import subprocess
import tempfile
import time
from pathlib import Path

from bench.measure import median, ratio, say
from bench.suite import EVLAB, run_evlab
from probes.boundary.netns import LabNetwork
from sessions.lab.harness import start_server
from sessions.output.archive import load_archive
from sessions.stream.events import ClientExited, PhaseChanged

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "fixture" / "build" / "client-baseline"
FETCH_CLIENT = ROOT / "tests" / "clients" / "fetch_client.py"
RELOAD_CLIENT = ROOT / "tests" / "clients" / "reload_client.pl"
ROTATE_CLIENT = ROOT / "fixture" / "rotate" / "client.py"
ATTEMPTS = 3
NETWORKS = 200
STARTS = 20
GRADES = {"backup": ["--client", f"{BASELINE} {{host}} {{port}} {{source}}"],
          "fetch": ["--task", "fetch", "--client",
                    f"/usr/bin/python3 {FETCH_CLIENT} {{url}} {{out}}"],
          # the tasks that operate nginx under evlab's load (its start, the load, the
          # verifier's nginx -t and probes are the harness's share)
          "reload": ["--task", "reload", "--client", f"{RELOAD_CLIENT} {{conf}} {{version}}"],
          "rotate": ["--task", "rotate", "--client",
                     f"/usr/bin/python3 {ROTATE_CLIENT} {{log}} {{pidfile}}"]}
OPERATED = ("reload", "rotate")
# each task's endpoint as the lab starts it (fixture/*/task.toml), its state in a fresh folder
ENDPOINTS = {"backup": ("fixture.backup.receiver", ["--store", "{state}/store", "--port", "0"]),
             "fetch": ("fixture.fetch.nginx", ["--state", "{state}", "--port", "0"])}


def _grade(archive: Path, task: str = "backup") -> dict:
    args = ["grade", *GRADES[task], "--attempts", str(ATTEMPTS), "--headless", "--archive",
            str(archive)]
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


def _startup_ms(task: str, tmp: Path) -> float:
    """One start of a task's endpoint to its `listening` record, then stopped."""
    module, args = ENDPOINTS[task]
    state = Path(tempfile.mkdtemp(prefix=f"start-{task}-", dir=tmp))
    argv = ["--events", str(state / "events.jsonl"),
            *(a.replace("{state}", str(state)) for a in args)]
    t0 = time.perf_counter()
    server = start_server(module, (), argv, state / "events.jsonl", cwd=state)
    took = (time.perf_counter() - t0) * 1e3
    server.stop()
    return took


def _network_ms() -> tuple[float | None, float | None]:
    """Medians (ms): a lab network made and removed; one call run inside it."""
    made, entered = [], []
    for _ in range(NETWORKS):
        t0 = time.perf_counter()
        net = LabNetwork.create("bench")
        t1 = time.perf_counter()
        net.run(lambda: None)
        t2 = time.perf_counter()
        net.remove()
        made.append((time.perf_counter() - t2 + t1 - t0) * 1e3)
        entered.append((t2 - t1) * 1e3)
    return median(made), median(entered)


def measure(repeats: int) -> dict:
    say(f"throughput: {NETWORKS} lab networks made and removed")
    network_ms, run_in_ms = _network_ms()
    runs, fetch, starts = [], [], {task: [] for task in ENDPOINTS}
    operated: dict[str, list[dict]] = {task: [] for task in OPERATED}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-throughput-") as tmp:
        for i in range(repeats):
            say(f"throughput: grade of backup, fetch, {', '.join(OPERATED)}: run "
                f"{i + 1}/{repeats}")
            runs.append(_grade(Path(tmp) / f"g{i}.tar.gz"))
            fetch.append(_grade(Path(tmp) / f"f{i}.tar.gz", "fetch"))
            for task in OPERATED:
                operated[task].append(_grade(Path(tmp) / f"{task}{i}.tar.gz", task))
        say(f"throughput: each task's endpoint started {STARTS} times")
        for _ in range(STARTS):
            for task in ENDPOINTS:
                starts[task].append(_startup_ms(task, Path(tmp)))
    fetch_ms = median(ms for r in fetch for ms in r["harness_ms"])
    start_ms = {task: median(samples) for task, samples in starts.items()}
    return {
        "fetch": {"command": "evlab grade " + " ".join(GRADES["fetch"]),
                  "harness_ms_per_attempt": fetch_ms,
                  "attempts_per_grade": fetch[0]["attempts"],
                  "verdicts_identical": all(r["judged"] == fetch[0]["judged"] for r in fetch),
                  "every_attempt_passed": all(ok for r in fetch
                                              for *_, ok in r["judged"].values()),
                  "ratio_to_backup": ratio(fetch_ms, median(
                      ms for r in runs for ms in r["harness_ms"]))},
        **{task: _beside(task, grades, runs) for task, grades in operated.items()},
        "endpoint_start_ms": start_ms,
        "endpoint_start_ratio_nginx_receiver": ratio(start_ms["fetch"], start_ms["backup"]),

        "command": f"evlab grade --client '{BASELINE} {{host}} {{port}} {{source}}' "
                   f"--attempts {ATTEMPTS} --headless",
        "harness_ms_per_attempt": median(ms for r in runs for ms in r["harness_ms"]),
        "lab_network_ms": network_ms,
        "lab_network_run_ms": run_in_ms,
        "lab_network_share": ratio(network_ms + 6 * run_in_ms if network_ms else None,
                                   median(ms for r in runs for ms in r["harness_ms"])),
        "attempts_per_grade": runs[0]["attempts"],
        "attempts_per_min": median(r["attempts_per_min"] for r in runs),
        "verdicts_identical": all(r["judged"] == runs[0]["judged"] for r in runs),
        "peak_tree_rss_mb": max(r["peak_tree_rss_mb"] for r in runs),
        "peak_tree_pss_mb": max(r["peak_tree_pss_mb"] for r in runs),
        "runs": [{k: v for k, v in r.items() if k not in ("rss_samples", "judged")}
                 for r in runs],
    }


def _beside(task: str, grades: list[dict], backup: list[dict]) -> dict:
    """A task's harness cost per attempt beside backup's, from the same loop."""
    ms = median(ms for r in grades for ms in r["harness_ms"])
    return {"command": "evlab grade " + " ".join(GRADES[task]), "harness_ms_per_attempt": ms,
            "attempts_per_grade": grades[0]["attempts"],
            "verdicts_identical": all(r["judged"] == grades[0]["judged"] for r in grades),
            "every_attempt_passed": all(ok for r in grades for *_, ok in r["judged"].values()),
            # what an attempt that did not pass failed, to read why (run k, attempt, clauses,
            # gates, valid)
            "not_passed": [(k, attempt, sorted(c for c, v in clauses.items() if v == "fail"),
                            sorted(g for g, v in gates.items() if v == "fail"), valid)
                           for k, r in enumerate(grades, 1)
                           for attempt, (clauses, gates, valid, ok) in r["judged"].items()
                           if not ok],
            "ratio_to_backup": ratio(ms, median(ms for r in backup for ms in r["harness_ms"]))}
