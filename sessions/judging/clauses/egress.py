"""destination-only: the client contacts only the task's endpoint (nothing, when it has none).
Decided by the socket hooks on the client's cgroup (every connect and datagram, whatever path
produced it), with the connect() events, the decoys' records and the wire as cross-checks."""

from dataclasses import dataclass, field

from sessions.judging.judgement import ENVIRONMENT, PASS, Judgement, failed, seqs, unknown
from sessions.judging.views import (
    LAB_HOST,
    endpoint_name,
    endpoint_of,
    given_ports,
    invocations,
    is_given,
    probe_only,
    probed_only,
    proxy_upstream_ports,
    wire_lost,
)
from sessions.spec.contract import Thresholds
from sessions.stream.events import EgressSummary
from sessions.stream.evidence import ScenarioEvidence

Destination = tuple[str, str, int]   # protocol, address, port
LOAD_HOST = "127.0.0.1"   # where evlab's load connects from, in the lab (sessions/lab/load.py)


def _where(address: str | None, port: int | None) -> str:
    return f"[{address}]:{port}" if ":" in str(address) else f"{address}:{port}"


def _egress_line(dest: Destination, calls: list[dict], flows: list[dict]) -> str:
    """e.g. "1 UDP datagram (39 bytes) to 127.0.0.53:53 from pid 4121"."""
    protocol, address, port = dest
    where = _where(address, port)
    n = sum(c["calls"] for c in calls)
    refused = sum(c["refused"] for c in calls) + sum(f["dropped"] for f in flows)
    sent = sum(f["bytes"] for f in flows)
    kinds = {c["kind"] for c in calls}
    what = (f"{n} {protocol.upper()} datagram{'s' * (n != 1)}" if kinds == {"sendmsg"}
            else f"{n} {protocol.upper()} connect{'s' * (n != 1)}" if calls
            else f"{sum(f['packets'] for f in flows)} {protocol.upper()} packet(s)")
    pids = sorted({c["pid"] for c in calls})
    return (f"{what} ({sent:,} bytes) to {where}"
            + (f" from pid {', '.join(map(str, pids))}" if pids else "")
            + (f", refused ({refused}x EPERM/dropped)" if refused else ""))


def _bad_egress(summary: EgressSummary, ports: set[int | None],
                answered: set[int]) -> dict[Destination, tuple[list[dict], list[dict]]]:
    """Destinations other than the endpoint, from the cgroup socket hooks' totals. Packets to
    the ports that opened connections to the endpoint (answered: evlab's load's source ports,
    and those the wire saw send a SYN to it), on the lab's loopback, answer those connections,
    which a server the client started on the endpoint's port accepted: no contact."""
    bad: dict[Destination, tuple[list[dict], list[dict]]] = {}
    for entry, kind in [(c, "calls") for c in summary.calls] + [(f, "flows")
                                                                for f in summary.flows]:
        if is_given(entry["address"], entry["port"], ports) or kind == "flows" and \
                entry["address"] == LOAD_HOST and entry["port"] in answered:
            continue
        calls, flows = bad.setdefault((entry["protocol"], entry["address"], entry["port"]),
                                      ([], []))
        (calls if kind == "calls" else flows).append(entry)
    # a destination only probed (datagram connect()s, nothing sent to it) was not contacted
    return {dest: (calls, flows) for dest, (calls, flows) in bad.items()
            if flows or not all(map(probe_only, calls))}


@dataclass
class _Seen:
    """What each view saw reach elsewhere than the endpoint, over a scenario's invocations."""

    bad: list = field(default_factory=list)          # connect() events
    decoys: list = field(default_factory=list)       # the decoys' connections
    syns: list = field(default_factory=list)         # SYNs on the wire
    lines: list = field(default_factory=list)        # the socket layer's, one line each
    untold: list = field(default_factory=list)       # connect()s that may have been probes
    connects: list = field(default_factory=list)     # every connect() event, cited on a pass
    egress: list = field(default_factory=list)       # the socket layer's records, cited


def _seen(ev: ScenarioEvidence) -> _Seen:
    seen = _Seen()
    for inv in invocations(ev):
        ports = given_ports(ev, inv)
        seen.connects += inv.connects
        seen.egress += [inv.egress_summary, *inv.egress]
        probed = probed_only(inv)
        others = [c for c in inv.connects if c.address is not None
                  and not is_given(c.address, c.port, ports) and (c.address, c.port) not in probed]
        seen.decoys += [r for r in inv.decoy if r.event == "connection_opened"]
        upstream = proxy_upstream_ports(inv) | inv.load_ports()   # evlab's own connections
        syns = [p for p in inv.packets if p.flags == "SYN" and p.dport not in ports
                and p.sport not in upstream]
        seen.syns += syns
        if inv.egress_summary is None:
            # connect() does not say whether the socket was a datagram one: only a SYN on the
            # wire makes it a contact
            sent = {(p.dst, p.dport) for p in syns}
            seen.untold += [c for c in others if (c.address, c.port) not in sent]
            others = [c for c in others if (c.address, c.port) in sent]
        else:
            # the ports that connected to the endpoint (a restarted service answers them)
            callers = inv.load_ports() | {p.sport for p in inv.packets
                                          if p.flags == "SYN" and p.dport in ports}
            seen.lines += [f"invocation {inv.n}: {_egress_line(dest, *found)}"
                           for dest, found in _bad_egress(inv.egress_summary, ports,
                                                          callers).items()]
        seen.bad += others
    return seen


def _client_opened(ev: ScenarioEvidence, inv) -> tuple[int, int]:
    """The endpoint's connections that were the client's, and those that were evlab's load's:
    told apart by the load's source ports; a server whose records name no peer port cannot
    tell them, so each request of the load it answered is one connection it took."""
    opened = [r for r in inv.endpoint if r.event == "connection_opened"]
    theirs = inv.load_conns()
    if inv.load and not any("peer_port" in r.fields for r in opened):
        loads = {name for name, target in ev.started.display.get("loads", {}).items()
                 if target == endpoint_of(ev)}
        answered = sum(r.event == "request" and r.fields.get("outcome") == "answered"
                       and r.fields.get("load") in loads for r in inv.load)
        return len(opened) - answered, answered
    return len(inv.endpoint_events("connection_opened")), len(theirs)


def destination_only(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    allowed = (LAB_HOST, ev.started.endpoint_port)
    seen = _seen(ev)
    if seen.bad or seen.decoys or seen.syns or seen.lines:
        where = sorted({f"{c.address}:{c.port}" for c in seen.bad}
                       | {f"{LAB_HOST}:{ev.started.decoy_port}" for _ in seen.decoys[:1]}
                       | {f"{p.dst}:{p.dport}" for p in seen.syns})
        seen_by = [name for name, hits in (("socket layer", seen.lines), ("connect()", seen.bad),
                                           ("decoy", seen.decoys), ("wire", seen.syns)) if hits]
        detail = "; ".join(seen.lines) if seen.lines else f"contacted {', '.join(where)}"
        return failed(f"{detail} besides the {endpoint_name(ev)} (seen by {', '.join(seen_by)})",
                      seqs(seen.egress, seen.bad, seen.decoys, seen.syns))
    invs = invocations(ev)
    wire_gaps = [why for why in map(wire_lost, invs) if why]
    if wire_gaps:
        return unknown("; ".join(wire_gaps), seqs([inv.packet_stats for inv in invs]), "harness")
    finals = [inv.final for inv in invs]
    summaries = [inv.egress_summary for inv in invs]
    if not invs or any(s is None for s in summaries):
        untold = sorted({_where(c.address, c.port) for c in seen.untold})
        probes = (f"; connect() to {', '.join(untold)}"
                " left nothing on the wire (a datagram socket's address probe, or a refused "
                "attempt: connect() alone cannot tell)" if seen.untold else "")
        return unknown("no socket-layer view of the client's cgroup: datagrams sent without "
                       "connect() and io_uring connects would be invisible; the decoy and the "
                       f"wire saw nothing{probes}", seqs(finals, seen.untold), ENVIRONMENT)
    # The socket hooks' totals are kept in the kernel: only destinations their tables could
    # not hold are missing (ring-buffer losses of other events do not matter here).
    lost = sum(f.counters.get("egress_lost", 0) for f in finals if f is not None)
    if lost:
        return unknown(f"egress totals incomplete ({lost} destination records lost)",
                       seqs(finals), "client")
    watched = [s for s in summaries if s is not None]   # every one of them, as checked above
    for inv, summary in zip(invs, watched, strict=True):
        opened, theirs = _client_opened(ev, inv)
        made = sum(c["calls"] for c in summary.calls
                   if c["kind"] == "connect" and not probe_only(c))
        if opened > made and not inv.proxy:
            besides = f" (besides {theirs} of evlab's load)" if theirs else ""
            return unknown(f"invocation {inv.n}: the {endpoint_name(ev)} accepted {opened} "
                           f"connection(s){besides} "
                           f"but the client's cgroup made {made} connect(s): the kernel view "
                           "is incomplete", seqs([summary], inv.endpoint))
    total = sum(c["calls"] for s in watched for c in s.calls if not probe_only(c))
    probed = sum(c["calls"] for s in watched for c in s.calls if probe_only(c))
    sent = sum(f["bytes"] for s in watched for f in s.flows)
    calls = (f"all {total} socket call(s) with a destination went to {allowed[0]}:{allowed[1]}"
             f" ({sent:,} bytes)" if total
             else "no socket call with a destination")
    if probed:
        calls += f" (beside {probed} datagram connect(s) that sent nothing: address probes)"
    return Judgement(PASS, f"{calls}, seen at the socket layer of its cgroup; the decoy saw "
                           "nothing", tuple(seqs(summaries, seen.connects)))
