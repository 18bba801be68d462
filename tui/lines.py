"""Which pane each event worth watching live goes to; its words are the reports' own
(sessions/output/vocabulary.py: event_line). The evidence view shows every field instead
(vocabulary.fields_line)."""

from sessions.output.vocabulary import event_line
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
from sessions.stream.operations import ProcessLife, SignalObserved, TruncateObserved

PACKETS, EVENTS, CLAIMS = "packets", "events", "claims"
PANES = (PACKETS, EVENTS, CLAIMS)


def pane_of(event: Event) -> str | None:
    """The pane an event goes to; None for the rest."""
    match event:
        case PacketSeen():
            return PACKETS
        case ServerRecord() if event.event != "payload_progress":
            return EVENTS
        case ConnectObserved() | EgressObserved():
            return EVENTS
        case ProcessLife(whose="own", signal=0):
            return None   # its own exit: the claims pane's kernel exit line already says it
        case SignalObserved() | TruncateObserved() | ProcessLife():
            return EVENTS
        case ProcessObserved() | ClientClaim() | ClientExited() | RiskFinding():
            return CLAIMS
        case VerifierResult() if event.invocation:
            return CLAIMS
    return None


def pane_line(event: Event, t0: int) -> tuple[str, str] | None:
    """(pane, text) for an event the panes show: its time in the session, then its line."""
    pane, text = pane_of(event), event_line(event)
    if pane is None or text is None:
        return None
    return pane, f"{(event.t_ns - t0) / 1e9:8.3f}s {text}"
