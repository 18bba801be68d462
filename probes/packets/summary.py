"""One captured frame, parsed with dpkt into the summary the lab keeps of a TCP segment.

Flags format: TCP flag names joined by commas in header bit order, e.g. ``"SYN"``, ``"SYN,ACK"``,
``"FIN,ACK"``, ``"PSH,ACK"`` (names: FIN SYN RST PSH ACK URG ECE CWR); ``""`` for no flags.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import dpkt

_FLAG_NAMES = ("FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR")


@dataclass(frozen=True)
class PacketSummary:
    t_ns: int  # CLOCK_MONOTONIC nanoseconds (see module docstring)
    src: str
    sport: int
    dst: str
    dport: int
    flags: str  # e.g. "SYN,ACK"
    seq: int
    ack: int
    payload_len: int  # TCP payload bytes
    frame_len: int  # whole Ethernet frame as captured


def flag_names(bits: int) -> str:
    """TCP flag bits as comma-joined names in header bit order: 0x12 -> "SYN,ACK"."""
    return ",".join(name for i, name in enumerate(_FLAG_NAMES) if bits & (1 << i))


def summarize(frame: bytes, t_ns: int) -> PacketSummary | None:
    """The TCP summary of one Ethernet frame, or None if it is not an IPv4/IPv6 TCP segment."""
    try:
        ip = dpkt.ethernet.Ethernet(frame).data
    except dpkt.UnpackError:
        return None
    if isinstance(ip, dpkt.ip.IP):
        family = socket.AF_INET
    elif isinstance(ip, dpkt.ip6.IP6):
        family = socket.AF_INET6
    else:
        return None
    tcp = ip.data
    if not isinstance(tcp, dpkt.tcp.TCP):
        return None
    return PacketSummary(
        t_ns=t_ns,
        src=socket.inet_ntop(family, ip.src),
        sport=tcp.sport,
        dst=socket.inet_ntop(family, ip.dst),
        dport=tcp.dport,
        flags=flag_names(tcp.flags),
        seq=tcp.seq,
        ack=tcp.ack,
        payload_len=len(tcp.data),
        frame_len=len(frame),
    )
