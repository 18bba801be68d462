"""What travels with a client: its shipped files as bytes (driver side), laid out under a root
of the node's own (node side), readable by the sandbox's unprivileged user. A client whose task
is a folder of the user's (not a built-in one, which every node has) takes the folder along on
a Ray node: its files under TASK_PREFIX, laid out apart from the client's (Ship.place)."""

import os
import stat
from pathlib import Path, PurePosixPath

from sessions.spec.campaign import CampaignClient
from sessions.spec.task import task_files

Files = dict[str, tuple[int, bytes]]   # shipped name -> (mode bits, content)
# A client's shipped names are relative paths (or "abs/..."), never absolute: a name under
# this prefix is the task's, whatever files the client ships (a ".task/" folder of its own too)
TASK_PREFIX = "/task/"


class ShippingError(ValueError):
    """Shipped files evlab will not lay out (a name escaping the root)."""


def pack(client: CampaignClient) -> Files:
    return {name: (stat.S_IMODE(path.stat().st_mode), path.read_bytes())
            for name, path in client.ship.items()}


def with_task(client_files: Files, task: str) -> Files:
    """The client's files and, when its task is a folder (an absolute path, not a built-in
    id), the folder's files (those its digest covers) under TASK_PREFIX."""
    if not Path(task).is_absolute():
        return client_files
    folder = Path(task)
    return {**client_files, **{TASK_PREFIX + p.relative_to(folder).as_posix():
                               (stat.S_IMODE(p.stat().st_mode), p.read_bytes())
                               for p in task_files(folder)}}


def split_task(files: Files) -> tuple[Files, Files]:
    """(the client's files, its task folder's files by their path in the folder)."""
    return ({n: f for n, f in files.items() if not n.startswith(TASK_PREFIX)},
            {n[len(TASK_PREFIX):]: f for n, f in files.items() if n.startswith(TASK_PREFIX)})


def unpack(root: Path, files: Files) -> None:
    """Write the files under root: directories 0755, files 0644 (0755 when executable)."""
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    for name, (mode, data) in files.items():
        parts = PurePosixPath(name).parts
        if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
            raise ShippingError(f"shipped file name {name!r} escapes its directory")
        target = root.joinpath(*parts)
        for parent in reversed(target.relative_to(root).parents[:-1]):
            (root / parent).mkdir(mode=0o755, exist_ok=True)
        target.write_bytes(data)
        os.chmod(target, 0o755 if mode & 0o111 else 0o644)
