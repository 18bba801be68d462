"""A task written from docs/tasks.md alone: the test writes the `kv/` folder exactly as the
document gives it (a key-value server of its own, a verifier, a contract of three clauses), then
checks the task (its seeded suite), grades an honest client and two misbehaving ones on it, and
replays the archive with the folder gone. The commands that open a lab run in this process
(tests/support.py evlab_in: the collector is reused, not compiled again); the replays and reports
of an archive whose folder is gone are `evlab` processes of their own, so nothing this process
loaded from the folder can stand in for it."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.spec.scenario import load_suite
from sessions.spec.task import TaskError, load_task
from tests.support import evlab_in, write_kv

ROOT = Path(__file__).resolve().parent.parent
EVLAB = str(ROOT / ".venv" / "bin" / "evlab")
DOC = ROOT / "docs" / "tasks.md"
root_only = pytest.mark.root(reason="the BCC collector, cgroups and the sandbox need root")

# Clients the document tells a task's author to write to check the instrument, one per clause
EXTRA_HOST = """import json, socket, sys
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1).close()   # somewhere else first
except OSError:
    pass
with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as s:
    s.sendall(b"SET greeting hello\\n")
    s.makefile("r").readline()
print(json.dumps({"claim": "completed"}))
"""
LIAR = """import json
print(json.dumps({"claim": "completed"}))   # stores nothing
"""


def with_own_predicate(folder: Path) -> Path:
    """The document's "A predicate of your own": its [predicates] table and one-set clause."""
    section = DOC.read_text().split("## A predicate of your own")[1].split("\n## ")[0]
    table, clause = re.findall(r"^```toml\n(.*?)^```", section, re.M | re.S)
    for name, text in (("task.toml", table), ("contract.toml", clause)):
        with open(folder / name, "a") as f:
            f.write("\n" + text)
    return folder


DOUBLE_SET = """import json, socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as s:
    for _ in range(2):   # the same SET again: stored, but not once
        s.sendall(b"SET greeting hello\\n")
        s.makefile("r").readline()
print(json.dumps({"claim": "completed"}))
"""


def test_a_tasks_own_predicate_is_loaded_and_held_to_the_judges_import_contract(tmp_path):
    task = load_task(with_own_predicate(write_kv(tmp_path)))
    assert task.clause_ids[-1] == "one-set" and task.contract.predicate("one-set") == "set-once"
    assert set(task.contract.own) == {"set-once"}
    impure = {"import os\n": "line 1 imports os: a predicate may import only",
              "from pathlib import Path\n": "line 1 imports pathlib",
              "import subprocess as s\n": "line 1 imports subprocess",
              "x = open\n": "line 1 uses open: a predicate is a pure function",
              "from . import helper\n": "line 1 imports .",
              # the public module's evidence readings only: not a server's record log, not
              # the core's insides
              "from evlab.task import EventLog\n": "line 1 imports evlab.task.EventLog",
              "from sessions.judging.judgement import PASS\n":
                  "line 1 imports sessions.judging.judgement: a predicate may import only "
                  "`from evlab.task import ...`",
              "def f(:\n": "cannot be read as Python"}
    for n, (text, said) in enumerate(impure.items()):
        folder = tmp_path / f"impure{n}"
        shutil.copytree(task.folder, folder)
        predicates = folder / "predicates.py"
        predicates.write_text(text + predicates.read_text())
        with pytest.raises(TaskError, match=re.escape(said)) as err:
            load_task(folder)
        assert "\n" not in str(err.value) and str(err.value).startswith(f"{folder}/task.toml")


def test_the_documents_task_loads_with_its_own_server_and_verifier(tmp_path):
    task = load_task(write_kv(tmp_path))
    assert (task.id, task.clause_ids, task.invocations) == (
        "kv", ("stored", "destination-only", "honest-outcome"), 1)
    assert [(s.name, s.role) for s in task.servers] == [("kv", "endpoint"), ("decoy", "decoy")]
    assert task.fills == {"host": "host", "port": "servers.kv.port"}
    assert task.contract.gates == ("immediate", "cleanup", "limits")


def _grade(folder: Path, client: str, out: Path, *extra: str) -> tuple[int, dict, str]:
    got = evlab_in("grade", "--task", folder, "--client", client, "--attempts", "1",
                   "--headless", "--json", out, *extra, cwd=out.parent)
    doc = json.loads(out.read_text())
    (run,) = doc["grade"]["scenarios"]["baseline"]["runs"]
    return got.returncode, run, got.stderr


def _backup_words(document: Path) -> list[str]:
    """The reasons, gates and risk findings of a graded document that speak backup's words."""
    doc = json.loads(document.read_text())
    said = [c["reason"] for s in doc["scenarios"] for c in s["clauses"]]
    for runs in doc["grade"]["scenarios"].values():
        for run in runs["runs"]:
            said += [run["reason"], *(g["reason"] for g in run["gates"].values()),
                     *(r["detail"] for r in run["risk_findings"])]
    return [text for text in said if BACKUP_WORDS.search(text)]


@pytest.mark.live
@root_only
def test_a_users_task_checks_itself_then_grades_honest_and_misbehaving_clients(tmp_path):
    folder = write_kv(tmp_path)
    checked = evlab_in("run", "--task", folder, "--suite", "seeded", "--headless", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "1 detected, 0 missed, 0 inconclusive of 1" in checked.stderr

    archive = tmp_path / "honest.tar.gz"
    code, run, _ = _grade(folder, f"python3 {folder}/client.py {{host}} {{port}}",
                          tmp_path / "honest.json", "--archive", str(archive))
    assert code == 0 and run["success"], run["reason"]
    assert set(run["clauses"]) == {"stored", "destination-only", "honest-outcome"}
    assert set(run["gates"]) == {"immediate", "cleanup", "limits"}
    assert "the server holds greeting = hello" in run["gates"]["immediate"]["reason"]
    assert not _backup_words(tmp_path / "honest.json")
    (scenario,) = json.loads((tmp_path / "honest.json").read_text())["scenarios"]
    (inv,) = scenario["invocations"]   # the task's one invocation, with the task's figure
    assert inv["figures"] == {"keys set": 1}
    assert inv["verifier"]["detail"] == "the server holds greeting = hello"

    clients = tmp_path / "clients"   # a directory the sandbox user may read
    clients.mkdir(mode=0o755)
    (clients / "extra.py").write_text(EXTRA_HOST)
    code, run, _ = _grade(folder, f"python3 {clients}/extra.py {{host}} {{port}}",
                          tmp_path / "extra.json")
    assert code == 1 and run["valid"]
    assert {c: v for c, v in run["clauses"].items() if v != "pass"} == {
        "destination-only": "fail"}, run["reason"]
    assert not _backup_words(tmp_path / "extra.json")

    (clients / "liar.py").write_text(LIAR)
    code, run, _ = _grade(folder, f"python3 {clients}/liar.py {{host}} {{port}}",
                          tmp_path / "liar.json")
    assert code == 1 and run["valid"]
    assert {c: v for c, v in run["clauses"].items() if v != "pass"} == {
        "stored": "fail", "honest-outcome": "fail"}, run["reason"]
    assert not _backup_words(tmp_path / "liar.json")

    # the archive alone: the task's own server's records and its contract replay as judged
    shutil.rmtree(folder)
    before = json.loads((tmp_path / "honest.json").read_text())
    report = subprocess.run([EVLAB, "report", str(archive), "--format", "json", "--output",
                             str(tmp_path / "again.json")], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    after = json.loads((tmp_path / "again.json").read_text())
    assert after["task"] == before["task"] and after["task"]["id"] == "kv"
    assert after["grade"] == before["grade"]


@pytest.mark.live
@root_only
def test_a_tasks_own_predicate_judges_its_clause_and_a_replay_needs_its_folder(tmp_path):
    folder = with_own_predicate(write_kv(tmp_path))
    archive = tmp_path / "honest.tar.gz"
    code, run, _ = _grade(folder, f"python3 {folder}/client.py {{host}} {{port}}",
                          tmp_path / "honest.json", "--archive", str(archive))
    assert code == 0 and run["success"] and run["clauses"]["one-set"] == "pass", run["reason"]

    clients = tmp_path / "clients"
    clients.mkdir(mode=0o755)
    (clients / "twice.py").write_text(DOUBLE_SET)
    code, run, _ = _grade(folder, f"python3 {clients}/twice.py {{host}} {{port}}",
                          tmp_path / "twice.json")
    assert code == 1 and run["valid"]
    assert {c: v for c, v in run["clauses"].items() if v != "pass"} == {"one-set": "fail"}, \
        run["reason"]

    def replay(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([EVLAB, "replay", str(archive), "--headless", *extra],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)

    # with the task's folder the replay re-judges as the live run did; without it the archive
    # has the clause's contract but not its code: inconclusive (no valid attempt), never a pass
    again = replay("--task", str(folder))
    assert again.returncode == 0, again.stderr
    blind = replay()
    assert blind.returncode == 3, blind.stderr


@pytest.mark.live
@root_only
def test_a_verifier_that_cannot_say_makes_the_attempt_invalid_never_a_pass(tmp_path):
    folder = write_kv(tmp_path)
    (folder / "verify.py").write_text("raise SystemExit('verify: the state is unreadable')\n")
    code, run, _ = _grade(folder, f"python3 {folder}/client.py {{host}} {{port}}",
                          tmp_path / "out.json")
    assert code != 0 and not run["valid"]
    assert "the task's verifier could not say" in run["reason"]
    assert "the state is unreadable" in run["reason"]
    assert run["clauses"]["stored"] == "inconclusive"


MIXED = """[campaign]
name = "mixed"
attempts = 1
scenarios = ["{scenario}"]

[[client]]
name = "c-baseline"
command = ["{build}/client-baseline", "{{host}}", "{{port}}", "{{source}}"]

[[client]]
name = "kv-honest"
task = "kv"
command = ["python3", "kv/client.py", "{{host}}", "{{port}}"]

[[client]]
name = "kv-liar"
task = "kv"
command = ["python3", "liar.py", "{{host}}", "{{port}}"]
"""


def test_a_campaign_naming_a_scenario_one_clients_task_lacks_is_one_line(tmp_path):
    write_kv(tmp_path)
    (tmp_path / "liar.py").write_text(LIAR)
    file = tmp_path / "mixed.toml"
    file.write_text(MIXED.format(build=ROOT / "fixture" / "build", scenario="normal"))
    out = evlab_in("campaign", file, "--headless", cwd=tmp_path)
    assert (out.returncode, out.stderr.count("\n")) == (2, 1), out.stderr
    assert "campaign.scenarios: unknown grade scenario 'normal' of task kv" in out.stderr
    assert not list(tmp_path.glob("evlab-campaign-*"))


@pytest.mark.live
@root_only
def test_a_campaign_mixing_tasks_grades_each_client_on_its_own_and_ranks_tasks_apart(
        tmp_path):
    """Backup's reference client beside the document's kv clients: each is graded on its task's
    scenarios and contract, ranked only among its task's clients, and the archive replays so."""
    folder = write_kv(tmp_path)
    (tmp_path / "liar.py").write_text(LIAR)
    file = tmp_path / "mixed.toml"
    text = MIXED.format(build=ROOT / "fixture" / "build", scenario="x").replace(
        'scenarios = ["x"]\n', "")   # each task's whole grade suite
    file.write_text(text)
    out = evlab_in("campaign", file, "--headless", "--json", "doc.json", "--archive",
                   "mixed.tar.gz", "--report", "mixed.md", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    board = json.loads((tmp_path / "doc.json").read_text())["campaign"]
    assert board["tasks"] == ["backup", "kv"]
    assert [(r["task"], r["rank"], r["name"]) for r in board["leaderboard"]] == [
        ("backup", 1, "c-baseline"), ("kv", 1, "kv-honest"), ("kv", 2, "kv-liar")]
    backup_suite = [s.id for s in load_suite("grade", load_task("backup"))]
    clients = board["clients"]
    assert clients["kv-honest"]["client"]["task"]["sha256"] == load_task(folder).sha256
    assert list(clients["kv-honest"]["scenarios"]) == ["baseline"]
    (kv_run,) = clients["kv-honest"]["scenarios"]["baseline"]["runs"]
    assert kv_run["success"] and set(kv_run["clauses"]) == {"stored", "destination-only",
                                                            "honest-outcome"}
    (liar_run,) = clients["kv-liar"]["scenarios"]["baseline"]["runs"]
    assert liar_run["clauses"]["stored"] == "fail" and not liar_run["success"]
    backup_runs = [r for s in clients["c-baseline"]["scenarios"].values() for r in s["runs"]]
    assert len(backup_runs) == len(clients["c-baseline"]["scenarios"]) >= 2
    assert all(r["success"] and "integrity" in r["clauses"] for r in backup_runs)
    assert list(clients["c-baseline"]["scenarios"]) == backup_suite
    assert {k.split("/")[0] for k in board["per_scenario"]} == {"backup", "kv"}
    assert "### task `kv`" in (tmp_path / "mixed.md").read_text()
    shutil.rmtree(folder)   # the archive alone: each attempt re-judged on its task's contract
    assert "; first on backup: c-baseline" in out.stderr and "; first on kv: kv-honest" in \
        out.stderr
    again = subprocess.run([EVLAB, "report", "mixed.tar.gz", "--format", "json", "--output",
                            "again.json"], capture_output=True, text=True, cwd=tmp_path,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again.json").read_text())["campaign"]["leaderboard"] == \
        board["leaderboard"]
    # the dashboard's verdict panel lists each attempt's own task's clauses and gates
    from sessions.output.archive import load_archive
    from sessions.output.judged import JudgedStream
    from sessions.stream.replay import observations
    from tui.model import DashboardModel
    archive = load_archive(tmp_path / "mixed.tar.gz")
    model = DashboardModel(stream=JudgedStream(contracts=archive.contracts))
    for event in observations(archive.events):
        model.stream.publish(event)
    kv_rows = [c for c, _ in model.verdict_rows("kv-honest:baseline@1")]
    backup_rows = [c for c, _ in model.verdict_rows("c-baseline:normal@1")]
    assert kv_rows[:3] == ["stored", "destination-only", "honest-outcome"]
    assert "integrity" not in kv_rows and "stored" not in backup_rows
    assert backup_rows[:2] == ["integrity", "unchanged-no-upload"], backup_rows
    assert "gate durability" in backup_rows and "gate durability" not in kv_rows, kv_rows


def test_the_public_module_offers_what_docs_tasks_md_lists_and_a_server_loads_no_judge():
    """evlab.task: every name the document's tables name resolves, what a predicate may import
    is a part of it, and a server that takes its record log from it does not load the judge."""
    import evlab.task as public
    from sessions.spec.task_predicates import PREDICATE_NAMES
    section = DOC.read_text().split("## The public module: `evlab.task`")[1].split("\n## ")[0]
    named = {n for cell in re.findall(r"^\| (.*?) \|", section, re.M)
             for n in re.findall(r"`(\w+)", cell)} - {"name"}
    assert named and named <= set(public.__all__), named - set(public.__all__)
    assert set(PREDICATE_NAMES) <= set(public.__all__)
    for name in public.__all__:
        assert getattr(public, name) is not None
    code = ("import sys\nfrom evlab.task import EventLog, exit_with_parent\n"
            "print(sorted(m for m in sys.modules if m.startswith(('sessions.judging', "
            "'sessions.cli', 'probes'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


# ---------------------------------------------------------------- the library's words on it

# backup's words, which no reason on another task may use
BACKUP_WORDS = re.compile(r"\b(source|check|put|uploads?|backups?|receiver|store|hash_file)\b",
                          re.I)
CPU_CLAUSE = """
[clauses.cpu-budget]
holds_when = "no busy-waiting"
decided_by = "the kernel's on-CPU stretches and the cgroup's CPU"

[thresholds]
cpu_startup_allowance_ns = 500_000_000
cpu_ns_per_byte = 5
cpu_ns_per_exec = 2_000_000
cpu_stretch_allowance_ns = 40_000_000
cpu_startup_stretch_ns = 50_000_000
cpu_waste_ns = 320_000_000
cpu_view_tolerance_ns = 30_000_000
pace_reference_ns = 151_700
pace_noise = 1.25
pace_max = 3.0
"""


def _kv_attempt(task, busy_ms: float, start_ms: float, busy_sum_ms: float, stored: bool):
    """A grading attempt of the kv task as a run publishes it: a SET before invocation 1 (a
    state the server loaded), the client's SET, a non-blocking connect elsewhere left in
    progress (EINPROGRESS) and one refused, and the kernel's CPU figures."""
    from sessions.stream import events as E
    sid, kv, decoy = "baseline@1", 4000, 4001
    counters = {"busy_max_ns": int(busy_ms * 1e6), "busy_start_max_ns": int(start_ms * 1e6),
                "busy_ns": int(busy_sum_ms * 1e6), "busy_start_ns": int(start_ms * 1e6),
                "oncpu_ns": 30_000_000, "source_read_bytes": 0, "sock_sent_bytes": 19,
                "sock_recv_bytes": 3, "connects": 3, "file_ops": 0, "lost_events": 0,
                "egress_lost": 0, "leftover_tasks": 0, "execs": 1}
    def rec(n, event, **fields):
        return E.ServerRecord(0, sid, n, "kv", event, fields)
    return [
        E.SessionStarted(0, 1, "t", "k", "bcc", "off", task.contract.version, (sid,),
                         task_id=task.id, task_version=task.version, task_sha256=task.sha256,
                         clauses=task.clause_ids, gates=task.contract.gates),
        E.GradeStarted(0, ("python3", "c.py"), "/usr/bin/python3", "0" * 64, {}, {}, 1,
                       ("baseline",)),
        E.ScenarioStarted(0, sid, "/usr/bin/python3", "0" * 64, (), (), (), kv, decoy, 0,
                          "baseline.toml", attempt=1, base="baseline",
                          servers={"kv": {"role": "endpoint", "port": kv},
                                   "decoy": {"role": "decoy", "port": decoy}},
                          display=task.display()),
        rec(0, "listening", port=kv), rec(0, "set", conn=0, key="greeting"),
        E.VerifierResult(0, sid, 0, False, "the server holds greeting = None"),
        E.PhaseChanged(0, sid, "invocation", 1),
        E.ClientLaunched(0, sid, 1, 100, ("python3", "c.py"), "/tmp/run-1", ""),
        E.ConnectObserved(0, sid, 1, 100, "AF_INET", "127.0.0.1", kv, 0),
        E.ConnectObserved(0, sid, 1, 100, "AF_INET", "127.0.0.1", 9, -115),
        E.ConnectObserved(0, sid, 1, 100, "AF_INET", "127.0.0.1", 7, -111),
        E.ClientClaim(0, sid, 1, {"claim": "completed"}),
        E.ClientExited(0, sid, 1, 0, False, 1_000_000, 1_000_000),
        rec(1, "connection_opened", conn=1), rec(1, "set", conn=1, key="greeting"),
        rec(1, "connection_closed", conn=1),
        E.CleanupObserved(0, sid, 1, (), (), (), (), True),
        E.BoundaryObserved(0, sid, 1, 35_000_000, 1 << 20, {}, 0, True),
        E.EgressSummary(0, sid, 1, ({"address": "127.0.0.1", "calls": 1, "kind": "connect",
                                     "pid": 100, "port": kv, "protocol": "tcp",
                                     "refused": 0},), ()),
        E.CounterSample(0, sid, 1, counters, {}, (), final=True),
        E.PhaseChanged(0, sid, "verify", 1),
        E.VerifierResult(0, sid, 1, stored, "the server holds greeting = hello" if stored
                         else "the server holds greeting = None"),
        E.PhaseChanged(0, sid, "judging"), E.PhaseChanged(0, sid, "done")]


@pytest.mark.parametrize(("busy_ms", "start_ms", "busy_sum_ms", "stored", "cpu"), [
    (6, 2, 0, True, "pass"), (200, 2, 0, True, "fail"), (6, 120, 0, True, "fail"),
    (6, 2, 900, False, "fail")])
def test_the_librarys_reasons_on_a_users_task_are_in_its_own_words(tmp_path, busy_ms,
                                                                     start_ms, busy_sum_ms,
                                                                     stored, cpu):
    from sessions.output import document
    from sessions.output.judged import JudgedStream
    from sessions.stream.evidence import EvidenceBook
    folder = write_kv(tmp_path)
    with open(folder / "contract.toml", "a") as f:
        f.write(CPU_CLAUSE)
    task = load_task(folder)
    book = EvidenceBook()
    stream = JudgedStream(book=book)
    for event in _kv_attempt(task, busy_ms, start_ms, busy_sum_ms, stored):
        stream.publish(event)
    (ev,) = book.scenarios.values()
    verdicts = {v.clause: v for v in ev.verdicts}
    assert verdicts["cpu-budget"].status == cpu
    assert verdicts["stored"].status == ("pass" if stored else "fail")
    reasons = ([v.reason for v in ev.verdicts] + [g.reason for g in ev.gates]
               + [r.detail for r in ev.risks] + [ev.attempt.reason])
    assert reasons and not [r for r in reasons if BACKUP_WORDS.search(r)], reasons
    if start_ms > 50:
        assert "at start-up (busy-waiting)" in verdicts["cpu-budget"].reason
    # a connect left in progress is no failure; one refused is
    details = [r.detail for r in ev.risks if r.kind == "other-connection"]
    assert any("127.0.0.1:9 (in progress, non-blocking)" in d for d in details), details
    assert any("127.0.0.1:7 (result -111)" in d for d in details), details
    # the set-up's record counts toward invocation 1's figure
    (inv,) = document.build(book)["scenarios"][0]["invocations"]
    assert inv["figures"] == {"keys set": 2}
