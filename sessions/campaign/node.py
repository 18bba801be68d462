"""One node's lab for a campaign (this machine's, or a Ray node's actor): a directory where each
client's shipped files are laid out once (`Ship`), and one AttemptWorker (one lab session) per
task running the attempts sent to it one at a time (a lab session judges one task)."""

import dataclasses
import shutil

from probes.owned_tmp import make_owned_dir
from sessions.campaign.jobs import Job
from sessions.campaign.shipping import Files, split_task, unpack
from sessions.lab.attempts import AttemptOrder, AttemptPiece, AttemptWorker
from sessions.lab.session import Options


class Ship:
    """Where a node lays out each client's shipped files, once per client, and the task folder
    that came with them (a Ray node's copy of a user's task: beside, not inside, the client's
    files, under a name no client has)."""

    def __init__(self):
        self.dir = make_owned_dir("evlab-ship-")
        self._unpacked: dict[str, str] = {}   # client -> its task here ("": the job's own)

    def place(self, job: Job, files: Files) -> Job:
        """The job as this node runs it: its files laid out, its task the folder shipped."""
        if job.client not in self._unpacked:
            own, task = split_task(files)
            unpack(self.dir / job.client, own)
            if task:
                unpack(self.dir / ".tasks" / job.client, task)
            self._unpacked[job.client] = str(self.dir / ".tasks" / job.client) if task else ""
        return dataclasses.replace(job, task=self._unpacked[job.client] or job.task)

    def order(self, job: Job, files: Files) -> AttemptOrder:
        return self.place(job, files).order(self.dir / job.client)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class Node:
    """Its lab for the options' task opens now (imports, BPF compile), before any attempt; an
    attempt of another task closes it and opens that task's (a lab session judges one task)."""

    def __init__(self, options: Options, name: str):
        self.name = name
        self.options = options
        self.ship = Ship()
        self.workers: dict[str, AttemptWorker] = {}   # by task: one open at a time
        try:
            self._worker(options.task)
        except BaseException:
            self.ship.close()
            raise

    def _worker(self, task: str) -> AttemptWorker:
        if task not in self.workers:
            for other in list(self.workers):   # one lab at a time: its BPF, its networks
                self.workers.pop(other).close()
            self.workers[task] = AttemptWorker(dataclasses.replace(self.options, task=task),
                                               self.name)
        return self.workers[task]

    def run(self, job: Job, files: Files) -> AttemptPiece:
        job = self.ship.place(job, files)
        return self._worker(job.task).run(job.order(self.ship.dir / job.client))

    def cancel(self) -> None:
        for worker in list(self.workers.values()):
            worker.cancel()

    def close(self) -> None:
        try:
            for worker in self.workers.values():
                worker.close()
        finally:
            self.ship.close()
