"""The capture's AF_PACKET socket on ``lo``: opened filtered, with a big buffer and kernel
timestamps, and its classic BPF filter, which passes only incoming IPv4/IPv6 TCP segments with
a lab port (like tcpdump's ``inbound and tcp and (port A or ...)``) and is replaced atomically
when the ports change.
"""

from __future__ import annotations

import ctypes
import socket
import struct
from collections.abc import Iterable
from typing import cast

from probes.capability import Capability

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6  # struct tpacket_stats { unsigned int tp_packets, tp_drops; }
SO_RCVBUFFORCE = 33  # root may exceed net.core.rmem_max with this one
SO_TIMESTAMPNS = 35  # also SCM_TIMESTAMPNS; asm-generic value (x86_64, arm64)
SO_ATTACH_FILTER = 26
RCVBUF_BYTES = 8 << 20
MAX_PORTS = 64  # keeps every jump of the kernel filter within cBPF's 8-bit offsets
ROOT_FIX = "run as root (CAP_NET_RAW)"

_TPACKET_STATS = struct.Struct("@II")


class CaptureUnavailable(Exception):
    """The capture cannot run here; ``reason`` says why and ``fix`` how to make it possible."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(f"{reason} (fix: {fix})")
        self.reason = reason
        self.fix = fix

    def capability(self) -> Capability:
        return Capability(name="af-packet", available=False, detail=self.reason, fix=self.fix)


def open_loopback_socket(ports: frozenset[int]) -> socket.socket:
    """An AF_PACKET socket on ``lo`` filtered to ``ports``, with a big buffer and timestamps."""
    try:
        # Protocol 0 until bound: with htons(ETH_P_ALL) here, frames from every interface
        # would queue in the gap between socket() and bind().
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    except PermissionError as exc:
        raise CaptureUnavailable(f"cannot open an AF_PACKET raw socket: {exc}", ROOT_FIX) from exc
    except OSError as exc:
        fix = "use a kernel with AF_PACKET sockets (CONFIG_PACKET)"
        raise CaptureUnavailable(f"AF_PACKET sockets unavailable: {exc}", fix) from exc
    try:
        attach_filter(sock, ports)  # before bind, so nothing unfiltered is ever queued
        sock.bind(("lo", ETH_P_ALL))  # CPython applies htons() to the protocol here
    except OSError as exc:
        sock.close()
        fix = "bring loopback up (ip link set lo up) on a kernel with socket filters"
        raise CaptureUnavailable(f"cannot filter or bind to lo: {exc}", fix) from exc
    if not _try_setsockopt(sock, socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES):
        _try_setsockopt(sock, socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)  # capped
    _try_setsockopt(sock, socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # else: monotonic at receipt
    return sock


def checked_ports(ports: Iterable[int]) -> frozenset[int]:
    result = frozenset(ports)
    if len(result) > MAX_PORTS or not all(0 < p < 65536 for p in result):
        wanted = f"at most {MAX_PORTS} ports in 1..65535"
        raise ValueError(f"lab ports must be {wanted}, got {sorted(result)}")
    return result


# Classic BPF opcodes (linux/bpf_common.h), named as the assembler spells them.
_LD_W_ABS, _LD_H_ABS, _LD_B_ABS, _LD_H_IND = 0x20, 0x28, 0x30, 0x48
_LDX_IMM, _LDX_B_MSH, _JA, _JEQ, _JSET, _RET = 0x01, 0xB1, 0x05, 0x15, 0x45, 0x06
_SKF_AD_PKTTYPE = (-0x1000 + 4) & 0xFFFFFFFF  # SKF_AD_OFF + SKF_AD_PKTTYPE
# An instruction before assembly: (op, jt, jf, k), a jump target or _JA's k may be a label.
_Insn = tuple[int, int | str, int | str, int | str]


def filter_program(ports: frozenset[int]) -> list[tuple[int, int, int, int]]:
    """cBPF accepting incoming IPv4/IPv6 TCP segments whose source or destination is a port."""
    ordered = sorted(ports)
    return _assemble([
        (_LD_W_ABS, 0, 0, _SKF_AD_PKTTYPE),
        (_JEQ, "drop", 0, socket.PACKET_OUTGOING),
        (_LD_H_ABS, 0, 0, 12),  # ethertype
        (_JEQ, "ipv6", 0, 0x86DD),
        (_JEQ, 0, "drop", 0x0800),
        (_LD_B_ABS, 0, 0, 23),  # IPv4 protocol
        (_JEQ, 0, "drop", socket.IPPROTO_TCP),
        (_LD_H_ABS, 0, 0, 20),  # a non-first fragment carries no TCP header
        (_JSET, "drop", 0, 0x1FFF),
        (_LDX_B_MSH, 0, 0, 14),  # X = IPv4 header length
        (_JA, 0, 0, "ports"),
        "ipv6",
        (_LD_B_ABS, 0, 0, 20),  # IPv6 next header
        (_JEQ, 0, "drop", socket.IPPROTO_TCP),
        (_LDX_IMM, 0, 0, 40),
        "ports",
        (_LD_H_IND, 0, 0, 14),  # TCP source port
        *[(_JEQ, "accept", 0, port) for port in ordered],
        (_LD_H_IND, 0, 0, 16),  # TCP destination port
        *[(_JEQ, "accept", 0, port) for port in ordered],
        "drop",
        (_RET, 0, 0, 0),
        "accept",
        (_RET, 0, 0, 0xFFFFFFFF),  # the whole frame: an oversized one then shows as MSG_TRUNC
    ])


def _assemble(source: list[_Insn | str]) -> list[tuple[int, int, int, int]]:
    """Resolve string labels into the relative jump offsets cBPF wants."""
    labels: dict[str, int] = {}
    code: list[_Insn] = []
    for item in source:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)

    def offset(i: int, target: int | str) -> int:
        return labels[target] - i - 1 if isinstance(target, str) else target

    return [
        (op, offset(i, jt), offset(i, jf), offset(i, k) if op == _JA else cast(int, k))
        for i, (op, jt, jf, k) in enumerate(code)
    ]


def attach_filter(sock: socket.socket, ports: frozenset[int]) -> None:
    """Install (or atomically replace) the socket's kernel filter."""
    insns = b"".join(struct.pack("=HBBI", *insn) for insn in filter_program(ports))
    buf = ctypes.create_string_buffer(insns, len(insns))
    fprog = struct.pack("@HP", len(insns) // 8, ctypes.addressof(buf))  # struct sock_fprog
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def _try_setsockopt(sock: socket.socket, level: int, option: int, value: int) -> bool:
    try:
        sock.setsockopt(level, option, value)
    except OSError:
        return False
    return True


def kernel_stats(sock: socket.socket) -> tuple[int, int]:
    """(frames that passed the filter, of those dropped for a full buffer) since the last call:
    reading PACKET_STATISTICS resets the kernel's counters."""
    raw = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _TPACKET_STATS.size)
    return _TPACKET_STATS.unpack(raw)
