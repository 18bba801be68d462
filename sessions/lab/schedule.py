"""A session of scenarios: opened once (one compiled collector, one warm server spawner), the
scenarios run in order, and always closed; or, with `jobs` > 1, run several at once on a pool
of labs, their pieces of stream published in the scenarios' order.

The pool (`--jobs N`): N worker processes, each a lab session of its own (its own collector,
spawner, cgroups and capture, as a sequential session has), running one scenario at a time and
handing each back as a piece of stream (sessions/lab/attempts.py). Processes, not threads:
nothing is shared but the kernel, whose views (the client's cgroup, its process tree, its
ports) are each lab's own.

    pool = Pool(options, jobs=2)
    pool.run(orders, done)        # done(i, piece) in the orders' order, as each becomes next
    pool.close()                  # cancel() first to stop mid-scenario (from any thread)
"""

import collections
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import cast

from sessions.lab.attempts import AttemptOrder, AttemptPiece, AttemptWorker
from sessions.lab.session import Options, RunError, Session, end_reason
from sessions.spec.client_spec import ClientSpec
from sessions.spec.scenario import Scenario
from sessions.spec.task import TaskError
from sessions.stream.codec import from_json
from sessions.stream.events import GradeStarted, SessionEnded
from sessions.stream.stream import EventStream


def run_session(stream: EventStream, scenarios: list[Scenario], out_dir: Path,
                options: Options | None = None, grade: GradeStarted | None = None,
                jobs: int = 1, spec: ClientSpec | None = None) -> None:
    """Run the scenarios; always closes the session (SessionEnded says how it ended). With
    `grade`, the scenarios are the attempts of `evlab grade` and it says who is graded (and
    `spec` is that client, which several labs at once each resolve)."""
    if jobs > 1 and len(scenarios) > 1:
        return _at_once(stream, scenarios, out_dir, options or Options(), grade, jobs, spec)
    with Session(stream, out_dir, options).opened(scenarios, grade) as session:
        for scenario in scenarios:
            session.run_scenario(scenario)


def _at_once(stream: EventStream, scenarios: list[Scenario], out_dir: Path, options: Options,
             grade: GradeStarted | None, jobs: int, spec: ClientSpec | None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)

    def publish(_: int, piece: AttemptPiece) -> None:
        for name, data in piece.files.items():   # pcaps and records, for the archive
            (out_dir / name).write_bytes(data)
        for line in piece.lines:
            stream.publish(from_json(line))

    bases = grade.scenarios if grade is not None else ()
    orders = [AttemptOrder("", spec if grade is not None else None, {}, s, bases)
              for s in scenarios]
    error, pool = None, None
    try:
        pool = Pool(options, min(jobs, len(scenarios)))
        pool.run(orders, publish)
    except BaseException as e:
        error = e
        if pool is not None and isinstance(e, KeyboardInterrupt):
            pool.cancel()
        raise
    finally:
        if pool is not None:
            pool.close()
        reason = end_reason(error)
        stream.publish(SessionEnded(time.monotonic_ns(), partial=reason != "complete",
                                    reason=reason))


CLOSE_S = 30.0


def _serve(conn, options: Options, name: str) -> None:
    """A worker process: open a lab, run what is sent, close the lab when told (or on SIGTERM
    stop the scenario running and close)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent decides when to stop
    worker = None
    try:
        worker = AttemptWorker(options, name)
        signal.signal(signal.SIGTERM, lambda *_: worker.cancel())
        conn.send(("ready", name))
        while (order := conn.recv()) is not None:
            try:
                conn.send(("piece", worker.run(order)))
            except KeyboardInterrupt:   # cancelled: its teardown ran
                conn.send(("error", "cancelled"))
                break
            except TaskError as e:   # the task's mistake: said as the task's, not the lab's
                conn.send(("mistake", str(e)))
            except Exception as e:   # noqa: BLE001 - said to the parent in one line
                conn.send(("error", f"{type(e).__name__}: {e}"))
    except Exception as e:   # noqa: BLE001 - the lab did not open
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        if worker is not None:
            worker.close()
        conn.close()


class Pool:
    def __init__(self, options: Options, jobs: int):
        context = multiprocessing.get_context("spawn")   # no copy of this process's threads
        self._workers: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []
        try:
            for n in range(1, jobs + 1):
                ours, theirs = context.Pipe()
                process = context.Process(target=_serve, args=(theirs, options, f"lab-{n}"),
                                          name=f"evlab-lab-{n}")
                process.start()
                theirs.close()
                self._workers.append((process, ours))
            for _, conn in self._workers:   # every lab open before the first scenario
                kind, what = _receive(conn)
                if kind != "ready":
                    raise RunError(f"a worker's lab did not open: {what}")
        except BaseException:
            self.close()
            raise

    def run(self, orders: list[AttemptOrder], done: Callable[[int, AttemptPiece], None],
            dispatched: Callable[[int], None] | None = None) -> None:
        """Run every order on whichever lab is free (dispatched(i) as order i is sent); hand
        the pieces to done(i, piece) in the orders' order (a finished piece waits for those
        before it)."""
        queue = collections.deque(enumerate(orders))
        idle = [conn for _, conn in self._workers]
        busy: dict[Connection, int] = {}
        finished: dict[int, AttemptPiece] = {}
        following = 0
        while queue or busy:
            while queue and idle:
                conn = idle.pop()
                index, order = queue.popleft()
                conn.send(order)
                busy[conn] = index
                if dispatched is not None:
                    dispatched(index)
            for ready in multiprocessing.connection.wait(list(busy)):
                conn = cast(Connection, ready)   # wait() hands back what it was given
                index = busy.pop(conn)
                kind, what = _receive(conn)
                if kind == "mistake":
                    raise TaskError(what)
                if kind != "piece" or not isinstance(what, AttemptPiece):
                    raise RunError(f"{orders[index].scenario.id}: {what}")
                finished[index] = what
                idle.append(conn)
            while following in finished:
                done(following, finished.pop(following))
                following += 1

    def cancel(self) -> None:
        """Stop the scenarios running now (each lab tears its scenario down)."""
        for process, _ in self._workers:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)

    def close(self) -> None:
        for _, conn in self._workers:
            try:
                conn.send(None)
            except OSError:
                pass
        for process, conn in self._workers:
            process.join(CLOSE_S)
            if process.is_alive():   # stuck: what it leaves is swept by the next session
                process.kill()
                process.join()
            conn.close()
        self._workers = []


def _receive(conn) -> tuple[str, object]:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return "error", "its process died"
