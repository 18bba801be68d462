"""Several attempts at once (`--jobs N`) judged as one at a time, and what it buys
(bench/__main__.py section `jobs`; issue #16).

Four workloads, each run with `--jobs 1` and with `--jobs 2` in every one of REPEATS
repetitions, side by side, which of the two goes first alternated each repetition:
  suite     `evlab run --all --headless --jobs N --json J` (the 8 seeded scenarios);
  grade-c   `evlab grade --client '<dir>/client-baseline {host} {port} {source}' --attempts 2
            --headless --jobs N --json J` (4 grade scenarios x 2 = 8 attempts);
  grade-py  the same with `python3 <dir>/client.py` (tests/clients/backup_client.py);
  campaign  `evlab campaign <dir>/campaign.toml --headless --dir D --jobs N --json J` of both
            clients on the 4 grade scenarios, 1 attempt each (8 attempts; the local engine).
The clients are copies of fixture/build/client-baseline and tests/clients/backup_client.py in a
temporary directory made 0755, so the sandbox user that runs them can read them (as
bench/campaign.py lays them out).

From each JSON document: every scenario's clause statuses and instrument check and, for a
grade, every attempt's gate statuses, valid and success (tests/test_jobs.py's _judged), and the
scenarios' order. A repetition is judged alike when its --jobs 2 judgements equal both its own
--jobs 1 judgements and the first repetition's --jobs 1 (every clause identical); every
difference is kept (scenario, clause, the two statuses). Each --jobs 1 run is also compared
with the first (is one at a time itself stable?). Wall time is the whole command's, fork to
reaped exit (bench/suite.py's run_evlab), start-up included; attempts a minute = 8 / median
wall; the ratio is --jobs 2 / --jobs 1 of those, and also the median over repetitions of each
repetition's own ratio. After every run the evlab-lab processes still alive are counted.
"""

import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

import psutil

from bench.measure import RunFailed, median, ratio, say
from bench.suite import run_evlab
from sessions.lab.cpus import default_jobs

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "fixture" / "build" / "client-baseline"
PY_CLIENT = ROOT / "tests" / "clients" / "backup_client.py"
REPEATS = 20
JOBS = (1, 2)
ATTEMPTS = 2
EXPECTED = 8          # scenarios (attempts) of every run, in every workload
WORKLOADS = {"suite": "`evlab run --all`: the 8 seeded scenarios",
             "grade-c": "`evlab grade` of the fixture's C baseline: 4 scenarios x 2 attempts",
             "grade-py": "`evlab grade` of the Python client (python3): 4 scenarios x 2 attempts",
             "campaign": "`evlab campaign` of both clients: 4 scenarios x 1 attempt each"}
CAMPAIGN = """[campaign]
name = "jobs"
scenarios = ["normal", "interrupted", "mismatch", "stale"]
attempts = 1
[[client]]
name = "c"
command = ["./client-baseline", "{host}", "{port}", "{source}"]
[[client]]
name = "py"
command = "python3 client.py {host} {port} {source}"
"""
SHOWN_DIFFERENCES = 30
REASON_CHARS = 200
ABSENT = "absent"


def _commands(tmp: Path) -> dict[str, list[str]]:
    """Each workload's evlab arguments but --jobs and --json; the clients copied into tmp."""
    tmp.chmod(0o755)
    shutil.copy(BASELINE, tmp / "client-baseline")
    shutil.copy(PY_CLIENT, tmp / "client.py")
    grade = ["grade", "--client"]
    rest = ["--attempts", str(ATTEMPTS), "--headless"]
    (tmp / "campaign.toml").write_text(CAMPAIGN)
    return {"suite": ["run", "--all", "--headless"],
            "grade-c": [*grade, f"{tmp / 'client-baseline'} {{host}} {{port}} {{source}}",
                        *rest],
            "grade-py": [*grade, f"python3 {tmp / 'client.py'} {{host}} {{port}} {{source}}",
                         *rest],
            "campaign": ["campaign", str(tmp / "campaign.toml"), "--headless"]}


def _judged(doc: dict) -> dict:
    """The scenarios' order and, by scenario, every judgement: its clauses' statuses, its
    instrument check and, for a grade attempt, its gates' statuses, valid and success."""
    items: dict[str, dict] = {}
    reasons: dict[str, dict] = {}   # why each was judged so: kept beside, not compared
    for s in doc["scenarios"]:
        items[s["id"]] = {**{c["id"]: c["status"] for c in s["clauses"]},
                          "instrument check": s["instrument_check"]}
        reasons[s["id"]] = {**{c["id"]: c.get("reason") for c in s["clauses"]},
                            "instrument check": s.get("instrument_detail")}
    graded = ([c["scenarios"] for c in doc["campaign"]["clients"].values()]
              if doc.get("campaign") else [(doc["grade"] or {"scenarios": {}})["scenarios"]])
    runs = [r for scenarios in graded for s in scenarios.values() for r in s["runs"]]
    for r in runs:
        items.setdefault(r["id"], {}).update(
            {f"gate {g}": v["status"] for g, v in r["gates"].items()},
            valid=r["valid"], success=r["success"])
        reasons.setdefault(r["id"], {}).update(
            {f"gate {g}": v.get("reason") for g, v in r["gates"].items()},
            valid=r.get("reason"), success=r.get("reason"))
    return {"order": [s["id"] for s in doc["scenarios"]] + [f"grade {r['id']}" for r in runs],
            "items": items, "reasons": reasons, "grade_attempts": len(runs)}


def _differences(a: dict, b: dict) -> list[list]:
    """[scenario, clause, a's status, b's status] for every judgement that differs."""
    out = []
    if a["order"] != b["order"]:
        out.append(["(order)", "scenarios", " ".join(a["order"]), " ".join(b["order"])])
    for scenario in dict.fromkeys([*a["items"], *b["items"]]):
        x, y = a["items"].get(scenario, {}), b["items"].get(scenario, {})
        for key in dict.fromkeys([*x, *y]):
            if x.get(key, ABSENT) != y.get(key, ABSENT):
                out.append([scenario, key, x.get(key, ABSENT), y.get(key, ABSENT)])
    return out


def _labs_left() -> int:
    """evlab-lab worker processes still alive (a pool must leave none)."""
    left = 0
    for p in psutil.process_iter(["name", "status"]):
        if "evlab-lab" in (p.info["name"] or "") and p.info["status"] != psutil.STATUS_ZOMBIE:
            left += 1
    return left


def _run(args: list[str], jobs: int, tmp: Path, tag: str) -> tuple[dict, dict | None]:
    """One timed run: (its figures, its judgements or None when it judged not all 8)."""
    doc_path = tmp / f"{tag}.json"
    if args[0] == "campaign":   # a campaign directory of its own per run
        args = [*args, "--dir", str(tmp / f"{tag}-dir")]
    try:
        full = run_evlab([*args, "--jobs", str(jobs), "--json", str(doc_path)])
    except RunFailed as e:   # killed after suite.TIMEOUT_S: a run without figures
        return {"jobs": jobs, "wall_s": None, "exit": "killed", "peak_tree_rss_mb": None,
                "labs_left": _labs_left(), "problem": str(e)}, None
    run = {k: full[k] for k in ("wall_s", "exit", "summary", "peak_tree_rss_mb",
                                "first_scenario_done_s", "last_scenario_done_s")}
    run.update(jobs=jobs, labs_left=_labs_left())
    if not doc_path.exists():
        run["problem"] = f"no JSON document (exit {run['exit']}): {run['summary'][:160]}"
        return run, None
    doc = json.loads(doc_path.read_text())
    doc_path.unlink()
    judged = _judged(doc)
    run["judged"] = len(judged["items"])
    run["judgements"] = sum(len(v) for v in judged["items"].values())
    graded = judged["grade_attempts"] == (0 if args[0] == "run" else EXPECTED)
    if doc["partial"] or run["judged"] != EXPECTED or not graded:
        run["problem"] = (f"{run['judged']} of {EXPECTED} judged ({judged['grade_attempts']} "
                          f"grade attempts), partial {doc['partial']} "
                          f"(exit {run['exit']}): {run['summary'][:160]}")
        return run, None
    return run, judged


def _repetitions(commands: dict[str, list[str]], tmp: Path, repeats: int) -> tuple[dict, dict]:
    """Every workload at --jobs 1 and 2 in each repetition, the two's order alternated."""
    runs = {w: {j: [] for j in JOBS} for w in commands}
    judged: dict = {w: {j: [] for j in JOBS} for w in commands}
    for i in range(repeats):
        order = JOBS if i % 2 == 0 else JOBS[::-1]
        for workload, args in commands.items():
            for jobs in order:
                say(f"jobs: {workload} --jobs {jobs}, repetition {i + 1}/{repeats}")
                run, judgements = _run(args, jobs, tmp, f"{workload}-{jobs}-{i}")
                run["repetition"] = i + 1
                runs[workload][jobs].append(run)
                judged[workload][jobs].append(judgements)
    return runs, judged


def _compare(ones: list, twos: list) -> dict:
    """Repetitions judged alike (--jobs 2 = its own --jobs 1 = the first --jobs 1), every
    difference, and how many --jobs 1 runs equal the first."""
    first = next((i for i, j in enumerate(ones) if j is not None), None)
    ref = ones[first] if first is not None else None
    alike = comparable = stable = stable_of = 0
    differences: list[dict] = []

    def keep(i: int, between: str, x: dict, y: dict) -> bool:
        """Keep x's and y's differences (their reasons beside); True when there is none."""
        found = _differences(x, y) if x is not y else []
        differences.extend({"repetition": i + 1, "between": between, "scenario": s,
                            "clause": c, "a": a, "b": b,
                            "reason_a": x["reasons"].get(s, {}).get(c),
                            "reason_b": y["reasons"].get(s, {}).get(c)} for s, c, a, b in found)
        return not found

    for i, (one, two) in enumerate(zip(ones, twos, strict=True)):
        if one is not None and ref is not None and i != first:
            stable += keep(i, f"--jobs 1 of repetition {first + 1} / --jobs 1", ref, one)
            stable_of += 1
        if None in (one, two, ref):
            continue
        comparable += 1
        own = keep(i, "--jobs 1 / --jobs 2 (same repetition)", one, two)
        against_first = keep(i, f"--jobs 1 of repetition {first + 1} / --jobs 2", ref, two)
        alike += own and against_first
    return {"alike": alike, "comparable": comparable, "repetitions": len(ones),
            "reference_repetition": None if first is None else first + 1,
            "jobs1_stable": stable, "jobs1_compared": stable_of,
            "judgements_per_run": None if ref is None else sum(map(len, ref["items"].values())),
            "differences": differences, "reference": ref}


def _summary(runs: list[dict]) -> dict:
    """Medians over the runs that judged all 8; why, when there is none."""
    good = [r for r in runs if "problem" not in r]
    wall = median(r["wall_s"] for r in good)
    missing = None
    if wall is None:
        missing = "no run judged all its scenarios" + "".join(
            f"; {r['problem']}" for r in runs[:3] if "problem" in r) if runs else "not run"
    return {"runs": runs, "counted": len(good), "median_wall_s": wall,
            "attempts_per_min": EXPECTED / wall * 60 if wall else None,
            "median_first_scenario_done_s": median(r["first_scenario_done_s"] for r in good),
            "median_last_scenario_done_s": median(r["last_scenario_done_s"] for r in good),
            "median_peak_tree_rss_mb": median(r["peak_tree_rss_mb"] for r in good),
            "exits": sorted({str(r["exit"]) for r in runs}),
            "labs_left": sum(r["labs_left"] for r in runs), "missing": missing}


def _paired(ones: list[dict], twos: list[dict]) -> float | None:
    """The median over repetitions of that repetition's --jobs 1 wall / --jobs 2 wall."""
    return median(ratio(one["wall_s"], two["wall_s"]) for one, two in zip(ones, twos, strict=True)
                  if "problem" not in one and "problem" not in two)


def measure(repeats: int) -> dict:
    out: dict = {"repeats": repeats, "expected": EXPECTED, "default_jobs": default_jobs(),
                 "cpus_usable": len(os.sched_getaffinity(0)), "workloads": {}}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-jobs-") as name:
        tmp = Path(name)
        commands = _commands(tmp)
        runs, judged = _repetitions(commands, tmp, repeats)
    for workload, args in commands.items():
        shown = shlex.join(["evlab", *args, "--jobs", "N", "--json", "J"])
        w: dict = {"command": shown.replace(str(tmp), "<dir>")}
        for jobs in JOBS:
            w[f"jobs{jobs}"] = _summary(runs[workload][jobs])
        w.update(_compare(judged[workload][1], judged[workload][2]))
        w["ratio_per_min"] = ratio(w["jobs2"]["attempts_per_min"], w["jobs1"]["attempts_per_min"])
        w["ratio_paired"] = _paired(runs[workload][1], runs[workload][2])
        w["ratio_in_run"] = ratio(_span(w["jobs1"]), _span(w["jobs2"]))
        out["workloads"][workload] = w
    return out


def _span(s: dict) -> float | None:
    """First to last scenario reported (median of each): the run with its start-up left out."""
    first, last = s["median_first_scenario_done_s"], s["median_last_scenario_done_s"]
    return last - first if None not in (first, last) else None


def _alike(w: dict) -> str | None:
    if not w.get("comparable"):
        return None
    return f"{w['alike']} of {w['repetitions']}"


def targets(j: dict) -> list[dict]:
    """The section's rows of the targets table (bench/report.py's targets())."""
    out: list[dict] = []

    def add(name, value, unit, goal="report", met="report"):
        out.append({"target": name, "value": value, "goal": goal, "unit": unit,
                    "met": None if value is None else met})

    repeats = j.get("repeats", REPEATS)
    for workload, title in WORKLOADS.items():
        w = j.get("workloads", {}).get(workload, {})
        add(f"--jobs 2 judged as --jobs 1, every clause ({title}): repetitions alike",
            _alike(w), "", f"{repeats} of {repeats}",
            w.get("alike") == w.get("repetitions") == w.get("comparable"))
        add(f"attempts per minute, --jobs 2 / --jobs 1 ({title})", w.get("ratio_per_min"), "x")
    add("default --jobs on this machine (one lab per two CPUs)", j.get("default_jobs"), "")
    return out


def report_lines(j: dict | None, value) -> list[str]:
    """The section of bench/results.md (bench/report.py's value formatter passed in)."""
    if not j:
        return []
    lines = ["", f"## Attempts at once (`--jobs 2` vs `--jobs 1`, {j['repeats']} repetitions, "
             "side by side, the order alternated)", "",
             "| workload | jobs | wall | attempts a minute | first → last scenario reported "
             "| peak tree RSS | exits | runs counted | labs left behind |",
             "|---|---|---|---|---|---|---|---|---|"]
    for workload, w in j["workloads"].items():
        for jobs in JOBS:
            s = w[f"jobs{jobs}"]
            lines.append(f"| {workload} | {jobs} | {value(s['median_wall_s'], 's')} "
                         f"| {value(s['attempts_per_min'], '/min')} "
                         f"| {value(s['median_first_scenario_done_s'], 's')} → "
                         f"{value(s['median_last_scenario_done_s'], 's')} "
                         f"| {value(s['median_peak_tree_rss_mb'], 'MB')} "
                         f"| {', '.join(s['exits']) or '—'} | {s['counted']}/{len(s['runs'])} "
                         f"| {s['labs_left']} |")
    lines += ["", "| workload | repetitions judged alike (--jobs 2 = --jobs 1 of the same "
              "repetition = the first's --jobs 1) | --jobs 1 runs = the first's --jobs 1 "
              "| judgements compared per run | attempts a minute, 2 / 1 | paired (median of "
              "each repetition's ratio) | first → last scenario span, 1 / 2 |",
              "|---|---|---|---|---|---|---|"]
    for workload, w in j["workloads"].items():
        short = "" if w["comparable"] == w["repetitions"] else f" ({w['comparable']} comparable)"
        lines.append(f"| {workload} | {_alike(w) or 'not measured'}{short} "
                     f"| {w['jobs1_stable']} of {w['jobs1_compared']} "
                     f"| {w['judgements_per_run'] or '—'} | {value(w['ratio_per_min'], 'x')} "
                     f"| {value(w['ratio_paired'], 'x')} | {value(w['ratio_in_run'], 'x')} |")
    lines += ["", "Commands: " + "; ".join(f"{name}: `{w['command']}`"
                                           for name, w in j["workloads"].items()) + "."]
    return lines + _missing_lines(j) + _difference_lines(j) + ["", _narrative(j)]


def _missing_lines(j: dict) -> list[str]:
    lines = []
    for workload, w in j["workloads"].items():
        for jobs in JOBS:
            s = w[f"jobs{jobs}"]
            if s["missing"]:
                lines.append(f"**{workload} --jobs {jobs} not measured**: {s['missing']}.")
            elif s["counted"] < len(s["runs"]):
                lines.append(f"**{workload} --jobs {jobs}**: {len(s['runs']) - s['counted']} "
                             "run(s) not counted: " + "; ".join(
                                 f"repetition {r['repetition']}: {r['problem']}"
                                 for r in s["runs"] if "problem" in r) + ".")
    return ["", *lines] if lines else []


def _difference_lines(j: dict) -> list[str]:
    found = [(workload, d) for workload, w in j["workloads"].items() for d in w["differences"]]
    if not found:
        return ["", "Differences between the judgements compared: none."]
    lines = ["", f"Differences between the judgements compared ({len(found)}; the first "
             f"{min(len(found), SHOWN_DIFFERENCES)} here, all in results.json). A difference "
             "between two --jobs 1 runs is one at a time disagreeing with itself, not "
             "concurrency; a repetition with one is not counted alike all the same:", "",
             "| workload | repetition | compared (a / b) | scenario | clause | a | b "
             "| a's reason | b's reason |", "|---|---|---|---|---|---|---|---|---|"]
    for workload, d in found[:SHOWN_DIFFERENCES]:
        why = [str(d.get(k) or "—").replace("|", "/")[:REASON_CHARS]
               for k in ("reason_a", "reason_b")]
        lines.append(f"| {workload} | {d['repetition']} | {d['between']} | {d['scenario']} "
                     f"| {d['clause']} | {d['a']} | {d['b']} | {why[0]} | {why[1]} |")
    return lines


def _narrative(j: dict) -> str:
    return (
        f"Default --jobs on this machine: {j['default_jobs']} (sessions.lab.cpus.default_jobs(): "
        f"one lab per two of the {j['cpus_usable']} CPUs this process may use), so a plain "
        "`evlab run` or `evlab grade` here runs one scenario at a time. Every wall time is the "
        "whole command's, start-up included: --jobs 1 runs its one lab inside the evlab "
        "process, --jobs 2 spawns two lab processes that each import evlab and compile their "
        "BPF collector before the first scenario, at once, on this machine's "
        f"{j['cpus_usable']} cores. With 8 short scenarios (0.1–0.5 s each) that start-up is "
        "much of every run, so the ratio here is a floor for this machine: it grows with the "
        "number of attempts per run (the start-up is paid once, the attempts overlap). The "
        "first → last scenario span leaves most of the start-up out, and the closing of the "
        "labs after the last (its ratio is rough: the first scenario reported is already one "
        "of a pair at --jobs 2). Peak tree RSS at --jobs 2 holds two labs (two collectors, "
        "two spawners) beside the evlab process. Labs left behind: "
        "evlab-lab processes alive after a run's evlab process was reaped (0 expected). "
        "Judgements compared: every scenario's clause statuses and instrument check, every "
        "grade attempt's gate statuses, valid and success, and the scenarios' order; exits are "
        "listed, not compared.")
