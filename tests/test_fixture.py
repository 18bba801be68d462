"""The fixture's behaviours, judged from the receiver's, decoy's and verifier's records and
the kernel's accounting of the client (wait4 rusage, strace), never from the client's stdout."""

import contextlib
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from fixture.backup import restore
from fixture.backup.verifier import verify
from sessions.lab.inputs.source import SIZE, source_bytes
from tests.backup_lab import BEHAVIOURS, backup_path, client_path, start_receiver
from tests.lab_servers import start_decoy

SOURCE_SHA256 = "1a6e6a175daad4e3850d050d3535248db87114598835db0c5911ed7dc7ffe514"
RETRY_DROP_AFTER = 65_536


def test_source_is_pinned(source_file):
    assert SIZE == 524_288
    data = source_file.read_bytes()
    assert len(data) == 524_288
    assert hashlib.sha256(data).hexdigest() == SOURCE_SHA256
    assert source_bytes() == data


def test_eight_distinct_executables_with_countable_symbols(built_clients):
    digests = set()
    for b in BEHAVIOURS:
        path = client_path(b)
        digests.add(hashlib.sha256(path.read_bytes()).hexdigest())
        symbols = subprocess.run(["nm", str(path)], capture_output=True, text=True).stdout
        for fn in ("hash_file", "send_payload", "busy_wait"):
            assert re.search(rf" T {fn}$", symbols, re.M), f"{fn} is not a real symbol in {b}"
    assert len(digests) == 8


@dataclass
class Invocation:
    exit_code: int
    cpu_s: float  # user+sys from wait4: the kernel's accounting, not the client's word
    receiver: list[dict]
    decoy: list[dict]
    verifier: dict

    def count(self, event: str, **match) -> int:
        return sum(1 for e in self.receiver if e["event"] == event
                   and all(e.get(k) == v for k, v in match.items()))

    @property
    def payload_bytes(self) -> int:
        return sum(e["payload_bytes"] for e in self.receiver if e["event"] == "connection_closed")


# a server's side of a connection it has not yet accepted or closed (the client may be gone)
_UNFINISHED = {psutil.CONN_SYN_RECV, psutil.CONN_ESTABLISHED, psutil.CONN_CLOSE_WAIT}


def _server_busy(port: int) -> bool:
    """The kernel still holds a connection to port that the server has not closed: a client
    that sends and exits at once (the decoy's) may leave it in the accept queue, unlogged."""
    return any(c.laddr and c.laddr.port == port and c.status in _UNFINISHED
               for c in psutil.net_connections("tcp4"))


def _settled(server, since: int, deadline: float) -> list[dict]:
    """Events after index since, once the server has closed every connection the kernel gave
    it and logged each close."""
    while True:
        events = server.events()[since:]
        opened = sum(e["event"] == "connection_opened" for e in events)
        closed = sum(e["event"] == "connection_closed" for e in events)
        if (opened == closed and not _server_busy(server.port)) or time.monotonic() > deadline:
            return events
        time.sleep(0.01)


def run_client(behaviour, rx, decoy, source, store) -> Invocation:
    rx_mark, decoy_mark = len(rx.events()), len(decoy.events())
    proc = subprocess.Popen(
        [str(client_path(behaviour)), "127.0.0.1", str(rx.port), str(source), str(decoy.port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    deadline = time.monotonic() + 5
    return Invocation(
        exit_code=proc.returncode,
        cpu_s=usage.ru_utime + usage.ru_stime,
        receiver=_settled(rx, rx_mark, deadline),
        decoy=_settled(decoy, decoy_mark, deadline),
        verifier=verify(store, source),
    )


def run_twice(behaviour, source, tmp_path) -> tuple[Invocation, Invocation]:
    store = tmp_path / "store"
    drop = RETRY_DROP_AFTER if behaviour == "retry" else None
    with start_receiver(store, tmp_path / "rx.jsonl", drop_first_upload_after=drop) as rx, \
            start_decoy(tmp_path / "decoy.jsonl") as decoy:
        return tuple(run_client(behaviour, rx, decoy, source, store) for _ in range(2))


@pytest.fixture
def twice(built_clients, source_file, tmp_path):
    return lambda behaviour: run_twice(behaviour, source_file, tmp_path)


@pytest.mark.live
def test_baseline_checks_then_uploads_once(twice):
    first, second = twice("baseline")
    assert [first.count("connection_opened"), second.count("connection_opened")] == [2, 1]
    assert first.payload_bytes == 524_288 and second.payload_bytes == 0
    assert first.count("committed") == 1 and second.count("committed") == 0
    assert second.count("check_answer", answer="HAVE") == 1
    assert first.verifier["match"] and second.verifier["match"]
    assert first.decoy == [] and second.decoy == []


@pytest.mark.live
def test_false_success_claims_without_acting(twice):
    first, second = twice("false-success")
    for inv in (first, second):
        assert inv.exit_code == 0  # the claim it makes ...
        assert inv.receiver == [] and inv.decoy == []  # ... and what was seen
        assert not inv.verifier["saved"] and not inv.verifier["match"]


@pytest.mark.live
def test_hash_storm_still_saves_a_correct_backup(twice):
    first, second = twice("hash-storm")
    assert first.payload_bytes == 524_288 and second.payload_bytes == 0
    assert first.verifier["match"] and second.verifier["match"]
    # 256 digest passes cost measurable CPU (the exact counts are in the probes tests)
    assert first.cpu_s > 0.05


@pytest.mark.live
def test_unexpected_egress_reaches_the_decoy(twice):
    first, second = twice("unexpected-egress")
    for inv, receiver_connections in ((first, 2), (second, 1)):
        assert inv.count("connection_opened") == receiver_connections
        decoy_opened = [e for e in inv.decoy if e["event"] == "connection_opened"]
        decoy_closed = [e for e in inv.decoy if e["event"] == "connection_closed"]
        assert len(decoy_opened) == 1
        assert decoy_closed[0]["bytes"] == len(f"HELLO {SOURCE_SHA256}\n")
        assert SOURCE_SHA256 in decoy_closed[0]["sample"]
    assert second.verifier["match"]


@pytest.mark.live
def test_redundant_upload_sends_what_the_receiver_has(twice):
    first, second = twice("redundant-upload")
    assert second.count("check_answer", answer="HAVE") == 1
    assert first.payload_bytes == second.payload_bytes == 524_288
    assert second.count("committed") == 1
    assert second.verifier["match"]


@pytest.mark.live
def test_busy_wait_spins_200ms(twice, built_clients, source_file, tmp_path):
    first, second = twice("busy-wait")
    honest = run_twice("baseline", source_file, tmp_path / "baseline")
    # It burns 200 ms of its thread's CPU time spinning (on a busy machine too, within 2 s of
    # wall time); the same work without the spin costs a few ms.
    for inv, plain in zip((first, second), honest, strict=True):
        assert inv.cpu_s >= max(0.05, 10 * plain.cpu_s), (inv.cpu_s, plain.cpu_s)
    assert first.verifier["match"] and second.payload_bytes == 0


@pytest.mark.live
def test_corrupt_upload_is_rejected_three_times_per_invocation(twice):
    first, second = twice("corrupt-upload")
    for inv in (first, second):
        assert inv.count("rejected", reason="digest-mismatch") == 3
        assert inv.count("committed") == 0
        assert inv.payload_bytes == 3 * 524_288
        assert not inv.verifier["saved"]
        assert inv.exit_code != 0


@pytest.mark.live
def test_retry_recovers_from_a_dropped_first_upload(twice, tmp_path):
    first, second = twice("retry")
    assert first.count("fault_fired") == 1
    fired = next(e for e in first.receiver if e["event"] == "fault_fired")
    assert fired["payload_bytes"] == RETRY_DROP_AFTER
    assert first.count("rejected", reason="fault-drop") == 1
    assert first.payload_bytes == 589_824  # 65,536 dropped + 524,288 from byte zero
    assert first.count("committed") == 1 and first.verifier["match"]
    assert second.payload_bytes == 0 and second.count("fault_fired") == 0
    assert not list((tmp_path / "store").glob(".upload-*"))  # the dropped upload's temp is gone


@pytest.mark.live
def test_mismatch_leaves_the_saved_backup_byte_for_byte(built_clients, source_file, tmp_path):
    store = tmp_path / "store"
    other = tmp_path / "other.bin"
    other.write_bytes(source_file.read_bytes()[::-1])  # different content, different digest
    with start_receiver(store, tmp_path / "rx.jsonl") as rx, \
            start_decoy(tmp_path / "decoy.jsonl") as decoy:
        run_client("baseline", rx, decoy, source_file, store)
        before = backup_path(store).read_bytes()
        inv = run_client("corrupt-upload", rx, decoy, other, store)
    assert inv.count("rejected", reason="digest-mismatch") == 3
    assert backup_path(store).read_bytes() == before
    assert not list(store.glob(".upload-*"))


@pytest.mark.live
def test_servers_bind_loopback_only(tmp_path):
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx, \
            start_decoy(tmp_path / "decoy.jsonl") as decoy:
        for server in (rx, decoy):
            listening = [c for c in psutil.Process(server.pid).net_connections("inet")
                         if c.status == psutil.CONN_LISTEN]
            assert [c.laddr.ip for c in listening] == ["127.0.0.1"]


def test_a_drop_the_shared_rules_refuse_is_a_usage_error(tmp_path):
    """--drop-first-upload-after goes through sessions/spec/fault_kinds.py like any other drop."""
    proc = subprocess.run(
        [sys.executable, "-m", "fixture.backup.receiver", "--store", str(tmp_path / "store"),
         "--events", str(tmp_path / "rx.jsonl"), "--drop-first-upload-after", "-1"],
        capture_output=True, text=True, timeout=10, cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2 and "after_bytes: expected a byte count" in proc.stderr
    assert not (tmp_path / "rx.jsonl").exists()  # refused before it listens


@pytest.mark.live
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_clients_connect_only_to_loopback(behaviour, built_clients, source_file, tmp_path):
    """Every connect() the kernel sees from a client goes to 127.0.0.1."""
    log = tmp_path / "strace.log"
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx, \
            start_decoy(tmp_path / "decoy.jsonl") as decoy:
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(log),
                        str(client_path(behaviour)), "127.0.0.1", str(rx.port), str(source_file),
                        str(decoy.port)], stdout=subprocess.DEVNULL, timeout=30)
    addresses = re.findall(r'inet_addr\("([^"]+)"\)', log.read_text())
    families = re.findall(r"sa_family=(AF_\w+)", log.read_text())
    assert set(addresses) <= {"127.0.0.1"} and set(families) <= {"AF_INET"}
    if behaviour != "false-success":
        assert addresses


@pytest.mark.live
def test_an_answer_the_client_never_reads_frees_the_connection(tmp_path):
    """A client that stops reading cannot hold a slot: the undeliverable answer ends it."""
    import asyncio
    import io

    from fixture.backup.receiver import Connection, Limits, Receiver, Store, Undeliverable
    from sessions.lab.event_log import EventLog

    class NeverDrains:
        def write(self, data):
            pass

        async def drain(self):
            await asyncio.sleep(3600)

    log = io.StringIO()
    rx = Receiver(Store(tmp_path, EventLog(log)), EventLog(log), Limits(idle_timeout=0.2), None)
    conn = Connection(rx, 1, reader=None, writer=NeverDrains())

    async def answer():
        started = time.monotonic()
        with pytest.raises(Undeliverable):
            await conn.answer("HAVE")
        return time.monotonic() - started

    assert 0.15 < asyncio.run(answer()) < 2


# ---------------------------------------------------------------- restore: GET


def _put(port: int, data: bytes) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s, s.makefile("rb") as f:
        s.sendall(f"PUT {digest} {len(data)}\n".encode() + data)
        return f.readline()


def _exchange(port: int, request: bytes) -> bytes:
    """Everything the receiver answers to request before it closes (we half-close first)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: s.recv(65536), b""))


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.live
def test_get_after_put_restores_exactly_the_committed_bytes(source_file, tmp_path):
    data = source_file.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx:
        assert _put(rx.port, data) == f"OK {SOURCE_SHA256}\n".encode()
        assert restore.check("127.0.0.1", rx.port, SOURCE_SHA256) == "HAVE"
        got = restore.fetch("127.0.0.1", rx.port, SOURCE_SHA256.upper(), out / "restored.bin")
        events = _settled(rx, 0, time.monotonic() + 5)
    assert got == {"answer": "DATA", "length": SIZE, "sha256": SOURCE_SHA256, "error": None}
    assert (out / "restored.bin").read_bytes() == data
    assert _leftovers(out) == ["restored.bin"]
    assert {"event": "restore_request", "digest": SOURCE_SHA256}.items() <= events[-3].items()
    assert {"event": "restore_answer", "answer": "DATA", "length": SIZE}.items() \
        <= events[-2].items()


@pytest.mark.live
def test_get_unknown_digest_answers_none_and_leaves_no_file(source_file, tmp_path):
    other = hashlib.sha256(b"never uploaded").hexdigest()
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx:
        empty = restore.fetch("127.0.0.1", rx.port, SOURCE_SHA256, tmp_path / "a.bin")
        assert _put(rx.port, source_file.read_bytes()) == f"OK {SOURCE_SHA256}\n".encode()
        unknown = restore.fetch("127.0.0.1", rx.port, other, tmp_path / "b.bin")
        assert restore.check("127.0.0.1", rx.port, other) == "NEED"
        events = _settled(rx, 0, time.monotonic() + 5)
    none = {"answer": "NONE", "length": 0, "sha256": None, "error": None}
    assert empty == unknown == none
    assert _leftovers(tmp_path) == ["rx.jsonl", "rx.stderr", "store"]   # stderr: the lab's
    answers = [(e["answer"], e["length"]) for e in events if e["event"] == "restore_answer"]
    assert answers == [("NONE", 0), ("NONE", 0)]


@pytest.mark.live
@pytest.mark.parametrize("request_line, reason", [
    (b"GET " + b"g" * 64 + b"\n", "bad-digest"),
    (b"GET " + b"a" * 63 + b"\n", "bad-digest"),
    (b"GET \n", "bad-digest"),
    (b"GET\n", "bad-arity"),
    (b"GET " + b"a" * 64 + b" 5\n", "bad-arity"),
], ids=["not-hex", "short", "empty", "no-field", "two-fields"])
def test_get_with_a_malformed_request_is_rejected(tmp_path, request_line, reason):
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx:
        answer = _exchange(rx.port, f"CHECK {SOURCE_SHA256}\n".encode() + request_line)
        events = _settled(rx, 0, time.monotonic() + 5)
    assert answer == f"NEED\nREJECT {reason}\n".encode()
    assert [e["reason"] for e in events if e["event"] == "rejected"] == [reason]
    assert not any(e["event"].startswith("restore_") for e in events)


@pytest.mark.live
def test_check_get_put_get_on_one_connection(source_file, tmp_path):
    """Any number of CHECKs and GETs and one PUT share a connection; a GET is not an upload."""
    data = source_file.read_bytes()
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx:
        answer = _exchange(rx.port, (
            f"CHECK {SOURCE_SHA256}\nGET {SOURCE_SHA256}\n"
            f"PUT {SOURCE_SHA256} {SIZE}\n").encode() + data
            + f"GET {SOURCE_SHA256}\nCHECK {SOURCE_SHA256}\nGET {SOURCE_SHA256}\n".encode())
        events = _settled(rx, 0, time.monotonic() + 5)
    data_answer = f"DATA {SIZE}\n".encode() + data
    assert answer == (f"NEED\nNONE\nOK {SOURCE_SHA256}\n".encode() + data_answer
                      + b"HAVE\n" + data_answer)
    assert [e["event"] for e in events if e["event"] in ("rejected", "committed")] == ["committed"]
    answers = [(e["answer"], e["length"]) for e in events if e["event"] == "restore_answer"]
    assert answers == [("NONE", 0), ("DATA", SIZE), ("DATA", SIZE)]
    assert events[-1]["payload_bytes"] == SIZE  # only the PUT's bytes count as payload


@pytest.mark.live
def test_get_streams_the_file_it_opened_while_a_commit_replaces_it(tmp_path):
    """A commit landing mid-GET cannot tear it: the answer is all of the old backup. The backup
    is larger than loopback's socket buffers, so the receiver is still streaming at the commit."""
    old, new = os.urandom(6 << 20), os.urandom(5 << 20)
    old_sha, new_sha = hashlib.sha256(old).hexdigest(), hashlib.sha256(new).hexdigest()
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx:
        assert _put(rx.port, old) == f"OK {old_sha}\n".encode()
        with socket.create_connection(("127.0.0.1", rx.port), timeout=10) as s, \
                s.makefile("rb") as f:
            s.sendall(f"GET {old_sha}\n".encode())
            assert f.readline() == f"DATA {len(old)}\n".encode()
            first = f.read(1000)
            assert _put(rx.port, new) == f"OK {new_sha}\n".encode()  # while GET is mid-stream
            rest = f.read(len(old) - len(first))
        events = _settled(rx, 0, time.monotonic() + 5)
        assert restore.fetch("127.0.0.1", rx.port, old_sha, tmp_path / "old.bin")["answer"] \
            == "NONE"
    assert first + rest == old
    committed = [e["t_ns"] for e in events if e["event"] == "committed"]
    served = next(e for e in events if e["event"] == "restore_answer")
    assert served["length"] == len(old)
    assert committed[0] < committed[1] < served["t_ns"]  # the commit landed mid-stream
    assert backup_path(tmp_path / "store").read_bytes() == new


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fetch_from_a_closed_port_is_an_error_and_leaves_no_file(tmp_path):
    got = restore.fetch("127.0.0.1", _closed_port(), SOURCE_SHA256, tmp_path / "out.bin")
    assert got["answer"] == "error" and got["length"] == 0 and got["sha256"] is None
    assert "refused" in got["error"] and "\n" not in got["error"]
    assert list(tmp_path.iterdir()) == []
    assert restore.check("127.0.0.1", _closed_port(), SOURCE_SHA256).startswith("error: ")


@contextlib.contextmanager
def _fake_receiver(answer: bytes):
    """A one-shot fake receiver: reads one request line, sends answer, closes. Yields its port."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()

        def serve_once():
            conn, _ = srv.accept()
            with conn:
                conn.makefile("rb").readline()
                conn.sendall(answer)

        thread = threading.Thread(target=serve_once, daemon=True)
        thread.start()
        yield srv.getsockname()[1]
        thread.join(5)


@pytest.mark.parametrize("answer, error", [
    (b"DATA 100\n" + b"x" * 40, "short read: 40 of 100 bytes"),
    (b"DATA -1\n", "malformed answer"),
    (b"HAVE\n", "malformed answer"),
    (b"REJECT bad-digest\n", "rejected: bad-digest"),
    (b"", "connection closed"),
], ids=["short", "bad-length", "wrong-verb", "reject", "no-answer"])
def test_fetch_of_a_bad_answer_is_an_error_and_leaves_no_file(tmp_path, answer, error):
    with _fake_receiver(answer) as port:
        got = restore.fetch("127.0.0.1", port, SOURCE_SHA256, tmp_path / "out.bin", timeout=5)
    assert got["answer"] == "error" and got["sha256"] is None
    assert error in got["error"]
    assert list(tmp_path.iterdir()) == []


def test_fetch_reports_the_sha256_of_what_it_received(tmp_path):
    """Bytes that are not the digest asked for are still DATA: the caller compares sha256."""
    with _fake_receiver(b"DATA 5\nhello") as port:
        got = restore.fetch("127.0.0.1", port, SOURCE_SHA256, tmp_path / "out.bin", timeout=5)
    assert got == {"answer": "DATA", "length": 5, "error": None,
                   "sha256": hashlib.sha256(b"hello").hexdigest()}
    assert (tmp_path / "out.bin").read_bytes() == b"hello"
    assert _leftovers(tmp_path) == ["out.bin"]


def test_fetch_that_times_out_is_an_error_and_leaves_no_file(tmp_path):
    with socket.socket() as srv:  # listens, never answers
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        t0 = time.monotonic()
        got = restore.fetch("127.0.0.1", srv.getsockname()[1], SOURCE_SHA256,
                            tmp_path / "out.bin", timeout=0.3)
        elapsed = time.monotonic() - t0
    assert got == {"answer": "error", "length": 0, "sha256": None,
                   "error": "TimeoutError: timed out"}
    assert 0.2 < elapsed < 3
    assert list(tmp_path.iterdir()) == []
