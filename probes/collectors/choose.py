"""Choosing a kernel collector, with every missing capability said out loud.

    collector, missing = open_collector("auto", functions=("my_hash",))
    collector.prepare(clients)                          # before the first launch, if anything
    collector.watch_cgroup(invocation, cgroup, allowed=[("127.0.0.1", port)], deny=False)
    proc = collector.launch(invocation, argv, source, client=path)   # argv may wrap the client
    collector.egress(invocation)                        # where the cgroup's sockets sent
    collector.snapshot(invocation); collector.poll_events(); collector.finish(invocation)
    collector.close()

"auto" tries BCC, then strace, then none. Each step down is recorded as Capability records
(what is unavailable, why, and the fix), so downstream clauses become inconclusive, never pass.
"""

import atexit
import subprocess
import time
from pathlib import Path
from typing import Protocol

from probes.bcc.collector import BccCollector, CollectorUnavailable
from probes.capability import Capability
from probes.collectors.kinds import KINDS
from probes.collectors.records import (
    COUNTERS,
    CounterSnapshot,
    EgressTotals,
    KernelEvent,
    NoEgressView,
    NoProcessWatch,
)
from probes.collectors.strace import StraceCollector


class Collector(Protocol):
    name: str
    functions: tuple[str, ...]

    def prepare(self, clients: list[Path]) -> None: ...
    def launch(self, invocation: int, argv: list[str], source: Path | None,
               client: Path | None = None, target: Path | None = None,
               **popen_kwargs) -> subprocess.Popen: ...
    def watch_cgroup(self, invocation: int, cgroup_dir: Path, cgroup_id: int,
                     allowed: list[tuple[str, int]], deny: bool,
                     refused: list[tuple[str, int]] = ...) -> bool: ...
    def unwatch_cgroup(self, invocation: int) -> None: ...
    def watch_processes(self, invocation: int, pids: dict[str, int]) -> bool: ...
    def unwatch_processes(self, invocation: int) -> None: ...
    def egress(self, invocation: int) -> EgressTotals | None: ...
    def snapshot(self, invocation: int) -> CounterSnapshot: ...
    def stop_after(self, invocation: int, nbytes: int) -> bool: ...
    def poll_events(self) -> list[KernelEvent]: ...
    def live_tasks(self, invocation: int) -> list[int] | None: ...
    def finish(self, invocation: int) -> CounterSnapshot: ...
    def overhead(self) -> dict: ...
    def close(self) -> None: ...


class BccLauncher:
    """The BCC collector behind the common launch interface."""

    name = "bcc"

    def __init__(self, functions: tuple[str, ...]):
        self._bcc = BccCollector(functions)
        self.functions = self._bcc.functions

    @property
    def bcc(self) -> BccCollector:
        """The collector itself (a test of the kernel side drives it directly)."""
        return self._bcc

    def probing(self, functions: tuple[str, ...]) -> "BccLauncher":
        """Itself, kept from an earlier session, now probing these functions."""
        self._bcc.probe_functions(functions)
        self._bcc.resume()
        self.functions = self._bcc.functions
        return self

    def prepare(self, clients):
        self._bcc.prepare(clients)

    def launch(self, invocation, argv, source, client=None, target=None, **popen_kwargs):
        home = popen_kwargs.get("cwd")
        with self._bcc.launching(invocation, Path(client or argv[0]), source, target,
                                 Path(home) if home else None):
            return subprocess.Popen([str(a) for a in argv], start_new_session=True,
                                    **popen_kwargs)

    def watch_cgroup(self, invocation, cgroup_dir, cgroup_id, allowed, deny, refused=()):
        self._bcc.watch_cgroup(invocation, cgroup_dir, cgroup_id, allowed, deny, refused)
        return True

    def unwatch_cgroup(self, invocation):
        self._bcc.unwatch_cgroup(invocation)

    def egress(self, invocation):
        return self._bcc.egress(invocation)

    def watch_processes(self, invocation, pids):
        return self._bcc.watch_processes(invocation, pids)

    def unwatch_processes(self, invocation):
        self._bcc.unwatch_processes(invocation)

    def snapshot(self, invocation):
        return self._bcc.snapshot(invocation)

    def stop_after(self, invocation, nbytes):
        self._bcc.stop_after(invocation, nbytes)
        return True

    def poll_events(self):
        return self._bcc.poll_events()

    def live_tasks(self, invocation):
        return self._bcc.live_tasks(invocation)

    def finish(self, invocation):
        return self._bcc.finish(invocation)

    def overhead(self):
        return self._bcc.overhead()

    def close(self):
        if _keeping:
            self._bcc.reset()
            _kept.append(self)
        else:
            self._bcc.close()


# A process that opens session after session (the tests) may keep each closed BCC collector
# for the next session instead of compiling another (~0.9 s of CPU each); evlab itself opens
# one session per process. Kept collectors are closed at exit.
_keeping = False
_kept: list[BccLauncher] = []


def keep_collectors() -> None:
    global _keeping
    _keeping = True


@atexit.register
def _close_kept() -> None:
    while _kept:
        _kept.pop()._bcc.close()


def _reuse(functions: tuple[str, ...]) -> BccLauncher | None:
    """A kept collector, probing these functions (which function each counter slot counts is
    chosen when uprobes attach, not compiled in)."""
    try:
        kept = _kept.pop()   # atomic: two sessions opening at once never take the same one
    except IndexError:
        return None
    return kept.probing(functions)


class NoCollector(NoEgressView, NoProcessWatch):
    """No kernel view at all: every counter is unobserved."""

    name = "none"

    def __init__(self, functions: tuple[str, ...] = ()):
        self.functions = tuple(functions)

    def prepare(self, clients):
        pass   # nothing attaches to a client

    def launch(self, invocation, argv, source, client=None, target=None, **popen_kwargs):
        return subprocess.Popen([str(a) for a in argv], start_new_session=True, **popen_kwargs)


    def snapshot(self, invocation):
        return CounterSnapshot(time.monotonic_ns(), invocation, {}, unobserved=COUNTERS)

    def stop_after(self, invocation, nbytes):
        return False   # no count of the target's bytes to stop at

    def poll_events(self):
        return []

    def live_tasks(self, invocation):
        return None   # no kernel view of the process tree

    def finish(self, invocation):
        return self.snapshot(invocation)

    def overhead(self):
        return {"bpf_run_time_ns": None, "bpf_run_count": None, "events": None,
                "events_per_s": None}

    def close(self):
        pass


_NO_KERNEL_VIEW = Capability(
    "kernel-events", False,
    "no kernel collector: syscalls, bytes, connects and process events are not observed",
    "run as root after `make setup` (BCC) or install strace")


def open_collector(kind: str = "auto", functions: tuple[str, ...] = ()
                   ) -> tuple[Collector, list[Capability]]:
    """The best collector allowed by kind, and the capabilities that are missing with it."""
    if kind not in KINDS:
        raise ValueError(f"unknown collector {kind!r}: choose one of {', '.join(KINDS)}")
    missing: list[Capability] = []
    if kind in ("auto", "bcc"):
        try:
            return _reuse(functions) or BccLauncher(functions), missing
        except CollectorUnavailable as e:
            missing.append(e.capability)
            if kind == "bcc":
                raise
    if kind in ("auto", "strace"):
        try:
            strace = StraceCollector(functions)
            return strace, missing + strace.missing()
        except FileNotFoundError:
            missing.append(Capability("strace", False, "strace is not installed",
                                      "apt-get install strace (or make setup as root)"))
            if kind == "strace":
                raise CollectorUnavailable(missing[-1]) from None
    if kind == "none":
        missing.append(Capability("kernel-events", False, "collector 'none' was chosen",
                                  "use --collector auto"))
    else:
        missing.append(_NO_KERNEL_VIEW)
    return NoCollector(functions), missing
