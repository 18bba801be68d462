"""The ways a client is run: untraced, under evlab's BCC collector, strace, bpftrace, and two
diagnostics (evlab loaded and tracking another process, the client untracked; the floor of any
raw_syscalls tracer).

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
from probes import syscalls

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
    """evlab's BCC collector, used as the runner uses it: launch, pump at 10 Hz, finish.

    `run(..., measure_bpf=True)` also has the kernel time the programs (BPF statistics, which
    cost every BPF program run on the machine: never on for a timed run, and off in sessions)."""

    name = "evlab"

    def __enter__(self):
        from probes.collectors.choose import open_collector
        self.collector, _ = open_collector("bcc", functions=FUNCTIONS)  # compile: not timed
        self.invocation = 0
        return self

    def __exit__(self, *exc):
        self.collector.close()

    def run(self, argv, source, timeout_s, measure_bpf: bool = False,
            target: Path | None = None) -> Run:
        self.invocation += 1
        inv = self.invocation
        stats = syscalls.enable_bpf_stats() if measure_bpf else None
        before = own_bpf_stats()
        stop = threading.Event()
        started = time.perf_counter()
        proc = self.collector.launch(inv, argv, source, target=target, **QUIET)
        pump = threading.Thread(target=self._pump, args=(inv, stop), daemon=True)
        pump.start()
        try:
            status, usage = wait_rusage(proc, timeout_s)
        finally:
            wall = time.perf_counter() - started
            stop.set()
            pump.join()
            after = own_bpf_stats()
            if stats is not None:
                os.close(stats)
        snap = self.collector.finish(inv)
        self.collector.poll_events()
        extra = {"reads": snap.syscalls_by_name.get("read", 0),
                 "read_bytes": snap.counters.get("read_bytes"),
                 "source_read_bytes": snap.counters.get("source_read_bytes"),
                 "syscalls": snap.counters.get("syscalls"),
                 "lost_events": snap.counters.get("lost_events"),
                 "target_write_bytes": snap.counters.get("target_write_bytes"),
                 "functions": dict(snap.functions)}
        if stats is not None:
            extra.update(bpf_run_s=(after[0] - before[0]) * 1e-9,
                         bpf_run_count=after[1] - before[1])
        return Run(wall, usage.ru_utime, usage.ru_stime, status, proc.pid, extra)

    def _pump(self, inv: int, stop: threading.Event) -> None:
        while not stop.wait(PUMP_S):
            self.collector.snapshot(inv)
            self.collector.poll_events()


class EvlabIdle(Evlab):
    """Diagnostic: the collector loaded and tracking another process (a sleeping bystander, as
    while a session runs), the client not tracked: what every other process pays."""

    name = "evlab-idle"

    def __enter__(self):
        super().__enter__()
        self.invocation += 1
        self.bystander = self.collector.launch(self.invocation, ["sleep", "3600"], None, **QUIET)
        return self

    def __exit__(self, *exc):
        self.bystander.kill()
        self.bystander.wait()
        self.collector.finish(self.invocation)
        super().__exit__(*exc)

    def run(self, argv, source, timeout_s, measure_bpf: bool = False) -> Run:
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


def own_bpf_stats() -> tuple[int, int]:
    """(run time ns, run count) summed over the BPF programs this process holds (evlab's
    collector, in the evlab conditions), from the kernel's statistics: counted only while they
    are enabled."""
    run_ns = run_cnt = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            info = dict(line.split(":", 1) for line in
                        Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines() if ":" in line)
        except OSError:
            continue   # closed meanwhile
        run_ns += int(info.get("run_time_ns", "0"))
        run_cnt += int(info.get("run_cnt", "0"))
    return run_ns, run_cnt


def observer(name: str, comm: str):
    """A fresh observer by name (bpftrace needs the client's comm for its filter)."""
    tool = {"strace": "strace", "bpftrace": "bpftrace", "bpf-floor": "bpftrace"}.get(name)
    if tool and shutil.which(tool) is None:
        raise RunFailed(f"{tool} is not installed (`make setup` installs it as root)")
    if name in ("bpftrace", "bpf-floor"):
        return (Bpftrace if name == "bpftrace" else BpfFloor)(comm)
    return {"untraced": Untraced, "evlab": Evlab, "evlab-idle": EvlabIdle,
            "strace": Strace}[name]()
