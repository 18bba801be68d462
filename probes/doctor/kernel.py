"""Preflight checks of the kernel: privileges, bpf(2), AF_PACKET, tracefs and the collector's
tracepoints, uprobes and kprobes, kernel headers and BTF, and the kernel-side fault injection
evlab does without."""

import ctypes
import errno
import glob
import os
import platform
import re
import socket

from probes import syscalls
from probes.capability import Capability
from probes.doctor.needs import missing, ok

TRACEFS = "/sys/kernel/tracing"
MOUNT_TRACEFS = f"mount -t tracefs nodev {TRACEFS}"
RUN_AS_ROOT = "run evlab as root: sudo .venv/bin/evlab"
# The tracepoints the BCC collector attaches to, read from its BPF source so the two cannot
# drift apart; the fallback is that list as of writing.
COLLECTOR_SOURCE = os.path.join(os.path.dirname(__file__), os.pardir, "bcc", "collector.bpf.c")
_FALLBACK_TRACEPOINTS = (
    "raw_syscalls/sys_enter", "raw_syscalls/sys_exit", "sched/sched_process_fork",
    "sched/sched_process_exec", "sched/sched_process_exit", "sched/sched_switch",
    "irq/softirq_entry", "irq/softirq_exit",
)


def collector_tracepoints() -> tuple[str, ...]:
    try:
        with open(COLLECTOR_SOURCE) as f:
            found = re.findall(r"^TRACEPOINT_PROBE\(\s*(\w+)\s*,\s*(\w+)\s*\)", f.read(),
                               re.MULTILINE)
    except OSError:
        found = []
    return tuple(dict.fromkeys(f"{cat}/{ev}" for cat, ev in found)) or _FALLBACK_TRACEPOINTS


# --- privileges -------------------------------------------------------------------------

def check_root() -> Capability:
    euid = os.geteuid()
    if euid == 0:
        return ok("root", "euid 0")
    return missing("root", f"euid {euid}: BPF programs and raw sockets need root",
                   RUN_AS_ROOT)


def check_bpf_syscall() -> Capability:
    name = "bpf-syscall"
    if syscalls.numbers().get("bpf") is None:
        where = syscalls.header() or f"asm/unistd_64.h for {platform.machine()}"
        return missing(name, f"bpf() syscall number unknown: no __NR_bpf in {where}",
                       "apt-get install -y linux-libc-dev")
    # union bpf_attr for BPF_MAP_CREATE starts map_type, key_size, value_size,
    # max_entries, map_flags (u32 each); the kernel wants the rest zeroed.
    attr = (ctypes.c_uint32 * 32)(syscalls.BPF_MAP_TYPE_ARRAY, 4, 4, 1, 0)
    fd = syscalls.bpf(syscalls.BPF_MAP_CREATE, attr)
    if fd >= 0:
        os.close(fd)
        return ok(name, "bpf(BPF_MAP_CREATE) of a 1-entry array map succeeded")
    err = ctypes.get_errno()
    what = f"bpf(BPF_MAP_CREATE) failed: {errno.errorcode.get(err, err)} ({os.strerror(err)})"
    if err == errno.EPERM:
        return missing(name, f"{what}; unprivileged_bpf_disabled={_unpriv_bpf()}",
                       RUN_AS_ROOT)
    if err == errno.ENOSYS:
        return missing(name, f"{what}: kernel built without CONFIG_BPF_SYSCALL",
                       "boot a kernel with CONFIG_BPF_SYSCALL=y")
    return missing(name, what, "see the error; BPF map creation must work for BCC")


def _unpriv_bpf() -> str:
    try:
        with open("/proc/sys/kernel/unprivileged_bpf_disabled") as f:
            return f.read().strip()
    except OSError as e:
        return f"unknown ({e.strerror})"


def check_af_packet() -> Capability:
    name = "af-packet"
    eth_p_all = 0x0003
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(eth_p_all))
    except PermissionError as e:
        return missing(name, f"socket(AF_PACKET, SOCK_RAW) refused: {e.strerror} "
                       "(needs CAP_NET_RAW)", RUN_AS_ROOT)
    except OSError as e:
        return missing(name, f"socket(AF_PACKET, SOCK_RAW) failed: {e.strerror}",
                       "boot a kernel with CONFIG_PACKET=y")
    s.close()
    return ok(name, "socket(AF_PACKET, SOCK_RAW, ETH_P_ALL) opened")


# --- kernel interfaces ------------------------------------------------------------------

def check_tracefs() -> Capability:
    if os.path.ismount(TRACEFS):
        return ok("tracefs", f"mounted at {TRACEFS}")
    return missing("tracefs", f"{TRACEFS} is not a mount point: BCC's TRACEPOINT_PROBE "
                   "fails with 'incomplete definition of type struct tracepoint__...'",
                   MOUNT_TRACEFS)


def _tracefs_blocked(name: str, path: str) -> Capability | None:
    """Why `path` inside tracefs cannot be checked, or None if it can."""
    if not os.path.ismount(TRACEFS):
        return missing(name, f"tracefs not mounted, so {path} cannot be there", MOUNT_TRACEFS)
    try:
        os.stat(path)
    except PermissionError:  # tracefs is mode 0700: a non-root user cannot look inside
        return missing(name, f"{path}: permission denied (tracefs is root-only)",
                       RUN_AS_ROOT)
    except OSError:
        pass  # absent: the caller says what that means
    return None


def check_tracepoints() -> Capability:
    name = "tracepoints"
    blocked = _tracefs_blocked(name, f"{TRACEFS}/events")
    if blocked:
        return blocked
    tracepoints = collector_tracepoints()
    absent = []
    for tp in tracepoints:
        path = f"{TRACEFS}/events/{tp}/format"
        try:
            with open(path) as f:
                f.read()
        except FileNotFoundError:
            absent.append(tp.replace("/", ":"))
        except PermissionError:
            return missing(name, f"{path}: permission denied (tracefs is root-only)",
                           RUN_AS_ROOT)
    if absent:
        return missing(name, f"no format file for {', '.join(absent)}",
                       "boot a kernel with CONFIG_FTRACE_SYSCALLS=y and CONFIG_TRACEPOINTS=y")
    names = ", ".join(t.replace("/", ":") for t in tracepoints)
    return ok(name, f"the collector's {len(tracepoints)} tracepoints have formats: {names}")


def _tracefs_file(name: str, file: str, there: str, absent: str, fix: str) -> Capability:
    """A control file tracefs has when the kernel was built with its option: `there` follows
    "exists", `absent` says what its absence means."""
    path = f"{TRACEFS}/{file}"
    blocked = _tracefs_blocked(name, path)
    if blocked:
        return blocked
    if os.path.exists(path):
        return ok(name, f"{path} exists{there}")
    return missing(name, f"{path} absent: {absent}", fix)


def check_uprobes() -> Capability:
    return _tracefs_file("uprobes", "uprobe_events", "",
                         "kernel built without CONFIG_UPROBE_EVENTS; "
                         "the hash-work clause cannot be judged",
                         "boot a kernel with CONFIG_UPROBE_EVENTS=y")


def check_kprobes() -> Capability:
    return _tracefs_file("kprobes", "kprobe_events", " (evlab does not use kprobes)",
                         "kernel built without CONFIG_KPROBES. "
                         "evlab does not need kprobes (it uses tracepoints and uprobes); "
                         "only stock tools like tcpconnect and bpftrace kprobe: need them",
                         "none needed for evlab (otherwise a kernel with CONFIG_KPROBES=y)")


def check_netem() -> Capability:
    """Kernel-level network faults (tc netem). evlab injects wire faults with its own loopback
    proxy either way; this only says whether kernel-side delay/loss would also be possible."""
    if os.path.isdir("/sys/module/sch_netem"):
        return ok("netem", "sch_netem is loaded (evlab's wire faults use its own proxy)")
    modules = f"/lib/modules/{platform.release()}"
    found = glob.glob(f"{modules}/**/sch_netem.ko*", recursive=True) if os.path.isdir(
        modules) else []
    if found:
        return ok("netem", f"{found[0]} can be loaded (evlab's wire faults use its own proxy)")
    return missing("netem", "no sch_netem in this kernel (not loaded, no module): kernel-side "
                   "delay/loss is unavailable; evlab's wire faults use its loopback proxy "
                   "instead", "none needed for evlab (a kernel with CONFIG_NET_SCH_NETEM)")


def check_fault_injection() -> Capability:
    """Kernel error injection (fail_function / bpf_override_return)."""
    for path in ("/sys/kernel/debug/fail_function", "/sys/kernel/tracing/error_injection"):
        if os.path.exists(path):
            return ok("fault-injection", f"{path} present (evlab injects faults in user "
                      "space: a task's servers and the wire proxy)")
    return missing("fault-injection", "no kernel error injection (no fail_function, no "
                   "bpf_override_return): syscall failures cannot be injected from the kernel; "
                   "evlab's faults are injected by a task's servers and the wire proxy instead",
                   "none needed for evlab (a kernel with CONFIG_FUNCTION_ERROR_INJECTION)")


def check_btf() -> Capability:
    path = "/sys/kernel/btf/vmlinux"
    try:
        size = os.stat(path).st_size
    except OSError as e:
        return missing("btf", f"{path}: {e.strerror}; the BCC collector's syscall program is "
                       "BTF-typed (tp_btf), so it cannot load (evlab falls back to strace)",
                       "boot a kernel with CONFIG_DEBUG_INFO_BTF=y")
    return ok("btf", f"{path} present ({size} bytes)")


def check_kernel_headers() -> Capability:
    name = "kernel-headers"
    release = platform.release()
    mods = f"/lib/modules/{release}"
    build, source = f"{mods}/build", f"{mods}/source"
    fix = _headers_fix(mods)
    if not os.path.isdir(f"{build}/include"):
        return missing(name, f"{build}/include not found: BCC fails with "
                       "'Unable to find kernel headers'", fix)
    where = f"build -> {os.path.realpath(build)}"
    # Debian splits headers into -amd64 and -common trees; BCC needs both linked,
    # or its compile fails on ./include/linux/kconfig.h.
    for root in (build, source):
        if os.path.isfile(f"{root}/include/linux/kconfig.h"):
            if root == source:
                where += f", source -> {os.path.realpath(source)}"
            return ok(name, where)
    return missing(name, f"{where}, but include/linux/kconfig.h is in neither build/ "
                   f"nor source/ (is {source} linked to the -common tree?)", fix)


def _headers_fix(mods: str) -> str:
    trees = sorted(glob.glob("/usr/src/linux-headers-*-amd64"))
    if trees:
        amd64 = trees[-1]
        common = amd64.removesuffix("-amd64") + "-common"
    else:
        amd64 = "/usr/src/linux-headers-<version>-amd64"
        common = "/usr/src/linux-headers-<version>-common"
    install = "" if trees else "apt-get install -y linux-headers-amd64 && "
    return (f"make setup (or: {install}mkdir -p {mods} && ln -sfn {amd64} {mods}/build "
            f"&& ln -sfn {common} {mods}/source)")
