"""Arming a scenario's faults per invocation, and healing them.

Receiver faults go into the receiver's fault file (read when an upload starts); wire faults get
a fault proxy between the client and the receiver for that invocation (the client is given the
proxy's port). After an injected crash the receiver is restarted on the same store and port, so
a client can recover. Everything is undone at disarm() and close(), also on errors.
"""

import json
import os
from pathlib import Path

from fixture.harness import Server, start_proxy, start_receiver, stop_all
from fixture.spawner import Spawner
from sessions.spec.faults import ONE_SHOT, RECEIVER_KINDS, WIRE_KINDS, for_invocation


class Injector:
    def __init__(self, faults, workdir: Path, receiver: Server, spawner: Spawner | None = None,
                 netns: Path | None = None, digest: str | None = None):
        self.faults = faults
        self.digest = digest   # the source's: faults strike only uploads of it
        self.netns = netns   # the lab network its servers live in (None: the host's)
        self.workdir = workdir
        self.receiver = receiver
        self.spawner = spawner
        self.fault_file = workdir / "faults.json"
        self.proxy: Server | None = None

    @classmethod
    def start(cls, faults, workdir: Path, spawner: Spawner | None = None,
              netns: Path | None = None, digest: str | None = None) -> "Injector":
        """Start the scenario's receiver, wired to its fault file."""
        fault_file = workdir / "faults.json"
        fault_file.write_text("[]")
        receiver = start_receiver(workdir / "store", workdir / "receiver.jsonl",
                                  fault_file=fault_file, spawner=spawner,
                                  listen_key=str(workdir), netns=netns)
        return cls(faults, workdir, receiver, spawner, netns, digest)

    def _write(self, faults: list[dict]) -> None:
        tmp = self.fault_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(faults))
        os.replace(tmp, self.fault_file)  # the receiver never reads half a file

    def arm(self, n: int) -> int:
        """Arm invocation n's faults; returns the port the client must be given."""
        self._write([{**f, "digest": self.digest} if self.digest else f
                     for f in for_invocation(self.faults, n, RECEIVER_KINDS)])
        wire = for_invocation(self.faults, n, WIRE_KINDS)
        if not wire:
            return self.receiver.port
        wire = [{**{k: v for k, v in f.items() if k != "invocation"},
                 **({"digest": self.digest} if self.digest and f["kind"] in ONE_SHOT else {})}
                for f in wire]
        self.proxy = start_proxy(self.receiver.port, self.workdir / f"proxy-{n}.jsonl", wire,
                                 self.spawner, self.netns)
        return self.proxy.port

    def disarm(self) -> None:
        self._write([])
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None

    def revive_receiver(self) -> int | None:
        """If the receiver died (an injected crash), restart it on the same store and port;
        returns the dead receiver's exit status, or None when it is alive."""
        status = self.receiver.process.poll()
        if status is None:
            return None
        self.receiver = start_receiver(self.workdir / "store", self.workdir / "receiver.jsonl",
                                       fault_file=self.fault_file, port=self.receiver.port,
                                       spawner=self.spawner, listen_key=str(self.workdir),
                                       netns=self.netns)
        return status

    def servers(self) -> list[Server]:
        return [s for s in (self.receiver, self.proxy) if s is not None]

    def close(self, *others: Server) -> None:
        """Heal, then stop the receiver (and any other servers given) side by side."""
        self._write([])
        stop_all([*self.servers(), *others])
        self.proxy = None
        if self.spawner is not None:
            self.spawner.release(str(self.workdir))
