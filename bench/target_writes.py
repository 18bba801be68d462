"""What counting a task's target costs, and whether the count is exact (bench/__main__.py
section `target`).

The exerciser (tests/programs/exerciser.c) writes TARGET_BYTES to a file on a tmpfs of its own
(a mirror task's target) in 4 KiB pieces, by write(2) and by io_uring, untraced and under
evlab's BCC collector with that filesystem as the target (launched and pumped at 10 Hz as the
runner does; compiled once, outside the timing), alternating in each of ROUNDS rounds. Medians
of wall time and the client's CPU (os.wait4), their ratio, and every traced run's
target_write_bytes against the truth, with the kernel events it lost.
"""

import subprocess
import tempfile
from pathlib import Path

from bench.measure import check_exit, median, ratio, say
from bench.observers import Evlab, Untraced

ROOT = Path(__file__).resolve().parent.parent
TARGET_BYTES = 64 << 20
ROUNDS = 7
HOWS = ("write", "uring")
TIMEOUT_S = 120


def _exerciser(where: Path) -> Path:
    out = where / "exerciser"
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-o", str(out),
                    str(ROOT / "tests" / "programs" / "exerciser.c")], check=True)
    return out


def measure(rounds: int = ROUNDS) -> dict:
    out: dict = {"bytes": TARGET_BYTES, "rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-target-") as tmp:
        target = Path(tmp) / "target"
        target.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "evlab-bench", str(target)],
                       check=True)
        try:
            exe = _exerciser(Path(tmp))
            with Untraced() as plain, Evlab() as evlab:
                for how in HOWS:
                    runs: dict[str, list] = {"untraced": [], "evlab": []}
                    argv = [str(exe), f"write:{target}/f:{TARGET_BYTES}:{how}"]
                    for i in range(rounds):
                        say(f"target: {how}, round {i + 1}/{rounds}")
                        runs["untraced"].append(check_exit(
                            plain.run(argv, None, TIMEOUT_S), how).as_dict())
                        runs["evlab"].append(check_exit(
                            evlab.run(argv, None, TIMEOUT_S, target=target), how).as_dict())
                    out[how] = _summary(runs)
        finally:
            subprocess.run(["umount", str(target)], check=False)
    out["exact"] = all(out[h]["exact"] for h in HOWS)
    return out


def _summary(runs: dict[str, list]) -> dict:
    wall = {k: median(r["wall_s"] for r in v) for k, v in runs.items()}
    cpu = {k: median(r["cpu_s"] for r in v) for k, v in runs.items()}
    counted = [r.get("target_write_bytes") for r in runs["evlab"]]
    lost = [r.get("lost_events") for r in runs["evlab"]]
    return {"wall_s": wall, "cpu_s": cpu,
            "ratio_wall": ratio(wall["evlab"], wall["untraced"]),
            "ratio_cpu": ratio(cpu["evlab"], cpu["untraced"]),
            "counted": counted, "lost_events": lost,
            "exact": all(c == TARGET_BYTES for c in counted) and not any(lost)}
