"""The rotate task (fixture/rotate/, issue 47): nginx as an operable service under evlab's load,
each request carrying an id (X-Evlab-Request) that nginx writes first on its access log's line,
and programs that rotate that log twice (a first rotation, then a second).

One session judges everything (the seeded suite's reference client, one behaviour per clause,
and real tools, written as an operator would), each failing exactly the clauses declared
beside it, which were written from logrotate's manual (3.21, Debian) before evlab judged them:
- logrotate with `create` and a `postrotate` that sends USR1 to the master: nothing ("the log
  file is created ... before the postrotate script is run"; `delaycompress` leaves LOG.1
  plain, the second rotation compresses LOG.2);
- logrotate with `copytruncate`: no-live-truncate (its `ftruncate` of the log nginx holds open
  for writing). The manual's loss ("there is a very small time slice between copying the file
  and truncating it, so some logging data might be lost") happens only when one of the load's
  requests lands in that slice (well under a millisecond here, against 25 ms between
  requests): every-line-once is asserted as what it may be, a pass or the lost ids named, not
  declared; the seeded `copytruncate` (150 ms between the two) loses lines every time;
- a bare `mv LOG LOG.1`: rotated (nginx keeps writing the renamed file: its new line is in
  LOG.1) and honest-outcome (mv exits 0); the second run finds no LOG and exits 1.
The verifier's reading of every log file (LOG, LOG.N, LOG.N.gz) joined with the load's record
by request id names each line lost or written twice.
"""

import gzip
import shutil
from pathlib import Path

import pytest

from fixture.rotate.predicates import every_line_once
from fixture.rotate.verifier import ranges, read_ids, summary
from sessions.spec.contract import Thresholds
from sessions.spec.scenario import load_suite
from sessions.spec.task import load_task
from sessions.stream.events import (
    ClientExited,
    ClientLaunched,
    ScenarioStarted,
    ServerRecord,
    VerifierResult,
)
from sessions.stream.evidence import EvidenceBook
from tests.support import clauses, grade, operated, tool_scenario

TASK = load_task("rotate")
SEEDED = [s.id for s in load_suite("seeded", TASK)]
FAULTS = [s.id for s in load_suite("faults", TASK)]
OPERATORS = Path(__file__).resolve().parent.parent / "docs" / "examples" / "operators"
CLIENTS = Path(__file__).parent / "clients"

# what operators write (docs/examples/operators/rotate-NAME.sh, also a campaign there)
TOOLS = {   # name: the clauses it fails
    "logrotate-create": [],
    "logrotate-copytruncate": ["no-live-truncate"],
    "mv": ["rotated", "honest-outcome"],
}
TIMED = ("logrotate-copytruncate",)   # its loss depends on a request in a sub-millisecond gap
HAS_LOGROTATE = shutil.which("logrotate") is not None


def _tools(root: Path) -> list[Path]:
    """A script and a scenario file per tool (logrotate's only where it is installed)."""
    return [tool_scenario(root, name, name, (OPERATORS / f"rotate-{name}.sh").read_text(), fails)
            for name, fails in TOOLS.items() if HAS_LOGROTATE or not name.startswith("logrotate")]


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    return operated(tmp_path_factory, "rotate", SEEDED + FAULTS, _tools)


def test_each_behaviour_and_tool_is_judged_as_declared(document):
    scenarios, done = document
    tools = [n for n in TOOLS if HAS_LOGROTATE or not n.startswith("logrotate")]
    assert sorted(scenarios) == sorted([*SEEDED, *FAULTS, *tools])
    checks = {i: (s["instrument_check"], s["instrument_detail"]) for i, s in scenarios.items()
              if i not in TIMED}
    assert checks == dict.fromkeys(set(SEEDED + FAULTS + tools) - set(TIMED), (
        "detected", "every clause judged as declared")), done.stdout


def test_the_reference_rotates_twice_and_every_answered_request_is_in_one_line(document):
    scenarios, _ = document
    baseline = scenarios["baseline"]
    verdicts = clauses(baseline)
    assert {c: v[0] for c, v in verdicts.items()} == dict.fromkeys(TASK.clause_ids, "pass")
    for inv in baseline["invocations"]:
        assert [(s["name"], s["whose"], s["server"]) for s in inv["operations"]["signals"]
                if s.get("target")] == [("SIGUSR1", "server", "web")]
        load = inv["load"]["traffic"]
        assert load["sent"] > 0 and load["outcomes"] == {"answered": load["sent"]}
        assert inv["verifier"]["detail"] == ("access.log became access.log.1 and nginx writes "
                                             "a fresh access.log")
    answered = sum(i["load"]["traffic"]["sent"] for i in baseline["invocations"])
    once = verdicts["every-line-once"][1]
    assert f"({answered} in all; lines: access.log " in once   # the load's ids, in nginx's log
    assert "access.log.1 " in once and "access.log.2.gz " in once   # the second rotation's


def test_the_fault_suite_is_judged_as_declared(document):
    """scenarios/faults/, in the same session: the load at 200 requests a second, five times
    the lines, every clause still passes and every answered request is in exactly one line."""
    scenarios, _ = document
    assert FAULTS == ["heavy-load"]
    heavy = scenarios["heavy-load"]
    assert heavy["instrument_check"] == "detected", clauses(heavy)
    assert {c: v[0] for c, v in clauses(heavy).items()} == dict.fromkeys(TASK.clause_ids, "pass")
    loads = [i["load"]["traffic"] for i in heavy["invocations"]]
    assert [load["rate"] for load in loads] == [200, 200]
    assert all(load["outcomes"] == {"answered": load["sent"]} for load in loads)
    answered = sum(load["sent"] for load in loads)
    assert f"({answered} in all; lines: " in clauses(heavy)["every-line-once"][1]


def test_lines_lost_or_written_twice_are_named_by_their_request_ids(document):
    scenarios, _ = document
    copy = clauses(scenarios["copytruncate"])
    assert copy["no-live-truncate"][0] == "fail" and "access.log" in copy["no-live-truncate"][1]
    assert copy["rotated"][0] == "pass"   # LOG.1 holds the lines from before; LOG is written
    lost = copy["every-line-once"][1]
    assert lost.startswith("after invocation 1 ") and "are in no log file: traffic-1-" in lost
    older = clauses(scenarios["drop-older"])["every-line-once"][1]
    assert older.startswith("after invocation 2 ") and "in no log file: traffic-1-" in older
    doubled = clauses(scenarios["double"])["every-line-once"][1]
    assert "written more than once: traffic-1-1 (access.log.1, access.log.1.gz)" in doubled


def test_a_log_nginx_was_not_told_of_is_not_rotated(document):
    scenarios, _ = document
    moved = scenarios["no-reopen"]
    verdicts = clauses(moved)
    assert verdicts["rotated"] == ("fail", "after invocation 1 nginx wrote a new line to "
                                           "access.log.1, not to a fresh access.log")
    assert verdicts["every-line-once"][0] == verdicts["honest-outcome"][0] == "pass"
    assert [i["exit_code"] for i in moved["invocations"]] == [1, 1]   # it said it failed
    assert not any(i["operations"]["signals"] for i in moved["invocations"])


def test_signals_restarts_and_leftovers_are_named(document):
    scenarios, _ = document
    assert "SIGHUP to server web" in clauses(scenarios["hup"])["signals-as-allowed"][1]
    restart = clauses(scenarios["restart"])
    assert "SIGTERM" in restart["service-kept"][1] and "refused" in restart[
        "no-request-failed"][1]
    assert restart["every-line-once"][0] == restart["rotated"][0] == "pass"
    left = clauses(scenarios["leave"])["nothing-left"][1]
    assert "neither nginx's nor a log: rotate.lock" in left and "task(s) of its tree" in left


@pytest.mark.skipif(not HAS_LOGROTATE, reason="Debian's logrotate is not installed")
def test_logrotate_as_its_manual_says(document):
    scenarios, _ = document
    create = clauses(scenarios["logrotate-create"])
    assert {c: v[0] for c, v in create.items()} == dict.fromkeys(TASK.clause_ids, "pass")
    assert "access.log.2.gz " in create["every-line-once"][1]   # delaycompress, then compress
    for inv in scenarios["logrotate-create"]["invocations"]:   # the postrotate's kill
        assert [(s["name"], s["server"]) for s in inv["operations"]["signals"]
                if s.get("target")] == [("SIGUSR1", "web")]
    copy = clauses(scenarios["logrotate-copytruncate"])
    assert copy["no-live-truncate"][0] == "fail"
    assert "truncated access.log by ftruncate (to 0 bytes) while another process had it open " \
           "for writing" in copy["no-live-truncate"][1]
    assert copy["rotated"][0] == copy["signals-as-allowed"][0] == "pass"
    once = copy["every-line-once"]
    assert once[0] == "pass" or "are in no log file: traffic-" in once[1], once
    assert {c: v[0] for c, v in copy.items()
            if c not in ("no-live-truncate", "every-line-once")} == dict.fromkeys(
        set(TASK.clause_ids) - {"no-live-truncate", "every-line-once"}, "pass")


def test_a_bare_mv_leaves_nginx_writing_the_renamed_file(document):
    scenarios, _ = document
    moved = clauses(scenarios["mv"])
    assert moved["rotated"] == ("fail", "after invocation 1 nginx wrote a new line to "
                                        "access.log.1, not to a fresh access.log")
    assert moved["every-line-once"][0] == "pass"   # nothing lost: all of it in access.log.1
    assert [i["exit_code"] for i in scenarios["mv"]["invocations"]] == [0, 1]


@pytest.mark.parametrize("client", ["rotate_client.pl", "rotate_client.sh"])
def test_an_honest_client_from_the_document_alone_is_graded_a_success(client, tmp_path):
    """tests/clients/rotate_client.pl (Perl, its core modules) and rotate_client.sh (Bash and
    coreutils), each written from protocol.md alone, no logrotate, graded as a user would: both
    rotations of every attempt valid and a success (the older logs moved along, LOG renamed to
    LOG.1, USR1 to the master, the fresh LOG confirmed), its renames in nginx's folder its
    own, no write outside and no read finding (#47: the Bash client's mv and stat read
    /proc/filesystems as they start, and its `< <(...)` opens /dev/fd/63: neither is one)."""
    doc = grade(f"{CLIENTS / client} {{log}} {{pidfile}}", tmp_path, attempts=1, task="rotate")
    assert set(doc["grade"]["scenarios"]) == {s.id for s in load_suite("grade", TASK)}
    for name, sc in doc["grade"]["scenarios"].items():
        assert [(r["valid"], r["success"]) for r in sc["runs"]] == [(True, True)], (
            name, [(r["reason"], r["clauses"]) for r in sc["runs"]])
        found = [f for r in sc["runs"] for f in r["risk_findings"]]
        assert not [f for f in found if f["kind"] in ("write-outside", "read")], found


def test_the_verifiers_reading_of_the_logs(tmp_path):
    """Ids by prefix as ranges; only the load's ids are shown (a line's first word may be
    anything a program wrote); a compressed log read; a link followed never (the verifier runs
    as root in a folder the program writes)."""
    assert ranges([5, 1, 2, 3, 3, 9, 10]) == "1-3,5,9-10"
    assert summary(["traffic-1-2", "traffic-1-1", "traffic-2-7", "verifier-123", "-",
                    "root:$y$secret"]) == {"traffic-1": "1-2", "traffic-2": "7",
                                           "verifier": 1, "other": 2}
    (tmp_path / "access.log.2.gz").write_bytes(gzip.compress(b"t-1-1 1.0 200 \"GET /\"\n"))
    assert read_ids(tmp_path / "access.log.2.gz") == (["t-1-1"], "")
    (tmp_path / "access.log.3").symlink_to("/etc/passwd")
    assert read_ids(tmp_path / "access.log.3")[0] == []
    assert read_ids(tmp_path / "access.log.3")[1].startswith("not opened")


# --- every-line-once on hand-made evidence ----------------------------------------------

def _scenario(requests: list[tuple[str, str]], files: dict | None, twice=None):
    """One invocation: the load's requests (id, outcome), the verifier's reading after it."""
    started = ScenarioStarted(1, "s", "/bin/c", "0" * 64, (), (), (), 4000, 0, 0, "s.toml",
                              display={"loads": {"traffic": "web"}})
    events = [started, ClientLaunched(10, "s", 1, 7, ("c",), "/", "", seq=2)]
    events += [ServerRecord(20, "s", 1, "load", "request",
                            {"load": "traffic", "id": rid, "outcome": outcome}, seq=10 + i)
               for i, (rid, outcome) in enumerate(requests)]
    events += [ServerRecord(30, "s", 1, "load", "load_stopped",
                            {"load": "traffic", "sent": len(requests)}, seq=50),
               ClientExited(40, "s", 1, 0, False, 1, 0, seq=51)]
    if files is not None:
        events.append(VerifierResult(50, "s", 1, True, "", {"files": files,
                                                            "twice": twice or {}}, seq=52))
    return EvidenceBook.of(events).scenarios["s"]


def test_every_line_once_joins_the_loads_answered_requests_with_the_logs():
    t = Thresholds()
    asked = [("traffic-1-1", "answered"), ("traffic-1-2", "answered"),
             ("traffic-1-3", "refused")]
    logs = {"access.log": {"lines": 1, "ids": {"traffic-1": "2"}},
            "access.log.1": {"lines": 2, "ids": {"traffic-1": "1", "verifier": 1}}}
    judged = every_line_once(_scenario(asked, logs), t)
    assert judged.status == "pass", judged.reason   # the refused one need not be there
    lost = every_line_once(_scenario(asked, {"access.log": logs["access.log"]}), t)
    assert lost.status == "fail" and lost.reason == (
        "after invocation 1 1 of the 2 request(s) nginx answered to evlab's load are in no "
        "log file: traffic-1-1")
    twice = every_line_once(_scenario(asked, logs, {"traffic-1-2": ["access.log.1",
                                                                    "access.log"]}), t)
    assert twice.status == "fail" and twice.reason.endswith(
        "written more than once: traffic-1-2 (access.log.1, access.log)")
    unseen = every_line_once(_scenario(asked, None), t)
    assert unseen.status == "inconclusive" and "no verifier reading" in unseen.reason
