"""The runner: fixture + probes -> one event stream, scenario after scenario.

Per scenario: a fresh store, receiver and decoy, a packet capture on their ports, invocation 1
and the verifier, invocation 2 against the same receiver state and the verifier, then judging
and teardown. Teardown runs in `finally`, so an exception, Ctrl-C or SIGTERM (turned into
KeyboardInterrupt by the CLI) leaves no process, port, BPF attachment or temp directory.
"""

import itertools
import os
import platform
import select
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from fixture.harness import ServerStartError, start_decoy
from fixture.receiver import sha256_of
from fixture.source import SIZE, write_source, write_stale_backup
from fixture.spawner import Spawner, SpawnError
from fixture.verifier import verify
from probes.capability import Capability
from probes.cgroup import find_layout
from probes.cgroup import sweep_stale as sweep_stale_cgroups
from probes.collectors import Collector, open_collector
from probes.owned_tmp import make_owned_dir, sweep_stale
from probes.packets import CaptureUnavailable, PacketCapture
from probes.sandbox import SandboxLimits
from sessions.lab.boundary import Boundary, BoundaryError
from sessions.lab.injector import Injector
from sessions.lab.lifecycle import cleanup_check, durability_check, restore_check
from sessions.lab.noise import Noise
from sessions.lab.observations import Observations, Tail
from sessions.lab.running import Running
from sessions.lab.teardown import kill_group, teardown
from sessions.spec.contract import load_contract
from sessions.spec.scenario import Scenario
from sessions.stream.events import (
    CapabilityMissing,
    ClientExited,
    ClientLaunched,
    CounterSample,
    LifecycleCheck,
    PhaseChanged,
    ScenarioStarted,
    ServerRecord,
    SessionEnded,
    SessionStarted,
    StaleCleaned,
    VerifierResult,
)
from sessions.stream.stream import EventStream

VERSION = "0.1.0"
HOST = "127.0.0.1"
POLL_S = 0.1            # counters, events, packets and records are pumped at 10 Hz
METRICS_EVERY_S = 0.25  # psutil samples at 4 Hz
SETTLE_S = 3.0          # how long to wait for the receiver to finish with a client's connections
SETTLE_POLL_S = 0.002   # how often the records are read while a connection is still open
# Invocation ids (the collector's key for an invocation) are unique in the process, never per
# session: a collector kept from an earlier session (probes.collectors.keep_collectors) must not
# count anything left of that session's invocations as a new one's.
_INVOCATION_IDS = itertools.count(1)


class RunError(Exception):
    """The session could not run as asked (e.g. --packets required but unavailable)."""


class Cancelled(KeyboardInterrupt):
    """The session was asked to stop (the dashboard quit); unwinds like Ctrl-C, through teardown."""


@dataclass
class Options:
    collector: str = "auto"
    packets: str = "on"          # on, off, required
    functions: tuple[str, ...] = ("hash_file", "send_payload", "busy_wait")
    noise: tuple[str, ...] = ()  # ambient noise for every scenario (sessions/noise.py kinds)
    sandbox: str = "auto"        # auto (when it can be built), required, off (--no-sandbox)
    deny_egress: bool = False    # refuse every destination but the receiver (EPERM)
    limits: SandboxLimits = field(default_factory=SandboxLimits)


class Session:
    def __init__(self, stream: EventStream, out_dir: Path, options: Options | None = None):
        self.stream = stream
        self.out_dir = Path(out_dir)       # pcaps and server records kept for the archive
        self.options = options or Options()
        self.contract = load_contract()
        self.cancel = threading.Event()  # set from another thread to stop the current run
        self._launch_lock = threading.Lock()   # one launch armed in the collector at a time
        self._tmp: Path | None = None
        self.collector: Collector | None = None
        self.packets_mode = "off"
        self.layout = find_layout()
        self.spawner: Spawner | None = None
        self.boundary: Boundary | None = None

    # --- session ----------------------------------------------------------------------
    def open(self, scenarios: list[Scenario]) -> None:
        # What a run killed with SIGKILL left behind: its cgroups (and what still runs in
        # them), then its temp directories.
        stale = sweep_stale_cgroups(self.layout) + sweep_stale()
        functions = tuple(dict.fromkeys(self.options.functions))
        # The servers' warm interpreter imports them while the collector compiles; without it
        # each server starts an interpreter of its own (and says so if it cannot).
        try:
            self.spawner = Spawner.start()
        except SpawnError:
            self.spawner = None
        try:
            self.boundary = Boundary.open(self.options, self.layout)
            self.boundary.check_reachable(scenarios)
        except BoundaryError as e:
            raise RunError(str(e)) from None
        self.collector, missing = open_collector(self.options.collector, functions)
        self.collector.prepare([s.client for s in scenarios])
        self.observe = Observations(self.stream, self.collector)
        self.packets_mode, packet_gap = self._probe_packets()
        missing += [gap for gap in (packet_gap, *self.boundary.gaps) if gap]
        self._tmp = make_owned_dir("evlab-session-")
        self.source = write_source(self._tmp / "source.bin")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.stream.publish(SessionStarted(
            time.monotonic_ns(), wall_ns=time.time_ns(), evlab_version=VERSION,
            kernel=platform.release(), collector=self.collector.name,
            packets=self.packets_mode, contract_version=self.contract.version,
            scenarios=tuple(s.id for s in scenarios)))
        for cap in missing:
            self.stream.publish(CapabilityMissing(time.monotonic_ns(), cap.name, cap.detail,
                                                  cap.fix))
        for line in stale:
            self.stream.publish(StaleCleaned(time.monotonic_ns(), line))
        self.stream.publish(self.boundary.settings_event())

    def _probe_packets(self) -> tuple[str, Capability | None]:
        if self.options.packets == "off":
            return "off", Capability("packets", False, "packet capture off by request",
                                     "run with --packets on")
        try:
            PacketCapture().start().stop()
            return "on", None
        except CaptureUnavailable as e:
            if self.options.packets == "required":
                raise RunError(f"packet capture required but unavailable: {e.reason} "
                               f"(fix: {e.fix})") from None
            return "unavailable", e.capability()

    def close(self, reason: str = "complete") -> None:
        try:
            if self.spawner is not None:
                self.spawner.close()
                self.spawner = None
            if self.boundary is not None:
                self.boundary.close(self.collector)
            if self.collector is not None:
                self.collector.close()
                self.collector = None
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
            self.stream.publish(SessionEnded(time.monotonic_ns(), partial=reason != "complete",
                                             reason=reason))

    # --- one scenario -----------------------------------------------------------------
    def run_scenario(self, scenario: Scenario) -> None:
        self._check_cancel()
        workdir = Path(tempfile.mkdtemp(prefix=f"{scenario.id.replace('@', '-')}-",
                                        dir=self._tmp))
        live = Running(scenario, workdir, self.source)
        try:
            self._phase(scenario, "setup")
            # Fresh state per scenario, and nothing of evlab's within the client's reach: its
            # source copy and working directories live apart from the store and records.
            live.client_home = make_owned_dir("evlab-client-")
            live.home = self.boundary.make_home(live.client_home, scenario)
            (live.home / "source").mkdir(mode=0o755)
            live.source = write_source(live.home / "source" / "source.bin")
            try:
                self._run(live)
            except ServerStartError as e:
                if not scenario.lifecycle:
                    raise
                self._attempt_blocked(live, str(e))  # e.g. a port clash: not the client's doing
        finally:
            self._phase(scenario, "teardown")
            teardown(self, live)
            self._phase(scenario, "done")

    def _run(self, live: Running) -> None:
        self._start_servers(live)
        self._publish_started(live)
        self.observe.records(live, 0)  # the servers' start-up records belong to set-up
        self._verify(live, 0)
        for n in (1, 2):
            self._invoke(live, n)
            self._verify(live, n)
        if live.scenario.lifecycle:
            self._lifecycle(live)
        self._phase(live.scenario, "judging")

    def _attempt_blocked(self, live: Running, why: str) -> None:
        """A server of the attempt (receiver, decoy, wire proxy) could not start: recorded as
        harness evidence and judged (an invalid attempt), so a replay re-derives it."""
        if not live.started:
            self._publish_started(live)
        self.stream.publish(ServerRecord(time.monotonic_ns(), live.scenario.id,
                                         max(1, live.invocation), "harness", "start_failed",
                                         {"error": why}))
        self._phase(live.scenario, "judging")

    def _check_cancel(self) -> None:
        if self.cancel.is_set():
            raise Cancelled()

    def _phase(self, scenario: Scenario, phase: str, n: int = 0) -> None:
        self.stream.publish(PhaseChanged(time.monotonic_ns(), scenario.id, phase, n))

    def _start_servers(self, live: Running) -> None:
        s = live.scenario
        if s.store == "stale":
            write_stale_backup(live.workdir / "store")
        live.injector = Injector.start(s.faults, live.workdir, self.spawner)
        live.decoy = start_decoy(live.workdir / "decoy.jsonl", self.spawner)
        live.tails = {"receiver": Tail(live.injector.receiver.events_path),
                      "decoy": Tail(live.decoy.events_path)}
        if self.packets_mode == "on":
            live.capture = PacketCapture(pcap_path=self.out_dir / f"{s.id}.pcap").start()
            live.capture.set_ports({live.injector.receiver.port, live.decoy.port})
        kinds = tuple(dict.fromkeys(self.options.noise + s.noise))
        if kinds:
            live.noise = Noise(live.workdir / "noise", live.injector.receiver.port, s.client,
                               kinds).start()

    def _publish_started(self, live: Running) -> None:
        """ScenarioStarted: with port 0 for a server that did not start."""
        s = live.scenario
        receiver = live.injector.receiver.port if live.injector else 0
        self.stream.publish(ScenarioStarted(
            time.monotonic_ns(), s.id, str(s.client), s.client_sha256(), s.expect_fail,
            s.expect_pass, s.faults, receiver, live.decoy.port if live.decoy else 0, SIZE,
            str(s.file), s.expect_invalid, live.noise.kinds if live.noise else (), s.attempt,
            s.base, s.client_name))
        live.started = True

    def _invoke(self, live: Running, n: int) -> None:
        s = live.scenario
        with self._launch_lock:
            inv_id = next(_INVOCATION_IDS)
        live.invocation = n
        self.observe.own(inv_id, live, n)
        self._phase(s, "invocation", n)
        port = live.injector.arm(n)
        if live.injector.proxy is not None:
            live.tails["proxy"] = Tail(live.injector.proxy.events_path)
            if live.capture is not None:
                live.capture.add_ports({port})
        argv = s.argv(HOST, port, live.source, live.decoy.port)
        cwd = self.boundary.workdir(live.home / f"run-{n}")
        live.root_exited, live.left_at_exit, live.kernel_events = False, [], 0
        launch = self.boundary.enter(self.collector, inv_id, s, argv, cwd, live.source.parent,
                                     port)
        started = time.monotonic_ns()
        with self._launch_lock:   # the collector arms one launch at a time
            proc = self.collector.launch(inv_id, launch, live.source, client=s.client,
                                         cwd=cwd, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                         env=_client_env(s, cwd))
        live.client, live.client_pid, live.inv_id = proc, proc.pid, inv_id
        self.stream.publish(ClientLaunched(started, s.id, n, proc.pid, tuple(argv), str(cwd),
                                          str(live.source), s.own_files))
        claims = threading.Thread(target=self.observe.claims, args=(s.id, n, proc.stdout),
                                  daemon=True)
        claims.start()
        status, cpu_ns, timed_out = self._watch(live, n, inv_id, proc, started)
        claims.join(timeout=2)
        live.client = None
        self.stream.publish(ClientExited(
            time.monotonic_ns(), s.id, n, None if timed_out else os.waitstatus_to_exitcode(status),
            timed_out, time.monotonic_ns() - started, cpu_ns))
        self._settle(live, n, inv_id)
        if s.lifecycle:
            self.observe.pump(live, n, inv_id)
            self.stream.publish(cleanup_check(
                s.id, n, proc.pid, lambda: self.boundary.tasks(self.collector, inv_id), cwd,
                live.workdir / "store", tuple(live.left_at_exit)))
        self.observe.pump(live, n, inv_id)
        for event in self.boundary.leave(self.collector, s.id, n, inv_id, live.home):
            self.stream.publish(event)
        live.injector.disarm()  # heal: no fault outlives its invocation
        final = self.collector.finish(inv_id)
        self.observe.pump(live, n, inv_id)
        live.tails.pop("proxy", None)
        self.stream.publish(CounterSample(
            time.monotonic_ns(), s.id, n, final.counters, final.functions, final.unobserved,
            final=True, overhead=self.collector.overhead()))
        self.observe.packet_stats(live, n)

    def _watch(self, live, n, inv_id, proc, started) -> tuple[int, int | None, bool]:
        """Pump evidence until the client exits or its timeout passes (then kill its group).
        Its exit wakes the wait at once (a pidfd); the pump runs at POLL_S meanwhile."""
        deadline = started + int(live.scenario.timeout_s * 1e9)
        last_metrics = 0
        exited = os.pidfd_open(proc.pid)
        try:
            while True:
                self._check_cancel()
                self._revive_receiver(live, n)
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    return status, int((usage.ru_utime + usage.ru_stime) * 1e9), False
                now = time.monotonic_ns()
                if now > deadline:
                    kill_group(proc.pid)
                    _, status, _ = os.wait4(proc.pid, 0)
                    proc.returncode = -9
                    return status, None, True
                self.observe.pump(live, n, inv_id)
                if now - last_metrics > METRICS_EVERY_S * 1e9:
                    self.observe.process_metrics(live, n, proc.pid)
                    last_metrics = now
                select.select([exited], [], [], min(POLL_S, max(0, deadline - now) / 1e9))
        finally:
            os.close(exited)

    def _revive_receiver(self, live: Running, n: int) -> None:
        status = live.injector.revive_receiver()
        if status is not None:  # an injected crash: its connections will never close
            live.open_connections = 0
            self.stream.publish(ServerRecord(
                time.monotonic_ns(), live.scenario.id, n, "harness", "receiver_restarted",
                {"exit_status": status, "port": live.injector.receiver.port}))

    def _settle(self, live: Running, n: int, inv_id: int) -> None:
        """Let the receiver finish with the client's connections so records land in invocation
        n, and the capture read their last segments: waits on records and the capture, not on
        a fixed time (SETTLE_S bounds it for a connection the client left open)."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            self._check_cancel()
            self.observe.records(live, n)
            if live.open_connections <= 0 or time.monotonic() > deadline:
                break
            time.sleep(SETTLE_POLL_S)
        if live.capture is not None:
            live.capture.sync()
        self.observe.pump(live, n, inv_id)

    def _lifecycle(self, live: Running) -> None:
        """After the invocations: SIGKILL the receiver and restart it on its store (durability),
        then fetch the backup back with GET into a fresh directory (restore)."""
        s = live.scenario
        self._phase(s, "durability")
        digest = sha256_of(live.source)
        live.injector.receiver.kill()
        try:
            self._revive_receiver(live, 0)
        except ServerStartError as e:  # the harness could not restart it: not the client's doing
            for check in ("durability", "restore"):
                self.stream.publish(LifecycleCheck(time.monotonic_ns(), s.id, check, False,
                                                   f"harness: {e}", {"harness_error": str(e)}))
            return
        port = live.injector.receiver.port
        self.stream.publish(durability_check(s.id, HOST, port, digest, live.workdir / "store"))
        self._phase(s, "restore")
        self.stream.publish(restore_check(s.id, HOST, port, digest, live.workdir / "restore"))
        self.observe.records(live, 0)

    def _verify(self, live: Running, n: int) -> None:
        if n:
            self._phase(live.scenario, "verify", n)
        v = verify(live.workdir / "store", live.source)
        self.stream.publish(VerifierResult(time.monotonic_ns(), live.scenario.id, n, v["saved"],
                                           v["match"], v["source_sha256"], v["saved_sha256"]))

def _client_env(s: Scenario, cwd: Path) -> dict[str, str] | None:
    """A graded client's exact environment ({cwd}: its working directory); else inherited."""
    if s.env is None:
        return None
    return {name: value.replace("{cwd}", str(cwd)) for name, value in s.env}
