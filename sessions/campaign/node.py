"""One node's lab for a campaign (this machine's, or a Ray node's actor): a directory where each
client's shipped files are laid out once (`Ship`), and one AttemptWorker (one lab session) per
task running the attempts sent to it one at a time (a lab session judges one task)."""

import dataclasses
import shutil

from probes.owned_tmp import make_owned_dir
from sessions.campaign.jobs import Job
from sessions.campaign.shipping import Files, unpack
from sessions.lab.attempts import AttemptOrder, AttemptPiece, AttemptWorker
from sessions.lab.session import Options


class Ship:
    """Where a node lays out each client's shipped files, once per client."""

    def __init__(self):
        self.dir = make_owned_dir("evlab-ship-")
        self._unpacked: set[str] = set()

    def order(self, job: Job, files: Files) -> AttemptOrder:
        if job.client not in self._unpacked:
            unpack(self.dir / job.client, files)
            self._unpacked.add(job.client)
        return job.order(self.dir / job.client)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class Node:
    def __init__(self, options: Options, name: str):
        self.name = name
        self.options = options
        self.ship = Ship()
        self.workers: dict[str, AttemptWorker] = {}   # by task; the current one last

    def run(self, job: Job, files: Files) -> AttemptPiece:
        order = self.ship.order(job, files)
        if job.task not in self.workers:
            for other in list(self.workers):   # one lab session at a time: its BPF, its net
                self.workers.pop(other).close()
            self.workers[job.task] = AttemptWorker(
                dataclasses.replace(self.options, task=job.task), self.name)
        return self.workers[job.task].run(order)

    def cancel(self) -> None:
        for worker in list(self.workers.values()):
            worker.cancel()

    def close(self) -> None:
        try:
            for worker in self.workers.values():
                worker.close()
        finally:
            self.ship.close()
