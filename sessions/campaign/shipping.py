"""What travels with a client: its shipped files as bytes (driver side), laid out under a root
of the node's own (node side), readable by the sandbox's unprivileged user."""

import os
import stat
from pathlib import Path, PurePosixPath

from sessions.spec.campaign import CampaignClient

Files = dict[str, tuple[int, bytes]]   # shipped name -> (mode bits, content)


class ShippingError(ValueError):
    """Shipped files evlab will not lay out (a name escaping the root)."""


def pack(client: CampaignClient) -> Files:
    return {name: (stat.S_IMODE(path.stat().st_mode), path.read_bytes())
            for name, path in client.ship.items()}


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
