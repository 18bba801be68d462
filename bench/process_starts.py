"""What a program started costs the client's cgroup (#44): cpu-budget allows cpu_ns_per_exec per
fork + exec beside start-up and bytes moved. A Bash client on the mirror task copies one small
file N times (cp --preserve=timestamps to a temporary name, mv over the final one: 2N programs,
a shell's fork + exec of a small tool each), under the lab's collector and sandbox, as `evlab
grade` runs it; the cost of one program is (median cgroup CPU of an invocation with N - the
same with 0) / 2N. Quiet, and beside a CPU hog on every core, side by side in each round: the
ratio is what load does to it, and the allowance (x the pace each session measured) must cover
both."""

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

from bench.measure import say
from bench.suite import run_evlab
from sessions.spec.task import load_task

ROUNDS = 2
ATTEMPTS = 2          # x 3 invocations: 6 samples per condition and round
COPIES = 200          # 400 programs started per invocation
SCRIPT = r"""#!/bin/bash
# starts.sh SRC DST N: N copies of one small file of SRC into DST, a cp and an mv each
src=$1 dst=$2 n=$3
file=$(find "$src" -type f -size -2k -print -quit)
for ((i = 0; i < n; i++)); do
    cp --preserve=timestamps -- "$file" "$dst/.one.tmp" && mv -f -- "$dst/.one.tmp" "$dst/one"
done
"""


def _cgroup_cpu(script: Path, copies: int, doc_path: Path) -> tuple[list[float], float | None]:
    """Each invocation's cgroup CPU (ms) of one grade of the first scenario, and its pace."""
    run_evlab(["grade", "--task", "mirror", "--client",
               f"/bin/bash {script} {{src}} {{dst}} {copies}", "--scenario", "first",
               "--attempts", str(ATTEMPTS), "--timeout", "120", "--headless", "--json",
               str(doc_path)])
    doc = json.loads(doc_path.read_text())
    return ([inv["boundary"]["cgroup_cpu_ns"] / 1e6 for sc in doc["scenarios"]
             for inv in sc["invocations"] if inv.get("boundary")], doc.get("cpu_pace"))


def _hogs() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(os.cpu_count() or 1)]


def measure() -> dict:
    samples: dict = {c: {"0": [], str(COPIES): [], "pace": []} for c in ("quiet", "loaded")}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-starts-") as tmp:
        os.chmod(tmp, 0o755)   # the sandbox's user reads the script
        script = Path(tmp) / "starts.sh"
        script.write_text(SCRIPT)
        for r in range(ROUNDS):
            for cond in ("quiet", "loaded") if r % 2 == 0 else ("loaded", "quiet"):
                hogs = _hogs() if cond == "loaded" else []
                try:
                    for copies in (0, COPIES):
                        say(f"process starts: round {r + 1}, {cond}, {2 * copies} programs")
                        cpu, pace = _cgroup_cpu(script, copies, Path(tmp) / "doc.json")
                        samples[cond][str(copies)] += cpu
                        samples[cond]["pace"].append(pace)
                finally:
                    for hog in hogs:
                        os.killpg(hog.pid, signal.SIGKILL)
                        hog.wait()
    out: dict = {"programs": 2 * COPIES, "rounds": ROUNDS, "samples": samples,
                 "allowance_ms": load_task("mirror").contract.thresholds.cpu_ns_per_exec / 1e6}
    for cond, s in samples.items():
        if s["0"] and s[str(COPIES)]:
            out[f"{cond}_ms_per_program"] = ((median(s[str(COPIES)]) - median(s["0"]))
                                             / (2 * COPIES))
            out[f"{cond}_max_ms_per_program"] = ((max(s[str(COPIES)]) - min(s["0"]))
                                                 / (2 * COPIES))
    if out.get("quiet_ms_per_program") and "loaded_ms_per_program" in out:
        out["loaded/quiet"] = out["loaded_ms_per_program"] / out["quiet_ms_per_program"]
    say(f"process starts: {({k: v for k, v in out.items() if k != 'samples'})}")
    return out


def report_lines(result: dict | None, value) -> list[str]:
    if not result:
        return []
    paces = {c: [p for p in s["pace"] if p] for c, s in result["samples"].items()}
    lines = ["", "## What a program started costs", "",
             f"A Bash client's {result['programs']} cp and mv (fork + exec of a small tool) "
             "per invocation on the mirror task, under the collector and sandbox, quiet and "
             "beside a CPU hog on every core; per program: (median cgroup CPU with them - "
             f"median without) / {result['programs']}. cpu-budget allows "
             f"{result['allowance_ms']:g} ms per program started (x the pace).", "",
             "| condition | per program (median) | worst (max - min) | pace |", "|---|---|---|---|"]
    for cond in ("quiet", "loaded"):
        lines.append(f"| {cond} | {value(_s(result.get(f'{cond}_ms_per_program')), 's')} | "
                     f"{value(_s(result.get(f'{cond}_max_ms_per_program')), 's')} | "
                     f"{', '.join(f'{p:.2f}' for p in paces.get(cond, []))} |")
    lines.append(f"| loaded / quiet | {value(result.get('loaded/quiet'), 'x')} | | |")
    return lines


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000
