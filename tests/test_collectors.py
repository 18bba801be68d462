"""The fallback collectors: strace gives the same exact counts where ptrace can see them; what a
collector cannot see is unobserved (absent), never 0; choosing degrades with recorded reasons."""

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.collectors.choose import NoCollector, open_collector
from probes.collectors.records import COUNTERS
from tests.backup_lab import client_path, start_receiver
from tests.lab_servers import start_decoy
from tests.support import Sink, refused_port

_ids = itertools.count(1)


@pytest.fixture(scope="module")
def strace():
    collector, missing = open_collector("strace", functions=("hash_file",))
    assert collector.name == "strace"
    assert {m.name for m in missing} == {"function-counts", "sched", "operations"}
    yield collector
    collector.close()


def run(collector, argv, source=None):
    inv = next(_ids)
    proc = collector.launch(inv, [str(a) for a in argv], source)
    assert proc.wait(timeout=60) == 0
    final = collector.finish(inv)
    return final, [e for e in collector.poll_events() if e.invocation == inv]


def test_strace_reads_exact(strace, exerciser, data_file):
    steps = [f"read:{data_file}:10000", f"pread:{data_file}:20000",
             f"readv:{data_file}:30000", f"preadv:{data_file}:40000",
             f"forkread:{data_file}:5000", f"thread:{data_file}:3000"]
    final, events = run(strace, [exerciser, *steps], source=data_file)
    assert final.counters["source_read_bytes"] == 100_000 + 10_000 + 3_000
    assert final.counters["source_opens"] == 6
    assert final.counters["forks"] == 2  # the forked child and the thread
    assert "oncpu_ns" not in final.counters and "oncpu_ns" in final.unobserved
    assert final.functions == {}  # no uprobes under strace: unobserved, not zero


def test_strace_loader_plus_exactly_ours(strace, exerciser, data_file):
    idle, _ = run(strace, [exerciser])
    busy, _ = run(strace, [exerciser, f"read:{data_file}:12345"])
    assert busy.counters["read_bytes"] == idle.counters["read_bytes"] + 12_345


def test_strace_connects_and_sends(strace, exerciser, data_file):
    sink, bad = Sink(), refused_port()
    try:
        final, events = run(strace, [exerciser, f"connect:{sink.port}:3", f"connect:{bad}:2",
                                     f"send:{sink.port}:10000",
                                     f"sendfile:{sink.port}:{data_file}:60000"], source=data_file)
    finally:
        sink.close()
    assert final.counters["connects"] == 7
    assert final.counters["sock_sent_bytes"] == 40_000 + 60_000
    assert final.counters["source_read_bytes"] == 60_000
    results = sorted((e.port, e.result) for e in events if hasattr(e, "result"))
    assert results == sorted([(sink.port, 0)] * 5 + [(bad, -111)] * 2)


@pytest.mark.live
def test_strace_hash_storm_figure(strace, built_clients, source_file, tmp_path):
    with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx, \
            start_decoy(tmp_path / "decoy.jsonl") as decoy:
        argv = [client_path("hash-storm"), "127.0.0.1", rx.port, source_file, decoy.port]
        first, _ = run(strace, argv, source=source_file)
        second, _ = run(strace, argv, source=source_file)
    assert second.counters["source_read_bytes"] == 134_217_728
    assert [first.counters["connects"], second.counters["connects"]] == [2, 1]


def test_none_observes_nothing_and_says_so():
    collector, missing = open_collector("none")
    assert isinstance(collector, NoCollector)
    assert [m.name for m in missing] == ["kernel-events"] and not missing[0].available
    proc = collector.launch(1, ["/bin/true"], None)
    assert proc.wait() == 0
    final = collector.finish(1)
    assert final.counters == {} and set(final.unobserved) == set(COUNTERS)


def test_unknown_collector_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown collector 'ebpf'"):
        open_collector("ebpf")


@pytest.mark.root(reason="needs root to drop privileges")
def test_non_root_degrades_to_strace_with_the_reason():
    """As an unprivileged user, auto falls back to strace and records why BCC is missing."""
    code = (
        "import json, os\n"
        "import bcc  # importable for the user; loading BPF is what needs root\n"
        "from probes.collectors.choose import open_collector\n"
        "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
        "c, missing = open_collector('auto')\n"
        "p = c.launch(1, ['/bin/true'], None); p.wait()\n"
        "s = c.finish(1); c.close()\n"
        "print(json.dumps({'name': c.name, 'missing': [[m.name, m.detail, m.fix] for m in missing],"
        " 'execs': s.counters.get('execs')}))\n"
    )
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    result = json.loads(out.stdout)
    assert result["name"] == "strace" and result["execs"] == 1
    names = [m[0] for m in result["missing"]]
    assert names[0] == "root" and {"function-counts", "sched"} <= set(names)
    assert all(fix for _, _, fix in result["missing"])


@pytest.mark.root(reason="the BCC collector needs root")
def test_a_kept_collector_serves_the_next_session_as_a_new_one(exerciser, tmp_path):
    """The tests keep a closed BCC collector for their process's next session (conftest.py:
    keep_collectors) instead of compiling another. It must count as a new one would: here the
    next session's client is rebuilt at the same path (a new file), so a uprobe left on the old
    one would count nothing."""
    functions = ("counted_fn", "kept-collector-test")   # no other test asks for these
    client = tmp_path / "client"
    ids = itertools.count(10_000_000)   # never one of the runner's (unique in a process)

    def calls(collector, n: int) -> int:
        inv = next(ids)
        proc = collector.launch(inv, [str(client), f"call:{n}"], None, client=client)
        assert proc.wait(timeout=60) == 0
        return collector.finish(inv).functions["counted_fn"]

    first, _ = open_collector("bcc", functions=functions)
    try:
        client.write_bytes(exerciser.read_bytes())
        client.chmod(0o755)
        assert calls(first, 7) == 7
    finally:
        first.close()
    # nothing of the first session's tasks and descriptors is left for a recycled pid to find
    bpf = first._bcc._bpf
    assert [t for t in ("tasks", "tracked", "fd_kinds") if len(bpf[t])] == []
    # kept, it runs on no syscall or switch of the machine: its tracepoints wait detached
    assert not bpf.raw_tracepoint_fds and all(link < 0 for _, link in first._bcc._links)
    second, _ = open_collector("bcc", functions=functions)
    try:
        assert second is first   # kept, not compiled again
        assert bpf.raw_tracepoint_fds and all(link >= 0 for _, link in first._bcc._links)
        rebuilt = tmp_path / "client.new"
        rebuilt.write_bytes(exerciser.read_bytes())
        rebuilt.chmod(0o755)
        rebuilt.replace(client)
        assert calls(second, 5) == 5
    finally:
        second.close()
