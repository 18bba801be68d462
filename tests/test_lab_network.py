"""Each attempt on a network of its own (probes/boundary/netns.py): a client reaches its receiver
(or the fault proxy in front of it) and the decoy, and nothing else: not the host's loopback or
its abstract sockets, not another lab, not the receiver behind a proxy, not the internet; what it
tries is still judged. Honest clients whose sockets are IPv6 dual-stack pass.
"""

import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from probes.boundary import netns
from probes.boundary.netns import RUN_DIR, LabNetwork
from probes.collectors.choose import open_collector
from sessions.judging.views import same_host
from sessions.lab.ports import FLOOR as ports_floor
from sessions.lab.ports import free_port
from sessions.lab.spawner import obtain, release
from tests.support import evlab_in, grade, runs

ROOT = Path(__file__).resolve().parent.parent
REACH = ROOT / "tests" / "clients" / "reach.py"
EVLAB = str(ROOT / ".venv" / "bin" / "evlab")
root_only = pytest.mark.root(reason="network namespaces, the sandbox and BCC need root")


def test_the_receiver_is_the_receiver_in_any_address_family():
    assert same_host("127.0.0.1") and same_host("::ffff:127.0.0.1")
    assert not same_host("127.0.0.2") and not same_host("::1") and not same_host(None)
    assert not same_host("::ffff:127.0.0.2") and not same_host("not an address")


# --- the namespace itself --------------------------------------------------------------------
@root_only
def test_a_lab_network_is_loopback_only_and_out_of_reach_of_the_host_and_other_labs():
    a, b = LabNetwork.create("test-a"), LabNetwork.create("test-b")
    try:
        server = a.run(socket.create_server, ("127.0.0.1", 0))
        server.settimeout(0.2)
        port = server.getsockname()[1]
        with a.run(socket.create_connection, ("127.0.0.1", port), 1):
            server.accept()[0].close()   # inside its lab it is reached
        with pytest.raises(ConnectionRefusedError):   # another lab has nothing there
            b.run(socket.create_connection, ("127.0.0.1", port), 1)
        with contextlib.suppress(OSError):   # the host may have a listener of its own there
            socket.create_connection(("127.0.0.1", port), 1).close()
        with pytest.raises(TimeoutError):   # but it is not the lab's
            server.accept()
        links = a.run(functools.partial(subprocess.run, ["ip", "-o", "link"],
                                        capture_output=True, text=True))
        assert [line.split(":")[1].strip() for line in links.stdout.splitlines()] == ["lo"]
        with pytest.raises(OSError, match="unreachable"):   # no route out of the machine
            a.run(socket.create_connection, ("192.0.2.1", 80), 1)
        assert (RUN_DIR / a.name).exists() and a.name.startswith(f"evlab-{os.getpid()}-")
        server.close()
    finally:
        a.remove()
        b.remove()
    assert not (RUN_DIR / a.name).exists() and not (RUN_DIR / b.name).exists()


@root_only
def test_a_servers_port_is_one_no_bind_to_port_0_of_its_lab_can_be_handed():
    """A server that died leaves its port unbound until the lab starts it again. Were the port
    in the ephemeral range, the lab's load, which binds port 0 before each connect, could be
    handed it and connect to itself (seen once in ~14,000 tries): the port held, the server
    not started again, the load's own request read back as an answer."""
    lab = LabNetwork.create("test-ports")
    try:
        low = int(lab.run(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text).split()[0])
        ports = [lab.run(free_port) for _ in range(50)]
        assert all(ports_floor <= p < low for p in ports), (low, ports)
        # a range that leaves no room below it: the kernel's own choice, still free
        lab.run(Path("/proc/sys/net/ipv4/ip_local_port_range").write_text, "1024 65000")
        port = lab.run(free_port)
        with lab.run(socket.create_server, ("127.0.0.1", port)):
            pass
    finally:
        lab.remove()


@root_only
def test_a_lab_network_whose_evlab_is_gone_is_swept():
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    # a namespace named for a process that has ended (pid and start time no longer match)
    made = subprocess.run(
        [sys.executable, "-c", "from probes.boundary.netns import LabNetwork; "
         "print(LabNetwork.create('orphan').name)"],
        capture_output=True, text=True, check=True, cwd=ROOT)
    name = made.stdout.strip()
    assert gone.returncode == 0 and (RUN_DIR / name).exists()
    assert f"removed stale lab network {RUN_DIR / name}" in netns.sweep_stale()
    assert not (RUN_DIR / name).exists()


# --- clients that reach past their lab -------------------------------------------------------
class HostListeners:
    """What a client must never reach: TCP on the host's 127.0.0.1 and ::1, UDP on 127.0.0.1
    and an abstract AF_UNIX socket, each recording what arrives."""

    def __init__(self):
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.tcp6 = socket.create_server(("::1", self.port), family=socket.AF_INET6)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp_port = self.udp.getsockname()[1]
        self.abstract = f"evlab-test-{os.getpid()}"
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind("\0" + self.abstract)
        self.unix.listen()
        self.got: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        for s in (self.tcp, self.tcp6, self.udp, self.unix):
            s.settimeout(0.05)
        while not self._stop.is_set():
            for s in (self.tcp, self.tcp6, self.unix):
                try:
                    conn, peer = s.accept()
                    self.got.append(f"connection on {s.getsockname()} from {peer}")
                    conn.close()
                except OSError:
                    pass
            try:
                self.got.append(f"datagram {self.udp.recv(64)!r}")
            except OSError:
                pass

    def close(self):
        self._stop.set()
        self._thread.join()
        for s in (self.tcp, self.tcp6, self.udp, self.unix):
            s.close()


@root_only
@pytest.mark.slow
@pytest.mark.live
def test_a_client_reaching_past_its_lab_reaches_nothing_and_is_judged(tmp_path):
    host = HostListeners()
    try:
        doc = grade(f"/usr/bin/python3 {REACH} escape {{host}} {{port}} {{source}} {host.port} "
                    f"{host.udp_port} {host.abstract}", tmp_path, attempts=1,
                    scenarios=("normal",))
    finally:
        host.close()
    assert host.got == []   # nothing of the host was reached, by any path
    run = runs(doc)[0]
    assert run["valid"], run["reason"]
    scenario = doc["scenarios"][0]
    for inv in scenario["invocations"]:
        tries = next(c for c in inv["claims"] if c.get("claim") == "reach")["tries"]
        for what in ("tcp 127.0.0.1", "tcp 127.0.0.2", "tcp ::1", "tcp ::ffff:127.0.0.1",
                     "abstract"):
            assert tries[what] == "Connection refused", (what, tries)
        assert tries["packet socket"] == tries["raw socket"] == "Operation not permitted"
        assert tries["dns"] == "Network is unreachable"
        assert tries["fastopen 127.0.0.1:7"] == "Connection refused"
        # the only listeners it can see are its own lab's: the receiver and the decoy
        seen = {k.rsplit(":", 1)[1] for k in tries if k.startswith("listener ")}
        assert seen == {str(s["port"]) for s in scenario["servers"].values()}, tries
    dest = next(c for c in scenario["clauses"] if c["id"] == "destination-only")
    assert dest["status"] == "fail" and "seen by socket layer" in dest["reason"]
    for where in (f"127.0.0.1:{host.port}", f"127.0.0.2:{host.port}", f"[::1]:{host.port}",
                  f"[::ffff:127.0.0.1]:{host.port}", f"127.0.0.1:{host.udp_port}", ":53",
                  "TCP connect (0 bytes) to 127.0.0.1:7 "):
        assert where in dest["reason"], (where, dest["reason"])
    assert doc["sandbox"]["own_network"] is True
    assert scenario["network"].startswith("evlab-")


@root_only
@pytest.mark.slow
@pytest.mark.live
def test_the_receiver_behind_a_fault_proxy_cannot_be_reached_around_it(tmp_path):
    doc = grade(f"/usr/bin/python3 {REACH} bypass {{host}} {{port}} {{source}} {{decoy_port}}",
                tmp_path, attempts=1, scenarios=("mismatch",))
    run = runs(doc, "mismatch")[0]
    assert run["valid"] and not run["success"], run["reason"]
    scenario = doc["scenarios"][0]
    first = next(c for c in scenario["invocations"][0]["claims"] if c.get("claim") == "reach")
    port = scenario["servers"]["receiver"]["port"]
    assert first["receiver"] == port   # it found the port ...
    assert first["tries"]["upload"] == "Operation not permitted"   # ... and was refused
    dest = next(c for c in scenario["clauses"] if c["id"] == "destination-only")
    assert dest["status"] == "fail", dest["reason"]
    assert f"to 127.0.0.1:{port}" in dest["reason"]
    assert "refused" in dest["reason"]


# --- honest clients whose sockets are dual-stack ---------------------------------------------
@root_only
@pytest.mark.slow
@pytest.mark.live
@pytest.mark.parametrize("deny_egress", [False, True], ids=["watched", "deny-egress"])
def test_an_honest_client_on_a_dual_stack_socket_passes(egress, tmp_path, deny_egress):
    """egress.c's honest mode given the receiver as ::ffff:127.0.0.1: an AF_INET6 socket, the
    IPv4-mapped address (as the JVM connects by default)."""
    doc = grade(f"{egress} honest ::ffff:{{host}} {{port}} {{source}}", tmp_path,
                attempts=1, deny_egress=deny_egress)
    for scenario, metrics in doc["grade"]["scenarios"].items():
        for run in metrics["runs"]:
            assert run["valid"] and run["success"], (scenario, run["reason"])
            assert run["risk_findings"] == [], run["risk_findings"]


# --- labs side by side -------------------------------------------------------------------------
@root_only
@pytest.mark.slow
@pytest.mark.live
def test_a_hostile_lab_beside_an_honest_one_changes_none_of_its_verdicts(tmp_path):
    """Two labs at once, one in another evlab process: a client flooding every loopback port
    it can find and holding every ephemeral port it can bind (for 2 s in its first invocation;
    its re-run only binds and holds), beside an honest one (this process's lab) that starts its
    backup once the flood runs. The honest one passes everything."""
    honest = ("grade", "--client", f"/usr/bin/python3 {REACH} honest-slow {{host}} {{port}} "
              "{source} 0.5", "--attempts", "1", "--scenario", "normal", "--headless")
    # this process's collector and spawner opened first (and kept, tests/conftest.py): its lab
    # starts at once beside the flood
    collector, missing = open_collector("auto")
    assert collector.name == "bcc", missing
    collector.close()
    release(obtain())
    # 2 s of flood: the honest lab launches its client ~0.1 s after the flood begins and both
    # its invocations end within ~1.2 s (quiet machine); the overlap is asserted below
    hostile = subprocess.Popen(
        [EVLAB, "grade", "--client", f"/usr/bin/python3 {REACH} flood {{host}} {{port}} "
         "{source} 2", "--attempts", "1", "--scenario", "normal", "--headless", "--json",
         str(tmp_path / "hostile.json")], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120   # its client runs (placeholders filled): the flood begins
    while not any(f"{REACH} flood" in cmd and "{host}" not in cmd
                  for cmd in (" ".join(p.info["cmdline"] or ())
                              for p in psutil.process_iter(["cmdline"]))):
        assert hostile.poll() is None and time.monotonic() < deadline, "no flood began"
        time.sleep(0.05)
    beside = evlab_in(*honest, "--json", tmp_path / "honest.json", cwd=tmp_path)
    _, hostile_err = hostile.communicate(timeout=300)
    victim = json.loads((tmp_path / "honest.json").read_text())
    flood = json.loads((tmp_path / "hostile.json").read_text())
    assert beside.returncode == 0, beside.stderr
    run = runs(victim)[0]
    assert run["valid"] and run["success"], run["reason"]
    assert run["risk_findings"] == []
    # the flood really overlapped the honest client's backups, and reached only its own lab
    tries = [next(c for c in inv["claims"] if c.get("claim") == "reach")["tries"]
             for inv in flood["scenarios"][0]["invocations"]]
    windows = [next(c for c in inv["claims"] if c.get("claim") == "reach")["tries"]
               for inv in victim["scenarios"][0]["invocations"]]
    assert any(t["began"] < w["ended"] and w["began"] < t["ended"]
               for t in tries for w in windows), (tries, windows)
    assert all(t["bound"] > 0 for t in tries)
    flooded = runs(flood)[0]
    assert flooded["valid"] and not flooded["success"], flooded["reason"]


@root_only
@pytest.mark.slow
@pytest.mark.live
def test_without_a_lab_network_the_host_network_is_used_and_said_everywhere(tmp_path,
                                                                            monkeypatch,
                                                                            built_clients):
    from probes.capability import Capability
    refused = Capability("lab-network", False, "no network of the lab's own (refused)", "fix")
    monkeypatch.setattr(netns, "capability", lambda: refused)
    doc = grade(f"{built_clients / 'client-baseline'} {{host}} {{port}} {{source}}", tmp_path,
                attempts=1, scenarios=("normal",))
    assert runs(doc)[0]["success"], runs(doc)[0]["reason"]
    assert doc["sandbox"]["own_network"] is False
    assert doc["sandbox"]["network"].startswith("the host's network (no network of the lab's")
    assert "lab-network" in {m["name"] for m in doc["capabilities"]["missing"]}
    assert doc["scenarios"][0]["network"] == ""
