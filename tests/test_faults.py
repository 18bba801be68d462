"""Faults: each one's effect is proven from the receiver's record, the wire or the store — not
from the injector's say-so; an unfired fault makes the attempt invalid; a crash at any commit
phase never leaves a torn backup."""

import json
import subprocess
import tempfile
import time

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture.backup.receiver_faults import FaultBook, checked
from fixture.backup.verifier import verify
from sessions.judging.fault_chance import could_fire
from sessions.lab.noise import HELPER
from sessions.lab.proxy.rules import FaultError as ProxyFaultError
from sessions.lab.proxy.rules import parse_fault
from sessions.lab.schedule import run_session
from sessions.lab.session import Options
from sessions.lab.spawner import Spawner
from sessions.output.archive import load_archive
from sessions.output.judged import JudgedStream
from sessions.spec import fault_kinds as rules
from sessions.spec.scenario import load_dir, load_suite
from sessions.spec.scenario_faults import PHASES, FaultSpecError, parse_faults
from sessions.spec.task import load_task
from sessions.stream.events import ScenarioJudged, ServerRecord, Verdict
from sessions.stream.evidence import InvocationEvidence
from tests.backup_lab import backup_path, client_path, start_receiver

root_only = pytest.mark.root(reason="the BCC collector needs root")


@pytest.fixture(scope="module")
def fault_suite(built_clients, tmp_path_factory):
    events = []
    run_session(JudgedStream(events.append), load_suite("faults"),
                tmp_path_factory.mktemp("faults"), Options())
    return events


def records(events, scenario, server="receiver", name=None):
    return [e for e in events if isinstance(e, ServerRecord) and e.scenario == scenario
            and e.server == server and (name is None or e.event == name)]


def connection(events, scenario, conn_opened_before):
    """The receiver's records of one connection, by its conn number."""
    return [r for r in records(events, scenario) if r.fields.get("conn") == conn_opened_before]


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_every_fault_scenario_is_judged_as_declared(fault_suite):
    judged = {e.scenario: e for e in fault_suite if isinstance(e, ScenarioJudged)}
    assert set(judged) == {s.id for s in load_suite("faults")}
    assert all(j.instrument_check == "detected" for j in judged.values()), judged
    recovery = {e.scenario: e.status for e in fault_suite
                if isinstance(e, Verdict) and e.clause == "bounded-recovery"}
    for sid in ("interrupt-first-byte", "interrupt-half", "interrupt-last-byte",
                "crash-before-rename", "disk-full", "wire-corruption", "wire-reset", "timed-drop",
                "receiver-reject"):
        assert recovery[sid] == "pass", sid
    # every fault is healed: no proxy or (restarted) receiver of this process's runs is left
    ours = f"{tempfile.gettempdir()}/evlab-session-"
    assert [p for p in psutil.process_iter(["cmdline"])
            if ours in " ".join(p.info["cmdline"] or [])] == []


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_wire_faults_are_proven_on_the_far_side(fault_suite):
    # corruption: the receiver itself saw a payload whose digest did not match, then a commit
    rejected = records(fault_suite, "wire-corruption", name="rejected")
    assert [r.fields["reason"] for r in rejected] == ["digest-mismatch"]
    assert len(records(fault_suite, "wire-corruption", name="committed")) == 1
    # reset: the receiver lost the connection with exactly the bytes before the reset point
    lost = [r for r in records(fault_suite, "wire-reset", name="rejected")
            if r.fields["reason"] == "disconnected-mid-upload"]
    conn = lost[0].fields["conn"]
    closed = next(r for r in records(fault_suite, "wire-reset", name="connection_closed")
                  if r.fields["conn"] == conn)
    header = len(f"PUT {'0' * 64} 524288\n")
    assert closed.fields["payload_bytes"] == 100_000 - header
    # latency and bandwidth: the upload took at least 0.5 s at 1 MB/s, yet finished in time
    started = records(fault_suite, "slow-wire", name="upload_started")[0]
    committed = records(fault_suite, "slow-wire", name="committed")[0]
    assert (committed.t_ns - started.t_ns) / 1e9 >= 0.45


@pytest.mark.slow
@pytest.mark.live
@root_only
@pytest.mark.parametrize("sid, cut", [("interrupt-first-byte", 1), ("interrupt-half", 262_144),
                                      ("interrupt-last-byte", 524_287)])
def test_a_drop_cuts_exactly_where_declared(fault_suite, sid, cut):
    fired = records(fault_suite, sid, name="fault_fired")
    assert len(fired) == 1
    conn = fired[0].fields["conn"]
    closed = [r for r in records(fault_suite, sid, name="connection_closed")
              if r.fields["conn"] == conn]
    assert closed[0].fields["payload_bytes"] == cut  # what the receiver really consumed
    commits = records(fault_suite, sid, name="committed")
    assert len(commits) == 1 and commits[0].t_ns > fired[0].t_ns


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_crash_kills_the_receiver_and_the_client_recovers(fault_suite):
    restarted = records(fault_suite, "crash-before-rename", server="harness",
                        name="receiver_restarted")
    assert [r.fields["exit_status"] for r in restarted] == [-9]  # SIGKILL, seen by the runner
    assert len(records(fault_suite, "crash-before-rename", name="committed")) == 1
    assert records(fault_suite, "crash-before-rename", name="stale_temp_removed")


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_stall_holds_the_upload(fault_suite):
    opened = {r.fields["conn"]: r.t_ns for r in records(fault_suite, "receiver-stall",
                                                         name="upload_started")}
    closed = {r.fields["conn"]: r.t_ns for r in records(fault_suite, "receiver-stall",
                                                         name="committed")}
    (conn,) = closed
    assert (closed[conn] - opened[conn]) / 1e9 >= 1.0  # the receiver stopped reading for 1 s


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_disk_full_rejects_without_commit(fault_suite):
    rejected = records(fault_suite, "disk-full", name="rejected")
    assert [r.fields["reason"] for r in rejected] == ["disk-full"]
    assert len(records(fault_suite, "disk-full", name="committed")) == 1  # the retry


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_fault_that_cannot_fire_makes_the_attempt_invalid(fault_suite):
    assert records(fault_suite, "fault-cannot-fire", name="fault_fired") == []
    judged = next(e for e in fault_suite if isinstance(e, ScenarioJudged)
                  and e.scenario == "fault-cannot-fire")
    assert judged.instrument_check == "detected" and "invalid as declared" in judged.detail


@pytest.mark.live
@pytest.mark.parametrize("phase", PHASES)
def test_a_crash_at_any_commit_phase_leaves_old_or_new_never_torn(phase, built_clients,
                                                                   source_file, tmp_path):
    store, faults = tmp_path / "store", tmp_path / "faults.json"
    store.mkdir()
    old = source_file.read_bytes()[::-1]
    backup_path(store).write_bytes(old)  # an older, complete backup
    faults.write_text(json.dumps([{"id": "c", "kind": "crash", "phase": phase}]))
    # as the lab does, the port stays listening while the receiver is down (the spawner holds
    # it): the client's retries, 0.2 and 0.6 s after the crash, wait in its backlog for the
    # restarted receiver however long this machine takes to start it
    spawner, key = Spawner.start(), str(tmp_path)
    client = None
    try:
        rx = start_receiver(store, tmp_path / "rx.jsonl", fault_file=faults, spawner=spawner,
                            listen_key=key)
        port = rx.port
        client = subprocess.Popen([str(client_path("baseline")), "127.0.0.1", str(port),
                                   str(source_file)], stdout=subprocess.DEVNULL)
        assert rx.process.wait(timeout=30) == -9  # the injected SIGKILL
        after_crash = backup_path(store).read_bytes()
        # Old before the rename, new after it: whole either way.
        assert after_crash == (source_file.read_bytes() if phase == "after-rename" else old)
        rx = start_receiver(store, tmp_path / "rx.jsonl", fault_file=faults, port=port,
                            spawner=spawner, listen_key=key)
        assert client.wait(timeout=30) == 0  # it recovered on the restarted receiver
        assert verify(store, source_file)["match"]
        assert not list(store.glob(".upload-*"))  # the crash's temp file was cleaned up
        rx.stop()
    finally:
        if client is not None:
            client.kill()
            client.wait()
        spawner.close()


def _matrix(events) -> dict:
    return {(e.scenario, e.clause): e.status for e in events if isinstance(e, Verdict)}


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_noise_leaves_the_verdict_matrix_unchanged(built_clients, tmp_path, seeded_run):
    """The seeded suite judged the same with ambient noise on as with it off (the quiet run:
    its events as archived by conftest.py's seeded_run, once per worker). The noise is files,
    twins and traffic; CPU load beside the lab is make bench's soak (a hog per core beside
    repeated grades), and the CPU spinners' own work is tests/test_noise.py's."""
    _, out = seeded_run
    runs = {"quiet": list(load_archive(out / "s.tar.gz").events)}
    events: list = []
    run_session(JudgedStream(events.append), load_dir(), tmp_path / "noisy",
                Options(noise=("traffic", "twin", "churn")))
    runs["noisy"] = events
    noisy_started = [e for e in runs["noisy"] if type(e).__name__ == "ScenarioStarted"]
    assert all(set(e.noise) == {"traffic", "twin", "churn"} for e in noisy_started)
    assert len(_matrix(runs["quiet"])) == 64
    assert _matrix(runs["noisy"]) == _matrix(runs["quiet"])
    assert all(e.instrument_check == "detected" for e in runs["noisy"]
               if isinstance(e, ScenarioJudged))
    time.sleep(0.5)  # noise helpers and twins are gone with their scenarios
    # the helpers (HELPER) and twins of this process's sessions (in its temp directory)
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if tempfile.gettempdir() in (line := " ".join(p.info["cmdline"] or []))
                 and any(name in line for name in (HELPER, "/noise/twin/"))]
    assert leftovers == []


@pytest.mark.live
def test_an_injected_rejection_refuses_a_correct_payload(built_clients, source_file, tmp_path):
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps([{"id": "r", "kind": "reject"}]))
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl", fault_file=faults) as rx:
        code = subprocess.run([str(client_path("baseline")), "127.0.0.1", str(rx.port),
                               str(source_file)], stdout=subprocess.DEVNULL, timeout=30).returncode
        events = rx.events()
    reasons = [e["reason"] for e in events if e["event"] == "rejected"]
    assert reasons == ["fault-reject"]  # the first, correct upload refused once ...
    assert [e["event"] for e in events].count("committed") == 1  # ... the retry committed
    assert code == 0 and verify(tmp_path / "store", source_file)["match"]
    assert (tmp_path / "faults.json.fired").read_text().split() == ["r"]


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_time_triggered_fault_fires_on_time(fault_suite):
    started = records(fault_suite, "timed-drop", name="upload_started")[0]
    fired = records(fault_suite, "timed-drop", name="fault_fired")
    assert len(fired) == 1
    assert 0.2 <= (fired[0].t_ns - started.t_ns) / 1e9 < 2.0  # 200 ms into the upload
    assert 0 < fired[0].fields["payload_bytes"] < 524_288  # mid-payload, on a 1 MB/s uplink
    proxy_fired = records(fault_suite, "timed-drop", server="proxy", name="fault_fired")
    assert {r.fields["kind"] for r in proxy_fired} == {"bandwidth"}


# --- did an unfired fault have its chance? (sessions.judging.fault_chance) ----------------------

def _inv(uploads=(), proxy_closed=()):
    """An invocation's receiver and proxy records: uploads are (length, consumed, rejection)."""
    inv, t = InvocationEvidence(1), 0
    for conn, (length, consumed, reason) in enumerate(uploads, 1):
        t += 10
        inv.endpoint.append(ServerRecord(t, "s", 1, "receiver", "upload_started",
                                         {"conn": conn, "length": length}))
        if reason:
            inv.endpoint.append(ServerRecord(t + 5, "s", 1, "receiver", "rejected",
                                             {"conn": conn, "reason": reason}))
        inv.endpoint.append(ServerRecord(t + 6, "s", 1, "receiver", "connection_closed",
                                         {"conn": conn, "payload_bytes": consumed}))
    for up, down in proxy_closed:
        inv.proxy.append(ServerRecord(t, "s", 1, "proxy", "connection_closed",
                                      {"bytes_up": up, "bytes_down": down}))
    return inv


SIZE = 524_288
BACKUP = load_task("backup").contract.thresholds   # its receiver's names, its reach


@pytest.mark.parametrize("fault, inv, chance", [
    # byte offsets count within the fault's own upload, not summed over the invocation
    ({"kind": "drop", "after_bytes": 65536}, _inv([(SIZE, 40_000, "")] * 3), False),
    ({"kind": "drop", "after_bytes": 65536}, _inv([(SIZE, 70_000, "")]), True),
    ({"kind": "drop", "after_bytes": 65536, "transfer": 2}, _inv([(SIZE, SIZE, "")]), False),
    ({"kind": "drop", "after_bytes": SIZE + 1}, None, True),       # no client could trigger it
    ({"kind": "drop", "after_bytes": SIZE}, None, False),          # the last byte can
    ({"kind": "reject"}, _inv([(SIZE, 1_000, "")]), False),        # never complete
    ({"kind": "reject"}, _inv([(SIZE, SIZE, "")]), True),
    ({"kind": "crash", "phase": "after-write"}, _inv([(SIZE, SIZE, "digest-mismatch")]), False),
    ({"kind": "crash", "phase": "after-write"}, _inv([(SIZE, SIZE, "")]), True),
    ({"kind": "corrupt", "direction": "up", "at_byte": 1000}, _inv(proxy_closed=[(900, 5)]),
     False),
    ({"kind": "corrupt", "direction": "up", "at_byte": 1000}, _inv(proxy_closed=[(1200, 5)]),
     True),
    ({"kind": "latency", "direction": "down", "ms": 50}, _inv(proxy_closed=[(71, 0)]), False),
    ({"kind": "bandwidth", "direction": "up", "bytes_per_s": 100_000},
     _inv(proxy_closed=[(4_000, 5)]), False),                       # within the 5,000-byte burst
])
def test_could_fire_asks_whether_this_fault_had_its_chance(fault, inv, chance):
    assert could_fire({"invocation": 1, **fault}, inv, SIZE, BACKUP) is chance


# --- one vocabulary: what a scenario may declare, the proxy and the receiver arm ----------------

def _around(rule: rules.Rule):
    """Values a parameter might be given: inside its bounds, on them, just past them, of the
    wrong type, and not numbers at all."""
    if rule.choices:
        return st.sampled_from([*rule.choices, "later", "", 1])
    if rule.types == (str,):
        return st.text(max_size=int(rule.high) + 2) | st.integers(0, 3)
    low, high = rule.low, rule.high
    inside = st.integers(low, high)
    if float in rule.types:
        inside |= st.floats(low, high)
    edges = st.sampled_from([low - 1, low, low + 1, high - 1, high, high + 1, 2 ** 63 - 1])
    wrong = st.sampled_from([0.5, float(high), float("nan"), float("inf"), True, "1", None])
    return inside | edges | wrong


_RULES = {**rules.COMMON, **rules.TRIGGER_RULES,
          **{key: rule for params in rules.PARAMS.values() for key, rule in params.items()}}


@st.composite
def _fault_tables(draw) -> dict:
    kind = draw(st.sampled_from([*rules.KINDS, "explode"]))
    own = rules.keys_of(kind) if kind in rules.PARAMS else ()
    keys = [k for k in own if k not in rules.TRIGGERS
            and draw(st.sampled_from([True, True, True, False]))]
    if kind in rules.TRIGGERED:   # mostly the one trigger it needs, sometimes none or both
        keys += draw(st.sampled_from([["after_bytes"]] * 3 + [["after_ms"]] * 3
                                     + [[], list(rules.TRIGGERS)]))
    keys += draw(st.lists(st.sampled_from(sorted(_RULES)), max_size=1))   # one it may not take
    return {"kind": kind, **{k: draw(_around(_RULES[k])) for k in keys}}


@settings(max_examples=400, deadline=None)
@given(_fault_tables(), st.from_regex(r"[a-z0-9][a-z0-9-]{0,62}", fullmatch=True))
def test_every_fault_a_scenario_may_declare_is_one_the_proxy_or_receiver_arms(spec, sid):
    try:
        (fault,) = parse_faults([spec], sid)
    except FaultSpecError as e:
        assert e.key.startswith("faults[0]") and "\n" not in e.expected
        fault = None
    if spec["kind"] in rules.WIRE_KINDS:
        # as the injector hands it over: JSON, without the invocation
        given = {k: v for k, v in (fault or spec).items() if k != "invocation"}
        try:
            armed = parse_fault(json.dumps(given), 1)
        except ProxyFaultError:
            assert fault is None, f"the proxy refuses what a scenario may declare: {fault}"
            return
        # id, invocation and bind are the injector's to give: a scenario declares none
        assert fault is not None or {"id", "invocation", "bind"} & set(spec), \
            f"the proxy arms what a scenario may not declare: {spec}"
        assert armed.params == {k: spec[k] for k in rules.PARAMS[spec["kind"]]}
    elif fault is not None and spec["kind"] in rules.SERVER_KINDS:
        # as the injector writes the receiver's fault file (the lab's own kinds: no reader)
        assert checked(json.loads(json.dumps(fault))) == fault


@pytest.mark.parametrize("fault", [
    {"kind": "bandwidth", "direction": "up", "bytes_per_s": 0},
    {"kind": "bandwidth", "direction": "up", "bytes_per_s": 2.5},
    {"kind": "latency", "direction": "down", "ms": 2.5},
    {"kind": "reset", "direction": "up", "at_byte": 2 ** 62 + 1},
])
def test_the_proxy_refuses_what_a_scenario_may_not_declare(fault):
    with pytest.raises(FaultSpecError):
        parse_faults([fault], "s")
    with pytest.raises(ProxyFaultError, match="expected"):
        parse_fault(json.dumps(fault), 1)


def test_the_receiver_reports_a_fault_it_refuses_and_arms_the_rest(tmp_path):
    path, refused = tmp_path / "faults.json", []
    path.write_text(json.dumps([{"id": "a", "kind": "stall", "after_bytes": 5},  # no seconds
                                {"id": "b", "kind": "drop", "after_ms": 10}]))
    book = FaultBook(path, on_invalid=lambda fault, e: refused.append((fault["id"], e.key)))
    assert [f["id"] for f in book.for_new_upload()] == ["b"]
    book.for_new_upload()
    assert refused == [("a", "seconds")]   # once, however often the file is read
