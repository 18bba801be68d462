"""probes.packets.capture against loopback traffic the test makes itself, with exact expectations.

One client sends exactly N_SENT bytes to a one-shot server, which replies exactly N_REPLY bytes and
closes; an unrelated TCP exchange on another port and a burst of UDP run at the same time. The
capture must see each segment of the lab connection once, count its payload exactly, keep (and
queue) nothing else, and write a pcap that tshark and tcpdump read back with the same count.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import dpkt
import pytest

from probes.packets.capture import (
    ROOT_FIX,
    SNAPLEN,
    CaptureUnavailable,
    PacketCapture,
    PacketSummary,
)
from probes.packets.summary import flag_names, summarize
from tests.packet_totals import FlowKey, FlowTotals, PortTotals, flows, port_totals

ROOT = Path(__file__).resolve().parent.parent
LOCALHOST = "127.0.0.1"
LOCALHOST6 = "::1"
N_SENT = 100_000
N_REPLY = 70_000
N_UNRELATED = 12_345
N_UDP_NOISE = 2_000
WAIT_S = 10.0

needs_root = pytest.mark.root(reason="AF_PACKET capture needs root")


# -- traffic the test controls -----------------------------------------------------------------


def recv_exactly(conn: socket.socket, n: int) -> int:
    got = 0
    while got < n:
        chunk = conn.recv(min(65536, n - got))
        if not chunk:
            break
        got += len(chunk)
    return got


def recv_to_eof(conn: socket.socket) -> int:
    got = 0
    while chunk := conn.recv(65536):
        got += len(chunk)
    return got


class OneShotServer:
    """Accepts one connection, reads exactly ``expect`` bytes, replies ``reply`` bytes, closes."""

    def __init__(self, expect: int, reply: int, host: str = LOCALHOST) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.create_server((host, 0), family=family)
        self.listener.settimeout(WAIT_S)
        self.port = self.listener.getsockname()[1]
        self.received = -1
        self._expect, self._reply = expect, reply
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with self.listener, self.listener.accept()[0] as conn:
            self.received = recv_exactly(conn, self._expect)
            conn.sendall(b"r" * self._reply)

    def join(self) -> None:
        self._thread.join(WAIT_S)


def exchange(port: int, send: int, host: str = LOCALHOST) -> int:
    """Connect, send ``send`` bytes, read the reply to EOF, close; returns bytes received."""
    with socket.create_connection((host, port), timeout=WAIT_S) as conn:
        conn.sendall(b"s" * send)
        return recv_to_eof(conn)


def udp_noise(count: int) -> None:
    """Datagrams to the discard port on loopback (nobody listens: ICMP errors come back too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _ in range(count):
            sock.sendto(b"n" * 200, (LOCALHOST, 9))


def read_pcap(path: Path) -> list[tuple]:
    with path.open("rb") as f:
        return list(dpkt.pcap.Reader(f))


# -- waiting on the capture, never a fixed sleep -----------------------------------------------


def has_flag(s: PacketSummary, flag: str) -> bool:
    return flag in s.flags.split(",")


def connection_closed(summaries: list[PacketSummary]) -> bool:
    """Both sides sent FIN and each FIN has been acknowledged."""
    fins = [s for s in summaries if has_flag(s, "FIN")]
    if len({(s.src, s.sport) for s in fins}) < 2:
        return False
    return all(
        any(a.sport == f.dport and a.ack == (f.seq + f.payload_len + 1) % 2**32 for a in summaries)
        for f in fins
    )


def drain_until(cap: PacketCapture, done, timeout: float = WAIT_S) -> list[PacketSummary]:
    got: list[PacketSummary] = []
    deadline = time.monotonic() + timeout
    while not done(got):
        if time.monotonic() > deadline:
            pytest.fail(f"capture did not see the expected packets within {timeout}s: {got}")
        got.extend(cap.drain())
        time.sleep(0.01)
    return got


@dataclass(frozen=True)
class Run:
    lab: PacketCapture
    summaries: list[PacketSummary]
    unrelated: PacketCapture
    unrelated_summaries: list[PacketSummary]
    lab_port: int
    unrelated_port: int
    pcap: Path
    mono_window: tuple[int, int]
    wall_window: tuple[int, int]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("AF_PACKET capture needs root (CAP_NET_RAW)")
    for _ in range(5):   # an exchange TCP sent a segment of twice is done again (see below)
        pcap = tmp_path_factory.mktemp("packets") / "lab.pcap"
        mono0, wall0 = time.monotonic_ns(), time.time_ns()
        lab = PacketCapture(pcap_path=pcap).start()  # no ports yet, as with a real receiver
        unrelated = PacketCapture().start()
        server = OneShotServer(expect=N_SENT, reply=N_REPLY)
        other = OneShotServer(expect=N_UNRELATED, reply=N_UNRELATED)
        lab.set_ports({server.port})
        unrelated.add_ports({other.port})
        try:
            result = run_traffic(lab, unrelated, server, other, pcap, mono0, wall0)
        finally:
            lab.stop()
            unrelated.stop()
        if not (retransmitted(result.summaries) or retransmitted(result.unrelated_summaries)):
            break
    yield result


def retransmitted(summaries) -> bool:
    """Whether TCP sent a segment that takes sequence space (data, SYN or FIN) again: its
    retransmission or tail-loss-probe timer can fire on loopback when the machine is loaded (a CI
    run saw a FIN sent twice 7 ms apart). The wire then carried more than the exchange, so the
    exact counts these tests check are those of an exchange without one. The capture's own
    duplicates (the loopback's second copy of a frame) are byte-identical frames:
    test_no_duplicates."""
    sent = [
        (s.sport, s.seq, s.payload_len, has_flag(s, "SYN"), has_flag(s, "FIN"))
        for s in summaries if s.payload_len or has_flag(s, "SYN") or has_flag(s, "FIN")
    ]
    return len(sent) != len(set(sent))


def run_traffic(lab, unrelated, server, other, pcap, mono0, wall0) -> Run:
    """The lab exchange with noise beside it; returns once the capture has seen it close."""
    noise = [
        threading.Thread(target=exchange, args=(other.port, N_UNRELATED)),
        threading.Thread(target=udp_noise, args=(N_UDP_NOISE,)),
    ]
    for thread in noise:
        thread.start()
    assert exchange(server.port, N_SENT) == N_REPLY
    for thread in noise:
        thread.join(WAIT_S)
    server.join()
    other.join()
    assert (server.received, other.received) == (N_SENT, N_UNRELATED)

    summaries = drain_until(lab, connection_closed)
    unrelated_summaries = drain_until(unrelated, connection_closed)
    mono1, wall1 = time.monotonic_ns(), time.time_ns()
    lab.stop()
    unrelated.stop()
    summaries += lab.drain()  # anything after the last ACK would be a stray; keep it to check
    unrelated_summaries += unrelated.drain()
    return Run(
        lab, summaries, unrelated, unrelated_summaries, server.port, other.port, pcap,
        (mono0, mono1), (wall0, wall1),
    )


# -- the lab connection, segment by segment ----------------------------------------------------


@needs_root
def test_handshake_and_close_each_seen_once(run: Run) -> None:
    by_flags = Counter(s.flags for s in run.summaries)
    assert by_flags["SYN"] == 1
    assert by_flags["SYN,ACK"] == 1
    fins = [s for s in run.summaries if has_flag(s, "FIN")]
    assert sorted(s.sport == run.lab_port for s in fins) == [False, True]  # one per side
    assert not [s for s in run.summaries if has_flag(s, "RST")]
    syn = next(s for s in run.summaries if s.flags == "SYN")
    assert (syn.dst, syn.dport) == (LOCALHOST, run.lab_port)


@needs_root
def test_no_duplicates(run: Run) -> None:
    assert not retransmitted(run.summaries)   # no segment counted twice
    # Loopback's second copy of a frame is byte-identical; distinct segments never are.
    frames = [buf for _, buf in read_pcap(run.pcap)]
    assert len(frames) == len(set(frames))


@needs_root
def test_payload_totals_exact(run: Run) -> None:
    by_flow = flows(run.summaries)
    client = next(k for k in by_flow if k.dport == run.lab_port)
    assert client.src == client.dst == LOCALHOST
    reverse = FlowKey(client.dst, client.dport, client.src, client.sport)
    assert set(by_flow) == {client, reverse}
    assert by_flow[client].payload_bytes == N_SENT
    assert by_flow[reverse].payload_bytes == N_REPLY
    assert by_flow[client].packets + by_flow[reverse].packets == len(run.summaries)
    totals = port_totals(run.summaries, run.lab_port)
    assert (totals.to_port, totals.from_port) == (by_flow[client], by_flow[reverse])
    assert port_totals(run.summaries, run.unrelated_port).to_port == FlowTotals(0, 0)


@needs_root
def test_unrelated_port_not_kept(run: Run) -> None:
    ports = {run.lab_port, run.unrelated_port}
    assert not [s for s in run.summaries if {s.sport, s.dport} & ports != {run.lab_port}]
    # The same traffic was on the wire: a capture for that port counted it exactly.
    other = port_totals(run.unrelated_summaries, run.unrelated_port)
    assert (other.to_port.payload_bytes, other.from_port.payload_bytes) == (N_UNRELATED,) * 2
    assert not [s for s in run.unrelated_summaries if run.lab_port in (s.sport, s.dport)]


@needs_root
def test_stats_and_clock(run: Run) -> None:
    stats = run.lab.stats()
    assert stats.kept == len(run.summaries)
    assert stats.dropped_by_kernel == 0
    assert stats.truncated == 0
    assert stats.error == ""
    # The kernel filter queued exactly the lab segments: no outgoing copies, no noise.
    assert (stats.seen_by_kernel, stats.ignored) == (stats.kept, 0)
    lo, hi = run.mono_window
    assert all(lo <= s.t_ns <= hi for s in run.summaries)
    assert sum(s.payload_len for s in run.summaries) == N_SENT + N_REPLY


# -- the pcap file -----------------------------------------------------------------------------


@needs_root
def test_pcap_matches_summaries(run: Run) -> None:
    with run.pcap.open("rb") as f:
        reader = dpkt.pcap.Reader(f)
        assert reader.snaplen == SNAPLEN
        assert reader.datalink() == dpkt.pcap.DLT_EN10MB
        records = list(reader)
    assert len(records) == len(run.summaries)
    assert [len(buf) for _, buf in records] == [s.frame_len for s in run.summaries]
    pairs = list(zip(records, run.summaries, strict=True))
    assert [summarize(buf, s.t_ns) for (_, buf), s in pairs] == run.summaries
    # Nanosecond pcap stamps are wall-clock; t_ns is the same instant through one anchor.
    wall_ns = [int(ts * 10**9) for ts, _ in records]
    lo, hi = run.wall_window
    assert all(lo <= ns <= hi for ns in wall_ns)
    assert len({ns - s.t_ns for ns, s in zip(wall_ns, run.summaries, strict=True)}) == 1


def tool_output(tool: str, *args: str) -> list[str]:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (apt-get install {tool}): cannot cross-check")
    proc = subprocess.run([path, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@needs_root
def test_tshark_reads_pcap(run: Run) -> None:
    lengths = tool_output("tshark", "-r", str(run.pcap), "-T", "fields", "-e", "tcp.len")
    assert len(lengths) == len(run.summaries)
    assert sum(int(n) for n in lengths) == N_SENT + N_REPLY
    retransmits = tool_output(
        "tshark", "-r", str(run.pcap), "-Y",
        "tcp.analysis.retransmission || tcp.analysis.spurious_retransmission",
    )
    assert retransmits == []


@needs_root
def test_tcpdump_reads_pcap(run: Run) -> None:
    lines = tool_output("tcpdump", "-nn", "-r", str(run.pcap))
    assert len(lines) == len(run.summaries)
    assert sum(" > " in line and "Flags [S]" in line for line in lines) == 1


@needs_root
def test_ipv6_exchange_counted_exactly() -> None:
    with PacketCapture() as cap:
        server = OneShotServer(expect=N_SENT, reply=N_REPLY, host=LOCALHOST6)
        cap.set_ports({server.port})
        assert exchange(server.port, N_SENT, host=LOCALHOST6) == N_REPLY
        server.join()
        summaries = drain_until(cap, connection_closed)
    summaries += cap.drain()
    totals = port_totals(summaries, server.port)
    assert (totals.to_port.payload_bytes, totals.from_port.payload_bytes) == (N_SENT, N_REPLY)
    assert {s.src for s in summaries} == {LOCALHOST6}
    assert Counter(s.flags for s in summaries)["SYN"] == 1
    assert cap.stats().seen_by_kernel == cap.stats().kept == len(summaries)


@needs_root
def test_ports_updated_after_start() -> None:
    """Traffic before a port is added is not queued; after set_ports returns, it is."""
    with PacketCapture(ports={1}) as cap:
        early = OneShotServer(expect=10, reply=10)
        assert exchange(early.port, 10) == 10
        early.join()
        late = OneShotServer(expect=20, reply=30)
        cap.add_ports({late.port})
        assert cap.ports == {1, late.port}
        assert exchange(late.port, 20) == 30
        late.join()
        kept = drain_until(cap, connection_closed)
        cap.set_ports({early.port})  # swapping ports must not disturb what was counted
    kept += cap.drain()
    assert port_totals(kept, early.port) == PortTotals(FlowTotals(0, 0), FlowTotals(0, 0))
    late_totals = port_totals(kept, late.port)
    assert (late_totals.to_port.payload_bytes, late_totals.from_port.payload_bytes) == (20, 30)


def test_port_set_is_checked() -> None:
    with pytest.raises(ValueError):
        PacketCapture(ports={0})
    with pytest.raises(ValueError):
        PacketCapture().set_ports({70000})
    with pytest.raises(ValueError):
        PacketCapture(ports=range(1, 200))


# -- lifecycle and failure ---------------------------------------------------------------------


@needs_root
def test_stop_is_prompt_and_idempotent(tmp_path: Path) -> None:
    cap = PacketCapture(ports={1}, pcap_path=tmp_path / "empty.pcap")
    with cap:
        pass
    began = time.monotonic()
    cap.stop()
    assert time.monotonic() - began < 0.05
    cap = PacketCapture().start()
    began = time.monotonic()
    cap.stop()
    assert time.monotonic() - began < 0.5  # one poll interval, plus slack
    with pytest.raises(RuntimeError):
        cap.start()
    assert cap.drain() == []
    assert read_pcap(tmp_path / "empty.pcap") == []


def test_stop_without_start_is_harmless() -> None:
    cap = PacketCapture()
    cap.stop()
    cap.stop()
    assert cap.stats().kept == 0


NOT_ROOT_CHILD = """
import json, os
from probes.packets.capture import CaptureUnavailable, PacketCapture
os.setgroups([])
os.setgid(65534)
os.setuid(65534)  # nobody: every capability is gone
try:
    PacketCapture(ports={9}).start()
except CaptureUnavailable as exc:
    cap = exc.capability()
    print(json.dumps({"reason": exc.reason, "fix": exc.fix, "name": cap.name,
                      "available": cap.available}))
"""


def test_non_root_gets_capture_unavailable() -> None:
    if os.geteuid() != 0:
        with pytest.raises(CaptureUnavailable) as info:
            PacketCapture().start()
        assert info.value.fix == ROOT_FIX
        return
    # Drop to nobody inside the child after importing: nobody cannot read this interpreter.
    proc = subprocess.run(
        [sys.executable, "-c", NOT_ROOT_CHILD], cwd=ROOT, capture_output=True, text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    assert result["fix"] == ROOT_FIX == "run as root (CAP_NET_RAW)"
    assert "Operation not permitted" in result["reason"]
    assert (result["name"], result["available"]) == ("af-packet", False)


# -- pure functions ----------------------------------------------------------------------------


def test_flag_names() -> None:
    assert flag_names(0x02) == "SYN"
    assert flag_names(0x12) == "SYN,ACK"
    assert flag_names(0x11) == "FIN,ACK"
    assert flag_names(0x18) == "PSH,ACK"
    assert flag_names(0x14) == "RST,ACK"
    assert flag_names(0) == ""
    assert flag_names(0xFF) == "FIN,SYN,RST,PSH,ACK,URG,ECE,CWR"


def test_summarize_only_tcp() -> None:
    def frame(transport, p) -> bytes:
        ip = dpkt.ip.IP(src=b"\x7f\0\0\1", dst=b"\x7f\0\0\1", p=p, data=transport)
        return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))

    tcp = dpkt.tcp.TCP(sport=1234, dport=80, seq=7, ack=9, flags=0x18, data=b"abc")
    got = summarize(frame(tcp, dpkt.ip.IP_PROTO_TCP), t_ns=5)
    buf = frame(tcp, dpkt.ip.IP_PROTO_TCP)
    assert got == PacketSummary(5, LOCALHOST, 1234, LOCALHOST, 80, "PSH,ACK", 7, 9, 3, len(buf))
    udp = dpkt.udp.UDP(sport=1234, dport=80, data=b"abc")
    assert summarize(frame(udp, dpkt.ip.IP_PROTO_UDP), t_ns=5) is None
    assert summarize(b"\0" * 5, t_ns=5) is None
