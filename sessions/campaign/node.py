"""One node's lab for a campaign (this machine's, or a Ray node's actor): a directory where each
client's shipped files are laid out once, and one AttemptWorker (one lab session) running the
attempts sent to it one at a time."""

import shutil

from probes.owned_tmp import make_owned_dir
from sessions.campaign.jobs import Job
from sessions.campaign.shipping import Files, unpack
from sessions.lab.attempts import AttemptPiece, AttemptWorker
from sessions.lab.session import Options


class Node:
    def __init__(self, options: Options, name: str):
        self.name = name
        self.ship = make_owned_dir("evlab-ship-")
        self._unpacked: set[str] = set()
        try:
            self.worker = AttemptWorker(options, name)
        except BaseException:
            shutil.rmtree(self.ship, ignore_errors=True)
            raise

    def run(self, job: Job, files: Files) -> AttemptPiece:
        if job.client not in self._unpacked:   # a client's files arrive once per node
            unpack(self.ship / job.client, files)
            self._unpacked.add(job.client)
        return self.worker.run(job.order(self.ship / job.client))

    def cancel(self) -> None:
        self.worker.cancel()

    def close(self) -> None:
        try:
            self.worker.close()
        finally:
            shutil.rmtree(self.ship, ignore_errors=True)
