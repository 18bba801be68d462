"""The client's boundary, for the runner: its own cgroup per invocation and its sandbox.

    boundary = Boundary.open(options)            # BoundaryError when a required sandbox is absent
    boundary.check_reachable(scenarios)          # before anything starts
    home = boundary.make_home(client_home)       # what the client may see (a tmpfs in the sandbox)
    cwd = boundary.workdir(home / "run-1")
    argv = boundary.enter(collector, inv, scenario, argv, cwd, source_dir, port)
    scratch, read_only = boundary.scratch(inv, scenario, source_dir)   # its own places, if any
    boundary.tasks(collector, inv)               # its tree, and whatever is in its cgroup
    events = boundary.leave(collector, scenario_id, n, inv, home)   # then the cgroup is gone
    net = boundary.network(label)                # the attempt's own network (or the host's)

The pieces are probes/boundary/cgroup.py (attribution, accounting, limits, kill),
probes/boundary/sandbox.py (bubblewrap as the unprivileged user) and probes/boundary/netns.py
(a network namespace per attempt); the collector's cgroup hooks watch what leaves.
"""

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

from probes.boundary import netns
from probes.boundary.cgroup import ClientCgroup, Layout, Limits, find_layout, remove_parents
from probes.boundary.netns import HostNetwork, LabNetwork, Network
from probes.boundary.sandbox import SCRATCH, SERVICE_DIR, Sandbox, SandboxSettings
from probes.boundary.servicens import ServiceNamespace
from probes.capability import Capability
from probes.collectors.choose import Collector
from sessions.spec.named_paths import shown
from sessions.spec.scenario import Scenario
from sessions.stream.events import BoundaryObserved, EgressSummary, Event, SandboxSet

HOST = "127.0.0.1"
NETWORK = ("a network namespace of its own per attempt, loopback only: the task's servers (a "
           "fault proxy in front of one), nothing of the host, other labs or the internet")


class BoundaryError(Exception):
    """The client cannot be confined as asked; the message is one line with the way out."""


def program_paths(s: Scenario) -> tuple[Path, ...]:
    """What the sandboxed client is shown of its program: the executable, the folders its
    command names and the folders of the files it names (a script and the modules beside it;
    the file alone where its folder may not be shown: sessions/spec/named_paths.py)."""
    return (s.client, *sorted({shown(f) for f in s.own_files}))


class Boundary:
    def __init__(self, options, layout: Layout, sandbox: Sandbox | None,
                 sandbox_gap: Capability | None, network_gap: Capability | None = None):
        self.options = options
        self.layout = layout
        self.sandbox = sandbox
        self.gaps = [gap for gap in (layout.capability(), sandbox_gap, network_gap) if gap]
        self._why_not = sandbox_gap.detail if sandbox_gap else ""
        self.network_gap = network_gap   # None: every attempt gets a lab network
        # State is kept per invocation and scenario, so that attempts can run at once.
        self._cgroups: dict[int, ClientCgroup] = {}          # invocation -> its cgroup
        self._programs: dict[str, list[tuple[Path, Path]]] = {}   # scenario -> staged files
        self._scratch: dict[int, dict[str, Path]] = {}       # invocation -> its own places
        # scenario -> its operable service's namespace and folder (issue 46)
        self._services: dict[str, tuple[ServiceNamespace, Path]] = {}

    @classmethod
    def open(cls, options, layout: Layout | None = None) -> "Boundary":
        layout = layout or find_layout()
        network_gap = netns.capability()
        if options.sandbox == "off":
            return cls(options, layout, None, Capability(
                "sandbox", False, "the client runs unconfined, as evlab's user (--no-sandbox)",
                "drop --no-sandbox"), network_gap)
        box, gap = Sandbox.open(options.limits)
        if box is None and options.sandbox == "required":
            assert gap is not None   # no sandbox comes with the reason why
            raise BoundaryError(f"the sandbox cannot be built here: {gap.detail} (fix: "
                                f"{gap.fix}; or pass --no-sandbox to run the client unconfined)")
        return cls(options, layout, box, gap, network_gap)

    def settings_event(self, service: bool = False) -> SandboxSet:
        """service: the task has an operable server (its clients share that pid namespace)."""
        settings = (self.sandbox.settings(service) if self.sandbox
                    else SandboxSettings(False, why_not=self._why_not))
        return SandboxSet(time.monotonic_ns(), settings.enabled, settings.describe(),
                          json.loads(json.dumps(dataclasses.asdict(settings))),  # as read back
                          self.layout.describe(), self.options.deny_egress,
                          NETWORK if self.network_gap is None
                          else f"the host's network ({self.network_gap.detail})",
                          self.network_gap is None)

    def network(self, label: str) -> Network:
        """An attempt's own network; the host's where none can be made (recorded at open)."""
        return LabNetwork.create(label) if self.network_gap is None else HostNetwork()

    def check_reachable(self, scenarios: list[Scenario]) -> None:
        """Every client exists and the sandbox user can reach it."""
        for s in scenarios:
            if not s.client.is_file():
                raise BoundaryError(f"{s.file or s.id}: client executable not found: "
                                    f"{s.client} (run `make clients` for the fixture's builds)")
            problem = (self.sandbox.unreadable((*program_paths(s), *s.own_files))
                       if self.sandbox else None)
            if problem:
                raise BoundaryError(f"{s.id}: the sandboxed client cannot read its program: "
                                    f"{problem}, or pass --no-sandbox")

    # --- the client's files ------------------------------------------------------------------
    def make_home(self, client_home: Path, s: Scenario) -> Path:
        """The scenario's home for the client; in the sandbox a tmpfs, its program staged
        beside it."""
        if self.sandbox is None:
            return client_home
        os.chmod(client_home, 0o711)   # the sandbox user binds what is inside
        self._programs[s.id] = self.sandbox.stage(program_paths(s), client_home)
        return self.sandbox.make_home(client_home / "home")

    def serve(self, s: Scenario, namespace: ServiceNamespace, folder: Path) -> None:
        """The scenario's clients run in its operable service's pid namespace, the service's
        folder shown at SERVICE_DIR (in the sandbox only: unconfined, they are root's)."""
        self._services[s.id] = (namespace, folder)

    def workdir(self, path: Path) -> Path:
        if self.sandbox:
            return self.sandbox.workdir(path)
        path.mkdir()
        return path

    # --- one invocation ------------------------------------------------------------------------
    def enter(self, collector: Collector, inv: int, s: Scenario, argv: list[str], cwd: Path,
              source_dir: Path, port: int, network: Network,
              behind: int | None = None, outputs: Path | None = None) -> list[str]:
        """A fresh cgroup (limits, accounting, egress hooks), the attempt's network and the
        sandbox around the client: the argv that launches it inside all three. behind: the
        endpoint's own port while a fault proxy (at `port`) stands in front of it, refused to
        the client. In the sandbox its /tmp and its /dev/shm are fresh folders beside cwd
        (run-N.tmp, run-N.shm), in its home: on its working directory's filesystem, within its
        disk limit, removed when it leaves."""
        lim = self.options.limits
        launch = argv
        service = self._services.get(s.id)   # only ever with a sandbox (operable_for)
        if self.sandbox is not None:
            scratch = self._scratch[inv] = {}
            for place in SCRATCH:   # each kept as it is made: abandon removes what was
                folder = cwd.with_name(f"{cwd.name}.{Path(place).name}")
                scratch[place] = self.sandbox.workdir(folder)
            launch = self.sandbox.wrap(argv, cwd, source_dir, self._programs.get(s.id, []),
                                       outputs, scratch, service[1] if service else None)
        # entered as root, before the sandbox drops it: the lab's network, and with an
        # operable service its pid namespace and a /proc of it; the cgroup's join first, so
        # that every process of the client is in its cgroup (killed there when it leaves: it
        # is not its pid namespace's init then)
        launch = [*(service[0].argv() if service else network.argv()), *launch]
        if self.layout.capability() is None:
            confined = self.sandbox is not None
            cg = self._cgroups[inv] = ClientCgroup.create(self.layout, f"inv{inv}", Limits(
                lim.memory_bytes if confined else None, lim.pids if confined else None))
            launch = cg.join_argv() + launch
            collector.watch_cgroup(inv, cg.dirs["v2"], cg.id, [(HOST, port)],
                                   self.options.deny_egress or s.deny_egress,
                                   [(HOST, behind)] if behind is not None else [])
        return launch

    def scratch(self, inv: int, s: Scenario,
                source_dir: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The invocation's own places as it sees them (/tmp, /dev/shm; (): none, the host's
        are all it has) and what the sandbox shows read-only there, never its own (its inputs,
        its program's files: evlab's client homes are in the host's /tmp, and a program may
        be in either)."""
        if inv not in self._scratch:
            return (), ()
        shown = {str(original) for _, original in self._programs.get(s.id, [])}
        # an operable service's folder is where an operator's work is (its configuration, its
        # logs): the program's to read and write, as its working directory is
        service = (SERVICE_DIR,) if s.id in self._services else ()
        return tuple(self._scratch[inv]) + service, tuple(sorted(shown | {str(source_dir)}))

    def tasks(self, collector: Collector, inv: int) -> list[int] | None:
        """Tasks of the invocation still running: the kernel's view of its tree, and whatever
        is in its cgroup. None without the tree's view: in the sandbox, what the client left
        is killed when it ends, and only the kernel's exit events record it."""
        tasks, cg = collector.live_tasks(inv), self._cgroups.get(inv)
        if cg is None or tasks is None:
            return tasks
        return sorted(set(tasks) | set(cg.census()))

    def kill(self, inv: int) -> bool:
        """SIGKILL every task of an invocation's cgroup and wait until it is empty (the kernel
        has run each one's exit); True when it is, or when there is no cgroup."""
        cg = self._cgroups.get(inv)
        return cg.kill() if cg is not None else True

    def leave(self, collector: Collector, scenario: str, n: int, inv: int,
              home: Path) -> list[Event]:
        """What the cgroup saw (CPU of the whole tree, memory, limits hit, egress), then empty
        and remove it: nothing of the invocation outlives it."""
        cg = self._cgroups.get(inv)
        if cg is None:
            self.abandon(collector, inv)
            return []
        try:
            hits = cg.limit_hits()
            if self.sandbox is not None:
                hits["disk"] = int(os.statvfs(home).f_bavail == 0)   # its tmpfs is full
            totals = collector.egress(inv)
            events: list[Event] = [BoundaryObserved(
                time.monotonic_ns(), scenario, n, cg.cpu_ns(), cg.memory_peak(), hits,
                len(cg.census()), totals is not None)]
            if totals is not None:
                events.append(EgressSummary(time.monotonic_ns(), scenario, n, totals.calls,
                                            totals.flows))
            return events
        finally:
            self.abandon(collector, inv)

    def abandon(self, collector: Collector, inv: int) -> None:
        """Unwatch, kill and remove an invocation's cgroup (teardown, interrupts), and its /tmp
        and /dev/shm (its tasks are gone: the sandbox's pid namespace ended with the client)."""
        for folder in self._scratch.pop(inv, {}).values():
            shutil.rmtree(folder, ignore_errors=True)   # by descriptors: no link is followed
        cg = self._cgroups.pop(inv, None)
        if cg is not None:
            try:
                collector.unwatch_cgroup(inv)
            finally:
                cg.remove()

    def forget(self, s: Scenario) -> None:
        self._programs.pop(s.id, None)
        self._services.pop(s.id, None)

    def close(self, collector: Collector | None) -> None:
        if collector is not None:
            for inv in list(self._cgroups):
                self.abandon(collector, inv)
        remove_parents(self.layout)
