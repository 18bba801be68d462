"""One scenario's run, from set-up to teardown, and everything it has running meanwhile.

A network of its own (probes/boundary/netns.py), in it a fresh store, receiver and decoy (and a
wire-fault proxy when armed), a packet capture on their ports, ambient noise if asked;
invocation 1 and the verifier, invocation 2 against the same receiver state and the verifier;
for a grading attempt the lifecycle checks (durability, restore); then teardown in `finally`,
so an exception, Ctrl-C or SIGTERM leaves no process, port, cgroup, network, mount or temp
directory.

    ScenarioRun(parts, scenario).run()
"""

import functools
import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path

from fixture.backup.receiver import sha256_of
from fixture.backup.verifier import verify
from fixture.harness import Server, ServerStartError, start_decoy
from fixture.source import SIZE, write_source, write_stale_backup
from probes.boundary.netns import HostNetwork, Network
from probes.boundary.sandbox import unmount_under
from probes.interrupts import deferred
from probes.owned_tmp import make_owned_dir
from probes.packets.capture import PacketCapture
from probes.tail import LineTail
from sessions.lab.caps import Caps
from sessions.lab.injector import Injector
from sessions.lab.invocation import Invocation, Invocations
from sessions.lab.lifecycle import (
    cleanup_check,
    durability_check,
    kill_leftovers,
    restore_check,
)
from sessions.lab.noise import Noise
from sessions.lab.observations import (
    counter_sample,
    final_sample,
    packet_event,
    packet_stats,
    server_event,
)
from sessions.lab.parts import HOST, LabParts
from sessions.lab.teardown import run_every
from sessions.spec.scenario import Scenario
from sessions.stream.events import (
    LifecycleCheck,
    PhaseChanged,
    ScenarioStarted,
    ServerRecord,
    VerifierResult,
)

SETTLE_S = 3.0          # how long to wait for the receiver to finish with a client's connections
SETTLE_POLL_S = 0.002   # how often the records are read while a connection is still open
OPEN_DELTA = {"connection_opened": 1, "connection_closed": -1}   # the receiver's, per record
_LABS = itertools.count(1)   # lab networks are named per process (their owner tag says which)


class ScenarioRun:
    def __init__(self, parts: LabParts, invocations: Invocations, scenario: Scenario):
        self.parts, self.invocations, self.scenario = parts, invocations, scenario
        self.stream = parts.stream
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{scenario.id.replace('@', '-')}-",
                                             dir=parts.tmp))
        self.source = parts.source       # the client's own copy, once its home exists
        self.client_home: Path | None = None  # the client's own dir: its cwds and source copy
        self.home: Path | None = None         # in it, what the client may see (a sandbox tmpfs)
        self.network: Network = HostNetwork()   # the attempt's own, once set up
        self.injector: Injector | None = None
        self.decoy: Server | None = None
        self.capture: PacketCapture | None = None
        self.noise: Noise | None = None
        self.tails: dict[str, LineTail] = {}
        self.caps = Caps()                # the current invocation's
        self.open_connections = 0
        self.started = False              # ScenarioStarted published
        self.runs: list[Invocation] = []  # its invocations so far

    @property
    def receiver_pid(self) -> int:
        return self.injector.receiver.pid if self.injector else 0

    def run(self) -> None:
        s = self.scenario
        try:
            self._phase("setup")
            self.network = self.parts.boundary.network(f"lab{next(_LABS)}")
            # Fresh state per scenario, and nothing of evlab's within the client's reach: its
            # source copy and working directories live apart from the store and records.
            self.client_home = make_owned_dir("evlab-client-")
            self.home = self.parts.boundary.make_home(self.client_home, s)
            (self.home / "source").mkdir(mode=0o755)
            self.source = write_source(self.home / "source" / "source.bin")
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

    def _run(self) -> None:
        self._start_servers()
        self._publish_started()
        self.records(0)  # the servers' start-up records belong to set-up
        self._verify(0)
        for n in (1, 2):
            self._invoke(n)
            self._verify(n)
        if self.scenario.lifecycle:
            self._lifecycle()
        self._phase("judging")

    def _attempt_blocked(self, why: str) -> None:
        """A server of the attempt (receiver, decoy, wire proxy) could not start: recorded as
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
        if s.store == "stale":
            write_stale_backup(self.workdir / "store")
        net = self.network
        self.injector = Injector.start(s.faults, self.workdir, parts.spawner, net.path,
                                       sha256_of(self.source))
        self.decoy = start_decoy(self.workdir / "decoy.jsonl", parts.spawner, net.path)
        self.tails = {"receiver": LineTail(self.injector.receiver.events_path),
                      "decoy": LineTail(self.decoy.events_path)}
        if parts.packets_mode == "on":
            capture = PacketCapture(pcap_path=parts.out_dir / f"{s.id}.pcap")
            self.capture = net.run(capture.start)   # on the lab's loopback
            self.capture.set_ports({self.injector.receiver.port, self.decoy.port})
        kinds = tuple(dict.fromkeys(parts.noise + s.noise))
        if kinds:
            self.noise = Noise(self.workdir / "noise", self.injector.receiver.port, s.client,
                               kinds, net).start()

    def _publish_started(self) -> None:
        """ScenarioStarted: with port 0 for a server that did not start."""
        s = self.scenario
        receiver = self.injector.receiver.port if self.injector else 0
        self.stream.publish(ScenarioStarted(
            time.monotonic_ns(), s.id, str(s.client), s.client_sha256(), s.expect_fail,
            s.expect_pass, s.faults, receiver, self.decoy.port if self.decoy else 0, SIZE,
            str(s.file), s.expect_invalid, self.noise.kinds if self.noise else (), s.attempt,
            s.base, s.client_name, self.network.name,
            {f: sha256_of(Path(f)) or "missing" for f in s.own_files}))
        self.started = True

    def _invoke(self, n: int) -> None:
        s, parts, injector = self.scenario, self.parts, self.injector
        assert injector is not None and self.decoy is not None and self.home is not None
        inv = Invocation(parts, s, n)
        self.caps = Caps()
        self.runs.append(inv)
        self.invocations.own(inv)
        self._phase("invocation", n)
        port = injector.arm(n)
        if injector.proxy is not None:
            self.tails["proxy"] = LineTail(injector.proxy.events_path)
            if self.capture is not None:
                self.capture.add_ports({port})
        argv = s.argv(HOST, port, self.source, self.decoy.port)
        cwd = parts.boundary.workdir(self.home / f"run-{n}")
        inv.launch(argv, cwd, self.source, port, self.network,
                   behind=injector.receiver.port if injector.proxy is not None else None)
        inv.wait(self)
        self._settle(inv)
        if s.lifecycle:
            self.pump(inv)
            self.stream.publish(cleanup_check(s.id, n, inv.pid, inv.tasks, cwd,
                                              self.workdir / "store", tuple(inv.left_at_exit),
                                              frozenset(inv.killed)))
        self.pump(inv)
        for event in parts.boundary.leave(parts.collector, s.id, n, inv.id, self.home):
            self.stream.publish(event)
        injector.disarm()  # heal: no fault outlives its invocation
        final = parts.collector.finish(inv.id)
        self.pump(inv)
        self.tails.pop("proxy", None)
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
        for server, tail in self.tails.items():
            for line in tail.lines():
                if not line.strip():
                    continue
                keep = self.caps.take(server)
                # settling counts the receiver's connections, kept or not; past the cap only a
                # line that may be one is parsed (by its event: a client's text in a record's
                # field, a verb named connection_closed say, must not count)
                counted = server == "receiver" and b'"connection_' in line
                if not (keep or counted):
                    continue
                record = json.loads(line)
                if counted:
                    self.open_connections += OPEN_DELTA.get(str(record.get("event")), 0)
                if keep:
                    self.stream.publish(server_event(server, record, self.scenario.id, n))

    def revive_receiver(self, n: int) -> None:
        assert self.injector is not None
        status = self.injector.revive_receiver()
        if status is not None:  # an injected crash: its connections will never close
            self.open_connections = 0
            self.stream.publish(ServerRecord(
                time.monotonic_ns(), self.scenario.id, n, "harness", "receiver_restarted",
                {"exit_status": status, "port": self.injector.receiver.port}))

    def _settle(self, inv: Invocation) -> None:
        """Let the receiver finish with the client's connections so records land in invocation
        n, and the capture read their last segments: waits on records and the capture, not on
        a fixed time (SETTLE_S bounds it for a connection the client left open)."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            self.parts.check_cancel()
            self.records(inv.n)
            if self.open_connections <= 0 or time.monotonic() > deadline:
                break
            time.sleep(SETTLE_POLL_S)
        if self.capture is not None:
            self.capture.sync()
        self.pump(inv)

    def _lifecycle(self) -> None:
        """After the invocations: SIGKILL the receiver and restart it on its store (durability),
        then fetch the backup back with GET into a fresh directory (restore)."""
        s, injector = self.scenario, self.injector
        assert injector is not None
        self._phase("durability")
        digest = sha256_of(self.source)
        assert digest is not None, "the client's source copy is written at set-up"
        injector.receiver.kill()
        try:
            self.revive_receiver(0)
        except ServerStartError as e:  # the harness could not restart it: not the client's doing
            for check in ("durability", "restore"):
                self.stream.publish(LifecycleCheck(time.monotonic_ns(), s.id, check, False,
                                                   f"harness: {e}", {"harness_error": str(e)}))
            return
        port = injector.receiver.port
        in_lab = self.network.run   # evlab asks the receiver from inside its network
        self.stream.publish(in_lab(functools.partial(
            durability_check, s.id, HOST, port, digest, self.workdir / "store")))
        self._phase("restore")
        self.stream.publish(in_lab(functools.partial(
            restore_check, s.id, HOST, port, digest, self.workdir / "restore")))
        self.records(0)

    def _verify(self, n: int) -> None:
        if n:
            self._phase("verify", n)
        v = verify(self.workdir / "store", self.source)
        self.stream.publish(VerifierResult(time.monotonic_ns(), self.scenario.id, n,
                                           v["saved"], v["match"], v["source_sha256"],
                                           v["saved_sha256"]))

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
        yield from (part.stop for part in (self.noise, self.capture) if part is not None)
        if self.injector is not None:   # the receiver, a proxy and the decoy stop side by side
            injector = self.injector
            yield lambda: injector.close(*[d for d in (self.decoy,) if d is not None])
        elif self.decoy is not None:
            yield self.decoy.stop
        yield self.network.remove   # after every process and socket of it is gone
        yield self._keep_records
        yield lambda: self.invocations.disown(self.runs)
        yield lambda: shutil.rmtree(self.workdir, ignore_errors=True)
        yield self._remove_client_home

    def _keep_records(self) -> None:
        for name in ("receiver", "decoy"):
            record = self.workdir / f"{name}.jsonl"
            if record.exists():
                shutil.copy(record, self.parts.out_dir / f"{self.scenario.id}.{name}.jsonl")

    def _remove_client_home(self) -> None:
        if self.client_home is not None:
            unmount_under(self.client_home)
            shutil.rmtree(self.client_home, ignore_errors=True)
