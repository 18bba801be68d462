"""Tearing one scenario down: every step runs whatever happens in another, so an exception,
Ctrl-C or SIGTERM leaves no process, port, cgroup, mount or temp directory."""

import os
import shutil
import signal

from probes.sandbox import unmount_under
from sessions.lab.lifecycle import kill_leftovers
from sessions.lab.running import Running


def teardown(session, live: Running) -> None:
    """Every step runs, whatever happens in another: an interrupt that arrives during
    teardown (the one that ends the run) is raised once everything is gone."""
    first: BaseException | None = None
    for step in _steps(session, live):
        try:
            step()
        except BaseException as e:   # noqa: BLE001 - re-raised below, after the rest
            first = first or e
    if first is not None:
        raise first

def _steps(session, live: Running):
    def client():
        if live.client is not None and live.client.poll() is None:
            kill_group(live.client.pid)
            live.client.wait()

    def leftovers():
        if live.client_pid and session.collector is not None:
            # Whatever the last client left running (also when interrupted mid-invocation),
            # found by its session, the kernel's view of its tree and its cgroup.
            kill_leftovers(live.client_pid,
                           lambda: session.boundary.tasks(session.collector, live.inv_id))

    def cgroup():
        if session.boundary is not None:
            session.boundary.forget(live.scenario)
            if session.collector is not None and live.inv_id:
                session.boundary.abandon(session.collector, live.inv_id)

    def records():
        for name in ("receiver", "decoy"):
            record = live.workdir / f"{name}.jsonl"
            if record.exists():
                shutil.copy(record, session.out_dir / f"{live.scenario.id}.{name}.jsonl")

    def client_home():
        if live.client_home is not None:
            unmount_under(live.client_home)
            shutil.rmtree(live.client_home, ignore_errors=True)

    yield from (client, leftovers, cgroup)
    yield from (part.stop for part in (live.noise, live.capture) if part is not None)
    if live.injector is not None:   # the receiver, a proxy and the decoy stop side by side
        yield lambda: live.injector.close(*[d for d in (live.decoy,) if d is not None])
    elif live.decoy is not None:
        yield live.decoy.stop
    yield records
    if getattr(session, "observe", None) is not None:
        yield lambda: session.observe.disown(live)
    yield lambda: shutil.rmtree(live.workdir, ignore_errors=True)
    yield client_home


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
