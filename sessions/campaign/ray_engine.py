"""The Ray engine: the same attempts on a Ray cluster of evlab nodes.

Each node that offers the custom resource `evlab` (1 per node: `ray start ... --resources
'{"evlab": 1}'`, on a machine where `make setup` has run and as root) gets one long-lived actor
pinned to it, holding one lab session: one grade at a time per node, one BPF compile per node.
A client's files go once per client into the object store; the node lays them out and records
the sha256 of what it runs. An actor that dies (its node lost, its process killed) costs the
attempt it was running: reported as lost (invalid, never the client's), run again within the
campaign's retries elsewhere, never dropped.
"""

import collections
import socket
import time
from collections.abc import Callable
from typing import Any

from sessions.campaign.jobs import Job
from sessions.campaign.node import Node
from sessions.campaign.shipping import Files
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

    def __init__(self, address: str, options: Options):
        ray = _ray()
        self.ray, self.options = ray, options
        self.name = f"ray {address}"
        _reachable(address)
        try:
            ray.init(address=address,
                     log_to_driver=False, logging_level="ERROR", configure_logging=False)
        except Exception as e:   # noqa: BLE001 - Ray's own errors: no cluster, refused
            raise EngineError(f"--ray {address}: cannot join the cluster "
                              f"({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
        self._actor_class = ray.remote(num_cpus=0, resources={RESOURCE: 1},
                                       max_restarts=0)(NodeLab)
        self.actors: dict[str, Any] = {}          # node id -> actor handle (Ray's, untyped)
        self.names: dict[str, str] = {}
        self.unready: dict[str, str] = {}         # node name -> why its lab did not open
        self._starting: dict[object, str] = {}    # a new actor's name() call -> node id
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

    def _evlab_nodes(self) -> dict[str, str]:
        """Live nodes offering the resource: node id -> its name (as NodeLab names itself)."""
        return {n["NodeID"]: f"{n['NodeID'][:8]}@{n.get('NodeManagerAddress', '?')}"
                for n in self.ray.nodes()
                if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1}

    def _spawn_missing(self) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        for node, name in self._evlab_nodes().items():
            if node in self.actors or node in self.names:
                continue
            actor = self._actor_class.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                node, soft=False)).remote(self.options)
            self.actors[node], self.names[node] = actor, name
            self._starting[actor.opened.remote()] = node

    def _ready(self, timeout_s: float) -> list[str]:
        """The nodes whose lab has opened since the last look (waiting up to timeout_s for
        all of them); a node whose lab could not open is dropped and said why."""
        if not self._starting:
            return []
        done, late = self.ray.wait(list(self._starting), num_returns=len(self._starting),
                                   timeout=timeout_s)
        ready = []
        if timeout_s > 0:   # waited for them: one still opening is given no more
            for ref in late:
                node = self._starting.pop(ref)
                self.unready[self.names[node]] = f"its lab did not open within {timeout_s:.0f} s"
                self._drop(node)
        for ref in done:
            node = self._starting.pop(ref)
            try:
                self.ray.get(ref)
                ready.append(node)
            except self.ray.exceptions.RayError as e:
                self.unready[self.names[node]] = _first_line(e)
                self._drop(node)
        return ready

    def run(self, jobs: list[Job], files: Callable[[str], Files], sink) -> None:
        """Dispatch until every job finished or was given up; a lost one goes first again."""
        ray = self.ray
        queue = collections.deque(jobs)
        refs: dict[str, object] = {}              # client -> its files in the object store
        running: dict[object, tuple[Job, str]] = {}
        idle, self._ready_at_start = self._ready_at_start, []
        errors: dict[str, int] = {}               # node -> errors in a row
        looked = time.monotonic()
        while queue or running:
            if self._cancelled:   # what still runs on the nodes ends at close()
                raise Cancelled()
            if time.monotonic() - looked > POLL_S * 5:   # nodes that joined since
                looked = time.monotonic()
                self._spawn_missing()
            idle += self._ready(0)
            while queue and idle:
                job, node = queue.popleft(), idle.pop(0)
                if job.client not in refs:
                    refs[job.client] = ray.put(files(job.client))
                running[self.actors[node].run.remote(job, refs[job.client])] = (job, node)
                sink.dispatched(job, self.names[node])
            if not running and not idle and self._starting:
                idle += self._ready(START_S)
                continue
            if not running:
                for job in queue:
                    sink.lost(job, "-", "no evlab node left in the cluster", retry=False)
                return
            ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            for ref in ready:
                job, node = running.pop(ref)
                try:
                    piece = ray.get(ref)
                except ray.exceptions.RayTaskError as e:   # the node's lab raised
                    why = f"node error: {_first_line(e.cause if e.cause else e)}"
                    errors[node] = errors.get(node, 0) + 1
                    if errors[node] < NODE_ERRORS:   # maybe the client's doing: keep it
                        idle.append(node)
                    else:
                        self._drop(node)
                except ray.exceptions.RayError as e:       # actor, worker or node died
                    self._drop(node)
                    why = f"node lost: {_first_line(e)}"
                else:
                    sink.finished(job, piece)
                    idle.append(node)
                    errors.pop(node, None)
                    continue
                if sink.lost(job, self.names[node], why):
                    queue.appendleft(job.again())

    def cancel(self) -> None:
        """From another thread: run() dispatches nothing more and raises Cancelled at its next
        poll (within POLL_S)."""
        self._cancelled = True

    def _drop(self, node: str) -> None:
        actor = self.actors.pop(node, None)
        if actor is not None:
            try:
                self.ray.kill(actor)
            except Exception:   # noqa: BLE001 - already gone with its node
                pass

    def close(self) -> None:
        """Close every node's lab (its session's teardown), then leave the cluster."""
        ray = self.ray
        try:
            closing = [a.close.remote() for a in self.actors.values()]
            ray.wait(closing, num_returns=len(closing), timeout=30)
            for node in list(self.actors):
                self._drop(node)
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
