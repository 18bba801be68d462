"""The judging layer on hand-made evidence: what it decides when a piece of evidence is missing
or malformed (it says inconclusive, or refuses the event, and never crashes)."""

import pytest

from fixture.backup.predicates import mismatch_rejected
from sessions.spec.task import load_task
from sessions.stream.codec import EventFormatError, from_dict
from sessions.stream.events import ScenarioStarted, ServerRecord, VerifierResult
from sessions.stream.evidence import EvidenceBook

SOURCE = "a" * 64


def _book(*events) -> EvidenceBook:
    started = ScenarioStarted(1, "s", "/bin/client", "0" * 64, (), (), (), 4000, 4001, 524288,
                              "s.toml")
    return EvidenceBook.of([started, *events])


def test_rejections_then_an_unverified_store_are_inconclusive_not_a_crash():
    book = _book(
        VerifierResult(2, "s", 0, False, fields={"source_sha256": SOURCE}, seq=2),
        ServerRecord(3, "s", 1, "receiver", "rejected", {"reason": "digest-mismatch"}, seq=3),
        VerifierResult(4, "s", 1, False, fields={"source_sha256": SOURCE}, seq=4),
        ServerRecord(5, "s", 2, "receiver", "connection_opened", {}, seq=5))  # no verifier
    j = mismatch_rejected(book.scenarios["s"], load_task().contract.thresholds)
    assert (j.status, j.failure_class) == ("inconclusive", "harness")
    assert "not verified after the last invocation" in j.reason


@pytest.mark.parametrize("kind", [[], {}, 3, None, True])
def test_an_event_whose_type_is_not_a_name_is_refused_in_one_line(kind):
    with pytest.raises(EventFormatError, match="unknown event type"):
        from_dict({"type": kind, "t_ns": 1})



def _cpu_budget(upper_ms: float):
    from sessions.judging.clauses.work import cpu_budget
    from sessions.stream.events import BoundaryObserved, ClientLaunched, CounterSample
    counters = {"oncpu_ns": 30_000_000, "busy_max_ns": int(upper_ms * 1e6),
                "busy_start_max_ns": 1_000_000, "source_read_bytes": 524288,
                "sock_sent_bytes": 524300, "sock_recv_bytes": 80}
    book = _book(
        ClientLaunched(2, "s", 1, 99, ("/bin/client",), "/tmp", "/tmp/source.bin", seq=2),
        CounterSample(3, "s", 1, counters, {}, (), final=True, seq=3),
        BoundaryObserved(4, "s", 1, 35_000_000, None, {}, 0, True, seq=4))
    return cpu_budget(book.scenarios["s"], load_task().contract.thresholds)


def test_a_stretch_over_its_allowance_fails_and_one_within_it_passes():
    spin = _cpu_budget(upper_ms=200)
    assert spin.status == "fail" and "ran 200.0 ms on the CPU" in spin.reason
    assert _cpu_budget(upper_ms=6).status == "pass"


def test_a_contract_states_what_it_needs_and_an_archived_one_reads_as_it_was_judged():
    from sessions.judging.clauses import predicates_of
    from sessions.spec.contract import ContractError, parse_contract
    text = ('[clauses.cpu-budget]\nholds_when = "no busy-waiting"\ndecided_by = "the kernel"\n'
            '[clauses.unchanged-no-upload]\nholds_when = "no upload"\ndecided_by = "records"\n')
    today = parse_contract(text, "c.toml")
    assert (today.thresholds.stated, today.thresholds.names.transfer) == (frozenset(),
                                                                          "transfer")
    with pytest.raises(ContractError, match="clauses.cpu-budget: its predicate 'cpu-budget' "
                                            "needs thresholds the contract does not state"):
        predicates_of(parse_contract(text.split("[clauses.unchanged")[0], "c.toml"))
    # an archive's copy from before contracts stated them: what evlab gave it then (backup's)
    then = parse_contract(text, "tasks/x/contract.toml", archived=True)
    t = then.thresholds
    assert (t.cpu_waste_ns, t.request_overhead_bytes, t.names.transfer, t.names.input) == (
        320_000_000, 512, "upload", "source")
    assert then.predicate("unchanged-no-upload") == "unchanged-no-transfer"
