"""ProcessWatcher: probes.proc.metrics samples taken every interval in a thread, for tests that
watch a process over time (the lab samples on its own schedule with probes.proc.metrics.sample)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable

import psutil

from probes.proc.metrics import ProcSample, sample_process

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess)


class ProcessWatcher:
    """Samples a set of pids every `interval_s` seconds in a daemon thread.

    latest(pid) gives the newest sample, drain() every sample since the previous drain
    (oldest first; at most `max_pending` are kept, the oldest are dropped and counted in
    `dropped`). A pid whose process has exited is sampled no more and listed in `gone`.
    """

    def __init__(self, pids: Iterable[int] = (), interval_s: float = 0.25,
                 max_pending: int = 10_000) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        self.dropped = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._procs: dict[int, psutil.Process] = {}
        self._latest: dict[int, ProcSample] = {}
        self._pending: collections.deque[ProcSample] = collections.deque(maxlen=max_pending)
        self._gone: set[int] = set()
        self._thread: threading.Thread | None = None
        for pid in pids:
            self.add(pid)

    def add(self, pid: int) -> None:
        # Bind the pid to its process now, so a later pid reuse is not mistaken for it.
        try:
            proc = psutil.Process(pid)
        except _GONE:
            with self._lock:
                self._gone.add(pid)
            return
        with self._lock:
            self._procs[pid] = proc
            self._gone.discard(pid)

    def remove(self, pid: int) -> None:
        with self._lock:
            self._procs.pop(pid, None)

    def start(self) -> ProcessWatcher:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="evlab-procmetrics",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop sampling; returns once the thread has finished its current sample."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> ProcessWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def gone(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._gone)

    def latest(self, pid: int) -> ProcSample | None:
        with self._lock:
            return self._latest.get(pid)

    def drain(self) -> list[ProcSample]:
        with self._lock:
            out = list(self._pending)
            self._pending.clear()
        return out

    def sample_now(self) -> list[ProcSample]:
        """Take one round of samples immediately (also what the thread does each tick)."""
        with self._lock:
            procs = list(self._procs.items())
        taken = []
        for pid, proc in procs:
            if self._stop.is_set():
                break
            # is_running() compares create times: False also when the pid was reused.
            try:
                s = sample_process(proc) if proc.is_running() else None
            except psutil.AccessDenied:
                s = None  # e.g. /proc mounted hidepid: no longer observable, same as gone
            with self._lock:
                if s is None:
                    self._procs.pop(pid, None)
                    self._gone.add(pid)
                    continue
                self._latest[pid] = s
                if len(self._pending) == self._pending.maxlen:
                    self.dropped += 1
                self._pending.append(s)
            taken.append(s)
        return taken

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_now()
            # Event.wait, not sleep: stop() wakes the thread at once.
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
