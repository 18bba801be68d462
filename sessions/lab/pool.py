"""Several scenarios at once on this machine (`--jobs N`): N worker processes, each a lab
session of its own (its own collector, spawner, cgroups and capture, as a sequential session
has), running one scenario at a time and handing each back as a piece of stream
(sessions/lab/attempts.py). Processes, not threads: nothing is shared but the kernel, whose
views (the client's cgroup, its process tree, its ports) are each lab's own.

    pool = Pool(options, jobs=2)
    pool.run(orders, done)        # done(piece) in the orders' order, as each becomes next
    pool.close()                  # cancel() first to stop mid-scenario (from any thread)
"""

import collections
import multiprocessing
import multiprocessing.connection
import os
import signal
from collections.abc import Callable

from sessions.lab.attempts import AttemptOrder, AttemptPiece, AttemptWorker
from sessions.lab.session import Options, RunError

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
        self._workers: list[tuple[multiprocessing.process.BaseProcess, object]] = []
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

    def run(self, orders: list[AttemptOrder], done: Callable[[AttemptPiece], None]) -> None:
        """Run every order on whichever lab is free; hand the pieces to done() in the orders'
        order (a finished piece waits for those before it)."""
        queue = collections.deque(enumerate(orders))
        idle = [conn for _, conn in self._workers]
        busy: dict[object, int] = {}
        finished: dict[int, AttemptPiece] = {}
        following = 0
        while queue or busy:
            while queue and idle:
                conn = idle.pop()
                index, order = queue.popleft()
                conn.send(order)
                busy[conn] = index
            for conn in multiprocessing.connection.wait(list(busy)):
                index = busy.pop(conn)
                kind, what = _receive(conn)
                if kind != "piece":
                    raise RunError(f"{orders[index].scenario.id}: {what}")
                finished[index] = what
                idle.append(conn)
            while following in finished:
                done(finished.pop(following))
                following += 1

    def cancel(self) -> None:
        """Stop the scenarios running now (each lab tears its scenario down)."""
        for process, _ in self._workers:
            if process.is_alive():
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
