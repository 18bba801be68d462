"""Readings of one invocation's evidence that several clauses share."""

import collections
import contextlib
import ipaddress
import os

from sessions.judging.judgement import Judgement, unknown
from sessions.spec.contract import Vocabulary
from sessions.stream.events import ClientLaunched, FileObserved, ProcessObserved
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence

LAB_HOST = "127.0.0.1"   # where the lab's servers listen, in the lab's own network
AT_FDCWD = -100
PATH_READ_MAX = 255   # the BPF program reads at most this many bytes of a path (path[256])
# File events that change where a process's paths lead, no file (FileObserved.writes is false)
MOVES = ("chdir", "fchdir", "dup")
# Metadata changes by descriptor: the kernel sends them only when the file behind the
# descriptor is the source's (probes/bcc/abi.py FileOp), and they name no path
SOURCE_BY_DESCRIPTOR = ("fchmod", "fchown", "futimes", "fsetxattr", "fremovexattr",
                        "ftruncate", "fallocate")


def invocations(ev: ScenarioEvidence) -> list[InvocationEvidence]:
    return [ev.invocations[n] for n in sorted(ev.invocations)]


def counter(inv: InvocationEvidence, name: str) -> int | None:
    return inv.final.counters.get(name) if inv.final else None


def consumed_bytes(inv: InvocationEvidence, names: Vocabulary) -> int:
    """The payload bytes the endpoint says it took in an invocation (its `closed` records)."""
    return sum(r.fields.get(names.bytes, 0) for r in inv.endpoint_events(names.closed))


def blind(ev: ScenarioEvidence, inv: InvocationEvidence, names: Vocabulary) -> str | None:
    """Defence in depth: the endpoint consumed payload the kernel never saw the client send
    (or the wire never carried): one of the views is incomplete, so no kernel clause passes."""
    consumed, endpoint = consumed_bytes(inv, names), endpoint_name(ev)
    sent = counter(inv, "sock_sent_bytes")
    if sent is not None and consumed > sent:
        return (f"invocation {inv.n}: the {endpoint} consumed {consumed:,} payload bytes but the "
                f"kernel saw the client send {sent:,}: the kernel view is incomplete")
    if inv.packet_stats is not None and not inv.packet_stats.error and not inv.proxy:
        wire = inv.wire_bytes_to(ev.started.endpoint_port)
        if consumed > wire:
            return (f"invocation {inv.n}: the {endpoint} consumed {consumed:,} payload bytes but "
                    f"the wire carried {wire:,} to it: the evidence disagrees")
    return None


def given_ports(ev: ScenarioEvidence, inv: InvocationEvidence) -> set[int | None]:
    """The port(s) the client was given in an invocation: the endpoint's, or the fault proxy's
    when one stands in front of it (the endpoint's own is then not the client's to use). A
    proxy record without its port puts None in the set, which no destination matches."""
    return ({r.fields.get("port") for r in inv.proxy if r.event == "listening"}
            or {ev.started.endpoint_port})


def endpoint_of(ev: ScenarioEvidence) -> str | None:
    """The name of the server the client may contact (None: the task has none)."""
    return next((name for name, role in ev.started.roles.items() if role == "endpoint"), None)


def endpoint_name(ev: ScenarioEvidence) -> str:
    """What the reasons call the server the client may contact: its name in the task."""
    return endpoint_of(ev) or "no server"


def proxy_upstream_ports(inv: InvocationEvidence) -> set[int | None]:
    """The local ports of the fault proxy's own connections to the endpoint (its SYNs on the
    wire are evlab's, not the client's)."""
    return {r.fields.get("upstream_port") for r in inv.proxy if r.event == "upstream_connected"}


def same_host(address: str | None, host: str = LAB_HOST) -> bool:
    """address is host in any family: 127.0.0.1 is also ::ffff:127.0.0.1, the IPv4-mapped form
    a dual-stack IPv6 socket (the JVM's default) connects to."""
    if address is None:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip) == host


def is_given(address: str | None, port: int | None, ports: set[int | None]) -> bool:
    """A destination is the one the client was given (given_ports), in any family."""
    return same_host(address) and port in ports


def probe_only(call: dict) -> bool:
    """A socket-layer call that contacts no one: a datagram socket's connect() sends nothing
    (glibc's getaddrinfo connects one to each candidate address to pick a source address,
    RFC 6724). What such a socket sends is a flow of its own, judged as every flow is."""
    return call["kind"] == "connect" and bool(call.get("datagram"))


def probed_only(inv: InvocationEvidence) -> set[tuple[str, int]]:
    """Destinations the socket layer saw only datagram connect()s to: a connect() event to one
    of them is no contact (connect() itself cannot tell a datagram socket from a stream one)."""
    calls = inv.egress_summary.calls if inv.egress_summary is not None else ()
    probed = {(c["address"], c["port"]) for c in calls if probe_only(c)}
    return probed - {(c["address"], c["port"]) for c in calls if not probe_only(c)}


EINPROGRESS = -115   # a non-blocking connect under way: not a failure (connect(2))


def connect_outcome(result: int) -> str:
    """How a connect(2) ended, in words: "" when it connected, "in progress" when it was
    non-blocking and left under way (EINPROGRESS), else "failed (ERRNO)"."""
    if result == 0:
        return ""
    return "in progress, non-blocking" if result == EINPROGRESS else f"failed ({result})"


def mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"




def swamped(ev: ScenarioEvidence) -> str | None:
    """Evidence the client flooded past what evlab keeps of an invocation (sessions/lab/caps.py:
    the servers' records, captured segments): no clause can pass on what was not kept."""
    for inv in ev.invocations.values():
        capped = [r.fields for r in inv.harness if r.event == "evidence_capped"]
        if capped:
            return (f"invocation {inv.n}: the client flooded evlab's view, so its evidence is "
                    "incomplete: " + "; ".join(
                        f"{c.get('dropped', 0):,} {c.get('what', '?')} beyond the "
                        f"{c.get('cap', 0):,} kept" for c in capped))
    return None


def unjudgeable(ev: ScenarioEvidence) -> Judgement | None:
    """Why no clause of a task's own can be judged at all: the client flooded evlab's view
    (its doing), or no invocation ran (the harness's); None when it can."""
    flooded = swamped(ev)
    if flooded:
        return unknown(flooded)
    if not ev.invocations:
        return unknown("no invocation ran", failure_class="harness")
    return None


def wire_lost(inv: InvocationEvidence) -> str | None:
    """Why the wire view of an invocation is incomplete (its capture stopped early), if it is."""
    stats = inv.packet_stats
    if stats is not None and stats.error:
        return (f"invocation {inv.n}: the packet capture stopped ({stats.error}): the wire view "
                "is incomplete")
    return None


def under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


class Places:
    """Where each process of the tree is: its working directory (the launch directory,
    inherited at fork, changed by chdir/fchdir) and what its descriptors were opened on
    (inherited at fork), so relative and *at() paths resolve to where they really are."""

    def __init__(self, pid: int, home: str):
        self.cwd: dict[int, str | None] = {pid: home}   # a pid never seen forked: unknown
        self.fds: dict[int, dict[int, str]] = {pid: {}}

    def fork(self, parent: int, child: int) -> None:
        self.cwd[child] = self.cwd.get(parent)
        self.fds[child] = dict(self.fds.get(parent, {}))

    def resolve(self, pid: int, path: str, dfd: int) -> str | None:
        """An absolute path, or None when it cannot be known: unreadable or cut at the kernel's
        buffer, or relative to a directory we could not follow."""
        if not path or len(os.fsencode(path)) >= PATH_READ_MAX:
            return None
        if os.path.isabs(path):
            return os.path.normpath(path)
        base = self.cwd.get(pid) if dfd == AT_FDCWD else self.fds.get(pid, {}).get(dfd)
        return os.path.normpath(os.path.join(base, path)) if base else None

    def apply(self, e: FileObserved) -> None:
        """What a file event changes: a descriptor opened or copied, the working directory
        changed."""
        if e.op == "open" and e.fd is not None and e.fd >= 0:
            path = self.resolve(e.pid, e.path, e.dfd)
            if path:
                self.fds.setdefault(e.pid, {})[e.fd] = path
        elif e.op == "chdir":
            self.cwd[e.pid] = self.resolve(e.pid, e.path, e.dfd)
        elif e.op == "fchdir":
            self.cwd[e.pid] = self.fds.get(e.pid, {}).get(e.dfd)
        elif e.op == "dup" and e.fd is not None:   # a folder's descriptor copied
            fds = self.fds.setdefault(e.pid, {})
            fds.pop(e.fd, None)
            if e.dfd in fds:
                fds[e.fd] = fds[e.dfd]


Resolved = list[tuple[FileObserved, list[str | None]]]
# The invocations resolved lately, by identity and their evidence's extent so far: the judge's
# predicates, its risk scan, the report and the file-effects view each ask for every
# invocation in turn (one kept invocation was recomputed at nearly every call).
_kept: collections.OrderedDict[tuple[int, int, int], tuple[ClientLaunched, Resolved]] = \
    collections.OrderedDict()
KEPT_MAX = 64


def resolved_files(inv: InvocationEvidence, launched: ClientLaunched) -> Resolved:
    """Each file event of an invocation (chdir aside) with its path, and a rename's or a
    link's old path after it (a symbolic link's text is not a path of the client's), resolved
    where its process was then (None: not known)."""
    key = (id(inv), len(inv.files), len(inv.processes))
    hit = _kept.get(key)   # the dashboard's thread may ask too: a miss only computes again
    if hit is not None and hit[0] is launched:
        return hit[1]
    out = _resolve(inv, launched)
    _kept[key] = (launched, out)
    while len(_kept) > KEPT_MAX:
        with contextlib.suppress(KeyError):   # the other thread took it first
            _kept.popitem(last=False)
    return out


def _resolve(inv: InvocationEvidence, launched: ClientLaunched) -> Resolved:
    places = Places(launched.pid, launched.cwd)
    # The launched command's exec (the first one) is where the client's own tree begins; in
    # the sandbox that is another pid than ClientLaunched's (its launcher chain), started in
    # the same working directory (bwrap --chdir), with no fork of the chain seen before it.
    first = next((p for p in inv.processes if p.kind == "exec"), None)
    if first is not None and first.pid not in places.cwd:
        places.fork(launched.pid, first.pid)
    forks = [p for p in inv.processes if p.kind == "fork"]
    timeline: list[ProcessObserved | FileObserved] = sorted(
        [*forks, *inv.files], key=lambda e: (e.t_ns, e.seq))
    out = []
    for e in timeline:
        if isinstance(e, ProcessObserved):
            if e.child_pid is not None:   # a child never named: no pid ever looks it up
                places.fork(e.pid, e.child_pid)
            continue
        if e.op not in MOVES:
            paths = [places.resolve(e.pid, e.path, e.dfd)]
            if e.op in ("rename", "link"):
                paths.append(places.resolve(e.pid, e.old_path or "", e.old_dfd))
            out.append((e, paths))
        places.apply(e)
    return out
