"""evlab's load (task.toml [load.NAME]) on a task of the tests' own (tests/data/ping: a line
service whose PAUSE command closes its listener): its connections are never the client's, its
records are in the document and the archive, and `no-request-failed` / `latency-bound` judge
them; both predicates on hand-made evidence too."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessions.judging.clauses.load import latency_bound, no_request_failed
from sessions.output.archive import load_archive
from sessions.spec.contract import Thresholds
from sessions.spec.task import TaskError, load_task
from sessions.stream.events import ClientLaunched, ScenarioStarted, ServerRecord
from sessions.stream.evidence import EvidenceBook
from tests.support import evlab_in

PING = Path(__file__).parent / "data" / "ping"


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One session of the ping task's seeded suite (the honest client and the pauser)."""
    out = tmp_path_factory.mktemp("load")
    done = evlab_in("run", "--task", PING, "--suite", "seeded", "--headless",
                    "--json", out / "run.json", "--archive", out / "run.tar.gz")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((out / "run.json").read_text())
    return {s["id"]: s for s in doc["scenarios"]}, load_archive(out / "run.tar.gz")


def _clauses(scenario: dict) -> dict[str, tuple[str, str]]:
    return {c["id"]: (c["status"], c["reason"]) for c in scenario["clauses"]}


def test_the_loads_connections_are_not_the_honest_clients(ran):
    honest = ran[0]["honest"]
    assert {k: v[0] for k, v in _clauses(honest).items()} == {
        "destination-only": "pass", "no-request-failed": "pass", "latency-bound": "pass"}
    (inv,) = honest["invocations"]
    server = inv["servers"]["ping"]
    # the client's one connection; the load's are counted apart, and so are their bytes
    assert server["records"]["connection_opened"] == 1 and server["load_records"] > 0
    assert inv["packets"]["to_endpoint_bytes"] == len(b"PING\n") * 3
    probe = inv["load"]["probe"]
    assert probe["outcomes"] == {"answered": probe["sent"]} and probe["failed"] == []
    # each request has an id of its own: the load's name, the invocation, its place
    requests = [r for r in ran[1].events if getattr(r, "server", None) == "load"
                and r.event == "request" and r.scenario == "honest"]
    assert sorted(r.fields["id"] for r in requests) == sorted(
        f"probe-1-{k}" for k in range(1, len(requests) + 1))


def test_a_client_that_makes_the_service_refuse_fails_no_request_failed(ran):
    pause = ran[0]["pause"]
    clauses = _clauses(pause)
    assert clauses["no-request-failed"][0] == "fail"
    assert "refused" in clauses["no-request-failed"][1]
    assert clauses["destination-only"][0] == "pass"
    failed = pause["invocations"][0]["load"]["probe"]["failed"]
    # refused while it had no listener; a request already in flight as the listener closed
    # may instead be reset (its connection still in the kernel's queue) or time out (on a busy
    # machine one was seen stranded, neither answered nor closed): all failures of the pause
    outcomes = {f["outcome"] for f in failed}
    assert "refused" in outcomes and outcomes <= {"refused", "reset", "timeout"}, failed
    assert all(f["after_launch_ns"] > 0 for f in failed)
    evidence = next(c for c in pause["clauses"] if c["id"] == "no-request-failed")["evidence"]
    assert evidence == [f["seq"] for f in failed]


def test_the_loads_records_round_trip_through_the_archive(ran):
    book = EvidenceBook.of(ran[1].events)
    inv = book.scenarios["pause"].invocations[1]
    assert [r.event for r in inv.load][0] == "load_started"
    assert inv.load[-1].event == "load_stopped" and inv.load[-1].fields["refused"] > 0
    judged = no_request_failed(book.scenarios["pause"], Thresholds())
    assert judged.status == "fail"


# --- the predicates on hand-made evidence ------------------------------------------------

def _book(*records: tuple[str, dict], loads=None) -> EvidenceBook:
    started = ScenarioStarted(1, "s", "/bin/c", "0" * 64, (), (), (), 4000, 0, 0, "s.toml",
                              display={"loads": {"probe": "app"} if loads is None else loads})
    events = [started, ClientLaunched(1_000_000_000, "s", 1, 7, ("c",), "/", "", seq=2)]
    events += [ServerRecord(t, "s", 1, "load", event, {"load": "probe", **fields}, seq=10 + i)
               for i, (event, fields) in enumerate(records) for t in [fields.pop("t", 2e9)]]
    return EvidenceBook.of(events)


def _request(outcome="answered", latency_ms=5, t=2e9, status=None):
    return ("request", {"outcome": outcome, "status": status, "t": int(t),
                        "latency_ns": int(latency_ms * 1e6), "sport": 50000})


LIMIT = Thresholds(load_latency_max_ms=100)


def test_answered_requests_pass_both():
    book = _book(_request(), _request(latency_ms=50), ("load_stopped", {"sent": 2}))
    ev = book.scenarios["s"]
    assert no_request_failed(ev, LIMIT).status == "pass"
    judged = latency_bound(ev, LIMIT)
    assert judged.status == "pass" and "50.0 ms" in judged.reason


def test_a_refused_or_slow_or_5xx_request_fails_naming_it():
    ev = _book(_request(), _request("refused", 0.1), _request(status=503),
               _request(latency_ms=250), ("load_stopped", {"sent": 4})).scenarios["s"]
    failed = no_request_failed(ev, LIMIT)
    assert failed.status == "fail" and failed.evidence == (11, 12)
    assert "1 refused (+1.000 s" in failed.reason and "answered 503" in failed.reason
    slow = latency_bound(ev, LIMIT)
    assert slow.status == "fail" and "250.0 ms" in slow.reason and slow.evidence == (13,)


def test_a_missing_or_incomplete_load_record_is_inconclusive():
    for book in (_book(_request()),                                      # no end of it
                 _book(_request(), ("load_stopped", {"sent": 3})),       # requests missing
                 _book(loads={}),                                        # no load declared
                 _book(("load_stopped", {"sent": 0}))):                  # no request at all
        for predicate in (no_request_failed, latency_bound):
            judged = predicate(book.scenarios["s"], LIMIT)
            assert (judged.status, judged.failure_class) == ("inconclusive", "harness")


def test_a_failure_before_the_client_started_is_not_the_clients():
    ev = _book(_request("refused", 1, t=5e8), ("load_stopped", {"sent": 1})).scenarios["s"]
    judged = no_request_failed(ev, LIMIT)
    assert (judged.status, judged.failure_class) == ("inconclusive", "environment")


# --- task.toml ---------------------------------------------------------------------------

def _task_with(tmp_path: Path, extra: str) -> Path:
    folder = tmp_path / "ping"
    shutil.copytree(PING, folder)
    (folder / "task.toml").write_text((PING / "task.toml").read_text() + extra)
    return folder


def test_a_server_names_an_earlier_servers_port_and_an_outputs_path(tmp_path):
    task = load_task(_task_with(tmp_path, '''
[outputs.log]
file = "log.txt"

[servers.watch]
command = ["python3"]
args = ["{task}/server.py", "{events}", "{servers.ping.port}", "{log}"]
'''))
    assert task.servers[1].program.args[2:] == ("{servers.ping.port}", "{log}")
    assert [(x.name, x.target, x.protocol, x.rate) for x in task.loads] == [
        ("probe", "ping", "tcp", 40.0)]


@pytest.mark.parametrize("extra, said", [
    ('[load.other]\ntarget = "nowhere"\n', "load.other.target: expected one of the task's"),
    ('[load.other]\ntarget = "ping"\nrate = 0\n', "load.other: rate is requests per second"),
    ('[load.other]\ntarget = "ping"\nrequest = "no-slash"\n', "request an HTTP path"),
    ('[load.ping]\ntarget = "ping"\n', "load.ping: expected a table named like a word"),
    ('[servers.early]\ncommand = ["python3"]\nargs = ["{servers.late.port}"]\n'
     '[servers.late]\ncommand = ["python3"]\n', "uses servers.late.port"),
])
def test_a_malformed_load_or_a_later_servers_port_is_refused(tmp_path, extra, said):
    with pytest.raises(TaskError, match=said.replace(".", r"\.")):
        load_task(_task_with(tmp_path, "\n" + extra))


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_a_latency_is_the_services_not_the_time_the_load_waited_for_a_cpu(tmp_path):
    """An answered request's latency runs from its send to its answer's arrival in the kernel:
    a load generator kept off the CPU (here stopped) while its answer waits records the
    service's latency, not its own wait, so a busy machine does not make a prompt service
    slow; a service that answers late is late by as much."""
    stop_s, delay_s = 1.0, 0.3
    events, server = tmp_path / "load.jsonl", socket.create_server(("127.0.0.1", 0))
    load = subprocess.Popen([sys.executable, "-m", "sessions.lab.load", "--events", events,
                             "--name", "probe", "--port", str(server.getsockname()[1]),
                             "--protocol", "tcp", "--request", "PING", "--rate", "5",
                             "--timeout-ms", "5000"])
    try:
        # the first: the generator stopped, then answered at once (the connection left open:
        # the kernel's stamp of what a read returns is its last segment's, an end among them)
        held, _ = server.accept()
        held.recv(64)
        os.kill(load.pid, signal.SIGSTOP)
        while not _stopped(load.pid):
            time.sleep(0.001)
        held.sendall(b"PONG\n")
        time.sleep(stop_s)
        os.kill(load.pid, signal.SIGCONT)
        conn, _ = server.accept()
        with conn, held:   # the second: answered late
            conn.recv(64)
            time.sleep(delay_s)
            conn.sendall(b"PONG\n")
            server.close()   # the rest refused, so that it ends at once
            time.sleep(0.2)
    finally:
        os.kill(load.pid, signal.SIGCONT)
        load.terminate()
        load.wait()
    first, second = [r for r in map(json.loads, events.read_text().splitlines())
                     if r["event"] == "request"][:2]
    assert first["outcome"] == second["outcome"] == "answered", (first, second)
    assert first["answer"] == second["answer"] == "PONG"
    assert first["latency_ns"] < stop_s * 1e9 <= second["t_ns"] - first["t_ns"], first
    assert second["latency_ns"] >= delay_s * 1e9, second
