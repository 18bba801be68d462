"""Tearing down: every step runs whatever happens in another, so an exception, Ctrl-C or SIGTERM
leaves no process, port, cgroup, mount or temp directory."""

import os
import signal
from collections.abc import Callable, Iterable


def run_every(steps: Iterable[Callable[[], object]]) -> None:
    """Every step runs, whatever happens in another: an interrupt that arrives during
    teardown (the one that ends the run) is raised once everything is gone."""
    first: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as e:   # noqa: BLE001 - re-raised below, after the rest
            first = first or e
    if first is not None:
        raise first


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
