"""A CPU budget that holds under load (issue #24, item 5): honest clients in C (the fixture's
baseline), Python and Node.js (tests/clients/backup_client.*) graded on the normal scenario
with a CPU hog spinning on every core beside them, ATTEMPTS each (>= 100 in all): how many
attempts failed cpu-budget (false alarms; the goal is 0), how many failed anything, and the
pace each session measured (probes/pace.py; the allowances scale by it from pace_noise on)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.measure import say
from bench.suite import run_evlab

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "tests" / "clients"
ATTEMPTS = 50   # a grade takes at most 50 attempts per scenario
COMMANDS = {
    "c": f"{ROOT / 'fixture' / 'build' / 'client-baseline'} {{host}} {{port}} {{source}}",
    "python": f"/usr/bin/python3 {CLIENTS / 'backup_client.py'} {{host}} {{port}} {{source}}",
    "node": f"/usr/bin/node {CLIENTS / 'backup_client.js'} {{host}} {{port}} {{source}}",
}


def _hogs() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(os.cpu_count() or 1)]


def measure() -> dict:
    out: dict = {"attempts_each": ATTEMPTS, "hogs": os.cpu_count(), "clients": {}}
    hogs = _hogs()
    try:
        with tempfile.TemporaryDirectory(prefix="evlab-bench-cpu-") as tmp:
            for name, command in COMMANDS.items():
                say(f"cpu budget: {name}, {ATTEMPTS} attempts beside {len(hogs)} CPU hogs")
                doc_path = Path(tmp) / f"{name}.json"
                run = run_evlab(["grade", "--client", command, "--attempts", str(ATTEMPTS),
                                 "--scenario", "normal", "--headless", "--json", str(doc_path)])
                result = {"wall_s": run["wall_s"], "exit": run["exit"]}
                try:
                    doc = json.loads(doc_path.read_text())
                    attempts = doc["grade"]["scenarios"]["normal"]["runs"]
                    result.update(
                        attempts=len(attempts),
                        valid=sum(a["valid"] for a in attempts),
                        cpu_budget_failed=sum(a["clauses"].get("cpu-budget") != "pass"
                                              for a in attempts),
                        failed=sum(not a["success"] for a in attempts),
                        reasons=sorted({a["reason"] for a in attempts if not a["success"]}),
                        pace=doc.get("cpu_pace"))
                except (OSError, ValueError, KeyError) as e:
                    result["error"] = f"no grade: {type(e).__name__}: {e}"
                out["clients"][name] = result
                say(f"cpu budget: {name}: {result}")
    finally:
        for hog in hogs:
            os.killpg(hog.pid, signal.SIGKILL)
            hog.wait()
    return out


def false_alarms(result: dict | None) -> str | None:
    """'failed of attempts' over every client, or None when not measured."""
    clients = (result or {}).get("clients") or {}
    if not clients or any("attempts" not in r for r in clients.values()):
        return None
    return (f"{sum(r['cpu_budget_failed'] for r in clients.values())} of "
            f"{sum(r['attempts'] for r in clients.values())}")


def report_lines(result: dict | None, value) -> list[str]:
    if not result:
        return []
    lines = ["", "## CPU budget under load", "",
             f"Honest clients graded on the normal scenario beside {result['hogs']} CPU hogs "
             f"(one per core), {result['attempts_each']} attempts each.", "",
             "| client | attempts | valid | cpu-budget not passed | failed | pace | wall |",
             "|---|---|---|---|---|---|---|"]
    for name, r in result["clients"].items():
        lines.append(f"| {name} | {r.get('attempts')} | {r.get('valid')} | "
                     f"{r.get('cpu_budget_failed')} | {r.get('failed')} | {r.get('pace')} | "
                     f"{value(r['wall_s'], 's')} |")
        for reason in r.get("reasons", [])[:3]:
            lines.append(f"|  | {reason[:120]} | | | | | |")
    return lines
