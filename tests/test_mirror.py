"""The mirror task (fixture/mirror/): its reference client's seeded behaviours each fail their
clauses, rsync and cp are judged as their documentation says they behave, and an honest client
written in another language from the task's document alone passes every attempt.

Each row of TABLE: a command as people use it, and per grade scenario the clauses it fails,
each with the reason from the tool's manual (rsync(1) 3.2.7, cp(1) coreutils 9.1). Every
clause not listed must pass or be not applicable.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sessions.judging.views import counter
from sessions.lab.inputs.tree import changes
from sessions.spec.scenario import load_suite
from sessions.spec.task import load_task
from sessions.stream.evidence import EvidenceBook
from tests.support import evlab_run, grade

ROOT = Path(__file__).resolve().parent.parent
NODE_CLIENT = ROOT / "tests" / "clients" / "mirror_client.js"
root_only = pytest.mark.root(reason="the BCC collector, mounts and the sandbox need root")

M, D, U, B, P, R, H = ("mirrored", "deletions-propagate", "unchanged-no-writes",
                       "bounded-writes", "no-rewrite-in-place", "rerun-reads-bounded",
                       "honest-outcome")
SCENARIOS = ("first", "older")

TABLE = {
    # rsync -a --delete: "--delete: delete extraneous files from dest dirs"; files are
    # written to a temporary name and renamed ("rsync ... creating a new copy of the file and
    # moving it into place"); the quick check skips files of the same size and mtime (-a keeps
    # mtimes). Everything passes.
    "rsync -a --delete": ("/usr/bin/rsync -a --delete {src}/ {dst}/", {}, {}),
    # without --delete rsync never deletes: the removed files stay (and it exits 0 over a
    # target that is not a mirror).
    "rsync -a": ("/usr/bin/rsync -a {src}/ {dst}/", {M, D, H}, {M, D, H}),
    # --inplace: "update destination files in-place ... rsync writes the updated data directly
    # to the destination file": a changed file is rewritten under its own name.
    "rsync -a --inplace --delete": ("/usr/bin/rsync -a --inplace --delete {src}/ {dst}/",
                                    {P}, {P}),
    # -c: "skip based on checksum, not mod-time & size": every file of the source is read
    # again on the unchanged re-run (nothing is written).
    "rsync -ac --delete": ("/usr/bin/rsync -ac --delete {src}/ {dst}/", {R}, {R}),
    # cp -a copies every file every time, over the existing one (opened with O_TRUNC: in
    # place), and never deletes: not a mirror once the source lost files, all bytes written
    # again after a change and on the re-run, the whole source read again.
    "cp -a": ("/bin/cp -a {src}/. {dst}/", {M, D, U, B, P, R, H}, {M, D, U, B, P, R, H}),
}


def _fails(doc: dict) -> dict[str, set[str]]:
    return {sc["id"].split("@")[0]: {v["id"] for v in sc["clauses"]
                                     if v["status"] not in ("pass", "not-applicable")}
            for sc in doc["scenarios"]}


SEEDED = ("baseline", "no-deletes", "rewrite-all", "in-place", "reread", "outside", "leave-temp",
          "false-claim")
NOISY = ("baseline", "outside", "reread", "in-place")


@root_only
@pytest.mark.parametrize("noise", [False, True], ids=["quiet", "noisy"])
def test_the_reference_client_passes_and_each_seeded_behaviour_fails_its_clauses(noise,
                                                                              tmp_path):
    """Quiet, and beside ambient noise (files written and deleted elsewhere, a copy of the
    client under its own name, traffic): nothing of the noise is the client's, so the verdicts
    and the kernel's exact bytes are the same. (CPU load beside the lab is make bench's soak:
    a hog per core beside repeated grades; here it would slow every test beside it.)"""
    # beside the noise, the scenarios whose clauses it could sway: files written elsewhere
    # (writes-inside), a copy of the client reading (rerun-reads-bounded), every byte written
    picked = NOISY if noise else SEEDED
    doc = evlab_run(tmp_path, "mirror", *(["--noise=traffic,twin,churn", *NOISY] if noise
                                          else ["--suite", "seeded"]))
    checks = {s["id"]: s["instrument_check"] for s in doc["scenarios"]}
    assert checks == dict.fromkeys(picked, "detected"), checks
    assert all(bool(s["noise"]) == noise for s in doc["scenarios"])
    base = next(s for s in doc["scenarios"] if s["id"] == "baseline")
    assert {v["status"] for v in base["clauses"]} == {"pass"}
    # every reason in mirror's words ("the source" is its own): none of backup's
    backup = re.compile(r"\b(check|put|uploads?|backups?|receiver|store)\b", re.I)
    said = [v["reason"] for s in doc["scenarios"] for v in s["clauses"]]
    assert not [r for r in said if backup.search(r)], said
    # the kernel's bytes, exact: the first sync writes the whole tree, the second exactly what
    # changed, the re-run nothing (sessions/lab/inputs/tree.py)
    written = [inv["figures"]["target bytes written"] for inv in base["invocations"]]
    assert written == [changes(0, 1)["changed_bytes"], changes(1, 2)["changed_bytes"], 0]


@root_only
def test_a_full_target_and_a_kill_mid_sync_are_judged_as_declared(tmp_path):
    """The lab's faults on the target: full 2 MiB into the first sync (the reference client
    fails honestly and leaves nothing cut short), killed 3 MiB into it (the next run leaves the
    target exact, nothing left over), and a client writing in place killed mid-file (a copy cut
    short under its final name)."""
    doc = evlab_run(tmp_path, "mirror", "--suite", "faults")
    assert {s["id"]: s["instrument_check"] for s in doc["scenarios"]} == dict.fromkeys(
        ("target-full", "killed", "killed-in-place"), "detected")


@root_only
@pytest.mark.parametrize("name", list(TABLE))
def test_rsync_and_cp_are_judged_as_their_manuals_say(name, tmp_path):
    command, first, older = TABLE[name]
    doc = grade(command, tmp_path, attempts=1, task="mirror")
    got = _fails(doc)
    assert got == {"first": set(first), "older": set(older)}, (got, [
        (v["id"], v["reason"]) for s in doc["scenarios"] for v in s["clauses"]
        if v["status"] == "fail"])


@root_only
def test_an_honest_node_client_from_the_document_alone_passes_every_attempt(tmp_path):
    """An attempt of every grade scenario; its repetitions (3 attempts of each, quiet and
    beside a CPU hog and another lab, every verdict compared) are make bench's soak."""
    node = shutil.which("node")
    assert node, "make setup installs Node.js"
    doc = grade(f"{node} {NODE_CLIENT} {{src}} {{dst}}", tmp_path, attempts=1, task="mirror")
    assert set(doc["grade"]["scenarios"]) == {s.id for s in load_suite("grade", load_task(
        "mirror"))}
    for name, sc in doc["grade"]["scenarios"].items():
        assert [(r["valid"], r["success"]) for r in sc["runs"]] == [(True, True)], (
            name, [(r["reason"]) for r in sc["runs"]])
        assert not [f for r in sc["runs"] for f in r["risk_findings"]
                    if f["kind"] in ("write-outside", "source-write")]


BASH_CLIENT = ROOT / "tests" / "clients" / "mirror_client.sh"


@root_only
def test_an_honest_bash_client_starting_a_process_per_file_passes_cpu_budget(tmp_path):
    """#44: a shell's mirror (find, then cp --preserve=timestamps to a temporary name and mv,
    one process each per file: ~430 programs started in the first sync) is within cpu-budget:
    starting programs is a shell's honest work. Every other clause passes in every attempt,
    writes-inside too: its rm -rf of a folder unlinks the folder's names through an F_DUPFD copy
    of the folder's descriptor, which the kernel reports so that they resolve."""
    doc = grade(f"/bin/bash {BASH_CLIENT} {{src}} {{dst}}", tmp_path, attempts=1,
                task="mirror", timeout_s=60)
    for sc in doc["scenarios"]:
        judged = {v["id"]: v for v in sc["clauses"]}
        cpu = judged["cpu-budget"]
        assert cpu["status"] == "pass", (sc["id"], cpu["reason"])
        started = [int(n) for n in re.findall(r"with (\d+) program\(s\) started",
                                               cpu["reason"])]
        # first: every file copied (a cp and an mv each) in invocation 1, then the change
        assert started and started[0] >= (400 if sc["id"].startswith("first") else 40), cpu
        wrong = {c: (v["status"], v["reason"]) for c, v in judged.items()
                 if v["status"] not in ("pass", "not-applicable")}
        assert not wrong, (sc["id"], wrong)


@pytest.fixture(scope="session")
def mirror_jar(tmp_path_factory) -> Path:
    """tests/clients/Mirror.java compiled and packed into a jar, once per test session."""
    where = tmp_path_factory.mktemp("java-mirror")
    where.chmod(0o755)   # the sandbox's user reads the jar
    javac, jar = shutil.which("javac"), shutil.which("jar")
    assert javac and jar, "make setup installs openjdk-17-jdk-headless"
    subprocess.run([javac, "-d", str(where / "classes"),
                    str(ROOT / "tests" / "clients" / "Mirror.java")], check=True)
    subprocess.run([jar, "cfe", str(where / "mirror.jar"), "Mirror", "-C",
                    str(where / "classes"), "."], check=True)
    return where / "mirror.jar"


@root_only
def test_an_honest_java_client_run_as_a_jar_passes_every_clause(mirror_jar, tmp_path):
    """A JVM writes its own /proc/self/coredump_filter as it starts (two 4-byte writes): its
    own settings, written nowhere; it makes /tmp/hsperfdata_USER/PID (a folder and a file it
    maps) in the sandbox's /tmp, its own (#44); and it sets each copy's modification time on
    the target, never on the source. Written from protocol.md alone, it passes every clause."""
    java = shutil.which("java")
    assert java
    book = EvidenceBook()
    doc = grade(f"{java} -jar {mirror_jar} {{src}} {{dst}}", tmp_path, book=book,
                attempts=1, task="mirror")
    assert _fails(doc) == {"first": set(), "older": set()}, [
        (v["id"], v["reason"]) for s in doc["scenarios"] for v in s["clauses"]
        if v["status"] not in ("pass", "not-applicable")]
    runs = [r for sc in doc["grade"]["scenarios"].values() for r in sc["runs"]]
    assert [(r["valid"], r["success"]) for r in runs] == [(True, True)] * len(runs)
    assert not [f for r in runs for f in r["risk_findings"]
                if f["kind"] in ("write-outside", "source-write")]
    # what was judged: the JVM's folder in /tmp was made in every invocation
    assert all(any(f.op == "mkdir" and (f.path or "").startswith("/tmp/hsperfdata_")
                   for f in inv.files)
               for ev in book.scenarios.values() for inv in ev.invocations.values())


EVASIONS = ROOT / "tests" / "clients" / "mirror_evasions.py"


@root_only
@pytest.mark.parametrize(("mode", "fails"), [
    # the log's bytes land at the sandbox's root through a link planted in the target (every
    # name it used was under the target): the kernel counts them by the file they landed in
    ("symlink-out", {"writes-inside"}),
    # a changed file rewritten through a hard link of it, renamed over itself: by names a new
    # file moved into place, but the write landed in the inode the target held
    ("hardlink-inplace", {P}),
])
def test_a_mirror_client_evading_by_names_is_caught_by_the_files_written(mode, fails,
                                                                        tmp_path):
    doc = grade(f"python3 {EVASIONS} {{src}} {{dst}} {mode}", tmp_path, attempts=1,
                task="mirror")
    assert _fails(doc) == {"first": fails, "older": fails}, [
        (v["id"], v["reason"]) for s in doc["scenarios"] for v in s["clauses"]
        if v["status"] == "fail"]
    if mode == "symlink-out":   # by the bytes, never by a name
        assert all("bytes to files on none of" in v["reason"] for s in doc["scenarios"]
                   for v in s["clauses"] if v["status"] == "fail"), doc["scenarios"]


def _scratch_invocations(book: EvidenceBook):
    """Every invocation the book holds, each launched with its own /tmp and /dev/shm."""
    invs = [inv for ev in book.scenarios.values() for inv in ev.invocations.values()]
    assert invs and all(inv.launched is not None and inv.launched.scratch == ("/tmp", "/dev/shm")
                        for inv in invs)
    return invs


def _write_outside_found(doc: dict) -> bool:
    return "write-outside" in {f["kind"] for sc in doc["grade"]["scenarios"].values()
                               for r in sc["runs"] for f in r["risk_findings"]}


@root_only
@pytest.mark.parametrize(("where", "fails"), [
    ("tmp", set()), ("shm", set()), ("outside", {"writes-inside"})])
def test_notes_kept_in_the_sandboxs_tmp_and_shm_are_the_clients_own_and_elsewhere_are_not(
        where, fails, tmp_path):
    """#44: an honest client that makes a folder and writes 16 KiB (write(2)) in /tmp or
    /dev/shm, the sandbox's own for it (folders of its home bound there), writes nothing
    outside: by its paths and by the kernel's count of bytes landing elsewhere (its home's
    filesystem is the working directory's). The same notes in /outside, a folder made at the
    sandbox's root (bubblewrap's own tmpfs), are written outside the target and its working
    directory."""
    book = EvidenceBook()
    doc = grade(f"python3 {EVASIONS} {{src}} {{dst}} notes-in-{where}", tmp_path, book=book,
                attempts=1, task="mirror")
    assert _fails(doc) == {"first": fails, "older": fails}, [
        (v["id"], v["reason"]) for s in doc["scenarios"] for v in s["clauses"]
        if v["status"] not in ("pass", "not-applicable")]
    prefix = {"tmp": "/tmp/", "shm": "/dev/shm/", "outside": "/outside/"}[where]
    for inv in _scratch_invocations(book):
        assert any(f.op == "mkdir" and (f.path or "").startswith(prefix + "mirror-notes-")
                   for f in inv.files)
        elsewhere = counter(inv, "elsewhere_write_bytes")
        assert (elsewhere == 0) if not fails else (elsewhere or 0) >= 16_384, elsewhere
    assert _write_outside_found(doc) == bool(fails)


@root_only
def test_an_honest_client_copying_in_a_multiprocessing_pool_passes_every_clause(tmp_path):
    """#44: Python's multiprocessing makes its locks with sem_open: files /dev/shm/sem.*, made
    and unlinked again in the sandbox's /dev/shm, its own (a folder of its home, as its
    /tmp): a runtime's housekeeping, private to the sandbox, written nowhere else."""
    book = EvidenceBook()
    doc = grade(f"python3 {EVASIONS} {{src}} {{dst}} pool", tmp_path, book=book, attempts=1,
                task="mirror")
    assert _fails(doc) == {"first": set(), "older": set()}, [
        (v["id"], v["reason"]) for s in doc["scenarios"] for v in s["clauses"]
        if v["status"] not in ("pass", "not-applicable")]
    for inv in _scratch_invocations(book):   # what was judged: the semaphores were made
        assert any(f.writes and (f.path or "").startswith("/dev/shm/sem.") for f in inv.files)
        assert counter(inv, "elsewhere_write_bytes") == 0
    assert not _write_outside_found(doc)


@root_only
@pytest.mark.parametrize("how", ["chmod", "fchmod", "chown", "utime", "setxattr",
                                 "removexattr", "truncate", "ftruncate", "fallocate"])
def test_a_change_to_the_sources_metadata_fails_exactly_source_untouched(how, tmp_path):
    """Every run changes a source file's metadata to what it already was (refused by its
    read-only filesystem): by path or by descriptor, an attempt on the source all the same,
    and nothing else is wrong. Every attempt is valid. (The first sync's scenario: the older
    mirror's would judge the same attempt on the same source.)"""
    doc = grade(f"python3 {EVASIONS} {{src}} {{dst}} meta-{how}", tmp_path, attempts=1,
                task="mirror", scenarios=("first",))
    assert _fails(doc) == {"first": {"source-untouched"}}, [
        (v["id"], v["reason"]) for s in doc["scenarios"] for v in s["clauses"]
        if v["status"] == "fail"]
    assert all(r["valid"] for sc in doc["grade"]["scenarios"].values() for r in sc["runs"])


RSYNC_KILLED = """description = "rsync killed 3 MiB into the first sync; the next run finishes it"
[client]
path = "/usr/bin/rsync"
args = ["-a", "--delete", "{src}/", "{dst}/"]
[environment]
between = "change"
[[faults]]
kind = "kill"
invocation = 1
after_bytes = 3145728
[expect]
fail = ["mirrored"]
pass = ["no-partial-files", "no-leftovers", "deletions-propagate", "honest-outcome",
        "no-rewrite-in-place"]
"""


@root_only
def test_rsync_killed_mid_sync_leaves_nothing_cut_short_and_the_next_run_finishes(tmp_path):
    """rsync writes each file under a temporary name (`.NAME.XXXXXX`) and renames it: killed
    mid-sync it leaves that file, never a copy cut short under a final name, and the next
    `--delete` run removes it and completes the mirror (rsync(1): --delete removes
    "extraneous files", which its own leftovers are)."""
    scenario = tmp_path / "rsync-killed.toml"
    scenario.write_text(RSYNC_KILLED)
    (judged,) = evlab_run(tmp_path, "mirror", str(scenario))["scenarios"]
    assert judged["instrument_check"] == "detected", judged["clauses"]
    assert judged["invocations"][0]["exit_code"] == -9
