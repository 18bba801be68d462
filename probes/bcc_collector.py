"""The BCC collector: in-kernel counters and a connect/process event stream for a client tree.

    collector = BccCollector(functions=("hash_file", "send_payload", "busy_wait"))
    with collector.launching(invocation=1, client=path, source=src):
        proc = subprocess.Popen([path, ...])       # tracked from its exec on
    collector.snapshot(1)                         # live totals, any time, cheap
    collector.poll_events()                       # ConnectEvent / ProcessEvent since last poll
    collector.finish(1)                           # final totals; the invocation's keys are freed
    collector.close()                             # detach everything

The BPF program (collector.bpf.c beside this file) is compiled once, in __init__ (~1-2 s here);
invocations are retargeted by writing the config map. Overhead: two raw_syscalls programs run
for every syscall on the machine (one hash lookup when untracked), sched_switch on every
context switch, uprobes only in the client's binary. `overhead()` reports the programs' own
run time from the kernel's BPF statistics.
"""

import contextlib
import ctypes
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path

from probes.capability import Capability
from probes.interrupts import deferred
from probes.kernel import (
    BUSY_MIN_NS,
    COUNTERS,
    FILE_OPS,
    MAXIMA,
    ConnectEvent,
    CounterSnapshot,
    EgressEvent,
    EgressTotals,
    FileEvent,
    ProcessEvent,
)

BPF_SOURCE = Path(__file__).with_name("collector.bpf.c")
MAX_FUNCS = 8
PATH_MAX_LEN = 256
SYSCALL_BASE = 1000
FUNC_BASE = 100
_EVENT_KINDS = {2: "exec", 3: "fork", 4: "exit"}
_EGRESS_KINDS = {1: "connect", 2: "sendmsg"}
_PROTOCOLS = {6: "tcp", 17: "udp", 1: "icmp", 58: "icmpv6"}
# The cgroup hooks (program, BPF program type, attach type; numbers from uapi/linux/bpf.h).
_CGROUP_HOOKS = (("egress_connect4", "CGROUP_SOCK_ADDR", 10),   # BPF_CGROUP_INET4_CONNECT
                 ("egress_connect6", "CGROUP_SOCK_ADDR", 11),   # BPF_CGROUP_INET6_CONNECT
                 ("egress_sendmsg4", "CGROUP_SOCK_ADDR", 14),   # BPF_CGROUP_UDP4_SENDMSG
                 ("egress_sendmsg6", "CGROUP_SOCK_ADDR", 15),   # BPF_CGROUP_UDP6_SENDMSG
                 ("egress_packets", "CGROUP_SKB", 1))           # BPF_CGROUP_INET_EGRESS
_FAMILIES = {socket.AF_INET: "AF_INET", socket.AF_INET6: "AF_INET6", socket.AF_UNIX: "AF_UNIX"}
_UNISTD = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")


class CollectorUnavailable(Exception):
    """BPF could not be loaded; carries the capability record that says why and how to fix it."""

    def __init__(self, capability: Capability):
        super().__init__(capability.detail)
        self.capability = capability


def _syscall_names() -> dict[int, str]:
    try:
        return {int(n): name for name, n in
                re.findall(r"#define __NR_(\w+) (\d+)", _UNISTD.read_text())}
    except OSError:
        return {}


def _cflags(functions) -> list[str]:
    flags = [f"-DCTR_{name.upper()}={i}" for i, name in enumerate(COUNTERS)]
    return flags + [f"-DCTR_SYSCALL_BASE={SYSCALL_BASE}", f"-DCTR_FUNC_BASE={FUNC_BASE}",
                    f"-DBUSY_MIN_NS={BUSY_MIN_NS}ULL",
                    f"-DPATH_MAX_LEN={PATH_MAX_LEN}"]


class BccCollector:
    name = "bcc"

    def __init__(self, functions: tuple[str, ...] = ("hash_file", "send_payload", "busy_wait")):
        if len(functions) > MAX_FUNCS:
            raise ValueError(f"at most {MAX_FUNCS} function probes, got {len(functions)}")
        self.functions = tuple(functions)
        self._bpf = _load_bpf(_cflags(functions))
        self._stats_fd = _enable_bpf_stats()
        self._attached: dict[Path, tuple[str, ...]] = {}  # binary -> symbols with a uprobe
        self._binary_of: dict[int, Path] = {}              # invocation -> its client binary
        self._probe_lock = threading.Lock()                # attach vs background detach
        self._detaching: list[threading.Thread] = []
        self._pending: list[ConnectEvent | ProcessEvent | FileEvent] = []
        self._syscall_names = _syscall_names()
        self._events_seen = 0
        self._started_ns = time.monotonic_ns()
        self._cgroups: dict[int, tuple[int, int]] = {}   # invocation -> (cgroup fd, cgroup id)
        self._raised: BaseException | None = None   # see _guarded
        self._bpf["events"].open_ring_buffer(self._guarded(self._on_event))
        self._bpf["file_events"].open_ring_buffer(self._guarded(self._on_file_event))

    # --- retargeting -------------------------------------------------------------------
    @contextlib.contextmanager
    def launching(self, invocation: int, client: Path, source: Path | None):
        """Arm: the next process this process forks and that execs is the tracked client."""
        if invocation <= 0:
            raise ValueError("invocation ids start at 1")
        self._binary_of[invocation] = self._attach_functions(Path(client))
        # execve() sees the path exactly as the launcher passes it (PATH-searched if bare).
        exec_path = str(client) if "/" in str(client) else shutil.which(str(client)) or ""
        self._write_config(armed_inv=invocation, source=source, client=exec_path)
        try:
            yield
        finally:
            self._write_config(armed_inv=0, source=source, client=exec_path)

    def _write_config(self, armed_inv: int, source: Path | None, client: str) -> None:
        table = self._bpf["config"]
        cfg = table[ctypes.c_int(0)]
        cfg.launcher_tgid = os.getpid()
        cfg.armed_inv = armed_inv
        for field, value in (("source", os.fsencode(source) if source else b""),
                             ("client", os.fsencode(client))):
            if len(value) >= PATH_MAX_LEN:
                raise ValueError(f"{field} path longer than {PATH_MAX_LEN - 1} bytes: {value!r}")
            setattr(cfg, f"{field}_len", len(value))
            offset = getattr(type(cfg), f"{field}_path").offset
            ctypes.memmove(ctypes.addressof(cfg) + offset, value + b"\0", len(value) + 1)
        table[ctypes.c_int(0)] = cfg

    # --- the client's cgroup -----------------------------------------------------------------
    def watch_cgroup(self, invocation: int, cgroup_dir: Path, cgroup_id: int,
                     allowed: list[tuple[str, int]], deny: bool) -> None:
        """Attach the egress hooks to an invocation's cgroup: every destination its sockets
        use is counted; with deny, any not in `allowed` is refused (EPERM) or dropped."""
        from bcc import BPF
        fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._cgroups[invocation] = (fd, cgroup_id)
        for name, prog_type, attach in _CGROUP_HOOKS:
            fn = self._bpf.load_func(name, getattr(BPF, prog_type),
                                     attach_type=attach if prog_type != "CGROUP_SKB" else -1)
            BPF.attach_func(fn, fd, attach)
        allow = self._bpf["egress_allow"]
        for address, port in allowed:
            key = allow.Key()
            key.inv, key.port = invocation, port
            key.family, raw = _packed(address)
            ctypes.memmove(key.addr, raw, len(raw))
            allow[key] = ctypes.c_ubyte(1)
        conf = self._bpf["cg_inv"].Leaf()
        conf.inv, conf.deny = invocation, int(deny)
        self._bpf["cg_inv"][ctypes.c_ulonglong(cgroup_id)] = conf

    def unwatch_cgroup(self, invocation: int) -> None:
        from bcc import BPF
        fd, cgroup_id = self._cgroups.pop(invocation, (None, None))
        if fd is None:
            return
        for name, _prog_type, attach in _CGROUP_HOOKS:
            try:
                BPF.detach_func(self._bpf.funcs[name.encode()], fd, attach)
            except Exception:
                pass   # the cgroup is being removed: the kernel detaches with it
        os.close(fd)
        with contextlib.suppress(KeyError):
            del self._bpf["cg_inv"][ctypes.c_ulonglong(cgroup_id)]
        allow = self._bpf["egress_allow"]
        for key in [k for k in allow.keys() if k.inv == invocation]:
            del allow[key]

    def egress(self, invocation: int) -> EgressTotals:
        calls = tuple(sorted(
            ({"pid": k.pid, "kind": _EGRESS_KINDS.get(k.kind, str(k.kind)),
              "protocol": _protocol(k.proto >> 8, k.proto & 0xff),
              "address": _address(k.family, bytes(k.addr)), "port": k.port,
              "calls": v.calls, "refused": v.refused, "first_ns": v.first, "last_ns": v.last}
             for k, v in self._bpf["egress"].items() if k.inv == invocation),
            key=lambda c: c["first_ns"]))
        flows = tuple(sorted(
            ({"protocol": _PROTOCOLS.get(k.proto, str(k.proto)),
              "address": _address(k.family, bytes(k.addr)), "port": k.port,
              "packets": v.packets, "bytes": v.bytes, "dropped": v.dropped,
              "first_ns": v.first, "last_ns": v.last}
             for k, v in self._bpf["flows"].items() if k.inv == invocation),
            key=lambda f: f["first_ns"]))
        return EgressTotals(calls, flows)

    def release(self, client: Path) -> None:
        """Detach a client binary's uprobes, in the background: each takes ~0.1 s in the kernel
        (perf event release), which then overlaps the next scenario instead of adding to the
        session's end. Counts for the binary's invocations must already be final."""
        binary = Path(client).resolve()
        worker = threading.Thread(target=self._detach, args=(binary,), name="evlab-uprobe-detach")
        self._detaching = [t for t in self._detaching if t.is_alive()] + [worker]
        worker.start()

    def _detach(self, binary: Path) -> None:
        with self._probe_lock:
            if self._bpf is None:
                return  # closed meanwhile: cleanup() detached everything
            for symbol in self._attached.pop(binary, ()):
                try:
                    self._bpf.detach_uprobe(name=str(binary), sym=symbol)
                except Exception:
                    pass  # already gone; close() cleans up whatever is left

    def _attach_functions(self, binary: Path) -> Path:
        binary = binary.resolve()
        with self._probe_lock:
            return self._attach_locked(binary)

    def _attach_locked(self, binary: Path) -> Path:
        if binary not in self._attached:
            attached = []
            for slot, symbol in enumerate(self.functions):
                try:
                    self._bpf.attach_uprobe(name=str(binary), sym=symbol,
                                            fn_name=f"on_func_{slot}")
                    attached.append(symbol)
                except Exception:
                    pass  # the symbol is absent from this binary: its count stays unobserved
            self._attached[binary] = tuple(attached)
        return binary

    # --- reading -----------------------------------------------------------------------
    def snapshot(self, invocation: int) -> CounterSnapshot:
        counters = dict.fromkeys(COUNTERS, 0)
        functions = dict.fromkeys(self._attached.get(self._binary_of.get(invocation), ()), 0)
        syscalls: dict[str, int] = {}
        for key, per_cpu in self._bpf["counters"].items():
            if key.inv != invocation:
                continue
            value = sum(per_cpu)
            if key.id >= SYSCALL_BASE:
                nr = key.id - SYSCALL_BASE
                syscalls[self._syscall_names.get(nr, f"sys_{nr}")] = value
            elif key.id >= FUNC_BASE:
                functions[self.functions[key.id - FUNC_BASE]] = value
            else:
                name = COUNTERS[key.id]
                counters[name] = max(per_cpu) if name in MAXIMA else value
        return CounterSnapshot(time.monotonic_ns(), invocation, counters, functions, syscalls)

    def live_tasks(self, invocation: int) -> list[int]:
        """Tasks (threads and processes) of the invocation's tree that have not exited: the
        kernel forgets a task in sched_process_exit, so whatever is left is still running —
        also a child that left the client's session with setsid()."""
        return sorted(k.value for k, v in self._bpf["tracked"].items() if v.value == invocation)

    def poll_events(self) -> list[ConnectEvent | ProcessEvent | FileEvent]:
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
        final = self.snapshot(invocation)
        for table in ("counters", "egress", "flows"):
            entries = self._bpf[table]
            for key in [k for k in entries.keys() if k.inv == invocation]:
                del entries[key]
        for table in ("live", "roots", "source_seen"):
            with contextlib.suppress(KeyError):
                del self._bpf[table][ctypes.c_uint(invocation)]
        if len(self._bpf["tracked"]) == 0:
            # Nothing is tracked any more: forget descriptors, so that a later client that
            # gets a recycled pid does not inherit this one's source/socket descriptors.
            self._bpf["fd_kinds"].clear()
            self._bpf["parent_of"].clear()
        return final

    def overhead(self) -> dict:
        """The BPF programs' own run time and call counts (kernel BPF stats), events/s."""
        run_ns = run_cnt = 0
        for fd in _prog_fds(self._bpf):
            stats = _fdinfo(fd)
            run_ns += stats.get("run_time_ns", 0)
            run_cnt += stats.get("run_cnt", 0)
        elapsed = max(1, time.monotonic_ns() - self._started_ns) / 1e9
        return {"bpf_run_time_ns": run_ns if self._stats_fd is not None else None,
                "bpf_run_count": run_cnt if self._stats_fd is not None else None,
                "events": self._events_seen, "events_per_s": self._events_seen / elapsed}

    def close(self) -> None:
        for worker in self._detaching:
            # A signal can interrupt release() inside Thread.start(): a thread that never got
            # going cannot be joined; the lock below keeps it off the programs if it starts late.
            if worker.ident is not None:
                worker.join()
        with self._probe_lock:
            if self._bpf is not None:
                self._bpf.cleanup()
                self._bpf = None
        if self._stats_fd is not None:
            os.close(self._stats_fd)
            self._stats_fd = None

    def __enter__(self) -> "BccCollector":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- ring buffer -------------------------------------------------------------------
    def _on_event(self, ctx, data, size) -> None:
        e = self._bpf["events"].event(data)
        self._events_seen += 1
        comm = e.comm.decode(errors="replace")
        if e.kind == 1:
            self._pending.append(_connect_event(e, comm))
        elif e.kind == 5:
            kind, stype, proto = e.other >> 16, (e.other >> 8) & 0xff, e.other & 0xff
            self._pending.append(EgressEvent(
                e.ts, e.inv, e.tgid, _EGRESS_KINDS.get(kind, str(kind)),
                _FAMILIES.get(e.family, str(e.family)), _protocol(stype, proto),
                _address(e.family, bytes(e.addr)), e.port, e.ret != 0))
        else:
            self._pending.append(ProcessEvent(
                e.ts, e.inv, _EVENT_KINDS.get(e.kind, str(e.kind)), e.tgid, e.tid, comm,
                child_pid=e.other if e.kind == 3 else None,
                root=e.kind == 4 and bool(e.ret),
                filename=e.filename.decode(errors="replace") if e.kind == 2 else None))


    def _on_file_event(self, ctx, data, size) -> None:
        e = self._bpf["file_events"].event(data)
        self._events_seen += 1
        self._pending.append(FileEvent(
            e.ts, e.inv, e.tgid, e.tid, e.comm.decode(errors="replace"),
            FILE_OPS.get(e.op, str(e.op)), os.fsdecode(e.path), e.flags, e.dfd,
            os.fsdecode(e.path2) if e.op == 4 else None, e.dfd2, e.ret if e.op == 1 else None))


def _protocol(sock_type: int, proto: int) -> str:
    if proto in _PROTOCOLS:
        return _PROTOCOLS[proto]
    # A socket made with protocol 0 takes its type's default.
    return {socket.SOCK_STREAM: "tcp", socket.SOCK_DGRAM: "udp"}.get(
        sock_type, f"type {sock_type} protocol {proto}")


def _address(family: int, raw: bytes) -> str:
    if family == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, raw[:16])
    return socket.inet_ntop(socket.AF_INET, raw[:4])


def _packed(address: str) -> tuple[int, bytes]:
    if ":" in address:
        return socket.AF_INET6, socket.inet_pton(socket.AF_INET6, address)
    return socket.AF_INET, socket.inet_pton(socket.AF_INET, address)


def _connect_event(e, comm: str) -> ConnectEvent:
    raw = bytes(e.addr)
    if e.family == socket.AF_INET:
        address = socket.inet_ntop(socket.AF_INET, raw[:4])
    elif e.family == socket.AF_INET6:
        address = socket.inet_ntop(socket.AF_INET6, raw)
    else:
        address = None
    return ConnectEvent(e.ts, e.inv, e.tgid, e.tid, comm,
                        _FAMILIES.get(e.family, str(e.family)), address,
                        e.port if address else None, e.ret)


def _load_bpf(cflags: list[str]):
    try:
        from bcc import BPF
    except ImportError as e:
        raise CollectorUnavailable(Capability(
            "bcc-import", False, f"cannot import bcc: {e}",
            "apt-get install python3-bpfcc bpfcc-tools libbpfcc, then make setup")) from None
    if os.geteuid() != 0:
        raise CollectorUnavailable(Capability(
            "root", False, "loading BPF programs needs root (CAP_BPF and CAP_PERFMON)",
            "run evlab as root (sudo .venv/bin/evlab ...)"))
    if not os.path.ismount("/sys/kernel/tracing"):
        raise CollectorUnavailable(Capability(
            "tracefs", False, "tracefs is not mounted; BCC cannot read tracepoint formats",
            "mount -t tracefs nodev /sys/kernel/tracing"))
    try:
        return BPF(src_file=str(BPF_SOURCE), cflags=cflags)
    except Exception as e:
        detail = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        fix = ("make setup (installs linux-headers-amd64 and links /lib/modules/$(uname -r)/build)"
               if "kernel headers" in str(e) else "see `evlab doctor`")
        raise CollectorUnavailable(Capability("bpf-load", False, detail, fix)) from None


def _prog_fds(bpf) -> list[int]:
    fds = [fn.fd for fn in getattr(bpf, "funcs", {}).values() if getattr(fn, "fd", None)]
    return [fd for fd in fds if fd and fd > 0]


def _fdinfo(fd: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
            key, _, value = line.partition(":")
            if value.strip().isdigit():
                out[key.strip()] = int(value.strip())
    except OSError:
        pass
    return out


def _enable_bpf_stats() -> int | None:
    """BPF_ENABLE_STATS(BPF_STATS_RUN_TIME): run-time accounting while the fd stays open."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(8)  # union bpf_attr { __u32 type; }: 0 = RUN_TIME
    fd = libc.syscall(321, 32, attr, 8)   # __NR_bpf, BPF_ENABLE_STATS
    return fd if fd >= 0 else None
