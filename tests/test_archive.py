"""Malicious or broken archives get one clear line and change nothing on disk."""

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from sessions.output import archive
from sessions.output.archive import ArchiveError, load_archive
from sessions.stream.codec import to_json
from sessions.stream.events import PhaseChanged, SessionEnded

ROOT = Path(__file__).resolve().parent.parent
EVLAB = str(ROOT / ".venv" / "bin" / "evlab")
GOOD_MANIFEST = {"format": "evlab-archive", "version": 1, "partial": False}
EVENTS = to_json(PhaseChanged(1, "s", "setup")) + "\n" + to_json(SessionEnded(2, False,
                                                                            "complete")) + "\n"


def make_tar(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
            else:
                name, data = m
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def good_members(manifest=GOOD_MANIFEST):
    return [("manifest.json", json.dumps(manifest).encode()), ("events.jsonl", EVENTS.encode())]


def link(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def test_a_well_formed_archive_loads(tmp_path):
    loaded = load_archive(make_tar(tmp_path / "ok.tar.gz", good_members()))
    assert [type(e).__name__ for e in loaded.events] == ["PhaseChanged", "SessionEnded"]
    assert not loaded.partial


@pytest.mark.parametrize("members, message", [
    ([*good_members(), ("/etc/evil", b"x")], "absolute path"),
    ([*good_members(), ("../../evil", b"x")], "escapes the archive"),
    ([*good_members(), ("pcap/../../evil", b"x")], "escapes the archive"),
    ([*good_members(), link("pcap/x.pcap", "/etc/passwd")], "is a link"),
    ([*good_members(), link("pcap/y.pcap", "manifest.json", tarfile.LNKTYPE)], "is a link"),
    (good_members({**GOOD_MANIFEST, "version": 99}), "archive version 99 is not supported"),
    (good_members({"format": "zip"}), "manifest format"),
    ([("events.jsonl", EVENTS.encode())], "missing manifest.json"),
    ([("manifest.json", json.dumps(GOOD_MANIFEST).encode()),
      ("events.jsonl", b'{"type": "Bogus"}\n')], "unknown event type"),
])
def test_bad_archives_are_rejected_with_a_reason(tmp_path, members, message):
    path = make_tar(tmp_path / "bad.tar.gz", members)
    with pytest.raises(ArchiveError, match=message):
        load_archive(path)


def test_oversize_members_are_rejected(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "MAX_MEMBER_BYTES", 1000)
    path = make_tar(tmp_path / "big.tar.gz", [*good_members(), ("pcap/big.pcap", b"x" * 1001)])
    with pytest.raises(ArchiveError, match="1,001 bytes"):
        load_archive(path)


def test_not_an_archive(tmp_path):
    path = tmp_path / "junk.tar.gz"
    path.write_bytes(os.urandom(1000))
    with pytest.raises(ArchiveError, match="not a readable .tar.gz archive"):
        load_archive(path)


def test_the_cli_says_one_line_and_writes_nothing(tmp_path):
    path = make_tar(tmp_path / "evil.tar.gz", [*good_members(), ("../../evil", b"x")])
    work = tmp_path / "work"
    work.mkdir()
    for command in (["report", str(path)], ["replay", str(path), "--headless"]):
        out = subprocess.run([EVLAB, *command], capture_output=True, text=True, cwd=work,
                             timeout=60)
        assert out.returncode == 2
        assert out.stderr.count("\n") == 1 and "escapes the archive" in out.stderr
        assert "Traceback" not in out.stderr
    assert list(work.iterdir()) == [] and not (tmp_path.parent / "evil").exists()
