"""Timing one process: wall time around it, CPU time from os.wait4's rusage, medians."""

import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

QUIET = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL,
         "stderr": subprocess.DEVNULL}


@dataclass
class Run:
    """One timed run of a client."""

    wall_s: float
    user_s: float
    sys_s: float
    status: int                      # wait status
    pid: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def as_dict(self) -> dict:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "user_s": self.user_s,
                "sys_s": self.sys_s, "exit": os.waitstatus_to_exitcode(self.status),
                **self.extra}


class RunFailed(Exception):
    pass


def wait_rusage(proc: subprocess.Popen, timeout_s: float) -> tuple[int, resource.struct_rusage]:
    """Block in os.wait4 for proc (its session is killed after timeout_s); status, rusage."""
    timer = threading.Timer(timeout_s, _kill_session, args=(proc.pid,))
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        raise RunFailed(f"{proc.args[0]} killed after {timeout_s} s")
    return status, usage


def timed(argv: list[str], timeout_s: float, **popen_kwargs) -> Run:
    """Run argv in its own session; wall from just before the fork to the reaped exit."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, start_new_session=True, **{**QUIET, **popen_kwargs})
    status, usage = wait_rusage(proc, timeout_s)
    return Run(time.perf_counter() - started, usage.ru_utime, usage.ru_stime, status, proc.pid)


def check_exit(run: Run, what: str) -> Run:
    code = os.waitstatus_to_exitcode(run.status)
    if code != 0:
        raise RunFailed(f"{what} exited {code}")
    return run


def _kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


_T0 = time.monotonic()


def say(text: str) -> None:
    """Progress, on stderr (the table goes to stdout), with the seconds since the bench began."""
    print(f"bench: {time.monotonic() - _T0:5.0f} s  {text}", file=sys.stderr, flush=True)
