"""The kernel's operations as the stream's events: named from the collector's records (own, a
server by name and role, other), kept by the evidence book, carried through the codec, and in
the same words in the timeline's marks and the dashboard's events pane."""

from probes.collectors.records import LifeEvent, SignalEvent, TruncateEvent
from sessions.lab.observations import kernel_event
from sessions.output.timeline import MARK_KINDS
from sessions.output.vocabulary import event_line
from sessions.stream.codec import from_json, to_json
from sessions.stream.evidence import InvocationEvidence, _invocation_event
from tui.lines import EVENTS, pane_of

ROLES = {"app": "endpoint"}
SENT = SignalEvent(10, 7, 100, 100, "ctl", "kill", -1, 0, 1, 0, target=200, target_tid=200,
                   target_comm="app", group=True, watch=3, server="app")
CALL = SignalEvent(9, 7, 100, 100, "ctl", "kill", 0, 0, 0, -1)
HELD = TruncateEvent(11, 7, 100, 100, "ctl", "ftruncate", "app.log", 3, 0, 0, 0, 0, 42, 8,
                     writers=2, own=1, counted=True)
BY_PATH = TruncateEvent(12, 7, 100, 100, "ctl", "truncate", "/w/app.log", -1, 0, 0, 0, 0,
                        None, None, None, None, True)
ENDED = LifeEvent(13, 7, "exited", 200, "app", own=False, watch=3, server="app", status=9,
                  signal=9, sender=100, sender_invocation=7)


def events():
    return [kernel_event(e, "s", 1, ROLES) for e in (CALL, SENT, HELD, BY_PATH, ENDED)]


def test_each_is_named_by_whose_its_processes_were():
    call, sent, held, by_path, ended = events()
    assert (call.target, call.whose, call.name) == (None, "", "0")   # a probe: nothing sent
    assert (sent.whose, sent.server, sent.role, sent.name, sent.asked) == (
        "server", "app", "endpoint", "SIGHUP", -1)
    assert (held.others_writing, held.why) == (True, "")
    assert by_path.others_writing is None and "by path" in by_path.why
    assert (ended.whose, ended.signal_name, ended.sender_whose, ended.by_client) == (
        "server", "SIGKILL", "own", True)


def test_they_round_trip_through_the_archive_codec_and_the_evidence_book_keeps_them():
    inv = InvocationEvidence(1)
    for e in events():
        assert from_json(to_json(e)) == e
        _invocation_event(inv, e, ROLES)
    assert (len(inv.signals), len(inv.truncations), len(inv.lives)) == (2, 2, 1)


def test_they_have_lines_in_the_events_pane_and_marks_on_the_timeline():
    lines = [event_line(e) for e in events()]
    assert all(pane_of(e) == EVENTS for e in events())
    assert "SIGHUP → server app (endpoint) pid 200 by kill(-1, SIGHUP)" in lines[1]
    assert "another process had it open for writing" in lines[2]
    assert "writers not known" in lines[3]
    assert "ended by SIGKILL from the client's pid 100" in lines[4]
    # a process of the client's own that exited by itself: the claims pane's kernel exit line
    # says it already; one ended by a signal keeps its line (it names the sender)
    own = LifeEvent(14, 7, "exited", 300, "client", own=True, watch=0, status=0, signal=0)
    assert pane_of(kernel_event(own, "s", 1, ROLES)) is None
    assert {"signal", "truncate", "server-start", "server-exit"} <= set(MARK_KINDS)
