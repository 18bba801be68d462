"""Packet capture on loopback, limited to the lab's TCP ports.

Usage::

    with PacketCapture(pcap_path="run.pcap") as cap:  # needs root (CAP_NET_RAW)
        cap.set_ports({receiver_port})  # may change at any time, from any thread
        ...                             # run the client
        new = cap.drain()               # PacketSummary objects kept since the last drain
    cap.flows()        # {FlowKey(src, sport, dst, dport): FlowTotals(packets, payload_bytes)}
    cap.port_totals(receiver_port)      # PortTotals(to_port=FlowTotals, from_port=FlowTotals)
    cap.stats()        # CaptureStats: kept, ignored, dropped_by_kernel, ...

How it works: one AF_PACKET raw socket bound to ``lo``. Loopback hands every frame to it twice
(once outgoing, once incoming); only the incoming copy is kept, so each TCP segment counts once.
A classic BPF filter in the kernel, rebuilt whenever the ports change, passes only incoming
IPv4/IPv6 TCP segments with a lab port (like tcpdump's ``inbound and tcp and (port A or ...)``);
Python then parses them with dpkt and checks the same conditions again, which stays the authority.
IPv6 segments behind extension headers are not matched (loopback TCP has none). Kept frames are
written unchanged to an optional pcap file (Ethernet link type, nanosecond timestamps, snaplen
262144) that tcpdump and tshark read.

Timestamps: the kernel stamps each frame on receipt (SO_TIMESTAMPNS, CLOCK_REALTIME). The pcap gets
that stamp as is; ``PacketSummary.t_ns`` is the same instant on CLOCK_MONOTONIC, converted with one
realtime/monotonic anchor taken at ``start()``. Both clocks are slewed alike by NTP, so the
conversion holds to the anchor's read error (well under a microsecond here) unless the wall clock
is *stepped* during a capture (then t_ns shifts by the step). If the kernel gives no stamp, t_ns
is ``time.monotonic_ns()`` at receipt.

Flags format: TCP flag names joined by commas in header bit order, e.g. ``"SYN"``, ``"SYN,ACK"``,
``"FIN,ACK"``, ``"PSH,ACK"`` (names: FIN SYN RST PSH ACK URG ECE CWR); ``""`` for no flags.

Overhead: every loopback frame on the machine runs the in-kernel filter (a few dozen BPF
instructions, well under a microsecond); only lab frames are queued to the socket and cost Python
time: a recvmsg, a dpkt parse and a pcap write, about 10-20 us of one CPU per frame (the parse
alone measured ~8 us). Loopback uses 64 KiB TSO frames, so a 1 MiB transfer is a few dozen frames.
The receive buffer is 8 MiB; ``stats().dropped_by_kernel`` counts lab frames the kernel dropped
because it overflowed. Any nonzero value means packets are missing and packet-based conclusions
should be inconclusive.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple

import dpkt

from probes.capability import Capability

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6  # struct tpacket_stats { unsigned int tp_packets, tp_drops; }
SO_RCVBUFFORCE = 33  # root may exceed net.core.rmem_max with this one
SO_TIMESTAMPNS = 35  # also SCM_TIMESTAMPNS; asm-generic value (x86_64, arm64)
SO_ATTACH_FILTER = 26
SNAPLEN = 262144  # larger than any loopback frame (MTU 65536, 64 KiB TSO)
RCVBUF_BYTES = 8 << 20
POLL_SECONDS = 0.05  # how long stop() may wait for the capture thread
BATCH = 1024  # frames read before looking at the stop flag again
MAX_PORTS = 64  # keeps every jump of the kernel filter within cBPF's 8-bit offsets
ROOT_FIX = "run as root (CAP_NET_RAW)"

_FLAG_NAMES = ("FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR")
_TIMESPEC = struct.Struct("@ll")  # struct timespec
_TPACKET_STATS = struct.Struct("@II")


class CaptureUnavailable(Exception):
    """The capture cannot run here; ``reason`` says why and ``fix`` how to make it possible."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(f"{reason} (fix: {fix})")
        self.reason = reason
        self.fix = fix

    def capability(self) -> Capability:
        return Capability(name="af-packet", available=False, detail=self.reason, fix=self.fix)


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


@dataclass(frozen=True)
class CaptureStats:
    kept: int  # lab TCP segments (incoming copies only)
    ignored: int  # passed the kernel filter, not the Python check (0 unless ports just changed)
    truncated: int  # frames longer than SNAPLEN, dropped (not expected on lo)
    seen_by_kernel: int  # frames that passed the kernel filter, queued or dropped
    dropped_by_kernel: int  # of those, lost to a full socket buffer: evidence is missing
    error: str = ""  # why the capture thread stopped early, if it did


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


def realtime_offset_ns() -> int:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC, from the tightest of a few bracketed reads."""
    best = None
    for _ in range(5):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if best is None or after - before < best[0]:
            best = (after - before, wall - (before + after) // 2)
    return best[1]


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


def _assemble(source: list) -> list[tuple[int, int, int, int]]:
    """Resolve string labels into the relative jump offsets cBPF wants."""
    labels, code = {}, []
    for item in source:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)

    def offset(i: int, target: int | str) -> int:
        return labels[target] - i - 1 if isinstance(target, str) else target

    return [
        (op, offset(i, jt), offset(i, jf), offset(i, k) if op == _JA else k)
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


class PacketCapture:
    """Background capture of lab TCP segments on loopback. See the module docstring."""

    def __init__(
        self, ports: Iterable[int] = (), pcap_path: str | os.PathLike[str] | None = None
    ) -> None:
        self.pcap_path = pcap_path
        self._lock = threading.Lock()  # guards ports, pending, flows and counters
        self._ports = checked_ports(ports)
        self._pending: list[PacketSummary] = []
        self._flows: dict[FlowKey, list[int]] = {}  # key -> [packets, payload bytes]
        self._counts = dict.fromkeys(("kept", "ignored", "truncated", "seen", "dropped"), 0)
        self._error = ""
        self._sock: socket.socket | None = None
        self._file = None
        self._writer: dpkt.pcap.Writer | None = None
        self._offset_ns = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> PacketCapture:
        """Open the socket (raising CaptureUnavailable) and start capturing in a thread.

        Every frame from the moment this returns is captured, even before the thread runs.
        """
        if self._thread is not None:
            raise RuntimeError("a PacketCapture can be started once")
        self._sock = open_loopback_socket(self.ports)
        if self.pcap_path is not None:  # opened after the socket: no empty file when not root
            try:
                self._file = open(self.pcap_path, "wb")  # closed in stop()
            except OSError:
                self._sock.close()
                raise
            self._writer = dpkt.pcap.Writer(
                self._file, snaplen=SNAPLEN, linktype=dpkt.pcap.DLT_EN10MB, nano=True
            )
        self._offset_ns = realtime_offset_ns()
        self._thread = threading.Thread(target=self._run, name="evlab-packets", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Read what is already queued, then close the socket and the pcap file. Idempotent."""
        with self._lock:
            if self._stopped or self._thread is None:
                self._stopped = True
                return
            self._stopped = True
        self._stopping.set()
        self._thread.join()
        self._read_kernel_stats()
        self._sock.close()
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> PacketCapture:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what callers ask --------------------------------------------------------------------

    @property
    def ports(self) -> frozenset[int]:
        with self._lock:
            return self._ports

    def set_ports(self, ports: Iterable[int]) -> None:
        """Replace the lab ports; the kernel filter is updated before this returns.

        Frames the thread has already read are not reconsidered; frames still queued are
        checked against the new ports.
        """
        new = checked_ports(ports)
        with self._lock:  # held across the attach so stop() cannot close the socket under it
            self._ports = new
            if self._sock is not None and not self._stopped:
                attach_filter(self._sock, new)

    def add_ports(self, ports: Iterable[int]) -> None:
        with self._lock:
            current = self._ports
        self.set_ports(current | frozenset(ports))

    def drain(self) -> list[PacketSummary]:
        """Summaries kept since the previous drain, in arrival order."""
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def flows(self) -> dict[FlowKey, FlowTotals]:
        with self._lock:
            return {key: FlowTotals(p, b) for key, (p, b) in self._flows.items()}

    def port_totals(self, port: int) -> PortTotals:
        """Totals of segments sent to ``port`` and sent from ``port``, over all flows."""
        to_port, from_port = [0, 0], [0, 0]
        for key, totals in self.flows().items():
            for side, matches in ((to_port, key.dport == port), (from_port, key.sport == port)):
                if matches:
                    side[0] += totals.packets
                    side[1] += totals.payload_bytes
        return PortTotals(FlowTotals(*to_port), FlowTotals(*from_port))

    def stats(self) -> CaptureStats:
        with self._lock:
            c = self._counts
            return CaptureStats(
                kept=c["kept"],
                ignored=c["ignored"],
                truncated=c["truncated"],
                seen_by_kernel=c["seen"],
                dropped_by_kernel=c["dropped"],
                error=self._error,
            )

    # -- the capture thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                ready, _, _ = select.select([self._sock], [], [], POLL_SECONDS)
                if ready:
                    self._read_batch()
                self._read_kernel_stats()
            self._read_batch()  # frames that arrived just before stop()
        except Exception as exc:  # the thread must not die silently
            with self._lock:
                self._error = f"{type(exc).__name__}: {exc}"

    def _read_batch(self) -> None:
        for _ in range(BATCH):
            try:
                frame, anc, msg_flags, addr = self._sock.recvmsg(
                    SNAPLEN, socket.CMSG_SPACE(_TIMESPEC.size), socket.MSG_DONTWAIT
                )
            except BlockingIOError:
                break
            self._handle(frame, anc, msg_flags, pkttype=addr[2])
        if self._file is not None:
            self._file.flush()  # so the pcap is readable while the capture runs

    def _handle(self, frame: bytes, anc: list, msg_flags: int, pkttype: int) -> None:
        if pkttype == socket.PACKET_OUTGOING:
            # Loopback delivers each frame twice; the incoming copy is the one we keep. (The
            # kernel filter already drops these; this keeps the Python side right on its own.)
            self._count("ignored")
            return
        if msg_flags & socket.MSG_TRUNC:
            self._count("truncated")
            return
        wall_ns, t_ns = self._stamp(anc)
        summary = summarize(frame, t_ns)
        with self._lock:
            if summary is None or not (self._ports & {summary.sport, summary.dport}):
                self._counts["ignored"] += 1
                return
            self._counts["kept"] += 1
            self._pending.append(summary)
            key = FlowKey(summary.src, summary.sport, summary.dst, summary.dport)
            totals = self._flows.setdefault(key, [0, 0])
            totals[0] += 1
            totals[1] += summary.payload_len
        if self._writer is not None:
            # Decimal keeps the kernel's nanoseconds exact (a float would round them).
            self._writer.writepkt_time(frame, Decimal(wall_ns) / 10**9)

    def _stamp(self, anc: list) -> tuple[int, int]:
        """(wall-clock ns, monotonic ns) of a frame: the kernel's receive time when given."""
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack(data[: _TIMESPEC.size])
                wall_ns = sec * 1_000_000_000 + nsec
                return wall_ns, wall_ns - self._offset_ns
        mono_ns = time.monotonic_ns()
        return mono_ns + self._offset_ns, mono_ns

    def _read_kernel_stats(self) -> None:
        # Reading PACKET_STATISTICS resets the kernel's counters, so accumulate them here.
        raw = self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _TPACKET_STATS.size)
        packets, drops = _TPACKET_STATS.unpack(raw)
        with self._lock:
            self._counts["seen"] += packets  # the kernel already includes drops in tp_packets
            self._counts["dropped"] += drops

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1
