"""The noise helper program that sessions.lab.noise.Noise starts, once per helper, each in a
session of its own::

    python -m sessions.lab.noise_helper KIND --parent PID --workdir DIR --name NAME \
        [--sink FD:PORT ...]

- ``traffic``: sinks on the listening sockets the parent bound and handed over (``--sink``), and a
  talker connecting to them in turn, ~50 connections/s in all, sending 1-8 KiB each.
- ``churn``: temp files in DIR/churn, ~100/s of 1-8 KiB, every 10th fsync'd, the newest 20 kept.
- ``cpu``: spins at nice 0.

Each counts what it really did in DIR/noise-NAME.json, rewritten atomically every 0.2 s (``cpu``
writes none: its CPU time is read from outside), and exits on its own once the process that
started it is gone (it sees itself re-parented), leaving no churn file behind.
"""

import argparse
import itertools
import json
import os
import random
import socket
import threading
import time
from pathlib import Path

HOST = "127.0.0.1"
KINDS = ("traffic", "churn", "cpu")

TRAFFIC_CONNECTIONS_PER_S = 50    # all sinks together
TRAFFIC_BYTES = (1024, 8192)      # per connection
SINK_IDLE_S = 0.2                 # a sink drops a silent connection (the twin waits for an answer)
CHURN_FILES_PER_S = 100
CHURN_BYTES = (1024, 8192)
CHURN_FSYNC_EVERY = 10
CHURN_KEEP = 20                   # files alive at a time, so the churn is visible from outside
STATS_EVERY_S = 0.2               # how often a helper rewrites its stats file
WATCHDOG_S = 0.25


class Stats:
    """Counters shared by threads, written atomically to a record file (a helper's, and the
    twin's record its parent keeps)."""

    def __init__(self, path: Path):
        self.path, self.lock = path, threading.Lock()
        self.data: dict = {}

    def add(self, key: str, n: int = 1, sub: int | None = None) -> None:
        with self.lock:
            if sub is None:
                self.data[key] = self.data.get(key, 0) + n
            else:
                table = self.data.setdefault(key, {})
                table[str(sub)] = table.get(str(sub), 0) + n

    def write(self) -> None:
        with self.lock:
            text = json.dumps(self.data)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.path)


class _Pacer:
    """Sleeps so that ticks come at most `per_s` a second; a late tick is not made up with a
    burst afterwards, so the rate stays bounded even after a stall."""

    def __init__(self, per_s: float, stop: threading.Event):
        self.period, self.stop, self.next = 1.0 / per_s, stop, time.monotonic()

    def wait(self) -> None:
        self.next = max(self.next + self.period, time.monotonic())
        self.stop.wait(self.next - time.monotonic())


def _watch_parent(parent: int, stop: threading.Event) -> None:
    """Like sessions.lab.event_log.exit_with_parent: once re-parented, our starter is gone."""
    def watch() -> None:
        while not stop.wait(WATCHDOG_S):
            if os.getppid() != parent:
                stop.set()
    threading.Thread(target=watch, name="watchdog", daemon=True).start()


def _run_traffic(stop: threading.Event, stats: Stats, sinks: list[str]) -> None:
    ports = []
    for spec in sinks:
        fd, port = (int(x) for x in spec.split(":"))
        listener = socket.socket(fileno=fd)
        listener.settimeout(WATCHDOG_S)  # so the accept loop sees stop
        threading.Thread(target=_sink, args=(stop, stats, listener, port), daemon=True).start()
        ports.append(port)
    payload = os.urandom(TRAFFIC_BYTES[1])
    pacer, last_write = _Pacer(TRAFFIC_CONNECTIONS_PER_S, stop), 0.0
    for port in itertools.cycle(ports):  # only the sinks evlab's parent bound for us
        if stop.is_set():
            return
        n = random.randint(*TRAFFIC_BYTES)
        try:
            with socket.create_connection((HOST, port), timeout=1.0) as sock:
                sock.sendall(payload[:n])
            stats.add("sent", n, sub=port)
            stats.add("connections")
        except OSError:
            stats.add("connect_errors")
        if time.monotonic() - last_write >= STATS_EVERY_S:
            stats.write()
            last_write = time.monotonic()
        pacer.wait()


def _sink(stop: threading.Event, stats: Stats, listener: socket.socket, port: int) -> None:
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        stats.add("accepted", sub=port)
        threading.Thread(target=_drain, args=(stats, conn, port), daemon=True).start()


def _drain(stats: Stats, conn: socket.socket, port: int) -> None:
    conn.settimeout(SINK_IDLE_S)  # the twin waits for an answer that never comes: hang up on it
    with conn:
        try:
            while data := conn.recv(65536):
                stats.add("received", len(data), sub=port)
        except OSError:
            pass


def _run_churn(stop: threading.Event, stats: Stats, workdir: Path) -> None:
    churn = workdir / "churn"
    churn.mkdir(parents=True, exist_ok=True)
    block, live = os.urandom(CHURN_BYTES[1]), []
    pacer, last_write = _Pacer(CHURN_FILES_PER_S, stop), 0.0
    for i in itertools.count():
        if stop.is_set():
            break
        path, n = churn / f"churn-{os.getpid()}-{i}.tmp", random.randint(*CHURN_BYTES)
        with open(path, "wb") as f:
            f.write(block[:n])
            if i % CHURN_FSYNC_EVERY == 0:
                f.flush()
                os.fsync(f.fileno())
                stats.add("fsyncs")
        stats.add("created")
        stats.add("bytes_written", n)
        live.append(path)
        if len(live) > CHURN_KEEP:
            live.pop(0).unlink()
            stats.add("deleted")
        if time.monotonic() - last_write >= STATS_EVERY_S:
            stats.write()
            last_write = time.monotonic()
        pacer.wait()
    for path in live:  # a graceful end (parent gone) leaves nothing behind
        path.unlink(missing_ok=True)
        stats.add("deleted")


def _run_cpu(stop: threading.Event) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)  # nice 0 even if evlab itself runs niced
    except OSError:
        pass
    spins = 0
    while not stop.is_set():
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            spins += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one evlab noise helper (started by Noise)")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--sink", action="append", default=[],
                        help="FD:PORT of a listening sink the parent bound (traffic)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    _watch_parent(args.parent, stop)
    if os.getppid() != args.parent:  # the starter died before we got here
        return
    if args.kind == "cpu":  # its figure is read from outside (psutil), no stats file
        _run_cpu(stop)
        return
    stats = Stats(args.workdir / f"noise-{args.name}.json")
    if args.kind == "traffic":
        _run_traffic(stop, stats, args.sink)
    else:
        _run_churn(stop, stats, args.workdir)
    stats.write()


if __name__ == "__main__":
    main()
