"""A campaign here and on a Ray cluster, and what the campaign engine adds per attempt
(bench/__main__.py section `campaign`).

One campaign file: two clients (the fixture's C baseline; tests/clients/backup_client.py run
with python3) x the four grade scenarios x ATTEMPTS attempts = 16 attempts. Three conditions,
each once per round, in an order rotated each round:
  local  `evlab campaign FILE --headless --dir D --json J --archive A` (a fresh D every run);
  ray    the same with `--ray ADDRESS`, on Ray's test cluster on this machine (a head with no
         evlab resource and two worker raylets offering evlab=1, as tests/test_campaign.py
         starts it), started once before the rounds and not timed (its start is a figure);
  grade  `evlab grade --client '<the same client> {host} {port} {source}' --attempts ATTEMPTS
         --headless --json J --archive A` once per client, the two wall times summed (16
         attempts too).
Every wall time is the whole command's, fork to reaped exit (bench/suite.py's run_evlab),
start-up included. Each attempt's own time comes from the run's archive (bench/attempt_times.py:
dispatch to judged in a campaign, set-up to judged in a plain grade), start-up excluded; the
engine's added time per attempt = median campaign attempt - median plain grade attempt, and
their ratio. Every local and ray run's verdicts (each attempt's clauses, gate statuses, valid,
success from the JSON document) must be the same, attempt for attempt.
"""

import json
import os
import shutil
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bench import attempt_times
from bench.measure import RunFailed, median, ratio, say
from bench.suite import run_evlab

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "fixture" / "build" / "client-baseline"
PY_CLIENT = ROOT / "tests" / "clients" / "backup_client.py"
SCENARIOS = ("normal", "interrupted", "mismatch", "stale")
ATTEMPTS = 2
CLIENTS = {"c-baseline": ("./client-baseline", BASELINE), "py-honest": ("python3 client.py",
                                                                       PY_CLIENT)}
EXPECTED = len(CLIENTS) * len(SCENARIOS) * ATTEMPTS
CONDITIONS = ("local", "ray", "grade")
WORKER_NODES = 2


def _layout(tmp: Path) -> Path:
    """The clients copied beside the campaign file (as tests/test_campaign.py lays them out);
    the directory readable by the sandbox user that runs a plain grade's client."""
    tmp.chmod(0o755)
    shutil.copy(BASELINE, tmp / "client-baseline")
    shutil.copy(PY_CLIENT, tmp / "client.py")
    clients = "".join(f'[[client]]\nname = "{name}"\ncommand = "{cmd} {{host}} {{port}} '
                      f'{{source}}"\n' for name, (cmd, _) in CLIENTS.items())
    (tmp / "campaign.toml").write_text(
        f'[campaign]\nname = "bench"\nscenarios = {json.dumps(list(SCENARIOS))}\n'
        f"attempts = {ATTEMPTS}\n{clients}")
    return tmp / "campaign.toml"


def _grade_commands(tmp: Path) -> dict[str, str]:
    """Each campaign client's command for `evlab grade --client`, on the same copied files."""
    return {name: cmd.replace("./client-baseline", str(tmp / "client-baseline"))
            .replace("client.py", str(tmp / "client.py")) + " {host} {port} {source}"
            for name, (cmd, _) in CLIENTS.items()}


@contextmanager
def ray_test_cluster():
    """Ray's test cluster on this machine: (its address, seconds to start it). Ray's files go
    to a temporary RAY_TMPDIR (inherited by the evlab commands), removed afterwards."""
    temp = tempfile.mkdtemp(prefix="ray-")
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = temp
    cluster = None
    try:
        from ray.cluster_utils import Cluster
        started = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                                "include_dashboard": False})
        for _ in range(WORKER_NODES):
            cluster.add_node(num_cpus=1, resources={"evlab": 1})
        cluster.wait_for_nodes()
        yield cluster.address, time.perf_counter() - started
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before


def _verdicts(doc: dict) -> dict:
    """Every judged attempt's clauses, gate statuses, valid and success, by attempt id."""
    return {run["id"]: (run["clauses"], {g: v["status"] for g, v in run["gates"].items()},
                        run["valid"], run["success"])
            for entry in doc["campaign"]["clients"].values()
            for scenario in entry["scenarios"].values() for run in scenario["runs"]}


def _kept(run: dict) -> dict:
    return {k: run[k] for k in ("wall_s", "exit", "summary", "peak_tree_rss_mb")}


def _timed(run: dict, archive: Path, times_of, expected: int) -> None:
    """The run's attempt times from its archive (removed after), or attempt_missing: why."""
    events, why = attempt_times.load_events(archive)
    archive.unlink(missing_ok=True)
    if events is not None:
        times = times_of(events)
        if len(times["attempt_ms"]) == expected:
            run.update(times)
            return
        why = f"{len(times['attempt_ms'])} of {expected} attempts timed in the archive"
    run["attempt_missing"] = why


def _campaign(file: Path, tmp: Path, tag: str, extra: list[str]) -> tuple[dict, dict | None]:
    """One timed `evlab campaign`: (the run's figures, its verdicts or None)."""
    directory, doc_path, archive = tmp / f"dir-{tag}", tmp / f"{tag}.json", tmp / f"{tag}.tar.gz"
    run = _kept(run_evlab(["campaign", str(file), "--headless", "--dir", str(directory),
                           "--json", str(doc_path), "--archive", str(archive), *extra]))
    shutil.rmtree(directory, ignore_errors=True)
    _timed(run, archive, attempt_times.campaign_times, EXPECTED)
    if not doc_path.exists():
        return {**run, "attempts": 0, "problem": f"no JSON document (exit {run['exit']})"}, None
    doc = json.loads(doc_path.read_text())
    verdicts, board = _verdicts(doc), doc["campaign"]
    progress = board["progress"]
    run.update(attempts=len(verdicts), engine=board["engine"], lost=progress["lost"],
               given_up=progress["given_up"], partial=doc["partial"],
               nodes={n: v["done"] for n, v in progress["nodes"].items()})
    if doc["partial"] or progress["given_up"] or len(verdicts) != EXPECTED:
        run["problem"] = (f"{len(verdicts)} of {EXPECTED} attempts judged, "
                          f"{progress['given_up']} given up, partial {doc['partial']}")
    return run, verdicts


def _grade_part(name: str, command: str, tmp: Path, tag: str) -> dict:
    """`evlab grade` of one client: its figures, attempts judged and attempt times."""
    doc_path, archive = tmp / f"{tag}-{name}.json", tmp / f"{tag}-{name}.tar.gz"
    part = _kept(run_evlab(["grade", "--client", command, "--attempts", str(ATTEMPTS),
                            "--headless", "--json", str(doc_path), "--archive", str(archive)]))
    part["client"] = name
    doc = json.loads(doc_path.read_text()) if doc_path.exists() else None
    part["attempts"] = 0 if doc is None or doc["partial"] else sum(
        len(s["runs"]) for s in doc["grade"]["scenarios"].values())
    _timed(part, archive, attempt_times.grade_times, EXPECTED // len(CLIENTS))
    return part


def _grade(commands: dict[str, str], tmp: Path, tag: str) -> dict:
    """`evlab grade` of each client in turn; wall times summed, attempts counted, attempt
    times gathered (by client:attempt id)."""
    parts = [_grade_part(name, command, tmp, tag) for name, command in commands.items()]
    run = {"wall_s": sum(p["wall_s"] for p in parts), "exit": max(p["exit"] for p in parts),
           "attempts": sum(p["attempts"] for p in parts),
           "peak_tree_rss_mb": max(p["peak_tree_rss_mb"] for p in parts), "parts": parts}
    if run["attempts"] != EXPECTED:
        run["problem"] = f"{run['attempts']} of {EXPECTED} attempts judged (" + "; ".join(
            f"exit {p['exit']}: {p['summary'][:160]}" for p in parts
            if p["attempts"] != EXPECTED // len(CLIENTS)) + ")"
    if any("attempt_missing" in p for p in parts):
        run["attempt_missing"] = "; ".join(f"{p['client']}: {p['attempt_missing']}"
                                           for p in parts if "attempt_missing" in p)
    else:
        for key in ("attempt_ms", "teardown_ms"):
            run[key] = {f"{p['client']}:{i}": ms for p in parts for i, ms in p[key].items()}
    return run


def _summary(runs: list[dict], missing: str | None = None) -> dict:
    """Medians over the runs that judged every attempt; why, when there is none."""
    good = [r for r in runs if "problem" not in r]
    wall = median(r["wall_s"] for r in good)
    if wall is None and missing is None:
        missing = "no run judged all its attempts" + "".join(
            f"; {r['problem']}" for r in runs[:3] if "problem" in r) if runs else "not run"
    return {"runs": runs, "counted": len(good), "median_wall_s": wall,
            "attempts_per_min": EXPECTED / wall * 60 if wall else None,
            "per_attempt_s": wall / EXPECTED if wall is not None else None,
            "median_peak_tree_rss_mb": median(r["peak_tree_rss_mb"] for r in good),
            "exits": sorted({r["exit"] for r in runs}, key=str), "missing": missing,
            **_attempt_summary(runs, missing)}


def _attempt_summary(runs: list[dict], missing: str | None) -> dict:
    """Medians of the attempt times of every counted run, pooled; why, when there are none."""
    good = [r for r in runs if "problem" not in r]
    timed = [r for r in good if "attempt_ms" in r]

    def pooled(key: str, keep=lambda run, attempt: True) -> tuple[float | None, int]:
        values = [ms for r in timed for i, ms in r.get(key, {}).items() if keep(r, i)]
        return median(values), len(values)

    out: dict = {"runs_timed": len(timed), "attempt_missing": None}
    out["median_attempt_ms"], out["attempts_timed"] = pooled("attempt_ms")
    for key in ("lab_ms", "teardown_ms"):
        out[f"median_{key}"] = pooled(key)[0]
    firsts = {id(r): attempt_times.first_on_node(r) for r in timed}
    out["median_first_on_node_ms"] = pooled("attempt_ms", lambda r, i: i in firsts[id(r)])[0]
    out["median_attempt_ms_after_first"] = pooled(
        "attempt_ms", lambda r, i: i not in firsts[id(r)])[0]
    if not timed:
        out["attempt_missing"] = missing or ("no run judged all its attempts" if not good else
                                             "; ".join(r["attempt_missing"] for r in good[:3]))
    return out


def _paired(runs: list[dict], grade_runs: list[dict]) -> float | None:
    """The median over attempt ids (client:scenario@n, the same in both) of the campaign's
    median time for that attempt minus the plain grade's: the scenario mix cancels out."""
    def per_id(rs: list[dict]) -> dict[str, float]:
        timed = [r["attempt_ms"] for r in rs if "problem" not in r and "attempt_ms" in r]
        return {i: median(t.get(i) for t in timed) for i in (timed[0] if timed else {})}

    campaign, grade = per_id(runs), per_id(grade_runs)
    return median(ms - grade[i] for i, ms in campaign.items() if grade.get(i) is not None)


def _rounds(repeats: int, file: Path, tmp: Path, address: str | None) -> dict:
    runs: dict[str, list] = {c: [] for c in CONDITIONS}
    verdicts: dict[str, list] = {"local": [], "ray": []}
    commands = _grade_commands(tmp)
    for i in range(repeats):
        order = [c for c in CONDITIONS[i % 3:] + CONDITIONS[:i % 3]
                 if c != "ray" or address is not None]
        for condition in order:
            say(f"campaign: {condition} run {i + 1}/{repeats}")
            extra = ["--ray", address] if condition == "ray" else []
            try:
                if condition == "grade":
                    run, judged = _grade(commands, tmp, f"grade-{i}"), None
                else:
                    run, judged = _campaign(file, tmp, f"{condition}-{i}", extra)
            except RunFailed as e:   # killed after suite.TIMEOUT_S: a run without figures
                run, judged = {"wall_s": None, "exit": "killed", "peak_tree_rss_mb": None,
                               "attempts": 0, "problem": str(e)}, None
            runs[condition].append(run)
            if condition != "grade":
                verdicts[condition].append(judged)
    return {"runs": runs, "verdicts": verdicts}


def _identical(verdicts: dict[str, list]) -> tuple[bool | None, str]:
    """Whether every local and ray run judged every attempt alike; None when not comparable."""
    docs = verdicts["local"] + verdicts["ray"]
    if not verdicts["local"] or not verdicts["ray"] or any(v is None for v in docs):
        return None, "not comparable: a local or ray run without a JSON document (or none run)"
    first = docs[0]
    differ = sorted({k for v in docs for k in set(v) | set(first)
                     if v.get(k) != first.get(k)})
    return not differ, f"{len(docs)} runs x {len(first)} attempts compared" + (
        f"; differing: {', '.join(differ[:5])}" if differ else "")


def measure(repeats: int) -> dict:
    out: dict = {"attempts_expected": EXPECTED, "scenarios": list(SCENARIOS),
                 "attempts": ATTEMPTS, "clients": list(CLIENTS)}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-campaign-") as name, \
            ExitStack() as stack:
        tmp = Path(name)
        file = _layout(tmp)
        out["campaign_file"] = file.read_text()
        address = None
        say("campaign: starting the Ray test cluster (a head and two evlab nodes)")
        try:
            address, start_s = stack.enter_context(ray_test_cluster())
            out["cluster"] = {"start_s": start_s, "worker_nodes": WORKER_NODES}
        except Exception as e:  # no Ray, or it would not start: the ray figures are missing
            out["cluster"] = {"missing": f"the Ray test cluster did not start: "
                                         f"{type(e).__name__}: {str(e)[:200]}"}
        measured = _rounds(repeats, file, tmp, address)
    out["commands"] = {"local": "evlab campaign campaign.toml --headless --dir D --json J "
                                "--archive A",
                       "ray": "evlab campaign campaign.toml --headless --dir D --json J "
                              "--archive A --ray ADDRESS",
                       "grade": [f"evlab grade --client '{c}' --attempts {ATTEMPTS} "
                                 "--headless --json J --archive A"
                                 for c in _grade_commands(Path("<dir>")).values()]}
    for condition, runs in measured["runs"].items():
        out[condition] = _summary(runs, out["cluster"].get("missing")
                                  if condition == "ray" else None)
    grade_ms = out["grade"]["median_attempt_ms"]
    for condition in ("local", "ray"):
        ms = out[condition]["median_attempt_ms"]
        out[condition]["added_ms_per_attempt"] = (
            ms - grade_ms if None not in (ms, grade_ms) else None)
        out[condition]["ratio_attempt_to_grade"] = ratio(ms, grade_ms)
        out[condition]["added_ms_paired"] = _paired(out[condition]["runs"],
                                                    out["grade"]["runs"])
    out["ratio_ray_local_wall"] = ratio(out["ray"]["median_wall_s"],
                                        out["local"]["median_wall_s"])
    out["verdicts_identical"], out["verdicts_compared"] = _identical(measured["verdicts"])
    return out


def report_lines(c: dict | None, value) -> list[str]:
    """The section of bench/results.md (bench/report.py's value formatter passed in)."""
    if not c:
        return []
    lines = ["", "## Campaigns: here, on the two-worker Ray test cluster, and as plain grades "
             f"({len(c['clients'])} clients x {len(c['scenarios'])} grade scenarios x "
             f"{c['attempts']} attempts = {c['attempts_expected']} attempts)", "",
             "| run | wall | attempts a minute | wall / attempt (start-up included) "
             "| attempt time, median (in-run) | engine's added time per attempt "
             "| attempt / plain grade attempt | peak tree RSS | exits | runs counted "
             "| attempts timed |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    cmd = c["commands"]
    for label, title in (("local", f"local: `{cmd['local']}`"), ("ray", f"ray: `{cmd['ray']}`"),
                         ("grade", "plain grade: " + " + ".join(f"`{g}`" for g in cmd["grade"]))):
        s, base = c[label], label == "grade"
        lines.append(f"| {title} | {value(s['median_wall_s'], 's')} "
                     f"| {value(s['attempts_per_min'], '/min')} "
                     f"| {value(s['per_attempt_s'], 's')} "
                     f"| {value(s['median_attempt_ms'], 'ms')} "
                     f"| {'—' if base else value(s['added_ms_per_attempt'], '+ms')} "
                     f"| {'1' if base else value(s['ratio_attempt_to_grade'], 'x')} "
                     f"| {value(s['median_peak_tree_rss_mb'], 'MB')} "
                     f"| {', '.join(map(str, s['exits'])) or '—'} "
                     f"| {s['counted']}/{len(s['runs'])} "
                     f"| {s['attempts_timed']} ({s['runs_timed']} runs) |")
    lines.append("")
    for label in CONDITIONS:
        if c[label]["missing"]:
            lines.append(f"**{label} not measured**: {c[label]['missing']}.")
        elif c[label]["attempt_missing"]:
            lines.append(f"**{label} attempt times not measured**: "
                         f"{c[label]['attempt_missing']}.")
    lines += ["", _attempt_text(c, value), "", _narrative(c, value)]
    return lines


def _attempt_text(c: dict, value) -> str:
    """What the attempt time is, and what it leaves in or out."""
    local, ray, grade = c["local"], c["ray"], c["grade"]
    return (
        "Attempt time, from each run's archive (bench/attempt_times.py), start-up (process "
        "start, BPF compile, joining Ray) excluded but for the first attempt on each Ray node "
        "(below): in a campaign, from the driver's last "
        "AttemptDispatched of the attempt to its AttemptJudged (the driver's clock): shipping, "
        "the remote call, the lab's attempt, the return, the merge and judging; in a plain "
        "grade, from the attempt's PhaseChanged(setup) to its AttemptJudged (one process's "
        "clock). The engine's added time per attempt = median campaign attempt − median plain "
        "grade attempt; the ratio is of the same medians. A campaign attempt also holds its "
        "lab's teardown (a node tears down before it returns the attempt), which a plain grade "
        f"runs after its judgement (its median: {value(grade['median_teardown_ms'], 'ms')}). The "
        "lab's own attempt inside the campaign (the node's PhaseChanged setup to done): local "
        f"{value(local['median_lab_ms'], 'ms')}, ray {value(ray['median_lab_ms'], 'ms')}. In "
        "Ray mode two attempts run at once (one on each node) on this 2-core machine, so a ray "
        "attempt's latency includes CPU contention with the other; the parallelism shows in "
        "the wall time, not here. The first attempt on each Ray node also waits for that node's "
        "actor to open its lab session (a BPF compile; the local engine opens its lab before "
        f"the first dispatch): median {value(ray['median_first_on_node_ms'], 'ms')} for those, "
        f"{value(ray['median_attempt_ms_after_first'], 'ms')} for the others. The scenarios' "
        "attempt times are far apart (the pooled median falls between them), so the added "
        "time is also given paired by attempt id (the median over the 16 attempt ids of the "
        "campaign's median time for that attempt minus the plain grade's): local "
        f"{value(local['added_ms_paired'], '+ms')}, ray {value(ray['added_ms_paired'], '+ms')}.")


def _narrative(c: dict, value) -> str:
    ray = [r for r in c["ray"]["runs"] if "nodes" in r]
    split = ", ".join("+".join(str(n) for n in r["nodes"].values()) for r in ray) or "—"
    cluster = c["cluster"]
    start = value(cluster["start_s"], "s") if "start_s" in cluster else cluster["missing"]
    same = {True: "met", False: "**NOT MET**", None: "not measured"}[c["verdicts_identical"]]
    good = [r for r in c["grade"]["runs"] if "problem" not in r]
    parts = ", ".join(f"{name} {value(median(r['parts'][i]['wall_s'] for r in good), 's')}"
                      for i, name in enumerate(c["clients"]))
    return (
        f"ray / local wall: {value(c['ratio_ray_local_wall'], 'x')}. Ray test cluster start "
        f"(ray.cluster_utils.Cluster: a head with no evlab resource and {WORKER_NODES} worker "
        f"raylets offering evlab=1), once before the rounds: {start}. Attempts per node in "
        f"each ray run: {split}; lost to the engine: {sum(r.get('lost', 0) for r in ray)}. "
        f"Verdicts (each attempt's clauses, gate statuses, valid, success) identical in every "
        f"local and ray run: {same} ({c['verdicts_compared']}). Wall / attempt = wall / "
        f"{c['attempts_expected']} still holds the one-off start-up: the plain grades (median "
        f"each: {parts}) are two evlab processes, two start-ups and BPF compiles, a local "
        "campaign one, a ray campaign a driver plus a lab on each node (a BPF compile each). "
        "Every run writes its archive (--archive), so every wall time includes writing it. The "
        "cluster idles during the local and plain grade runs. The ray row's peak RSS is the "
        "driver's tree only (the nodes' workers are the cluster's).")
