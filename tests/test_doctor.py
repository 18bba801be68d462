"""The preflight: true states on this machine, simulated gaps, output formats, and non-root."""

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from probes.capability import Capability
from probes.doctor import kernel as doctor_kernel
from probes.doctor import preflight as doctor
from probes.doctor import userspace as doctor_userspace

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["root", "bpf-syscall", "tracefs", "kernel-headers", "bcc-import", "btf",
         "tracepoints", "uprobes", "kprobes", "af-packet", "cgroup", "cgroup-hooks", "sandbox",
         "lab-network", "netem", "fault-injection", "strace",
         "tcpdump", "bpftrace", "tshark", "nginx"]
NOBODY = 65534
as_root = pytest.mark.root(reason="needs root")


def by_name(caps: list[Capability]) -> dict[str, Capability]:
    return {c.name: c for c in caps}


def test_one_record_per_check_in_order():
    caps = doctor.check_all()
    assert [c.name for c in caps] == NAMES
    assert all(isinstance(c, Capability) for c in caps)
    assert set(doctor.NEEDED_FOR) == set(NAMES)


def test_every_gap_has_a_reason_and_a_fix():
    for c in doctor.check_all():
        assert c.detail
        assert (c.fix == "") == c.available, c


@as_root
def test_states_true_on_this_machine():
    caps = by_name(doctor.check_all())
    for name in ("root", "bpf-syscall", "tracefs", "kernel-headers", "bcc-import", "btf",
                 "tracepoints", "uprobes", "af-packet"):
        assert caps[name].available, caps[name]
    assert caps["root"].detail == "euid 0"
    assert caps["bcc-import"].detail.startswith("bcc 0.")
    kprobes = caps["kprobes"]
    assert not kprobes.available
    assert "CONFIG_KPROBES" in kprobes.detail
    assert "evlab does not need kprobes" in kprobes.detail
    assert doctor.missing_for(list(caps.values()), doctor.BCC) == []
    assert doctor.missing_for(list(caps.values()), doctor.PACKETS) == []


def test_a_check_that_raises_becomes_a_record(monkeypatch):
    def boom() -> Capability:
        raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "CHECKS", (("root", boom), ("tshark", boom)))
    caps = doctor.check_all()
    assert [c.name for c in caps] == ["root", "tshark"]
    assert all(not c.available and "RuntimeError: boom" in c.detail and c.fix for c in caps)


@as_root
def test_unmounted_tracefs_is_named_with_the_mount_command(monkeypatch):
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: p != doctor.TRACEFS and real(p))
    caps = by_name(doctor.check_all())
    for name in ("tracefs", "tracepoints", "uprobes", "kprobes"):
        assert not caps[name].available
        assert caps[name].fix == "mount -t tracefs nodev /sys/kernel/tracing"
    assert "incomplete definition" in caps["tracefs"].detail


def test_tracepoints_follow_the_collector_source(monkeypatch, tmp_path):
    assert "sched/sched_switch" in doctor_kernel.collector_tracepoints()
    src = tmp_path / "collector.bpf.c"
    src.write_text("TRACEPOINT_PROBE(sched, sched_switch)\n"
                   "TRACEPOINT_PROBE(evlab_test, no_such_event)\n")
    monkeypatch.setattr(doctor_kernel, "COLLECTOR_SOURCE", str(src))
    assert doctor_kernel.collector_tracepoints() == ("sched/sched_switch",
                                                     "evlab_test/no_such_event")
    if os.geteuid() == 0:
        cap = doctor_kernel.check_tracepoints()
        assert not cap.available
        assert cap.detail == "no format file for evlab_test:no_such_event"
    monkeypatch.setattr(doctor_kernel, "COLLECTOR_SOURCE", str(tmp_path / "absent.c"))
    assert doctor_kernel.collector_tracepoints() == doctor_kernel._FALLBACK_TRACEPOINTS


def test_missing_kernel_headers(monkeypatch):
    monkeypatch.setattr(doctor_kernel.platform, "release", lambda: "0.0.0-evlab-test")
    cap = doctor_kernel.check_kernel_headers()
    assert not cap.available
    assert "/lib/modules/0.0.0-evlab-test/build/include not found" in cap.detail
    assert cap.fix.startswith("make setup")
    assert "ln -sfn" in cap.fix and "/lib/modules/0.0.0-evlab-test/source" in cap.fix


def test_bcc_not_importable(monkeypatch):
    monkeypatch.setitem(sys.modules, "bcc", None)  # makes `import bcc` raise ImportError
    cap = doctor_userspace.check_bcc_import()
    assert not cap.available
    assert "ModuleNotFoundError" in cap.detail
    assert "apt-get install -y python3-bpfcc" in cap.fix and "make setup" in cap.fix


def test_pypi_bcc_is_not_bcc(monkeypatch):
    monkeypatch.setitem(sys.modules, "bcc", types.ModuleType("bcc"))
    cap = doctor_userspace.check_bcc_import()
    assert not cap.available and "not BCC" in cap.detail
    assert "pip uninstall -y bcc" in cap.fix


def test_missing_tools_are_optional_with_apt_fix(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda _name, **_where: None)
    caps = by_name(doctor.check_all())
    for tool in ("strace", "tcpdump", "bpftrace", "tshark", "nginx"):
        assert not caps[tool].available
        assert caps[tool].fix == f"apt-get install -y {tool}"
        assert doctor.needed_for(tool) == ((doctor.STRACE,) if tool == "strace" else ())


def test_format_text_is_aligned_and_shows_fixes():
    caps = [Capability("root", True, "euid 0"),
            Capability("af-packet", False, "refused", "run as root"),
            Capability("kprobes", False, "absent", "none needed")]
    text = doctor.format_text(caps)
    lines = text.splitlines()
    assert lines[1].startswith("ok ✓") and lines[2].startswith("MISSING ✗")
    assert lines[4].startswith("absent ·")
    # name, needed-for and detail columns start at the same offsets on every row
    rows = [lines[0], lines[1], lines[2], lines[4]]
    for col in ("capability", "needed for", "detail"):
        at = lines[0].index(col)
        assert all(row[at - 2:at] == "  " and row[at] != " " for row in rows), col
    assert lines[3].strip() == "fix: run as root"
    assert lines[3].index("fix:") == lines[0].index("detail")
    assert "packet-capture: NOT ready, missing af-packet" in text
    assert "bcc-collector: ready" in text
    assert doctor.format_text(caps, unicode=False).isascii()


def test_to_json_round_trips():
    caps = doctor.check_all()
    data = json.loads(doctor.to_json(caps))
    assert [c["name"] for c in data["capabilities"]] == NAMES
    for c, row in zip(caps, data["capabilities"], strict=True):
        assert (row["available"], row["detail"], row["fix"]) == (c.available, c.detail, c.fix)
        assert row["needed_for"] == list(doctor.needed_for(c.name))
        assert row["required"] == bool(row["needed_for"])
    assert set(data["ready"]) == set(doctor.OBSERVERS)


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
           "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, **kw)


def _assert_nonroot_report(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    caps = {c["name"]: c for c in json.loads(proc.stdout)["capabilities"]}
    assert [*caps] == NAMES
    for name in ("root", "bpf-syscall", "af-packet"):
        assert not caps[name]["available"], caps[name]
        assert caps[name]["fix"]
    assert caps["root"]["detail"].startswith(f"euid {NOBODY}")
    assert "EPERM" in caps["bpf-syscall"]["detail"]
    assert "CAP_NET_RAW" in caps["af-packet"]["detail"]
    assert json.loads(proc.stdout)["ready"] == {doctor.BCC: False, doctor.STRACE: True,
                                                doctor.PACKETS: False, doctor.BOUNDARY: False}
    assert caps["sandbox"]["detail"].startswith("the sandbox needs root")
    assert "no network of the lab's own" in caps["lab-network"]["detail"]


@as_root
def test_cli_json_as_root():
    proc = _run([sys.executable, "-m", "probes.doctor.preflight", "--json"], cwd=ROOT)
    assert proc.returncode == 0 and proc.stderr == ""
    assert [c["name"] for c in json.loads(proc.stdout)["capabilities"]] == NAMES


@as_root
def test_cli_text_as_root():
    proc = _run([sys.executable, "-m", "probes.doctor.preflight"], cwd=ROOT)
    assert proc.returncode == 0 and proc.stderr == ""
    assert "bcc-collector: ready" in proc.stdout


# The venv's python links into /root/.pyenv, which only root may enter, so `nobody` cannot
# start it. Two stand-ins: Debian's own python3 started as nobody (a real unprivileged
# process running the real CLI), and the venv python dropping to nobody after start-up.
SYSTEM_PYTHON = "/usr/bin/python3"


@as_root
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason="no Debian python3")
def test_cli_json_as_nobody_with_system_python():
    # group and extra_groups too: user= alone keeps gid 0, and tracefs files are root-group.
    proc = _run([SYSTEM_PYTHON, "-m", "probes.doctor.preflight", "--json"], cwd="/",
                user=NOBODY, group=NOBODY, extra_groups=[])
    _assert_nonroot_report(proc)


DROP_THEN_RUN = """
import contextlib, io, os, sys
from probes.doctor import preflight as doctor
n = int(sys.argv[1])
# A first run as root pulls in every lazily imported module while /root/.pyenv is readable.
with contextlib.redirect_stdout(io.StringIO()):
    doctor.main(["--json"])
os.setgroups([])
os.setresgid(n, n, n)
os.setresuid(n, n, n)
assert os.geteuid() == n and os.getuid() == n
sys.exit(doctor.main(["--json"]))
"""


@as_root
def test_cli_json_as_nobody_after_dropping_root():
    proc = _run([sys.executable, "-c", DROP_THEN_RUN, str(NOBODY)], cwd="/")
    _assert_nonroot_report(proc)


def test_kernel_fault_capabilities_are_said_plainly():
    """This kernel has no sch_netem and no error injection: said, not pretended."""
    caps = by_name(doctor.check_all())
    for name in ("netem", "fault-injection"):
        assert doctor.needed_for(name) == ()  # evlab injects its faults in user space
        if not caps[name].available:
            assert "evlab" in caps[name].detail and caps[name].fix


def test_syscall_numbers_are_this_architectures():
    """probes.syscalls reads them from the running architecture's header: calling getpid and
    getppid by those numbers gives what os gives."""
    import ctypes

    from probes import syscalls
    numbers = syscalls.numbers()
    assert "bpf" in numbers and syscalls.names()[numbers["bpf"]] == "bpf"
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(numbers["getpid"]) == os.getpid()
    assert libc.syscall(numbers["getppid"]) == os.getppid()
