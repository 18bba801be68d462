"""An operable service's pid namespace (probes/boundary/servicens.py, issue 46): a sandboxed
program started in it reaches the service as an operator does (its pid file, SIGHUP) and
nothing of the lab's: not the namespace's root init, not a process outside it (ESRCH), and it
cannot ptrace the service (each is in a bubblewrap user namespace of its own). One namespace,
one service and one client run shared by the module's tests."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes.boundary.netns import LabNetwork
from probes.boundary.sandbox import SERVICE_DIR, Sandbox
from probes.boundary.servicens import ServiceNamespace
from probes.owned_tmp import make_owned_dir

ROOT = Path(__file__).resolve().parent.parent

SERVICE = '''
import os, signal, sys, time
folder = sys.argv[1]
def hup(*_):
    with open(folder + "/reloads", "a") as f:
        f.write("reloaded\\n")
signal.signal(signal.SIGHUP, hup)
open(folder + "/svc.pid", "w").write(str(os.getpid()))
while True:
    time.sleep(1)
'''
CLIENT = '''
import ctypes, errno, os, signal, sys
folder, lab = sys.argv[1], [int(p) for p in sys.argv[2:]]
pid = int(open(folder + "/svc.pid").read())
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
libc = ctypes.CDLL(None, use_errno=True)
def ptrace():
    if libc.ptrace(16, pid, 0, 0) != 0:   # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
print("hup", attempt(lambda: os.kill(pid, signal.SIGHUP)))
print("init", attempt(lambda: os.kill(1, signal.SIGKILL)))
print("lab", *sorted({attempt(lambda p=p: os.kill(p, signal.SIGTERM)) for p in lab}))
print("ptrace", attempt(ptrace))
print("all", attempt(lambda: os.kill(-1, 0)))
print("mine", os.getpid() != pid and os.getuid() != 0)
'''

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and the sandbox need root")


@pytest.fixture(scope="module")
def run():
    box, gap = Sandbox.open()
    if box is None:
        pytest.skip(gap.detail if gap else "no sandbox")
    net = LabNetwork.create("svcns-test")
    ns = ServiceNamespace.create(net.path)
    base = make_owned_dir("evlab-client-")
    folder = box.workdir(base / "service")
    os.chmod(base, 0o711)
    for name, text in (("service.py", SERVICE), ("client.py", CLIENT)):
        (base / name).write_text(text)
        (base / name).chmod(0o644)
    server = subprocess.Popen([*ns.argv(), *box.wrap(
        ["python3", str(base / "service.py"), SERVICE_DIR], cwd=None,
        programs=[(base / "service.py", base / "service.py")], service=folder)])
    sentinel = subprocess.Popen(["sleep", "60"])   # a process of the lab's, outside
    try:
        deadline = time.monotonic() + 5
        while not (folder / "svc.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        host = ns.started(server.pid)
        done = subprocess.run([*ns.argv(), *box.wrap(
            ["python3", str(base / "client.py"), SERVICE_DIR, str(os.getpid()),
             str(sentinel.pid), str(ns.init)], cwd=None,
            programs=[(base / "client.py", base / "client.py")], service=folder)],
            capture_output=True, text=True, timeout=20)
        time.sleep(0.1)
        yield {"said": dict(line.split(" ", 1) for line in done.stdout.splitlines()),
               "err": done.stderr, "host": host, "ns": ns, "folder": folder,
               "sentinel": sentinel.poll(), "init": ns.init, "server": server.poll()}
    finally:
        sentinel.kill()
        sentinel.wait()
        ns.close()
        server.wait(5)
        net.remove()
        shutil.rmtree(base, ignore_errors=True)


@root_only
def test_the_program_operates_the_service_by_its_pid_file(run):
    assert run["said"]["hup"] == "ok", run["err"]
    assert (run["folder"] / "reloads").read_text() == "reloaded\n"
    assert run["server"] is None   # the service lives on
    ns_pid = int((run["folder"] / "svc.pid").read_text())
    assert run["ns"].host_pid(ns_pid) == run["host"] and run["host"] != ns_pid


@root_only
def test_the_program_cannot_reach_the_init_the_lab_or_trace_the_service(run):
    said = run["said"]
    assert said["init"] == "EPERM"                 # root's init, in its own namespace
    assert said["lab"] == "ESRCH"   # evlab, a process of the lab's, the init's host pid
    assert said["ptrace"] == "EPERM"               # another bubblewrap user namespace
    assert said["mine"] == "True"
    assert run["sentinel"] is None and os.path.exists(f"/proc/{run['init']}")


@root_only
def test_closing_the_namespace_ends_everything_in_it(tmp_path):
    ns = ServiceNamespace.create(None)
    child = subprocess.Popen([*ns.argv(), "sleep", "60"])
    try:
        host = ns.started(child.pid)
        assert host and host in ns.members()
    finally:
        ns.close()
    assert child.wait(5) != 0
    assert not os.path.exists(f"/proc/{ns.init}")
    ns.close()   # again (the servers' close after a failed start): nothing, no pid reused


OWNER = """import subprocess, sys, time
from probes.boundary.servicens import ServiceNamespace
ns = ServiceNamespace.create(None)
service = subprocess.Popen([*ns.argv(), "sleep", "60"])
print(ns.init, ns.started(service.pid), flush=True)
time.sleep(60)
"""


@root_only
def test_an_evlab_killed_with_sigkill_leaves_no_service_namespace(tmp_path):
    """No teardown runs in an evlab killed with SIGKILL: the init sees its owner gone and
    ends, and the namespace's processes with it (liveness, not speed: 30 s at most)."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True,
                             cwd=ROOT)
    init, service = map(int, owner.stdout.readline().split())
    assert os.path.exists(f"/proc/{init}") and os.path.exists(f"/proc/{service}")
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") for p in (init, service)):
        assert time.monotonic() < deadline, "the service namespace outlived its evlab"
        time.sleep(0.1)
