"""The panes' lines: one short line per event worth watching live, and the pane it goes to.
(The evidence view shows every field instead: vocabulary.fields_line.)"""

from sessions.stream.events import (
    ClientClaim,
    ClientExited,
    ConnectObserved,
    EgressObserved,
    Event,
    PacketSeen,
    ProcessObserved,
    RiskFinding,
    ServerRecord,
    VerifierResult,
)

PACKETS, RECEIVER, CLAIMS = "packets", "receiver", "claims"
PANES = (PACKETS, RECEIVER, CLAIMS)
# a server record's fields worth a place on its line
RECORD_FIELDS = ("conn", "reason", "answer", "length", "payload_bytes", "peer_port", "port",
                 "bytes")


def pane_line(event: Event, t0: int) -> tuple[str, str] | None:
    """(pane, text) for an event the panes show; None for the rest."""
    at = f"{(event.t_ns - t0) / 1e9:8.3f}s"
    match event:
        case PacketSeen():
            return PACKETS, (f"{at} {_end(event.src, event.sport)}→{_end(event.dst, event.dport)}"
                             f" {event.flags} {event.payload_len}")
        case ServerRecord() if event.event != "payload_progress":
            detail = " ".join(f"{k}={v}" for k, v in event.fields.items() if k in RECORD_FIELDS)
            return RECEIVER, f"{at} {event.server} {event.event} {detail}".rstrip()
        case ConnectObserved():
            return RECEIVER, f"{at} kernel connect {event.address}:{event.port} → {event.result}"
        case EgressObserved():
            return RECEIVER, (f"{at} socket {event.kind} {event.protocol} "
                              f"{event.address}:{event.port} pid {event.pid}"
                              + (" REFUSED" if event.refused else ""))
        case ProcessObserved():
            return CLAIMS, f"{at} kernel {event.kind} pid {event.pid}"
        case ClientClaim():
            text = " ".join(f"{k}={v}" for k, v in event.claim.items())
            return CLAIMS, f"{at} inv {event.invocation} claim {text}"
        case ClientExited():
            return CLAIMS, (f"{at} inv {event.invocation} exit {event.exit_code}"
                            + (" (timed out, killed)" if event.timed_out else ""))
        case VerifierResult() if event.invocation:
            return CLAIMS, f"{at} verifier saved={event.saved} match={event.match}"
        case RiskFinding():
            return CLAIMS, f"{at} RISK {event.severity} {event.kind}: {event.detail}"
    return None


def _end(address: str, port: int) -> str:
    return f":{port}" if address in ("127.0.0.1", "::1") else f"{address}:{port}"
