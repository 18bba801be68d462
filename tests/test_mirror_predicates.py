"""mirror's own predicates (fixture/mirror/predicates.py) on hand-built evidence: a rename takes
a name from the source as surely as an unlink does; bytes the kernel saw land outside fail
writes-inside whatever names were used; and a write to a file the target held fails
no-rewrite-in-place through any of its names, while a new file renamed into place passes."""

from fixture.mirror.predicates import no_rewrite_in_place, source_untouched, writes_inside
from sessions.spec.contract import Thresholds
from sessions.stream.events import (
    ClientLaunched,
    CounterSample,
    FileObserved,
    ProcessObserved,
    ScenarioStarted,
    ServerRecord,
)
from sessions.stream.evidence import ScenarioEvidence

HOME, SRC, OUT = "/w/run-1", "/w/inputs/src", "/w/outputs"
T = Thresholds()


def _evidence(files=(), elsewhere=0, records=(), maps=0, target_files=None,
              scratch=((), ())) -> ScenarioEvidence:
    started = ScenarioStarted(0, "s", "/bin/client", "0" * 64, (), (), (), 0, 0, 0, "")
    ev = ScenarioEvidence(started, "bcc", "on", [])
    inv = ev.invocation(1)
    inv.launched = ClientLaunched(0, "s", 1, 10, ("/bin/client",), HOME, SRC, (), OUT, *scratch)
    inv.processes = [ProcessObserved(1, "s", 1, "exec", 10, seq=1)]
    # (op, path, old[, writes: False when the kernel refused a change, dfd])
    inv.files = [FileObserved(t, "s", 1, 10, op, path, *(more or (True,)), old_path=old, seq=t)
                 for t, (op, path, old, *more) in enumerate(files, start=2)]
    inv.records["files"] = [ServerRecord(t, "s", 1, "files", event, fields, seq=t)
                            for t, (event, fields) in enumerate(records, start=100)]
    inv.final = CounterSample(99, "s", 1, {"lost_events": 0, "file_ops": len(files),
                                           "elsewhere_write_bytes": elsewhere,
                                           "target_write_maps": maps}, {}, (),
                              final=True, seq=99, target_files=target_files or {})
    return ev


def test_a_rename_out_of_the_source_is_an_attempt_on_it():
    got = source_untouched(_evidence([("rename", f"{OUT}/y", f"{SRC}/y")]), T)
    assert got.status == "fail" and f"{SRC}/y" in got.reason
    assert source_untouched(_evidence([("rename", f"{OUT}/y", f"{OUT}/.y.tmp")]), T).status \
        == "pass"


def test_bytes_landing_outside_fail_writes_inside_whatever_names_were_used():
    names = [("symlink", f"{OUT}/.log", "/tmp/log"), ("open", f"{OUT}/.log", None),
             ("unlink", f"{OUT}/.log", None)]
    assert writes_inside(_evidence(names), T).status == "pass"
    got = writes_inside(_evidence(names, elsewhere=4321), T)
    assert got.status == "fail" and "4,321 bytes" in got.reason


SANDBOX_TMP = (("/tmp", "/dev/shm"),
               ("/tmp/evlab-client-1/home/inputs", "/tmp/prog/client.py", "/dev/shm/prog.py"))


def test_the_sandboxs_tmp_and_shm_are_the_clients_own_but_not_what_is_shown_read_only_there():
    """#44: a JVM's /tmp/hsperfdata_USER/PID in the sandbox's /tmp and a POSIX semaphore in its
    /dev/shm (folders of the client's home) are written inside; the host's /tmp and /dev/shm
    (no sandbox: an old record's, --no-sandbox), what the sandbox binds read-only over them
    (its inputs, a program kept there) and its root (/outside) are not."""
    jvm = [("mkdir", "/tmp/hsperfdata_evlab-client", None),
           ("open", "/tmp/hsperfdata_evlab-client/42", None),
           ("open", "/dev/shm/sem.HdE7x2", None), ("link", "/dev/shm/sem.mp-1", None),
           ("unlink", "/dev/shm/sem.mp-1", None)]
    assert writes_inside(_evidence(jvm, scratch=SANDBOX_TMP), T).status == "pass"
    got = writes_inside(_evidence(jvm), T)
    assert got.status == "fail" and "/tmp/hsperfdata_evlab-client outside" in got.reason
    assert writes_inside(_evidence(jvm[2:]), T).status == "fail"
    for shown in ("/tmp/evlab-client-1/home/inputs/x", "/tmp/prog/client.py",
                  "/dev/shm/prog.py", "/outside/x", "/x"):
        got = writes_inside(_evidence([("open", shown, None)], scratch=SANDBOX_TMP), T)
        assert got.status == "fail" and "and its own /tmp and /dev/shm" in got.reason, \
            got.reason
    launched = _evidence(scratch=SANDBOX_TMP).invocations[1].launched
    assert launched is not None and launched.in_scratch("/tmp") and \
        launched.in_scratch("/dev/shm") and launched.in_scratch("/dev/shm/sem.x") and \
        launched.in_scratch("/tmp/evlab-client-1/home/inputs2") and \
        not launched.in_scratch("/tmpx") and not launched.in_scratch("/dev/shmx") and \
        not launched.in_scratch("/dev/null") and not launched.in_scratch("/outside/x")
    old = _evidence().invocations[1].launched   # an old record: no field, no place of its own
    assert old is not None and old.scratch == () and not old.in_scratch("/tmp/x") and \
        not old.in_scratch("/dev/shm/sem.x")


PRESENT = ("present", {"names": ["a", "b"], "inodes": [5, 6]})


def test_a_write_through_a_hard_link_of_a_held_file_is_a_rewrite_in_place():
    got = no_rewrite_in_place(_evidence(records=[
        PRESENT, ("created", {"name": ".a.tmp", "ino": 5}), ("written", {"name": ".a.tmp"}),
        ("renamed", {"name": "a", "old": ".a.tmp", "ino": 5})]), T)
    assert got.status == "fail" and "rewrote a in place" in got.reason and ".a.tmp" in got.reason


def test_a_new_file_renamed_over_a_held_one_is_not():
    got = no_rewrite_in_place(_evidence(records=[
        PRESENT, ("created", {"name": ".a.tmp", "ino": 9}), ("written", {"name": ".a.tmp"}),
        ("renamed", {"name": "a", "old": ".a.tmp", "ino": 9}), ("written", {"name": "c"})]), T)
    assert got.status == "pass", got.reason


def test_a_held_file_renamed_and_then_written_was_rewritten():
    got = no_rewrite_in_place(_evidence(records=[
        PRESENT, ("renamed", {"name": "c", "old": "b", "ino": 6}), ("written", {"name": "c"})]), T)
    assert got.status == "fail" and "rewrote b in place" in got.reason


def test_a_target_file_mapped_for_writing_leaves_rewrites_unknown_never_passed():
    records = [PRESENT, ("created", {"name": ".a.tmp", "ino": 9})]
    got = no_rewrite_in_place(_evidence(records=records, maps=1), T)
    assert got.status == "inconclusive" and "mapped 1 target file" in got.reason
    assert no_rewrite_in_place(_evidence(records=records), T).status == "pass"


def test_bytes_the_kernel_counted_into_a_held_inode_are_a_rewrite_whatever_inotify_said():
    quiet = [PRESENT, ("created", {"name": ".c.tmp", "ino": 9})]
    got = no_rewrite_in_place(_evidence(records=quiet, target_files={"6": 4096, "9": 10}), T)
    assert got.status == "fail" and "4,096 bytes into b" in got.reason
    assert no_rewrite_in_place(_evidence(records=quiet, target_files={"9": 10}), T).status \
        == "pass"


def test_every_change_of_the_source_s_metadata_is_an_attempt_on_it_refused_or_not():
    """By path (refused by its read-only filesystem: the kernel's event says so, writes False)
    or by descriptor (sent only when the file behind it is the source's): each fails
    source-untouched, naming what was done; writes-inside is not the clause that judges them."""
    for op in ("chmod", "chown", "utimes", "setxattr", "removexattr", "truncate"):
        attempt = [(op, f"{SRC}/d/x", None, False)]
        got = source_untouched(_evidence(attempt), T)
        assert got.status == "fail" and f"tried to {op} {SRC}/d/x, in the source" in got.reason
        assert writes_inside(_evidence(attempt), T).status == "pass"
    for op in ("fchmod", "fchown", "futimes", "fsetxattr", "fremovexattr", "ftruncate",
               "fallocate"):
        by_fd = [(op, "", None, False, 3)]
        got = source_untouched(_evidence(by_fd), T)
        assert got.status == "fail" and f"tried to {op} a file of the source, by descriptor 3" \
            in got.reason
        assert writes_inside(_evidence(by_fd), T).status == "pass"
    got = source_untouched(_evidence([("fsetxattr", "", None, True, -1)]), T)
    assert got.status == "fail" and "by io_uring" in got.reason


def test_a_refused_rename_or_link_of_a_source_name_is_an_attempt_a_refused_mkdir_no_write():
    for op in ("rename", "link"):
        got = source_untouched(_evidence([(op, f"{OUT}/y", f"{SRC}/y", False)]), T)
        assert got.status == "fail" and f"{SRC}/y" in got.reason
    assert source_untouched(_evidence([("unlink", f"{SRC}/y", None, False)]), T).status \
        == "fail"
    # `mkdir -p` tries each folder on the way, refused where it is there (EEXIST): not a write
    assert writes_inside(_evidence([("mkdir", "/w", None, False)]), T).status == "pass"
    assert writes_inside(_evidence([("mkdir", "/w/x", None)]), T).status == "fail"


def test_metadata_set_on_the_target_is_not_taken_for_the_source():
    """rsync -a and cp -a read the source and set modes, owners and times on the target."""
    honest = [("chmod", f"{OUT}/a", None), ("utimes", f"{OUT}/a", None),
              ("chown", f"{OUT}/d", None), ("setxattr", f"{OUT}/a", None),
              ("open", f"{SRC}/a", None, False)]
    assert source_untouched(_evidence(honest), T).status == "pass"
    assert writes_inside(_evidence(honest), T).status == "pass"
    got = writes_inside(_evidence([("chmod", "/etc/x", None)]), T)
    assert got.status == "fail" and "chmod /etc/x" in got.reason
