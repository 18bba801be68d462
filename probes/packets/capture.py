"""Packet capture on loopback, limited to the lab's TCP ports.

Usage::

    with PacketCapture(pcap_path="run.pcap") as cap:  # needs root (CAP_NET_RAW)
        cap.set_ports({server_port})    # may change at any time, from any thread
        ...                             # run the client
        new = cap.drain()               # PacketSummary objects kept since the last drain
    cap.stats()        # CaptureStats: kept, ignored, dropped_by_kernel, ..., error

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

Modules: this one is the capture thread; packet_socket.py the socket and its kernel filter,
packet_summary.py the dpkt parsing (and the flags format), pcap_file.py the pcap writing.

Overhead: every loopback frame on the machine runs the in-kernel filter (a few dozen BPF
instructions, well under a microsecond); only lab frames are queued to the socket and cost Python
time: a recvmsg, a dpkt parse and a pcap write, about 10-20 us of one CPU per frame (the parse
alone measured ~8 us). Loopback uses 64 KiB TSO frames, so a 1 MiB transfer is a few dozen frames.
The receive buffer is 8 MiB; ``stats().dropped_by_kernel`` counts lab frames the kernel dropped
because it overflowed. Any nonzero value means packets are missing and packet-based conclusions
should be inconclusive.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from probes.packets.pcap_file import SNAPLEN, PcapFile
from probes.packets.raw_socket import (
    ROOT_FIX,
    SO_TIMESTAMPNS,
    CaptureUnavailable,
    attach_filter,
    checked_ports,
    kernel_stats,
    open_loopback_socket,
)
from probes.packets.summary import PacketSummary, summarize

# What callers import from here, wherever it lives.
__all__ = ["ROOT_FIX", "SNAPLEN", "CaptureStats", "CaptureUnavailable", "PacketCapture",
           "PacketSummary"]

POLL_SECONDS = 0.05  # how often an idle capture thread reads the kernel's drop counters
BATCH = 1024  # frames read before looking at the stop flag again

_TIMESPEC = struct.Struct("@ll")  # struct timespec


@dataclass(frozen=True)
class CaptureStats:
    kept: int  # lab TCP segments (incoming copies only)
    ignored: int  # passed the kernel filter, not the Python check (0 unless ports just changed)
    truncated: int  # frames longer than SNAPLEN, dropped (not expected on lo)
    seen_by_kernel: int  # frames that passed the kernel filter, queued or dropped
    dropped_by_kernel: int  # of those, lost to a full socket buffer: evidence is missing
    error: str = ""  # why the capture thread stopped early, if it did


def realtime_offset_ns() -> int:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC, from the tightest of a few bracketed reads."""
    best: tuple[int, int] | None = None
    for _ in range(5):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if best is None or after - before < best[0]:
            best = (after - before, wall - (before + after) // 2)
    assert best is not None  # the loop ran
    return best[1]


class PacketCapture:
    """Background capture of lab TCP segments on loopback. See the module docstring."""

    def __init__(
        self, ports: Iterable[int] = (), pcap_path: str | os.PathLike[str] | None = None
    ) -> None:
        self.pcap_path = pcap_path
        self._lock = threading.Lock()  # guards ports, pending and counters
        self._ports = checked_ports(ports)
        self._pending: list[PacketSummary] = []
        self._counts = dict.fromkeys(("kept", "ignored", "truncated", "seen", "dropped"), 0)
        self._error = ""
        self._sock: socket.socket | None = None
        self._pcap: PcapFile | None = None
        self._offset_ns = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        # sync(): a wake-up pipe for the thread, and how many syncs it has answered
        self._wake_r, self._wake_w = -1, -1
        self._synced = threading.Condition(self._lock)
        self._sync_asked = self._sync_done = 0

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
                self._pcap = PcapFile(self.pcap_path)  # closed in stop()
            except OSError:
                self._sock.close()
                raise
        self._offset_ns = realtime_offset_ns()
        self._wake_r, self._wake_w = os.pipe()
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
        os.write(self._wake_w, b"s")
        self._thread.join()
        self._read_kernel_stats()
        self._socket().close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self._pcap is not None:
            try:
                self._pcap.close()
            except OSError as exc:  # a pcap that cannot be written is evidence lost, said so
                with self._lock:
                    self._error = self._error or f"{type(exc).__name__}: {exc}"

    def sync(self, timeout: float = 1.0) -> bool:
        """Return once the thread has read every frame queued before this call (a loopback
        frame is queued by the syscall that sent it), so drain() then holds them all; False if
        the thread is not running or did not answer in time."""
        with self._synced:
            thread = self._thread
            if thread is None or self._stopped or not thread.is_alive():
                return False
            self._sync_asked += 1
            target = self._sync_asked
            os.write(self._wake_w, b"y")
            return self._synced.wait_for(lambda: self._sync_done >= target
                                         or not thread.is_alive(), timeout) \
                and self._sync_done >= target

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

    def _socket(self) -> socket.socket:
        """The capture socket, which start() opens before the thread that reads it runs."""
        assert self._sock is not None, "the capture was not started"
        return self._sock

    def _run(self) -> None:
        try:
            watched: list[socket.socket | int] = [self._socket(), self._wake_r]
            while not self._stopping.is_set():
                ready, _, _ = select.select(watched, [], [], POLL_SECONDS)
                if self._wake_r in ready:
                    self._answer_sync()
                elif ready:
                    self._read_batch()
                self._read_kernel_stats()
            self._read_batch()  # frames that arrived just before stop()
        except Exception as exc:  # the thread must not die silently
            with self._lock:
                self._error = f"{type(exc).__name__}: {exc}"

    def _answer_sync(self) -> None:
        os.read(self._wake_r, 4096)
        with self._synced:
            asked = self._sync_asked
        while not self._read_batch():   # everything queued now, then say so
            pass
        with self._synced:
            self._sync_done = max(self._sync_done, asked)
            self._synced.notify_all()

    def _read_batch(self) -> bool:
        """Read up to BATCH frames; True when the socket's queue was emptied."""
        emptied = False
        sock = self._socket()
        for _ in range(BATCH):
            try:
                frame, anc, msg_flags, addr = sock.recvmsg(
                    SNAPLEN, socket.CMSG_SPACE(_TIMESPEC.size), socket.MSG_DONTWAIT
                )
            except BlockingIOError:
                emptied = True
                break
            self._handle(frame, anc, msg_flags, pkttype=addr[2])
        if self._pcap is not None:
            self._pcap.flush()
        return emptied

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
        if self._pcap is not None:
            self._pcap.write(frame, wall_ns)

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
        packets, drops = kernel_stats(self._socket())  # since the last read: accumulated here
        with self._lock:
            self._counts["seen"] += packets  # the kernel already includes drops in tp_packets
            self._counts["dropped"] += drops

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1
