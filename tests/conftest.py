import contextlib
import fcntl
import functools
import gc
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from probes.collectors.choose import keep_collectors
from probes.owned_tmp import sweep_stale
from sessions.lab.inputs.source import write_source
from sessions.lab.spawner import keep_spawners
from tests.backup_lab import BUILD_DIR, client_path

ROOT = Path(__file__).resolve().parent.parent


# `make test` runs the files on pytest-xdist workers, each file's tests on one worker (its
# module fixtures, e.g. a compiled collector, are made once); files listed here share a worker.
# Both campaign files reach for Ray ("--ray auto" must find no cluster while the other runs one).
# The seeded suite's one-at-a-time run (the seeded_run fixture) is read by three files.
SAME_WORKER = {"test_campaign.py": "campaign", "test_campaign_file.py": "campaign",
               "test_session.py": "seeded", "test_jobs.py": "seeded", "test_faults.py": "seeded",
               "test_grade.py": "seeded", "test_tui.py": "seeded"}
# The groups that take longest (a run's seconds on one of five workers, 2 CPUs), started first:
# xdist hands out groups in order, and one of these handed out late kept a worker running on
# its own at the end of the run (test_reload.py, 48 s from 152 s, ended it at 200 s; the other
# workers ended at 191-203; later test_rotate.py, 15 s from 156 s). Longest first, then the
# short ones fill in: the workers end within a few seconds of each other. Only the order
# depends on this list: a group missing from it, or slower on another machine, is still run,
# later.
LONGEST_FIRST = ("seeded",                                                  # ~135 s
                 "campaign",                                                # ~85
                 "test_boundary.py", "test_mirror.py", "test_reload.py",    # ~50-75
                 "test_fetch.py",
                 "test_cpu_waste.py", "test_tui_sizes.py", "test_hardening.py",   # ~15-25
                 "test_hung_client.py", "test_named_paths.py", "test_operations_lab.py",
                 "test_inspect_scorer.py", "test_bpf_cache.py", "test_rotate.py",
                 "test_lab_network.py", "test_cli.py", "test_html.py", "test_tmux.py",  # ~7-12
                 "test_load_view.py", "test_tui_timeline.py", "test_archive_fuzz.py",
                 "test_client_text.py", "test_doctor.py", "test_user_task.py",
                 "test_user_paths.py", "test_api.py", "test_receiver_fuzz.py",
                 "test_bcc_collector.py", "test_tasks.py", "test_fixture.py")


def pytest_configure(config) -> None:
    """Under xdist, each worker has a temp directory of its own: evlab's temp directories (and
    what it starts with their paths in its command line) are then one worker's, so a test's
    check that nothing is left never sees the other worker's live session."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        # one run's (its xdist run id): two runs at once (a fresh clone's beside the checkout's)
        # must not share, or one's clean-up removes the other's live directory
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:8]
        own = Path(tempfile.gettempdir()) / f"pytest-worker-{run}-{worker}"
        own.mkdir(exist_ok=True)
        os.environ["TMPDIR"] = str(own)
        tempfile.tempdir = None
    # A test process opens session after session: each takes the collector the last one
    # closed, instead of compiling its own (~2 s of CPU, 100 times in a run), and its spawner
    # (~0.1 s of CPU, ~170 times), whatever name pytest gives the running test in the
    # environment (PYTEST_CURRENT_TEST, which no server reads).
    keep_collectors()
    keep_spawners(unread={"PYTEST_CURRENT_TEST"})
    # xdist's controller hands out groups in the order collection left them (LONGEST_FIRST),
    # not re-sorted by how many tests each holds
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_unconfigure(config) -> None:
    """A worker's temp directory goes if nothing is left in it but what evlab's own sweep
    removes (a run a test killed with SIGKILL); anything else left stays visible."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        sweep_stale()
        with contextlib.suppress(OSError):
            os.rmdir(tempfile.gettempdir())


def pytest_collection_finish(session) -> None:
    """What collection imported lives as long as the worker: frozen out of the cyclic garbage
    collector's passes, which walked all of it again and again (~12% of a worker's CPU), and
    the youngest generation collected every 10,000 allocations, not 700."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


@pytest.hookimpl(tryfirst=True)   # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config, items) -> None:
    """Each file's tests go to one xdist worker (SAME_WORKER's files to the same one), the
    longest groups first (LONGEST_FIRST). Tests marked `root` (pyproject's markers) are
    skipped when not root, with the marker's reason:
    `pytest.mark.root(reason="the BCC collector needs root")`."""
    groups = {}
    for item in items:
        groups[item] = SAME_WORKER.get(item.path.name, item.path.name)
        item.add_marker(pytest.mark.xdist_group(groups[item]))
    rank = {group: k for k, group in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(groups[item], len(rank)))   # stable: files' order kept
    if os.geteuid() == 0:
        return
    for item in items:
        if (mark := item.get_closest_marker("root")) is not None:
            item.add_marker(pytest.mark.skip(reason=mark.kwargs.get("reason", "needs root")))


@pytest.fixture(scope="session")
def built_clients() -> Path:
    """The eight fixture clients, built by the project's Makefile (a no-op when up to date)."""
    subprocess.run(["make", "-s", "-C", str(ROOT), "clients"], check=True)
    assert client_path("baseline").exists()
    return BUILD_DIR


@pytest.fixture(scope="session")
def seeded_run(tmp_path_factory, built_clients):
    """`evlab run --all --jobs 1 --headless --json out.json --archive s.tar.gz`, once per
    worker, in its process (tests/support.py evlab_in): (what it returned, its folder). The
    seeded suite one scenario at a time, read by test_session (the articles' figures, the
    reports of its archive), test_jobs (what --jobs 2 must equal), test_faults (the quiet
    verdict matrix noise must leave unchanged), test_grade (what the seeded builds graded
    as unknown clients must match) and test_tui (what the live dashboard's verdicts must
    match); SAME_WORKER puts them on one worker."""
    from tests.support import evlab_in
    out = tmp_path_factory.mktemp("seeded")
    return evlab_in("run", "--all", "--jobs", "1", "--headless", "--json", out / "out.json",
                    "--archive", out / "s.tar.gz", cwd=out), out


def _made(name: str) -> Path:
    """tests/build/NAME, one of the tests' own C programs, as `make test-programs` builds them."""
    return _test_programs() / name


@functools.cache
def _test_programs() -> Path:
    """`make test-programs`, once a process: make test ran it before pytest (a no-op then),
    and one worker at a time otherwise, so that none runs a program another is still writing."""
    folder = ROOT / "tests" / "build"
    folder.mkdir(exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "-C", str(ROOT), "test-programs"], check=True)
    return folder


@pytest.fixture(scope="session")
def egress() -> Path:
    """tests/clients/egress.c, built, in a folder the sandbox user may read."""
    if os.geteuid() != 0:
        pytest.skip("the sandbox and BCC need root")
    where = Path(tempfile.mkdtemp(prefix="evlab-test-egress-"))
    try:
        os.chmod(where, 0o755)
        out = where / "egress"
        shutil.copy2(_made("egress"), out)
        yield out
    finally:
        shutil.rmtree(where)


@pytest.fixture(scope="session")
def exerciser() -> Path:
    """tests/programs/exerciser.c: a subject whose every syscall the test controls."""
    return _made("exerciser")


@pytest.fixture(scope="session")
def operator() -> Path:
    """tests/programs/operator.c: a subject that signals and truncates as the test says."""
    return _made("operator")


@pytest.fixture(scope="session")
def data_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data.bin"
    path.write_bytes(os.urandom(200_000))
    return path


@pytest.fixture(scope="session")
def source_file(tmp_path_factory) -> Path:
    return write_source(tmp_path_factory.mktemp("source") / "source.bin")
