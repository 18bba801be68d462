"""One invocation of the client: launched inside its boundary, watched until it exits or its
timeout passes, its claims read from stdout and the kernel's events of its tree received.

    inv = Invocation(parts, scenario, n)
    invocations.own(inv)                         # kernel events of its id come to it
    inv.launch(argv, cwd, source, inputs, port, network)   # ClientLaunched
    inv.wait(run)                                # ClientExited; the run pumps evidence meanwhile

Kernel events come from one ring buffer for every invocation of the session (several attempts
may run at once): `Invocations` hands each to the invocation that owns its id.
"""

import itertools
import os
import select
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Protocol

from probes.boundary.netns import Network
from probes.collectors.records import LifeEvent, ProcessEvent, SignalEvent, TruncateEvent
from probes.proc import metrics as procmetrics
from sessions.lab.lifecycle import kill_leftovers, leftovers
from sessions.lab.observations import CLAIM_BYTES_MAX, claim_event, kernel_event, metrics_event
from sessions.lab.parts import LabParts
from sessions.lab.teardown import kill_group
from sessions.spec.scenario import Scenario
from sessions.stream.events import ClientClaim, ClientExited, ClientLaunched, ServerRecord
from sessions.stream.operations import CAPPED as OPERATIONS_CAPPED

POLL_S = 0.1            # counters, events, packets and records are pumped at 10 Hz
METRICS_EVERY_S = 0.25  # psutil samples at 4 Hz
KERNEL_EVENTS_MAX = 20_000   # kernel events kept per invocation (an honest client makes ~500)
OPERATIONS_MAX = 20_000      # and of its signals, truncations and processes' ends
OPERATIONS = (SignalEvent, TruncateEvent, LifeEvent)
CLAIMS_MAX = 1_000           # claims kept per invocation (an honest client makes a handful)
# Invocation ids (the collector's key for an invocation) are unique in the process, never per
# session: a collector kept from an earlier session (probes.collectors.choose.keep_collectors)
# must not count anything left of that session's invocations as a new one's.
_IDS = itertools.count(1)


class Watching(Protocol):
    """What the scenario run does while its invocation runs (sessions/lab/scenario_run.py)."""

    @property
    def server_pids(self) -> dict[str, int]: ...

    def revive_servers(self, n: int) -> None: ...

    def strike(self, inv: "Invocation") -> None: ...

    def pump(self, inv: "Invocation") -> None: ...


class Invocation:
    def __init__(self, parts: LabParts, scenario: Scenario, n: int):
        self.parts, self.scenario, self.n = parts, scenario, n
        with parts.launch_lock:
            self.id = next(_IDS)
        self.client: subprocess.Popen | None = None
        self.pid = 0
        self.root_exited = False      # the launched process has ended (kernel view)
        self.kernel_events = 0        # kernel events published for this invocation
        self.operations = 0           # ... and operations (signals, truncations, ends)
        self.left_at_exit: list[str] = []   # "pid comm" still alive when it ended
        self.killing = False          # evlab is killing its tree (its timeout passed)
        self.killed: set[int] = set()   # what evlab killed then: never counted as left behind
        self._claims: threading.Thread | None = None
        self._started = 0
        self.poll_s = POLL_S          # how often its run is asked to pump (and strike)
        self.roles = {spec.name: spec.role for spec in parts.task.servers}

    def launch(self, argv: list[str], cwd: Path, source: Path | None, inputs: Path, port: int,
               network: Network, behind: int | None = None,
               outputs: Path | None = None, target: Path | None = None) -> None:
        """In the attempt's network, its inputs (a folder, read-only) in reach; source: the
        watched input (None: none is); port: the endpoint's as the client is given it (0:
        none); behind: the endpoint's own port when `port` is a proxy's."""
        s, parts = self.scenario, self.parts
        launch = parts.boundary.enter(parts.collector, self.id, s, argv, cwd, inputs,
                                      port, network, behind, outputs)
        self._started = time.monotonic_ns()
        with parts.launch_lock:   # the collector arms one launch at a time
            proc = parts.collector.launch(self.id, launch, source, client=s.client, cwd=cwd,
                                          target=target,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          stdin=subprocess.DEVNULL, env=_client_env(s, cwd))
        self.client, self.pid = proc, proc.pid
        scratch, read_only = parts.boundary.scratch(self.id, s, inputs)
        parts.stream.publish(ClientLaunched(self._started, s.id, self.n, proc.pid, tuple(argv),
                                            str(cwd), str(source or ""), s.own_files,
                                            str(outputs or ""), scratch, read_only,
                                            str(inputs), _tools(parts.task.tools, s, cwd)))
        self._claims = threading.Thread(target=self._read_claims, args=(proc.stdout,),
                                        daemon=True)
        self._claims.start()

    def wait(self, run: Watching) -> None:
        """Until the client exits or its timeout passes (then its group is killed): ClientExited.
        The run pumps evidence every POLL_S meanwhile; psutil samples at METRICS_EVERY_S."""
        status, cpu_ns, timed_out = self._watch(run)
        if self._claims is not None:
            self._claims.join(timeout=2)
        self.client = None
        self.parts.stream.publish(ClientExited(
            time.monotonic_ns(), self.scenario.id, self.n,
            None if timed_out else os.waitstatus_to_exitcode(status), timed_out,
            time.monotonic_ns() - self._started, cpu_ns, self.scenario.timeout_s))

    def _watch(self, run: Watching) -> tuple[int, int | None, bool]:
        """Its exit wakes the wait at once (a pidfd); the pump runs at POLL_S meanwhile."""
        proc = self.client
        assert proc is not None, "launch() first"
        deadline = self._started + int(self.scenario.timeout_s * 1e9)
        last_metrics = last_pump = 0
        exited = os.pidfd_open(proc.pid)
        try:
            while True:
                self.parts.check_cancel()
                run.revive_servers(self.n)
                run.strike(self)
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    return status, int((usage.ru_utime + usage.ru_stime) * 1e9), False
                now = time.monotonic_ns()
                if now > deadline:
                    self._kill_tree(proc.pid)
                    _, status, _ = os.wait4(proc.pid, 0)
                    self.killed |= kill_leftovers(proc.pid, self.tasks)   # without a cgroup
                    proc.returncode = -9
                    return status, None, True
                if now - last_pump >= POLL_S * 1e9:   # a fault's strike may poll faster
                    run.pump(self)
                    last_pump = now
                if now - last_metrics > METRICS_EVERY_S * 1e9:
                    self._metrics(run.server_pids)
                    last_metrics = now
                select.select([exited], [], [], min(self.poll_s, max(0, deadline - now) / 1e9))
        finally:
            os.close(exited)

    def kill_tree(self) -> None:
        """A lab fault's kill (SIGKILL, its whole tree): what it kills is evlab's doing."""
        if self.client is not None:
            self._kill_tree(self.client.pid)

    def tasks(self) -> list[int] | None:
        """Tasks of its tree still running (the kernel's view and its cgroup)."""
        return self.parts.boundary.tasks(self.parts.collector, self.id)

    def _kill_tree(self, pid: int) -> None:
        """At its timeout: the launched process's group, then every task of its cgroup, waited
        for until the cgroup is empty (the sandboxed client dies with its bwrap, but not at
        once: a census right after the launched process's exit could find it still running).
        What it kills is recorded, so the cleanup census never counts evlab's own kill."""
        self.killing = True
        self.killed = {pid, *leftovers(pid, self.tasks())}
        kill_group(pid)
        self.parts.boundary.kill(self.id)

    def _metrics(self, servers: dict[str, int]) -> None:
        # one read of the client's and the servers' trees
        table = procmetrics.children_table([self.pid, *servers.values()])
        for role, pid in (("client", self.pid), *servers.items()):
            sample = procmetrics.sample(pid, table)
            if sample is not None:
                self.parts.stream.publish(metrics_event(sample, self.scenario.id, self.n,
                                                        role, pid))

    def _read_claims(self, stdout) -> None:
        """Its stdout, a line at a time, never more than CLAIM_BYTES_MAX of one held; past
        CLAIMS_MAX claims the lines are counted, not kept."""
        kept = dropped = 0
        while line := stdout.readline(CLAIM_BYTES_MAX + 1):
            if not line.endswith(b"\n") and len(line) > CLAIM_BYTES_MAX:
                while (rest := stdout.readline(CLAIM_BYTES_MAX)) and not rest.endswith(b"\n"):
                    pass   # the rest of an over-long line: read and dropped
            if kept >= CLAIMS_MAX:
                dropped += 1
                continue
            claim = claim_event(line, self.scenario.id, self.n)
            if claim is not None:
                self.parts.stream.publish(claim)
                kept += 1
        if dropped:
            self.parts.stream.publish(ClientClaim(
                time.monotonic_ns(), self.scenario.id, self.n,
                {"malformed": f"{dropped:,} more line(s) not kept (at most {CLAIMS_MAX:,})"}))
        stdout.close()

    def kernel_event(self, e) -> None:
        """One of the kernel's events of this invocation's tree."""
        if isinstance(e, ProcessEvent) and e.kind == "exit":
            self._note_exit(e)
        # Signals, truncations and processes' ends are counted apart: a flood of other events
        # (an honest shell's thousand programs make 20,000) hides none of them.
        if isinstance(e, OPERATIONS):
            self._operation(e)
            return
        # A client that floods events cannot grow evlab without end: past the cap they are
        # counted by the kernel and not kept (the risk scan then says incomplete).
        if self.kernel_events >= KERNEL_EVENTS_MAX:
            return
        self.kernel_events += 1
        self.parts.stream.publish(kernel_event(e, self.scenario.id, self.n, self.roles))

    def _operation(self, e) -> None:
        """Past its cap, the operations clauses read the harness's `operations_capped` record
        (said once) and judge nothing on the invocation."""
        self.operations += 1
        if self.operations <= OPERATIONS_MAX:
            self.parts.stream.publish(kernel_event(e, self.scenario.id, self.n, self.roles))
        elif self.operations == OPERATIONS_MAX + 1:
            self.parts.stream.publish(ServerRecord(
                time.monotonic_ns(), self.scenario.id, self.n, "harness", OPERATIONS_CAPPED,
                {"cap": OPERATIONS_MAX}))

    def _note_exit(self, e) -> None:
        """Processes of the tree that were still running when the launched one ended: in the
        sandbox the end of its pid namespace kills them at once, so the kernel's exit events
        are the record of what the client left running."""
        if e.root:
            self.root_exited = True
        elif self.root_exited and not self.killing:   # evlab's kill at the timeout: not left
            self.left_at_exit.append(f"{e.pid} {e.comm}")

    def kill(self) -> None:
        """Teardown: the client, if it still runs (an interrupt mid-invocation)."""
        if self.client is not None and self.client.poll() is None:
            kill_group(self.client.pid)
            self.client.wait()


class Invocations:
    """The session's invocations by collector id: where each kernel event goes."""

    def __init__(self, parts: LabParts):
        self.parts = parts
        self._owners: dict[int, Invocation] = {}
        self._poll = threading.Lock()

    def own(self, inv: Invocation) -> None:
        self._owners[inv.id] = inv

    def disown(self, invs: list[Invocation]) -> None:
        for inv in invs:
            self._owners.pop(inv.id, None)

    def pump(self) -> None:
        with self._poll:
            events = self.parts.collector.poll_events()
        for e in events:
            owner = self._owners.get(e.invocation)
            if owner is not None:
                owner.kernel_event(e)


def _client_env(s: Scenario, cwd: Path) -> dict[str, str] | None:
    """A graded client's exact environment ({cwd}: its working directory); else inherited."""
    if s.env is None:
        return None
    return {name: value.replace("{cwd}", str(cwd)) for name, value in s.env}


def _tools(tools: tuple[str, ...], s: Scenario, cwd: Path) -> tuple[str, ...]:
    """The task's client.tools as the client's PATH finds them, and where each link leads."""
    path = (_client_env(s, cwd) or dict(os.environ)).get("PATH")
    found = [t if t.startswith("/") else shutil.which(t, path=path) for t in tools]
    return tuple(sorted({p for f in found if f for p in (f, os.path.realpath(f))}))
