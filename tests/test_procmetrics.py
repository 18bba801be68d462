"""procmetrics against small Python children whose behaviour the test controls over pipes."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from probes.proc.metrics import ProcSample, _walked, children_table, sample
from probes.proc.sockets import listeners, listens_on
from tests.process_watcher import ProcessWatcher

MiB = 1 << 20

# Burn `seconds` of CPU in user space: reading the CPU clock is a system call, so it is
# read only once per 100k additions, or the spin would be mostly system time.
SPIN = """
import time as _t
def spin(seconds):
    start, x = _t.process_time(), 0
    while _t.process_time() - start < seconds:
        for i in range(100_000):
            x += i
"""


@pytest.fixture
def spawn():
    """Start `python -c code` in its own session; steer it via stdin, hear it on stdout."""
    started = []

    def _spawn(code: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", SPIN + textwrap.dedent(code)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
        started.append(p)
        return p

    yield _spawn
    for p in started:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the child and any grandchildren
        except ProcessLookupError:
            pass
        p.wait()


def expect(p: subprocess.Popen, word: str) -> None:
    assert p.stdout.readline().strip() == word


def tell(p: subprocess.Popen, word: str) -> None:
    p.stdin.write(word + "\n")
    p.stdin.flush()


def both(pid: int) -> list[ProcSample]:
    """A sample reading its own descendants, one from a table a lab's samples of one moment
    share (sessions/lab/invocation.py), and one from a walk of every process (a kernel
    without the children lists): the same tree each way."""
    return [sample(pid), sample(pid, children_table([1, pid])), sample(pid, _walked())]


def test_sample_of_self_is_complete():
    s = sample(os.getpid())
    assert isinstance(s, ProcSample)
    assert s.pid == os.getpid()
    assert s.rss_bytes > 0 and s.num_threads >= 1 and s.open_fds >= 3
    assert s.tree_cpu_s >= s.cpu_s and s.tree_rss_bytes >= s.rss_bytes
    assert abs(time.monotonic_ns() - s.t_ns) < 5_000_000_000


def test_rss_of_touched_allocation(spawn):
    p = spawn("""
        import sys
        b = bytearray(50 << 20)
        for i in range(0, len(b), 4096):  # touch every page so it is resident
            b[i] = 1
        print("ready", flush=True)
        sys.stdin.readline()
    """)
    expect(p, "ready")
    s = sample(p.pid)
    assert s.rss_bytes >= 50 * MiB
    assert s.tree_rss_bytes == s.rss_bytes  # no descendants


def test_open_fds_grow_by_exactly_k(spawn):
    k = 7
    p = spawn(f"""
        import os, sys
        print("base", flush=True)
        sys.stdin.readline()
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range({k})]
        print("opened", flush=True)
        sys.stdin.readline()
    """)
    expect(p, "base")
    before = sample(p.pid)
    tell(p, "go")
    expect(p, "opened")
    after = sample(p.pid)
    assert after.open_fds - before.open_fds == k


def test_two_sleeping_grandchildren_are_counted(spawn):
    p = spawn("""
        import os, sys, time
        for _ in range(2):
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
        print("forked", flush=True)
        sys.stdin.readline()
    """)
    expect(p, "forked")
    for s in both(p.pid):
        assert s.children == 2
        assert s.tree_num_threads >= s.num_threads + 2
        assert s.tree_rss_bytes > s.rss_bytes


def test_cpu_user_grows_while_spinning(spawn):
    p = spawn("""
        import sys, time
        print("start", flush=True)
        sys.stdin.readline()
        spin(0.4)
        print("spun", flush=True)
        sys.stdin.readline()
    """)
    expect(p, "start")
    before = sample(p.pid)
    tell(p, "go")
    expect(p, "spun")
    after = sample(p.pid)
    # 0.4 s of user+sys spin, nearly all user; allow for 10 ms tick accounting.
    assert after.cpu_user_s - before.cpu_user_s >= 0.3
    assert after.cpu_s - before.cpu_s >= 0.38
    assert after.tree_cpu_s >= after.cpu_s


def test_tree_cpu_includes_reaped_children(spawn):
    p = spawn("""
        import os, sys, time
        pid = os.fork()
        if pid == 0:
            spin(0.4)
            os._exit(0)
        os.waitpid(pid, 0)  # reaped: its CPU moves into our children_user
        print("reaped", flush=True)
        sys.stdin.readline()
    """)
    expect(p, "reaped")
    s = sample(p.pid)
    assert s.children == 0
    assert s.tree_cpu_s - s.cpu_s >= 0.38


def test_tree_cpu_includes_live_children(spawn):
    p = spawn("""
        import os, sys, time
        r, w = os.pipe()
        if os.fork() == 0:
            spin(0.4)
            os.write(w, b"x")
            time.sleep(600)
        os.read(r, 1)
        print("spun", flush=True)
        sys.stdin.readline()
    """)
    expect(p, "spun")
    for s in both(p.pid):
        assert s.children == 1
        assert s.tree_cpu_s - s.cpu_s >= 0.38


def test_zombie_grandchild_cpu_counts_but_not_as_live(spawn):
    p = spawn("""
        import os, sys
        pid = os.fork()
        if pid == 0:
            spin(0.4)
            os._exit(0)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped
        print("zombie", flush=True)
        sys.stdin.readline()
    """)
    expect(p, "zombie")
    for s in both(p.pid):
        assert s.children == 0
        assert s.tree_cpu_s - s.cpu_s >= 0.38


def test_vanished_pid_is_none():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert sample(p.pid) is None


def test_zombie_is_none():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    # Wait for the exit without reaping, so the pid stays a zombie.
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    try:
        assert sample(p.pid) is None
    finally:
        p.wait()


def test_watcher_latest_drain_and_gone(spawn):
    p = spawn("""
        import sys
        print("up", flush=True)
        sys.stdin.readline()
    """)
    expect(p, "up")
    with ProcessWatcher([p.pid, os.getpid()], interval_s=0.02) as w:
        deadline = time.monotonic() + 5
        batch = []
        while len(batch) < 6 and time.monotonic() < deadline:
            batch += w.drain()
            time.sleep(0.01)
        assert {s.pid for s in batch} == {p.pid, os.getpid()}
        assert all(isinstance(s, ProcSample) for s in batch)
        assert [s.t_ns for s in batch] == sorted(s.t_ns for s in batch)
        assert w.latest(p.pid).pid == p.pid
        assert w.latest(os.getpid()).pid == os.getpid()

        tell(p, "bye")
        p.wait()
        while p.pid not in w.gone and time.monotonic() < deadline:
            time.sleep(0.01)
        assert p.pid in w.gone
        w.drain()
        time.sleep(0.1)
        assert {s.pid for s in w.drain()} == {os.getpid()}  # the gone pid is not resampled


def test_watcher_stop_is_prompt_and_idempotent():
    w = ProcessWatcher([os.getpid()], interval_s=30).start()
    deadline = time.monotonic() + 5
    while w.latest(os.getpid()) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    t = time.monotonic()
    w.stop()
    assert time.monotonic() - t < 1.0  # not the 30 s interval
    w.stop()
    assert not w._thread.is_alive()


def test_watcher_bounds_pending():
    w = ProcessWatcher([os.getpid()], max_pending=3)
    for _ in range(5):
        w.sample_now()
    assert len(w.drain()) == 3 and w.dropped == 2


def test_watcher_of_missing_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    with ProcessWatcher([p.pid], interval_s=0.01) as w:
        assert p.pid in w.gone
        assert w.latest(p.pid) is None


def test_a_listener_is_named_only_by_the_process_that_holds_it():
    """probes/proc/sockets.py: what a process listens on, read from its own network table and
    its descriptors, so that a port something else holds is never taken for its listener
    (the lab's test that a service started again is the one answering its port)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import socket, sys\ns = socket.create_server(('127.0.0.1', 0))\n"
         "print(s.getsockname()[1], flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        assert listeners(child.pid) == [(f"127.0.0.1:{port}", port)]
        assert listens_on([os.getpid(), child.pid], port)
        assert not listens_on([os.getpid()], port) and not listens_on([child.pid], port + 1)
    finally:
        child.kill()
        child.wait()
