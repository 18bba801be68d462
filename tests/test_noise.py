"""sessions/lab/noise.py and its helper program (sessions/lab/noise_helper.py): every kind
observably does something, checked from outside where possible (the kernel's socket table, the
wire, psutil, the file system, the records the noise keeps in its workdir); nothing ever touches
the receiver's port; and nothing the noise started survives stop() or the death of its starter."""

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from probes.packets.capture import CaptureUnavailable, PacketCapture
from sessions.lab.noise import CPU_SPINNERS, HELPER, Noise
from tests.backup_lab import client_path
from tests.packet_totals import port_totals

RUN_S = 2.5
SAMPLE_S = 0.1


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _receiver_socket(neighbour_free: bool = True) -> socket.socket:
    """A listening stand-in for the receiver; with neighbour_free, one whose port+1 is free."""
    for _ in range(50):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.setblocking(False)
        port = sock.getsockname()[1]
        if not neighbour_free or (port < 65535 and _free(port + 1)):
            return sock
        sock.close()
    raise RuntimeError("no port with a free neighbour")


def _pending(listener: socket.socket) -> int:
    """Connections the kernel completed on listener (nobody ever accepted them)."""
    count = 0
    while True:
        try:
            listener.accept()[0].close()
            count += 1
        except BlockingIOError:
            return count


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _using(workdir: Path) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"])
            if str(workdir) in " ".join(p.info["cmdline"] or [])]


def _record(noise: Noise, name: str) -> dict:
    """What one noise kind put on record in its workdir (noise-NAME.json)."""
    try:
        return json.loads((noise.workdir / f"noise-{name}.json").read_text())
    except (OSError, ValueError):
        return {}


def _stats(noise: Noise, cpu_last: dict[int, float] | None = None) -> dict:
    """What the noise did so far: its records, and the spinners' last CPU readings (psutil)."""
    out: dict = {}
    if "traffic" in noise.kinds:
        record = _record(noise, "traffic")
        out["traffic"] = {
            "sinks": {port: {"bound": how,
                             "connections": record.get("accepted", {}).get(str(port), 0),
                             "bytes_received": record.get("received", {}).get(str(port), 0)}
                      for port, how in noise.sinks.items()},
            "bytes_sent": {int(p): n for p, n in record.get("sent", {}).items()},
            "connections": record.get("connections", 0),
            "connect_errors": record.get("connect_errors", 0),
        }
    if "twin" in noise.kinds:
        record = _record(noise, "twin")
        runs = {int(p): n for p, n in record.get("runs", {}).items()}
        out["twin"] = {"runs": sum(runs.values()), "runs_by_port": runs,
                       "start_errors": record.get("start_errors", 0)}
    if "churn" in noise.kinds:
        record = _record(noise, "churn")
        out["churn"] = {k: record.get(k, 0)
                        for k in ("created", "deleted", "fsyncs", "bytes_written")}
    if "cpu" in noise.kinds and cpu_last is not None:
        out["cpu"] = {"cpu_seconds": round(sum(cpu_last.values()), 3)}
    return out


@dataclass
class Run:
    """Everything observed while one noise of every kind ran for RUN_S seconds."""

    noise: Noise
    workdir: Path
    receiver_port: int
    running_at_start: dict = field(default_factory=dict)   # role -> alive as start returned
    duration_s: float = 0.0
    pids: dict[str, set[int]] = field(default_factory=dict)          # role -> pids seen
    cpu_first: dict[int, float] = field(default_factory=dict)
    cpu_last: dict[int, float] = field(default_factory=dict)
    adjacent_conns: set = field(default_factory=set)   # (laddr, raddr) pairs, socket table
    receiver_conns: set = field(default_factory=set)
    twins_seen: set[int] = field(default_factory=set)  # via psutil, by executable path
    churn_seen: set[str] = field(default_factory=set)
    stats_running: dict = field(default_factory=dict)
    stats_after: dict = field(default_factory=dict)
    pending_on_receiver: int = -1
    wire: dict | None = None                           # port -> payload bytes to it
    wire_receiver_packets: int = -1


def _watch_twins(run: Run, done: threading.Event) -> None:
    """Look for the twin by its executable path, often: one run lasts 2-200 ms."""
    twin = str(run.noise.twin_path)
    while not done.wait(0.01):
        for proc in psutil.Process().children():
            try:
                if proc.cmdline()[:1] == [twin]:
                    run.twins_seen.add(proc.pid)
            except psutil.Error:
                pass


def _sample(run: Run) -> None:
    for role, pid in run.noise.pids().items():
        run.pids.setdefault(role.split("-")[0], set()).add(pid)
        if role.startswith("cpu-"):
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            run.cpu_first.setdefault(pid, times.user + times.system)
            run.cpu_last[pid] = times.user + times.system
    for conn in psutil.net_connections("tcp"):
        ports = {conn.laddr.port if conn.laddr else 0, conn.raddr.port if conn.raddr else 0}
        if run.receiver_port + 1 in ports and conn.status != psutil.CONN_LISTEN:
            run.adjacent_conns.add((conn.laddr, conn.raddr))
        if run.receiver_port in ports and conn.status != psutil.CONN_LISTEN:
            run.receiver_conns.add((conn.laddr, conn.raddr, conn.status))
    churn = run.workdir / "churn"
    if churn.exists():
        run.churn_seen.update(p.name for p in churn.iterdir())


@pytest.fixture(scope="module")
def run(built_clients, tmp_path_factory) -> Run:
    workdir = tmp_path_factory.mktemp("noise")
    receiver = _receiver_socket()
    port = receiver.getsockname()[1]
    try:
        capture = PacketCapture().start()
        capture.set_ports({port, port + 1})
    except CaptureUnavailable:
        capture = None
    noise = Noise(workdir, port, client_path("baseline"))
    result, done = Run(noise, workdir, port), threading.Event()
    try:
        began = time.monotonic()
        noise.start()
        result.running_at_start = {name: psutil.pid_exists(pid)
                                   for name, pid in noise.pids().items()}
        if capture is not None:
            capture.add_ports(noise.sinks)
        threading.Thread(target=_watch_twins, args=(result, done), daemon=True).start()
        while time.monotonic() - began < RUN_S:
            _sample(result)
            time.sleep(SAMPLE_S)
        _sample(result)  # the spinners' last CPU readings, just before they are stopped
        result.stats_running = _stats(noise, result.cpu_last)
    finally:
        done.set()
        noise.stop()
        result.duration_s = time.monotonic() - began
        if capture is not None:
            time.sleep(0.1)  # the last frames reach the capture thread
            capture.stop()
            seen = capture.drain()
            result.wire = {p: port_totals(seen, p).to_port.payload_bytes
                           for p in [*noise.sinks, port]}
            result.wire_receiver_packets = (port_totals(seen, port).to_port.packets
                                            + port_totals(seen, port).from_port.packets)
        result.pending_on_receiver = _pending(receiver)
        receiver.close()
    result.stats_after = _stats(noise, result.cpu_last)
    return result


@pytest.mark.slow
@pytest.mark.live
def test_start_returns_with_its_helpers_running_not_once_they_are_done(run):
    """start() starts the noise and returns (a scenario runs beside it): every helper is
    running as it returns."""
    helpers = {"traffic", "churn", *(f"cpu-{i}" for i in range(CPU_SPINNERS))}
    assert set(run.running_at_start) >= helpers
    assert all(run.running_at_start.values()), run.running_at_start


@pytest.mark.slow
@pytest.mark.live
def test_traffic_reaches_both_sinks(run):
    traffic = run.stats_after["traffic"]
    adjacent = run.receiver_port + 1
    assert traffic["sinks"][adjacent]["bound"] == "endpoint_port+1"
    assert len(traffic["sinks"]) == 2
    assert set(traffic["bytes_sent"]) == set(traffic["sinks"])
    for port, sink in traffic["sinks"].items():
        assert traffic["bytes_sent"][port] > 10_000
        assert sink["connections"] >= 10
        # the sink's own count, from the receiving side: at least what the talker reported
        # (it may be more: the twin connects to the sinks too)
        assert sink["bytes_received"] >= traffic["bytes_sent"][port] * 0.9
    # bounded: ~50 connections/s and well under a few MB/s
    assert traffic["connections"] / run.duration_s <= 60
    assert sum(traffic["bytes_sent"].values()) / run.duration_s < 2_000_000


@pytest.mark.slow
@pytest.mark.live
def test_traffic_to_adjacent_port_seen_from_outside(run):
    # The kernel's socket table (TIME_WAIT lingers 60 s) shows the connections to port+1 ...
    assert len(run.adjacent_conns) >= 5
    # ... and, where capture is possible, the wire carries (about) the bytes the talker
    # reported; a loaded machine may stop the capture before its last frames are read.
    if run.wire is None:
        pytest.skip("no packet capture here (needs root): socket-table evidence only")
    for port in run.noise.sinks:
        assert run.wire[port] >= 0.8 * run.stats_running["traffic"]["bytes_sent"][port]


@pytest.mark.slow
@pytest.mark.live
def test_nothing_touches_the_receiver_port(run):
    assert run.pending_on_receiver == 0
    assert run.receiver_conns == set()
    assert run.receiver_port not in run.noise.sinks
    assert run.receiver_port not in run.stats_after["twin"]["runs_by_port"]
    if run.wire is not None:
        assert run.wire_receiver_packets == 0  # not even a SYN


@pytest.mark.slow
@pytest.mark.live
def test_twin_is_a_same_named_copy_that_runs(run, built_clients):
    client = client_path("baseline")
    twin = run.noise.twin_path
    assert twin.name == client.name and twin.parent == run.workdir / "twin"
    assert twin.resolve() != client.resolve()
    assert hashlib.sha256(twin.read_bytes()).digest() == \
        hashlib.sha256(client.read_bytes()).digest()
    stats = run.stats_after["twin"]
    assert stats["runs"] >= 2 and stats["start_errors"] == 0
    assert any(port in run.noise.sinks for port in stats["runs_by_port"])  # it connected
    assert run.twins_seen  # psutil saw it running, by its executable path


@pytest.mark.slow
@pytest.mark.live
def test_churn_creates_and_deletes_files(run):
    churn = run.stats_after["churn"]
    assert churn["created"] >= 50 and churn["fsyncs"] >= 1
    assert churn["deleted"] >= churn["created"] - 30
    assert len(run.churn_seen) >= 10      # seen in the directory while it ran
    assert list((run.workdir / "churn").iterdir()) == []


@pytest.mark.slow
@pytest.mark.live
def test_cpu_spinners_burn_cpu(run):
    assert len(run.pids["cpu"]) == CPU_SPINNERS
    for pid in run.pids["cpu"]:
        assert run.cpu_last[pid] - run.cpu_first[pid] >= 0.25
    assert run.stats_after["cpu"]["cpu_seconds"] >= 0.5


@pytest.mark.slow
@pytest.mark.live
def test_nothing_survives_stop(run):
    seen = set().union(*run.pids.values())
    assert {"traffic", "churn", "cpu", "twin"} <= set(run.pids)
    assert [pid for pid in seen | run.twins_seen if _alive(pid)] == []
    assert _using(run.workdir) == []
    assert run.noise.pids() == {}


def test_stop_is_idempotent_and_context_manager(tmp_path):
    # churn only: the client is never copied or run, so it need not be built
    receiver = _receiver_socket()
    with Noise(tmp_path, receiver.getsockname()[1], client_path("baseline"),
               kinds=("churn",)) as noise:
        deadline = time.monotonic() + 5
        while _stats(noise)["churn"]["created"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = noise.pids()
    noise.stop()
    assert pids and not any(_alive(pid) for pid in pids.values())
    assert _stats(noise)["churn"]["created"] > 0
    Noise(tmp_path / "never", 1, client_path("baseline")).stop()  # stop before start: no-op
    receiver.close()


@pytest.mark.live
def test_adjacent_port_taken_uses_free_ports(built_clients, tmp_path):
    receiver = _receiver_socket()
    port = receiver.getsockname()[1]
    occupant = socket.socket()
    occupant.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        occupant.bind(("127.0.0.1", port + 1))
    except OSError:
        pytest.skip("port+1 was taken between the check and the bind")
    occupant.listen(64)
    occupant.setblocking(False)
    with Noise(tmp_path, port, client_path("baseline"), kinds=("traffic", "twin")) as noise:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            stats = _stats(noise)
            if (stats["twin"]["runs"] >= 3
                    and all(stats["traffic"]["bytes_sent"].get(p) for p in noise.sinks)):
                break
            time.sleep(0.05)
    sinks = stats["traffic"]["sinks"]
    assert len(sinks) == 2 and all(s["bound"] == "os-chosen" for s in sinks.values())
    assert port not in sinks and port + 1 not in sinks
    assert all(stats["traffic"]["bytes_sent"].get(p) for p in sinks)
    assert _pending(occupant) == 0 and _pending(receiver) == 0
    occupant.close()
    receiver.close()


STARTER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from sessions.lab.noise import Noise
    noise = Noise(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])).start()
    time.sleep(0.5)
    print(json.dumps(noise.pids()), flush=True)
    time.sleep(60)
""")


@pytest.mark.live
def test_helpers_exit_when_their_starter_dies(built_clients, tmp_path):
    """SIGKILL the process that started the noise: no stop() runs, yet the helpers notice
    they were re-parented and go, and the twin exits by itself once its sink is gone."""
    receiver = _receiver_socket()
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path), str(receiver.getsockname()[1]),
         str(client_path("baseline"))],
        stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    try:
        pids = json.loads(starter.stdout.readline())
        assert {"traffic", "churn", "cpu-0", "cpu-1"} <= set(pids)
        assert all(_alive(pid) for pid in pids.values() if pid != pids.get("twin"))
        assert psutil.Process(pids["churn"]).cmdline()[1:4] == ["-m", HELPER, "churn"]
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait()
    deadline = time.monotonic() + 5
    while ((left := [p for p in pids.values() if _alive(p)] + _using(tmp_path))
           and time.monotonic() < deadline):
        time.sleep(0.05)
    for pid in left:  # clean up before failing, so a broken watchdog leaves nothing running
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    assert left == []
    assert _pending(receiver) == 0
    receiver.close()
