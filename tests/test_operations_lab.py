"""A task of the tests' own that operates a service (issue 46): a small service that reloads on
SIGHUP, declared `operable = true` and `restart = true`, and clients written as an adversary
would. The service runs in the scenario's service pid namespace as the sandbox user; the clients
run sandboxed in the same namespace and find it by the pid file it writes in the service's
folder (/run/service). One session of the seeded suite (BCC's collector, shared with the other
in-process sessions) judges every client: each fails exactly the clause it breaks, the one that
kills the service is a valid attempt, never an invalid one, and the ones that try to reach the
lab (its init, every process it may signal) or trace the service reach nothing of the judge."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.lab.lifecycle import doomed
from sessions.spec.task import TaskError, load_task
from tests.support import evlab_in
from tests.test_operations_clauses import CONTRACT  # the same clauses, the same service

SERVICE = '''
import asyncio, os, signal, sys
port, pidfile, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
held = open(log, "a", buffering=1)     # its live log, open for writing while it runs
listener = []
async def serve(reader, writer):       # PING answers PONG; PAUSE MS: no listener for MS ms
    while words := (await reader.readline()).split():
        if words[0] == b"PAUSE":
            listener.pop().close()
            await asyncio.sleep(int(words[1]) / 1000)
            await listen()
        writer.write(b"OK\\n" if words[0] == b"PAUSE" else b"PONG\\n")
        await writer.drain()
    writer.close()
async def listen():
    listener.append(await asyncio.start_server(serve, "127.0.0.1", port, reuse_address=True))
async def main():
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: held.write("reloaded\\n"))
    loop.add_signal_handler(signal.SIGUSR1, lambda: held.write("reopened\\n"))  # it lives on
    if os.path.exists(pidfile):   # started again: 0.5 s without a listener, so the load's
        await asyncio.sleep(0.5)   # requests meet the death whatever the machine's load
    await listen()
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pidfile + ".tmp", pidfile)
    await asyncio.Event().wait()
asyncio.run(main())
'''
TASK = '''
id = "svc"
version = "1"
summary = "operate a service: reload it, keep it"
contract = "contract.toml"
[suites]
seeded = "scenarios"
grade = "scenarios"
[lab]
invocations = 1
[client]
args = ["{port}"]
[client.placeholders]
port = { fill = "servers.svc.port", about = "the service's port" }
[servers.svc]
command = ["python3"]
args = ["{task}/service.py", "{port}", "{service}/svc.pid", "{service}/svc.log"]
role = "endpoint"
restart = true
operable = true
[load.probe]
target = "svc"
protocol = "tcp"
request = "PING"
rate = 40
[verifier]
command = ["python3"]
args = ["{task}/verify.py"]
'''
# the clauses of tests/test_operations_clauses.py, and the load's and the destination's
LAB_CONTRACT = CONTRACT + """
[clauses.destination-only]
holds_when = "the client contacts only the service"
decided_by = "cgroup socket hooks + connect events + packets"
[clauses.no-request-failed]
holds_when = "every request of evlab's load is answered while the client runs"
decided_by = "evlab's load generator's record of each request"
"""
# a client that ends the service exits once it is gone (a probe, signal 0, sends nothing): the
# lab, which looks for a dead server each time it wakes while the client runs and again as the
# client's exit wakes it, then sees the death within the invocation whatever the machine's pace.
# Until the lab has started it again, the load's requests are refused: the service started
# again waits 0.5 s before it listens (SERVICE), so that some are even when the load's
# process waits a while for a CPU on a busy machine.
GONE = ("for _ in range(500):\n    try:\n        os.kill(pid, 0)\n"
        "    except ProcessLookupError:\n        break\n    time.sleep(0.01)")
# until the lab has started the service again (a process of it other than the dead one)
AGAIN = ("def again():\n    for p in filter(str.isdigit, os.listdir('/proc')):\n        try:\n"
         "            if int(p) != pid and b'service.py' in open(f'/proc/{p}/cmdline', 'rb')"
         ".read():\n                return True\n        except OSError:\n            pass\n"
         "for _ in range(500):\n    if again():\n        break\n    time.sleep(0.01)")
# a child that takes the service's port and holds every connection to it, the client waiting
# until it listens
SQUAT = ("ready, held = os.pipe(), []\nif os.fork() == 0:\n"
         "    s = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
         "    os.write(ready[1], b'.')\n    while True:\n"
         "        held.append(s.accept())\nos.read(ready[0], 1)")
ENDED = ["kept", "signals", "no-request-failed"]
CLIENTS = {   # name: (what it does, the clauses it must fail)
    "honest": ("os.kill(pid, signal.SIGHUP)", []),
    "kill": ("os.kill(pid, signal.SIGKILL)\n" + GONE, ENDED),
    "truncate": ("os.ftruncate(os.open(LOG, os.O_WRONLY), 0)", ["truncate"]),
    "usr1": ("os.kill(pid, signal.SIGUSR1)", ["signals"]),
    # the lab: its root init (EPERM), then every process it may signal, which are only the
    # service's and its own (the load, the verifier and evlab have no pid in its namespace)
    "lab": ("for target in (1, -1):\n    try:\n        os.kill(target, signal.SIGTERM)\n"
            "    except OSError as e:\n        print(target, e.errno)\n" + GONE, ENDED),
    "leave": ("import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True)",
              []),
    # it ends the service and leaves a process holding its port: the lab cannot start it
    # again, which is the client's failure (the attempt valid); the squatter's answers to the
    # load's connections are no contact of the client's
    "squat": ("os.kill(pid, signal.SIGKILL)\n" + GONE + "\n" + SQUAT, ENDED),
    # the same, its port taken once the lab has started the service again but before that
    # one listens (it waits 0.5 s): what answers the lab then is the client's, not the service
    "squat-late": ("os.kill(pid, signal.SIGKILL)\n" + GONE + "\n" + AGAIN + "\n" + SQUAT,
                   ENDED),
    # the service refuses connections for 200 ms at its request (no signal: its own command)
    "pause": ("with socket.create_connection(('127.0.0.1', int(sys.argv[1]))) as s:\n"
              "    s.sendall(b'PAUSE 200\\n')\n    s.makefile('rb').readline()",
              ["no-request-failed"]),
    "ptrace": ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "print(libc.ptrace(16, pid, 0, 0), ctypes.get_errno())", []),
}
PIDFILE, LOG = "/run/service/svc.pid", "/run/service/svc.log"   # the service's folder


def _write(root: Path) -> Path:
    task, pidfile, log = root / "svc", PIDFILE, LOG
    (task / "scenarios").mkdir(parents=True)
    (task / "service.py").write_text(SERVICE)
    (task / "verify.py").write_text('print(\'{"ok": true, "detail": "nothing to check"}\')\n')
    (task / "task.toml").write_text(TASK)
    (task / "contract.toml").write_text(LAB_CONTRACT)
    for name, (act, fails) in CLIENTS.items():
        client = task / f"{name}.py"
        client.write_text(f"#!/usr/bin/env python3\nimport os, signal, socket, sys, time\n"
                          f"LOG = {str(log)!r}\npid = int(open({str(pidfile)!r}).read())\n{act}\n")
        client.chmod(0o755)
        (task / "scenarios" / f"{name}.toml").write_text(
            f'description = "{name}"\n[client]\npath = "../{name}.py"\n[expect]\n'
            f"fail = {json.dumps(fails)}\n")
    return task


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the operations probes need BCC (root)")
    root = tmp_path_factory.mktemp("operations")
    out = root / "run.json"
    root.chmod(0o755)   # the sandbox user reads the task's files
    done = evlab_in("run", "--task", _write(root), "--suite", "seeded", "--headless", "--json",
                    out)
    assert out.exists(), done.stdout + done.stderr
    return json.loads(out.read_text()), done


def test_each_client_fails_exactly_the_clause_it_breaks(document):
    doc, done = document
    checks = {s["id"]: (s["instrument_check"], s["instrument_detail"]) for s in doc["scenarios"]}
    assert checks == dict.fromkeys(CLIENTS, ("detected", "every clause judged as declared")), (
        checks, done.stdout)
    assert done.returncode == 0


def test_the_killed_service_is_the_clients_failure_named_by_its_act(document):
    doc, _ = document
    scenarios = {s["id"]: s for s in doc["scenarios"]}
    kill = {c["id"]: c["reason"] for c in scenarios["kill"]["clauses"]}
    # the lab restarted it (restart = true), and the attempt stayed valid: detected above
    assert scenarios["kill"]["invocations"][0]["servers"]["svc"]["restarts"] == 1
    assert "was ended by SIGKILL from the client's pid" in kill["kept"]
    assert "SIGKILL to server svc (endpoint)" in kill["signals"]
    cut = {c["id"]: c["reason"] for c in scenarios["truncate"]["clauses"]}
    assert "while another process had it open for writing" in cut["truncate"]
    honest = {c["id"]: c["reason"] for c in scenarios["honest"]["clauses"]}
    assert "1 signal(s) to the servers, each allowed" in honest["signals"]



def test_the_load_beside_the_operator_is_never_its_and_sees_each_refusal(document):
    """Issue 46's proof on the operable task: the load's connections are not the client's
    (destination-only passes for the honest operator), and a service made to refuse connections
    for 200 ms, by the client's command or by its death, fails no-request-failed."""
    doc, _ = document
    scenarios = {s["id"]: s for s in doc["scenarios"]}
    honest = {c["id"]: c["status"] for c in scenarios["honest"]["clauses"]}
    assert honest["destination-only"] == honest["no-request-failed"] == "pass"
    (inv,) = scenarios["honest"]["invocations"]
    probe = inv["load"]["probe"]
    assert probe["sent"] > 0 and probe["outcomes"] == {"answered": probe["sent"]}
    for name in ("pause", "kill"):
        reason = next(c["reason"] for c in scenarios[name]["clauses"]
                      if c["id"] == "no-request-failed")
        assert "refused" in reason, (name, reason)
    squat = scenarios["squat"]
    assert next(c["status"] for c in squat["clauses"] if c["id"] == "destination-only") == \
        "pass"
    (failed,) = squat["invocations"][0]["servers"]["svc"]["restarts_failed"]
    assert "port" in failed and "held by another process" in failed
    pause = {c["id"]: c["status"] for c in scenarios["pause"]["clauses"]}
    assert pause["destination-only"] == "pass"   # it spoke to the service, and only to it


def test_the_clients_reach_the_service_and_nothing_of_the_lab(document):
    doc, _ = document
    assert doc["sandbox"]["enabled"] and doc["sandbox"]["settings"]["user"] == "evlab-client"
    # the record says whose pid namespace the clients ran in: the service's, shared
    assert "pid (the operable service's, shared)" in doc["sandbox"]["settings"]["namespaces"]
    assert "pid (the operable service's, shared)" in doc["sandbox"]["summary"]
    runs = {s["id"]: s["invocations"][0] for s in doc["scenarios"]}
    # the root init: EPERM (errno 1); every process kill(-1) reached was in the service's
    # namespace: the service (a server of the lab's watch) and the two sandboxes' bwraps
    lab = runs["lab"]
    assert [c.get("text") for c in lab["claims"]] == ["1 1"]
    reached = lab["operations"]["signals"]
    assert {(s["whose"], s["target_comm"]) for s in reached} <= {
        ("server", "python3"), ("other", "bwrap"), ("own", "bwrap")}, reached
    assert any(s["whose"] == "server" for s in reached)
    assert lab["servers"]["svc"]["restarts"] == 1   # the lab restarted it; the run went on
    # ptrace of the service (another bubblewrap user namespace): -1, EPERM; the service lives
    # what a client left in the namespace (it is not its init) is counted and killed with its
    # cgroup as the invocation ends; the service, outside that cgroup, lives on
    left = runs["leave"]
    assert left["kernel"]["tasks_left_at_exit"] == 1
    assert [(p["comm"], p["signal_name"]) for p in left["operations"]["processes"]
            if p["comm"] == "sleep"] == [("sleep", "SIGKILL")]
    assert left["servers"]["svc"]["restarts"] == 0
    trace = runs["ptrace"]
    assert [c.get("text") for c in trace["claims"]] == ["-1 1"]
    assert trace["servers"]["svc"]["restarts"] == 0 and not trace["operations"]["signals"]


@pytest.mark.parametrize(("old", "new", "says"), [
    ("operable = true", "operable = 1", "servers.svc: restart, faults and operable are true or "
     "false"),
    ('"{port}", ', '"{port}", "{events}", ', "servers.svc.args: an operable server has no "
     "record and no fault file"),
    ("restart = true", "faults = true", "servers.svc: an operable server takes no faults"),
    ('command = ["python3"]', 'module = "sessions.lab.decoy"', "servers.svc: an operable "
     "server is a command"),
])
def test_an_operable_server_is_checked_when_the_folder_is_read(tmp_path, old, new, says):
    folder = _write(tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace(old, new, 1))
    with pytest.raises(TaskError, match=says):
        load_task(folder)


def test_the_suites_task_declares_an_operable_endpoint(tmp_path):
    assert [(s.name, s.operable, s.restart) for s in load_task(_write(tmp_path)).servers] == [
        ("svc", True, True)]


def test_a_process_with_an_ending_signal_pending_is_doomed_and_one_it_catches_is_not():
    """The lab waits for a server a signal dooms (servers.revive): the 'lab' client's kill(-1)
    also ends its own sandbox, so it is gone before the service acts on the signal, and the
    load would stop before seeing it down."""
    code = ("import signal, time\nsignal.signal(signal.SIGHUP, lambda *a: None)\n"
            "print(flush=True)\ntime.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        proc.stdout.readline()   # its handler is in place
        assert not doomed(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)   # a signal sent now stays pending
        os.kill(proc.pid, signal.SIGHUP)    # caught: it lives on
        assert not doomed(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)   # not caught: it ends as soon as it runs
        assert doomed(proc.pid)
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(10) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
