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
    payload_bytes: int = 0   # the stream's bytes: a segment TCP sent again counted once


@dataclass(frozen=True)
class PortTotals:
    to_port: FlowTotals  # segments whose destination port is the port
    from_port: FlowTotals  # segments whose source port is the port


def flows(summaries: Iterable[PacketSummary]) -> dict[FlowKey, FlowTotals]:
    """Per flow, its segments and the bytes of its stream: a loaded machine's loopback can
    retransmit (the wire then carries a range twice; the stream has it once)."""
    packets: dict[FlowKey, int] = {}
    ranges: dict[FlowKey, list[tuple[int, int]]] = {}
    first: dict[FlowKey, int] = {}
    for s in summaries:
        key = FlowKey(s.src, s.sport, s.dst, s.dport)
        packets[key] = packets.get(key, 0) + 1
        ranges.setdefault(key, [])
        if s.payload_len:
            start = (s.seq - first.setdefault(key, s.seq)) & 0xFFFFFFFF
            ranges[key].append((start, start + s.payload_len))
    return {key: FlowTotals(packets[key], _covered(ranges[key])) for key in packets}


def _covered(ranges: list[tuple[int, int]]) -> int:
    total, end = 0, 0
    for lo, hi in sorted(ranges):
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total


def port_totals(summaries: Iterable[PacketSummary], port: int) -> PortTotals:
    """Totals of segments sent to ``port`` and sent from ``port``, over all flows."""
    to_port, from_port = [0, 0], [0, 0]
    for key, totals in flows(summaries).items():
        for side, matches in ((to_port, key.dport == port), (from_port, key.sport == port)):
            if matches:
                side[0] += totals.packets
                side[1] += totals.payload_bytes
    return PortTotals(FlowTotals(*to_port), FlowTotals(*from_port))
