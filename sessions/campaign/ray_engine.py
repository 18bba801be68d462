"""The Ray engine: the same attempts on a Ray cluster of evlab nodes.

Each node that offers the custom resource `evlab` (1 per node: `ray start ... --resources
'{"evlab": 1}'`, on a machine where `make setup` has run and as root) gets `jobs` long-lived
actors pinned to it (--jobs, else one per two of the node's CPUs), each holding one lab session
(its own process, BPF compile and lab networks): `jobs` attempts at a time per node. The
clients' lab networks keep Ray's own ports (GCS, raylet, agents: unauthenticated, root) out of
their reach.
A client's files go once per client into the object store, with its task's folder when the task
is one of the user's (a built-in task is every node's own); the node lays them out and records
the sha256 of what it runs, and the driver refuses an attempt whose task files differ.
An actor that dies (its node lost, its process killed) costs the
attempt it was running: reported as lost (invalid, never the client's), run again within the
campaign's retries elsewhere, never dropped.
"""

import collections
import dataclasses
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessions.campaign.jobs import Job
from sessions.campaign.node import Node
from sessions.campaign.shipping import Files, with_task
from sessions.lab.session import Cancelled, Options

RESOURCE = "evlab"
NEEDS = ("--ray needs Ray on this machine and on every node: `make setup` installs it "
         "(evlab's venv: pip install -e '.[ray]', Ray 2.60.0)")
POLL_S = 1.0          # how often a dispatch loop looks for results and for new nodes
START_S = 300.0       # how long a node's lab may take to open (imports, BPF compile)
NODE_ERRORS = 2       # a node whose lab raises this many times in a row is given no more


class EngineError(RuntimeError):
    """The cluster cannot run the campaign (no Ray, no address, no evlab node); one line."""


def _ray():
    try:
        import ray
    except ImportError:
        raise EngineError(NEEDS) from None
    return ray


class NodeLab(Node):
    """The actor on one node (made a Ray actor class in RayEngine), named by its Ray node."""

    def __init__(self, options: Options):
        import ray
        node = ray.get_runtime_context().get_node_id()
        super().__init__(options, f"{node[:8]}@{ray.util.get_node_ip_address()}")

    def opened(self) -> str:
        """Answers once the lab is open (a Ray actor's constructor runs before any call)."""
        return self.name


class RayEngine:
    _cancelled = False     # cancel(): dispatch nothing more

    def __init__(self, address: str, options: Options, jobs: int | None = None):
        ray = _ray()
        self.ray, self.options, self.jobs = ray, options, jobs
        self.name = f"ray {address}"
        _reachable(address)
        try:
            ray.init(address=address,
                     log_to_driver=False, logging_level="ERROR", configure_logging=False)
        except Exception as e:   # noqa: BLE001 - Ray's own errors: no cluster, refused
            raise EngineError(f"--ray {address}: cannot join the cluster "
                              f"({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
        # a node's lab opens on a built-in task: a folder of the user's comes with the attempts
        self._opening = dataclasses.replace(
            options, task="" if Path(options.task).is_absolute() else options.task)
        self._actor_class = ray.remote(num_cpus=0, resources={RESOURCE: 1},
                                       max_restarts=0)(NodeLab)
        self.actors: dict[str, Any] = {}          # lab -> actor handle (Ray's, untyped)
        self.names: dict[str, str] = {}           # lab -> its node's name
        self.labs: dict[str, list[str]] = {}      # node id -> its labs ("<node id>/<k>")
        self.unready: dict[str, str] = {}         # node name -> why its lab did not open
        self._starting: dict[object, str] = {}    # a new actor's opened() call -> its lab
        self._spawn_missing()
        # Every node's lab opens (imports, BPF compile) before the first attempt runs, so no
        # attempt shares the machine's CPUs with another node's start-up.
        self._ready_at_start = self._ready(START_S)
        if not self._ready_at_start:
            self.close()
            why = "; ".join(f"{n}: {r}" for n, r in self.unready.items())
            raise EngineError(f"--ray {address}: no live node offering the resource "
                              f"{RESOURCE!r} could open its lab"
                              + (f" ({why})" if why else "; start evlab nodes with `ray start "
                                 f"--address ... --resources '{{\"{RESOURCE}\": 1}}'` "
                                 "(docs/campaign.md)"))

    def _evlab_nodes(self) -> dict[str, tuple[str, int]]:
        """Live nodes offering the resource: node id -> (its name, as NodeLab names itself;
        its labs: --jobs, else one per two of its CPUs)."""
        return {n["NodeID"]: (f"{n['NodeID'][:8]}@{n.get('NodeManagerAddress', '?')}",
                              self.jobs or max(1, int(n["Resources"].get("CPU", 0)) // 2))
                for n in self.ray.nodes()
                if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1}

    def _spawn_missing(self) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        for node, (name, jobs) in self._evlab_nodes().items():
            if node in self.labs:
                continue
            self.labs[node] = [f"{node}/{k}" for k in range(1, jobs + 1)]
            # Each lab takes its share of the node's one `evlab` (Ray keeps 4 decimals).
            share = int(10_000 / jobs) / 10_000
            for lab in self.labs[node]:
                actor = self._actor_class.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
                    resources={RESOURCE: share}).remote(self._opening)
                self.actors[lab], self.names[lab] = actor, name
                self._starting[actor.opened.remote()] = lab

    def _ready(self, timeout_s: float) -> list[str]:
        """The labs that have opened since the last look (waiting up to timeout_s for all of
        them); a lab that could not open is dropped and said why."""
        if not self._starting:
            return []
        done, late = self.ray.wait(list(self._starting), num_returns=len(self._starting),
                                   timeout=timeout_s)
        ready = []
        if timeout_s > 0:   # waited for them: one still opening is given no more
            for ref in late:
                lab = self._starting.pop(ref)
                self.unready[self.names[lab]] = f"its lab did not open within {timeout_s:.0f} s"
                self._drop(lab)
        for ref in done:
            lab = self._starting.pop(ref)
            try:
                self.ray.get(ref)
                ready.append(lab)
            except self.ray.exceptions.RayError as e:
                self.unready[self.names[lab]] = _first_line(e)
                self._drop(lab)
        return ready

    def run(self, jobs: list[Job], files: Callable[[str], Files], sink) -> None:
        """Dispatch until every job finished or was given up; a lost one goes first again."""
        ray = self.ray
        queue = collections.deque(jobs)
        refs: dict[str, object] = {}              # client -> its files in the object store
        running: dict[object, tuple[Job, str]] = {}
        idle, self._ready_at_start = self._ready_at_start, []
        errors: dict[str, int] = {}               # lab -> errors in a row
        looked = time.monotonic()
        while queue or running:
            if self._cancelled:   # what still runs on the nodes ends at close()
                raise Cancelled()
            if time.monotonic() - looked > POLL_S * 5:   # nodes that joined since
                looked = time.monotonic()
                self._spawn_missing()
            idle += self._ready(0)
            while queue and idle:
                job, lab = queue.popleft(), idle.pop(0)
                if job.client not in refs:
                    refs[job.client] = ray.put(with_task(files(job.client), job.task))
                running[self.actors[lab].run.remote(job, refs[job.client])] = (job, lab)
                sink.dispatched(job, self.names[lab])
            if not running and not idle and self._starting:
                idle += self._ready(START_S)
                continue
            if not running:
                for job in queue:
                    sink.lost(job, "-", "no evlab node left in the cluster", retry=False)
                return
            ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            for ref in ready:
                job, lab = running.pop(ref)
                try:
                    piece = ray.get(ref)
                except ray.exceptions.RayTaskError as e:   # the lab raised
                    why = f"node error: {_first_line(e.cause if e.cause else e)}"
                    errors[lab] = errors.get(lab, 0) + 1
                    if errors[lab] < NODE_ERRORS:   # maybe the client's doing: keep it
                        idle.append(lab)
                    else:
                        self._drop(lab)
                except ray.exceptions.RayError as e:       # actor, worker or node died
                    self._drop(lab)
                    why = f"node lost: {_first_line(e)}"
                else:
                    sink.finished(job, piece)
                    idle.append(lab)
                    errors.pop(lab, None)
                    continue
                if sink.lost(job, self.names[lab], why):
                    queue.appendleft(job.again())

    def cancel(self) -> None:
        """From another thread: run() dispatches nothing more and raises Cancelled at its next
        poll (within POLL_S)."""
        self._cancelled = True

    def _drop(self, lab: str) -> None:
        actor = self.actors.pop(lab, None)
        if actor is not None:
            try:
                self.ray.kill(actor)
            except Exception:   # noqa: BLE001 - already gone with its node
                pass

    def close(self) -> None:
        """Close every lab (its session's teardown), then leave the cluster."""
        ray = self.ray
        try:
            closing = [a.close.remote() for a in self.actors.values()]
            ray.wait(closing, num_returns=len(closing), timeout=30)
            for lab in list(self.actors):
                self._drop(lab)
        finally:
            ray.shutdown()


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """Refuse an address whose head does not answer: ray.init() would retry for ever."""
    from ray._private.services import canonicalize_bootstrap_address
    try:
        resolved = canonicalize_bootstrap_address(address)
    except Exception as e:   # noqa: BLE001 - Ray's own: no cluster found for "auto"
        raise EngineError(f"--ray {address}: no Ray cluster found ({_first_line(e)})") from None
    if resolved is None:
        raise EngineError(f"--ray {address}: no running Ray cluster to join (start one: "
                          "docs/campaign.md)")
    host, _, port = resolved.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as e:
        raise EngineError(f"--ray {address}: the Ray head at {resolved} does not answer "
                          f"({getattr(e, 'strerror', None) or e})") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:200]
