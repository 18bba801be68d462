"""Dashboard CPU: `evlab` (the TUI on the built-in suite) in a real terminal, tmux 120x40.

The pane runs `exec .venv/bin/evlab`, so the pane's pid is the evlab process. Its own CPU
(psutil cpu_times: user + system, children excluded) is sampled from its start until the
screen shows every scenario detected (the live run), then over IDLE_S more seconds while it
shows the finished run (only the 5 Hz redraw timer and the lab's idle thread left), then it is
quit with `q`. The lab runs inside this same process (a worker thread), so the live-run figure
is the TUI *plus* the lab; the headless suite's own CPU, measured the same way in
bench/suite.py, is the lab alone, and the difference is the dashboard's share.
"""

import os
import subprocess
import tempfile
import time

import psutil

from bench.measure import median, say
from bench.suite import EVLAB
from sessions.spec.scenario import load_dir

SIZE = ("120", "40")
IDLE_S = 3.0
RUN_TIMEOUT_S = 180
SAMPLE_S = 0.1
SCREEN_EVERY_S = 0.3


class Tmux:
    def __init__(self):
        self.socket = f"evlab-bench-{os.getpid()}"

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=30).stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "ev")


def one_run(scenarios: int) -> dict:
    tmux = Tmux()
    with tempfile.TemporaryDirectory(prefix="evlab-bench-tui-") as cwd:
        tmux("new-session", "-d", "-s", "ev", "-x", SIZE[0], "-y", SIZE[1],
             f"cd {cwd} && exec {EVLAB}")
        try:
            proc = psutil.Process(int(tmux("list-panes", "-t", "ev", "-F",
                                           "#{pane_pid}").split()[0]))
            return _observe(tmux, proc, scenarios)
        finally:
            tmux("kill-server")


def _observe(tmux: Tmux, proc: psutil.Process, scenarios: int) -> dict:
    started = proc.create_time()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    cpu, next_screen = 0.0, 0.0
    while True:
        times = proc.cpu_times()
        cpu = times.user + times.system
        if time.monotonic() >= next_screen:
            next_screen = time.monotonic() + SCREEN_EVERY_S
            if tmux.screen().count("✓ detected") >= scenarios:
                break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the dashboard did not finish; last screen:\n{tmux.screen()}")
        time.sleep(SAMPLE_S)
    live_wall = time.time() - started
    time.sleep(IDLE_S)
    times = proc.cpu_times()
    idle_cpu = times.user + times.system - cpu
    tmux("send-keys", "-t", "ev", "q")
    try:
        proc.wait(60)
        quit_clean = True
    except psutil.TimeoutExpired:
        quit_clean = False
    return {"live_wall_s": live_wall, "live_cpu_s": cpu,
            "live_cpu_per_wall_s": cpu / live_wall,
            "idle_cpu_per_wall_s": idle_cpu / IDLE_S, "quit_clean": quit_clean}


def measure(repeats: int) -> dict:
    scenarios = len(load_dir())
    runs = []
    for i in range(repeats):
        say(f"dashboard in tmux: run {i + 1}/{repeats}")
        runs.append(one_run(scenarios))
    return {"command": f"tmux -L evlab-bench-PID new-session -x 120 -y 40 'exec {EVLAB}'",
            "runs": runs,
            **{f"median_{k}": median(r[k] for r in runs)
               for k in ("live_wall_s", "live_cpu_s", "live_cpu_per_wall_s",
                         "idle_cpu_per_wall_s")}}
