"""The BCC collector: in-kernel counters and a connect/process event stream for a client tree.

    collector = BccCollector(functions=("my_hash", "my_send"))   # the task's [client] functions
    with collector.launching(invocation=1, client=path, source=src):
        proc = subprocess.Popen([path, ...])       # tracked from its exec on
    collector.snapshot(1)                         # live totals, any time, cheap
    collector.poll_events()                       # events since the last poll
    collector.finish(1)                           # final totals; the invocation's keys are freed
    collector.close()                             # detach everything

The BPF program (collector.bpf.c beside this file) is loaded once, in __init__ (load.py, cache.py);
invocations are retargeted by writing the config map. Overhead: one program runs at the exit of
every syscall on the machine (one hash lookup when untracked), sched_switch and softirqs
likewise, uprobes only in the client's binary. `overhead()` reports the programs' own run time
from the kernel's BPF statistics when they were asked for (`bpf_stats=True`, or
measure_bpf()): the kernel then times every BPF program run on the machine, which costs more
than evlab's programs themselves, so it is off unless asked for.

Beside it: abi.py (every number the .bpf.c and Python share), load.py (compiling, loading,
run-time statistics), btf.py (the tp_btf programs), counters.py (each invocation's counter
slot), events.py (ring-buffer records into events), egress.py (the cgroup hooks).
"""

import contextlib
import ctypes
import dataclasses
import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from probes import syscalls
from probes.bcc import events as bcc_events
from probes.bcc import operations as bcc_ops
from probes.bcc import uprobes as bcc_uprobes
from probes.bcc.abi import FUNC_BASE, MAX_FUNCS, SYSCALL_BASE
from probes.bcc.btf import detach
from probes.bcc.config import invocation_config
from probes.bcc.counters import CounterSlots
from probes.bcc.detaching import detach_all, rehook, unhook
from probes.bcc.egress import CgroupHooks
from probes.bcc.load import CollectorUnavailable, attach_btf, have_filemap, load_bpf, run_stats
from probes.collectors.records import (
    COUNTERS,
    CounterSnapshot,
    EgressTotals,
    KernelEvent,
)
from probes.interrupts import deferred

# CollectorUnavailable: for probes.collectors.choose
__all__ = ["BccCollector", "CollectorUnavailable"]
# What a kernel without the filemap tracepoints cannot show (reads through a mapping)
UNMAPPED = ("source_mapped_bytes",)


class BccCollector:
    name = "bcc"

    def __init__(self, functions: tuple[str, ...] = (),
                 bpf_stats: bool = False):
        self.probe_functions(functions)
        self._stats_fd: int | None = None
        self._attached: dict[Path, tuple[str, ...]] = {}  # binary -> symbols with a uprobe
        self._binary_of: dict[int, Path] = {}              # invocation -> its client binary
        self._probe_lock = threading.Lock()                # attach vs background detach
        self._pending: list[KernelEvent] = []
        self._syscall_names = syscalls.names()
        self._events_seen = 0
        self._started_ns = time.monotonic_ns()
        self._raised: BaseException | None = None   # see _guarded
        self._bpf = load_bpf()
        self._links: list[tuple[int, int]] = []
        self._uprobe_prog: int | None = None   # None: classic uprobes (no uprobe_multi)
        self._uprobe_links: list[int] = []
        self._unhooked: list[bytes] | None = None   # kept between sessions: see reset
        try:
            self._links = attach_btf(self._bpf)
            self._uprobe_prog = _uprobe_multi(self._bpf)
            self._filemap = have_filemap()   # as compiled (load.py): else mapped reads unseen
            self._slots = CounterSlots(self._bpf)
            self._hooks = CgroupHooks(self._bpf)
            self._bpf["events"].open_ring_buffer(self._guarded(self._on_event))
            self._bpf["file_events"].open_ring_buffer(self._guarded(self._on_file_event))
            self._bpf["ops"].open_ring_buffer(self._guarded(self._on_op))
            self._watches = bcc_ops.Watches(self._bpf)
        except BaseException:
            detach(self._links)
            _close(self._uprobe_prog)
            self._bpf.cleanup()
            raise
        self.measure_bpf(bpf_stats)

    # --- retargeting -------------------------------------------------------------------
    @contextlib.contextmanager
    def launching(self, invocation: int, client: Path, source: Path | None,
                  target: Path | None = None, home: Path | None = None):
        """Arm: the next process this process forks and that execs is the tracked client.
        source: a file (by its inode) or a folder on a filesystem of its own (a tree); target:
        a folder on a filesystem of its own, whose files' writes and reads are counted apart,
        as are writes to named files on no filesystem of it, the source or home (the client's
        working directory; this process's by default)."""
        if invocation <= 0:
            raise ValueError("invocation ids start at 1")
        self._binary_of[invocation] = self._attach_functions(Path(client))
        slot = self._slots.assign(invocation)
        # execve() sees the path exactly as the launcher passes it (PATH-searched if bare).
        exec_path = str(client) if "/" in str(client) else shutil.which(str(client)) or ""
        self._bpf["inv_config"][ctypes.c_uint(invocation)] = invocation_config(
            self._bpf["inv_config"].Leaf(), source, exec_path, target, home)
        self._arm(invocation, slot)
        try:
            yield
        finally:
            self._arm(0, 0)

    def _arm(self, armed_inv: int, slot: int) -> None:
        """One launch is armed at a time (the caller serialises launches); what it execs and
        reads is matched against its own invocation's paths (invocation_config)."""
        table = self._bpf["config"]
        cfg = table[ctypes.c_int(0)]
        cfg.launcher_tgid = os.getpid()
        cfg.armed_inv, cfg.armed_slot = armed_inv, slot
        table[ctypes.c_int(0)] = cfg

    def stop_after(self, invocation: int, nbytes: int) -> None:
        """SIGSTOP the invocation's process whose write to the target reaches nbytes, as that
        write returns: a kill fault's exact moment (the lab then kills the tree)."""
        table = self._bpf["stop_at"]
        stop = table.Leaf()
        stop.after, stop.written = nbytes, 0
        table[ctypes.c_uint(invocation)] = stop

    # --- the client's cgroup -----------------------------------------------------------------
    def watch_cgroup(self, invocation: int, cgroup_dir: Path, cgroup_id: int,
                     allowed: list[tuple[str, int]], deny: bool,
                     refused: Sequence[tuple[str, int]] = ()) -> None:
        """Attach the egress hooks to an invocation's cgroup: every destination its sockets
        use is counted; with deny, any not in `allowed` is refused (EPERM) or dropped; those
        in `refused` always are."""
        self._hooks.watch(invocation, self._slots.assign(invocation), cgroup_dir, cgroup_id,
                          allowed, deny, refused)

    def unwatch_cgroup(self, invocation: int) -> None:
        self._hooks.unwatch(invocation)

    def watch_processes(self, invocation: int, pids: dict[str, int]) -> bool:
        """Watch these processes (by name: a server's) and what they fork for the invocation:
        their starts and ends, and every signal they are sent, are its records."""
        self._watches.watch(invocation, pids)
        return True

    def unwatch_processes(self, invocation: int) -> None:
        self._watches.unwatch(invocation)

    def egress(self, invocation: int) -> EgressTotals:
        return bcc_events.egress_totals(self._bpf, invocation)

    def prepare(self, clients) -> None:
        """Attach the function uprobes of every client binary before the first launch, side
        by side: each attach waits for a grace period in the kernel (10-20 ms here), and the
        waits overlap (the built-in suite has eight binaries)."""
        threads = [threading.Thread(target=self._attach_functions, args=(Path(c),),
                                    name="evlab-uprobes") for c in set(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _attach_functions(self, binary: Path) -> Path:
        """Uprobes on a binary's functions, once per session: they stay attached until close()
        (the next attempt of the same client, a grade's, needs them again)."""
        binary = binary.resolve()
        if binary in self._attached:
            return binary
        found = {slot: (symbol, offset) for slot, symbol in enumerate(self.functions)
                 if (offset := bcc_uprobes.symbol_offset(binary, symbol)) is not None}
        link = None
        if self._uprobe_prog is not None and found:
            try:
                link = bcc_uprobes.attach(self._uprobe_prog, binary,
                                          [(offset, slot) for slot, (_, offset) in found.items()])
            except OSError:
                found = {}   # not attached (e.g. a file uprobes cannot go on): unobserved
        with self._probe_lock:   # the tables, BCC's own attach, and close() one at a time
            if binary in self._attached or self._bpf is None:   # attached meanwhile, or closed
                _close(link)
                return binary
            if self._uprobe_prog is None:
                found = self._attach_classic(binary, found)
            elif link is not None:
                self._uprobe_links.append(link)
            self._attached[binary] = tuple(symbol for symbol, _ in found.values())
        return binary

    def _attach_classic(self, binary: Path, found: dict) -> dict:
        """A kernel without uprobe_multi: one BCC uprobe per function."""
        try:
            for slot, (symbol, _) in found.items():
                self._bpf.attach_uprobe(name=str(binary), sym=symbol, fn_name=f"on_func_{slot}")
            return found
        except Exception:
            return {}

    # --- reading -----------------------------------------------------------------------
    def snapshot(self, invocation: int) -> CounterSnapshot:
        counters = dict.fromkeys(COUNTERS, 0)
        binary = self._binary_of.get(invocation)
        functions = dict.fromkeys(self._attached.get(binary, ()) if binary is not None else (), 0)
        syscalls: dict[str, int] = {}
        for cid, value in self._slots.read(invocation).items():
            if cid >= SYSCALL_BASE:
                nr = cid - SYSCALL_BASE
                syscalls[self._syscall_names.get(nr, f"sys_{nr}")] = value
            elif cid >= FUNC_BASE:
                if cid - FUNC_BASE < len(self.functions):
                    functions[self.functions[cid - FUNC_BASE]] = value
            elif cid < len(COUNTERS):
                counters[COUNTERS[cid]] = value
        unobserved = () if self._filemap else UNMAPPED
        for name in unobserved:
            counters.pop(name, None)
        counters["lost_events"] += self._watches.lost(invocation)   # its watches' records
        return CounterSnapshot(time.monotonic_ns(), invocation, counters, functions, syscalls,
                               unobserved)

    def live_tasks(self, invocation: int) -> list[int]:
        """Tasks (threads and processes) of the invocation's tree that have not exited: the
        kernel forgets a task in sched_process_exit, so whatever is left is still running —
        also a child that left the client's session with setsid()."""
        return sorted(k.value for k, v in self._bpf["tracked"].items() if v.inv == invocation)

    def poll_events(self) -> list[KernelEvent]:
        self._poll()
        out, self._pending = self._pending, []
        return out

    def _poll(self) -> None:
        with deferred():   # an interrupt during the callbacks is raised when they are done
            self._bpf.ring_buffer_poll(timeout=0)
        raised, self._raised = self._raised, None
        if raised is not None:
            raise raised

    def _guarded(self, callback):
        """ctypes swallows what a callback raises ("Exception ignored on calling ctypes
        callback function"): keep it, stop consuming, and raise it once the poll returns
        (interrupts are deferred by probes/interrupts.py; this catches the rest)."""
        def call(ctx, data, size):
            if self._raised is not None:
                return 0
            try:
                callback(ctx, data, size)
            except BaseException as e:   # noqa: BLE001 - re-raised by _poll
                self._raised = e
            return 0
        return call

    def finish(self, invocation: int) -> CounterSnapshot:
        """Final totals for an invocation whose process tree has exited; frees its map keys."""
        self._poll()  # drained into _pending for the next poll_events
        final = dataclasses.replace(self.snapshot(invocation),
                                    target_files=self._target_files(invocation))
        self._slots.release(invocation)
        for table in ("egress", "flows"):
            entries = self._bpf[table]
            for key in [k for k in entries.keys() if k.inv == invocation]:
                del entries[key]
        for table in ("live", "roots", "inv_config", "stop_at"):
            with contextlib.suppress(KeyError):
                del self._bpf[table][ctypes.c_uint(invocation)]
        if len(self._bpf["tracked"]) == 0:
            # Nothing is tracked any more: forget descriptors, so that a later client that
            # gets a recycled pid does not inherit this one's source/socket descriptors.
            self._forget(("fd_kinds",))
        return final

    def _target_files(self, invocation: int) -> dict[int, int]:
        """Bytes written to each target file by the invocation, by inode; their keys freed."""
        table = self._bpf["target_files"]
        mine = [(k, v.value) for k, v in table.items() if k.inv == invocation]
        for key, _ in mine:
            with contextlib.suppress(KeyError):
                del table[key]
        return {key.ino: bytes_ for key, bytes_ in mine}

    def _forget(self, tables) -> None:
        """Empty these maps; descriptor kinds the tasks cached go stale with them (fd_gen)."""
        for table in tables:
            self._bpf[table].clear()
        gen = self._bpf["fd_gen"]
        gen[ctypes.c_int(0)] = ctypes.c_ulonglong(gen[ctypes.c_int(0)].value + 1)

    def measure_bpf(self, enabled: bool = True) -> None:
        """Have the kernel time every BPF program run (its BPF statistics), for overhead(). Off
        unless asked for: it costs every BPF program run on the machine two clock reads, more
        than evlab's own programs take on an untracked task's syscall."""
        if enabled and self._stats_fd is None:
            self._stats_fd = syscalls.enable_bpf_stats()
        elif not enabled and self._stats_fd is not None:
            os.close(self._stats_fd)
            self._stats_fd = None

    def overhead(self) -> dict:
        """Events/s, and the BPF programs' own run time and run count (kernel BPF statistics,
        counted while measure_bpf() is on; None while it is off)."""
        own = [prog for prog, _ in self._links] + [self._uprobe_prog] * bool(self._uprobe_links)
        run_ns, run_cnt = run_stats(self._bpf, own)
        elapsed = max(1, time.monotonic_ns() - self._started_ns) / 1e9
        return {"bpf_run_time_ns": run_ns if self._stats_fd is not None else None,
                "bpf_run_count": run_cnt if self._stats_fd is not None else None,
                "events": self._events_seen, "events_per_s": self._events_seen / elapsed}

    def probe_functions(self, functions: tuple[str, ...]) -> None:
        """The functions whose calls its uprobes count, one counter slot each, from the next
        binary it attaches to (a new or reset collector has none attached)."""
        if len(functions) > MAX_FUNCS:
            raise ValueError(f"at most {MAX_FUNCS} function probes, got {len(functions)}")
        self.functions = tuple(functions)

    def reset(self) -> None:
        """Ready for another session, as if new but not compiled again (probes/collectors/choose.py
        keeps collectors): its uprobes detached (a binary rebuilt at the same path is probed
        afresh), cgroups unwatched, events of earlier invocations dropped, and every task,
        descriptor and destination the kernel side holds forgotten (a pid recycled by the
        next session's client must not inherit an old one's descriptors); invocation ids are
        never reused in a process either. Its machine-wide programs wait detached (unhook)
        until resume."""
        for invocation in list(self._hooks.watched()):
            self._hooks.unwatch(invocation)
        with self._probe_lock:
            for name in list(self._bpf.uprobe_fds):
                self._bpf.detach_uprobe_event(name)
            for link in self._uprobe_links:
                os.close(link)
            self._uprobe_links, self._attached, self._binary_of = [], {}, {}
            self._unhooked = unhook(self._bpf, self._links)   # until resume: idle, it costs nothing
        self._poll()
        self._forget(_SESSION_TABLES)
        self._watches.forget()
        self._slots = CounterSlots(self._bpf)
        self._pending, self._events_seen = [], 0
        self._started_ns = time.monotonic_ns()
        self.measure_bpf(False)

    def resume(self) -> None:
        """A reset collector attached again, for its next session."""
        with self._probe_lock:
            if self._unhooked is not None:
                rehook(self._bpf, self._links, self._unhooked)
                self._unhooked = None

    def close(self) -> None:
        with self._probe_lock:
            if self._bpf is not None:
                detach_all(self._bpf, self._links, self._uprobe_links)
                _close(self._uprobe_prog)
                self._links, self._uprobe_links, self._uprobe_prog = [], [], None
                self._bpf.cleanup()
                self._bpf = None
        self.measure_bpf(False)

    def __enter__(self) -> "BccCollector":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- ring buffer ---------------------------------------------------------------------
    def _on_event(self, ctx, data, size) -> None:
        self._events_seen += 1
        self._pending.append(bcc_events.event(self._bpf["events"].event(data)))

    def _on_file_event(self, ctx, data, size) -> None:
        self._events_seen += 1
        self._pending.append(bcc_events.file_event(self._bpf["file_events"].event(data)))

    def _on_op(self, ctx, data, size) -> None:
        self._events_seen += 1
        self._pending.append(bcc_ops.operation(self._bpf["ops"].event(data), self._watches.names))


# What the kernel side holds for a session's invocations and their tasks (collector.bpf.c).
_SESSION_TABLES = ("inv_config", "tasks", "tracked", "pending_exec", "fd_kinds",
                   "live", "roots", "cg_inv", "egress_allow", "egress", "flows", "fatal")


def _uprobe_multi(bpf) -> int | None:
    try:
        return bcc_uprobes.load(bpf)
    except OSError:
        return None   # a kernel before 6.6: classic uprobes, slower to detach


def _close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)
