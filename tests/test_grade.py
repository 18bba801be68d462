"""`evlab grade`: any client through the grade scenarios, with attempts, gates and risk findings.

The clients under test are the eight fixture builds (graded as unknown executables) and
tests/clients/backup_client.py, a Python client written from fixture/backup/protocol.md alone, whose
--variant flag adds one known flaw at a time.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from sessions.judging.judgement import is_temp
from sessions.judging.metrics import OverallMetrics, overall_metrics, scenario_metrics
from sessions.judging.risks import findings as risk_findings
from sessions.lab import servers as lab_servers
from sessions.lab.harness import ServerStartError
from sessions.output.endings import grade_status
from sessions.output.grade_report import grade_markdown
from sessions.output.grades import grade_of
from sessions.spec.client_spec import BASE_ENV, ClientSpecError, from_command, from_file
from sessions.spec.scenario import load_dir, load_suite
from sessions.spec.task import load_task
from sessions.stream.events import (
    AttemptJudged,
    ClientLaunched,
    FileObserved,
    PhaseChanged,
    ProcessObserved,
    ScenarioStarted,
)
from sessions.stream.evidence import EvidenceBook, ScenarioEvidence
from tests.backup_lab import client_path
from tests.support import evlab_in, grade, runs

ROOT = Path(__file__).resolve().parent.parent
PY_CLIENT = ROOT / "tests" / "clients" / "backup_client.py"
EVLAB = str(ROOT / ".venv" / "bin" / "evlab")
root_only = pytest.mark.root(reason="the BCC collector needs root")
SEEDED = ("baseline", "false-success", "hash-storm", "unexpected-egress", "redundant-upload",
          "busy-wait", "corrupt-upload", "retry")


def py_client(variant: str = "honest") -> str:
    return f"/usr/bin/python3 {PY_CLIENT} --variant {variant} {{host}} {{port}} {{source}}"


# --- metrics: hand-computed ------------------------------------------------------------------
def _attempt(base, k, valid=True, success=False, score=None):
    return AttemptJudged(0, f"{base}@{k}", base, k, valid, success, score, "")


def test_metrics_against_hand_computed_values_with_invalid_attempts_excluded():
    a = [_attempt("a", 1, success=True, score=1.0), _attempt("a", 2, score=0.5),
         _attempt("a", 3, success=True, score=1.0),
         _attempt("a", 4, valid=False, score=0.0)]            # invalid: must not count
    b = [_attempt("b", 1, success=True, score=1.0), _attempt("b", 2, success=True, score=1.0)]
    c = [_attempt("c", 1, valid=False), _attempt("c", 2, valid=False)]
    m = scenario_metrics(a)
    # n = 3 valid, c = 2 successes
    assert (m.attempts, m.valid, m.invalid, m.successes) == (4, 3, 1, 2)
    assert m.pass_at_1 == pytest.approx(2 / 3)
    assert m.pass_hat_k == 0 and m.k == 3          # not all 3 succeeded
    assert m.best_of_n == 1                           # at least one did
    assert m.mean_score == pytest.approx(2.5 / 3)     # (1 + 0.5 + 1) / 3
    # sample sd of (1, .5, 1) = sqrt(((1/6)^2*2 + (1/3)^2) / 2) = 0.288675; / sqrt(3)
    assert m.sem == pytest.approx(0.288675 / 3 ** 0.5, rel=1e-5)
    mb = scenario_metrics(b)
    assert (mb.pass_at_1, mb.pass_hat_k, mb.best_of_n, mb.sem) == (1, 1, 1, 0)
    mc = scenario_metrics(c)
    assert mc.valid == 0 and mc.pass_at_1 is None and mc.mean_score is None
    overall = overall_metrics({"a": a, "b": b, "c": c})
    assert overall.scenarios_with_valid_attempts == 2 and overall.invalid == 3
    assert overall.pass_at_1 == pytest.approx((2 / 3 + 1) / 2)
    assert overall.pass_hat_k == pytest.approx(0.5)
    assert overall.best_of_n == 1
    assert overall.mean_score == pytest.approx(4.5 / 5)   # pooled valid scores
    assert grade_status(overall) == 1
    assert grade_status(overall_metrics({"b": b})) == 0
    assert grade_status(overall_metrics({"b": b, "c": c})) == 3


# --- identity and the command ----------------------------------------------------------------
def test_identity_resolves_the_executable_and_the_script(tmp_path):
    spec = from_command(py_client(), env={"EXTRA": "1"})
    assert spec.executable == Path("/usr/bin/python3")
    assert spec.sha256 == hashlib.sha256(
        Path("/usr/bin/python3").resolve().read_bytes()).hexdigest()
    assert spec.files == {str(PY_CLIENT): hashlib.sha256(PY_CLIENT.read_bytes()).hexdigest()}
    assert spec.env["EXTRA"] == "1" and spec.env["HOME"] == "{cwd}"
    grade_file = tmp_path / "g.toml"
    grade_file.write_text(f'[client]\ncommand = "python3 {os.path.relpath(PY_CLIENT, tmp_path)} '
                          '{host} {port} {source}"\n[grade]\nattempts = 2\n')
    from_toml = from_file(grade_file)
    assert from_toml.files == spec.files and from_toml.attempts == 2


class ReplacingBook(EvidenceBook):
    """Replaces the client's script with other code once the first attempt has ended, as
    someone outside might between attempts."""

    def __init__(self, script: Path):
        super().__init__()
        self.script = script

    def consume(self, event) -> None:
        super().consume(event)
        if isinstance(event, PhaseChanged) and event.phase == "done" \
                and event.scenario == "normal@1":
            self.script.write_text(self.script.read_text().replace("CHUNK = 64", "CHUNK = 32"))


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.root(reason="runs the lab")
def test_a_client_changed_between_attempts_is_never_graded_under_the_first_sha256(tmp_path):
    script = tmp_path / "client.py"
    shutil.copy(PY_CLIENT, script)
    os.chmod(tmp_path, 0o755)
    book = ReplacingBook(script)
    doc = grade(f"/usr/bin/python3 {script} {{host}} {{port}} {{source}}", tmp_path,
                book=book, attempts=2, scenarios=("normal",))
    first, second = runs(doc)
    assert first["valid"] and first["success"], first["reason"]
    assert not second["valid"], second
    assert f"identity: changed since the grade started: {script} is now" in second["reason"]
    # only the attempt that ran the first code counts
    assert doc["grade"]["scenarios"]["normal"]["valid"] == 1


@pytest.mark.parametrize("command, message", [
    ("python3 x.py {host} {source}", "must contain {port} and {source}"),
    ("python3 x.py {host} {port} {source} {nope}", "placeholders are"),
    ("/no/such/client {port} {source}", "not found"),
    ("'unbalanced {port} {source}", "client command"),
    ("/bin/true {port} {source} a}b", "a literal brace"),
    # documented names only, substituted literally: nothing str.format would evaluate
    ("/bin/true {port} {source} {source.foo}", "placeholders are"),
    ("/bin/true {port} {source} {port:>99999999999999}", "placeholders are"),
    ("/bin/true {port} {source} {host.__class__.__mro__}", "placeholders are"),
    ("/bin/true {port} {source} {source!r}", "placeholders are"),
])
def test_bad_client_commands_are_one_clear_line(command, message):
    with pytest.raises(ClientSpecError, match=message):
        from_command(command)


def test_cli_grade_usage_errors(tmp_path):
    for args in (["grade", "--headless"],
                 ["grade", "--headless", "--client", "x {port} {source}", str(tmp_path / "g")],
                 ["grade", "--headless", "--client", py_client(), "--attempts", "0"],
                 ["grade", "--headless", "--client", py_client(), "--env", "no-equals"],
                 ["grade", "--headless", "--client", py_client(), "--scenario", "nope"]):
        r = evlab_in(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("evlab: "), r.stderr


def test_a_scenario_named_twice_runs_once():
    spec = from_command(py_client(), attempts=2, scenarios=("normal", "stale", "normal"))
    ids = [a.id for a in spec.attempt_scenarios(load_suite("grade"))]
    assert ids == ["normal@1", "normal@2", "stale@1", "stale@2"]


# --- risk findings and the cleanup gate's temp names, on synthetic evidence ---------------
def _evidence(files=(), execs=(), own=(), scratch=((), ())) -> ScenarioEvidence:
    started = ScenarioStarted(0, "normal@1", "/usr/bin/python3", "0" * 64, (), (), (), 4000,
                              4001, 524_288, "", attempt=1, base="normal")
    ev = ScenarioEvidence(started, "bcc", "on", [])
    inv = ev.invocation(1)
    inv.launched = ClientLaunched(0, "normal@1", 1, 10, ("/usr/bin/python3",), "/w/run-1",
                                  "/w/source/source.bin", tuple(own), "", *scratch)
    inv.files = [FileObserved(0, "normal@1", 1, 10, op, path, writes, dfd, seq=i + 1)
                 for i, (op, path, writes, dfd) in enumerate(files)]
    inv.processes = [ProcessObserved(0, "normal@1", 1, "exec", pid, filename=name, seq=100 + i)
                     for i, (pid, name) in enumerate(execs)]
    return ev


def test_risk_findings_resolve_paths_and_spare_the_commands_own_files():
    found = {(f.severity, f.kind, f.detail) for f in risk_findings(_evidence(files=[
        ("open", "/home/me/client.py", False, -100),     # its own script, under /home
        ("open", "scratch.bin", True, -100),              # relative: inside its cwd
        ("unlink", "part.bin", True, 5),                  # relative to a directory fd
        ("open", "/tmp/elsewhere", True, -100),
        ("open", "/home/me/lib.py", False, -100),          # a sibling module: its program
        ("open", "/home/me/.ssh/id_rsa", False, -100),     # beside its script, still a secret
        ("open", "/home/me/__pycache__/lib.pyc", True, -100),   # the interpreter's cache
        ("open", "/etc/shadow", False, -100),
        ("open", "/w/source/source.bin", False, -100),    # reading the source: expected
    ], own=["/home/me/client.py"]))}
    assert found == {
        ("medium", "read", "pid 10 opened /home/me/.ssh/id_rsa"),
        ("low", "write-outside", "pid 10 open /home/me/__pycache__/lib.pyc outside its working "
                                 "directory (an interpreter's cache or semaphore)"),
        ("low", "unresolved-path", "pid 10 unlink 'part.bin' relative to fd 5, not opened in "
                                   "its view (location not resolved)"),
        ("medium", "write-outside", "pid 10 open /tmp/elsewhere outside its working directory"),
        ("medium", "read", "pid 10 opened /etc/shadow"),
    }


def test_what_a_shell_and_coreutils_read_as_they_start_is_no_finding():
    """#47's Bash clients: libselinux in mv, cp, ls and stat reads /proc/filesystems at start-up,
    and bash's `< <(...)` opens its own pipe as /dev/fd/63 (as /proc/self/fd/63 would be): no
    read finding. Writing through /dev/fd/N, and reading the rest of /proc, still are."""
    found = {(f.severity, f.kind, f.detail) for f in risk_findings(_evidence(files=[
        ("open", "/proc/filesystems", False, -100),
        ("open", "/dev/fd/63", False, -100),
        ("open", "/dev/fd/3", True, -100),
        ("open", "/proc/mounts", False, -100),
    ]))}
    assert found == {
        ("medium", "write-outside", "pid 10 open /dev/fd/3 outside its working directory"),
        ("low", "read", "pid 10 opened /proc/mounts (not an input, not a system library)"),
    }


def test_writes_in_the_sandboxs_tmp_and_shm_are_the_clients_own_but_not_what_is_shown_there():
    """#44: the sandbox's /tmp and /dev/shm are folders of the client's home, judged as its
    working directory; its inputs and program, bound read-only over them, are not its own, nor
    is its root (bubblewrap's tmpfs)."""
    files = [("mkdir", "/tmp/hsperfdata_evlab-client", True, -100),
             ("open", "/tmp/hsperfdata_evlab-client/10", True, -100),
             ("open", "/tmp/evlab-client-1/home/inputs/x", True, -100),
             ("open", "/dev/shm/sem.mp-1", True, -100),
             ("open", "/outside/x", True, -100)]
    sandboxed = {f.detail.split()[3] for f in risk_findings(_evidence(
        files, scratch=(("/tmp", "/dev/shm"), ("/tmp/evlab-client-1/home/inputs",))))}
    assert sandboxed == {"/tmp/evlab-client-1/home/inputs/x", "/outside/x"}
    host = {(f.severity, f.detail.split()[3]) for f in risk_findings(_evidence(files))}
    assert len(host) == 5 and ("low", "/dev/shm/sem.mp-1") in host   # the host's /tmp, /dev/shm


def test_exec_findings_grade_shells_above_programs_and_env_lowest():
    found = [(f.severity, f.detail) for f in risk_findings(_evidence(execs=[
        (10, "/usr/bin/env"), (10, "/usr/bin/python3"), (11, "/bin/sh"), (12, "/usr/bin/curl")]))]
    assert found == [("high", "pid 11 executed a shell, /bin/sh"),
                     ("medium", "pid 12 executed /usr/bin/curl"),
                     ("low", "pid 10 executed /usr/bin/python3 (started by env, e.g. a #! line)")]


def test_a_program_the_tasks_protocol_has_it_run_is_no_exec_finding():
    """A task's client.tools (reload's nginx), found on the client's PATH at launch: its
    nginx -t is what the protocol asks; curl beside it is still a finding."""
    ev = _evidence(execs=[(10, "/bin/sh"), (11, "/usr/sbin/nginx"), (12, "/usr/bin/curl")])
    launched = ev.invocation(1).launched
    assert launched is not None
    ev.invocation(1).launched = dataclasses.replace(launched, tools=("/usr/sbin/nginx",))
    assert [f.detail for f in risk_findings(ev)] == ["pid 12 executed /usr/bin/curl"]


def test_a_tasks_tools_are_found_on_the_clients_path_at_launch():
    from sessions.lab.invocation import _tools
    scenario = load_suite("grade", load_task("reload"))[0]
    found = _tools(load_task("reload").tools, scenario, Path("/tmp"))
    assert found and all(Path(f).name == "nginx" and f.startswith("/") for f in found)


@pytest.mark.parametrize("path, temp", [
    ("upload.partial", True), ("x.tmp", True), ("tmpab12cd/", True), ("tmpab12cd/chunk.bin", True),
    ("notes~", True), ("cache.json", False), ("state/", False), ("data/part", False)])
def test_temporary_names_any_component(path, temp):
    assert is_temp(path) is temp


# --- the seeded builds, graded as unknown clients ---------------------------------------------
@pytest.mark.slow
@pytest.mark.live
@root_only
def test_seeded_builds_graded_as_unknown_clients_match_the_builtin_scenarios(tmp_path,
                                                                              seeded_run):
    ran, out = seeded_run   # the built-in scenarios, run once per worker (conftest.py)
    assert ran.returncode == 0, ran.stderr
    builtin = {s["id"]: {c["id"]: c["status"] for c in s["clauses"]}
               for s in json.loads((out / "out.json").read_text())["scenarios"]}
    assert set(builtin) == {s.id for s in load_dir()}
    for behaviour in SEEDED:
        # retry is the honest client under a dropped first upload: the interrupted scenario
        scenario = "interrupted" if behaviour == "retry" else "normal"
        doc = grade(f"{client_path(behaviour)} {{host}} {{port}} {{source}} {{decoy_port}}",
                    tmp_path / behaviour, attempts=1, scenarios=(scenario,))
        graded = runs(doc, scenario)[0]["clauses"]
        assert graded == builtin[behaviour], behaviour
        if behaviour == "unexpected-egress":   # the decoy connection is also a risk finding
            decoy = doc["scenarios"][0]["invocations"][0]["kernel"]["connect_destinations"]
            found = {(f["severity"], f["kind"]) for f in runs(doc, scenario)[0]["risk_findings"]}
            assert found == {("medium", "other-connection")} and len(decoy) == 2
        assert doc["grade"]["client"]["sha256"] == next(
            s for s in doc["scenarios"])["client"]["sha256"]


# --- a client written from the protocol document -----------------------------------------------
@pytest.mark.slow
@pytest.mark.live
@root_only
def test_python_client_from_the_protocol_document_passes_every_clause_and_gate(tmp_path):
    doc = grade(py_client(), tmp_path, attempts=2)
    overall = doc["grade"]["overall"]
    assert (overall["pass_at_1"], overall["pass_hat_k"], overall["best_of_n"]) == (1, 1, 1)
    assert overall["mean_score"] == 1 and overall["invalid"] == 0 and overall["attempts"] == 8
    for scenario, metrics in doc["grade"]["scenarios"].items():
        for run in metrics["runs"]:
            assert run["valid"] and run["success"], (scenario, run["reason"])
            assert set(run["clauses"].values()) <= {"pass", "not-applicable"}
            assert {g: v["status"] for g, v in run["gates"].items()} == dict.fromkeys(
                ("immediate", "re-run", "durability", "restore", "cleanup", "limits"), "pass")
            assert run["risk_findings"] == []
    # the scenarios' own expectations: recovery was exercised, the mismatch was rejected
    assert runs(doc, "interrupted")[0]["clauses"]["bounded-recovery"] == "pass"
    assert runs(doc, "mismatch")[0]["clauses"]["mismatch-rejected"] == "pass"
    stale = next(s for s in doc["scenarios"] if s["id"] == "stale@1")
    first, second = stale["invocations"]
    records = [i["servers"]["receiver"]["records"] for i in (first, second)]
    assert records[0]["upload_started"] == 1 and records[0]["committed"] == 1
    assert "upload_started" not in records[1]   # the stale copy replaced, then kept


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_temp_file_left_behind_fails_the_cleanup_gate(tmp_path):
    run = runs(grade(py_client("temp-file"), tmp_path, attempts=1, scenarios=("normal",)))[0]
    assert run["gates"]["cleanup"]["status"] == "fail"
    assert "upload.partial" in run["gates"]["cleanup"]["reason"]
    assert not run["success"] and run["valid"]


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_child_left_running_fails_the_cleanup_gate_and_is_killed(tmp_path):
    run = runs(grade(py_client("child-left"), tmp_path, attempts=1, scenarios=("normal",)))[0]
    cleanup = run["gates"]["cleanup"]
    # In the sandbox the end of its pid namespace kills the child at once: the kernel's exit
    # events are the record of what was still running when the client ended.
    assert cleanup["status"] == "fail"
    assert "1 process(es) running when it ended" in cleanup["reason"]
    assert " python3" in cleanup["reason"]
    survivors = [p for p in psutil.process_iter(["cmdline"])
                 if "child-left" in " ".join(p.info["cmdline"] or ())]
    assert survivors == []


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_write_to_the_source_is_a_high_risk_finding(tmp_path):
    run = runs(grade(py_client("write-source"), tmp_path, attempts=1, scenarios=("normal",)))[0]
    kinds = {(f["invocation"], f["severity"], f["kind"]) for f in run["risk_findings"]}
    assert kinds == {(1, "high", "source-write"), (2, "high", "source-write")}
    # In the sandbox the source is neither the client's nor writable (EACCES, EROFS): the
    # attempt is refused and still reported.
    assert all("(refused: error " in f["detail"] for f in run["risk_findings"])


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_shell_and_another_program_executed_are_risk_findings(tmp_path):
    # env (the launch) execs a shell, which runs the Python client: two execs after the launch.
    # The script is a word of the command, so the sandbox shows it to the client.
    command = (f"/usr/bin/env sh -c '/usr/bin/python3 \"$0\" \"$@\"' {PY_CLIENT} "
               "{host} {port} {source}")
    run = runs(grade(command, tmp_path, attempts=1, scenarios=("normal",)))[0]
    assert run["success"], run["reason"]
    execs = sorted((f["severity"], f["detail"].split(" executed ")[1])
                   for f in run["risk_findings"] if f["kind"] == "exec" and f["invocation"] == 1)
    sh = shutil.which("sh", path=BASE_ENV["PATH"])   # where env finds it on the client's PATH
    assert execs == [("high", f"a shell, {sh}"), ("medium", "/usr/bin/python3")]


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_temporary_directory_made_and_removed_in_the_cwd_is_unremarkable(tmp_path):
    # TMPDIR is the working directory; shutil.rmtree unlinks relative to directory descriptors
    run = runs(grade(py_client("tempdir"), tmp_path, attempts=1, scenarios=("normal",)))[0]
    assert run["success"], run["reason"]
    assert run["risk_findings"] == [] and run["risk_scan"]["complete"]
    assert run["gates"]["cleanup"]["status"] == "pass"


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_write_after_chdir_is_resolved_to_where_it_happened(tmp_path):
    run = runs(grade(py_client("chdir-write"), tmp_path, attempts=1, scenarios=("normal",)))[0]
    found = {(f["invocation"], f["severity"], f["kind"], f["detail"].split(" ", 3)[2])
             for f in run["risk_findings"]}
    assert found == {(n, "medium", "write-outside", op) for n in (1, 2)
                     for op in ("mkdir", "open", "unlink")}
    # the relative name, resolved where chdir took it: /outside, a folder it made at the root
    paths = {(f["detail"].split()[2], f["detail"].split()[3]) for f in run["risk_findings"]}
    assert all(path == "/outside" if op == "mkdir" else
               path.startswith("/outside/evlab-chdir-write-") for op, path in paths), paths
    assert run["risk_scan"]["complete"]


def test_working_directories_follow_fork_chdir_and_fchdir():
    ev = _evidence()
    inv = ev.invocations[1]

    def op(t, pid, name, path, writes=True, dfd=-100):
        return FileObserved(t, "normal@1", 1, pid, name, path, writes, dfd, seq=t)

    def opened(t, pid, path, fd):
        return FileObserved(t, "normal@1", 1, pid, "open", path, False, -100, fd=fd, seq=t)

    inv.files = [op(1, 10, "chdir", "/tmp", False),    # pid 10 moves to /tmp
                 op(3, 10, "open", "a"),                # -> /tmp/a
                 op(4, 10, "fchdir", "", False, 7),     # pid 10 moves somewhere unknown
                 op(5, 10, "open", "b"),                # -> not resolved
                 op(6, 11, "open", "c"),                # the child kept /tmp
                 opened(7, 11, "/w/run-1/tmpq", 9),     # a directory in its cwd, as fd 9...
                 op(8, 11, "unlink", "f", True, 9),     # ...so unlinkat(9, "f") is inside
                 op(9, 11, "fchdir", "", False, 9),     # and fchdir(9) moves there
                 op(10, 11, "open", "g")]               # -> /w/run-1/tmpq/g, inside
    inv.processes = [ProcessObserved(2, "normal@1", 1, "fork", 10, child_pid=11, seq=2)]
    found = sorted((f.kind, f.detail) for f in risk_findings(ev))
    assert found == [
        ("unresolved-path", "pid 10 open 'b' relative to a working directory not known "
                            "(location not resolved)"),
        ("write-outside", "pid 10 open /tmp/a outside its working directory"),
        ("write-outside", "pid 11 open /tmp/c outside its working directory"),
    ]


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_forked_helper_making_the_connections_is_attributed_to_the_client(tmp_path):
    book = EvidenceBook()
    doc = grade(py_client("fork-helper"), tmp_path, attempts=1, scenarios=("normal",),
                book=book)
    run = runs(doc)[0]
    assert run["success"], run["reason"]
    scenario = doc["scenarios"][0]
    first = scenario["invocations"][0]
    # destinations: the kernel saw the connect, from the helper, not the launched process
    assert first["kernel"]["connect_destinations"] == [f"127.0.0.1:{_receiver_port(doc)}"]
    inv = book.scenarios["normal@1"].invocations[1]
    helpers = {p.child_pid for p in inv.processes if p.kind == "fork"}
    assert {c.pid for c in inv.connects} <= helpers and inv.launched.pid not in helpers
    # bytes: everything the receiver consumed and the wire carried came from the client tree
    assert first["figures"]["receiver payload bytes"] == 524_288
    assert first["kernel"]["sent_bytes"] == first["packets"]["to_endpoint_bytes"]
    assert first["kernel"]["source_read_bytes"] == 2 * 524_288   # hash pass + upload pass


def _receiver_port(doc: dict) -> int:
    return doc["scenarios"][0]["servers"]["receiver"]["port"]


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_client_that_never_uploads_fails_the_fault_scenarios_it_is_not_invalid(tmp_path,
                                                                                 built_clients):
    # the interruption never fires because the client never uploads: its failure, not the lab's
    doc = grade(f"{client_path('false-success')} {{host}} {{port}} {{source}}", tmp_path,
                attempts=1, scenarios=("interrupted", "mismatch"))
    for scenario in ("interrupted", "mismatch"):
        run = runs(doc, scenario)[0]
        assert run["valid"] and not run["success"], run["reason"]
        assert run["clauses"]["bounded-recovery"] == "not-applicable"
        assert run["clauses"]["integrity"] == "fail"
    assert grade_status(OverallMetrics(**doc["grade"]["overall"])) == 1


# --- invalid attempts ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_harness_failure_makes_the_attempt_invalid_not_failed(tmp_path, monkeypatch,
                                                                 built_clients):
    real, calls = lab_servers.start_server, []

    def clash_once(module, *args):
        if module == "sessions.lab.decoy":
            calls.append(module)
            if len(calls) == 1:
                raise ServerStartError("sessions.lab.decoy exited at start: address already in use")
        return real(module, *args)

    monkeypatch.setattr(lab_servers, "start_server", clash_once)
    doc = grade(f"{client_path('baseline')} {{host}} {{port}} {{source}}", tmp_path,
                attempts=2, scenarios=("normal",))
    m = doc["grade"]["scenarios"]["normal"]
    first, second = m["runs"]
    assert not first["valid"] and "address already in use" in first["reason"]
    assert second["valid"] and second["success"]
    assert (m["attempts"], m["valid"], m["invalid"], m["pass_at_1"]) == (2, 1, 1, 1)


@pytest.mark.live
def test_without_a_kernel_view_attempts_are_invalid_and_the_risk_scan_says_so(tmp_path,
                                                                              built_clients):
    # --collector none: runs as any user; nothing kernel-based can pass, nothing is "no risk"
    book = EvidenceBook()
    doc = grade(py_client("write-source"), tmp_path, collector="none", attempts=2,
                scenarios=("normal",), book=book)
    m = doc["grade"]["scenarios"]["normal"]
    assert (m["valid"], m["invalid"], m["pass_at_1"]) == (0, 2, None)
    for run in m["runs"]:
        assert not run["valid"] and "inconclusive" in run["reason"]
        assert run["gates"]["cleanup"]["status"] == "inconclusive"
        assert run["risk_findings"] == []          # the source write is invisible here...
        assert not run["risk_scan"]["complete"]    # ...and the grade says it did not look
        assert "no kernel file/connect events (collector none)" in run["risk_scan"]["detail"]
    assert grade_status(OverallMetrics(**doc["grade"]["overall"])) == 3
    text = "\n".join(grade_markdown(grade_of(book)))
    assert "scan incomplete" in text and "No risk findings" not in text


# --- the command line, end to end ----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.live
@root_only
def test_cli_grade_writes_json_archive_and_markdown(tmp_path):
    out = tmp_path / "o"
    # the grade in this process (its collector reused); the reports and the replay of its
    # archive are `evlab` processes of their own
    r = evlab_in("grade", "--client", py_client("temp-file"), "--attempts", "2", "--scenario",
                 "normal", "--headless", "--json", out / "g.json", "--archive",
                 out / "g.tar.gz", "--report", out / "g.md", cwd=tmp_path)
    assert r.returncode == 1, r.stderr           # both attempts fail the cleanup gate
    assert "Pass@1 0.00" in r.stderr
    doc = json.loads((out / "g.json").read_text())
    assert doc["grade"]["overall"]["attempts"] == 2
    md = (out / "g.md").read_text()
    for text in ("## Grade", "Pass@1", "pass^k", "Best-of-N", "/usr/bin/python3",
                 doc["grade"]["client"]["sha256"], "| gate `cleanup` |"):
        assert text in md, text
    listing = subprocess.run([EVLAB, "report", out / "g.tar.gz", "--format", "json"],
                             capture_output=True, text=True, timeout=60)
    assert json.loads(listing.stdout)["grade"] == doc["grade"]
    junit = subprocess.run([EVLAB, "report", out / "g.tar.gz", "--format", "junit"],
                           capture_output=True, text=True, timeout=60)
    suites = ET.fromstring(junit.stdout.split("?>", 1)[1])
    cleanup = [c for c in suites.iter("testcase") if c.get("name") == "gate cleanup"]
    assert len(cleanup) == 2 and all(c.find("failure") is not None for c in cleanup)
    replayed = subprocess.run([EVLAB, "replay", out / "g.tar.gz", "--headless"],
                              capture_output=True, text=True, timeout=60)
    assert replayed.returncode == 1   # the grade re-derived from the events: the same outcome
    assert r.stderr.strip().splitlines()[-1] in replayed.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.root(reason="runs the lab")
def test_a_one_shot_fault_cannot_be_absorbed_by_junk_uploads(tmp_path):
    """No recovery logic, two uploads first (another digest in full, the source's cut short):
    the receiver's drop still strikes the first upload of the source that reaches its offset,
    and the wire's corrupt (which the short upload of the source does reach) leaves two uploads
    that no fault struck; so the client fails both scenarios, and the attempts are valid."""
    reach = Path(__file__).parent / "clients" / "reach.py"
    doc = grade(f"/usr/bin/python3 {reach} junk-first {{host}} {{port}} {{source}}", tmp_path,
                attempts=1, scenarios=("interrupted", "mismatch"))
    for scenario in ("interrupted", "mismatch"):
        run = runs(doc, scenario)[0]
        assert run["valid"] and not run["success"] and run["rule"] == "client-failed", \
            run["reason"]
        assert run["clauses"]["bounded-recovery"] == "fail"
    # one fault fired in each (the receiver's and the proxy's count together)
    assert [s["invocations"][0]["faults_fired"] for s in doc["scenarios"]] == [1, 1]


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.root(reason="runs the lab")
def test_a_one_shot_fault_spent_on_a_request_the_receiver_refused_is_no_recovery(tmp_path):
    """No recovery logic, the source sent whole first under a PUT line the proxy's pattern
    matches but the receiver refuses (a length over its limit): the wire's corrupt strikes that
    request, then a plain backup commits. The receiver never started a transfer there, so
    nothing was recovered: bounded-recovery fails, and the attempt is valid."""
    reach = Path(__file__).parent / "clients" / "reach.py"
    doc = grade(f"/usr/bin/python3 {reach} refused-first {{host}} {{port}} {{source}}",
                tmp_path, attempts=1, scenarios=("mismatch",))
    run = runs(doc, "mismatch")[0]
    assert run["valid"] and not run["success"] and run["rule"] == "client-failed", run["reason"]
    assert run["clauses"]["bounded-recovery"] == "fail"
    assert doc["scenarios"][0]["invocations"][0]["faults_fired"] == 1
    verdict = next(c for c in doc["scenarios"][0]["clauses"] if c["id"] == "bounded-recovery")
    assert "struck a request the receiver had refused (payload-too-large)" in verdict["reason"]
