"""The session's one EvidenceBook, as the outputs read it: an export taken while the lab is
publishing is a consistent snapshot, and evidence that dies mid-scenario (the packet capture)
is published and makes the clauses that read it inconclusive."""

import io
import json
import tarfile
import threading

import pytest

from sessions.lab import scenario_run
from sessions.lab.schedule import run_session
from sessions.output import report
from sessions.output.archive import ArchiveWriter, parse_events
from sessions.output.judged import JudgedStream
from sessions.spec.scenario import load_dir, select
from sessions.stream.codec import to_dict
from sessions.stream.events import PacketStats, Verdict
from sessions.stream.evidence import EvidenceBook

pytestmark = [pytest.mark.root(reason="runs the lab: BCC, cgroups, packet capture"),
              pytest.mark.live, pytest.mark.slow]


def _members(path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_an_export_during_a_running_session_is_every_event_up_to_one_number(tmp_path,
                                                                             built_clients):
    book = EvidenceBook()
    stream = JudgedStream(book=book)
    writer = ArchiveWriter(tmp_path / "staging", book, stream)
    scenarios = select(["baseline", "retry", "hash-storm"], load_dir())
    done = threading.Event()

    def lab():
        try:
            run_session(stream, scenarios, tmp_path / "staging")
        finally:
            done.set()

    thread = threading.Thread(target=lab)
    thread.start()
    exports = []
    while not done.is_set():
        exports.append(writer.write(tmp_path / f"export-{len(exports)}.tar.gz"))
    thread.join()
    assert len(exports) >= 3, "the session ended before the exports could overlap it"
    lengths = []
    for path in exports:
        members = _members(path)
        events = parse_events(members["events.jsonl"].decode(), str(path))
        # every event up to one sequence number: none missing, none from after the snapshot
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        snapshot = EvidenceBook.of(events)
        # the generated members describe exactly those events
        assert members["report.md"].decode() == report.markdown(snapshot)
        verdicts = json.loads(json.dumps([to_dict(e) for e in events if isinstance(e, Verdict)]))
        assert json.loads(members["verdicts.json"]) == verdicts
        manifest = json.load(io.BytesIO(members["manifest.json"]))
        done_count, last = snapshot.complete_through()
        if snapshot.ended is None:
            assert manifest["partial"] and "exported while the session was open" in \
                manifest["end_reason"]
            assert (f"complete through scenario {done_count} ({last})" in manifest["end_reason"]
                    if done_count else "no scenario complete" in manifest["end_reason"])
        lengths.append(len(events))
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]


def test_a_capture_that_dies_mid_scenario_makes_the_wire_clauses_inconclusive(
        tmp_path, built_clients, monkeypatch):
    # A pcap that cannot be written (/dev/full: ENOSPC) kills the capture thread at the first
    # frames it flushes, during invocation 1; the session's own probe (no pcap) still works.
    real = scenario_run.PacketCapture
    monkeypatch.setattr(scenario_run, "PacketCapture", lambda pcap_path=None, **kw: real(
        pcap_path="/dev/full" if pcap_path else None, **kw))
    book = EvidenceBook()
    run_session(JudgedStream(book=book), select(["baseline"], load_dir()),
                tmp_path / "out")
    ev = book.scenarios["baseline"]
    stats = [e for e in book.events if isinstance(e, PacketStats)]
    assert stats and all("No space left on device" in s.error for s in stats), stats
    verdicts = {v.clause: v for v in ev.verdicts}
    for clause in ("unchanged-no-upload", "destination-only"):
        assert verdicts[clause].status == "inconclusive", verdicts[clause]
        assert "the packet capture stopped (OSError" in verdicts[clause].reason
    # what does not read the wire is still judged from its own evidence
    for clause in ("integrity", "honest-outcome", "hash-work", "cpu-budget"):
        assert verdicts[clause].status == "pass", verdicts[clause]
