"""The event stream: lossless JSON round trip, one order for every consumer, verdicts derived in
the stream; and the judge never passes a clause whose evidence is missing."""

import dataclasses
import functools
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions.judging.judge import INCONCLUSIVE, PASS
from sessions.output.judged import JudgedStream
from sessions.stream.codec import EventFormatError, from_json, to_json
from sessions.stream.events import (
    CounterSample,
    PacketSeen,
    PhaseChanged,
    ScenarioStarted,
    SessionStarted,
    VerifierResult,
)
from sessions.stream.evidence import sequence_bytes
from sessions.stream.registry import EVENT_TYPES
from sessions.stream.stream import EventStream

_json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53),
                         st.text(max_size=20))
_json_dict = st.dictionaries(st.text(max_size=10), _json_scalar, max_size=5)


def _strategy_for(tp):
    origin = typing.get_origin(tp)
    if tp is int:
        return st.integers(-2**53, 2**53)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is str:
        return st.text(max_size=30)
    if tp is bool:
        return st.booleans()
    if origin is dict:
        return st.dictionaries(st.text(max_size=10), _strategy_for(typing.get_args(tp)[1]),
                               max_size=5)
    if tp is dict:
        return _json_dict
    if origin is tuple:
        return st.tuples() if not typing.get_args(tp) else st.lists(
            _strategy_for(typing.get_args(tp)[0]), max_size=4).map(tuple)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return st.one_of(*[_strategy_for(a) for a in typing.get_args(tp)])
    if tp is type(None):
        return st.none()
    raise AssertionError(f"no strategy for {tp}")


@functools.cache   # one strategy a type, not one an example (its hints resolved each time)
def _event_strategy(cls):
    hints = typing.get_type_hints(cls)
    fields = {f.name: _strategy_for(hints[f.name]) for f in dataclasses.fields(cls)}
    fields["t_ns"] = st.integers(0, 2**53)   # CLOCK_MONOTONIC: never negative (refused if so)
    return st.builds(cls, **fields)


@pytest.mark.parametrize("cls", EVENT_TYPES.values(), ids=EVENT_TYPES.keys())
@settings(max_examples=25, deadline=None)   # 25 new ones a type every run
@given(data=st.data())
def test_every_event_type_round_trips_exactly(cls, data):
    event = data.draw(_event_strategy(cls))
    assert from_json(to_json(event)) == event


@pytest.mark.parametrize("line, message", [
    ("not json", "not JSON"),
    ("[1, 2]", "expected an object"),
    ('{"type": "Bogus"}', "unknown event type"),
    ('{"type": "PhaseChanged", "t_ns": 1, "scenario": "x", "phase": "p", "colour": 1}',
     "has no field 'colour'"),
    ('{"type": "PhaseChanged", "t_ns": 1}', "PhaseChanged"),
])
def test_malformed_lines_are_clear_errors(line, message):
    with pytest.raises(EventFormatError, match=message):
        from_json(line)


def test_every_consumer_sees_one_order_including_derived_events():
    seen_a, seen_b = [], []

    def deriver(event):
        if isinstance(event, PhaseChanged) and event.phase == "judging":
            return [PhaseChanged(event.t_ns, event.scenario, "derived")]
        return None

    stream = EventStream([deriver, seen_a.append, seen_b.append])
    stream.publish(PhaseChanged(1, "s", "setup"))
    stream.publish(PhaseChanged(2, "s", "judging"))
    stream.publish(PhaseChanged(3, "s", "done"))
    assert [e.phase for e in seen_a] == ["setup", "judging", "derived", "done"]
    assert seen_a == seen_b
    assert [e.seq for e in seen_a] == [1, 2, 3, 4]


def _no_kernel_scenario() -> list:
    """A scenario as the 'none' collector records it: no counters observed at all."""
    events = [SessionStarted(0, wall_ns=0, evlab_version="t", kernel="k", collector="none",
                             packets="off", contract_version="1", scenarios=("s",)),
              ScenarioStarted(1, "s", "/bin/client", "0" * 64, (), (), {}, 4000, 4001, 524288,
                              "s.toml"),
              VerifierResult(2, "s", 0, False)]
    for n in (1, 2):
        events.append(CounterSample(3, "s", n, {}, {}, ("connects", "oncpu_ns"), final=True))
        events.append(VerifierResult(4, "s", n, True))
    events.append(PhaseChanged(5, "s", "judging"))
    return events


def test_missing_kernel_evidence_is_inconclusive_never_pass():
    verdicts: list = []
    stream = JudgedStream(verdicts.append)
    for e in _no_kernel_scenario():
        stream.publish(e)
    by_clause = {v.clause: v for v in verdicts if hasattr(v, "clause")}
    for clause in ("destination-only", "hash-work", "cpu-budget"):
        assert by_clause[clause].status == INCONCLUSIVE, by_clause[clause]
        assert by_clause[clause].failure_class == "environment"
    # no exit records: honest-outcome cannot be judged either
    assert by_clause["honest-outcome"].status == INCONCLUSIVE
    assert by_clause["integrity"].status == PASS  # the verifier's evidence is there
    judged = verdicts[-1]
    assert judged.instrument_check == "inconclusive"


def _segment(seq: int, n: int, sport: int = 40000) -> PacketSeen:
    return PacketSeen(0, "s", 1, "127.0.0.1", sport, "127.0.0.1", 9000, "PSH,ACK", n, seq)


def test_wire_bytes_count_a_retransmitted_segment_once():
    sent = [_segment(1000, 500), _segment(1500, 500)]
    assert sequence_bytes(sent) == 1000
    assert sequence_bytes([*sent, _segment(1500, 500)]) == 1000      # the same segment again
    assert sequence_bytes([*sent, _segment(1200, 600)]) == 1000      # re-cut, inside what was sent
    assert sequence_bytes([*sent, _segment(1800, 400)]) == 1200      # partly new: 200 more
    assert sequence_bytes([_segment(2**32 - 100, 300), _segment(200, 50)]) == 350  # seq wraps
    assert sequence_bytes([*sent, _segment(1000, 500, sport=40001)]) == 1500  # another connection
    old = [_segment(-1, 500), _segment(-1, 500)]     # an older archive: no sequence numbers
    assert sequence_bytes(old) == 1000


def test_an_earlier_evlabs_names_are_read_as_todays():
    """sessions/stream/compat.py: a scenario's receiver_port is its endpoint's port, a verifier
    result's saved and digests are its figures, said in the words evlab said them with."""
    old = ('{"type":"ScenarioStarted","t_ns":1,"scenario":"s","client_path":"/c",'
           '"client_sha256":"0","expected_failures":[],"expected_passes":[],"faults":[],'
           '"receiver_port":4000,"decoy_port":4001,"source_size":8,"scenario_file":"s.toml"}')
    started = from_json(old)
    assert (started.endpoint_port, started.roles, started.ports) == (
        4000, {"receiver": "endpoint", "decoy": "decoy"}, {"receiver": 4000, "decoy": 4001})
    v = from_json('{"type":"VerifierResult","t_ns":2,"scenario":"s","invocation":1,'
                  '"saved":true,"match":false,"source_sha256":"' + "a" * 64 + '",'
                  '"saved_sha256":"' + "b" * 64 + '"}')
    assert v.fields == {"saved": True, "source_sha256": "a" * 64, "saved_sha256": "b" * 64}
    assert v.detail == "the saved backup's sha256 bbbbbbbbbbbb… differs from the source's " \
                       "aaaaaaaaaaaa…"
    assert from_json(to_json(v)) == v   # and today's record reads back as written
