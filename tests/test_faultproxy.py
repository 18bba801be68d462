"""sessions.lab.proxy.server, proved from the far side: a real loopback server in a thread
records what reached it and when, a client socket records what came back and how the connection
ended. The proxy's own events are only checked against those observations, never taken as the
proof."""

import errno
import hashlib
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sessions.lab.harness import read_events
from sessions.spec.task import load_task
from tests.backup_lab import backup_path, client_path, start_receiver
from tests.lab_servers import start_proxy

BACKUP = load_task("backup").contract.thresholds   # its receiver's names, its reach

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 5.0  # every socket operation; a broken proxy fails a test, never hangs it


@dataclass
class Seen:
    """What the far-side server saw on one connection."""

    data: bytearray = field(default_factory=bytearray)
    first_t: float | None = None
    last_t: float | None = None
    end: str = ""  # eof | reset | timeout | error: ...
    done: threading.Event = field(default_factory=threading.Event)


class FarServer:
    """A real TCP server on loopback, one thread per connection. It sends `send` (then
    half-closes) if given, echoes if `echo`, and records every byte it receives."""

    def __init__(self, *, echo: bool = False, send: bytes = b""):
        self.echo, self.send = echo, send
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.seen: queue.Queue[Seen] = queue.Queue()
        self.closing = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        rec = Seen()
        self.seen.put(rec)
        with conn:
            conn.settimeout(TIMEOUT)
            try:
                if self.send:
                    conn.sendall(self.send)
                    conn.shutdown(socket.SHUT_WR)
                while data := conn.recv(65536):
                    rec.last_t = time.monotonic()
                    rec.first_t = rec.first_t or rec.last_t
                    rec.data += data
                    if self.echo:
                        conn.sendall(data)
                rec.end = "eof"
                if self.echo:
                    conn.shutdown(socket.SHUT_WR)
            except (ConnectionResetError, BrokenPipeError):
                rec.end = "reset"
            except TimeoutError:
                rec.end = "timeout"
            except OSError as e:   # a shutdown after the peer's RST: the socket is closed
                rec.end = "reset" if e.errno == errno.ENOTCONN else f"error: {e}"
            finally:
                rec.done.set()

    def next(self, timeout: float = TIMEOUT) -> Seen:
        """The next connection's record, once that connection has ended."""
        rec = self.seen.get(timeout=timeout)
        assert rec.done.wait(timeout), "the far side's connection did not end"
        return rec

    def __enter__(self) -> "FarServer":
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.listener.close()
        for t in self.threads:
            t.join(TIMEOUT)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)


def recv_to_end(sock: socket.socket) -> tuple[bytes, str]:
    """Everything the socket receives, and how it ended: eof or reset."""
    got = bytearray()
    try:
        while data := sock.recv(65536):
            got += data
    except ConnectionResetError:
        return bytes(got), "reset"
    return bytes(got), "eof"


def send_to_end(sock: socket.socket, data: bytes) -> str:
    """sendall then half-close; "sent", or "reset" if the connection was reset meanwhile."""
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    return "sent"


def in_background(fn, *args) -> tuple[threading.Thread, list]:
    result: list = []
    t = threading.Thread(target=lambda: result.append(fn(*args)), daemon=True)
    t.start()
    return t, result


def wait_events(proxy, event: str, count: int = 1, timeout: float = TIMEOUT) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in proxy.events() if e["event"] == event]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


def fired(proxy) -> list[dict]:
    return [e for e in proxy.events() if e["event"] == "fault_fired"]


def test_plain_forwarding_of_1mb_both_ways_is_byte_exact(tmp_path):
    data = os.urandom(1 << 20)
    with FarServer(echo=True) as far, start_proxy(far.port, tmp_path / "p.jsonl") as proxy, \
            connect(proxy.port) as sock:
        sender, sent = in_background(send_to_end, sock, data)
        back, how = recv_to_end(sock)
        sender.join(TIMEOUT)
        seen = far.next()
        closed = wait_events(proxy, "connection_closed")
    assert sent == ["sent"]
    assert bytes(seen.data) == data and seen.end == "eof"  # the half-close reached the server
    assert back == data and how == "eof"                   # ... and its half-close came back
    assert closed[0]["bytes_up"] == closed[0]["bytes_down"] == len(data)
    assert closed[0]["bytes_swallowed"] == 0 and closed[0]["end"] == "eof"
    assert fired(proxy) == []


@pytest.mark.parametrize("direction", ["up", "down"])
def test_reset_forwards_exactly_the_bytes_before_n_then_resets_both(tmp_path, direction):
    n = 70_001  # not on a 64 KiB chunk boundary
    data = os.urandom(300_000)
    fault = {"kind": "reset", "direction": direction, "at_byte": n}
    far = FarServer(send=data if direction == "down" else b"")
    with far, start_proxy(far.port, tmp_path / "p.jsonl", [fault]) as proxy, \
            connect(proxy.port) as sock:
        if direction == "up":
            sent = send_to_end(sock, data)
            got, how = recv_to_end(sock)
            seen = far.next()
            assert len(seen.data) == n and bytes(seen.data) == data[:n]
            assert got == b"" and "reset" in (sent, how)  # a send after the RST reads EOF
        else:
            got, how = recv_to_end(sock)
            seen = far.next()
            assert got == data[:n] and how == "reset"
        assert seen.end == "reset"  # the server side was reset too, not closed politely
        closed = wait_events(proxy, "connection_closed")
    [event] = fired(proxy)
    assert (event["kind"], event["direction"], event["at_byte"], event["forwarded"]) == \
        ("reset", direction, n, n)
    assert closed[0]["end"] == "fault-reset"
    assert closed[0]["bytes_up" if direction == "up" else "bytes_down"] == n


def test_reset_with_the_client_waiting_for_an_answer_is_a_reset(tmp_path):
    with FarServer() as far, \
            start_proxy(far.port, tmp_path / "p.jsonl",
                        [{"kind": "reset", "direction": "up", "at_byte": 10}]) as proxy, \
            connect(proxy.port) as sock:
        sock.sendall(b"0123456789abcdef")  # all of it fits in the buffers; then we wait
        with pytest.raises(ConnectionResetError):
            sock.recv(100)
        seen = far.next()
    assert bytes(seen.data) == b"0123456789" and seen.end == "reset"
    assert [e["at_byte"] for e in fired(proxy)] == [10]


@pytest.mark.parametrize("direction", ["up", "down"])
def test_corrupt_flips_exactly_byte_n_once(tmp_path, direction):
    n = 131_077
    data = os.urandom(300_000)
    fault = {"kind": "corrupt", "direction": direction, "at_byte": n}
    far = FarServer(send=data if direction == "down" else b"")
    with far, start_proxy(far.port, tmp_path / "p.jsonl", [fault]) as proxy:
        arrived = []
        for _ in range(2):  # the second connection proves it fires only once
            with connect(proxy.port) as sock:
                if direction == "up":
                    assert send_to_end(sock, data) == "sent"
                    assert recv_to_end(sock) == (b"", "eof")
                    arrived.append(bytes(far.next().data))
                else:
                    got, how = recv_to_end(sock)
                    assert how == "eof"
                    arrived.append(got)
                    sock.shutdown(socket.SHUT_WR)
                    assert far.next().end == "eof"
        wait_events(proxy, "connection_closed", 2)
    first, second = arrived
    assert len(first) == len(data)
    assert [i for i in range(len(data)) if first[i] != data[i]] == [n]
    assert first[n] == data[n] ^ 0xFF
    assert second == data
    [event] = fired(proxy)
    assert (event["conn"], event["direction"], event["at_byte"], event["offset"]) == \
        (1, direction, n, n)
    assert (event["original"], event["new"]) == (data[n], data[n] ^ 0xFF)


def _best_round_trip(port: int, trips: int) -> float:
    best = float("inf")
    with connect(port) as sock:
        for i in range(trips):
            message = bytes([65 + i]) * 1000
            t0 = time.monotonic()
            sock.sendall(message)
            got = b""
            while len(got) < len(message):
                got += sock.recv(65536)
            best = min(best, time.monotonic() - t0)
            assert got == message
    return best


def test_latency_adds_its_delay_to_a_round_trip_and_keeps_order(tmp_path):
    with FarServer(echo=True) as far, \
            start_proxy(far.port, tmp_path / "plain.jsonl") as plain, \
            start_proxy(far.port, tmp_path / "slow.jsonl",
                        [{"kind": "latency", "direction": "up", "ms": 200}]) as slow:
        without = _best_round_trip(plain.port, 5)
        with_latency = _best_round_trip(slow.port, 2)
        # order: many small writes, echoed back byte for byte through the delayed direction
        data = os.urandom(256 * 1024)
        with connect(slow.port) as sock:
            def dribble():
                for i in range(0, len(data), 4096):
                    sock.sendall(data[i:i + 4096])
                sock.shutdown(socket.SHUT_WR)
            sender, _ = in_background(dribble)
            back, how = recv_to_end(sock)
            sender.join(TIMEOUT)
        wait_events(slow, "connection_closed", 2)
    # the delay is a floor of the round trip (not delay + the plain one: the quickest plain
    # round trip measured apart may be slower than the one inside the delayed)
    assert with_latency >= 0.200 > without, (with_latency, without)
    assert with_latency < 0.200 + 0.5  # delayed, not stuck
    assert back == data and how == "eof"
    events = fired(slow)
    assert [(e["conn"], e["kind"], e["ms"], e["offset"]) for e in events] == \
        [(1, "latency", 200, 0), (2, "latency", 200, 0)]  # once per connection


@pytest.mark.slow
def test_bandwidth_paces_the_far_side(tmp_path):
    data = os.urandom(400_000)
    fault = {"kind": "bandwidth", "direction": "up", "bytes_per_s": 200_000}
    with FarServer() as far, start_proxy(far.port, tmp_path / "p.jsonl", [fault]) as proxy, \
            connect(proxy.port) as sock:
        assert send_to_end(sock, data) == "sent"
        seen = far.next(timeout=10)
        assert recv_to_end(sock) == (b"", "eof")
    assert bytes(seen.data) == data
    took = seen.last_t - seen.first_t
    assert 1.8 <= took < 4.0, took  # 400 kB at 200 kB/s, less one 50 ms burst
    [event] = fired(proxy)
    assert (event["kind"], event["direction"], event["rate"]) == ("bandwidth", "up", 200_000)


def test_blackhole_up_swallows_what_the_client_sent(tmp_path):
    data = os.urandom(100_000)
    with FarServer() as far, \
            start_proxy(far.port, tmp_path / "p.jsonl",
                        [{"kind": "blackhole", "direction": "up"}]) as proxy, \
            connect(proxy.port) as sock:
        assert send_to_end(sock, data) == "sent"  # the client's send succeeds ...
        seen = far.next()
        assert recv_to_end(sock) == (b"", "eof")
        closed = wait_events(proxy, "connection_closed")
    assert len(seen.data) == 0 and seen.end == "eof"  # ... and the server got none of it
    assert closed[0]["bytes_up"] == 0 and closed[0]["bytes_swallowed"] == len(data)
    [event] = fired(proxy)
    assert (event["kind"], event["direction"], event["offset"]) == ("blackhole", "up", 0)


def test_faults_compose(tmp_path):
    data = os.urandom(5000)
    faults = [{"kind": "corrupt", "direction": "up", "at_byte": 10},
              {"kind": "reset", "direction": "up", "at_byte": 1000},
              {"kind": "latency", "direction": "up", "ms": 50}]
    with FarServer() as far, start_proxy(far.port, tmp_path / "p.jsonl", faults) as proxy, \
            connect(proxy.port) as sock:
        send_to_end(sock, data)
        seen = far.next()
        wait_events(proxy, "connection_closed")
    expected = bytearray(data[:1000])
    expected[10] ^= 0xFF
    assert bytes(seen.data) == bytes(expected) and seen.end == "reset"
    assert sorted(e["kind"] for e in fired(proxy)) == ["corrupt", "latency", "reset"]


def test_every_fault_is_armed_and_one_that_cannot_fire_never_does(tmp_path):
    faults = [{"kind": "reset", "direction": "up", "at_byte": 10_000_000},
              {"kind": "corrupt", "direction": "down", "at_byte": 10_000_000, "id": "late"},
              {"kind": "latency", "direction": "down", "ms": 0},
              {"kind": "bandwidth", "direction": "down", "bytes_per_s": 1_000_000_000},
              {"kind": "blackhole", "direction": "down"}]
    data = os.urandom(100_000)
    with FarServer() as far, start_proxy(far.port, tmp_path / "p.jsonl", faults) as proxy, \
            connect(proxy.port) as sock:
        assert send_to_end(sock, data) == "sent"
        seen = far.next()
        assert recv_to_end(sock) == (b"", "eof")
        closed = wait_events(proxy, "connection_closed")
    assert bytes(seen.data) == data and seen.end == "eof"
    events = proxy.events()
    assert events[0]["event"] == "listening" and events[0]["pid"] == proxy.pid
    armed = [e for e in events if e["event"] == "fault_armed"]
    assert [e["id"] for e in armed] == ["proxy-1", "late", "proxy-3", "proxy-4", "proxy-5"]
    for spec, event in zip(faults, armed, strict=True):
        assert {k: event[k] for k in spec if k != "id"} == {k: v for k, v in spec.items()
                                                            if k != "id"}
    assert [e for e in fired(proxy) if e["kind"] in ("reset", "corrupt")] == []
    assert closed[0]["bytes_up"] == len(data) and closed[0]["end"] == "eof"


@pytest.mark.parametrize("bad", [
    "not json",
    "[]",
    '{"kind": "explode", "direction": "up"}',
    '{"kind": "reset", "direction": "sideways", "at_byte": 1}',
    '{"kind": "reset", "direction": "up"}',
    '{"kind": "reset", "direction": "up", "at_byte": -1}',
    '{"kind": "corrupt", "direction": "up", "at_byte": true}',
    '{"kind": "corrupt", "direction": "up", "at_byte": 1.5}',
    '{"kind": "latency", "direction": "up", "ms": NaN}',
    '{"kind": "bandwidth", "direction": "up", "bytes_per_s": 0}',
    '{"kind": "blackhole", "direction": "up", "at_byte": 3}',
])
def test_an_invalid_fault_is_one_line_and_exit_2_before_listening(tmp_path, bad):
    events = tmp_path / "p.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "sessions.lab.proxy.server", "--target-port", "9",
         "--events", str(events),
         "--fault", '{"kind": "blackhole", "direction": "down"}', "--fault", bad],
        capture_output=True, text=True, timeout=10, cwd=ROOT)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "invalid --fault" in proc.stderr
    assert read_events(events) == []


def test_stop_resets_open_connections_and_records_them(tmp_path):
    with FarServer() as far, start_proxy(far.port, tmp_path / "p.jsonl") as proxy, \
            connect(proxy.port) as sock:
        sock.sendall(b"hello")
        wait_events(proxy, "upstream_connected")
        proxy.stop()
        assert proxy.process.returncode == 0
        got, how = recv_to_end(sock)
        seen = far.next()
    assert (got, how) == (b"", "reset")
    assert bytes(seen.data) == b"hello" and seen.end == "reset"
    events = proxy.events()
    assert [e["event"] for e in events][-2:] == ["connection_closed", "stopped"]
    assert events[-2]["end"] == "stopped" and events[-2]["bytes_up"] == 5


def test_an_unreachable_target_resets_the_client(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as spare:
        dead_port = spare.getsockname()[1]  # closed again before anyone connects
    with start_proxy(dead_port, tmp_path / "p.jsonl") as proxy:
        try:
            with connect(proxy.port) as sock:
                got, how = recv_to_end(sock)
        except ConnectionResetError:   # the reset came before connect() returned (load)
            got, how = b"", "reset"
        closed = wait_events(proxy, "connection_closed")
    assert got == b"" and how in ("reset", "eof")
    assert [e["event"] for e in proxy.events()].count("upstream_failed") == 1
    assert closed[0]["end"] == "upstream-failed"


@pytest.mark.live
def test_receiver_rejects_an_upload_corrupted_on_the_wire(built_clients, source_file, tmp_path):
    store = tmp_path / "store"
    corrupt = {"kind": "corrupt", "direction": "up", "at_byte": 200}
    with start_receiver(store, tmp_path / "rx.jsonl") as rx, \
            start_proxy(rx.port, tmp_path / "proxy.jsonl", [corrupt]) as proxy:
        subprocess.run([str(client_path("baseline")), "127.0.0.1", str(proxy.port),
                        str(source_file)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        received = read_events(rx.events_path)
        relayed = proxy.events()
    [rejected] = [e for e in received if e["event"] == "rejected"]
    assert rejected["reason"] == "digest-mismatch"
    assert all(e["conn"] != rejected["conn"] for e in received if e["event"] == "committed")
    # what the receiver hashed is the source with exactly the proxy's byte flipped
    # (byte 200 of the PUT connection, after its 76-byte header line)
    source = bytearray(source_file.read_bytes())
    header = len(f"PUT {hashlib.sha256(source).hexdigest()} {len(source)}\n")
    source[200 - header] ^= 0xFF
    assert rejected["detail"] == f"payload sha256 {hashlib.sha256(source).hexdigest()}"
    # the proxy connection that carried it is the one the receiver rejected
    [flip] = [e for e in relayed if e["event"] == "fault_fired"]
    [upstream] = [e for e in relayed if e["event"] == "upstream_connected"
                  and e["conn"] == flip["conn"]]
    [opened] = [e for e in received if e["event"] == "connection_opened"
                and e["conn"] == rejected["conn"]]
    assert upstream["upstream_port"] == opened["peer_port"]
    # the fault fires once, so the client's retry goes through intact: that upload, on a
    # later connection, is the one that saved the backup
    committed = [e for e in received if e["event"] == "committed"]
    assert [e["conn"] > rejected["conn"] for e in committed] == [True]
    assert backup_path(store).read_bytes() == source_file.read_bytes()


@pytest.mark.parametrize("kind", ["reset", "corrupt"])
def test_a_request_bound_fault_strikes_the_sources_upload_whatever_came_first(tmp_path, kind):
    """Junk uploads, CHECKs, a short upload of the source, uploads of it under a line the receiver
    refuses (a CR before its newline, a 21-digit length) and bytes on other connections cannot
    absorb a one-shot fault bound to the upload of the source (backup's bind pattern, its digest
    in any case): it strikes byte N of the first upload of the source that reaches it, counted
    from its PUT line (issue #24: faults no client can dodge)."""
    source = os.urandom(200_000)
    digest = hashlib.sha256(source).hexdigest()
    n = 1_000
    bind = load_task("backup").servers[0].bind.replace("{digest}", digest)
    fault = {"kind": kind, "direction": "up", "at_byte": n, "bind": bind}
    junk = b"PUT " + b"ab" * 32 + b" 150000\n" + os.urandom(150_000)
    short = f"PUT {digest} 500\n".encode() + source[:500]   # never reaches byte n
    check = f"CHECK {digest}\n".encode()
    # lines backup's receiver refuses (bad-length), whole uploads of the source after them
    crlf = f"PUT {digest} {len(source)}\r\n".encode() + source
    long = f"PUT {digest} {len(source):021d}\n".encode() + source
    real = check * 3 + f"PUT {digest.upper()} {len(source)}\n".encode() + source
    with FarServer() as far, start_proxy(far.port, tmp_path / "p.jsonl", [fault]) as proxy:
        for data in (b"x" * 100_000, junk, short, crlf, long, real):
            with connect(proxy.port) as sock:
                sent = send_to_end(sock, data)
                recv_to_end(sock)
            seen = far.next()
            seen.done.wait(TIMEOUT)
            if data is not real:   # these pass through whole and leave the fault armed
                assert sent == "sent" and bytes(seen.data) == data
        [event] = fired(proxy)
        short_seen, spotted = wait_events(proxy, "request_bound", 2)
    at = len(check) * 3 + n                   # where byte n of the source's upload is
    assert (event["conn"], event["offset"]) == (6, at) and spotted["start"] == len(check) * 3
    assert spotted["end"] == len(real)
    assert (short_seen["conn"], short_seen["end"]) == (3, len(short))
    if kind == "reset":
        assert bytes(seen.data) == real[:at] and seen.end == "reset"
    else:
        assert len(seen.data) == len(real) and seen.data[at] == real[at] ^ 0xFF
        assert bytes(seen.data[:at]) == real[:at] and bytes(seen.data[at + 1:]) == real[at + 1:]


def test_a_digest_bound_fault_beyond_every_upload_is_judged_as_never_reached(tmp_path):
    """The judge's view of the same rule: an upload of the source that stops short of the
    fault's offset gave it no chance (the client's choice), one that carried past it did. The
    records are an old archive's (source_upload, a fault armed by digest): they judge alike."""
    from sessions.judging.fault_chance import could_fire
    from sessions.stream.events import ServerRecord
    from sessions.stream.evidence import InvocationEvidence

    def record(event, **fields):
        return ServerRecord(0, "s", 1, "proxy", event, fields)
    fault = {"kind": "reset", "direction": "up", "at_byte": 1_000, "invocation": 1, "id": "f"}
    armed = record("fault_armed", kind="reset", direction="up", at_byte=1_000, digest="ab" * 32)
    short = InvocationEvidence(1, proxy=[armed, record("source_upload", conn=2, start=0, end=600,
                                                       down_base=0),
                                         record("connection_closed", conn=1, bytes_up=150_000),
                                         record("connection_closed", conn=2, bytes_up=600)])
    assert not could_fire(fault, short, 524_288, BACKUP)
    reached = InvocationEvidence(1, proxy=[armed, record("source_upload", conn=3, start=71,
                                                         end=524_400, down_base=5),
                                           record("connection_closed", conn=3, bytes_up=9_000)])
    assert could_fire(fault, reached, 524_288, BACKUP)


def test_a_fault_bound_to_a_request_with_no_length_reaches_it_once_the_stream_passes(tmp_path):
    """A bound request whose pattern gives no length (fetch's GET) has no end: a reset at byte N
    up had its chance once the connection carried past N from the request's line; down, once
    the answers carried past N from their offset when the line passed."""
    from sessions.judging.fault_chance import could_fire
    from sessions.stream.events import ServerRecord
    from sessions.stream.evidence import InvocationEvidence

    def record(event, **fields):
        return ServerRecord(0, "s", 1, "proxy", event, fields)
    for direction, key, bound in (("up", "bytes_up", {"start": 40}),
                                  ("down", "bytes_down", {"down_base": 300})):
        fault = {"kind": "reset", "direction": direction, "at_byte": 1_000, "invocation": 1,
                 "id": "f"}
        armed = record("fault_armed", kind="reset", direction=direction, at_byte=1_000,
                       bind="GET /file HTTP/1.1")
        spotted = record("request_bound", conn=1, **{"start": 0, "end": None, "down_base": 0,
                                                     **bound})
        at = 40 + 1_000 if direction == "up" else 300 + 1_000
        for carried, chance in ((at, False), (at + 1, True)):
            inv = InvocationEvidence(1, proxy=[armed, spotted,
                                               record("connection_closed", conn=1,
                                                      **{key: carried})])
            assert could_fire(fault, inv, 524_288, BACKUP) is chance, (direction, carried)
