"""The local engine: this machine, one attempt at a time, on one lab session (one compile)."""

import shutil
from collections.abc import Callable

from probes.owned_tmp import make_owned_dir
from sessions.campaign.jobs import Job
from sessions.campaign.shipping import Files, unpack
from sessions.lab.attempts import AttemptWorker
from sessions.lab.runner import Options

NODE = "local"


class LocalEngine:
    name = "local"

    def __init__(self, options: Options):
        self.options = options

    def nodes(self) -> list[str]:
        return [NODE]

    def close(self) -> None:
        """Nothing outlives run(): its lab is closed when run() returns."""

    def run(self, jobs: list[Job], files: Callable[[str], Files], sink) -> None:
        """Run every job in order; the lab's own errors stop the campaign (it can resume)."""
        if not jobs:
            return
        ship = make_owned_dir("evlab-ship-")
        worker = None
        try:
            worker = AttemptWorker(self.options, NODE)
            unpacked: set[str] = set()
            for job in jobs:
                if job.client not in unpacked:   # copied once, as a node receives it once
                    unpack(ship / job.client, files(job.client))
                    unpacked.add(job.client)
                sink.dispatched(job, NODE)
                sink.finished(job, worker.run(job.order(ship / job.client)))
        finally:
            try:
                if worker is not None:
                    worker.close()
            finally:
                shutil.rmtree(ship, ignore_errors=True)
