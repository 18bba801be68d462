"""Per-flow and per-port totals of captured segments, for tests that check the capture's counts
(the lab itself sums what it needs from the packet events)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from probes.packets.capture import PacketSummary


class FlowKey(NamedTuple):
    src: str
    sport: int
    dst: str
    dport: int


@dataclass(frozen=True)
class FlowTotals:
    packets: int = 0
    payload_bytes: int = 0


@dataclass(frozen=True)
class PortTotals:
    to_port: FlowTotals  # segments whose destination port is the port
    from_port: FlowTotals  # segments whose source port is the port


def flows(summaries: Iterable[PacketSummary]) -> dict[FlowKey, FlowTotals]:
    totals: dict[FlowKey, list[int]] = {}
    for s in summaries:
        counts = totals.setdefault(FlowKey(s.src, s.sport, s.dst, s.dport), [0, 0])
        counts[0] += 1
        counts[1] += s.payload_len
    return {key: FlowTotals(p, b) for key, (p, b) in totals.items()}


def port_totals(summaries: Iterable[PacketSummary], port: int) -> PortTotals:
    """Totals of segments sent to ``port`` and sent from ``port``, over all flows."""
    to_port, from_port = [0, 0], [0, 0]
    for key, totals in flows(summaries).items():
        for side, matches in ((to_port, key.dport == port), (from_port, key.sport == port)):
            if matches:
                side[0] += totals.packets
                side[1] += totals.payload_bytes
    return PortTotals(FlowTotals(*to_port), FlowTotals(*from_port))
