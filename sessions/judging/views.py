"""Readings of one invocation's evidence that several clauses share."""

from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence


def invocations(ev: ScenarioEvidence) -> list[InvocationEvidence]:
    return [ev.invocations[n] for n in sorted(ev.invocations)]


def counter(inv: InvocationEvidence, name: str) -> int | None:
    return inv.final.counters.get(name) if inv.final else None


def blind(inv: InvocationEvidence, receiver_port: int) -> str | None:
    """Defence in depth: the receiver consumed payload the kernel never saw the client send
    (or the wire never carried): one of the views is incomplete, so no kernel clause passes."""
    consumed = inv.payload_bytes
    sent = counter(inv, "sock_sent_bytes")
    if sent is not None and consumed > sent:
        return (f"invocation {inv.n}: the receiver consumed {consumed:,} payload bytes but the "
                f"kernel saw the client send {sent:,}: the kernel view is incomplete")
    if inv.packet_stats is not None and not inv.packet_stats.error and not inv.proxy:
        wire = inv.wire_bytes_to(receiver_port)
        if consumed > wire:
            return (f"invocation {inv.n}: the receiver consumed {consumed:,} payload bytes but "
                    f"the wire carried {wire:,} to it: the evidence disagrees")
    return None


def mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"




def wire_lost(inv: InvocationEvidence) -> str | None:
    """Why the wire view of an invocation is incomplete (its capture stopped early), if it is."""
    stats = inv.packet_stats
    if stats is not None and stats.error:
        return (f"invocation {inv.n}: the packet capture stopped ({stats.error}): the wire view "
                "is incomplete")
    return None
