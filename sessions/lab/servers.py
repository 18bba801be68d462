"""A scenario's servers, as its task names them (task.toml [servers.*]), in the lab's network:
started before the first invocation, their records tailed by name, faults armed per invocation
and healed, a server that died (an injected crash) started again on its state and port, all
stopped side by side at teardown, also on errors.

Faults: a server with `faults = true` reads the invocation's server faults from its fault file
(read when a transfer starts); wire faults get a fault proxy in front of it for that invocation,
and the client is given the proxy's port.

    servers = LabServers(task, workdir, spawner, netns, values, faults, digest).start()
    servers.arm(n); servers.client_port(name); servers.disarm(); servers.close()

An operable server (`operable = true`, issue 46; `operable=` an Operable) is started in the
scenario's service pid namespace as the sandbox user (probes/boundary/servicens.py), a plain
subprocess through its prefix, never forked from the spawner and given no record and no fault
file: the lab picks its port, and writes its `listening` record itself once the port answers.
Its pid (`pids()`) is the service's host pid, as the kernel's evidence names it.
"""

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from probes.boundary.netns import run_in
from probes.boundary.sandbox import SERVICE_DIR, Sandbox, service_folder
from probes.boundary.servicens import ServiceNamespace
from probes.proc.sockets import busy_ports, listening, listens_on
from probes.tail import LineTail
from sessions.lab.harness import (
    START_TIMEOUT,
    Server,
    ServerExited,
    ServerStartError,
    start_proxy,
    start_server,
    stop_all,
)
from sessions.lab.lifecycle import doomed, running, wait_gone
from sessions.lab.ports import answers, free_port
from sessions.lab.spawner import Spawner
from sessions.spec.scenario_faults import ONE_SHOT, SERVER_KINDS, WIRE_KINDS, for_invocation
from sessions.spec.task import Program, ServerSpec, Task, TaskError
from sessions.spec.template import expand
from sessions.stream.events import ServerRecord


@dataclass
class Operable:
    """Where a scenario's operable servers run: its service namespace, the sandbox, the
    service's folder (bound at SERVICE_DIR) and the task's files staged for the sandbox user."""

    namespace: ServiceNamespace
    sandbox: Sandbox
    folder: Path
    programs: list[tuple[Path, Path]]


class LabServers:
    def __init__(self, task: Task, workdir: Path, spawner: Spawner | None, netns: Path | None,
                 values: dict[str, str], faults=(), digest: str | None = None,
                 operable: Operable | None = None):
        self.task, self.workdir, self.spawner, self.netns = task, workdir, spawner, netns
        self.values = values       # host, task, state and the inputs' paths
        self.faults = faults
        self.digest = digest       # the watched input's: faults strike only transfers of it
        self.fault_file = workdir / "faults.json"
        self.running: dict[str, Server] = {}
        self.proxy: Server | None = None
        self.tails: dict[str, LineTail] = {}
        self.operable = operable
        self.down: set[str] = set()   # servers that could not be started again, until the
                                      # client's invocation is over (ScenarioRun clears it)

    def start(self, first: bool = False) -> "LabServers":
        """Start every server (those started stopped again if one cannot). first: the
        session's first lab, where a server that dies before it listens is the task's mistake
        (it never served: no attempt can be valid), not an invalid attempt."""
        self.fault_file.write_text("[]")
        try:
            for spec in self.task.servers:
                try:
                    self.running[spec.name] = self._start(spec, 0)
                except ServerExited as e:
                    if not first:
                        raise
                    raise TaskError(f"task {self.task.id}: server \"{spec.name}\" exited "
                                    f"(status {e.status}) before it listened: {e.last}") from None
                self.tails[spec.name] = LineTail(self._events(spec.name))
        except BaseException:
            self.close()
            raise
        return self

    def _events(self, name: str) -> Path:
        return self.workdir / f"{name}.jsonl"

    def _start(self, spec: ServerSpec, port: int) -> Server:
        if spec.operable and self.operable is not None:
            return self._start_operable(spec, self.operable, port)
        values = {**self.values, "events": str(self._events(spec.name)), "port": str(port),
                  "faults": str(self.fault_file), **self.ports()}
        argv = [expand(a, values) for a in spec.program.args]
        # a built-in server that restarts keeps its port bound while it is down: the spawner
        # holds its listening socket (a task's own command picks its port again from {port})
        listen = ((self._key(spec.name), port)
                  if self.spawner is not None and spec.restart and spec.program.module else None)
        return start_server(spec.program.module, spec.program.command, argv,
                            self._events(spec.name), self.spawner, listen, self.netns,
                            self.workdir)

    def _start_operable(self, spec: ServerSpec, op: Operable, port: int) -> Server:
        """As the sandbox user in the service namespace; its port picked by the lab (or its
        old one), its `listening` written by the lab once the port answers."""
        if port and run_in(self.netns, listening, port):   # started again: it is dead, so
            raise ServerStartError(f"{spec.name}: port {port} is held by another process")
        port = port or run_in(self.netns, free_port)
        values = {**self.values, "port": str(port), "service": SERVICE_DIR, **self.ports()}
        argv = [*spec.program.command, *(expand(a, values) for a in spec.program.args)]
        events = self._events(spec.name)
        stderr = events.with_suffix(".stderr")
        with open(stderr, "ab") as err:
            proc = subprocess.Popen(
                [*op.namespace.argv(), *op.sandbox.wrap(argv, None, programs=op.programs,
                                                        service=op.folder)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
        server = Server(proc, events, port)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not run_in(self.netns, answers, port):
                status = proc.poll()
                if status is not None:
                    lines = stderr.read_text(errors="replace").strip().splitlines()
                    raise ServerExited(spec.name, status, lines[-1] if lines else "no message")
                if time.monotonic() > deadline:
                    raise ServerStartError(f"{spec.name} did not answer on port {port} within "
                                           f"{START_TIMEOUT} s")
                time.sleep(0.005)
            if not listens_on(_tree(proc.pid), port):   # what the client left answers
                raise ServerStartError(f"{spec.name}: port {port} is held by another process")
            server.pid = op.namespace.started(proc.pid) or proc.pid
        except BaseException:
            server.kill()
            raise
        with open(events, "a") as f:   # the lab's words, not the service's
            f.write(json.dumps({"t_ns": time.monotonic_ns(), "event": "listening",
                                "port": port, "pid": server.pid, "by": "lab"}) + "\n")
        return server

    def _key(self, name: str) -> str:
        return f"{self.workdir}:{name}"

    def ports(self) -> dict[str, str]:
        """servers.NAME.port for each server started so far: its own port."""
        return {f"servers.{name}.port": str(s.port) for name, s in self.running.items()}

    @property
    def endpoint(self) -> Server | None:
        spec = self.task.endpoint
        return self.running.get(spec.name) if spec is not None else None

    def client_port(self, name: str) -> int:
        """The port the client is given for a server: the proxy's while one stands in front."""
        spec = next(s for s in self.task.servers if s.name == name)
        if self.proxy is not None and spec.faults:
            return self.proxy.port
        return self.running[name].port

    def roles(self) -> dict[str, dict]:
        """What ScenarioStarted records of each server: its role and port (0: not started)."""
        return {s.name: {"role": s.role, "port": self.running[s.name].port
                         if s.name in self.running else 0} for s in self.task.servers}

    def _faulted(self) -> Server | None:
        spec = self.task.faulted
        return self.running.get(spec.name) if spec is not None else None

    def _bind(self) -> str:
        """The faulted server's bind pattern with the watched input's digest in it; "" when it
        has none, or names a digest the lab does not have (a one-shot fault then strikes the
        first connection at its offset)."""
        spec = self.task.faulted
        if spec is None or not spec.bind or ("{digest}" in spec.bind and not self.digest):
            return ""
        return spec.bind.replace("{digest}", self.digest or "")

    def _write(self, faults: list[dict]) -> None:
        tmp = self.fault_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(faults))
        os.replace(tmp, self.fault_file)  # the server never reads half a file

    def arm(self, n: int) -> None:
        """Arm invocation n's faults (a wire fault's proxy tailed as `proxy`)."""
        self._write([{**f, "digest": self.digest} if self.digest else f
                     for f in for_invocation(self.faults, n, SERVER_KINDS)])
        wire = for_invocation(self.faults, n, WIRE_KINDS)
        target = self._faulted()
        if not wire or target is None:
            return
        bind = self._bind()
        wire = [{**{k: v for k, v in f.items() if k != "invocation"},
                 **({"bind": bind} if bind and f["kind"] in ONE_SHOT else {})}
                for f in wire]
        self.proxy = start_proxy(target.port, self.workdir / f"proxy-{n}.jsonl", wire,
                                 self.spawner, self.netns)
        self.tails["proxy"] = LineTail(self.proxy.events_path)

    def disarm(self) -> None:
        """Heal: no fault outlives its invocation."""
        self._write([])
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None

    def revive(self, scenario: str, n: int) -> Iterator[ServerRecord]:
        """Each server that restarts and has died (an injected crash, or the client's act),
        started again on its state and port: the lab's record `NAME_restarted` (the dead one's
        exit status, its port and pid; `failed`: why it could not be started again). One that
        could not is left down (`down`) until the client's invocation is over: what the client
        left may hold its port (its own nginx, or the service's orphaned worker, its master
        killed); whose doing that is, the judge reads from the kernel's record of the death."""
        for spec in self.task.servers:
            server = self.running.get(spec.name)
            if not spec.restart or server is None or spec.name in self.down:
                continue
            status = server.process.poll()
            if spec.operable and status is None and doomed(server.pid):
                wait_gone([server.pid], 1.0)   # a signal the client sent as it ended, yet to act
            if spec.operable and (status is not None or not running(server.pid)):
                # the service and its launcher end a moment apart, either first: both gone,
                # its port is free, or what the client left holds it
                wait_gone([server.pid], 1.0)
                try:
                    status = server.process.wait(1)
                except subprocess.TimeoutExpired:
                    server.kill()
                    status = server.process.returncode
            if status is None:
                continue
            fields: dict[str, int | str] = {"exit_status": status, "port": server.port,
                                            "pid": server.pid}
            try:
                self.running[spec.name] = self._start(spec, server.port)
            except ServerStartError as e:
                self.down.add(spec.name)
                fields["failed"] = str(e)
            yield ServerRecord(time.monotonic_ns(), scenario, n, "harness",
                               f"{spec.name}_restarted", fields)

    def program_values(self) -> dict[str, str]:
        """What a program run after the servers started may name (a verifier, a check)."""
        return {**self.values, "faults": str(self.fault_file), **self.ports()}

    def busy_sockets(self) -> bool:
        """Has a server that settles by its sockets a client connection it has not closed?
        (a real server's log has no connection records: its line is written before it closes)"""
        for spec in self.task.servers:
            server = self.running.get(spec.name)
            if spec.settle == "sockets" and server is not None and busy_ports(
                    server.pid, {server.port}):
                return True
        return False

    def pids(self) -> dict[str, int]:
        return {name: s.pid for name, s in self.running.items()}

    def close(self, *others: Server) -> None:
        """Heal, then stop every server (and any other given) side by side."""
        self._write([])
        if self.operable is not None:   # everything in its namespace ends with its init
            self.operable.namespace.close()
        stop_all([*self.running.values(), *[p for p in (self.proxy,) if p], *others])
        self.proxy = None
        if self.spawner is not None:
            for spec in self.task.servers:
                self.spawner.release(self._key(spec.name))

    def keep_records(self, out_dir: Path, scenario: str) -> None:
        """Each server's record, copied beside the session's outputs."""
        for spec in self.task.servers:
            record = self._events(spec.name)
            if record.exists():
                shutil.copy(record, out_dir / f"{scenario}.{spec.name}.jsonl")


def _tree(pid: int) -> list[int]:
    """A launcher and every process below it: where the service it started is."""
    try:
        return [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return [pid]


def operable_for(task: Task, boundary, s, home: Path | None,
                 network: Path | None) -> Operable | None:
    """A scenario's service namespace, folder (home/service) and staged task files when its
    task has an operable server (closed with the servers); None without one, or unconfined
    (the servers then run as ever, the folder root's). boundary: sessions.lab.boundary's."""
    box = boundary.sandbox
    if home is None or not any(spec.operable for spec in task.servers):
        return None
    if box is None:
        service_folder(home).mkdir(exist_ok=True)
        return None
    folder = box.workdir(service_folder(home))
    namespace = ServiceNamespace.create(network)
    try:
        boundary.serve(s, namespace, folder)
        return Operable(namespace, box, folder, box.stage([task.folder], home / "service-program"))
    except BaseException:
        namespace.close()
        raise


def program_argv(program: Program, values: dict[str, str]) -> list[str]:
    return [expand(a, values) for a in program.args]

