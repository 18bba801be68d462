"""A soak (bench/__main__.py section `soak`, issue #44): do verdicts hold whatever runs beside?

Every task's real tools (curl, wget, rsync, cp), its reference and honest clients (backup's C
baseline, the Python and Node.js clients, the Python one hashing through one mapping, the other
runtimes of bench/runtimes.py; the tests' fetch and mirror clients in Python, Node.js, Tcl and
Bash) are graded over the task's grade scenarios twice: once on a quiet machine, once beside a
CPU hog on every core and another evlab lab (`evlab run --all` in a loop, its own collector,
cgroups and namespaces). Every clause and
gate of every attempt is compared between the two passes, the failing ones too (`cp -a` must fail
the same clauses loaded as quiet): the figure is how many verdicts differ, whose goal is 0.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import runtimes
from bench.measure import say
from bench.suite import EVLAB, run_evlab

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "tests" / "clients"
ATTEMPTS = 3
BACKUP = "{host} {port} {source}"
FETCH = "{url} {out}"
MIRROR = "{src} {dst}"
# (task, name, command template, Debian tool it needs or None); a missing one is skipped
SUBJECTS = [
    ("backup", "c baseline", f"{ROOT / 'fixture' / 'build' / 'client-baseline'} {BACKUP}", None),
    ("backup", "python", f"/usr/bin/python3 {CLIENTS / 'backup_client.py'} {BACKUP}", None),
    ("backup", "node", f"/usr/bin/node {CLIENTS / 'backup_client.js'} {BACKUP}", "node"),
    ("backup", "python, one mapping",
     f"/usr/bin/python3 {CLIENTS / 'mapped_client.py'} {BACKUP}", None),
    ("fetch", "curl -C - etag", "/usr/bin/curl -fsS --etag-compare {out}.etag --etag-save "
     "{out}.etag -o {out} {url}", "curl"),
    ("fetch", "curl --retry 3 -C -", "/usr/bin/curl -fsS --retry 3 -C - -o {out} {url}", "curl"),
    ("fetch", "wget -c", "/usr/bin/wget -q -c -O {out} {url}", "wget"),
    ("fetch", "python", f"/usr/bin/python3 {CLIENTS / 'fetch_client.py'} {FETCH}", None),
    ("fetch", "node", f"/usr/bin/node {CLIENTS / 'fetch_client.js'} {FETCH}", "node"),
    ("fetch", "tcl", f"/usr/bin/tclsh {CLIENTS / 'fetch_client.tcl'} {FETCH}", "tclsh"),
    ("mirror", "rsync -a --delete", "/usr/bin/rsync -a --delete {src}/ {dst}/", "rsync"),
    ("mirror", "rsync -a --inplace --delete", "/usr/bin/rsync -a --inplace --delete {src}/ "
     "{dst}/", "rsync"),
    ("mirror", "cp -a", "/bin/cp -a {src}/. {dst}/", "cp"),
    ("mirror", "node", f"/usr/bin/node {CLIENTS / 'mirror_client.js'} {MIRROR}", "node"),
    ("mirror", "bash", f"/bin/bash {CLIENTS / 'mirror_client.sh'} {MIRROR}", "bash"),
]


def _subjects() -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """(task, name, command) of everything that can be graded here, and why the rest cannot."""
    out, skipped = [], {}
    for task, name, command, tool in SUBJECTS:
        script = next((Path(w) for w in command.split() if w.startswith(str(CLIENTS))), None)
        if script is not None and not script.exists():
            skipped[f"{task}: {name}"] = f"{script.name} is not in this checkout"
        elif tool and not shutil.which(tool):
            skipped[f"{task}: {name}"] = f"{tool} is not installed"
        else:
            out.append((task, name, command))
    for name in runtimes.RUNTIMES:   # built (and installed) by the runtimes section's code
        packages, tools, build = runtimes.RUNTIMES[name]
        try:
            runtimes.ensure(packages, tools)
            (runtimes.BUILD / name).mkdir(parents=True, exist_ok=True)
            out.append(("backup", name, build(runtimes.BUILD / name)[0]))
        except runtimes.Skip as e:
            skipped[f"backup: {name}"] = str(e)
    return out, skipped


def verdicts(doc: dict) -> dict[str, str]:
    """Every clause and gate of every attempt: 'scenario #attempt check' -> status."""
    out = {}
    for scenario_id, scenario in doc["grade"]["scenarios"].items():
        for i, run in enumerate(scenario["runs"]):
            for check, status in run["clauses"].items():
                out[f"{scenario_id} #{i + 1} {check}"] = status
            for gate, v in run["gates"].items():
                out[f"{scenario_id} #{i + 1} {gate}"] = v["status"]
            out[f"{scenario_id} #{i + 1} valid"] = str(run["valid"])
    return out


def _grade(task: str, command: str, doc: Path) -> dict:
    run = run_evlab(["grade", "--task", task, "--client", command, "--attempts", str(ATTEMPTS),
                     "--headless", "--json", str(doc)])
    try:
        return {"wall_s": run["wall_s"], "exit": run["exit"],
                "verdicts": verdicts(json.loads(doc.read_text()))}
    except (OSError, ValueError, KeyError) as e:
        return {"wall_s": run["wall_s"], "exit": run["exit"], "verdicts": {},
                "error": f"no grade ({run['summary']}): {type(e).__name__}: {e}"}


class Neighbours:
    """A CPU hog per core and another evlab lab running the whole seeded suite in a loop."""

    def __enter__(self) -> "Neighbours":
        self._procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                        start_new_session=True)
                       for _ in range(os.cpu_count() or 1)]
        self._lab_dir = tempfile.mkdtemp(prefix="evlab-bench-soak-lab-")
        loop = f"while :; do {EVLAB} run --all --headless >/dev/null 2>&1; done"
        self._procs.append(subprocess.Popen(["/bin/sh", "-c", loop], cwd=self._lab_dir,
                                            start_new_session=True))
        return self

    def __exit__(self, *_exc) -> None:
        for p in self._procs:   # each leads its own group: the lab loop's evlab goes with it
            os.killpg(p.pid, signal.SIGTERM)
        for p in self._procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(self._lab_dir, ignore_errors=True)


def measure() -> dict:
    started = time.perf_counter()
    subjects, skipped = _subjects()
    out: dict = {"attempts": ATTEMPTS, "hogs": os.cpu_count(), "skipped": skipped,
                 "subjects": {}}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-soak-") as tmp:
        os.chmod(tmp, 0o755)
        for task, name, command in subjects:
            say(f"soak: quiet: {task}: {name}")
            out["subjects"][f"{task}: {name}"] = {
                "task": task, "command": command,
                "quiet": _grade(task, command, Path(tmp) / "quiet.json")}
        with Neighbours():
            for task, name, command in subjects:
                say(f"soak: loaded: {task}: {name}")
                out["subjects"][f"{task}: {name}"]["loaded"] = _grade(
                    task, command, Path(tmp) / "loaded.json")
    for s in out["subjects"].values():
        quiet, loaded = s["quiet"]["verdicts"], s["loaded"]["verdicts"]
        s["compared"] = len(quiet.keys() & loaded.keys())
        s["differ"] = {k: f"{quiet.get(k)} quiet, {loaded.get(k)} loaded"
                       for k in sorted(quiet.keys() | loaded.keys())
                       if quiet.get(k) != loaded.get(k)}
        for side in ("quiet", "loaded"):
            del s[side]["verdicts"]   # the comparison is what is kept
    out["compared"] = sum(s["compared"] for s in out["subjects"].values())
    out["differ"] = sum(len(s["differ"]) for s in out["subjects"].values())
    out["wall_s"] = time.perf_counter() - started
    say(f"soak: {out['differ']} of {out['compared']} verdicts differ from the quiet run")
    return out


def differing(r: dict | None) -> str | None:
    """'0 of 1,234' verdicts that differ loaded from quiet; None when not measured."""
    return f"{r['differ']} of {r['compared']:,}" if r and "compared" in r else None


def report_lines(r: dict | None, value) -> list[str]:
    if not r:
        return []
    lines = ["", f"## Soak: verdicts quiet and beside a CPU hog per core and another lab "
             f"(`evlab grade --attempts {r['attempts']}`, each task's grade scenarios)", "",
             f"**{r['differ']} of {r['compared']:,} verdicts differ** (every clause and gate of "
             "every attempt, and whether it was valid; goal 0).", "",
             "| task: client | verdicts compared | differ | quiet wall | loaded wall |",
             "|---|---|---|---|---|"]
    for name, s in r["subjects"].items():
        lines.append(f"| {name} | {s['compared']} | {len(s['differ'])} "
                     f"| {value(s['quiet']['wall_s'], 's')} "
                     f"| {value(s['loaded']['wall_s'], 's')} |")
    for name, s in r["subjects"].items():
        for side in ("quiet", "loaded"):
            if "error" in s[side]:
                lines.append(f"- {name} ({side}): {s[side]['error']}")
        lines += [f"- {name}: {k}: {v}" for k, v in s["differ"].items()]
    lines += [f"- skipped {k}: {v}" for k, v in r["skipped"].items()]
    lines += ["", f"Section wall time {value(r['wall_s'], 's')}."]
    return lines
