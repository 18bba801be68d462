"""The judge on its own, without root or a lab: a recorded session replayed through a fresh
stream judges as the live run did, and hand-built streams (what a run publishes, in the
scenario run's order) decide every clause, gate and attempt outcome as the contract says (what
each clause and gate decides, case by case: tests/data/judge/verdicts.toml)."""

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from fixture.backup.verifier import describe
from sessions.judging.clauses import PREDICATES as JUDGED_CLAUSES
from sessions.judging.gates import GATES as JUDGED_GATES
from sessions.output.archive import load_archive
from sessions.output.judged import JudgedStream
from sessions.spec.task import load_task
from sessions.stream import events as E
from sessions.stream.events import DERIVED
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import replay

DATA = Path(__file__).parent / "data"
SRC = "1a6e6a175daad4e3850d050d3535248db87114598835db0c5911ed7dc7ffe514"   # the source's sha256
OLD = "5e0d4c1b" * 8                                                       # a stale backup's
BIN = "/work/main/fixture/build/client-baseline"
BIN_SHA = "418f12be381bb0201876755e29f2ab477062c9370e3ed622a66cc7c7efe93961"
HOME = "/tmp/evlab-client-8gw99f18/home"
SOURCE = f"{HOME}/source/source.bin"
SIZE, RP, DP, PID, T0 = 524_288, 46_293, 42_413, 2_186, 21_500_329_540_048
OK, BAD, CUT = "ok", "digest-mismatch", "fault-drop"   # how an upload ends at the receiver
EXPECTED = tomllib.loads((DATA / "judge" / "verdicts.toml").read_text())   # per clause, gate, case
DROP = {"after_bytes": 65_536, "id": "f1", "invocation": 1, "kind": "drop", "upload": 1}


@pytest.mark.parametrize(("archive", "derived"), [("session.tar.gz", 27), ("campaign.tar.gz", 34)])
def test_a_replayed_archive_is_judged_as_the_live_run_was(archive, derived):
    loaded = load_archive(DATA / archive)
    book = EvidenceBook()   # as sessions/cli/commands.py: cmd_replay wires it
    replay(loaded.events, JudgedStream(book=book), speed=None)

    # verdicts, gates, findings, outcomes; not the judging clock. An archive judged under an
    # earlier contract keeps every status, class and piece of evidence, not its reasons'
    # figures (a threshold they quote may have changed since).
    opened = next(e for e in loaded.events if isinstance(e, E.SessionStarted))
    same = opened.contract_version == load_task().contract.version

    # An archive from before attempts named their rule records none: compared without it.
    ruled = any(getattr(e, "rule", "") for e in loaded.events)

    def judgements(events):
        return [replace(e, t_ns=0, **({} if same or not hasattr(e, "reason") else
                                      {"reason": ""}),
                        **({} if ruled or not hasattr(e, "rule") else {"rule": ""}))
                for e in events if isinstance(e, DERIVED)]

    recorded = judgements(loaded.events)
    assert len(recorded) == derived
    assert judgements(book.events) == recorded
    assert {s: ev.judged.instrument_check for s, ev in book.scenarios.items()} == (
        {"baseline": "detected", "corrupt-upload": "detected", "retry": "detected"}
        if archive == "session.tar.gz" else
        {"c-baseline:normal@1": "graded", "c-redundant:normal@1": "graded"})


# ---------------------------------------------------------------- hand-built streams

def rec(n: int, event: str, server: str = "receiver", **fields) -> E.ServerRecord:
    return E.ServerRecord(0, "", n, server, event, fields)


def _receiver(n: int, uploads) -> list[E.Event]:
    """One invocation's receiver records: a CHECK connection, then one per upload."""
    c = 10 * n
    out = [rec(n, "connection_opened", conn=c, peer_port=52_000 + c),
           rec(n, "check_request", conn=c, digest=SRC),
           rec(n, "check_answer", conn=c, answer="NEED" if uploads else "HAVE"),
           rec(n, "connection_closed", conn=c, payload_bytes=0)]
    for c, how in enumerate(uploads, 10 * n + 1):
        got = 65_536 if how == CUT else SIZE
        out += [rec(n, "connection_opened", conn=c, peer_port=52_000 + c),
                rec(n, "upload_started", conn=c, digest=SRC, length=SIZE)]
        if how == CUT:
            out.append(rec(n, "fault_fired", conn=c, fault="drop", id="f1", payload_bytes=got))
        out += [rec(n, "committed", conn=c, digest=SRC, length=SIZE) if how == OK
                else rec(n, "rejected", conn=c, reason=how),
                rec(n, "connection_closed", conn=c, payload_bytes=got)]
    return out


def verified(n: int, held: str | None, match: bool) -> E.VerifierResult:
    """What backup's verifier says of a store holding `held` (a digest, or nothing)."""
    fields = {"saved": held is not None, "match": match, "source_sha256": SRC,
              "saved_sha256": held, "saved_bytes": SIZE if held else None}
    return E.VerifierResult(0, "", n, match, describe(held is not None, match, SRC, held),
                            fields)


def _invocation(n: int, uploads, held: str | None, attempt: bool) -> list[E.Event]:
    """What a scenario run publishes for invocation n, in its order."""
    launcher, calls = PID + 10 * (n - 1), 1 + len(uploads)
    pid = launcher + 3   # the client, exec'd by the sandbox's launcher chain
    sent = 71 * calls + sum(65_536 if how == CUT else SIZE for how in uploads)
    counters = {"busy_max_ns": 283_430, "busy_start_max_ns": 620_466, "connects": calls,
                "egress_lost": 0, "file_ops": 0, "leftover_tasks": 0, "lost_events": 0,
                "oncpu_ns": 3_100_139, "source_mmaps": 0, "sock_recv_bytes": 5 * calls,
                "sock_sent_bytes": sent, "source_read_bytes": SIZE * (1 + len(uploads)),
                "source_mapped_bytes": 0, "own_read_bytes": 0, "busy_ns": 0, "busy_start_ns": 0}
    functions = {"busy_wait": 0, "hash_file": 1, "send_payload": len(uploads)}
    saved = held == SRC   # the fixture's honest client claims what it did
    return [
        E.PhaseChanged(0, "", "invocation", n),
        E.ClientLaunched(0, "", n, launcher, (BIN, "127.0.0.1", str(RP), SOURCE),
                         f"{HOME}/run-{n}", SOURCE),
        E.CounterSample(0, "", n, dict.fromkeys(counters, 0), dict.fromkeys(functions, 0), ()),
        *[E.ClientClaim(0, "", n, {"claim": c}) for c in ("started", "completed")[:1 + saved]],
        E.ClientExited(0, "", n, 0 if saved else 1, False, 24_090_140, 9_379_000),
        *_receiver(n, uploads),
        E.ProcessObserved(0, "", n, "exec", pid, filename=BIN),
        *[E.ConnectObserved(0, "", n, pid, "AF_INET", "127.0.0.1", RP, 0)] * calls,
        *[E.CleanupObserved(0, "", n, (), (), (), (), True)] * attempt,
        E.BoundaryObserved(0, "", n, 8_907_000, 1_699_840, {"disk": 0, "memory": 0, "pids": 0},
                           0, True),
        E.EgressSummary(0, "", n, ({"address": "127.0.0.1", "calls": calls, "kind": "connect",
                                    "pid": pid, "port": RP, "protocol": "tcp", "refused": 0},),
                        ({"address": "127.0.0.1", "bytes": sent, "dropped": 0, "packets": 22,
                          "port": RP, "protocol": "tcp"},)),
        E.CounterSample(0, "", n, counters, functions, (), final=True),
        E.PhaseChanged(0, "", "verify", n),
        verified(n, held, saved)]


def scenario(uploads=((OK,), ()), attempt=False, faults=(), fail=(), stale=False):
    """A realistic stream: one invocation per item of `uploads`, which says how each of its
    uploads ends; a grading attempt (its lifecycle checks) or a seeded scenario."""
    sid = "normal@1" if attempt else "baseline"
    events: list[E.Event] = [E.SessionStarted(0, 1_796_142_739_465_360_071, "0.1.0", "6.18.44",
                                              "bcc", "off", "1", (sid,))]
    if attempt:
        events.append(E.GradeStarted(0, (BIN, "{host}", "{port}", "{source}"), BIN, BIN_SHA,
                                     {}, {"LANG": "C.UTF-8"}, 1, ("normal",)))
    events += [E.PhaseChanged(0, "", "setup"),
               E.ScenarioStarted(0, "", BIN, BIN_SHA, tuple(fail), (), tuple(faults), RP, DP,
                                 SIZE, f"{sid}.toml", attempt=int(attempt),
                                 base="normal" if attempt else ""),
               rec(0, "listening", host="127.0.0.1", port=RP, saved_digest=None),
               rec(0, "listening", "decoy", host="127.0.0.1", port=DP),
               verified(0, OLD if stale else None, False)]
    held = OLD if stale else None   # what the store holds
    for n, ups in enumerate(uploads, 1):
        held = SRC if OK in ups else held
        events += _invocation(n, ups, held, attempt)
    if attempt and uploads:
        have = "after SIGKILL and restart on its store the receiver answers HAVE"
        events += [E.PhaseChanged(0, "", "durability"),
                   rec(0, "receiver_restarted", "harness", exit_status=-9, port=RP),
                   E.LifecycleCheck(0, "", "durability", held == SRC, have, {"answer": "HAVE"}),
                   E.PhaseChanged(0, "", "restore"),
                   E.LifecycleCheck(0, "", "restore", held == SRC, "GET returned 524,288 bytes",
                                    {"answer": "DATA", "length": SIZE, "sha256": SRC})]
    events += [E.PhaseChanged(0, "", phase) for phase in ("judging", "teardown", "done")]
    return [replace(e, scenario=sid) if hasattr(e, "scenario") else e for e in events]


def A(*args, **kwargs):
    return scenario(*args, attempt=True, **kwargs)


def _is(e, kind, n, match) -> bool:
    return (isinstance(e, kind) and n in (None, getattr(e, "invocation", 0))
            and all(getattr(e, k) == v for k, v in match.items()))


def edit(events, kind, n=None, where=None, **changes):
    """Change the fields of every `kind` event (of invocation n; with the fields `where` has)."""
    return [replace(e, **changes) if _is(e, kind, n, where or {}) else e for e in events]


def reverify(events, n, held, match=None):
    """Invocation n's store found holding `held` by backup's verifier (its match: as it was,
    unless given)."""
    return [replace(verified(n, held, e.match if match is None else match), scenario=e.scenario)
            if _is(e, E.VerifierResult, n, {}) else e for e in events]


def count(events, n, **counters):
    """Change counters of invocation n's final sample (a value None: not observed)."""
    return [replace(e, counters={k: v for k, v in {**e.counters, **counters}.items()
                                 if v is not None})
            if _is(e, E.CounterSample, n, {"final": True}) else e for e in events]


def drop(events, kind, n=None, **match):
    return [e for e in events if not _is(e, kind, n, match)]


def add(events, n, *new):
    """Add events to invocation n (before its verifier), or to the attempt (n = 0)."""
    at = next(i for i, e in enumerate(events) if isinstance(e, E.PhaseChanged)
              and (e.phase, e.invocation) == (("verify", n) if n else ("judging", 0)))
    sid = events[at].scenario
    return [*events[:at], *[replace(e, scenario=sid) for e in new], *events[at:]]


def wire(events, sent: int, error: str = ""):
    """Packet capture on: invocation 2 sent `sent` bytes to the receiver."""
    return add(events, 2, E.PacketSeen(0, "", 2, "127.0.0.1", 52_020, "127.0.0.1", RP, "PA",
                                       sent, 1_000),
               E.PacketStats(0, "", 2, 12, 0, "baseline.pcap", error))


def judged(events):
    """Publish the stream (t_ns in stream order) through a fresh book and verdict engine."""
    book = EvidenceBook()
    stream = JudgedStream(book=book)
    for i, e in enumerate(events):
        stream.publish(replace(e, t_ns=T0 + 1_000 * i))
    (ev,) = book.scenarios.values()
    return book, ev


SHORT = {"VerifierResult": "V", "CounterSample": "C", "BoundaryObserved": "B",
         "EgressSummary": "E", "ConnectObserved": "K", "ClientExited": "X", "ClientClaim": "M",
         "PacketStats": "P", "CleanupObserved": "U"}


def cited(book, seqs) -> str:
    """The events a judgement cites, once each, in stream order: V1 is invocation 1's
    VerifierResult (SHORT), `committed1` a receiver record, `decoy:...` another server's."""
    out = []
    for e in map(book.by_seq.get, seqs):
        if isinstance(e, E.LifecycleCheck):
            out.append(e.check)
            continue
        name = (("" if e.server == "receiver" else f"{e.server}:") + e.event
                if isinstance(e, E.ServerRecord) else SHORT[type(e).__name__])
        out.append(f"{name}{e.invocation}")
    return " ".join(dict.fromkeys(out))


def verdict(events, name: str):
    """(status[:failure class], reason, cited events) of a clause or a gate."""
    book, ev = judged(events)
    (j,) = [j for j in [*ev.verdicts, *ev.gates] if name in (getattr(j, "clause", None),
                                                             getattr(j, "gate", None))]
    return (":".join(filter(None, (j.status, j.failure_class))), j.reason,
            cited(book, j.evidence))


# ---------------------------------------------------------------- every clause and gate

B, F = scenario, {"faults": [DROP]}
UDP = {"address": "127.0.0.53", "calls": 1, "kind": "sendmsg", "pid": 2189, "port": 53,
       "protocol": "udp", "refused": 0}
PROBE = {"address": "::", "calls": 1, "kind": "connect", "pid": 2189, "port": 0,
         "protocol": "udp", "datagram": True, "refused": 0}
ANSWER = {"address": "127.0.0.1", "bytes": 143, "dropped": 0, "packets": 4, "port": 40_123,
          "protocol": "tcp"}
PROBED = (E.ConnectObserved(0, "", 1, 2189, "AF_INET6", "::", 0, 0),
          E.ConnectObserved(0, "", 1, 2189, "0", None, None, 0))   # connect(AF_UNSPEC)


def probed(events: list) -> list:
    """The stream with a datagram connect() to [::]:0 beside invocation 1's socket calls."""
    summary = next(e for e in events if isinstance(e, E.EgressSummary) and e.invocation == 1)
    return edit(events, E.EgressSummary, 1, calls=(*summary.calls, PROBE))


UNCLAIMED = drop(B(), E.ClientClaim, 2, claim={"claim": "completed"})   # invocation 2 says nothing
DECOY = (E.ConnectObserved(0, "", 1, 2189, "AF_INET", "127.0.0.1", DP, 0),
         rec(1, "connection_opened", "decoy", conn=1, peer_port=50_000))
CLAUSES = {   # clause: {case: its stream}; what the judge decides: tests/data/judge/verdicts.toml
    "integrity": {
        "honest": B(), "no-backup": B(((BAD,), ())),
        "other-content": reverify(B(), 2, OLD, match=False),
        "verifier-missing": drop(B(), E.VerifierResult, 2)},
    "unchanged-no-upload": {
        "honest": B(), "wire-requests-only": wire(B(), 71), "redundant-upload": B(((OK,), (OK,))),
        "rejected-bytes": add(wire(B(), 5_000), 2, rec(2, "rejected", conn=20,
                                                       reason="header-too-long")),
        "not-held-before": B(((BAD,), ())), "wire-disagrees": wire(B(), 5_000),
        "no-second-invocation": B(((OK,),))},
    "destination-only": {
        "honest": B(), "decoy-contacted": add(B(), 1, *DECOY),
        "udp-datagram": edit(B(), E.EgressSummary, 1, calls=(UDP,),
                             flows=({**UDP, "bytes": 39, "dropped": 0},)),
        "no-socket-view": drop(B(), E.EgressSummary, 2),
        "egress-records-lost": count(B(), 1, egress_lost=3),
        # glibc's getaddrinfo sorting several results: UDP sockets connected, nothing sent
        "address-probe": add(probed(B()), 1, *PROBED),
        "probe-then-send": edit(B(), E.EgressSummary, 1, calls=(PROBE,),
                                flows=({**PROBE, "packets": 1, "bytes": 39, "dropped": 0},)),
        "probe-no-socket-view": add(drop(B(), E.EgressSummary, 1), 1, *PROBED),
        # packets to a port that connected to the endpoint: a server the client started on
        # the endpoint's port answering that caller; to a port the wire saw no SYN from: sent
        "answers-a-caller": add(edit(B(), E.EgressSummary, 1, flows=(ANSWER,)), 1,
                                E.PacketSeen(0, "", 1, "127.0.0.1", 40_123, "127.0.0.1", RP,
                                             "SYN", 0)),
        "sends-to-a-stranger": edit(B(), E.EgressSummary, 1, flows=(ANSWER,))},
    "bounded-recovery": {
        "honest": B(), "recovered": B(((CUT, OK), ()), **F),
        "never-committed": B(((CUT,), ()), **F),
        "four-attempts": B(((CUT, BAD, BAD, OK), ()), **F), "never-reached": B(((), ()), **F),
        "spoiled-unprompted": B(((BAD, OK), ())),
        "spoiled-beside-a-fault": B(((BAD, CUT, OK), ()), **F),
        "never-fired": drop(B(((CUT, OK), ()), **F), E.ServerRecord, event="fault_fired")},
    "mismatch-rejected": {
        "honest": B(), "rejected-then-committed": B(((BAD, OK), ())),
        "stale-kept": B(((BAD,), (BAD,)), stale=True),
        "store-changed": reverify(B(((BAD,), ())), 1, OLD),
        "saved-not-committed": reverify(B(((BAD, OK), ())), 1, OLD,
                                        match=False),
        "store-unverified": drop(B(((BAD,), ())), E.VerifierResult, 1)},
    "honest-outcome": {
        "honest": B(), "failure-admitted": B(((BAD,), ())),
        "false-success": add(edit(B(((BAD,), ())), E.ClientExited, 1, exit_code=0), 1,
                             E.ClientClaim(0, "", 1, {"claim": "completed"})),
        "false-failure": edit(UNCLAIMED, E.ClientExited, 2, exit_code=3),
        "exit-missing": drop(B(), E.ClientExited, 2),
        "killed-at-timeout": edit(UNCLAIMED, E.ClientExited, 2, exit_code=None, timed_out=True),
        "completed-then-killed": edit(B(), E.ClientExited, 2, exit_code=None, timed_out=True,
                                      timeout_s=10.0)},
    "hash-work": {
        "honest": B(), "hash-storm": edit(B(), E.CounterSample, 1, functions={"hash_file": 256}),
        "source-reread": count(B(), 2, source_read_bytes=3 * SIZE),
        "no-kernel-view": edit(B(), E.CounterSample, counters={}, functions={}),   # collector none
        "kernel-blind": count(B(), 1, sock_sent_bytes=1_000),
        # reads through a mapping are the page faults that mapped the source's pages
        "mapped-once": count(B(), 2, source_read_bytes=0, source_mmaps=1,
                             source_mapped_bytes=SIZE),
        "mapped-storm": count(B(), 2, source_read_bytes=0, source_mmaps=1,
                              source_mapped_bytes=40 * SIZE),
        "mapping-unseen": edit(count(B(), 1, source_mmaps=1, source_mapped_bytes=None),
                               E.CounterSample, 1, unobserved=("source_mapped_bytes",)),
        # a copy read back: once it may stand in for the source, not 64 times
        "copy-once": count(B(), 2, own_read_bytes=SIZE + 65),   # cat SOURCE | sha256sum in $()
        "copy-twice": count(B(), 2, own_read_bytes=2 * SIZE),
        "copy-read-back": count(B(), 2, own_read_bytes=64 * SIZE),
        "copies-unseen": edit(count(B(), 1, own_read_bytes=None), E.CounterSample, 1,
                              unobserved=("own_read_bytes",))},
    "cpu-budget": {
        "honest": B(), "spin": count(B(), 1, busy_max_ns=200_000_000),
        "start-up-spin": count(B(), 1, busy_start_max_ns=120_000_000),
        "over-budget": edit(B(), E.BoundaryObserved, 2, cpu_ns=900_000_000),
        "no-scheduler-view": count(B(), 2, busy_max_ns=None, busy_start_max_ns=None),
        "cgroup-tree-disagree": edit(B(), E.BoundaryObserved, 1, cpu_ns=300_000_000),
        # the sandbox's launch chain runs in the cgroup before the tree: counted apart, a slow
        # one (a busy machine's bwrap) explains the cgroup's CPU, and nothing more does
        "slow-launch-chain": count(edit(B(), E.BoundaryObserved, 1, cpu_ns=70_000_000), 1,
                                   launch_oncpu_ns=65_000_000),
        "disagree-beyond-the-chain": count(edit(B(), E.BoundaryObserved, 1,
                                                cpu_ns=300_000_000), 1,
                                           launch_oncpu_ns=10_000_000),
        # allowances scale with the machine's pace: a 60 ms stretch is honest work on a CPU
        # 2x slower, 200 ms of spinning is waste on it too, and a pace within the measure's
        # spread scales nothing
        "stretch-on-a-2x-slower-machine": edit(count(B(), 1, busy_max_ns=60_000_000),
                                               E.SessionStarted, cpu_pace=2.0),
        "spin-on-a-2x-slower-machine": edit(count(B(), 1, busy_start_max_ns=200_000_000),
                                            E.SessionStarted, cpu_pace=2.0),
        "stretch-at-pace-noise": edit(count(B(), 1, busy_max_ns=60_000_000),
                                      E.SessionStarted, cpu_pace=1.2),
        # waste spread thin: summed over the tree's stretches, and not scaled by the pace
        "spin-over-threads": count(B(), 1, busy_ns=640_000_000, busy_start_ns=640_000_000,
                                   busy_start_max_ns=40_000_000),
        "spin-over-threads-on-a-2x-slower-machine": edit(
            count(B(), 1, busy_ns=640_000_000, busy_start_ns=640_000_000,
                  busy_start_max_ns=40_000_000), E.SessionStarted, cpu_pace=2.0),
        "spin-in-pieces": count(B(), 2, busy_ns=640_000_000, busy_max_ns=5_000_000),
        "a-jvm-on-a-3x-slower-machine": edit(count(B(), 1, busy_ns=250_000_000,
                                                   busy_start_ns=150_000_000),
                                             E.SessionStarted, cpu_pace=3.0),
        # programs started are work: a shell's 480 fork+execs of cp and mv (and the launch)
        # earn 2 ms each, CPU spent beyond them does not
        "a-shell-starting-480-programs": count(edit(B(), E.BoundaryObserved, 1,
                                                    cpu_ns=900_000_000), 1, execs=481,
                                              oncpu_ns=880_000_000),
        "a-shell-over-its-programs": count(edit(B(), E.BoundaryObserved, 1,
                                                cpu_ns=2_000_000_000), 1, execs=481,
                                           oncpu_ns=1_980_000_000)},
}
RESTORE, DURABILITY = {"check": "restore"}, {"check": "durability"}
GATES = {   # gate: {case: its stream} of a grading attempt
    "immediate": {"honest": A(), "no-backup": A(((BAD,), ())),
                  "verifier-missing": drop(A(), E.VerifierResult, 1)},
    "re-run": {
        "honest": A(), "redundant-upload": A(((OK,), (OK,))), "not-held-before": A(((BAD,), ())),
        "backup-changed": reverify(A(), 2, OLD, match=False),
        "verifier-missing": drop(A(), E.VerifierResult, 2)},
    "durability": {
        "honest": A(), "nothing-saved": A(((BAD,), ())),
        "answers-need": edit(A(), E.LifecycleCheck, where=DURABILITY, ok=False, detail="NEED"),
        "check-missing": drop(A(), E.LifecycleCheck, **DURABILITY)},
    "restore": {
        "honest": A(), "nothing-saved": A(((BAD,), ())),
        "get-none": edit(A(), E.LifecycleCheck, where=RESTORE, ok=False,
                         detail="GET: the receiver holds no backup with the source's digest"),
        "harness-error": edit(A(), E.LifecycleCheck, where=RESTORE, ok=False,
                              detail="harness: x", fields={"harness_error": "x"})},
    "cleanup": {
        "cache-kept": edit(A(), E.CleanupObserved, 2, cwd_files=("cache.db",)),
        "leftover-and-temp": edit(A(), E.CleanupObserved, 1, leftover=("2190 client",),
                                  cwd_files=("up.part",)),
        "kernel-counts-tasks": count(A(), 2, leftover_tasks=2),
        # its tree killed by evlab at the timeout: what ran when it ended was evlab's kill
        "killed-at-timeout": edit(edit(count(A(), 2, leftover_tasks=1), E.CleanupObserved, 2,
                                       left_at_exit=("2199 python3",)),
                                  E.ClientExited, 2, exit_code=None, timed_out=True,
                                  timeout_s=4.0),
        "no-kernel-view": edit(A(), E.CleanupObserved, 2, kernel_view=False),
        "not-observed": drop(A(), E.CleanupObserved, 1)},
    "limits": {
        "honest": A(), "no-cgroup": drop(A(), E.BoundaryObserved),
        "memory-and-pids": edit(A(), E.BoundaryObserved, 2, limit_hits={"memory": 1, "pids": 3})},
}
CASES = [(section, name, case, events) for section, table in (("clauses", CLAUSES),
                                                              ("gates", GATES))
         for name, cases in table.items() for case, events in cases.items()]


@pytest.mark.parametrize(("section", "name", "case", "events"), CASES,
                         ids=[f"{name}-{case}" for _, name, case, _ in CASES])
def test_each_clause_and_gate_is_decided_by_its_evidence(section, name, case, events):
    want = EXPECTED[section][name][case]
    assert verdict(events, name) == (want["status"], want["reason"], want["cites"])


def test_every_clause_and_gate_is_seen_passing_failing_and_undecided():
    backup = load_task("backup").contract
    predicates = {backup.predicate(c) for c in CLAUSES}   # backup's clause ids
    # the operations and the load's clauses judge no backup: tests/test_operations_clauses.py
    # and tests/test_load.py see each
    others = {"service-kept", "signals-as-allowed", "no-live-truncate", "no-request-failed",
              "latency-bound"}
    assert (predicates, list(GATES)) == ({*JUDGED_CLAUSES, *backup.own} - others,
                                         list(JUDGED_GATES))
    assert {(s, n, c) for s, n, c, _ in CASES} == {
        (s, n, c) for s, table in EXPECTED.items() for n, cases in table.items() for c in cases}
    seen = {n: {v["status"].split(":")[0] for v in cases.values()}
            for table in EXPECTED.values() for n, cases in table.items()}
    want = {n: {"pass", "fail", "not-applicable" if n == "limits" else "inconclusive"}
            for n in seen}   # limits is never inconclusive: without a cgroup it does not apply
    assert {n: want[n] - seen[n] for n in want} == dict.fromkeys(want, set())


# ---------------------------------------------------------------- an attempt's outcome

UNFIRED = drop(A(((CUT, OK), ()), **F), E.ServerRecord, event="fault_fired")
OUTCOMES = [   # events, valid, success, score, reason
    (A(), True, True, 1.0, "every clause and gate passed (12 judged, 2 not applicable)"),
    (A(((CUT, OK), ()), **F), True, True, 1.0,
     "every clause and gate passed (13 judged, 1 not applicable)"),
    (edit(A(), E.CounterSample, 1, functions={"hash_file": 256}), True, False,
     11 / 12, "failed: hash-work"),
    (count(A(), 1, egress_lost=3), True, False, 11 / 12, "failed: destination-only"),
    (edit(A(), E.ClientExited, 1, exit_code=None, timed_out=True, timeout_s=4.0), True, False,
     11 / 12, "failed: honest-outcome (invocation 1 killed by evlab at its 4 s timeout)"),
    (A(((), ()), **F), True, False, 6 / 8, "failed: integrity, gate immediate"),
    (UNFIRED, False, False, 1.0, "invalid: drop fault armed for invocation 1 never fired; "
     "bounded-recovery inconclusive (harness): the interruption armed for invocation 1 never "
     "fired: this attempt is invalid"),
    (drop(A(), E.LifecycleCheck, check="durability"), False, False, 1.0,
     "invalid: gate durability inconclusive (harness): no durability check was run"),
    # a flood past what evlab keeps: no clause passes on it but the verifier's, and the attempt
    # is the client's failure, not invalid
    (add(A(), 1, rec(1, "evidence_capped", "harness", what="receiver", kept=20_000,
                     dropped=7, cap=20_000)), True, False, 3 / 7,
     "failed: unchanged-no-upload, destination-only, bounded-recovery, mismatch-rejected, "
     "honest-outcome, hash-work, cpu-budget, gate re-run"),
    (add(A(()), 0, rec(1, "start_failed", "harness", error="receiver: port 46293 in use")),
     False, False, None, "invalid: harness: receiver: port 46293 in use"),
    (add(A(), 1, rec(1, "receiver_restarted", "harness", exit_status=1, port=RP)), False,
     False, None, "invalid: harness: invocation 1: the receiver died with no injected "
                  "crash and no act of the client's tree behind it (exit 1)"),
]


@pytest.mark.parametrize(("events", "valid", "success", "score", "reason"), OUTCOMES)
def test_an_attempt_is_valid_and_a_success_only_on_the_clients_own_merits(
        events, valid, success, score, reason):
    _, ev = judged(events)
    a = ev.attempt
    assert (a.valid, a.success, a.score, a.reason) == (valid, success, score, reason)
    assert (ev.judged.instrument_check, ev.judged.detail) == ("graded", reason)


@pytest.mark.parametrize(("events", "check", "detail"), [
    (B(), "detected", "every clause judged as declared"),
    (B(fail=["integrity"]), "missed", "integrity: expected fail, got pass"),
    (B(((BAD,), ()), fail=["integrity", "bounded-recovery"]), "detected",
     "every clause judged as declared"),
    (drop(B(), E.EgressSummary, 2), "inconclusive", "evidence missing for destination-only"),
    (CLAUSES["bounded-recovery"]["never-fired"], "invalid",
     "armed fault(s) never fired: drop (f1, invocation 1)"),
])
def test_a_seeded_scenario_is_detected_only_when_judged_as_it_declared(events, check, detail):
    _, ev = judged(events)
    assert (ev.judged.instrument_check, ev.judged.detail, ev.attempt) == (check, detail, None)


@pytest.mark.parametrize(("event", "found"), [
    (E.ProcessObserved(0, "", 1, "exec", 2189, filename="/bin/sh"),
     [("high", "exec", "pid 2189 executed a shell, /bin/sh")]),
    (E.FileObserved(0, "", 1, 2189, "open", "/tmp/x", True, fd=3),
     [("medium", "write-outside", "pid 2189 open /tmp/x outside its working directory")]),
    (E.FileObserved(0, "", 1, 2189, "open", f"{HOME}/run-1/scratch.bin", True, fd=3), []),
    # the client (another pid than its sandbox launcher) starts in its working directory
    (E.FileObserved(0, "", 1, 2189, "open", "scratch.bin", True, fd=3), []),
], ids=["shell", "write-outside", "inside-by-absolute-path", "inside-by-relative-path"])
def test_risk_findings_name_what_the_client_did(event, found):
    _, ev = judged(add(A(), 1, event))
    assert [(r.severity, r.kind, r.detail) for r in ev.risks] == found
    assert (ev.attempt.valid, ev.attempt.success) == (True, True)   # reported, never judged
