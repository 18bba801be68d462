"""Ambient noise that evlab's verdicts must hold up against.

An instrument that only works on a quiet machine is not evidence, so a session can run this
next to the client. Each kind runs in the background and counts what it really did:

- ``traffic``: unrelated loopback TCP. Two sinks on 127.0.0.1 (one at receiver_port+1 when that
  port is free, else an OS-chosen port; the other OS-chosen) read and discard whatever arrives. A
  talker connects to them in turn, ~50 connections/s in all, sending 1-8 KiB each (~225 KiB/s).
  One helper process.
- ``twin``: a copy of the client's own executable, under the same file name in workdir/twin, run
  every 200 ms (one at a time) as ``twin 127.0.0.1 PORT workdir/twin/input.bin`` where PORT
  cycles over the sinks and a closed port. It reads a file and connects, like the client, but it
  is not the process evlab started: attribution must come from the process tree, never a name.
- ``churn``: temp-file churn in workdir/churn, ~100 files/s of 1-8 KiB, every 10th fsync'd; the
  newest 20 are kept and older ones deleted. One helper process.
- ``cpu``: two processes spinning at nice 0, keeping both cores of this machine busy.

Nothing here ever connects to receiver_port. Every process runs in its own session (so its
process group can be SIGKILLed as a whole); the Python helpers also exit on their own once the
process that started them is gone. Usage::

    with Noise(workdir, receiver_port, client) as noise:   # start() ... stop()
        ...
        noise.stats()   # what the noise did so far
"""

import argparse
import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

KINDS = ("traffic", "twin", "churn", "cpu")
HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[2]

TRAFFIC_CONNECTIONS_PER_S = 50    # all sinks together
TRAFFIC_BYTES = (1024, 8192)      # per connection
SINK_IDLE_S = 0.2                 # a sink drops a silent connection (the twin waits for an answer)
TWIN_EVERY_S = 0.2
TWIN_TIMEOUT_S = 5.0              # the client's own socket timeout is 20 s; never wait that long
TWIN_INPUT_BYTES = 64 * 1024
CHURN_FILES_PER_S = 100
CHURN_BYTES = (1024, 8192)
CHURN_FSYNC_EVERY = 10
CHURN_KEEP = 20                   # files alive at a time, so the churn is visible from outside
CPU_SPINNERS = 2
STATS_EVERY_S = 0.2               # how often a helper rewrites its stats file
WATCHDOG_S = 0.25


class Noise:
    """Background noise of the given kinds; see the module docstring."""

    def __init__(self, workdir: Path, receiver_port: int, client: Path, kinds=KINDS):
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown noise kinds: {sorted(unknown)}")
        self.workdir = Path(workdir)
        self.receiver_port = receiver_port
        self.client = Path(client)
        self.kinds = tuple(kinds)
        self.sinks: dict[int, str] = {}   # port -> "receiver_port+1" or "os-chosen"
        self.twin_path = self.workdir / "twin" / self.client.name
        self.twin_input = self.workdir / "twin" / "input.bin"
        self._helpers: dict[str, subprocess.Popen] = {}
        self._cpu_seconds: dict[str, float] = {}   # last reading, kept after the spinner is gone
        self._stop = threading.Event()
        self._lock = threading.Lock()              # guards the twin's state below
        self._twin: subprocess.Popen | None = None
        self._twin_thread: threading.Thread | None = None
        self._twin_runs: Counter = Counter()       # target port -> runs
        self._twin_errors = 0
        self._started = False

    # --- lifecycle --------------------------------------------------------------------
    def start(self) -> "Noise":
        if self._started:
            return self
        self._started = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            if "traffic" in self.kinds:
                self._start_traffic()
            if "churn" in self.kinds:
                self._spawn("churn", "churn")
            if "cpu" in self.kinds:
                for i in range(CPU_SPINNERS):
                    self._spawn(f"cpu-{i}", "cpu")
            if "twin" in self.kinds:
                self._start_twin()
        except BaseException:  # including an interrupt: never leave half the noise running
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop and reap everything; safe to call twice, or before start()."""
        self._stop.set()
        if self._twin_thread is not None:
            self._twin_thread.join(TWIN_TIMEOUT_S + 1)
        with self._lock:  # the twin thread kills its own twin; this is only a safety net
            if self._twin is not None:
                _kill_group(self._twin)
                self._twin = None
        self._read_cpu()  # the spinners' final figure, before they are gone
        for proc in self._helpers.values():
            _kill_group(proc)
        if "churn" in self._helpers:  # the churner was killed mid-way: remove what it left
            for path in (self.workdir / "churn").glob("*"):
                path.unlink(missing_ok=True)

    def __enter__(self) -> "Noise":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what it did ------------------------------------------------------------------
    def pids(self) -> dict[str, int]:
        """Noise processes started and not yet stopped, by role (traffic, churn, cpu-0,
        cpu-1, and the twin of the moment)."""
        found = {name: p.pid for name, p in self._helpers.items() if p.returncode is None}
        with self._lock:
            if self._twin is not None:
                found["twin"] = self._twin.pid
        return found

    def stats(self) -> dict:
        out: dict = {}
        if "traffic" in self.kinds:
            record = self._read_helper("traffic")
            out["traffic"] = {
                "adjacent_port": self.receiver_port + 1,
                "sinks": {port: {"bound": how,
                                 "connections": record.get("accepted", {}).get(str(port), 0),
                                 "bytes_received": record.get("received", {}).get(str(port), 0)}
                          for port, how in self.sinks.items()},
                "bytes_sent": {int(p): n for p, n in record.get("sent", {}).items()},
                "connections": record.get("connections", 0),
                "connect_errors": record.get("connect_errors", 0),
            }
        if "twin" in self.kinds:
            with self._lock:
                out["twin"] = {"path": str(self.twin_path), "runs": sum(self._twin_runs.values()),
                               "runs_by_port": dict(self._twin_runs),
                               "start_errors": self._twin_errors}
        if "churn" in self.kinds:
            record = self._read_helper("churn")
            out["churn"] = {k: record.get(k, 0)
                            for k in ("created", "deleted", "fsyncs", "bytes_written")}
        if "cpu" in self.kinds:
            self._read_cpu()
            out["cpu"] = {"spinners": CPU_SPINNERS,
                          "cpu_seconds": round(sum(self._cpu_seconds.values()), 3)}
        return out

    # --- traffic ----------------------------------------------------------------------
    def _start_traffic(self) -> None:
        # The parent binds the sinks and hands the sockets over, so their ports are known
        # (and can be checked against receiver_port) before the helper has even started.
        adjacent = self.receiver_port + 1
        first = _listen(adjacent) if adjacent <= 65535 else None
        listeners = [(first, "receiver_port+1")] if first else []
        while len(listeners) < 2:
            sock = _listen(0)
            if sock.getsockname()[1] == self.receiver_port:  # free only if the receiver is not up
                sock.close()
                continue
            listeners.append((sock, "os-chosen"))
        try:
            for sock, how in listeners:
                self.sinks[sock.getsockname()[1]] = how
            args = [f"--sink={s.fileno()}:{s.getsockname()[1]}" for s, _ in listeners]
            self._spawn("traffic", "traffic", *args, pass_fds=[s.fileno() for s, _ in listeners])
        finally:
            for sock, _ in listeners:  # the helper holds its own copies now
                sock.close()

    # --- twin -------------------------------------------------------------------------
    def _start_twin(self) -> None:
        self.twin_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.client, self.twin_path)
        self.twin_input.write_bytes(os.urandom(TWIN_INPUT_BYTES))
        targets = [*self.sinks, _closed_port(avoid={self.receiver_port, *self.sinks})]
        self._twin_thread = threading.Thread(target=self._run_twins, args=(targets,),
                                             name="noise-twin", daemon=True)
        self._twin_thread.start()

    def _run_twins(self, targets: list[int]) -> None:
        for port in itertools.cycle(targets):
            began = time.monotonic()
            twin = None
            with self._lock:  # stop() sees either no twin or one it can kill
                if self._stop.is_set():
                    return
                try:
                    twin = self._twin = subprocess.Popen(
                        [str(self.twin_path), HOST, str(port), str(self.twin_input)],
                        cwd=self.twin_path.parent, start_new_session=True,
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
                except OSError:
                    self._twin_errors += 1
            # Its exit status does not matter, only that it ran; this thread is the only one
            # that polls (reaps) it, so the group it kills below is never a reused pid.
            while (twin is not None and twin.poll() is None and not self._stop.is_set()
                   and time.monotonic() - began < TWIN_TIMEOUT_S):
                self._stop.wait(0.01)
            with self._lock:
                if twin is not None:
                    _kill_group(twin)
                    self._twin_runs[port] += 1
                self._twin = None
            self._stop.wait(max(0.0, began + TWIN_EVERY_S - time.monotonic()))

    # --- helpers ----------------------------------------------------------------------
    def _spawn(self, name: str, kind: str, *args: str, pass_fds=()) -> None:
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                           os.environ.get("PYTHONPATH")]))}
        with open(self.workdir / f"noise-{name}.log", "wb") as log:
            self._helpers[name] = subprocess.Popen(
                [sys.executable, "-m", "sessions.lab.noise", kind, "--parent", str(os.getpid()),
                 "--workdir", str(self.workdir), "--name", name, *args],
                cwd=self.workdir, env=env, start_new_session=True, pass_fds=pass_fds,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)

    def _read_helper(self, name: str) -> dict:
        try:
            return json.loads((self.workdir / f"noise-{name}.json").read_text())
        except (OSError, ValueError):
            return {}

    def _read_cpu(self) -> None:
        for name, proc in self._helpers.items():
            if name.startswith("cpu-") and proc.returncode is None:
                try:
                    times = psutil.Process(proc.pid).cpu_times()
                    self._cpu_seconds[name] = times.user + times.system
                except psutil.Error:
                    pass


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process's group (it leads its own session), then reap it."""
    if proc.returncode is None:  # not reaped yet, so its pid (and group id) is still ours
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _listen(port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        if port == 0:
            raise
        return None
    sock.listen(128)
    return sock


def _closed_port(avoid: set[int]) -> int:
    """A port nothing listens on (bound, then released), never one in avoid."""
    while True:
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            port = sock.getsockname()[1]
        if port not in avoid:
            return port


# --- the helper processes (python -m sessions.lab.noise KIND ...) -----------------------------
class _Stats:
    """Counters shared by a helper's threads, written atomically to its stats file."""

    def __init__(self, path: Path):
        self.path, self.lock, self.data = path, threading.Lock(), {}

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
    """Like fixture.events.exit_with_parent: once we are re-parented, our starter is gone."""
    def watch() -> None:
        while not stop.wait(WATCHDOG_S):
            if os.getppid() != parent:
                stop.set()
    threading.Thread(target=watch, name="watchdog", daemon=True).start()


def _run_traffic(stop: threading.Event, stats: _Stats, sinks: list[str]) -> None:
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


def _sink(stop: threading.Event, stats: _Stats, listener: socket.socket, port: int) -> None:
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        stats.add("accepted", sub=port)
        threading.Thread(target=_drain, args=(stats, conn, port), daemon=True).start()


def _drain(stats: _Stats, conn: socket.socket, port: int) -> None:
    conn.settimeout(SINK_IDLE_S)  # the twin waits for an answer that never comes: hang up on it
    with conn:
        try:
            while data := conn.recv(65536):
                stats.add("received", len(data), sub=port)
        except OSError:
            pass


def _run_churn(stop: threading.Event, stats: _Stats, workdir: Path) -> None:
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
    parser.add_argument("kind", choices=("traffic", "churn", "cpu"))
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
    stats = _Stats(args.workdir / f"noise-{args.name}.json")
    if args.kind == "traffic":
        _run_traffic(stop, stats, args.sink)
    else:
        _run_churn(stop, stats, args.workdir)
    stats.write()


if __name__ == "__main__":
    main()
