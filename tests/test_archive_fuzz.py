"""Malformed archives, generated: every event type with a field of the wrong type, extreme
numbers, deep nesting, a repeated stream, members missing or extra, a compression bomb within
the size limits. `evlab report` and `evlab replay --headless` must answer each with one line
and exit status 2 — never a traceback — in bounded memory."""

import contextlib
import gzip
import io
import json
import os
import resource
import tarfile
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions import cli
from sessions.stream.codec import _hints
from sessions.stream.registry import EVENT_TYPES

DATA = Path(__file__).parent / "data" / "session.tar.gz"
# the same 30 broken events every run (derandomized); `make bench` (its fuzz section) draws 1,000
# new ones a time (EVLAB_FUZZ_EXAMPLES=1000, random), where the breadth of the search is the point
FUZZ_EXAMPLES = int(os.environ.get("EVLAB_FUZZ_EXAMPLES", "30"))
with tarfile.open(DATA) as _tar:
    MEMBERS = {m.name: _tar.extractfile(m).read() for m in _tar if m.isfile()}
EVENTS = MEMBERS["events.jsonl"].decode().splitlines()


def _valid(hint):
    """A value of the field's declared type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if args and type(None) in args:
        return None
    if hint is bool:
        return True
    if hint in (int, float):
        return 1
    if hint is str:
        return "x"
    if hint is dict or origin is dict:
        return {}
    return []


def _wrong(hint) -> list:
    """Values a field of this type must refuse."""
    deep: list = []
    for _ in range(12):
        deep = [deep]
    bad = [{"deep": deep}, "xxx" if hint is not str else 7, 2 ** 70, -(2 ** 70), 1e30,
           float("nan"), float("inf"), deep]
    if hint is str:
        bad += [None, 1.5, {}]
    return [b for b in bad if not (hint is typing.Any and isinstance(b, str))]


@st.composite
def broken_event(draw) -> str:
    name = draw(st.sampled_from(sorted(EVENT_TYPES)))
    hints = _hints(EVENT_TYPES[name])
    event = {"type": name, **{field: _valid(h) for field, h in hints.items()}}
    field = draw(st.sampled_from(sorted(hints)))
    event[field] = draw(st.sampled_from(_wrong(hints[field])))
    return json.dumps(event)   # NaN and Infinity are written as JSON's non-standard tokens


def _archive(path: Path, events: list[str], members: dict[str, bytes] | None = None) -> Path:
    members = dict(MEMBERS if members is None else members)
    members["events.jsonl"] = ("\n".join(events) + "\n").encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _evlab(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(list(args))
    return status, err.getvalue()


def _refused(path: Path) -> None:
    for args in (["report", str(path), "--format", "json"], ["replay", str(path), "--headless"]):
        status, err = _evlab(*args)
        assert status == 2, (args, status, err)
        assert err.count("\n") == 1 and err.startswith("evlab: "), err
        assert "Traceback" not in err


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, print_blob=True,
          derandomize="EVLAB_FUZZ_EXAMPLES" not in os.environ,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=broken_event(), at=st.integers(0, len(EVENTS)))
def test_an_event_with_a_field_of_the_wrong_type_is_refused(tmp_path, event, at):
    _refused(_archive(tmp_path / "a.tar.gz", EVENTS[:at] + [event] + EVENTS[at:]))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(["repeat", "swap", "deep", "no-events", "no-manifest",
                            "manifest-list", "manifest-deep", "garbage-line"]),
       at=st.integers(1, len(EVENTS) - 2))
def test_a_damaged_stream_or_member_is_refused(tmp_path, how, at):
    events, members = list(EVENTS), dict(MEMBERS)
    if how == "repeat":       # the stream written twice
        events = events + events
    elif how == "swap":       # out of order
        events[at], events[at + 1] = events[at + 1], events[at]
    elif how == "deep":
        events.insert(at, "[" * 50_000 + "]" * 50_000)
    elif how == "garbage-line":
        events.insert(at, '{"type": "PhaseChanged"')
    elif how == "no-events":
        members.pop("events.jsonl")
    elif how == "no-manifest":
        members.pop("manifest.json")
    elif how == "manifest-list":
        members["manifest.json"] = b"[]"
    elif how == "manifest-deep":
        members["manifest.json"] = b"[" * 50_000 + b"]" * 50_000
    path = tmp_path / "a.tar.gz"
    if how == "no-events":
        with tarfile.open(path, "w:gz") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    else:
        _archive(path, events, members)
    _refused(path)


def test_a_compression_bomb_within_the_limits_is_read_in_bounded_memory(tmp_path):
    # 200 MiB of zeros in a member evlab does not keep: every byte is read, none is held.
    bomb = tmp_path / "bomb.tar.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as raw, tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in MEMBERS.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("pcap/bomb.pcap")
        info.size = 200 << 20

        class Zeros(io.RawIOBase):
            left = info.size

            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = bytes(n)
                self.left -= n
                return n

        tar.addfile(info, Zeros())
    assert bomb.stat().st_size < DATA.stat().st_size + (1 << 20)   # 200 MiB from < 1 MiB
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    status, err = _evlab("report", str(bomb), "--format", "json")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert status == 0, err
    assert grown_mib < 100, f"RSS grew {grown_mib:.0f} MiB reading a 200 MiB member"
