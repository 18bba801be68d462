"""The lab's servers as the tests start them outside a session: forked by this test process's
own spawner (sessions/lab/spawner.py, ~2 ms of CPU a server) rather than each an interpreter
of its own (`python -m`, ~100 ms: ~90 servers a run). The spawner is started on first use and
another whenever the environment its servers would inherit is no longer this process's (a
test that changes a variable gets servers that see it, as `python -m` would); they close at
exit."""

import atexit
import os
from collections.abc import Iterable
from pathlib import Path

from sessions.lab import harness
from sessions.lab.harness import Server
from sessions.lab.spawner import Spawner, same_environment

_mine: list[Spawner] = []


def forking() -> Spawner:
    """This process's spawner for the servers its tests start, alive and current. One made
    stale by a change of the environment is left running (a module's server may still be
    its child) and closed at exit with the rest."""
    if not (_mine and not _mine[-1].gone()
            and same_environment(_mine[-1].environ, dict(os.environ))):
        _mine.append(Spawner.start())
    return _mine[-1]


@atexit.register
def _close() -> None:
    while _mine:
        _mine.pop().close()


def start_decoy(events_path: Path, spawner: Spawner | None = None,
                netns: Path | None = None) -> Server:
    return harness.start_decoy(events_path, spawner or forking(), netns)


def start_proxy(target_port: int, events_path: Path, faults: Iterable[dict] = (),
                spawner: Spawner | None = None, netns: Path | None = None) -> Server:
    return harness.start_proxy(target_port, events_path, faults, spawner or forking(), netns)
