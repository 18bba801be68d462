"""Ambient noise that evlab's verdicts must hold up against.

An instrument that only works on a quiet machine is not evidence, so a session can run this
next to the client. Each kind runs in the background and counts what it really did:

- ``traffic``: unrelated loopback TCP. Two sinks on 127.0.0.1 (one at endpoint_port+1 when that
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

This module is the parent side, run inside evlab; traffic, churn and cpu are helper programs it
starts (sessions/lab/noise_helper.py, ``python -m sessions.lab.noise_helper``). What each kind
did is on record in workdir: ``noise-traffic.json`` (per sink port: connections accepted, bytes
received and sent; connections, connect errors), ``noise-churn.json`` (files created, deleted,
fsync'd, bytes written) and ``noise-twin.json`` (runs per target port, start errors), each
rewritten atomically as it goes; the spinners' CPU time is read from outside (psutil).

Nothing here ever connects to endpoint_port. Every process runs in its own session (so its
process group can be SIGKILLed as a whole); the Python helpers also exit on their own once the
process that started them is gone. Usage::

    with Noise(workdir, endpoint_port, client) as noise:   # start() ... stop()
        ...
        noise.pids()   # the noise processes running now, by role
"""

import contextlib
import functools
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from probes.boundary.netns import HostNetwork, Network
from sessions.lab.noise_helper import HOST, Stats

KINDS = ("traffic", "twin", "churn", "cpu")
ROOT = Path(__file__).resolve().parents[2]
HELPER = "sessions.lab.noise_helper"   # the helper program's module (python -m HELPER KIND ...)

TWIN_EVERY_S = 0.2
TWIN_TIMEOUT_S = 5.0              # the client's own socket timeout is 20 s; never wait that long
TWIN_INPUT_BYTES = 64 * 1024
CPU_SPINNERS = 2


class Noise:
    """Background noise of the given kinds; see the module docstring."""

    def __init__(self, workdir: Path, endpoint_port: int, client: Path, kinds=KINDS,
                 network: Network | None = None):
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown noise kinds: {sorted(unknown)}")
        self.workdir = Path(workdir)
        self.endpoint_port = endpoint_port
        self.client = Path(client)
        self.kinds = tuple(kinds)
        self.network = network or HostNetwork()   # the lab's: its sinks, helpers and twins
        self.sinks: dict[int, str] = {}   # port -> "endpoint_port+1" or "os-chosen"
        self.twin_path = self.workdir / "twin" / self.client.name
        self.twin_input = self.workdir / "twin" / "input.bin"
        self._helpers: dict[str, subprocess.Popen] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()              # guards the twin of the moment
        self._twin: subprocess.Popen | None = None
        self._twin_thread: threading.Thread | None = None
        self._twin_record = Stats(self.workdir / "noise-twin.json")   # runs by port, errors
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

    # --- traffic ----------------------------------------------------------------------
    def _start_traffic(self) -> None:
        # The parent binds the sinks and hands the sockets over, so their ports are known
        # (and can be checked against endpoint_port) before the helper has even started.
        adjacent = self.endpoint_port + 1
        listen = functools.partial(self.network.run, _listen)
        first = listen(adjacent) if adjacent <= 65535 else None
        listeners: list[tuple[socket.socket, str]] = [(first, "endpoint_port+1")] if first else []
        while len(listeners) < 2:
            sock = listen(0)
            assert sock is not None   # port 0: a failure raises, it never returns None
            if sock.getsockname()[1] == self.endpoint_port:  # free only if the endpoint is not up
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
        targets = [*self.sinks, self.network.run(_closed_port,
                                                 {self.endpoint_port, *self.sinks})]
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
                        [*self.network.argv(), str(self.twin_path), HOST, str(port),
                         str(self.twin_input)],
                        cwd=self.twin_path.parent, start_new_session=True,
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
                except OSError:
                    self._twin_record.add("start_errors")
            # Its exit status does not matter, only that it ran; this thread is the only one
            # that polls (reaps) it, so the group it kills below is never a reused pid.
            while (twin is not None and twin.poll() is None and not self._stop.is_set()
                   and time.monotonic() - began < TWIN_TIMEOUT_S):
                self._stop.wait(0.01)
            with self._lock:
                if twin is not None:
                    _kill_group(twin)
                    self._twin_record.add("runs", sub=port)
                self._twin = None
            with contextlib.suppress(OSError):  # a record is not worth failing the noise
                self._twin_record.write()
            self._stop.wait(max(0.0, began + TWIN_EVERY_S - time.monotonic()))

    # --- helpers ----------------------------------------------------------------------
    def _spawn(self, name: str, kind: str, *args: str, pass_fds=()) -> None:
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                           os.environ.get("PYTHONPATH")]))}
        with open(self.workdir / f"noise-{name}.log", "wb") as log:
            self._helpers[name] = subprocess.Popen(
                [*self.network.argv(), sys.executable, "-m", HELPER, kind, "--parent",
                 str(os.getpid()), "--workdir", str(self.workdir), "--name", name, *args],
                cwd=self.workdir, env=env, start_new_session=True, pass_fds=pass_fds,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)


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
