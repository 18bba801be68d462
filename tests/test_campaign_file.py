"""Campaign files, directories and identities without running anything: every mistake is one
line naming the file and the key; a resumed directory must be the campaign it was."""

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest

from sessions.campaign.jobs import plan
from sessions.campaign.journal import Journal, JournalError
from sessions.campaign.shipping import ShippingError, pack, unpack
from sessions.judging.grading import identity_failures
from sessions.lab.session import VERSION
from sessions.output.judged import JudgedStream
from sessions.spec.campaign import CampaignError, load_campaign
from sessions.spec.task import load_task
from sessions.stream.codec import to_json
from sessions.stream.events import GradeStarted, PhaseChanged, ScenarioStarted, SessionStarted
from sessions.stream.evidence import ScenarioEvidence
from tests.backup_lab import client_path

CLIENT = Path(__file__).parent / "clients" / "backup_client.py"
GOOD = """
[campaign]
name = "trial"
scenarios = ["normal", "stale"]
attempts = 2
[[client]]
name = "py"
command = "python3 client.py {host} {port} {source}"
ship = ["lib"]
[[client]]
name = "c"
command = ["./client-baseline", "{host}", "{port}", "{source}"]
"""


def _write(tmp_path: Path, text: str) -> Path:
    shutil.copy(CLIENT, tmp_path / "client.py")
    shutil.copy(client_path("baseline"), tmp_path / "client-baseline")
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "lib" / "util.py").write_text("X = 1\n")
    path = tmp_path / "campaign.toml"
    path.write_text(text)
    return path


def test_a_campaign_file_names_what_ships_and_plans_every_attempt(tmp_path):
    c = load_campaign(_write(tmp_path, GOOD))
    assert (c.name, c.attempts, c.retries, [s.id for s in c.scenarios]) == \
        ("trial", 2, 2, ["normal", "stale"])
    py, cc = c.clients
    assert set(py.shipped) == {"client.py", "lib/util.py"}     # python3 itself is the node's
    assert py.tokens[:2] == ("python3", "client.py")
    assert set(cc.shipped) == {"client-baseline"} and cc.tokens[0] == "./client-baseline"
    assert cc.shipped["client-baseline"] == cc.spec.sha256
    jobs = plan(c)
    assert [j.id for j in jobs][:3] == ["py:normal@1", "py:normal@2", "py:stale@1"]
    assert len(jobs) == c.size == 8


def test_shipped_files_resolve_to_the_same_identity_under_a_nodes_own_root(tmp_path):
    c = load_campaign(_write(tmp_path, GOOD))
    node = tmp_path / "node"
    for client in c.clients:
        unpack(node / client.name, pack(client))
        order = plan(c)[0 if client.name == "py" else -1].order(node / client.name)
        assert order.spec.sha256 == client.spec.sha256
        assert sorted(order.spec.files.values()) == sorted(client.spec.files.values())
        assert str(order.spec.executable).startswith(("/usr/", str(node)))
    assert (node / "c" / "client-baseline").stat().st_mode & 0o777 == 0o755
    with pytest.raises(ShippingError, match="escapes"):
        unpack(node / "x", {"../evil": (0o644, b"")})


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('attempts = 2', 'attempts = 0'), "campaign.attempts: expected a whole"),
    (lambda t: t.replace('attempts = 2', 'attempts = 2\nretries = -1'), "campaign.retries"),
    (lambda t: t.replace('"normal", "stale"', '"normal", "nope"'), "unknown grade scenario"),
    (lambda t: t.replace('name = "c"', 'name = "py"'), "client name(s) used twice: py"),
    (lambda t: t.replace('name = "c"', 'name = "a b"'), "client.name: expected letters"),
    (lambda t: t.replace('ship = ["lib"]', 'ship = ["nowhere"]'), "'nowhere' is not a file"),
    (lambda t: t.replace('ship = ["lib"]', 'shipp = 1'), "client: unknown key(s) shipp"),
    (lambda t: t.replace('client.py {host} {port}', 'client.py {host}'), "must contain {port}"),
    (lambda t: t.replace('python3 client.py', 'no-such-program'), "not found on PATH"),
    (lambda t: t + "\n[sandbox]\nmemory_mib = -1\n", "sandbox.memory_mib: expected a positive"),
    (lambda t: t + "\n[extra]\n", "unknown: extra"),
    (lambda t: t.split("[[client]]")[0], "at least one [[client]]"),
    (lambda t: t.replace('attempts = 2', 'attempts = 2\nnoise = ["loud"]'), "campaign.noise"),
    (lambda t: t + "\n[[client\n", "not valid TOML"),
])
def test_campaign_file_mistakes_are_one_line_naming_the_file(tmp_path, edit, message):
    path = _write(tmp_path, edit(GOOD))
    with pytest.raises(CampaignError) as e:
        load_campaign(path)
    text = str(e.value)
    assert message in text and str(path) in text and "\n" not in text


def _piece(scenario: str, done: bool) -> list:
    events = [SessionStarted(1, wall_ns=1, evlab_version=VERSION, kernel="k", collector="bcc",
                             packets="on", contract_version=load_task().contract.version,
                             scenarios=(scenario,), task_id=load_task().id,
                             task_sha256=load_task().sha256),
              PhaseChanged(2, scenario, "setup")]
    return events + ([PhaseChanged(3, scenario, "done")] if done else [])


def test_a_campaign_directory_resumes_only_the_same_file_and_whole_attempts(tmp_path):
    journal = Journal.create(tmp_path / "d", "text")
    with pytest.raises(JournalError, match="already exists and is not empty"):
        Journal.create(tmp_path / "d", "text")
    with pytest.raises(JournalError, match="different campaign file"):
        Journal.reopen(tmp_path / "d", "other text")
    with pytest.raises(JournalError, match="nothing to resume"):
        Journal.reopen(tmp_path / "nowhere", "text")
    for e in _piece("a:normal@1", True) + _piece("a:normal@2", False):
        journal(e)
    journal.sync()
    with open(journal.path, "a") as f:
        f.write(to_json(PhaseChanged(4, "a:normal@2", "verify"))[:20])   # cut off mid-line
    _, events = Journal.reopen(tmp_path / "d", "text")
    assert [getattr(e, "phase", None) for e in events] == [None, "setup", "done"]
    (journal.path).write_text("not json\n" + journal.path.read_text())
    with pytest.raises(JournalError, match="line 1"):
        Journal.reopen(tmp_path / "d", "text")


def _evidence(expected: dict, ran: GradeStarted | None) -> ScenarioEvidence:
    started = ScenarioStarted(1, "py:normal@1", "/x", "aa", (), (), (), 1, 2, 3, "f",
                              attempt=1, base="normal", client="py")
    return ScenarioEvidence(started, "bcc", "on", [], ran, expected)


def test_an_attempt_that_ran_other_bytes_than_the_campaign_named_is_invalid():
    named = {"sha256": "e" * 64, "files": {"/c/client.py": "f" * 64},
             "shipped": {"client.py": "f" * 64}}
    ran = GradeStarted(1, ("python3",), "/usr/bin/python3", "e" * 64, {"/n/client.py": "f" * 64},
                       {}, 1, ("normal",), "py", {"client.py": "f" * 64})
    assert identity_failures(_evidence(named, ran)) == []
    changed = GradeStarted(1, ("python3",), "/usr/bin/python3", "e" * 64,
                           {"/n/client.py": "0" * 64}, {}, 1, ("normal",), "py",
                           {"client.py": "0" * 64})
    [why] = identity_failures(_evidence(named, changed))
    assert "client.py is 000000000000, the campaign named ffffffffffff" in why
    assert identity_failures(_evidence(named, None)) == [
        "identity: the attempt does not record which client it ran"]
    # not a campaign: the attempt's own re-hash (ScenarioStarted's "aa") against the grade's
    assert identity_failures(_evidence(None, changed)) == [
        "identity: changed since the grade started: executable /usr/bin/python3 is now aa, "
        "the grade started with eeeeeeeeeeee"]


def test_ray_mode_says_what_it_needs_in_one_line_and_writes_nothing(tmp_path, monkeypatch,
                                                                    capsys):
    from sessions import cli
    file = _write(tmp_path, GOOD)
    args = ["campaign", str(file), "--headless", "--dir", str(tmp_path / "d")]
    assert cli.main([*args, "--ray", "127.0.0.1:1"]) == 2
    assert "--ray 127.0.0.1:1: the Ray head at " in capsys.readouterr().err   # Ray resolves it
    monkeypatch.setitem(sys.modules, "ray", None)            # a machine without Ray
    assert cli.main([*args, "--ray", "auto"]) == 2
    err = capsys.readouterr().err
    assert "--ray needs Ray" in err and err.count("\n") == 1
    assert not (tmp_path / "d").exists()


def _merger(tmp_path):
    from sessions.campaign.driver import Merger
    from sessions.stream.evidence import EvidenceBook
    c = load_campaign(_write(tmp_path, GOOD))
    book = EvidenceBook()
    journal = Journal.create(tmp_path / "d", c.text)
    return Merger(JudgedStream(journal, book=book), c, journal), book, plan(c)


def test_a_node_cannot_speak_for_the_judge_or_the_driver(tmp_path):
    """A piece holding a judgement, a campaign event, another client or another attempt is
    refused whole: the attempt is lost (not run again), nothing of it reaches the book."""
    from sessions.lab.attempts import AttemptPiece
    from sessions.stream.campaign_events import AttemptLost
    from sessions.stream.events import AttemptJudged, Verdict
    merger, book, jobs = _merger(tmp_path)
    job = jobs[0]
    opening = _piece(job.id, True)[0]
    grade = GradeStarted(2, ("x",), "/x", "e" * 64, {}, {}, 1, ("normal",), job.client)
    forged = [
        [opening, grade, AttemptJudged(3, job.id, "normal", 1, True, True, 1.0, "pass")],
        [opening, grade, Verdict(3, job.id, "integrity", "pass", "pass", "", None, ())],
        [opening, grade, AttemptLost(3, "c", "c:normal@1", "normal", 1, 1, "n", "x", False)],
        [opening, dataclasses.replace(grade, client="c")],
        [opening, grade, PhaseChanged(3, "py:normal@2", "setup")],
        [opening, grade, opening],
        [grade],
        [dataclasses.replace(opening, evlab_version="0.0.9"), grade],
        [dataclasses.replace(opening, task_sha256="0" * 64), grade],   # other task files
    ]
    for events in forged:
        merger.finished(job, AttemptPiece(job.id, "n1", tuple(map(to_json, events)), {}))
    assert [type(e).__name__ for e in book.events] == ["AttemptLost"] * len(forged)
    assert all(not e.retried and e.reason.startswith("the node's record is unusable")
               for e in book.lost)
    assert "a AttemptJudged, which only the driver makes" in book.lost[0].reason
    assert "the node ran task backup (sha256 000000000000…), the driver's is backup" in \
        book.lost[-1].reason


def test_a_path_to_a_system_executable_runs_the_nodes_own_file(tmp_path):
    """`./py` linking to the system's python3 is not shipped: the node runs its own python3
    (whose sha256 the identity then compares), not a missing ./py."""
    target = Path("/usr/bin/python3").resolve()
    (tmp_path / "py").symlink_to(target)
    c = load_campaign(_write(tmp_path, GOOD.replace('"python3 client.py', '"./py client.py')))
    py = c.clients[0]
    assert py.tokens[0] == str(target) and "py" not in py.shipped
    order = plan(c)[0].order(tmp_path / "node-root-without-py")
    assert order.spec.executable == target and order.spec.sha256 == py.spec.sha256


def test_the_operators_example_campaign_ranks_each_tasks_tools_apart():
    """docs/examples/operators/campaign.toml (docs/tasks.md): every tool the tests judge on
    reload and rotate, each a client of its task, each script the one the tests run."""
    folder = Path(__file__).resolve().parent.parent / "docs" / "examples" / "operators"
    c = load_campaign(folder / "campaign.toml")
    tasks = {client.name: client.task for client in c.clients}
    assert sorted(set(tasks.values())) == ["reload", "rotate"]
    scripts = {Path(client.spec.command[1]).name for client in c.clients}
    assert scripts == {p.name for p in folder.glob("*.sh")}
