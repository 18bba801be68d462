"""sessions/lab/spawner.py: servers forked by a warm interpreter behave as started ones do (port,
records, SIGTERM, SIGKILL status, start errors), and nothing outlives the spawner or evlab."""

import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from sessions.lab.harness import ServerStartError, start_decoy, stop_all
from sessions.lab.spawner import Spawner, keep_spawners, obtain, release
from tests.backup_lab import start_receiver

pytestmark = pytest.mark.live


@pytest.fixture
def spawner():
    s = Spawner.start()
    yield s
    s.close()


def test_forked_servers_serve_stop_and_report_their_status(tmp_path, spawner):
    receiver = start_receiver(tmp_path / "store", tmp_path / "r.jsonl", spawner=spawner)
    decoy = start_decoy(tmp_path / "d.jsonl", spawner=spawner)
    assert receiver.port and decoy.port and receiver.pid != decoy.pid
    assert psutil.Process(receiver.pid).ppid() == spawner.process.pid
    stop_all([receiver, decoy])
    assert (receiver.process.returncode, decoy.process.returncode) == (0, 0)
    events = [e["event"] for e in receiver.events()]
    assert events[0] == "listening" and not psutil.pid_exists(receiver.pid)
    killed = start_receiver(tmp_path / "store", tmp_path / "r.jsonl", spawner=spawner,
                            port=receiver.port)   # restarted on the same store and port
    assert killed.port == receiver.port
    killed.kill()
    assert killed.process.returncode == -signal.SIGKILL


def test_a_server_that_fails_at_start_says_why_in_one_line(tmp_path, spawner):
    with pytest.raises(ServerStartError, match="exited at start: .*"):
        start_receiver(tmp_path / "store", tmp_path / "r.jsonl", spawner=spawner,
                       extra_args=["--no-such-option"])


def test_closing_the_spawner_or_killing_its_parent_leaves_no_server(tmp_path):
    s = Spawner.start()
    receiver = start_receiver(tmp_path / "a", tmp_path / "a.jsonl", spawner=s)
    s.close()
    assert not psutil.pid_exists(receiver.pid) and s.process.poll() is not None
    # A parent killed with SIGKILL: the spawner sees its stdin close, its servers are
    # re-parented and stop on their own.
    code = (f"import sys, time; sys.path.insert(0, {os.getcwd()!r})\n"
            "from pathlib import Path\n"
            "from tests.backup_lab import start_receiver\n"
            "from sessions.lab.spawner import Spawner\n"
            "s = Spawner.start()\n"
            f"r = start_receiver(Path({str(tmp_path / 'b')!r}), "
            f"Path({str(tmp_path / 'b.jsonl')!r}), spawner=s)\n"
            "print(s.process.pid, r.pid, flush=True)\ntime.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
              for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                   for p in pids)


def test_a_reused_pid_is_a_new_process_not_the_one_that_exited(tmp_path, spawner):
    # pid_max can be small (32768 here) and a grade forks thousands of processes: a server
    # given the pid of one that exited earlier must not look dead from the start.
    first = start_receiver(tmp_path / "a", tmp_path / "a.jsonl", spawner=spawner)
    first.stop()
    assert spawner.status_of(first.pid) == 0
    spawner.record({"pid": first.pid, "ticket": 0})   # the kernel hands the pid out again
    assert spawner.status_of(first.pid) is None


def test_a_restarted_receiver_keeps_its_port_while_it_is_down(tmp_path, spawner):
    # Scenarios run at once: a receiver SIGKILLed for the durability check (or by an injected
    # crash) must get its port back, so nothing else may bind it meanwhile.
    key = str(tmp_path)
    first = start_receiver(tmp_path / "store", tmp_path / "r.jsonl", spawner=spawner,
                           listen_key=key)
    first.kill()
    other = socket.socket()
    with pytest.raises(OSError):
        other.bind(("127.0.0.1", first.port))
    other.close()
    again = start_receiver(tmp_path / "store", tmp_path / "r.jsonl", spawner=spawner,
                           port=first.port, listen_key=key)
    assert again.port == first.port
    with socket.create_connection(("127.0.0.1", again.port), timeout=5) as c:
        c.sendall(b"CHECK " + b"0" * 64 + b"\n")
        assert c.recv(100).startswith(b"NEED")
    again.stop()
    spawner.release(key)
    deadline = time.monotonic() + 5
    while True:   # released: the port is free again
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", first.port))
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        finally:
            probe.close()


def test_servers_spawned_from_several_threads_at_once_are_each_their_own(tmp_path, spawner):
    # Each spawn() waits for the answer to its own request, however the answers interleave.
    from concurrent.futures import ThreadPoolExecutor

    def start(i):
        if i % 2:
            return start_decoy(tmp_path / f"d{i}.jsonl", spawner=spawner), f"d{i}.jsonl"
        return start_receiver(tmp_path / f"s{i}", tmp_path / f"r{i}.jsonl",
                              spawner=spawner), f"r{i}.jsonl"

    with ThreadPoolExecutor(8) as pool:
        started = list(pool.map(start, range(16)))
    try:
        for server, events in started:
            assert events in " ".join(psutil.Process(server.pid).cmdline())
            assert server.events()[0]["pid"] == server.pid
    finally:
        stop_all([s for s, _ in started])


def test_a_kept_spawner_serves_again_unless_a_variable_its_servers_read_changed(monkeypatch):
    """The tests keep spawners (conftest.py) with pytest's name of the running test set aside:
    that name changes at every test, and no spawner was ever taken again while it counted."""
    keep_spawners(unread={"PYTEST_CURRENT_TEST"})
    first = obtain()
    release(first)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_other.py::test_next (call)")
    again = obtain()
    assert again is first
    release(again)
    monkeypatch.setenv("EVLAB_TEST_READ_BY_SERVERS", "1")
    other = obtain()
    assert other is not first and first.gone()   # the stale one closed, a new one started
    assert other.environ["EVLAB_TEST_READ_BY_SERVERS"] == "1"
    release(other)
