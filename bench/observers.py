"""The ways a client is run: untraced, under evlab's BCC collector, strace, bpftrace, and two
diagnostics (evlab loaded but the client untracked; the floor of any raw_syscalls tracer).

Each observer is a context manager: set-up (BPF compile, bpftrace start-up) happens in
__enter__, outside every timed region; `run(argv, source, timeout_s)` times one client.
Client CPU is always the client's own (os.wait4 rusage, or the rusage wrapper under strace);
a tracer's own CPU is reported apart as `tracer_cpu_s` where it can be told apart.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.build import build
from bench.measure import QUIET, Run, RunFailed, timed, wait_rusage

FUNCTIONS = ("hash_file", "send_payload", "busy_wait")
PUMP_S = 0.1      # the runner's pump rate: counters and events polled at 10 Hz


class Untraced:
    name = "untraced"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def run(self, argv, source, timeout_s) -> Run:
        return timed(argv, timeout_s)


class Evlab:
    """evlab's BCC collector, used as the runner uses it: launch, pump at 10 Hz, finish."""

    name = "evlab"

    def __enter__(self):
        from probes.collectors import open_collector
        self.collector, _ = open_collector("bcc", functions=FUNCTIONS)  # compile: not timed
        self.invocation = 0
        return self

    def __exit__(self, *exc):
        self.collector.close()

    def run(self, argv, source, timeout_s) -> Run:
        self.invocation += 1
        inv, before = self.invocation, self.collector.overhead()
        stop = threading.Event()
        started = time.perf_counter()
        proc = self.collector.launch(inv, argv, source, **QUIET)
        pump = threading.Thread(target=self._pump, args=(inv, stop), daemon=True)
        pump.start()
        try:
            status, usage = wait_rusage(proc, timeout_s)
        finally:
            wall = time.perf_counter() - started
            stop.set()
            pump.join()
        snap = self.collector.finish(inv)
        self.collector.poll_events()
        after = self.collector.overhead()
        extra = {"reads": snap.syscalls_by_name.get("read", 0),
                 "read_bytes": snap.counters.get("read_bytes"),
                 "source_read_bytes": snap.counters.get("source_read_bytes"),
                 "syscalls": snap.counters.get("syscalls"),
                 "lost_events": snap.counters.get("lost_events"),
                 "functions": dict(snap.functions),
                 "bpf_run_s": _delta(after, before, "bpf_run_time_ns", 1e-9),
                 "bpf_run_count": _delta(after, before, "bpf_run_count", 1)}
        return Run(wall, usage.ru_utime, usage.ru_stime, status, proc.pid, extra)

    def _pump(self, inv: int, stop: threading.Event) -> None:
        while not stop.wait(PUMP_S):
            self.collector.snapshot(inv)
            self.collector.poll_events()


class EvlabIdle(Evlab):
    """Diagnostic: the collector loaded but the client not tracked (what every process pays)."""

    name = "evlab-idle"

    def run(self, argv, source, timeout_s) -> Run:
        return timed(argv, timeout_s)


class Strace:
    """`strace -f -c -o /dev/null`, around a wrapper that reports the client's own rusage."""

    name = "strace"

    def __enter__(self):
        self.wrap = build("rusage_wrap")
        self.tmp = tempfile.TemporaryDirectory(prefix="evlab-bench-strace-")
        return self

    def __exit__(self, *exc):
        self.tmp.cleanup()

    def run(self, argv, source, timeout_s) -> Run:
        usage_file = Path(self.tmp.name) / "client.rusage"
        total = timed(["strace", "-f", "-c", "-o", "/dev/null", str(self.wrap),
                       str(usage_file), *argv], timeout_s)
        try:
            utime_us, stime_us, _, status = (int(x) for x in usage_file.read_text().split())
        except (OSError, ValueError) as e:
            raise RunFailed(f"strace run left no client rusage: {e}") from None
        user, sys = utime_us / 1e6, stime_us / 1e6
        return Run(total.wall_s, user, sys, status, total.pid,
                   {"tracer_cpu_s": total.cpu_s - user - sys})


BPFTRACE_SCRIPT = """\
tracepoint:raw_syscalls:sys_exit /comm == "%s" && args->id == 0/ {
  @reads[pid] = count();
  if (args->ret > 0) { @bytes[pid] = sum(args->ret); }
}
BEGIN { printf("attached\\n"); }
"""

# Two programs on the tracepoints evlab uses that return at once (no process has pid 0 in a
# syscall): what entering BPF on every syscall costs before any work is done.
FLOOR_SCRIPT = """\
tracepoint:raw_syscalls:sys_enter /pid == 0/ { @enter = count(); }
tracepoint:raw_syscalls:sys_exit /pid == 0/ { @exit = count(); }
BEGIN { printf("attached\\n"); }
"""


class Bpftrace:
    """bpftrace counting read(2) exits and bytes of processes named like the client.

    Started once per block and timed only after it prints "attached" (its start-up is not in
    any run); per-pid totals are read from its maps when it is stopped (SIGINT) in __exit__.
    """

    name = "bpftrace"
    ATTACH_TIMEOUT_S = 60.0

    def __init__(self, comm: str):
        self.script = BPFTRACE_SCRIPT % comm[:15]  # the kernel's comm is at most 15 characters
        self.counts: dict[int, dict[str, int]] = {}

    def __enter__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="evlab-bench-bpftrace-")
        script = Path(self.tmp.name) / "script.bt"
        script.write_text(self.script)
        self.out = Path(self.tmp.name) / "out.json"
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(["bpftrace", "-f", "json", str(script)], stdout=out,
                                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + self.ATTACH_TIMEOUT_S
        while '"attached\\n"' not in self.out.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._stop()
                raise RunFailed("bpftrace did not attach")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self._stop()
        for line in self.out.read_text().splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("type") == "map":
                for name, per_pid in record["data"].items():
                    for pid, value in (per_pid.items() if isinstance(per_pid, dict) else ()):
                        if pid.isdigit():
                            self.counts.setdefault(int(pid), {})[name.lstrip("@")] = value
        self.tmp.cleanup()

    def _stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def run(self, argv, source, timeout_s) -> Run:
        return timed(argv, timeout_s)


class BpfFloor(Bpftrace):
    """Diagnostic: raw_syscalls enter + exit programs doing nothing (bpftrace, never matching)."""

    name = "bpf-floor"

    def __init__(self, comm: str):
        super().__init__(comm)
        self.script = FLOOR_SCRIPT


def _delta(after: dict, before: dict, key: str, scale: float) -> float | None:
    if after.get(key) is None or before.get(key) is None:
        return None
    return (after[key] - before[key]) * scale


def observer(name: str, comm: str):
    """A fresh observer by name (bpftrace needs the client's comm for its filter)."""
    tool = {"strace": "strace", "bpftrace": "bpftrace", "bpf-floor": "bpftrace"}.get(name)
    if tool and shutil.which(tool) is None:
        raise RunFailed(f"{tool} is not installed (`make setup` installs it as root)")
    if name in ("bpftrace", "bpf-floor"):
        return (Bpftrace if name == "bpftrace" else BpfFloor)(comm)
    return {"untraced": Untraced, "evlab": Evlab, "evlab-idle": EvlabIdle,
            "strace": Strace}[name]()
