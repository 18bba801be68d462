"""A lab session: opened once (one compiled collector, one warm server spawner, the client's
boundary, one source file), its scenarios run one after another, always closed.

    with Session(stream, out_dir, options).opened(scenarios, grade) as session:
        for scenario in scenarios:
            session.run_scenario(scenario)

`opened` is the one place that decides how a session ended (SessionEnded's reason): complete,
interrupted (Ctrl-C, SIGTERM, a cancel from the dashboard) or the error that stopped it.
"""

import contextlib
import platform
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from probes.boundary import netns
from probes.boundary.cgroup import find_layout
from probes.boundary.cgroup import sweep_stale as sweep_stale_cgroups
from probes.boundary.sandbox import SandboxLimits
from probes.capability import Capability
from probes.collectors.choose import Collector, open_collector
from probes.interrupts import deferred
from probes.owned_tmp import make_owned_dir, sweep_stale
from probes.pace import pace_ns
from probes.packets.capture import CaptureUnavailable, PacketCapture
from sessions.judging.clauses import predicates_of
from sessions.judging.gates import gates_of
from sessions.lab import spawner as spawners
from sessions.lab.boundary import Boundary, BoundaryError
from sessions.lab.invocation import Invocations
from sessions.lab.parts import HOST, Cancelled, LabParts
from sessions.lab.scenario_run import ScenarioRun
from sessions.lab.spawner import Spawner, SpawnError
from sessions.spec.scenario import Scenario
from sessions.spec.task import load_task
from sessions.stream.events import (
    CapabilityMissing,
    GradeStarted,
    SessionEnded,
    SessionStarted,
    StaleCleaned,
)
from sessions.stream.stream import EventStream

__all__ = ["HOST", "VERSION", "Cancelled", "Options", "RunError", "Session", "end_reason"]

VERSION = "0.1.0"


class RunError(Exception):
    """The session could not run as asked (e.g. --packets required but unavailable)."""


@dataclass
class Options:
    collector: str = "auto"
    packets: str = "on"          # on, off, required
    functions: tuple[str, ...] = ()   # client functions counted besides the task's own
    noise: tuple[str, ...] = ()  # ambient noise for every scenario (sessions/lab/noise.py kinds)
    sandbox: str = "auto"        # auto (when it can be built), required, off (--no-sandbox)
    deny_egress: bool = False    # refuse every destination but the endpoint (EPERM)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    task: str = ""               # the task's id or folder ("": the default task)


def end_reason(error: BaseException | None) -> str:
    """SessionEnded's reason: complete, or how an exception ended the session."""
    if error is None:
        return "complete"
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    return f"error: {error or type(error).__name__}"


class Session:
    def __init__(self, stream: EventStream, out_dir: Path, options: Options | None = None):
        self.stream = stream
        self.out_dir = Path(out_dir)       # pcaps and server records kept for the archive
        self.options = options or Options()
        self.task = load_task(self.options.task or None)
        self.contract = self.task.contract
        predicates_of(self.contract)   # a clause or gate the library lacks: refused before
        gates_of(self.contract)        # anything runs (a ContractError, one line)
        self.cancel = threading.Event()  # set from another thread to stop the current run
        self.layout = find_layout()
        self.parts: LabParts | None = None
        self._invocations: Invocations | None = None
        self._tmp: Path | None = None
        self._spawner: Spawner | None = None
        self._boundary: Boundary | None = None
        self._collector: Collector | None = None

    @contextlib.contextmanager
    def opened(self, scenarios: list[Scenario],
               grade: GradeStarted | None = None) -> Iterator["Session"]:
        """Open the session for these scenarios (and say who is graded); always closed."""
        error: BaseException | None = None
        try:
            self.open(scenarios)
            if grade is not None:
                self.stream.publish(grade)
            yield self
        except BaseException as e:
            error = e
            raise
        finally:
            with deferred():   # an interrupt landing here is raised once the lab is closed
                self.close(end_reason(error))

    def run_scenario(self, scenario: Scenario) -> None:
        if self.parts is None or self._invocations is None:
            raise RunError("the session is not open")
        self.parts.check_cancel()
        ScenarioRun(self.parts, self._invocations, scenario).run()

    def open(self, scenarios: list[Scenario]) -> None:
        # What a run killed with SIGKILL left behind: its cgroups (and what still runs in
        # them), its lab networks, then its temp directories.
        stale = sweep_stale_cgroups(self.layout) + netns.sweep_stale() + sweep_stale()
        functions = tuple(dict.fromkeys(self.task.functions + self.options.functions))
        # The servers' warm interpreter imports them while the collector compiles; without it
        # each server starts an interpreter of its own (and says so if it cannot).
        try:
            self._spawner = spawners.obtain()
        except SpawnError:
            self._spawner = None
        try:
            boundary = self._boundary = Boundary.open(self.options, self.layout)
            boundary.check_reachable(scenarios)
        except BoundaryError as e:
            raise RunError(str(e)) from None
        # What needs no collector first: opening the collector waits for its compile (started
        # ahead, still running), and these run meanwhile (~25 ms; the packet probe's socket
        # waits for the kernel when it closes).
        packets_mode, packet_gap = self._probe_packets()
        self._tmp = make_owned_dir("evlab-session-")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        collector, missing = open_collector(self.options.collector, functions)
        self._collector = collector
        collector.prepare([s.client for s in scenarios])
        missing += [gap for gap in (packet_gap, *boundary.gaps) if gap]
        self.parts = LabParts(self.stream, collector, boundary, self._spawner, packets_mode,
                              self.options.noise, self.out_dir, self._tmp, self.task, self.cancel)
        self._invocations = Invocations(self.parts)
        self.stream.publish(SessionStarted(
            time.monotonic_ns(), wall_ns=time.time_ns(), evlab_version=VERSION,
            kernel=platform.release(), collector=collector.name, packets=packets_mode,
            contract_version=self.contract.version, scenarios=tuple(s.id for s in scenarios),
            cpu_pace=self._pace(),
            task_id=self.task.id, task_version=self.task.version, task_sha256=self.task.sha256,
            clauses=self.task.clause_ids, gates=tuple(gates_of(self.contract))))
        for cap in missing:
            self.stream.publish(CapabilityMissing(time.monotonic_ns(), cap.name, cap.detail,
                                                  cap.fix))
        for line in stale:
            self.stream.publish(StaleCleaned(time.monotonic_ns(), line))
        self.stream.publish(boundary.settings_event(
            any(spec.operable for spec in self.task.servers)))

    def _pace(self) -> float:
        """This machine's pace against the contract's reference (1: a contract without one)."""
        reference = self.contract.thresholds.pace_reference_ns
        return round(pace_ns() / reference, 3) if reference else 1.0

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
        self.parts = self._invocations = None
        # The spawner ends its servers in a thread meanwhile: both closes mostly wait on the
        # kernel, independently (the spawner ~30 ms for its servers' exit, the BCC collector
        # ~80 ms for the RCU grace periods its function uprobes' detach waits for).
        spawner, self._spawner = self._spawner, None
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="evlab-spawner-close") as pool:
                closing = pool.submit(spawners.release, spawner) \
                    if spawner is not None else None
                try:
                    if self._boundary is not None:
                        self._boundary.close(self._collector)
                    if self._collector is not None:
                        self._collector.close()
                        self._collector = None
                finally:
                    if closing is not None:
                        closing.result()   # raises what the spawner's close raised
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
            self.stream.publish(SessionEnded(time.monotonic_ns(), partial=reason != "complete",
                                             reason=reason))

    @property
    def boundary(self) -> Boundary | None:
        return self._boundary
