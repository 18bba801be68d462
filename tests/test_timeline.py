"""The timeline of an attempt (sessions/output/timeline.py), from hand-made evidence and from a
recorded session: its rows, marks and spans, their order, and what is left out for want of a
timestamp. No root, nothing started."""

from pathlib import Path

from sessions.output.archive import load_archive
from sessions.output.timeline import MARK_KINDS, SPAN_KINDS, Timeline, timeline_of, timelines
from sessions.stream.events import (
    ClientClaim,
    ClientExited,
    ClientLaunched,
    ConnectObserved,
    CounterSample,
    EgressObserved,
    PhaseChanged,
    ProcessObserved,
    ScenarioStarted,
    ServerRecord,
)
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import replay
from sessions.stream.stream import EventStream

DATA = Path(__file__).parent / "data" / "session.tar.gz"   # baseline, corrupt-upload, retry
T0 = 1_000_000_000
MS = 1_000_000
RECEIVER, DECOY = 4000, 4001


def _at(ms: float) -> int:
    return T0 + int(ms * MS)


def _rx(ms, n, event, server="receiver", **fields):
    return ServerRecord(_at(ms), "s", n, server, event, fields)


def _timeline(*events) -> Timeline:
    started = ScenarioStarted(T0, "s", "/bin/client", "0" * 64, (), (), (), RECEIVER, DECOY,
                              524288, "s.toml")
    book = EvidenceBook.of([started, *events])
    return timeline_of(book.scenarios["s"])


def _invocation_one():
    """A client that forks a helper (and starts a thread), connects to the receiver and the
    decoy, sends a datagram elsewhere, claims, and uploads twice: rejected, then committed."""
    return [
        ClientLaunched(_at(1), "s", 1, 90, ("/opt/bin/client",), "/w", "/w/source"),
        ProcessObserved(_at(5), "s", 1, "exec", 100, filename="/opt/bin/client"),
        ProcessObserved(_at(6), "s", 1, "fork", 100, child_pid=101),     # a thread: no row
        ProcessObserved(_at(7), "s", 1, "fork", 100, child_pid=102),
        ProcessObserved(_at(8), "s", 1, "exec", 102, filename="/usr/bin/py\x1bthon3"),
        ConnectObserved(_at(10), "s", 1, 100, "ipv4", "127.0.0.1", RECEIVER, 0),
        _rx(10.5, 1, "connection_opened", conn=1),
        _rx(11, 1, "upload_started", conn=1, length=524288),
        _rx(12, 1, "rejected", conn=1, reason="digest-mismatch"),
        _rx(12.5, 1, "connection_closed", conn=1, payload_bytes=524288),
        ConnectObserved(_at(13), "s", 1, 102, "ipv4", "127.0.0.1", DECOY, 0),
        _rx(13.2, 1, "connection_opened", "decoy", conn=1),
        _rx(13.4, 1, "connection_closed", "decoy", conn=1, bytes=0),
        EgressObserved(_at(14), "s", 1, 102, "sendmsg", "ipv4", "udp", "10.0.0.1", 53, False),
        EgressObserved(_at(14.5), "s", 1, 100, "connect", "ipv4", "tcp", "127.0.0.1",
                       RECEIVER, False),   # the socket layer's view of the connect above
        ConnectObserved(_at(15), "s", 1, 100, "ipv4", "127.0.0.1", RECEIVER, 0),
        _rx(15.5, 1, "connection_opened", conn=2),
        _rx(16, 1, "upload_started", conn=2, length=524288),
        _rx(17, 1, "fault_fired", conn=2, fault="stall", id="f1"),
        _rx(18, 1, "committed", conn=2, length=524288),
        _rx(18.5, 1, "connection_closed", conn=2, payload_bytes=524288),
        _rx(0, 1, "payload_progress", conn=2),            # no timestamp: left out
        ProcessObserved(_at(19), "s", 1, "exit", 102),
        ClientClaim(_at(19.5), "s", 1, {"claim": "completed\x1b[2J"}),
        ProcessObserved(_at(20), "s", 1, "exit", 100),
        CounterSample(_at(21), "s", 1, {"busy_max_ns": 3 * MS, "busy_start_max_ns": 200 * MS},
                      {}, (), final=True),
        ClientExited(_at(22), "s", 1, 0, False, 21 * MS, None),
    ]


def test_rows_are_the_clients_processes_then_the_servers_that_recorded_something():
    t = _timeline(*_invocation_one())
    assert t.scenario == "s"
    assert t.rows == ("pid 100 client", "pid 102 py\\x1bthon3", "receiver", "decoy")
    assert all(r.startswith("pid") or r in ("receiver", "decoy") for r in t.rows)


def test_marks_are_placed_from_the_scenarios_start_on_their_processs_row_in_time_order():
    t = _timeline(*_invocation_one())
    assert [m.t_ns for m in t.marks] == sorted(m.t_ns for m in t.marks)
    assert {m.kind for m in t.marks} <= set(MARK_KINDS)
    kinds = [(m.t_ns / MS, m.row, m.kind) for m in t.marks]
    assert (1, "pid 100 client", "invocation-start") in kinds
    assert (5, "pid 100 client", "exec") in kinds and (8, "pid 102 py\\x1bthon3", "exec") in kinds
    assert (10, "pid 100 client", "connect-endpoint") in kinds
    assert (13, "pid 102 py\\x1bthon3", "connect-other") in kinds      # the decoy
    assert (14, "pid 102 py\\x1bthon3", "connect-other") in kinds      # a datagram
    assert [k for k in kinds if k[1] == "receiver"] == [
        (11, "receiver", "start"), (12, "receiver", "reject"),
        (16, "receiver", "start"), (17, "receiver", "fault"), (18, "receiver", "commit")]
    assert (22, "pid 100 client", "invocation-end") in kinds
    # the socket layer's sighting of a connect the kernel's connect() event already shows
    assert not [m for m in t.marks if m.t_ns == 14.5 * MS]
    # a record without a timestamp (t_ns 0) is left out, not put at the start
    assert min(m.t_ns for m in t.marks) == 1 * MS


def test_spans_are_invocations_lives_and_server_connections_with_both_ends_known():
    t = _timeline(*_invocation_one())
    assert {s.kind for s in t.spans} <= set(SPAN_KINDS)
    spans = [(s.start_ns / MS, s.end_ns / MS, s.row, s.kind) for s in t.spans]
    assert spans == [(1, 22, "pid 100 client", "invocation"),
                     (5, 20, "pid 100 client", "alive"),
                     (7, 19, "pid 102 py\\x1bthon3", "alive"),
                     (10.5, 12.5, "receiver", "connection"),
                     (13.2, 13.4, "decoy", "connection"),
                     (15.5, 18.5, "receiver", "connection")]
    invocation = t.spans[0]
    assert "exit 0" in invocation.label   # the stretches' lengths: when they ran is not known
    assert "on-CPU stretch without progress 3.0 ms (200.0 ms in start-up)" in invocation.label
    assert "upload" in t.spans[-1].label and "524,288 payload bytes" in t.spans[-1].label
    assert t.end_ns == 22 * MS


def test_client_text_in_labels_is_visible_never_control_characters():
    t = _timeline(*_invocation_one())
    texts = [*t.rows, *(m.label for m in t.marks), *(s.label for s in t.spans)]
    assert not [x for x in texts if any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in x)]
    claim = next(m for m in t.marks if m.kind == "claim")
    assert "completed\\u001b[2J" in claim.label and claim.row == "pid 100 client"


def test_without_the_kernels_process_view_the_launched_process_is_the_row():
    t = _timeline(
        ClientLaunched(_at(1), "s", 1, 90, ("/opt/bin/client",), "/w", "/w/source"),
        ClientClaim(_at(2), "s", 1, {"claim": "completed"}),
        ClientExited(_at(3), "s", 1, 0, False, 2 * MS, None))
    assert t.rows == ("pid 90 client", "receiver")
    assert [m.kind for m in t.marks] == ["invocation-start", "claim", "invocation-end"]


def test_what_has_no_end_gets_no_span():
    # a receiver killed at its commit by an injected crash never closes its connection; the
    # restarted one numbers its connections from 1 again; a process whose exit was not seen
    t = _timeline(
        ProcessObserved(_at(1), "s", 1, "exec", 100, filename="/c"),
        _rx(2, 1, "connection_opened", conn=1),
        _rx(3, 1, "fault_fired", conn=1, fault="crash", id="f1", phase="before-rename"),
        _rx(5, 1, "connection_opened", conn=1),
        _rx(6, 1, "committed", conn=1),
        _rx(7, 1, "connection_closed", conn=1, payload_bytes=10),
        PhaseChanged(_at(9), "s", "done"))
    assert [(s.start_ns / MS, s.end_ns / MS, s.kind) for s in t.spans] == [(5, 7, "connection")]
    assert t.end_ns == 9 * MS
    assert [m.kind for m in t.marks if m.row == "receiver"] == ["fault", "commit"]


def test_a_wire_fault_proxy_is_a_row_and_its_port_is_the_receivers_for_the_client():
    t = _timeline(
        ProcessObserved(_at(1), "s", 1, "exec", 100, filename="/c"),
        _rx(1.5, 1, "listening", "proxy", port=5000),
        ConnectObserved(_at(2), "s", 1, 100, "ipv4", "127.0.0.1", 5000, 0),
        ConnectObserved(_at(2.5), "s", 1, 100, "ipv4", "127.0.0.1", RECEIVER, -111),
        _rx(3, 1, "connection_opened", "proxy", conn=1),
        _rx(4, 1, "fault_fired", "proxy", conn=1, kind="reset", id="w1", direction="up"),
        _rx(5, 1, "connection_closed", "proxy", conn=1, bytes_up=10, bytes_down=0,
            end="reset"))
    assert t.rows == ("pid 100 c", "receiver", "proxy")
    kinds = [(m.t_ns / MS, m.row, m.kind) for m in t.marks]
    assert kinds == [(1, "pid 100 c", "exec"), (2, "pid 100 c", "connect-endpoint"),
                     (2.5, "pid 100 c", "connect-other"), (4, "proxy", "fault")]
    assert "failed (-111)" in t.marks[2].label and "up" in t.marks[3].label
    assert t.marks[1].label.endswith("(the receiver, through the fault proxy)")
    assert [(s.row, s.kind) for s in t.spans] == [("proxy", "connection")]


def test_a_recorded_session_and_its_replay_draw_the_same_timelines():
    events = load_archive(DATA).events
    drawn = timelines(EvidenceBook.of(events))
    replayed = EvidenceBook()
    replay(events, EventStream([replayed]))
    assert timelines(replayed) == drawn
    by_id = {t.scenario: t for t in drawn}
    assert list(by_id) == ["baseline", "corrupt-upload", "retry"]

    def count(t, kind):
        return sum(m.kind == kind for m in t.marks)

    baseline, corrupt, retry = by_id["baseline"], by_id["corrupt-upload"], by_id["retry"]
    # one process per invocation, then the receiver (the fixture's clients fork nothing)
    assert [len(t.rows) for t in drawn] == [3, 3, 3] and all(t.rows[-1] == "receiver"
                                                             for t in drawn)
    assert (count(baseline, "connect-endpoint"), count(baseline, "start"),
            count(baseline, "commit"), count(baseline, "connect-other")) == (3, 1, 1, 0)
    assert (count(corrupt, "start"), count(corrupt, "reject"),
            count(corrupt, "commit")) == (6, 6, 0)
    assert (count(retry, "fault"), count(retry, "start"), count(retry, "reject"),
            count(retry, "commit")) == (1, 2, 1, 1)
    for t in drawn:
        assert count(t, "invocation-start") == count(t, "invocation-end") == 2
        assert [m.t_ns for m in t.marks] == sorted(m.t_ns for m in t.marks)
        assert all(0 <= m.t_ns <= t.end_ns for m in t.marks)
        assert all(0 <= s.start_ns <= s.end_ns <= t.end_ns for s in t.spans)
        assert all(m.row in t.rows for m in t.marks) and all(s.row in t.rows for s in t.spans)
    # the retry's fault fires inside the upload it interrupts
    fault = next(m for m in retry.marks if m.kind == "fault")
    assert any(s.start_ns < fault.t_ns < s.end_ns for s in retry.spans if s.kind == "connection")
    assert "drop" in fault.label


def test_an_exec_name_the_kernel_cut_short_is_made_whole_from_the_launched_command():
    long = "/tmp/evlab-ship-x/c-redundant/abs/work/main/fixture/build/client-redundant-upload"
    other = "/tmp/evlab-ship-x/c-redundant/abs/work/main/fixture/build/another-long-helper"
    t = _timeline(
        ClientLaunched(_at(1), "s", 1, 90, (long,), "/w", "/w/source"),
        ProcessObserved(_at(2), "s", 1, "exec", 100, filename=long[:63]),
        ProcessObserved(_at(3), "s", 1, "fork", 100, child_pid=101),
        ProcessObserved(_at(4), "s", 1, "exec", 101, filename=other[:63]))
    assert t.rows == ("pid 100 client-redundant-upload", "pid 101 anoth…", "receiver")
    assert f"exec {long} (pid 100)" in [m.label for m in t.marks]
