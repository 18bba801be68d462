"""The user's paths are the user's: every command that reads or writes a file, given relative
paths from the user's own directory while the collector compiles (libbcc chdirs into the kernel
headers while it does), reads and writes there and nowhere else."""

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from probes.bcc.load import private_cwd

ROOT = Path(__file__).resolve().parent.parent
EVLAB = ROOT / ".venv" / "bin" / "evlab"
CLIENT = ROOT / "tests" / "clients" / "backup_client.py"
RELEASE = os.uname().release


def test_a_thread_with_a_private_cwd_moves_no_other_thread(tmp_path):
    before, seen = os.getcwd(), {}

    def wander() -> None:
        private_cwd()
        os.chdir(tmp_path)
        seen["inside"] = os.getcwd()

    thread = threading.Thread(target=wander)
    thread.start()
    thread.join()
    assert seen["inside"] == str(tmp_path)
    assert os.getcwd() == before


def _watched() -> dict[str, int]:
    """Every directory a relative path resolved while libbcc compiles would land in, with its
    mtime (a new entry changes it)."""
    dirs = {Path("/usr/src"), Path(f"/lib/modules/{RELEASE}")}
    for link in ("build", "source"):
        dirs.add(Path(f"/lib/modules/{RELEASE}/{link}").resolve())
    return {str(d): d.stat().st_mtime_ns for d in sorted(dirs) if d.is_dir()}


def _evlab(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(EVLAB), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.root(reason="the BCC collector compiles ahead (and libbcc chdirs) only as root")
def test_every_command_reads_and_writes_relative_paths_in_the_users_directory(tmp_path):
    home = tmp_path / "me"
    home.mkdir(mode=0o755)
    shutil.copy(CLIENT, home / "client.py")
    shutil.copy(ROOT / "fixture" / "backup" / "scenarios" / "baseline.toml", home / "mine.toml")
    command = '["python3", "client.py", "{host}", "{port}", "{source}"]'
    (home / "grade.toml").write_text(f"[client]\ncommand = {command}\n"
                                     "[grade]\nattempts = 1\nscenarios = [\"normal\"]\n")
    (home / "clients.toml").write_text("[campaign]\nname = \"rel\"\nscenarios = [\"normal\"]\n"
                                       f"attempts = 1\n[[client]]\nname = \"py\"\n"
                                       f"command = {command}\n")
    watched = _watched()
    assert watched, "no kernel header directories to watch"

    # (command, the exit statuses it may end with: a grade says 1 when an attempt failed,
    # which is the client's business here, not the paths')
    runs = [
        (("run", "mine.toml", "--headless", "--json", "run.json", "--archive", "run.tar.gz",
          "--html", "run.html"), {0}),
        (("grade", "grade.toml", "--headless", "--json", "grade.json", "--report", "grade.md",
          "--archive", "grade.tar.gz"), {0, 1}),
        (("campaign", "clients.toml", "--headless", "--json", "board.json",
          "--report", "board.md", "--archive", "board.tar.gz", "--html", "board.html"), {0}),
        (("report", "run.tar.gz", "--format", "junit", "--output", "run.xml"), {0}),
        (("report", "grade.tar.gz", "--html", "grade.html"), {0}),
        (("replay", "grade.tar.gz", "--headless"), {0, 1}),
    ]
    for args, statuses in runs:
        out = _evlab(home, *args)
        assert out.returncode in statuses, (args, out.stderr[-2000:])
        assert "Traceback" not in out.stderr, args

    assert sorted(p.name for p in home.iterdir()) == sorted([
        "client.py", "mine.toml", "grade.toml", "clients.toml", "run.json", "run.tar.gz",
        "run.html", "grade.json", "grade.md", "grade.tar.gz", "grade.html",
        "board.json", "board.md", "board.tar.gz", "board.html", "run.xml",
        "evlab-campaign-rel"])
    assert json.loads((home / "grade.json").read_text())["grade"]["scenarios"]
    assert (home / "evlab-campaign-rel" / "journal.jsonl").is_file()
    assert _watched() == watched   # nothing was created in the kernel headers
