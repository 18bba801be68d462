"""Suite time and memory: `evlab run --all --headless`, traced (BCC) and `--collector none`.

Runs alternate traced / untraced. Wall time is from the fork to the reaped exit (BPF compile
included). A sampler thread sums the RSS of the evlab process and all its descendants every
SAMPLE_S and keeps the peak; it also keeps the evlab process's own CPU (children excluded),
which the dashboard section compares with the TUI's. The sampler runs in both conditions, so
it does not bias the ratio.
"""

import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bench.measure import median, ratio, say, wait_rusage

ROOT = Path(__file__).resolve().parent.parent
EVLAB = ROOT / ".venv" / "bin" / "evlab"
SAMPLE_S = 0.05
TIMEOUT_S = 300


class TreeSampler(threading.Thread):
    """Peak summed RSS of a process tree, and the root's own CPU, sampled every SAMPLE_S."""

    def __init__(self, pid: int, started: float):
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.started = started
        self.peak_rss = self.peak_root_rss = self.peak_pss = 0
        self.peak_procs = 0
        self.root_cpu_s = 0.0
        self.cpu_trace: list[tuple[float, float]] = []  # (seconds since the fork, root CPU)
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(SAMPLE_S)

    def sample(self) -> None:
        try:
            cpu = self.root.cpu_times()
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        rss, pss = [], []
        for proc in procs:
            try:
                full = proc.memory_full_info()   # smaps_rollup: root reads every process's
                rss.append(full.rss)
                pss.append(full.pss)
            except (psutil.Error, AttributeError):
                rss.append(0)
                pss.append(0)
        self.samples += 1
        # Summed RSS counts a page shared by N processes N times (the spawner's forked servers
        # share its interpreter copy-on-write); summed PSS counts each page once in all.
        self.peak_pss = max(self.peak_pss, sum(pss))
        self.root_cpu_s = cpu.user + cpu.system
        self.cpu_trace.append((time.perf_counter() - self.started, self.root_cpu_s))
        if sum(rss) > self.peak_rss:
            self.peak_rss, self.peak_root_rss, self.peak_procs = sum(rss), rss[0], len(procs)

    def cpu_at(self, t: float | None) -> float | None:
        """The root's CPU at the last sample taken at or before t seconds after the fork."""
        before = [cpu for at, cpu in self.cpu_trace if t is not None and at <= t]
        return before[-1] if before else None

    def stop(self) -> None:
        self._halt.set()
        self.join()


def run_suite(collector: str) -> dict:
    argv = ["run", "--all", "--headless"]
    if collector != "auto":
        argv += ["--collector", collector]
    return run_evlab(argv)


def run_evlab(args: list[str]) -> dict:
    """One headless evlab command, timed and sampled; a line starting with [ is a scenario."""
    argv = [str(EVLAB), *args]
    lines: list[tuple[float, str]] = []  # (seconds since the fork, line) as the lines arrive
    with tempfile.TemporaryDirectory(prefix="evlab-bench-suite-") as cwd:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, start_new_session=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sampler = TreeSampler(proc.pid, started)
        sampler.start()
        reader = threading.Thread(target=_read_lines, args=(proc.stdout, started, lines))
        reader.start()
        try:
            status, _ = wait_rusage(proc, TIMEOUT_S)
        finally:
            wall = time.perf_counter() - started
            sampler.stop()
            reader.join()
    scenario_lines = [t for t, line in lines if line.startswith("[")] or [None]
    return {"wall_s": wall, "exit": os.waitstatus_to_exitcode(status),
            "summary": lines[-1][1] if lines else "",
            "scenarios": len([1 for _, line in lines if line.startswith("[")]),
            "first_scenario_done_s": scenario_lines[0],
            "last_scenario_done_s": scenario_lines[-1],
            "after_last_scenario_s": wall - scenario_lines[-1] if scenario_lines[-1] else None,
            "peak_tree_rss_mb": sampler.peak_rss / 2**20, "procs_at_peak": sampler.peak_procs,
            "peak_tree_pss_mb": sampler.peak_pss / 2**20,
            "evlab_rss_at_peak_mb": sampler.peak_root_rss / 2**20,
            "evlab_own_cpu_s": sampler.root_cpu_s,
            "evlab_own_cpu_until_last_scenario_s": sampler.cpu_at(scenario_lines[-1]),
            "rss_samples": sampler.samples}


def _read_lines(stream, started: float, lines: list) -> None:
    for line in stream:
        lines.append((time.perf_counter() - started, line.rstrip()))
    stream.close()


def measure(repeats: int) -> dict:
    runs: dict[str, list[dict]] = {"traced": [], "none": []}
    for i in range(repeats):
        for label, collector in (("traced", "auto"), ("none", "none")):
            say(f"suite: {label} run {i + 1}/{repeats}")
            runs[label].append(run_suite(collector))
    out: dict = {"command_traced": f"{EVLAB} run --all --headless",
                 "command_none": f"{EVLAB} run --all --headless --collector none"}
    for label, samples in runs.items():
        out[label] = {"runs": samples,
                      "median_wall_s": median(r["wall_s"] for r in samples),
                      "median_peak_tree_rss_mb": median(r["peak_tree_rss_mb"] for r in samples),
                      "max_peak_tree_rss_mb": max(r["peak_tree_rss_mb"] for r in samples),
                      "median_evlab_own_cpu_s": median(r["evlab_own_cpu_s"] for r in samples),
                      **{f"median_{k}": median(r[k] for r in samples)
                         for k in ("first_scenario_done_s", "last_scenario_done_s",
                                   "after_last_scenario_s", "evlab_rss_at_peak_mb",
                                   "evlab_own_cpu_until_last_scenario_s")}}
    out["ratio_traced_none_wall"] = ratio(out["traced"]["median_wall_s"],
                                          out["none"]["median_wall_s"])
    return out
