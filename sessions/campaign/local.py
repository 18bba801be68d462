"""The local engine: this machine, one attempt at a time, on one lab session (one compile)."""

import shutil
import threading
from collections.abc import Callable

from probes.owned_tmp import make_owned_dir
from sessions.campaign.jobs import Job
from sessions.campaign.shipping import Files, unpack
from sessions.lab.attempts import AttemptWorker
from sessions.lab.runner import Cancelled, Options

NODE = "local"


class LocalEngine:
    name = "local"

    def __init__(self, options: Options):
        self.options = options
        self._cancel = threading.Event()
        self._worker: AttemptWorker | None = None

    def nodes(self) -> list[str]:
        return [NODE]

    def cancel(self) -> None:
        """From another thread: no further attempt starts, the running one is torn down as on
        Ctrl-C (its session's cancel event), and run() raises Cancelled."""
        self._cancel.set()
        worker = self._worker
        if worker is not None:
            worker.cancel()

    def close(self) -> None:
        """Nothing outlives run(): its lab is closed when run() returns."""

    def run(self, jobs: list[Job], files: Callable[[str], Files], sink) -> None:
        """Run every job in order; the lab's own errors stop the campaign (it can resume)."""
        if not jobs:
            return
        ship = make_owned_dir("evlab-ship-")
        worker = None
        try:
            worker = self._worker = AttemptWorker(self.options, NODE)
            unpacked: set[str] = set()
            for job in jobs:
                if self._cancel.is_set():
                    raise Cancelled()
                if job.client not in unpacked:   # copied once, as a node receives it once
                    unpack(ship / job.client, files(job.client))
                    unpacked.add(job.client)
                sink.dispatched(job, NODE)
                sink.finished(job, worker.run(job.order(ship / job.client)))
        finally:
            self._worker = None
            try:
                if worker is not None:
                    worker.close()
            finally:
                shutil.rmtree(ship, ignore_errors=True)
