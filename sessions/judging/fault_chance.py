"""Did an armed fault get its chance? Judged from the endpoint's and the proxy's records: an
unfired fault that had its chance makes the attempt invalid (the lab's failure, not the client's);
one the client never reached is the client's doing."""

# BURST_S and WIRE_KINDS are the fault vocabulary's (the proxy's), reached through the spec,
# which judging may import
from sessions.spec.contract import Thresholds, Vocabulary
from sessions.spec.scenario_faults import BURST_S, LAB_KINDS, ONE_SHOT, WIRE_KINDS, armed
from sessions.stream.compat import BOUND_REQUEST_EVENTS, OLD_TRANSFER_KEY
from sessions.stream.events import ServerRecord
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence

# The verifier's figure giving the watched input's sha256 (docs/tasks.md): the digest a
# server's faults are armed for, which its transfers' `started` records name
INPUT_DIGEST = "source_sha256"


def input_digest(ev: ScenarioEvidence) -> str | None:
    """The watched input's sha256, as the verifier reported it (what endpoint faults are armed
    for); None when it reports none."""
    for v in [ev.before, *(i.verifier for i in ev.invocations.values())]:
        digest = v.fields.get(INPUT_DIGEST) if v is not None else None
        if isinstance(digest, str) and digest:
            return digest
    return None


def could_fire(fault: dict, inv, source_size: int, t: Thresholds,
               digest: str | None = None) -> bool:
    """Did an armed fault get its chance in an invocation (its InvocationEvidence, or None)?

    Either no correct client could have triggered it (the scenario's mistake: past the
    transfer's size, or past what a correct client sends up, the input and the contract's
    request_overhead_bytes), or this client did what triggers it: the fault's transfer got past
    its byte offset or lasted past its time, arrived complete (reject) and matching its digest
    (crash); the wire carried more than its byte offset (or anything, or more than a bandwidth
    burst) in its direction. An unfired fault that had its chance makes the attempt invalid;
    one the client never reached is the client's doing."""
    w, reach = t.names, t.request_overhead_bytes
    after = fault.get("after_bytes")
    if after is not None and after > source_size:
        return True
    if fault.get("at_byte") is not None and fault.get("direction", "up") == "up" \
            and reach and fault["at_byte"] >= source_size + reach:
        return True
    if inv is None:
        return False
    if fault["kind"] in WIRE_KINDS:
        return _wire_reached(fault, inv)
    if fault["kind"] in LAB_KINDS:   # the client wrote that much to its target
        written = inv.final.counters.get("target_write_bytes") if inv.final else None
        return written is not None and written >= fault["after_bytes"]
    # The endpoint strikes only transfers of the watched input, from the k-th on (the fault's
    # `transfer` key; an old archive's word for it is compat's) until it fires: did any reach it?
    transfers = [u for u in inv.endpoint_events(w.started)
                 if digest is None or u.fields.get("digest") == digest]
    k = fault.get("transfer", fault.get(OLD_TRANSFER_KEY, 1))
    chances = transfers[k - 1:] if digest is not None else transfers[k - 1:k]
    return any(_transfer_reached(fault, inv, start, w) for start in chances)


def _transfer_reached(fault: dict, inv, start: ServerRecord, w: Vocabulary) -> bool:
    conn = start.fields.get("conn")
    ends = [r for r in inv.endpoint if r.fields.get("conn") == conn
            and r.event in (w.closed, w.refused) and r.t_ns >= start.t_ns]
    closed = [r for r in ends if r.event == w.closed]
    consumed = closed[0].fields.get(w.bytes, 0) if closed else 0
    complete = consumed >= start.fields.get("length", 0)
    if fault.get("after_bytes") is not None:
        return consumed >= fault["after_bytes"]
    if fault.get("after_ms") is not None:
        lasted = (ends[0].t_ns - start.t_ns) if ends else 0
        return lasted >= fault["after_ms"] * 1_000_000
    if fault["kind"] == "crash":
        return complete and not any(r.fields.get("reason") == w.mismatch for r in ends)
    return complete   # reject: a complete payload


def _wire_reached(fault: dict, inv) -> bool:
    key = "bytes_up" if fault.get("direction", "up") == "up" else "bytes_down"
    if fault["kind"] in ONE_SHOT and _bound(fault, inv):
        # bound to a request (the fault proxy's `bind`): its chance is that request carrying the
        # fault's offset, counted from its request line (up) or from the answers' offset then
        # (down)
        closed = {r.fields.get("conn"): r.fields.get(key, 0) for r in inv.proxy
                  if r.event == "connection_closed"}
        for u in (r for r in inv.proxy if r.event in BOUND_REQUEST_EVENTS):
            f = u.fields
            at = (f.get("start", 0) if key == "bytes_up" else f.get("down_base", 0)) \
                + fault["at_byte"]
            if (key == "bytes_down" or f.get("end") is None or at < f["end"]) \
                    and closed.get(f.get("conn"), 0) > at:
                return True
        return False
    carried = max((r.fields.get(key, 0) for r in inv.proxy if r.event == "connection_closed"),
                  default=0)
    if fault.get("at_byte") is not None:
        return carried > fault["at_byte"]
    if fault["kind"] == "bandwidth":
        return carried > max(1, fault["bytes_per_s"] * BURST_S)
    return carried > 0


def _bound(fault: dict, inv) -> bool:
    """Was this wire fault armed for one request only (the proxy's fault_armed)?"""
    return any(r.event == "fault_armed" and (r.fields.get("bind") or r.fields.get("digest"))
               and r.fields.get("kind") == fault["kind"]
               and r.fields.get("direction") == fault.get("direction", "up") for r in inv.proxy)


def struck_refused(inv: InvocationEvidence, w: Vocabulary) -> list[tuple[ServerRecord, str]]:
    """The proxy's fired faults that struck a request the endpoint refused without starting a
    transfer, each with the endpoint's reason. The proxy binds a fault to a request line by the
    task's pattern; the server alone knows it refused that line (a length over its limit, say),
    and a client that sent it spent the fault a real transfer was owed. The endpoint's
    connection is the proxy's by the port: the proxy's upstream_port is the endpoint's peer_port
    (a server that records no peer_port: none is found, and nothing is held against anyone)."""
    upstream = {r.fields.get("conn"): r.fields.get("upstream_port") for r in inv.proxy
                if r.event == "upstream_connected"}
    opened: dict[object, object] = {}   # endpoint conn by its peer port (the latest)
    for r in inv.endpoint:
        if r.event == "connection_opened" and r.fields.get("peer_port") is not None:
            opened[r.fields["peer_port"]] = r.fields.get("conn")
    started = {r.fields.get("conn") for r in inv.endpoint_events(w.started)}
    refused = {r.fields.get("conn"): str(r.fields.get("reason", "refused"))
               for r in inv.endpoint_events(w.refused)}
    out = []
    for r in inv.proxy:
        if r.event != "fault_fired" or r.fields.get("kind") not in ONE_SHOT:
            continue
        conn = opened.get(upstream.get(r.fields.get("conn")))
        if conn is not None and conn in refused and conn not in started:
            out.append((r, refused[conn]))
    return out


def fired_records(inv: InvocationEvidence) -> list[ServerRecord]:
    """fault_fired records from the endpoint, the wire proxy and the lab (its faults on a
    target) of one invocation."""
    return [r for r in inv.endpoint + inv.proxy + inv.records.get("lab", [])
            if r.event == "fault_fired"]


def unfired_faults(ev: ScenarioEvidence) -> list[dict]:
    """Armed faults with no fault_fired record from the component that injects them."""
    unfired = []
    for fault in armed(ev.started.faults):
        inv = ev.invocations.get(fault["invocation"])
        fired = fired_records(inv) if inv else []
        if not any(r.fields.get("id") == fault["id"] or _same_fault(r, fault) for r in fired):
            unfired.append(fault)
    return unfired


def _same_fault(record: ServerRecord, fault: dict) -> bool:
    # The endpoint names its fault by id; the proxy by kind and direction.
    return (record.server == "proxy" and record.fields.get("kind") == fault["kind"]
            and record.fields.get("direction") == fault.get("direction"))
