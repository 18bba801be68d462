"""Process-tree metrics from /proc via psutil: CPU, RSS, context switches, fds, threads.

Usage:
    s = sample(pid)                       # one ProcSample, or None once the process is gone
    s = sample_process(proc)              # the same for a psutil.Process kept across samples
    table = children_table([a, b])        # several samples of one moment: one read for all
    s = sample(a, table)

Sample the client and each server separately: each sample covers one process and, in the
tree_* fields, its live descendants.

Overhead: one sample reads a handful of /proc files for the process and each descendant, and
lists /proc/<pid>/fd. Descendants are found from the kernel's list of each thread's children
(/proc/<pid>/task/<tid>/children), so the cost grows with the observed trees, not with the
machine's process count: 0.09 ms for a small tree, where psutil's Process.children, walking
every process, took 2.5 ms with ~130 processes. Samples of one moment share one read
(children_table). Nothing is attached to the observed process.

Limits: CPU of an exited descendant is visible only after its parent has waited for it
(cpu_times().children_*); a descendant that exits between the read of its parent's list and
its own is missed for that one sample, as is one started since. tree_rss_bytes sums RSS, so
pages shared between processes count once per process. open_fds is None when /proc/<pid>/fd
is not readable (another user's process without root).
"""

from __future__ import annotations

import collections
import functools
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from probes.proc.entries import stat_fields


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


Children = dict[int, list[int]]   # pid -> the pids whose parent it is, at one moment


def children_table(roots: Iterable[int]) -> Children:
    """The children of each process of the trees under roots, at one moment, for the samples
    of that moment to share. On a kernel without the children lists (CONFIG_PROC_CHILDREN
    unset), one walk of every process of /proc instead."""
    if not _kernel_lists():
        return _walked()
    table: Children = {}
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid not in table:
            table[pid] = _children(pid)
            stack.extend(table[pid])
    return table


@functools.cache
def _kernel_lists() -> bool:
    return os.path.exists(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/children")


def _children(pid: int) -> list[int]:
    """pid's children, from each of its threads' lists (a child belongs to the thread that
    started it); a list is not read atomically, so a child started or reaped meanwhile may be
    missed for this one moment, as a walk of /proc misses it."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found   # gone
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(child) for child in f.read().split())
        except OSError:
            continue   # the thread ended
    return found


def _walked() -> Children:
    """Every process's children, from one walk of /proc."""
    table: Children = collections.defaultdict(list)
    for pid in psutil.pids():
        try:
            table[int(stat_fields(pid)[1])].append(pid)
        except OSError:
            continue   # exited since the listing
    return table


def sample(pid: int, table: Children | None = None) -> ProcSample | None:
    """One sample of `pid` and its descendants; None if the process is gone or a zombie.
    table: children_table() of this moment (None: its own read)."""
    try:
        proc = psutil.Process(pid)
    except _GONE:
        return None
    return _sample(proc, children_table([pid]) if table is None else table)


def sample_process(proc: psutil.Process) -> ProcSample | None:
    """Like sample(), for a psutil.Process kept across samples (it detects pid reuse)."""
    return _sample(proc, children_table([proc.pid]))


def _sample(proc: psutil.Process, table: Children) -> ProcSample | None:
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
        descendants = _descendants(proc, table)
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


def _descendants(proc: psutil.Process, table: Children) -> list[psutil.Process]:
    """proc's descendants in table: a process started before proc is not its child (its
    parent's pid was reused while the table was read)."""
    born, found, seen, stack = proc.create_time(), [], set(), [proc.pid]
    while stack:
        pid = stack.pop()
        if pid in seen:   # pids reused while the table was read: a cycle
            continue
        seen.add(pid)
        for child_pid in table.get(pid, ()):
            try:
                child = psutil.Process(child_pid)
                if born <= child.create_time():
                    found.append(child)
                    stack.append(child_pid)
            except _GONE:
                pass
    return found


def _num_fds(proc: psutil.Process) -> int | None:
    try:
        return proc.num_fds()
    except psutil.AccessDenied:
        return None
