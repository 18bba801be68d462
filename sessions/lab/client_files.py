"""The files a task gives its client, in its home: the inputs (read-only; one of them perhaps
watched, "the source": a file, or a tree on a filesystem of its own), and the outputs folder
(writable, kept across its invocations, watched by the kernel: probes/file_effects.py), in it
perhaps a folder on a filesystem of its own, "the target", whose every file the collector
tells apart; and the placeholders of its command filled with them, the lab's address and the
servers' ports.

    files = ClientFiles(task, boundary).make(home)
    files.values()                 # what the task's programs may name of them
    files.fill(servers, words)     # each of the task's placeholders, for this invocation
"""

import os
import shutil
import time
from pathlib import Path

from probes.boundary.sandbox import SERVICE_DIR, mount_tmpfs, service_folder
from probes.file_effects import FolderWatch
from sessions.lab.inputs.source import write_source
from sessions.lab.inputs.tree import write_tree
from sessions.lab.parts import HOST
from sessions.spec.task import Task
from sessions.spec.template import expand, template_names

TREE_FS_BYTES = 64 << 20     # the inputs' filesystem when one is a tree (~10 MB of it)
TARGET_FS_BYTES = 256 << 20  # a target's: the sandbox's disk limit
PRESENT_MAX = 20_000         # names of a target's files recorded as an invocation begins


class ClientFiles:
    def __init__(self, task: Task, boundary):   # boundary: sessions.lab.boundary.Boundary
        self.task, self.boundary = task, boundary
        self.inputs: dict[str, Path] = {}   # the task's inputs, in the client's home
        self.source: Path | None = None     # the watched one: "the source"
        self.outputs: dict[str, Path] = {}  # the task's outputs, in its outputs folder
        self.folder: Path | None = None     # that folder
        self.target: Path | None = None     # in it, a folder on a filesystem of its own
        self.watch: FolderWatch | None = None   # the kernel's view of it
        self.home: Path | None = None

    def make(self, home: Path) -> "ClientFiles":
        self.home = home
        where = home / "inputs"
        if any(spec.generate == "tree" for spec in self.task.inputs):
            mount_tmpfs(where, TREE_FS_BYTES)   # a tree is the source by its filesystem
        else:
            where.mkdir(mode=0o755)
        for spec in self.task.inputs:
            if spec.file is not None:
                path = Path(shutil.copy(spec.file, where / spec.file.name))
            elif spec.generate == "tree":   # evlab's deterministic tree, version 1
                path = write_tree(where / spec.name, 1)
            else:   # generate = "source": evlab's deterministic file
                path = write_source(where / f"{spec.name}.bin")
            if not path.is_dir():
                os.chmod(path, 0o644)
            self.inputs[spec.name] = path
            if spec.watched:
                self.source = path
        if self.task.outputs:
            self.folder = self.boundary.workdir(home / "outputs")
            owner = self.folder.stat()
            for out in self.task.outputs:
                path = self.outputs[out.name] = self.folder / out.file
                if out.filesystem:
                    self.target = mount_tmpfs(path, TARGET_FS_BYTES)
                elif out.folder:
                    path.mkdir()
                if out.folder:   # the client's to fill
                    os.chown(path, owner.st_uid, owner.st_gid)
            # the target's whole tree, or the outputs folder's own names
            self.watch = FolderWatch(self.target or self.folder, recursive=bool(self.target))
        return self

    def values(self) -> dict[str, str]:
        """The inputs and outputs by name, as the task's servers and programs name them."""
        return {**{name: str(path) for name, path in self.inputs.items()},
                **{name: str(path) for name, path in self.outputs.items()}}

    def fill(self, servers, words: dict[str, str]) -> dict[str, str]:
        """Each of the task's placeholders, as the task fills it for this invocation (servers:
        sessions.lab.servers.LabServers; words: the scenario's values, `scenario.NAME`)."""
        def filled(fill: str) -> str:
            if "{" in fill:   # a text of fillers: a URL, say
                return expand(fill, {word: filled(word) for word in template_names(fill) or ()})
            if fill in words:
                return words[fill]
            if fill == "host":
                return HOST
            if fill == "service":   # an operable service's folder, where the client sees it
                confined = self.boundary.sandbox is not None
                return SERVICE_DIR if confined else str(self.home and service_folder(self.home))
            if fill.startswith("inputs."):
                return str(self.inputs[fill.removeprefix("inputs.")])
            if fill.startswith("outputs."):
                return str(self.outputs[fill.removeprefix("outputs.")])
            return str(servers.client_port(fill.split(".")[1]))   # servers.NAME.port

        return {name: filled(fill) for name, fill in self.task.fills.items()}

    def begin(self) -> list[dict]:
        """As an invocation begins: what the outputs folder's watch read so far is dropped
        (the task's state or steps, or an invocation already read), and a target's `present`
        record says which files it holds."""
        watch = self.watch
        if watch is None:
            return []
        watch.drain()
        if not watch.recursive:
            return []
        files, more = watch.present(PRESENT_MAX)
        return [{"event": "present", "t_ns": time.monotonic_ns(), "names": list(files),
                 "inodes": list(files.values()), **({"truncated": True} if more else {})}]

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
