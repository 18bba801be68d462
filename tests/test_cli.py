"""The headless CLI as a user meets it: real console script, clear words, no tracebacks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EVLAB = ROOT / ".venv" / "bin" / "evlab"


def evlab(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(EVLAB), *args], capture_output=True, text=True, timeout=120,
                          **kwargs)


def test_doctor_as_root_reports_each_capability():
    out = evlab("doctor", "--json")
    assert out.returncode == 0, out.stderr
    caps = {c["name"]: c for c in json.loads(out.stdout)["capabilities"]}
    assert caps["root"]["available"] == (os.geteuid() == 0)
    assert caps["kprobes"]["available"] is False  # absent on this kernel, and that is fine
    assert "does not need kprobes" in caps["kprobes"]["detail"]


@pytest.mark.root(reason="needs root to drop privileges")
def test_doctor_as_non_root_says_what_is_missing_and_how_to_fix_it():
    # The venv's interpreter lives under /root (mode 0700 here), so the child imports as root
    # and then becomes nobody before doing any checking.
    code = ("import os, sys\n"
            "from sessions.cli.dispatch import main\n"
            "import bcc, argparse, locale, probes.doctor.preflight\n"
            "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
            "sys.exit(main(['doctor']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert out.returncode == 0
    assert "Traceback" not in out.stderr
    lines = out.stdout.splitlines()
    root_line = next(line for line in lines if " root " in line)
    assert "MISSING" in root_line
    assert any("fix:" in line and "root" in line for line in lines)
    assert "bcc-collector: NOT ready, missing root" in out.stdout
    assert "strace-collector: ready" in out.stdout  # what evlab falls back to


def test_unknown_command_is_one_line_not_a_traceback():
    out = evlab("frobnicate")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "invalid choice: 'frobnicate'" in out.stderr


DATA = ROOT / "tests" / "data" / "session.tar.gz"


@pytest.mark.parametrize("args, message", [
    (["report", str(DATA), "--output", "/dev/full"], "not a regular file"),
    (["report", str(DATA), "--output", "/tmp"], "not a regular file"),
    (["report", str(DATA), "--output", "/proc/version"], "cannot write in /proc"),
    (["run", "baseline", "--headless", "--json", "/tmp"], "--json /tmp: not a regular file"),
    (["run", "baseline", "--headless", "--report", "/dev/null"], "unrecognized arguments"),
    (["grade", "--headless", "--client", "/bin/true {port} {source}", "--report", "/dev/full"],
     "--report /dev/full: not a regular file"),
    (["run", "baseline", "--headless", "--archive", "/proc/x.tar.gz"], "cannot write in /proc"),
    (["replay", str(DATA), "--headless", "--speed", "1e-300"], "expected a speed"),
    (["replay", str(DATA), "--headless", "--speed", "nan"], "expected a speed"),
    (["grade", "--headless", "--client", "x {port} {source}", "--timeout", "1e18"],
     "expected seconds"),
    (["run", "baseline", "--headless", "--memory", "0"], "expected a positive number"),
])
def test_bad_outputs_and_numbers_are_refused_before_anything_runs(args, message):
    out = evlab(*args)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("evlab: "), out.stderr
    assert message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_an_output_that_fails_at_the_end_is_kept_and_its_place_named(tmp_path, monkeypatch):
    from sessions.cli import outputs
    target = tmp_path / "out.json"
    calls = []

    def write(path):
        calls.append(path)
        if path == target:
            raise OSError(28, "No space left on device")
        path.write_text("{}")

    kept = outputs.deliver("--json", target, write)
    assert kept != target and kept.read_text() == "{}" and calls == [target, kept]
    kept.unlink()


@pytest.mark.parametrize("argv, compiles", [
    ([], True),                                      # the dashboard on the built-in suite
    (["run", "--all", "--headless"], True),
    (["grade", "--client", "x", "--headless"], True),
    (["campaign", "c.toml", "--headless"], True),    # the local engine's lab is this process
    (["run", "--all", "--collector", "none"], False),
    (["run", "--all", "--collector=strace"], False),
    (["campaign", "c.toml", "--ray", "auto"], False),  # its labs are on the Ray nodes
    (["run", "--help"], False),                      # the parser answers, then exits
    (["replay", "s.tar.gz"], False),
    (["doctor"], False),
    (["run", "--all", "--headless", "--jobs", "2"], False),   # labs in processes of their own
    (["grade", "--client", "x", "--headless", "--jobs=1"], True),
    (["run", "--all", "--jobs", "2"], True),         # not headless: a usage error follows
])
def test_the_collector_compiles_ahead_only_for_a_command_that_opens_a_lab(monkeypatch, argv,
                                                                           compiles):
    from sessions.lab import cpus
    monkeypatch.setattr(cpus, "default_jobs", lambda: 1)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert _compiles(argv) is compiles
    monkeypatch.setattr(os, "geteuid", lambda: 1000)   # it could not load: not started
    assert _compiles(argv) is False


def _compiles(argv: list[str]) -> bool:
    """As the console script decides, from the command line parsed once."""
    from sessions.cli.entry import compiles
    from sessions.cli.parser import build_parser
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:   # --help, or a usage error: answered before anything compiles
        return False
    return compiles(args)


def test_without_jobs_the_machines_default_decides_where_the_labs_run(monkeypatch):
    from sessions.lab import cpus
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(cpus, "default_jobs", lambda: 2)   # four CPUs or more
    assert _compiles(["run", "--all", "--headless"]) is False
    assert _compiles(["run", "--all"]) is True        # the dashboard: one lab, here


@pytest.mark.root(reason="the collector compiles ahead as root only")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_signal_during_start_up_ends_evlab_as_ctrl_c_does(sig):
    """Sent as soon as evlab catches it (its first step), the signal lands in start-up (imports,
    the compile started ahead) or, on a slow machine, in the run: either way "interrupted",
    status 130, no traceback. (Before that, only the interpreter itself has started.)"""
    import signal
    signum = getattr(signal, sig)
    proc = subprocess.Popen([str(EVLAB), "run", "--all", "--headless"], text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while proc.poll() is None and not _catches(proc.pid, signum):
        pass
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err


def _catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for the signal (its SigCgt mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signum - 1) & 1)


def test_a_reader_that_goes_away_is_not_a_traceback():
    # `evlab list | head -1`: the pipe closes under the writer
    proc = subprocess.Popen([str(EVLAB), "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("seeded suite")
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode in (0, 141)   # 141 = 128 + SIGPIPE, when the write came after close


def test_reading_an_archive_imports_no_lab(tmp_path):
    """`evlab report` and `evlab replay` load what reads and judges an archive, not the lab, the
    campaign engines or the BPF collector (a command's module is imported when it runs)."""
    archive = ROOT / "tests" / "data" / "session.tar.gz"
    code = ("import sys\n"
            "from sessions.cli.dispatch import main\n"
            f"assert main(['report', {str(archive)!r}, '--format', 'json', '--output', "
            f"{str(tmp_path / 'r.json')!r}]) == 0\n"
            f"assert main(['replay', {str(archive)!r}, '--headless']) == 0\n"
            "print(sorted(m for m in sys.modules if m.startswith(('sessions.lab.', "
            "'sessions.campaign', 'bcc', 'probes.bcc', 'ray', 'textual'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
    assert json.loads((tmp_path / "r.json").read_text())["scenarios"]
