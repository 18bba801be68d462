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


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
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
