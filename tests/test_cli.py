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
            "from sessions import cli\n"
            "import bcc, argparse, locale\n"
            "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
            "sys.exit(cli.main(['doctor']))\n")
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
