"""A task is a folder (fixture/<id>/task.toml, or a user's): evlab reads its contract, suites
and placeholders from it, records which task (and which bytes of it) a session judged, and
refuses a folder it cannot use with one line naming the file and the key."""

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from sessions.judging.clauses import predicates_of
from sessions.spec.client_spec import ClientSpecError, from_command
from sessions.spec.contract import ContractError
from sessions.spec.scenario import ScenarioError, load_suite
from sessions.spec.task import TaskError, builtin_tasks, folder_sha256, load_task
from sessions.stream.evidence import EvidenceBook
from tests.support import evlab_in, grade, runs

ROOT = Path(__file__).resolve().parent.parent
BACKUP = ROOT / "fixture" / "backup"
EVLAB = ROOT / ".venv" / "bin" / "evlab"
root_only = pytest.mark.root(reason="the BCC collector, cgroups and the sandbox need root")


def test_the_backup_task_is_read_from_its_folder():
    task = load_task()
    contract = tomllib.loads((BACKUP / "contract.toml").read_text())
    assert (task.id, task.folder) == ("backup", BACKUP)
    assert BACKUP in builtin_tasks()
    assert task.clause_ids == tuple(contract["clauses"])   # the file's order, not a constant
    assert task.contract.version == contract["version"]
    assert set(task.suites) == {"seeded", "faults", "grade"}
    assert [s.id for s in load_suite("grade", task)] == ["normal", "interrupted", "mismatch",
                                                         "stale"]
    assert task.documents == (BACKUP / "protocol.md",)
    assert load_task("backup") is task and load_task(BACKUP / "task.toml") is task
    assert list(predicates_of(task.contract)) == list(task.clause_ids)


def test_evlab_tasks_lists_each_task_with_its_clauses():
    out = subprocess.run([EVLAB, "tasks"], capture_output=True, text=True, check=True).stdout
    task = load_task()
    assert out.splitlines()[:2] == [f"backup (version {task.version}): {task.summary}",
                                    f"  clauses: {', '.join(task.clause_ids)}"]


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "my-backup"
    shutil.copytree(BACKUP, folder, ignore=shutil.ignore_patterns("__pycache__", "build"))
    return folder


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_folders_digest_covers_every_file_it_holds(tmp_path):
    folder = _copy(tmp_path)
    digest = folder_sha256(folder)
    assert digest == folder_sha256(BACKUP) == load_task(folder).sha256
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"left by running it")
    assert folder_sha256(folder) == digest
    _edit(folder / "scenarios" / "grade" / "normal.toml", "normal", "normal ")
    assert folder_sha256(folder) != digest


BAD = [   # (file, old, new): what a user may get wrong, and the one line evlab says
    ("task.toml", 'id = "backup"', 'id = "Backup!"', "task.toml: id: expected lowercase"),
    ("task.toml", 'contract = "contract.toml"', 'contract = "../x.toml"',
     "task.toml: contract: '../x.toml' is outside the task's folder"),
    ("task.toml", 'grade = "scenarios/grade"', 'grade = "nowhere"',
     "task.toml: suites.grade: 'nowhere' does not exist"),
    ("task.toml", 'id = "backup"', 'colour = 1\nid = "backup"',
     "task.toml: colour: expected one of"),
    ("task.toml", "[client]", "extra = 1\n[client]",
     "task.toml: suites: expected names from seeded, faults, grade, got extra"),
    ("task.toml", 'required = ["port", "source"]', 'required = ["url"]',
     "task.toml: client.required: expected a list of the task's placeholders"),
    ("task.toml", 'args = ["{host}"', 'args = ["{url}"',
     "task.toml: client.args: '{url}' uses a placeholder the task does not declare (url)"),
    ("contract.toml", "max_transfer_attempts = 3\n", "max_transfer_attemps = 3\n",
     "contract.toml: thresholds: max_transfer_attemps: expected names from"),
    ("contract.toml", 'version = "7"', 'version = "7"\ngates = 1',
     "contract.toml: gates: expected a list of gate names"),
    ("task.toml", 'role = "endpoint"', 'role = "boss"',
     "task.toml: servers.receiver.role: expected one of endpoint, decoy, internal"),
    ("task.toml", '[servers.decoy]', '[servers.proxy]',
     "task.toml: servers.proxy: expected a table named"),
    ("task.toml", 'fill = "servers.receiver.port"', 'fill = "servers.nobody.port"',
     "task.toml: client.placeholders.port.fill: expected one of host, inputs.source, "
     "servers.decoy.port, servers.receiver.port"),
    ("task.toml", "invocations = 2", "invocations = 0",
     "task.toml: lab.invocations: expected a whole number from 1 to 8"),
    ("task.toml", 'module = "fixture.backup.verifier"', 'module = "os"',
     "task.toml: verifier.module: expected a built-in task's module (fixture.*) or one of the "
     "lab's servers (sessions.lab.decoy)"),
    ("task.toml", 'args = ["--events", "{events}", "--port", "{port}"]',
     'args = ["--port", "{nowhere}"]',
     "task.toml: servers.decoy.args: '{nowhere}' uses nowhere (expected events, faults, host"),
    ("task.toml", 'records = "receiver.committed"', 'records = "nobody.committed"',
     "task.toml: figures[3].records: expected SERVER.EVENT, a server of decoy, receiver"),
    ("task.toml", 'committed = "commit"', 'committed = "party"',
     "task.toml: marks: expected EVENT = KIND, a kind of start, commit, reject, fault"),
    ("task.toml", 'args = ["--events", "{events}", "--port", "{port}"]',
     'args = ["--events", "{events}", "--port", "{port"]',
     "task.toml: servers.decoy.args: '{port' is not a template (a brace alone: write {{ or }})"),
    ("task.toml", 'generate = "source"', 'generate = "noise"',
     "task.toml: inputs.source: expected generate = 'source' | 'tree' or file = \"PATH\""),
    ("task.toml", '[verifier]\nmodule = "fixture.backup.verifier"',
     '[verifier]\ncommand = []', "task.toml: verifier: expected module = \"NAME\" or command"),
    ("contract.toml", 'decided_by = "independent verifier"', "",
     "contract.toml: clauses.integrity: expected holds_when and decided_by"),
    ("contract.toml", "version =", "version = [",
     "contract.toml: cannot be read as TOML"),
    ("task.toml", 'bind = "PUT (?i:{digest}) (?P<length>[0-9]{1,20})"', 'bind = "PUT ([0-9]+"',
     "task.toml: servers.receiver.bind: not a regular expression (missing ), unterminated"),
    ("task.toml", '[servers.decoy]\n', '[servers.decoy]\nbind = "GET /"\n',
     "task.toml: servers.decoy.bind: only a server with faults = true binds them"),
]


@pytest.mark.parametrize(("file", "old", "new", "says"), BAD, ids=[b[3][:40] for b in BAD])
def test_a_task_evlab_cannot_use_is_one_line_naming_the_file_and_key(tmp_path, file, old,
                                                                      new, says):
    folder = _copy(tmp_path)
    _edit(folder / file, old, new)
    with pytest.raises(TaskError) as e:
        load_task(folder)
    assert says in str(e.value) and "\n" not in str(e.value)
    out = evlab_in("list", "--task", folder)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.startswith("evlab: ") and says in out.stderr and out.stderr.count("\n") == 1


def test_a_scenario_expecting_a_clause_its_task_lacks_is_refused(tmp_path):
    folder = _copy(tmp_path)
    _edit(folder / "contract.toml", "[clauses.hash-work]", "[clauses.digest-work]\n"
          "predicate = \"hash-work\"")
    task = load_task(folder)
    assert "digest-work" in task.clause_ids and "hash-work" not in task.clause_ids
    with pytest.raises(ScenarioError, match=r"hash-storm.toml: expect.fail: expected clause "
                                            r"ids \(.*digest-work.*\), got 'hash-work'"):
        load_suite("seeded", task)


def test_a_clause_naming_no_predicate_of_the_library_is_refused(tmp_path):
    folder = _copy(tmp_path)
    _edit(folder / "contract.toml", "[clauses.cpu-budget]", "[clauses.cpu-budget]\n"
          "predicate = \"cpu-budgett\"")
    with pytest.raises(ContractError, match="contract.toml: clauses.cpu-budget: no predicate "
                                            "'cpu-budgett' in the library"):
        predicates_of(load_task(folder).contract)
    out = evlab_in("grade", "--task", folder, "--client",
                   f"{ROOT}/fixture/build/client-baseline {{host}} {{port}} {{source}}",
                   "--headless", cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "") and out.stderr.count("\n") == 1
    assert "no predicate 'cpu-budgett'" in out.stderr


def test_a_command_is_held_to_its_tasks_placeholders(tmp_path):
    with pytest.raises(ClientSpecError, match=r"backup's placeholders are \{decoy_port\}, "
                                              r"\{host\}, \{port\}, \{source\}"):
        from_command("/bin/true {url} {port} {source}")
    folder = _copy(tmp_path)
    _edit(folder / "task.toml", 'required = ["port", "source"]', 'required = ["source"]')
    assert from_command("/bin/true {source}", task=str(folder)).task == str(folder)
    with pytest.raises(ClientSpecError, match=r"must contain \{port\} and \{source\}"):
        from_command("/bin/true {source}")


def _strict_copy(tmp_path: Path) -> Path:
    """backup with its hash-work and unchanged-no-upload clauses named otherwise (the re-run
    gate reads the latter by its predicate) and its cpu-budget clause dropped."""
    folder = _copy(tmp_path)
    _edit(folder / "task.toml", 'id = "backup"', 'id = "strict-backup"')
    _edit(folder / "contract.toml", "[clauses.hash-work]", "[clauses.one-digest-pass]\n"
          "predicate = \"hash-work\"")
    _edit(folder / "contract.toml", "[clauses.unchanged-no-upload]",
          "[clauses.no-second-upload]")
    contract = folder / "contract.toml"
    text = contract.read_text()
    contract.write_text(text[:text.index("[clauses.cpu-budget]")] + text[text.index(
        "[vocabulary]"):])
    return folder


@pytest.mark.live
@root_only
def test_a_users_task_is_judged_on_its_own_contract(tmp_path):
    """The grade judges exactly the copy's clauses, and the document records which task and
    which bytes of it."""
    folder = _strict_copy(tmp_path)
    task = load_task(folder)
    doc = grade(f"{ROOT}/fixture/build/client-baseline {{host}} {{port}} {{source}}",
                tmp_path, book=EvidenceBook(), attempts=1, scenarios=("normal",),
                task=str(folder))
    assert doc["task"] == {"id": "strict-backup", "version": "1", "sha256": task.sha256,
                           "clauses": list(task.clause_ids)}
    (run,) = runs(doc)
    assert list(run["clauses"]) == list(task.clause_ids)
    assert "one-digest-pass" in run["clauses"] and "cpu-budget" not in run["clauses"]
    assert run["success"], run["reason"]
    assert run["gates"]["re-run"]["status"] == "pass"


@pytest.mark.live
@root_only
def test_an_archive_replays_on_the_contract_it_was_judged_by_with_its_folder_gone(tmp_path):
    folder = _strict_copy(tmp_path)
    archive, first, second = tmp_path / "s.tar.gz", tmp_path / "1.json", tmp_path / "2.json"
    graded = evlab_in(   # in this process; the replay and report below are processes of their own
        "grade", "--task", folder, "--client",
        f"{ROOT}/fixture/build/client-redundant-upload {{host}} {{port}} {{source}}",
        "--attempts", "1", "--scenario", "normal", "--headless", "--archive", archive,
        "--json", first, cwd=tmp_path)
    assert graded.returncode == 1, graded.stderr   # it uploads what the receiver has
    shutil.rmtree(folder)   # the replay has only the archive
    replayed = subprocess.run([EVLAB, "replay", str(archive), "--headless"],
                              capture_output=True, text=True, cwd=tmp_path)
    assert (replayed.returncode, replayed.stderr.splitlines()[-1]) == (
        1, graded.stderr.splitlines()[-1])
    report = subprocess.run([EVLAB, "report", str(archive), "--format", "json", "--output",
                             str(second)], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    before, after = (json.loads(p.read_text()) for p in (first, second))
    assert before["task"] == after["task"] and before["task"]["id"] == "strict-backup"
    assert [(c["id"], c["status"], c["reason"]) for c in before["scenarios"][0]["clauses"]] == \
        [(c["id"], c["status"], c["reason"]) for c in after["scenarios"][0]["clauses"]]
    assert "no-second-upload" in before["grade"]["scenarios"]["normal"]["runs"][0]["reason"]


CAMPAIGN = """
[campaign]
name = "strict"
task = "my-backup"
scenarios = ["normal"]
attempts = 1
[[client]]
name = "c-baseline"
command = ["{build}/client-baseline", "{{host}}", "{{port}}", "{{source}}"]
[[client]]
name = "c-redundant"
command = ["{build}/client-redundant-upload", "{{host}}", "{{port}}", "{{source}}"]
"""


def test_a_campaigns_task_is_checked_before_anything_runs(tmp_path):
    folder = _strict_copy(tmp_path)
    file = tmp_path / "campaign.toml"
    file.write_text(CAMPAIGN.format(build=ROOT / "fixture" / "build").replace(
        'task = "my-backup"', 'task = "nowhere"'))
    out = evlab_in("campaign", file, "--headless", cwd=tmp_path)
    assert (out.returncode, out.stderr.count("\n")) == (2, 1)
    assert "campaign.task: no task 'nowhere'" in out.stderr
    assert not (tmp_path / "evlab-campaign-strict").exists() and folder.is_dir()


@pytest.mark.live
@root_only
def test_a_local_campaign_runs_every_client_on_its_task(tmp_path):
    folder = _strict_copy(tmp_path)
    file = tmp_path / "campaign.toml"
    file.write_text(CAMPAIGN.format(build=ROOT / "fixture" / "build"))
    doc_path = tmp_path / "doc.json"
    out = evlab_in("campaign", file, "--headless", "--json", doc_path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr   # every attempt ran (a campaign ranks, not fails)
    doc = json.loads(doc_path.read_text())
    assert doc["task"]["id"] == "strict-backup" and doc["task"]["sha256"] == \
        load_task(folder).sha256
    board = doc["campaign"]
    assert [r["name"] for r in board["leaderboard"]] == ["c-baseline", "c-redundant"]
    runs_of = {name: c["scenarios"]["normal"]["runs"][0] for name, c in
               board["clients"].items()}
    assert list(runs_of["c-baseline"]["clauses"]) == list(load_task(folder).clause_ids)
    assert runs_of["c-redundant"]["clauses"]["no-second-upload"] == "fail"


def test_a_folder_loads_its_own_task_when_a_copy_of_the_same_digest_was_loaded_and_is_gone(
        tmp_path):
    """Two copies of one task (the same digest): the second loads as itself, not as the first,
    which was removed meanwhile (a campaign would ship a folder that is not there)."""
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        shutil.copytree(BACKUP, folder, ignore=shutil.ignore_patterns("__pycache__", "build"))
    assert load_task(first).sha256 == load_task(second).sha256
    shutil.rmtree(first)
    assert load_task(second).folder == second.resolve()
