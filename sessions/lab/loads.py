"""The task's loads in one scenario's lab (task.toml [load.NAME]): evlab's load generator
(sessions/lab/load.py) against a server, started for each invocation before the client and
stopped once it exited, when every request in flight has ended; its records tailed for the
scenario run, which publishes them as evlab's own `load` records (never a server's, never the
client's).

    loads = LabLoads(task, workdir, spawner, scenario.load_rates)
    loads.start(servers.ports(), netns, n); ... loads.stop(); loads.records()
"""

import dataclasses
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from probes.tail import LineTail
from sessions.lab.harness import Server, start_module, stop_all
from sessions.lab.spawner import Spawner
from sessions.spec.task import Task

STOP_GRACE_S = 2.0   # past a request's timeout, for the generator to write its last records


class LabLoads:
    def __init__(self, task: Task, workdir: Path, spawner: Spawner | None,
                 rates: Iterable[tuple[str, float]] = ()):
        """rates: (load name, requests per second) a scenario sets in place of the task's."""
        given = dict(rates)
        self.specs = tuple(dataclasses.replace(spec, rate=given.get(spec.name, spec.rate))
                           for spec in task.loads)
        self.workdir, self.spawner = workdir, spawner
        self.running: list[Server] = []
        self.tails = {spec.name: LineTail(self._path(spec.name)) for spec in self.specs}

    def _path(self, name: str) -> Path:
        return self.workdir / f"load-{name}.jsonl"

    def start(self, ports: dict[str, str], netns: Path | None, n: int = 1) -> None:
        """Each load against its target's own port (never a fault proxy's: the load measures
        the service, not evlab's faults) for invocation n (in its requests' ids); returns once
        each has said it started."""
        for spec in self.specs:
            args = ["--name", spec.name, "--port", ports[f"servers.{spec.target}.port"],
                    "--protocol", spec.protocol, "--request", spec.request,
                    "--rate", str(spec.rate), "--timeout-ms", str(spec.timeout_ms),
                    "--invocation", str(n)]
            self.running.append(start_module("sessions.lab.load", args, self._path(spec.name),
                                             self.spawner, netns=netns,
                                             ready="load_started"))

    def stop(self) -> None:
        """Every load stopped, its requests in flight ended (by their timeout at most)."""
        wait = max((s.timeout_ms for s in self.specs), default=0) / 1000 + STOP_GRACE_S
        stop_all(self.running, wait)
        self.running = []

    def records(self) -> Iterator[dict]:
        """The loads' records written since the last call."""
        for tail in self.tails.values():
            for line in tail.lines():
                if line.strip():
                    yield json.loads(line)
