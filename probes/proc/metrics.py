"""Process-tree metrics from /proc via psutil: CPU, RSS, context switches, fds, threads.

Usage:
    s = sample(pid)                       # one ProcSample, or None once the process is gone
    s = sample_process(proc)              # the same for a psutil.Process kept across samples

Sample the client and each server separately: each sample covers one process and, in the
tree_* fields, its live descendants.

Overhead: one sample reads a handful of /proc files for the process, lists /proc/<pid>/fd,
and walks the whole process table once to find descendants (psutil has no cheaper way):
measured 0.9 ms of CPU per sample with ~120 processes, growing with the process count
(every 0.25 s, about 0.4% of one CPU per watched pid). Nothing is attached to the observed
process.

Limits: CPU of an exited descendant is visible only after its parent has waited for it
(cpu_times().children_*); a descendant that exits between the walk and its own read is
missed for that one sample. tree_rss_bytes sums RSS, so pages shared between processes
count once per process. open_fds is None when /proc/<pid>/fd is not readable (another
user's process without root).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class ProcSample:
    t_ns: int                # time.monotonic_ns() when the sample started
    pid: int
    cpu_user_s: float        # this process only
    cpu_sys_s: float
    rss_bytes: int
    ctx_voluntary: int
    ctx_involuntary: int
    open_fds: int | None     # None: /proc/<pid>/fd not readable by us
    num_threads: int
    children: int            # live (non-zombie) descendants, at any depth
    # The tree: this process + live descendants + descendants already exited and reaped.
    tree_cpu_user_s: float
    tree_cpu_sys_s: float
    tree_rss_bytes: int      # this process + live descendants
    tree_num_threads: int

    @property
    def cpu_s(self) -> float:
        return self.cpu_user_s + self.cpu_sys_s

    @property
    def tree_cpu_s(self) -> float:
        return self.tree_cpu_user_s + self.tree_cpu_sys_s


_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess)


def sample(pid: int) -> ProcSample | None:
    """One sample of `pid` and its descendants; None if the process is gone or a zombie."""
    try:
        proc = psutil.Process(pid)
    except _GONE:
        return None
    return sample_process(proc)


def sample_process(proc: psutil.Process) -> ProcSample | None:
    """Like sample(), for a psutil.Process kept across samples (it detects pid reuse)."""
    t_ns = time.monotonic_ns()
    try:
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            cpu = proc.cpu_times()
            mem = proc.memory_info()
            ctx = proc.num_ctx_switches()
            threads = proc.num_threads()
            fds = _num_fds(proc)
        descendants = proc.children(recursive=True)
    except _GONE:
        return None
    # children_* holds CPU of exited children this process has waited for.
    tree_user = cpu.user + cpu.children_user
    tree_sys = cpu.system + cpu.children_system
    tree_rss, tree_threads, live = mem.rss, threads, 0
    for child in descendants:
        try:
            with child.oneshot():
                c_cpu = child.cpu_times()
                tree_user += c_cpu.user + c_cpu.children_user
                tree_sys += c_cpu.system + c_cpu.children_system
                # A zombie's CPU is real and not yet in its parent's children_*; keep it,
                # but it has no memory or threads and is not "live".
                if child.status() == psutil.STATUS_ZOMBIE:
                    continue
                tree_rss += child.memory_info().rss
                tree_threads += child.num_threads()
                live += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # exited (or not ours) since the walk
    return ProcSample(
        t_ns=t_ns,
        pid=proc.pid,
        cpu_user_s=cpu.user,
        cpu_sys_s=cpu.system,
        rss_bytes=mem.rss,
        ctx_voluntary=ctx.voluntary,
        ctx_involuntary=ctx.involuntary,
        open_fds=fds,
        num_threads=threads,
        children=live,
        tree_cpu_user_s=tree_user,
        tree_cpu_sys_s=tree_sys,
        tree_rss_bytes=tree_rss,
        tree_num_threads=tree_threads,
    )


def _num_fds(proc: psutil.Process) -> int | None:
    try:
        return proc.num_fds()
    except psutil.AccessDenied:
        return None
