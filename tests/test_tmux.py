"""The dashboard in a real terminal: `evlab run` of three seeded scenarios in tmux at 120x40 (the
whole suite's verdicts are the seeded run's and the live dashboard's tests', tests/test_tui.py),
read the screen, press q, and check that nothing it started is left."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from sessions.spec.scenario import load_dir
from sessions.spec.task import load_task
from tests.leftovers import owned_dirs, wait_gone

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
              pytest.mark.root(reason="the live lab needs root"), pytest.mark.slow,
              pytest.mark.live]
SHOWN = ("baseline", "hash-storm", "retry")   # one passing, one failing hash-work, a retry


def tmux(*args: str, socket: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                          timeout=30).stdout


def screen(socket: str) -> str:
    return tmux("capture-pane", "-p", "-t", "ev", socket=socket)


def wait_screen(socket: str, condition, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = screen(socket)
        if condition(text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"screen never matched; last screen:\n{text}")
        time.sleep(0.3)


def test_dashboard_in_tmux(tmp_path, built_clients):
    socket = f"evlab-test-{os.getpid()}"
    done_file = tmp_path / "exit-status"
    ids = [s.id for s in load_dir() if s.id in SHOWN]
    tmux("new-session", "-d", "-s", "ev", "-x", "120", "-y", "40", socket=socket)
    try:
        tmux("send-keys", "-t", "ev", f"cd {tmp_path} && {ROOT}/.venv/bin/evlab run "
             f"{' '.join(ids)}; "
             f"echo $? > {done_file}", "Enter", socket=socket)
        text = wait_screen(socket, lambda t: t.count("✓ detected") >= len(ids), timeout=180)
        for sid in ids:
            assert sid in text
        # this dashboard's process only: the other worker's tests run evlab commands too
        evlab = [p for p in psutil.process_iter(["cmdline", "cwd"])
                 if (p.info["cmdline"] or [])[:2] == [f"{ROOT}/.venv/bin/python",
                                                      f"{ROOT}/.venv/bin/evlab"]
                 and p.info["cwd"] == str(tmp_path)]
        dirs = set().union(*(owned_dirs(p.pid) for p in evlab))
        # each scenario's verdicts: go to the top (the view followed the runs to the last
        # scenario), then move down the list and read the verdict panel
        for _ in ids:
            tmux("send-keys", "-t", "ev", "k", socket=socket)
        for index, sid in enumerate(ids):
            if index:
                tmux("send-keys", "-t", "ev", "j", socket=socket)
            text = wait_screen(socket, lambda t, s=sid: f"{s}: ✓ detected" in t, timeout=10)
            for clause in load_task().clause_ids:
                line = next(line for line in text.splitlines() if f"│ {clause} " in line)
                assert any(word in line for word in ("✓ pass", "✗ FAIL", "– n/a")), line
        tmux("send-keys", "-t", "ev", "q", socket=socket)
        deadline = time.monotonic() + 60
        while not done_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done_file.read_text().strip() == "0"
    finally:
        tmux("kill-server", socket=socket)
    assert evlab, "the evlab process was not found while it ran"
    _, alive = psutil.wait_procs(evlab, timeout=10)  # the shell saw it exit; let it be reaped
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert dirs and wait_gone(dirs) == []  # no receiver, decoy or client it started
    assert not any(d.exists() for d in dirs)
