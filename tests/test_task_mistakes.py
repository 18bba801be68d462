"""A task folder's mistakes (#44), each one line naming the file and the key (or the server, or
the clause), exit status 2 from `run`, `grade` and `campaign` alike and one EvlabError from the
API, with nothing written and nothing left behind. Each folder is docs/tasks.md's kv task with
one thing wrong. What a folder names is checked when it is read, before any lab starts; a
server that dies before it listens is found as the first lab starts it."""

import json
import os
from pathlib import Path

import psutil
import pytest

import evlab
from sessions.judging.clauses import PREDICATES
from sessions.output.grades import ClientGrade
from sessions.spec.task import TaskError, load_task
from tests.leftovers import owned_dirs
from tests.support import evlab_in, write_kv

root_only = pytest.mark.root(reason="the lab's network and the client's sandbox need root")
# no kernel view, no capture: what these tests look at is found before either matters
LIGHT = ["--collector", "none", "--packets", "off"]
CRASH = 'raise SystemExit("boom: cannot open the store")\n'
VERIFIER = '[verifier]\ncommand = ["python3"]\nargs = ["{task}/verify.py", "{state}/kv.json"]'


def kv(tmp_path: Path, edits: dict[str, tuple[str, str]] | None = None,
       gone: tuple[str, ...] = ()) -> Path:
    """The document's kv folder with edits (file -> (old, new)) made and files removed."""
    folder = write_kv(tmp_path)
    for name, (old, new) in (edits or {}).items():
        text = (folder / name).read_text()
        assert old in text, (name, old)
        (folder / name).write_text(text.replace(old, new, 1))
    for name in gone:
        (folder / name).unlink()
    return folder


def evlab_cli(tmp_path: Path, *argv: str) -> tuple[int, str, str, int]:
    """The command line in tmp_path, run in this process (evlab_in: the parser and dispatch the
    console script runs, without its start-up each time): (status, stdout, stderr, the pid whose
    temporary folders are evlab's)."""
    done = evlab_in(*argv, cwd=tmp_path)
    return done.returncode, done.stdout, done.stderr, os.getpid()


def assert_refused(tmp_path: Path, folder: Path, line: str, read: bool = True,
                   lab: bool = False) -> None:
    """run, grade (command line and API) and campaign each say exactly `evlab: LINE`, exit 2,
    and leave no output, no temporary folder and no process behind (a campaign's line says
    first where it named the folder, when the folder is refused as it is read)."""
    client = f"python3 {folder}/client.py {{host}} {{port}}"
    (tmp_path / "c.toml").write_text(
        f'[campaign]\nname = "c"\nattempts = 1\ntask = "{folder}"\n\n[[client]]\n'
        f'name = "honest"\ncommand = ["python3", "{folder}/client.py", "{{host}}", '
        '"{port}"]\n')
    out = ["--json", "out.json", "--archive", "out.tar.gz"]
    named = "c.toml: campaign.task: " if read else ""
    for argv, said in ((["run", "--task", str(folder), "--suite", "seeded", *out], ""),
                       (["grade", "--task", str(folder), "--client", client, "--attempts", "1",
                         *out], ""),
                       (["campaign", "c.toml", *out], named)):
        status, stdout, stderr, pid = evlab_cli(tmp_path, *argv, "--headless", *LIGHT)
        assert (status, stdout, stderr) == (2, "", f"evlab: {said}{line}\n"), stderr
        assert not owned_dirs(pid)
        assert not list(tmp_path.glob("out.*")) and not list(tmp_path.glob("evlab-campaign-*"))
    with pytest.raises(evlab.EvlabError) as e:
        evlab.grade(client, task=folder, attempts=1, collector="none", packets="off",
                    json=tmp_path / "out.json")
    assert str(e.value) == line and not (tmp_path / "out.json").exists()
    with pytest.raises(evlab.EvlabError) as e:
        evlab.run(task=folder, suite="seeded", collector="none", packets="off")
    assert str(e.value) == line
    if lab:   # no server of the task left running
        assert not [p for p in psutil.process_iter(["cmdline"])
                    if str(folder) in " ".join(p.info["cmdline"] or [])]


# --- found when the folder is read --------------------------------------------------------------
def _not_executable(folder: Path) -> str:
    return f"not executable (chmod +x {folder}/check.py)"


READ = [   # (edits, files removed, what the line says after "task.toml: ")
    ({}, ("verify.py",), "verifier.args: {task}/verify.py: no such file in {folder}"),
    ({"task.toml": (VERIFIER, '[verifier]\ncommand = ["verify.py"]\nargs = ["{state}/kv.json"]')},
     ("verify.py",), "verifier.command: verify.py: no such file in {folder}, nor a program on "
                     "PATH"),
    ({"task.toml": ('command = ["python3"]\nargs = ["{task}/server.py"',
                    'command = ["pyhton3"]\nargs = ["{task}/server.py"')}, (),
     "servers.kv.command: pyhton3: no such file in {folder}, nor a program on PATH"),
    ({"task.toml": ('module = "sessions.lab.decoy"', 'module = "fixture.decoi"')}, (),
     "servers.decoy.module: no module 'fixture.decoi' in evlab"),
    ({"task.toml": ('[[figures]]', '[lifecycle]\ncommand = ["./check.py"]\n\n[[figures]]'),
      "check.py": ("", "#!/usr/bin/env python3\n")}, (), "lifecycle.command: ./check.py: "
                                                         "{not_executable}"),
    ({"task.toml": ('[[figures]]', '[states.full]\ncommand = ["client.py"]\n\n[[figures]]'),
      "client.py": ("#!/usr/bin/env python3\n", "")}, (),
     "states.full.command: client.py: has no #! line naming its interpreter (nor is it a "
     "binary)"),
    ({"task.toml": ('[[figures]]', '[steps.later]\ncommand = ["python3"]\nargs = '
                                   '["{task}/../elsewhere.py"]\n\n[[figures]]')}, (),
     "steps.later.args: {task}/../elsewhere.py: outside the task's folder"),
    ({"task.toml": ('command = ["python3"]\nargs = ["{task}/server.py"',
                    'command = ["/usr/bin/pyhton3"]\nargs = ["{task}/server.py"')}, (),
     "servers.kv.command: /usr/bin/pyhton3: no such program on this machine"),
]


@pytest.mark.parametrize(("edits", "gone", "says"), READ, ids=[r[2][:30] for r in READ])
def test_a_program_the_task_names_is_checked_when_the_folder_is_read(tmp_path, edits, gone,
                                                                     says):
    if "check.py" in edits:
        (tmp_path / "kv").mkdir()
        (tmp_path / "kv" / "check.py").write_text("")   # edited into a script, never chmod'ed
    folder = kv(tmp_path, edits, gone)
    line = f"{folder}/task.toml: " + says.replace("{folder}", str(folder)).replace(
        "{not_executable}", _not_executable(folder))
    with pytest.raises(TaskError) as e:
        load_task(folder)
    assert str(e.value) == line
    status, stdout, stderr, _ = evlab_cli(tmp_path, "list", "--task", str(folder))
    assert (status, stdout, stderr) == (2, "", f"evlab: {line}\n")


def test_every_command_and_the_api_refuse_a_folder_naming_a_missing_verifier(tmp_path):
    folder = kv(tmp_path, gone=("verify.py",))
    assert_refused(tmp_path, folder, f"{folder}/task.toml: verifier.args: {{task}}/verify.py: "
                                     f"no such file in {folder}")


def test_the_built_in_tasks_and_the_documents_task_still_load(tmp_path):
    assert [load_task(t).id for t in ("backup", "fetch", "mirror")] == ["backup", "fetch",
                                                                        "mirror"]
    task = load_task(write_kv(tmp_path))
    assert task.verifier is not None and task.verifier.command == ("python3",)
    assert [s.program.command for s in task.servers] == [("python3",), ()]


def test_a_command_naming_a_file_of_the_folder_runs_it_by_its_path(tmp_path):
    folder = kv(tmp_path, {"task.toml": (VERIFIER, '[verifier]\ncommand = ["./verify.py"]\n'
                                                   'args = ["{state}/kv.json"]'),
                           "verify.py": ("import json", "#!/usr/bin/env python3\nimport json")})
    (folder / "verify.py").chmod(0o755)
    verifier = load_task(folder).verifier
    assert verifier is not None and verifier.command == (str(folder / "verify.py"),)


def test_a_command_naming_a_program_of_the_machine_by_its_path_is_taken(tmp_path):
    """/usr/bin/python3 is the machine's, not a file the folder must hold."""
    python = "/usr/bin/python3"
    folder = kv(tmp_path, {"task.toml": ('command = ["python3"]\nargs = ["{task}/server.py"',
                                         f'command = ["{python}"]\nargs = ["{{task}}/server.py"')})
    assert load_task(folder).servers[0].program.command == (python,)


@root_only
def test_a_clause_naming_no_predicate_names_the_contract_and_the_clause(tmp_path):
    folder = kv(tmp_path, {"contract.toml": ('predicate = "integrity"',
                                             'predicate = "integrty"')})
    assert_refused(tmp_path, folder, f"{folder}/contract.toml: clauses.stored: no predicate "
                   f"'integrty' in the library ({', '.join(PREDICATES)}) or the task's own "
                   "(none)", read=False)


@root_only
def test_a_clause_whose_library_predicate_needs_unstated_thresholds_is_refused(tmp_path):
    folder = kv(tmp_path, {"contract.toml": ('predicate = "integrity"',
                                             'predicate = "cpu-budget"')})
    assert_refused(tmp_path, folder, f"{folder}/contract.toml: clauses.stored: its predicate "
                   "'cpu-budget' needs thresholds the contract does not state: [thresholds] "
                   "cpu_startup_allowance_ns, cpu_ns_per_byte, cpu_ns_per_exec, "
                   "cpu_stretch_allowance_ns, cpu_startup_stretch_ns, cpu_waste_ns, "
                   "cpu_view_tolerance_ns, pace_reference_ns, pace_noise, pace_max", read=False)


# --- found as the first lab starts the servers ----------------------------------------------------
@root_only
def test_a_server_dying_before_it_listens_is_the_tasks_mistake_named_by_its_name(tmp_path):
    folder = kv(tmp_path, {"server.py": ("import json", CRASH + "import json")})
    assert_refused(tmp_path, folder, 'task kv: server "kv" exited (status 1) before it '
                                     "listened: boom: cannot open the store", read=False, lab=True)


@root_only
def test_a_server_dying_at_start_after_it_served_is_an_invalid_attempt(tmp_path):
    """The first attempt's lab started it: a later death at start is not the task's mistake."""
    once = ('import os as _os, sys as _sys\n_mark = _os.path.join(_os.path.dirname('
            '_sys.argv[0]), "..", "started")\nif _os.path.exists(_mark):\n'
            '    raise SystemExit("boom: second start")\nopen(_mark, "w").close()\n')
    folder = kv(tmp_path, {"server.py": ("import json", once + "import json")})
    status, _, stderr, _ = evlab_cli(
        tmp_path, "grade", "--task", str(folder), "--client",
        f"python3 {folder}/client.py {{host}} {{port}}", "--attempts", "2", "--json", "g.json",
        "--headless", *LIGHT)
    runs = json.loads((tmp_path / "g.json").read_text())["grade"]["scenarios"]["baseline"][
        "runs"]
    # (without a kernel view no attempt is valid: the second is invalid for its server)
    assert "boom" not in runs[0]["reason"], stderr
    assert not runs[1]["valid"] and "exited at start: boom: second start" in runs[1]["reason"]
    # a grade of a script is named after the script, not its interpreter
    assert f"evlab: grade of {folder}/client.py: " in stderr and status == 3


@root_only
def test_a_verifier_printing_no_json_says_so_in_runs_line(tmp_path):
    folder = kv(tmp_path)
    (folder / "verify.py").write_text("print('all good')\n")   # and exits 0
    status, _, stderr, _ = evlab_cli(tmp_path, "run", "--task", str(folder), "--suite",
                                     "seeded", "--headless", *LIGHT)
    assert status == 3
    assert ("evidence missing for stored, destination-only, honest-outcome (harness: "
            "invocation 1: the task's verifier could not say: the verifier printed no JSON "
            "object with ok = true or false)") in stderr


# --- what a grade is named after ----------------------------------------------------------------
@pytest.mark.parametrize(("command", "files", "name"), [
    (["python3", "my_client.py", "{host}"], ["/w/my_client.py"], "my_client.py"),
    (["python3", "-u", "sub/c.py", "{host}"], ["/w/sub/c.py"], "sub/c.py"),
    (["node", "c.js"], ["/w/c.js"], "c.js"),
    (["python3", "-m", "client"], [], "/usr/bin/python3"),
    (["rsync", "-a", "rules.txt"], ["/w/rules.txt"], "/usr/bin/rsync"),
    (["./client", "{host}"], [], "/w/client"),
])
def test_a_grade_is_named_after_the_script_an_interpreter_runs(command, files, name):
    executable = "/w/client" if command[0] == "./client" else f"/usr/bin/{command[0]}"
    grade = ClientGrade({"command": command, "executable": executable,
                         "files": dict.fromkeys(files, "0" * 64)}, 1, {}, None)
    assert grade.name == name
