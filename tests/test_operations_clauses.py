"""The operations clauses (service-kept, signals-as-allowed, no-live-truncate) and the validity
rule for a server the client ended, on hand-made event streams: what the BCC collector's
operations probes record (tests/test_operations_kernel.py checks those against the kernel).
Each verdict here, including the ones no real run can give on demand (events lost, no
operations probes, a server that died by another's signal), is checked on the streams such a
run records; tests/test_operations_lab.py runs real clients against a real service."""

import pytest

from sessions.judging.clauses import PREDICATES, predicates_of
from sessions.judging.grading import harness_failures, judge_attempt
from sessions.judging.judge import instrument_check
from sessions.spec.contract import ContractError, parse_contract
from sessions.stream.events import CapabilityMissing, CounterSample, ScenarioStarted, ServerRecord
from sessions.stream.evidence import EvidenceBook
from sessions.stream.judgements import Verdict
from sessions.stream.operations import CAPPED, ProcessLife, SignalObserved, TruncateObserved

CONTRACT = """
version = "1"
[clauses.kept]
holds_when = "the service's process lives through every invocation"
decided_by = "the kernel's process ends"
predicate = "service-kept"
[clauses.signals]
holds_when = "only a reload signal, only to the service"
decided_by = "the kernel's signals"
predicate = "signals-as-allowed"
[clauses.truncate]
holds_when = "no live file truncated"
decided_by = "the kernel's truncations"
predicate = "no-live-truncate"
[operations]
kept = ["endpoint"]
signals = { HUP = ["svc"] }
"""
T = parse_contract(CONTRACT, "contract.toml").thresholds
APP, LOAD = 200, 300     # the service's process evlab started; the load's


def _events(*ops, lost=0, missing=False, restarted=None, verifier_failed=False):
    started = ScenarioStarted(1, "s", "/bin/c", "0" * 64, (), (), (), 4000, 0, 0, "s.toml",
                              attempt=1, base="s", servers={
                                  "svc": {"role": "endpoint", "port": 4000},
                                  "load": {"role": "internal", "port": 4001}})
    blind = [CapabilityMissing(0, "operations", "strace sees calls only", "use BCC")]
    watched = ServerRecord(2, "s", 1, "harness", "servers_watched",
                           {"pids": {"svc": APP, "load": LOAD}})
    final = CounterSample(90, "s", 1, {"lost_events": lost}, {}, (), final=True)
    extra = [ServerRecord(80, "s", 1, "harness", "svc_restarted",
                          {"exit_status": 9, "port": 4000, **restarted})] if restarted else []
    extra += [ServerRecord(85, "s", 1, "harness", "verifier_failed",
                           {"error": "connection refused"})] if verifier_failed else []
    events = [*(blind if missing else []), started, watched, *ops, *extra, final]
    for seq, e in enumerate(events, 1):
        object.__setattr__(e, "seq", seq)
    return EvidenceBook.of(events).scenarios["s"]


def _signal(target, whose, name="SIGHUP", number=1, server="svc", role="endpoint", t=10):
    return SignalObserved(t, "s", 1, 100, "kill", target, number, name, 0, target, "x", whose,
                          server if whose == "server" else "",
                          role if whose == "server" else "", True)


def _end(pid=APP, signal=9, sender_whose="own", status=9, t=20):
    return ProcessLife(t, "s", 1, "exited", pid, "svc", "server", "svc", "endpoint",
                       status=status, signal=signal, signal_name="SIGKILL" if signal else "",
                       sender=100 if signal else None,
                       sender_whose=sender_whose if signal else "")


def _cut(others, why=""):
    return TruncateObserved(30, "s", 1, 100, "ftruncate", "svc.log", 0, 0, 7,
                            None if others is None else 2, 1, others, why)


def _judge(clause, ev):
    return PREDICATES[clause](ev, T)


def test_service_kept_fails_naming_who_ended_it_and_passes_a_reload():
    reload = _events(_signal(APP, "server"),
                     ProcessLife(15, "s", 1, "exited", 201, "svc", "server", "svc", "endpoint",
                                 status=0))   # a worker's end on a reload: not the service's
    assert _judge("service-kept", reload).status == "pass"
    killed = _judge("service-kept", _events(_end()))
    assert killed.status == "fail"
    assert "svc (endpoint) pid 200 was ended by SIGKILL from the client's pid 100" in killed.reason
    itself = _judge("service-kept", _events(_signal(APP, "server"), _end(signal=0, status=256)))
    assert "exited by itself (exit status 1) after the client's pid 100 sent it SIGHUP" in (
        itself.reason)


@pytest.mark.parametrize("clause", ["service-kept", "signals-as-allowed", "no-live-truncate"])
def test_each_is_inconclusive_without_the_operations_view_or_with_events_lost_or_past_its_cap(
        clause):
    blind = _judge(clause, _events(missing=True))
    assert (blind.status, blind.failure_class) == ("inconclusive", "environment")
    assert "strace sees calls only" in blind.reason
    lost = _judge(clause, _events(lost=3))
    assert (lost.status, lost.failure_class) == ("inconclusive", "client")
    assert "lost 3 events" in lost.reason
    capped = _judge(clause, _events(ServerRecord(50, "s", 1, "harness", CAPPED, {"cap": 20_000})))
    assert (capped.status, capped.failure_class) == ("inconclusive", "client")
    assert "more than 20,000 signals, truncations and processes' ends" in capped.reason
    assert _judge(clause, _events()).status == "pass"


def test_signals_as_allowed_reads_the_contract_and_leaves_the_tree_its_own():
    ok = _judge("signals-as-allowed",
                _events(_signal(APP, "server"), _signal(101, "own", "SIGTERM", 15)))
    assert ok.status == "pass" and "1 within its own tree" in ok.reason
    for breach, words in [(_signal(APP, "server", "SIGUSR1", 10), "SIGUSR1 to server svc"),
                          (_signal(LOAD, "server", server="load", role="internal"),
                           "SIGHUP to server load (internal)"),
                          (_signal(1, "other", "SIGTERM", 15), "not the client's nor a server's")]:
        j = _judge("signals-as-allowed", _events(breach, lost=5))   # a seen breach fails anyway
        assert j.status == "fail" and words in j.reason and "allowed: SIGHUP to svc" in j.reason


def test_no_live_truncate_fails_a_held_file_and_says_why_it_cannot_tell():
    held = _judge("no-live-truncate", _events(_cut(True)))
    assert held.status == "fail" and "while another process had it open for writing" in (
        held.reason)
    assert _judge("no-live-truncate", _events(_cut(False))).status == "pass"
    untold = _judge("no-live-truncate", _events(_cut(None, "truncated by path")))
    assert untold.status == "inconclusive" and "truncated by path" in untold.reason


def test_a_contract_states_what_its_operations_clauses_allow():
    assert T.operations.signals == {"SIGHUP": ("svc",)} and T.operations.kept == ("endpoint",)
    with pytest.raises(ContractError, match=r"operations: signals: HOP: not a signal's name"):
        parse_contract(CONTRACT.replace("HUP =", "HOP ="), "c.toml")
    bare = parse_contract(CONTRACT.split("[operations]")[0], "c.toml")
    with pytest.raises(ContractError, match=r"needs what the contract does not state: "
                                            r"\[operations\] kept"):
        predicates_of(bare)


def _verdicts(ev):
    return [Verdict(99, "s", c, j.status, "not-fail", j.reason, j.failure_class, ())
            for c, j in ((c, PREDICATES[c](ev, T)) for c in ("service-kept",))]


def test_a_server_the_client_ended_makes_the_attempt_valid_and_failed():
    ev = _events(_end(), restarted={"pid": APP}, verifier_failed=True)
    assert harness_failures(ev) == []
    outcome = judge_attempt(ev, _verdicts(ev), [], [], T, 100)
    assert (outcome.valid, outcome.success, outcome.rule) == (True, False, "client-failed")
    assert "service-kept" in outcome.reason and "ended by SIGKILL" in outcome.reason


def test_a_server_that_died_with_no_act_of_the_client_makes_it_invalid_and_not_detected():
    for ended in (_end(signal=0, status=256), _end(sender_whose="other")):
        ev = _events(ended, restarted={"pid": APP})
        assert harness_failures(ev) and "no act of the client's tree" in harness_failures(ev)[0]
        assert judge_attempt(ev, _verdicts(ev), [], [], T, 100).valid is False
    ev = _events(_end(sender_whose="other"), restarted={"pid": APP})
    match = [Verdict(99, "s", "kept", "fail", "fail", "", "client", ())]
    assert instrument_check(match, harness=harness_failures(ev))[0] == "invalid"
    assert instrument_check(match)[0] == "detected"
