"""The local engine: this machine, `jobs` attempts at a time. One lab session (one compile) runs
them one by one; with jobs > 1, a pool of lab processes (sessions/lab/schedule.py), each a lab
session of its own with networks of its own, runs them side by side."""

import dataclasses
import threading
from collections.abc import Callable

from sessions.campaign.jobs import Job
from sessions.campaign.node import Node, Ship
from sessions.campaign.shipping import Files
from sessions.lab.schedule import Pool
from sessions.lab.session import Cancelled, Options, RunError

NODE = "local"


class LocalEngine:
    name = "local"

    def __init__(self, options: Options, jobs: int = 1):
        self.options = options
        self.jobs = jobs
        self._cancel = threading.Event()
        self._running: Node | Pool | None = None

    def cancel(self) -> None:
        """From another thread: no further attempt starts, the running ones are torn down as on
        Ctrl-C (their sessions' cancel), and run() raises Cancelled."""
        self._cancel.set()
        running = self._running
        if running is not None:
            running.cancel()

    def close(self) -> None:
        """Nothing outlives run(): its labs are closed when run() returns."""

    def run(self, jobs: list[Job], files: Callable[[str], Files], sink) -> None:
        """Run every job; the labs' own errors stop the campaign (it can resume)."""
        if not jobs:
            return
        if self.jobs > 1 and len(jobs) > 1:
            return self._at_once(jobs, files, sink)
        node = self._running = Node(self.options, NODE)
        try:
            for job in jobs:
                if self._cancel.is_set():
                    raise Cancelled()
                sink.dispatched(job, NODE)
                sink.finished(job, node.run(job, files(job.client)))
        finally:
            self._running = None
            node.close()

    def _at_once(self, jobs: list[Job], files: Callable[[str], Files], sink) -> None:
        """A pool of labs per task (a lab session judges one task), one task after another."""
        ship = Ship()
        try:
            for task in dict.fromkeys(job.task for job in jobs):
                mine = [job for job in jobs if job.task == task]
                self._pool(mine, [ship.order(job, files(job.client)) for job in mine], sink)
        finally:
            ship.close()

    def _pool(self, jobs: list[Job], orders: list, sink) -> None:
        pool = None
        try:
            pool = self._running = Pool(dataclasses.replace(self.options, task=jobs[0].task),
                                        min(self.jobs, len(jobs)))
            if self._cancel.is_set():
                raise Cancelled()
            pool.run(orders, lambda i, piece: sink.finished(jobs[i], piece),
                     lambda i: sink.dispatched(jobs[i], NODE))
        except RunError:
            if self._cancel.is_set():   # a lab cancelled mid-attempt says so as an error
                raise Cancelled() from None
            raise
        finally:
            self._running = None
            if pool is not None:
                pool.close()
