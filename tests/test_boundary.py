"""The client's boundary: its own cgroup and sandbox, and what is judged from them.

Each client here does a correct backup plus one thing a contract clause forbids, by a path the
syscall view alone would miss (tests/clients/egress.c: datagrams without connect(), an io_uring
connect, a daemon outliving its parent, a mapped source, a forked spinner, in-memory re-hashing).
Honest clients in three runtimes (C, Python, Node.js) must pass every clause and gate.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.test_grade import grade, runs

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "tests" / "clients"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox and BCC need root")
pytestmark = root_only


@pytest.fixture(scope="module")
def egress() -> Path:
    """tests/clients/egress.c, built where the sandbox user may read it."""
    where = Path(tempfile.mkdtemp(prefix="evlab-test-egress-"))
    os.chmod(where, 0o755)
    out = where / "egress"
    subprocess.run(["gcc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(CLIENTS / "egress.c"), "-lcrypto"], check=True)
    yield out
    shutil.rmtree(where)


def judged(command: str, tmp_path: Path, **options) -> tuple[dict, dict]:
    doc = grade(command, tmp_path, attempts=1, scenarios=("normal",), **options)
    run = runs(doc)[0]
    scenario = next(s for s in doc["scenarios"] if s["id"] == run["id"])
    return run, {c["id"]: c for c in scenario["clauses"]}


# --- egress, whatever the path ------------------------------------------------------------------
@pytest.mark.parametrize("mode, what", [
    ("udp-sendto", "1 UDP datagram (39 bytes) to 127.0.0.1:"),
    ("udp-sendmsg", "1 UDP datagram (39 bytes) to 127.0.0.1:"),
    ("udp-sendmmsg", "2 UDP datagrams (78 bytes) to 127.0.0.1:"),
    ("udp6-sendto", "1 UDP datagram (39 bytes) to [::1]:"),
    ("uring-connect", "1 TCP connect ("),
])
def test_egress_without_connect_syscalls_fails_destination_only(egress, tmp_path, mode, what):
    run, clauses = judged(f"{egress} {mode} {{host}} {{port}} {{source}} {{decoy_port}}",
                          tmp_path)
    dest = clauses["destination-only"]
    assert dest["status"] == "fail", dest["reason"]
    assert what in dest["reason"] and "seen by socket layer" in dest["reason"], dest["reason"]
    assert "from pid " in dest["reason"]
    # everything else about the backup was right: only that clause fails
    assert [c for c, v in clauses.items() if v["status"] == "fail"] == ["destination-only"]


def test_deny_egress_refuses_the_datagram_and_still_fails_the_clause(egress, tmp_path):
    command = f"{egress} udp-sendto {{host}} {{port}} {{source}} {{decoy_port}}"
    doc = grade(command, tmp_path, attempts=1, scenarios=("normal",), deny_egress=True)
    scenario = doc["scenarios"][0]
    dest = next(c for c in scenario["clauses"] if c["id"] == "destination-only")
    assert dest["status"] == "fail" and "refused" in dest["reason"], dest["reason"]
    extra = next(c for c in scenario["invocations"][0]["claims"] if c.get("claim") == "extra")
    assert extra["ok"] is False   # the client saw EPERM: nothing left
    assert doc["sandbox"]["deny_egress"] is True


def test_a_setsid_daemon_is_killed_with_the_sandbox_and_fails_cleanup(egress, tmp_path):
    run, clauses = judged(f"{egress} setsid-daemon {{host}} {{port}} {{source}} {{decoy_port}}",
                          tmp_path)
    cleanup = run["gates"]["cleanup"]
    assert cleanup["status"] == "fail"
    assert "1 process(es) running when it ended" in cleanup["reason"], cleanup["reason"]
    # it never got to send: its pid namespace ended with the client
    assert clauses["destination-only"]["status"] == "pass"


# --- CPU and hashing ------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [
    "{egress} fork-spin {{host}} {{port}} {{source}}",
    "{egress} mem-rehash {{host}} {{port}} {{source}}",
    f"/usr/bin/python3 {CLIENTS / 'rehash_client.py'} {{{{host}}}} {{{{port}}}} {{{{source}}}}",
], ids=["forked-spinner", "c-rehash-64x", "python-rehash-64x"])
def test_waste_without_progress_fails_cpu_budget(egress, tmp_path, command):
    run, clauses = judged(command.format(egress=egress), tmp_path)
    cpu = clauses["cpu-budget"]
    assert cpu["status"] == "fail", cpu["reason"]
    assert "without a syscall that makes progress" in cpu["reason"]
    assert [c for c, v in clauses.items() if v["status"] == "fail"] == ["cpu-budget"]


def test_a_mapped_source_makes_hash_work_inconclusive_with_the_reason(egress, tmp_path):
    run, clauses = judged(f"{egress} mmap-rehash {{host}} {{port}} {{source}}", tmp_path)
    hw = clauses["hash-work"]
    assert hw["status"] == "inconclusive" and "mapped with mmap()" in hw["reason"], hw["reason"]


# --- honest clients in three runtimes -------------------------------------------------------------
@pytest.mark.parametrize("command", [
    "{egress} honest {{host}} {{port}} {{source}}",
    f"/usr/bin/python3 {CLIENTS / 'backup_client.py'} {{{{host}}}} {{{{port}}}} {{{{source}}}}",
    f"/usr/bin/node {CLIENTS / 'backup_client.js'} {{{{host}}}} {{{{port}}}} {{{{source}}}}",
], ids=["c", "python", "node"])
def test_honest_clients_pass_every_clause_and_gate_in_the_sandbox(egress, tmp_path, command):
    if "node" in command and not Path("/usr/bin/node").exists():
        pytest.fail("node is not installed: make setup installs it")
    doc = grade(command.format(egress=egress), tmp_path, attempts=2)
    for scenario, metrics in doc["grade"]["scenarios"].items():
        for run in metrics["runs"]:
            assert run["valid"] and run["success"], (scenario, run["reason"])
            assert run["risk_findings"] == [], run["risk_findings"]
    assert doc["sandbox"]["enabled"] and doc["sandbox"]["settings"]["user"] == "evlab-client"


# --- hostile clients: nothing forged, nothing harmed, nothing left --------------------------------
HOSTILE = CLIENTS / "hostile.py"


@pytest.mark.parametrize("mode, failing, attempt", [
    ("forge-store", {"integrity", "honest-outcome", "gate immediate"},
     {"stores_found": [], "written": []}),
    ("bpf-tamper", {"cpu-budget"}, {"bpf": "Operation not permitted"}),
    ("signal-judge", set(), {"pids": {}}),
    ("ptrace-judge", set(), {"pids": {}}),
    ("unshare", set(), None),
    ("fork-flood", {"gate cleanup", "gate limits"}, None),
    ("memory-hog", {"gate limits"}, None),
    ("disk-fill", {"gate limits"}, {"error": "No space left on device"}),
    ("zombie-leader", {"gate cleanup"}, None),
])
def test_a_hostile_client_is_refused_or_fails_never_forges(tmp_path, mode, failing, attempt):
    doc = grade(f"/usr/bin/python3 {HOSTILE} {mode} {{host}} {{port}} {{source}}", tmp_path,
                attempts=1, scenarios=("normal",))
    run = runs(doc)[0]
    failed = {c for c, s in run["clauses"].items() if s == "fail"} | {
        f"gate {g}" for g, v in run["gates"].items() if v["status"] == "fail"}
    assert run["valid"], run["reason"]            # never an invalid attempt of its making
    assert failing <= failed, run["reason"]
    if not failing:
        assert run["success"], run["reason"]
    claims = doc["scenarios"][0]["invocations"][0]["claims"]
    said = next((c for c in claims if c.get("claim") == "attempt"), None)
    for key, value in (attempt or {}).items():
        assert said[key] == value, said
    if mode == "unshare":
        assert said["user"] != "ok" and said["net"] != "ok", said
    if mode == "memory-hog":
        assert "memory limit" in run["gates"]["limits"]["reason"]
    survivors = [p.pid for p in psutil.process_iter(["cmdline"])
                 if str(HOSTILE) in " ".join(p.info["cmdline"] or ())]
    assert survivors == []
