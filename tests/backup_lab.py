"""Backup's reference client builds and its receiver, as the tests and the bench start them
outside a session (a session starts them from fixture/backup/task.toml); the receiver forked by
the test process's spawner unless given one (tests/lab_servers.py)."""

from collections.abc import Sequence
from pathlib import Path

from fixture.backup.store import BACKUP_NAME
from sessions.lab.harness import Server, start_module
from sessions.lab.spawner import Spawner
from tests.lab_servers import forking

BUILD_DIR = Path(__file__).resolve().parent.parent / "fixture" / "build"
BEHAVIOURS = ("baseline", "false-success", "hash-storm", "unexpected-egress",
              "redundant-upload", "busy-wait", "corrupt-upload", "retry")


def client_path(behaviour: str) -> Path:
    return BUILD_DIR / f"client-{behaviour}"


def backup_path(store: Path) -> Path:
    return Path(store) / BACKUP_NAME


def start_receiver(store: Path, events_path: Path, *, drop_first_upload_after: int | None = None,
                   fault_file: Path | None = None, port: int = 0,
                   extra_args: Sequence[str] = (), spawner: Spawner | None = None,
                   listen_key: str | None = None, netns: Path | None = None) -> Server:
    """With a spawner and a listen_key, the port is held by the spawner's listening socket
    for that key across restarts (see Spawner.spawn); release it with spawner.release."""
    args = ["--store", str(store), "--port", str(port), *extra_args]
    if fault_file is not None:
        args += ["--fault-file", str(fault_file)]
    if drop_first_upload_after is not None:
        args += ["--drop-first-upload-after", str(drop_first_upload_after)]
    listen = (listen_key, port) if spawner is not None and listen_key else None
    return start_module("fixture.backup.receiver", args, events_path, spawner or forking(),
                        listen, netns)
