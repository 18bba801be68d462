"""The local engine: this machine, one attempt at a time, on one lab session (one compile)."""

import threading
from collections.abc import Callable

from sessions.campaign.jobs import Job
from sessions.campaign.node import Node
from sessions.campaign.shipping import Files
from sessions.lab.session import Cancelled, Options

NODE = "local"


class LocalEngine:
    name = "local"

    def __init__(self, options: Options):
        self.options = options
        self._cancel = threading.Event()
        self._node: Node | None = None

    def cancel(self) -> None:
        """From another thread: no further attempt starts, the running one is torn down as on
        Ctrl-C (its session's cancel event), and run() raises Cancelled."""
        self._cancel.set()
        node = self._node
        if node is not None:
            node.cancel()

    def close(self) -> None:
        """Nothing outlives run(): its lab is closed when run() returns."""

    def run(self, jobs: list[Job], files: Callable[[str], Files], sink) -> None:
        """Run every job in order; the lab's own errors stop the campaign (it can resume)."""
        if not jobs:
            return
        node = self._node = Node(self.options, NODE)
        try:
            for job in jobs:
                if self._cancel.is_set():
                    raise Cancelled()
                sink.dispatched(job, NODE)
                sink.finished(job, node.run(job, files(job.client)))
        finally:
            self._node = None
            node.close()
