"""Operations as kernel evidence, against tests/programs/operator.c: every signal the tree sends
(by each route), every truncation it makes (by each route, of a file another process holds open
for writing and of one nobody holds), every end of its processes and of a watched one, each
recorded exactly once with the right sender, target, signal and writers."""

import contextlib
import itertools
import os
import signal
import subprocess
from pathlib import Path

import pytest

from probes.collectors.records import LifeEvent, SignalEvent, TruncateEvent

pytestmark = pytest.mark.root(reason="loading BPF needs root")
_ids = itertools.count(1)
USR1, TERM, KILL = int(signal.SIGUSR1), int(signal.SIGTERM), int(signal.SIGKILL)


@pytest.fixture(scope="module")
def collector():
    # the collector a session of this worker kept, or a new one (compiled once per worker)
    from probes.collectors.choose import open_collector
    launcher, _ = open_collector("bcc", ())
    yield launcher.bcc
    launcher.close()


def run(collector, argv, client, watch: dict[str, int] | None = None, then=None):
    """argv tracked as one invocation (in a session of its own, as the lab launches); the
    operations it made (once `then`, if given, has returned)."""
    inv = next(_ids)
    if watch:
        collector.watch_processes(inv, watch)
    with collector.launching(inv, Path(client), None):
        proc = subprocess.Popen([str(a) for a in argv], start_new_session=True)
    assert proc.wait() == 0
    if then is not None:
        then()
    final = collector.finish(inv)
    events = [e for e in collector.poll_events() if e.invocation == inv
              and isinstance(e, SignalEvent | TruncateEvent | LifeEvent)]
    if watch:
        collector.unwatch_processes(inv)
    assert final.counters["lost_events"] == 0
    return events


def sent(events):
    return [e for e in events if isinstance(e, SignalEvent) and e.target is not None]


def calls(events):
    return [e for e in events if isinstance(e, SignalEvent) and e.target is None]


def ended(events):
    return {e.pid: e for e in events if isinstance(e, LifeEvent) and e.kind == "exited"}


def test_each_route_of_a_signal_is_one_call_and_one_signal_per_process_reached(
        collector, operator):
    routes = ["kill", "tkill", "tgkill", "pidfd", "sigqueue"]
    events = run(collector, [operator, "child", "pgchild",
                             *(f"{r}:0:{USR1}" for r in routes),
                             f"pgrp:1:{USR1}", f"group0:{USR1}",
                             f"kill:0:{TERM}", "wait:0", f"kill:1:{KILL}", "wait:1"], operator)
    asked = [(e.syscall, e.signal, e.result) for e in calls(events)]
    assert asked == [("kill", USR1, 0), ("tkill", USR1, 0), ("tgkill", USR1, 0),
                     ("pidfd_send_signal", USR1, 0), ("rt_sigqueueinfo", USR1, 0),
                     ("kill", USR1, 0), ("kill", USR1, 0), ("kill", TERM, 0), ("kill", KILL, 0)]
    me = calls(events)[0].pid
    first, second = sorted({e.target for e in sent(events)} - {me})
    got = [(e.syscall, e.asked, e.target, e.signal, e.group, e.own) for e in sent(events)]
    assert [g for g in got if g[1] != 0] == [
        ("kill", first, first, USR1, True, True),
        ("tkill", first, first, USR1, False, True),          # a thread, not its group
        ("tgkill", first, first, USR1, False, True),
        ("pidfd_send_signal", 3, first, USR1, True, True),   # the pidfd as given
        ("rt_sigqueueinfo", first, first, USR1, True, True),
        ("kill", -second, second, USR1, True, True),         # its process group
        ("kill", first, first, TERM, True, True),
        ("kill", second, second, KILL, True, True)]
    # its own group (0): the child still in it and itself, each once
    assert sorted(g for g in got if g[1] == 0) == sorted([("kill", 0, first, USR1, True, True),
                                                          ("kill", 0, me, USR1, True, True)])
    assert (ended(events)[first].signal, ended(events)[first].sender) == (TERM, me)
    assert (ended(events)[second].signal, ended(events)[second].sender) == (KILL, me)


def test_kill_minus_one_reaches_every_process_of_the_namespace_but_the_sender(
        collector, operator):
    events = run(collector, ["unshare", "--pid", "--fork", operator, "child", "child",
                             f"all:{USR1}", f"kill:0:{KILL}", f"kill:1:{KILL}", "wait:0",
                             "wait:1"], operator)
    minus_one = [e for e in sent(events) if e.asked == -1]
    me = calls(events)[0].pid
    children = {e.pid for e in ended(events).values() if e.signal == KILL}
    assert len(children) == 2 and me not in children
    assert sorted(e.target for e in minus_one) == sorted(children)
    assert [e.asked for e in calls(events)] == [-1, 2, 3]   # pids as the namespace numbers them


def test_an_exit_names_who_ended_it_a_sibling_or_nobody(collector, operator):
    events = run(collector, [operator, "selfexit:3", f"sibling:{TERM}"], operator)
    [kill] = sent(events)   # the sibling's, to the other child
    exits = ended(events)
    victim, killer = exits[kill.target], exits[kill.pid]
    [by_itself] = [e for e in exits.values() if e.status == 3 << 8]
    assert (by_itself.signal, by_itself.sender) == (0, None)
    assert (victim.signal, victim.sender, victim.sender_invocation) == (TERM, killer.pid,
                                                                          victim.invocation)
    assert (killer.status, killer.signal, killer.sender) == (0, 0, None)
    assert len(exits) == 4   # the three children and the program


ROUTES = {"truncate": "truncate", "ftruncate": "ftruncate", "otrunc": "open",
          "punch": "fallocate", "uring-ftruncate": "io_uring ftruncate",
          "uring-otrunc": "io_uring open", "uring-punch": "io_uring fallocate"}


@pytest.mark.parametrize("how", ROUTES)
def test_a_truncation_says_whether_another_process_held_the_file_open_for_writing(
        collector, operator, tmp_path, how):
    live, idle = tmp_path / "live.log", tmp_path / "idle.log"
    for f in (live, idle):
        f.write_bytes(b"line\n" * 2000)
    length = ":4096" if not how.endswith("otrunc") else ""
    with open(live, "ab"):   # another process (this one) holds it open for writing
        events = run(collector, [operator, f"{how}:{live}{length}", f"{how}:{idle}{length}"],
                     operator)
    made = [e for e in events if isinstance(e, TruncateEvent)]
    assert [e.how for e in made] == [ROUTES[how]] * 2
    if how == "truncate":   # by path: its file is not reachable at the call's return
        assert [(e.name, e.inode, e.others_writing) for e in made] == [
            (str(live), None, None), (str(idle), None, None)]
        return
    assert [(e.name, e.inode, e.writers, e.own, e.others_writing) for e in made] == [
        ("live.log", live.stat().st_ino, 2, 1, True),
        ("idle.log", idle.stat().st_ino, 1, 1, False)]


def test_its_own_writers_are_not_another_process_and_a_new_file_is_not_truncated(
        collector, operator, tmp_path):
    held = tmp_path / "held.log"
    held.write_bytes(b"x" * 100)
    events = run(collector, [operator, f"hold:{held}", f"otrunc:{held}",
                             f"creat:{tmp_path}/new.log"], operator)
    made = [e for e in events if isinstance(e, TruncateEvent)]
    # its own descriptor and dup (one open file) and the truncating open: two of its own
    assert [(e.name, e.writers, e.own, e.others_writing) for e in made] == [
        ("held.log", 2, 2, False)]


def test_its_own_writers_are_counted_anywhere_in_its_table_and_past_two_never_guessed(
        collector, operator, tmp_path):
    """The walk of the truncating process's descriptor table reaches its last slots (a file
    held at descriptor 900 alone is its own, not another process's); past two files of its own
    on the inode it stops counting, and the record then says nothing of others."""
    far, many = tmp_path / "far.log", tmp_path / "many.log"
    for f in (far, many):
        f.write_bytes(b"x" * 100)
    events = run(collector, [operator, f"holdfar:{far}", f"otrunc:{far}",
                             f"hold:{many}", f"hold:{many}", f"otrunc:{many}"], operator)
    made = [e for e in events if isinstance(e, TruncateEvent)]
    assert [(e.name, e.writers, e.own, e.counted, e.others_writing) for e in made] == [
        ("far.log", 2, 2, True, False), ("many.log", 3, 2, False, None)]


def test_a_watched_process_signalled_by_the_tree_is_named_and_its_end_names_the_sender(
        collector):
    server = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        inv_events = run(collector, ["/bin/kill", "-TERM", str(server.pid)], "/bin/kill",
                         watch={"app": server.pid}, then=server.wait)   # it ends after kill
    finally:
        # its sleep, if sh forked it before the TERM came (none is left if it did not)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    [signalled] = sent(inv_events)
    assert (signalled.target, signalled.watch > 0, signalled.server, signalled.own) == (
        server.pid, True, "app", False)
    [end] = [e for e in inv_events if isinstance(e, LifeEvent) and e.kind == "exited"
             and not e.own]
    assert (end.pid, end.server, end.signal, end.sender_invocation) == (
        server.pid, "app", TERM, signalled.invocation)


def test_a_control_that_signals_and_truncates_nothing_records_none(collector, operator):
    events = run(collector, [operator], operator)
    assert sent(events) == calls(events) == []
    assert [e for e in events if isinstance(e, TruncateEvent)] == []
    assert [(e.kind, e.own, e.signal) for e in events] == [("exited", True, 0)]


def test_a_child_started_by_a_watched_process_is_watched(collector, operator):
    inv = next(_ids)
    parent = subprocess.Popen(["sh", "-c", "read x; sleep 0.01; exit 4"],
                              stdin=subprocess.PIPE, start_new_session=True)
    collector.watch_processes(inv, {"app": parent.pid})
    parent.communicate(b"go\n")   # it and its child have ended
    events = [e for e in collector.poll_events() if e.invocation == inv]
    collector.unwatch_processes(inv)
    started = [e for e in events if e.kind == "started"]
    assert [(e.parent, e.server) for e in started] == [(parent.pid, "app")]
    assert {(e.pid, e.status, e.server) for e in events if e.kind == "exited"} == {
        (started[0].pid, 0, "app"), (parent.pid, 4 << 8, "app")}
