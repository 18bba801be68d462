"""One scenario's run, from set-up to teardown, and everything it has running meanwhile.

A network of its own (probes/boundary/netns.py), in it the task's inputs and a fresh state for
its servers (sessions/lab/servers.py: the task's, a wire-fault proxy when armed, an operable
service's namespace), a packet capture on their ports, ambient noise if asked; the verifier,
then each invocation against the same servers, each followed by the verifier; for a grading
attempt the task's lifecycle checks; then teardown in `finally`: an exception, Ctrl-C or
SIGTERM leaves no process, port, cgroup, network, mount or temp directory.

    ScenarioRun(parts, invocations, scenario).run()
"""

import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path

from probes.boundary.netns import HostNetwork, Network
from probes.boundary.sandbox import unmount_under
from probes.interrupts import deferred
from probes.owned_tmp import make_owned_dir
from probes.packets.capture import PacketCapture
from probes.tail import LineTail
from sessions.lab.caps import Caps
from sessions.lab.client_files import TARGET_FS_BYTES, ClientFiles
from sessions.lab.harness import ServerStartError, run_program
from sessions.lab.invocation import Invocation, Invocations
from sessions.lab.lifecycle import cleanup_check, kill_leftovers
from sessions.lab.loads import LabLoads
from sessions.lab.noise import Noise
from sessions.lab.observations import (
    counter_sample,
    final_sample,
    last_object,
    on_session_clock,
    packet_event,
    packet_stats,
    server_event,
)
from sessions.lab.operations import watch_servers
from sessions.lab.parts import HOST, LabParts
from sessions.lab.programs import blocked_checks, lifecycle_checks, verifier_result
from sessions.lab.servers import LabServers, operable_for, program_argv
from sessions.lab.target_faults import TargetFaults
from sessions.lab.teardown import run_every
from sessions.spec.digest import sha256_of
from sessions.spec.named_paths import own_digest
from sessions.spec.scenario import Scenario
from sessions.stream.events import PhaseChanged, ScenarioStarted, ServerRecord

SETTLE_S = 3.0          # how long to wait for the servers to finish with a client's connections
SETTLE_POLL_S = 0.002   # how often the records are read while a connection is still open
OPEN_DELTA = {"connection_opened": 1, "connection_closed": -1}   # a server's, per record
_LABS = itertools.count(1)   # lab networks are named per process (their owner tag says which)


class ScenarioRun:
    def __init__(self, parts: LabParts, invocations: Invocations, scenario: Scenario):
        self.parts, self.invocations, self.scenario = parts, invocations, scenario
        self.task = parts.task
        self.roles = {spec.name: spec.role for spec in self.task.servers}   # by server name
        self.roles.update(files="files", lab="lab")
        self.wall_clock = {spec.name for spec in self.task.servers if spec.clock == "wall"}
        self.stream = parts.stream
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{scenario.id.replace('@', '-')}-",
                                             dir=parts.tmp))
        self.files = ClientFiles(self.task, parts.boundary)   # its inputs and outputs
        self.target_faults: TargetFaults | None = None   # the lab's own, on its target
        self.client_home: Path | None = None  # the client's own dir: its cwds and inputs
        self.home: Path | None = None         # in it, what the client may see (a sandbox tmpfs)
        self.lab_records: list[dict] = []     # the task's states' and steps' own words
        self.network: Network = HostNetwork()   # the attempt's own, once set up
        self.servers: LabServers | None = None
        self.loads = LabLoads(self.task, self.workdir, parts.spawner, scenario.load_rates)
        self.capture: PacketCapture | None = None
        self.noise: Noise | None = None
        self.caps = Caps()                # the current invocation's
        self.open_connections = 0
        self.started = False              # ScenarioStarted published
        self.runs: list[Invocation] = []  # its invocations so far

    @property
    def tails(self) -> dict[str, LineTail]:
        return self.servers.tails if self.servers is not None else {}

    @property
    def server_pids(self) -> dict[str, int]:
        return self.servers.pids() if self.servers is not None else {}

    def run(self) -> None:
        s = self.scenario
        try:
            self._phase("setup")
            self.network = self.parts.boundary.network(f"lab{next(_LABS)}")
            # Fresh state per scenario, and nothing of evlab's within the client's reach: its
            # inputs and working directories live apart from the servers' state and records.
            self.client_home = make_owned_dir("evlab-client-")
            self.home = self.parts.boundary.make_home(self.client_home, s)
            self.files.make(self.home)
            self.target_faults = TargetFaults(s.faults, self.files.target,
                                              self.parts.collector, TARGET_FS_BYTES)
            try:
                self._run()
            except ServerStartError as e:
                if not s.lifecycle:
                    raise
                self._attempt_blocked(str(e))  # e.g. a port clash: not the client's doing
        finally:
            # An interrupt that lands here (the run's own, right as the scenario ends) is
            # raised once everything is gone, never between the teardown's phase and its steps.
            with deferred():
                self._phase("teardown")
                run_every(self._teardown())
                self._phase("done")

    def _values(self) -> dict[str, str]:
        """What the task's servers and programs may name: the lab's words, inputs, outputs."""
        return {"host": HOST, "task": str(self.task.folder), "state": str(self.workdir), **(
            self.scenario.words), "service": f"{self.client_home}/service", **self.files.values()}

    def _run(self) -> None:
        self._start_servers()
        self._publish_started()
        self.records(0)  # the servers' start-up records belong to set-up
        self._step(1, self.scenario.before_first)   # what the first invocation finds
        self._verify(0)
        for n in range(1, self.task.invocations + 1):
            self._step(n, self.scenario.between if n > 1 else "")
            self._invoke(n)
            self._verify(n)
        if self.scenario.lifecycle and self.task.lifecycle is not None:
            self._lifecycle()
        self._phase("judging")

    def _attempt_blocked(self, why: str) -> None:
        """A server of the attempt (the task's, a wire proxy) could not start: recorded as
        harness evidence and judged (an invalid attempt), so a replay re-derives it."""
        if not self.started:
            self._publish_started()
        n = max(1, self.runs[-1].n if self.runs else 0)
        self.stream.publish(ServerRecord(time.monotonic_ns(), self.scenario.id, n, "harness",
                                         "start_failed", {"error": why}))
        self._phase("judging")

    def _phase(self, phase: str, n: int = 0) -> None:
        self.stream.publish(PhaseChanged(time.monotonic_ns(), self.scenario.id, phase, n))

    def _start_servers(self) -> None:
        s, parts = self.scenario, self.parts
        if s.state:   # the task's program makes the state the scenario starts from
            state = self.task.states[s.state]
            said = run_program(state.module, state.command, program_argv(state, self._values()),
                               self.workdir / "states", parts.spawner, self.network.path)
            self.lab_records.append({"event": "state", "t_ns": time.monotonic_ns(),
                                     "name": s.state, **last_object(said)})
        net = self.network
        digest = sha256_of(f) if (f := self.files.source) and f.is_file() else None  # a tree: no
        operable = operable_for(self.task, parts.boundary, s, self.client_home, net.path)
        self.servers = LabServers(self.task, self.workdir, parts.spawner, net.path,
                                  self._values(), s.faults, digest, operable).start(
                                      first=not parts.servers_listened)
        parts.servers_listened = True
        if parts.packets_mode == "on":
            capture = PacketCapture(pcap_path=parts.out_dir / f"{s.id}.pcap")
            self.capture = net.run(capture.start)   # on the lab's loopback
            self.capture.set_ports({server.port for server in self.servers.running.values()})
        kinds = tuple(dict.fromkeys(parts.noise + s.noise))
        if kinds:
            self.noise = Noise(self.workdir / "noise", self._endpoint_port(), s.client,
                               kinds, net).start()

    def _endpoint_port(self) -> int:
        endpoint = self.servers.endpoint if self.servers is not None else None
        return endpoint.port if endpoint is not None else 0

    def _publish_started(self) -> None:
        """ScenarioStarted: with port 0 for a server that did not start."""
        s = self.scenario
        roles: dict[str, dict] = self.servers.roles() if self.servers is not None else {
            spec.name: {"role": spec.role, "port": 0} for spec in self.task.servers}
        decoy = next((r["port"] for r in roles.values() if r["role"] == "decoy"), 0)
        self.stream.publish(ScenarioStarted(
            time.monotonic_ns(), s.id, str(s.client), s.client_sha256(), s.expect_fail,
            s.expect_pass, s.faults, self._endpoint_port(), decoy,
            self.files.source.stat().st_size if self.files.source
            and self.files.source.is_file() else 0,
            str(s.file), s.expect_invalid, self.noise.kinds if self.noise else (), s.attempt,
            s.base, s.client_name, self.network.name,
            {f: own_digest(f) or "missing" for f in s.own_files}, roles,
            self.task.display()))
        self.started = True

    def _step(self, n: int, name: str) -> None:
        """The task's step `name` ("": none) before invocation n (the remote changed, say), the
        servers up; what it says of itself is a `lab` record of invocation n, the client's
        writes before it are not."""
        if not name or self.servers is None:
            return
        step = self.task.steps[name]
        said = run_program(step.module, step.command,
                           program_argv(step, self.servers.program_values()),
                           self.workdir / "steps", self.parts.spawner, self.network.path)
        self.lab_records.append({"event": "step", "t_ns": time.monotonic_ns(), "name": name,
                                 "before": n, **last_object(said)})

    def _lab_records(self, n: int) -> None:
        """What the task's states and steps said they did; the outputs folder's changes so far
        are theirs (or an earlier invocation's, already read), never the next invocation's."""
        for record in self.lab_records:
            self.stream.publish(server_event("lab", record, self.scenario.id, n))
        self.lab_records.clear()
        for record in self.files.begin():   # what the target holds as the invocation begins
            self.stream.publish(server_event("files", record, self.scenario.id, n))

    def _invoke(self, n: int) -> None:
        s, parts, servers = self.scenario, self.parts, self.servers
        assert servers is not None and self.home is not None
        inv = Invocation(parts, s, n)
        self.caps = Caps()
        self.runs.append(inv)
        self.invocations.own(inv)
        self._phase("invocation", n)
        servers.arm(n)
        self._lab_records(n)
        endpoint = self.task.endpoint
        port = servers.client_port(endpoint.name) if endpoint is not None else 0
        if servers.proxy is not None and self.capture is not None:
            self.capture.add_ports({port})
        argv = s.argv(self.files.fill(servers, s.words))
        if self.target_faults is not None:
            inv.poll_s = self.target_faults.arm(n, inv.id) or inv.poll_s
        cwd = parts.boundary.workdir(self.home / f"run-{n}")
        # the servers' processes while it runs: their ends and the client's signals to them
        watch_servers(parts.collector, self.stream, s.id, n, inv.id, servers.pids())
        self.loads.start(servers.ports(), self.network.path, n)
        inv.launch(argv, cwd, self.files.source, self.home / "inputs", port, self.network,
                   behind=self._endpoint_port() if servers.proxy is not None else None,
                   outputs=self.files.folder, target=self.files.target)
        inv.wait(self)
        self.revive_servers(n)   # the load sees a server the client ended down until it is back
        self.loads.stop()
        self._settle(inv)
        if s.lifecycle:
            self.pump(inv)
            residue = self.workdir / self.task.residue_dir if self.task.residue_dir else None
            self.stream.publish(cleanup_check(s.id, n, inv.pid, inv.tasks, cwd, residue,
                                              self.task.residue_keep, tuple(inv.left_at_exit),
                                              frozenset(inv.killed)))
        self.pump(inv)
        for event in parts.boundary.leave(parts.collector, s.id, n, inv.id, self.home):
            self.stream.publish(event)
        servers.down.clear()   # what the client left is gone: a server it kept from starting
        self.revive_servers(n)   # again (its port held) starts now, if it can
        servers.disarm()  # heal: no fault outlives its invocation
        for record in self.target_faults.disarm(inv) if self.target_faults else ():
            self.stream.publish(server_event("lab", record, s.id, n))
        final = parts.collector.finish(inv.id)
        self.pump(inv)
        parts.collector.unwatch_processes(inv.id)
        servers.tails.pop("proxy", None)
        for event in self.caps.records(s.id, n):
            self.stream.publish(event)
        self.stream.publish(final_sample(final, s.id, n, parts.collector.overhead()))
        if self.capture is not None:
            self.stream.publish(packet_stats(self.capture.stats(), s.id, n))

    def pump(self, inv: Invocation) -> None:
        """What the observers saw of the invocation so far: counters, kernel events, packets,
        the servers' records."""
        snap = self.parts.collector.snapshot(inv.id)
        self.stream.publish(counter_sample(snap, self.scenario.id, inv.n))
        self.invocations.pump()
        if self.capture is not None:
            for p in self.capture.drain():
                if self.caps.take("packets"):
                    self.stream.publish(packet_event(p, self.scenario.id, inv.n))
        self.records(inv.n)

    def records(self, n: int) -> None:
        roles = self.roles
        watch = self.files.watch
        if watch is not None:   # in set-up (n = 0): the task's state, not the client
            for record in watch.drain() if n else ():
                if self.caps.take("files"):
                    self.stream.publish(server_event("files", record, self.scenario.id, n))
        for server, tail in list(self.tails.items()):
            for line in tail.lines():
                if not line.strip():
                    continue
                keep = self.caps.take(server, roles.get(server, server))
                # settling counts the servers' connections, kept or not; past the cap only a
                # line that may be one is parsed (by its event: a client's text in a record's
                # field, a verb named connection_closed say, must not count)
                counted = server != "proxy" and b'"connection_' in line
                if not (keep or counted):
                    continue
                try:
                    parsed = json.loads(line)
                except ValueError:
                    parsed = None
                # a task's server wrote something else
                record = parsed if isinstance(parsed, dict) else {
                    "event": "malformed", "line": line[:200].decode(errors="replace")}
                if counted:
                    self.open_connections += OPEN_DELTA.get(str(record.get("event")), 0)
                if keep:
                    record = on_session_clock(record) if server in self.wall_clock else record
                    self.stream.publish(server_event(server, record, self.scenario.id, n))
        for record in self.loads.records():
            self.stream.publish(server_event("load", record, self.scenario.id, n))

    def strike(self, inv: Invocation) -> None:
        """The lab's faults on the target while the client runs (a kill once it wrote its
        bytes)."""
        record = self.target_faults.strike(inv) if self.target_faults else None
        if record is not None:
            self.stream.publish(server_event("lab", record, self.scenario.id, inv.n))

    def revive_servers(self, n: int) -> None:
        """A server that died (an injected crash, the client's act) is started again, or left
        down if it cannot be ("failed"): its connections will never close either way."""
        if self.servers is None:
            return
        for record in self.servers.revive(self.scenario.id, n):
            self.open_connections = 0
            self.stream.publish(record)

    def _settle(self, inv: Invocation) -> None:
        """Records of invocation n land there, the capture reads its last segments, a server the
        client ended as it exited starts again (SETTLE_S bounds a connection left open)."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            self.parts.check_cancel()
            self.revive_servers(inv.n)
            self.records(inv.n)
            busy = self.servers is not None and self.servers.busy_sockets()
            if self.open_connections <= 0 and not busy or time.monotonic() > deadline:
                break
            time.sleep(SETTLE_POLL_S)
        if self.capture is not None:
            self.capture.sync()
        self.pump(inv)

    def _lifecycle(self) -> None:
        """After the invocations: SIGKILL the endpoint and start it again on its state, then
        the task's lifecycle checks in the lab's network."""
        servers = self.servers
        assert servers is not None
        self._phase("lifecycle")
        try:
            if servers.endpoint is not None:
                servers.endpoint.kill()
                self.revive_servers(0)
        except ServerStartError as e:
            checks = blocked_checks(self.task, self.scenario.id, str(e))
        else:
            checks = lifecycle_checks(self.task, servers, self.scenario.id, self.workdir,
                                      self.parts.spawner, self.network.path)
        for check in checks:
            self.stream.publish(check)
        self.records(0)

    def _verify(self, n: int) -> None:
        if n:
            self._phase("verify", n)
        if self.servers is not None and self.task.verifier is not None:   # a task may have none
            self.stream.publish(verifier_result(self.task, self.servers, self.scenario.id, n,
                                                self.workdir, self.parts.spawner,
                                                self.network.path))

    def _teardown(self):
        parts, last = self.parts, (self.runs[-1] if self.runs else None)
        if last is not None:
            yield last.kill
            # Whatever the last client left running (also when interrupted mid-invocation),
            # found by its session, the kernel's view of its tree and its cgroup.
            yield lambda: kill_leftovers(last.pid, lambda: parts.boundary.tasks(
                parts.collector, last.id)) if last.pid else None
        yield lambda: parts.boundary.forget(self.scenario)
        if last is not None:
            yield lambda: parts.boundary.abandon(parts.collector, last.id)
            yield lambda: parts.collector.unwatch_processes(last.id)   # not the lab's stop
        yield from (part.stop for part in (self.noise, self.capture, self.loads) if part)
        servers = self.servers
        if servers is not None:   # every server and a proxy stop side by side
            yield servers.close
        yield self.network.remove   # after every process and socket of it is gone
        if servers is not None:
            yield lambda: servers.keep_records(self.parts.out_dir, self.scenario.id)
        yield self.files.close
        yield lambda: self.invocations.disown(self.runs)
        yield lambda: shutil.rmtree(self.workdir, ignore_errors=True)
        yield self._remove_client_home

    def _remove_client_home(self) -> None:
        if self.client_home is not None:
            unmount_under(self.client_home)
            shutil.rmtree(self.client_home, ignore_errors=True)
