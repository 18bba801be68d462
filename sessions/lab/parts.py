"""What an open session lends each scenario it runs: the stream, the observers, the client's
boundary and the servers' spawner, opened once per session (one compile), and how to stop."""

import threading
from dataclasses import dataclass, field
from pathlib import Path

from probes.collectors.choose import Collector
from sessions.lab.boundary import Boundary
from sessions.lab.spawner import Spawner
from sessions.spec.task import Task
from sessions.stream.stream import EventStream

HOST = "127.0.0.1"


class Cancelled(KeyboardInterrupt):
    """The session was asked to stop (the dashboard quit); unwinds like Ctrl-C, through teardown."""


@dataclass
class LabParts:
    stream: EventStream
    collector: Collector
    boundary: Boundary
    spawner: Spawner | None
    packets_mode: str                # on, off, unavailable
    noise: tuple[str, ...]           # ambient noise for every scenario
    out_dir: Path                    # pcaps and server records kept for the archive
    tmp: Path                        # the session's own temp directory
    task: Task                       # what every scenario of the session runs
    cancel: threading.Event
    launch_lock: threading.Lock = field(default_factory=threading.Lock)   # one launch armed
    # the task's servers listened in a lab of this session: one that dies at start later is
    # an invalid attempt (a port clash), not the task's mistake
    servers_listened: bool = False

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise Cancelled()
