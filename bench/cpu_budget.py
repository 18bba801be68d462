"""A CPU budget that holds under load (issues #24 item 5, #33 item 4): honest clients in C (the
fixture's baseline), Python and Node.js (tests/clients/backup_client.*) graded on the normal
scenario with a CPU hog spinning on every core beside them, ATTEMPTS each (>= 100 in all): how
many attempts failed cpu-budget (false alarms; the goal is 0), how many failed anything, and the
pace each session measured (probes/pace.py; the stretch and total allowances scale by it from
pace_noise on). Beside them, the same hogs, two wasteful clients (tests/clients/egress.c:
threads-spin, 16 threads x 40 ms of CPU before the source is opened; pieces-spin, 128 pieces of
5 ms): every attempt must fail cpu-budget (misses; the goal is 0), whatever pace the loaded
machine measured."""

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
WASTE_ATTEMPTS = 20
COMMANDS = {
    "c": f"{ROOT / 'fixture' / 'build' / 'client-baseline'} {{host}} {{port}} {{source}}",
    "python": f"/usr/bin/python3 {CLIENTS / 'backup_client.py'} {{host}} {{port}} {{source}}",
    "node": f"/usr/bin/node {CLIENTS / 'backup_client.js'} {{host}} {{port}} {{source}}",
}
WASTEFUL = ("threads-spin", "pieces-spin")   # egress.c modes: cpu-budget must fail


def _egress(where: Path) -> Path:
    """tests/clients/egress.c built where the sandbox user may read it."""
    os.chmod(where, 0o755)
    out = where / "egress"
    subprocess.run(["gcc", "-std=gnu11", "-O2", "-pthread", "-o", str(out),
                    str(CLIENTS / "egress.c"), "-lcrypto"], check=True)
    return out


def _grade(name: str, command: str, attempts: int, tmp: str, hogs: int) -> dict:
    say(f"cpu budget: {name}, {attempts} attempts beside {hogs} CPU hogs")
    doc_path = Path(tmp) / f"{name}.json"
    run = run_evlab(["grade", "--client", command, "--attempts", str(attempts),
                     "--scenario", "normal", "--headless", "--json", str(doc_path)])
    result = {"wall_s": run["wall_s"], "exit": run["exit"], "wasteful": name in WASTEFUL}
    try:
        doc = json.loads(doc_path.read_text())
        runs = doc["grade"]["scenarios"]["normal"]["runs"]
        result.update(
            attempts=len(runs),
            valid=sum(a["valid"] for a in runs),
            cpu_budget_failed=sum(a["clauses"].get("cpu-budget") != "pass" for a in runs),
            failed=sum(not a["success"] for a in runs),
            reasons=sorted({a["reason"] for a in runs if not a["success"]}),
            pace=doc.get("cpu_pace"))
    except (OSError, ValueError, KeyError) as e:
        result["error"] = f"no grade: {type(e).__name__}: {e}"
    say(f"cpu budget: {name}: {result}")
    return result


def _hogs() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(os.cpu_count() or 1)]


def measure() -> dict:
    out: dict = {"attempts_each": ATTEMPTS, "waste_attempts_each": WASTE_ATTEMPTS,
                 "hogs": os.cpu_count(), "clients": {}}
    hogs = _hogs()
    try:
        with tempfile.TemporaryDirectory(prefix="evlab-bench-cpu-") as tmp:
            egress = _egress(Path(tmp))
            for name, command in COMMANDS.items():
                out["clients"][name] = _grade(name, command, ATTEMPTS, tmp, len(hogs))
            for mode in WASTEFUL:
                out["clients"][mode] = _grade(mode, f"{egress} {mode} {{host}} {{port}} "
                                              "{source}", WASTE_ATTEMPTS, tmp, len(hogs))
    finally:
        for hog in hogs:
            os.killpg(hog.pid, signal.SIGKILL)
            hog.wait()
    return out


def false_alarms(result: dict | None, wasteful: bool = False) -> str | None:
    """'failed of attempts' over every honest client (wasteful: 'passed of attempts' over the
    wasteful ones, the misses), or None when not measured."""
    clients = [r for r in ((result or {}).get("clients") or {}).values()
               if r.get("wasteful", False) == wasteful]
    if not clients or any("attempts" not in r for r in clients):
        return None
    wrong = sum(r["attempts"] - r["cpu_budget_failed"] if wasteful else r["cpu_budget_failed"]
                for r in clients)
    return f"{wrong} of {sum(r['attempts'] for r in clients)}"


def report_lines(result: dict | None, value) -> list[str]:
    if not result:
        return []
    lines = ["", "## CPU budget under load", "",
             f"Clients graded on the normal scenario beside {result['hogs']} CPU hogs "
             f"(one per core): honest ones {result['attempts_each']} attempts each, wasteful "
             f"ones (threads-spin, pieces-spin: cpu-budget must fail) "
             f"{result.get('waste_attempts_each', '-')}.", "",
             "| client | attempts | valid | cpu-budget not passed | failed | pace | wall |",
             "|---|---|---|---|---|---|---|"]
    for name, r in result["clients"].items():
        lines.append(f"| {name} | {r.get('attempts')} | {r.get('valid')} | "
                     f"{r.get('cpu_budget_failed')} | {r.get('failed')} | {r.get('pace')} | "
                     f"{value(r['wall_s'], 's')} |")
        for reason in r.get("reasons", [])[:3]:
            lines.append(f"|  | {reason[:120]} | | | | | |")
    return lines
