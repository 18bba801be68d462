"""Preflight: which observers can work on this machine, and the exact fix for each gap.

Usage:
    python -m probes.doctor [--json]      # (later: `evlab doctor`)
    caps = check_all()                    # list[Capability], one per check; never raises
    print(format_text(caps)); to_json(caps); missing_for(caps, BCC)

Overhead: 0.05 s measured warm, up to ~0.5 s cold, almost all of it `import bcc` (it loads
libbcc, ~75 MB RSS, and stays loaded in this process). The other checks are a few stat()
calls, one bpf() map create/close, one AF_PACKET socket open/close and PATH lookups.
Nothing is compiled or attached, nothing is installed or mounted: fixes are printed, not run.

Which observer needs what is kept here (NEEDED_FOR) rather than in Capability, so
Capability stays a plain record.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import glob
import json
import os
import platform
import re
import shutil
import socket
import sys
from collections.abc import Callable

from probes.capability import Capability

BCC = "bcc-collector"
STRACE = "strace-collector"  # the fallback when BCC cannot load
PACKETS = "packet-capture"
BOUNDARY = "client-boundary"   # the client's cgroup, its socket hooks and its sandbox
OBSERVERS = (BCC, STRACE, PACKETS, BOUNDARY)

# Capability name -> the observers that cannot run without it; () means optional.
NEEDED_FOR: dict[str, tuple[str, ...]] = {
    "root": (BCC, PACKETS),
    "bpf-syscall": (BCC,),
    "tracefs": (BCC,),
    "kernel-headers": (BCC,),
    "bcc-import": (BCC,),
    "tracepoints": (BCC,),
    "uprobes": (BCC,),
    "af-packet": (PACKETS,),
    "cgroup": (BOUNDARY,),
    "cgroup-hooks": (BOUNDARY,),
    "sandbox": (BOUNDARY,),
    "btf": (),
    "kprobes": (),
    "strace": (STRACE,),
    "tcpdump": (),
    "bpftrace": (),
    "tshark": (),
    "netem": (),
    "fault-injection": (),
}

TRACEFS = "/sys/kernel/tracing"
MOUNT_TRACEFS = f"mount -t tracefs nodev {TRACEFS}"
RUN_AS_ROOT = "run evlab as root: sudo .venv/bin/evlab"
# The tracepoints the BCC collector attaches to, read from its BPF source so the two cannot
# drift apart; the fallback is that list as of writing.
COLLECTOR_SOURCE = os.path.join(os.path.dirname(__file__), "collector.bpf.c")
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


def needed_for(name: str) -> tuple[str, ...]:
    return NEEDED_FOR.get(name, ())


def missing_for(caps: list[Capability], observer: str) -> list[Capability]:
    """The unavailable capabilities that `observer` (BCC or PACKETS) cannot do without."""
    return [c for c in caps if not c.available and observer in needed_for(c.name)]


def _ok(name: str, detail: str) -> Capability:
    return Capability(name, True, detail)


def _missing(name: str, detail: str, fix: str) -> Capability:
    return Capability(name, False, detail, fix)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --- privileges -------------------------------------------------------------------------

def check_root() -> Capability:
    euid = os.geteuid()
    if euid == 0:
        return _ok("root", "euid 0")
    return _missing("root", f"euid {euid}: BPF programs and raw sockets need root",
                    RUN_AS_ROOT)


_BPF_SYSCALL_NR = {"x86_64": 321, "aarch64": 280, "armv7l": 386, "riscv64": 280}
_BPF_MAP_CREATE = 0
_BPF_MAP_TYPE_ARRAY = 2


def check_bpf_syscall() -> Capability:
    name = "bpf-syscall"
    nr = _BPF_SYSCALL_NR.get(platform.machine())
    if nr is None:
        return _missing(name, f"bpf() syscall number unknown for {platform.machine()}",
                        "run on x86_64 or aarch64")
    # union bpf_attr for BPF_MAP_CREATE starts map_type, key_size, value_size,
    # max_entries, map_flags (u32 each); the kernel wants the rest zeroed.
    attr = (ctypes.c_uint32 * 32)(_BPF_MAP_TYPE_ARRAY, 4, 4, 1, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(ctypes.c_long(nr), ctypes.c_int(_BPF_MAP_CREATE), ctypes.byref(attr),
                      ctypes.c_uint(ctypes.sizeof(attr)))
    if fd >= 0:
        os.close(fd)
        return _ok(name, "bpf(BPF_MAP_CREATE) of a 1-entry array map succeeded")
    err = ctypes.get_errno()
    what = f"bpf(BPF_MAP_CREATE) failed: {errno.errorcode.get(err, err)} ({os.strerror(err)})"
    if err == errno.EPERM:
        return _missing(name, f"{what}; unprivileged_bpf_disabled={_unpriv_bpf()}",
                        RUN_AS_ROOT)
    if err == errno.ENOSYS:
        return _missing(name, f"{what}: kernel built without CONFIG_BPF_SYSCALL",
                        "boot a kernel with CONFIG_BPF_SYSCALL=y")
    return _missing(name, what, "see the error; BPF map creation must work for BCC")


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
        return _missing(name, f"socket(AF_PACKET, SOCK_RAW) refused: {e.strerror} "
                        "(needs CAP_NET_RAW)", RUN_AS_ROOT)
    except OSError as e:
        return _missing(name, f"socket(AF_PACKET, SOCK_RAW) failed: {e.strerror}",
                        "boot a kernel with CONFIG_PACKET=y")
    s.close()
    return _ok(name, "socket(AF_PACKET, SOCK_RAW, ETH_P_ALL) opened")


# --- kernel interfaces ------------------------------------------------------------------

def check_tracefs() -> Capability:
    if os.path.ismount(TRACEFS):
        return _ok("tracefs", f"mounted at {TRACEFS}")
    return _missing("tracefs", f"{TRACEFS} is not a mount point: BCC's TRACEPOINT_PROBE "
                    "fails with 'incomplete definition of type struct tracepoint__...'",
                    MOUNT_TRACEFS)


def _tracefs_blocked(name: str, path: str) -> Capability | None:
    """Why `path` inside tracefs cannot be checked, or None if it can."""
    if not os.path.ismount(TRACEFS):
        return _missing(name, f"tracefs not mounted, so {path} cannot be there", MOUNT_TRACEFS)
    try:
        os.stat(path)
    except PermissionError:  # tracefs is mode 0700: a non-root user cannot look inside
        return _missing(name, f"{path}: permission denied (tracefs is root-only)",
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
    missing = []
    for tp in tracepoints:
        path = f"{TRACEFS}/events/{tp}/format"
        try:
            with open(path) as f:
                f.read()
        except FileNotFoundError:
            missing.append(tp.replace("/", ":"))
        except PermissionError:
            return _missing(name, f"{path}: permission denied (tracefs is root-only)",
                            RUN_AS_ROOT)
    if missing:
        return _missing(name, f"no format file for {', '.join(missing)}",
                        "boot a kernel with CONFIG_FTRACE_SYSCALLS=y and CONFIG_TRACEPOINTS=y")
    names = ", ".join(t.replace("/", ":") for t in tracepoints)
    return _ok(name, f"the collector's {len(tracepoints)} tracepoints have formats: {names}")


def check_uprobes() -> Capability:
    path = f"{TRACEFS}/uprobe_events"
    blocked = _tracefs_blocked("uprobes", path)
    if blocked:
        return blocked
    if os.path.exists(path):
        return _ok("uprobes", f"{path} exists")
    return _missing("uprobes", f"{path} absent: kernel built without CONFIG_UPROBE_EVENTS; "
                    "the hash-work clause cannot be judged",
                    "boot a kernel with CONFIG_UPROBE_EVENTS=y")


def check_kprobes() -> Capability:
    path = f"{TRACEFS}/kprobe_events"
    blocked = _tracefs_blocked("kprobes", path)
    if blocked:
        return blocked
    if os.path.exists(path):
        return _ok("kprobes", f"{path} exists (evlab does not use kprobes)")
    return _missing("kprobes", f"{path} absent: kernel built without CONFIG_KPROBES. "
                    "evlab does not need kprobes (it uses tracepoints and uprobes); "
                    "only stock tools like tcpconnect and bpftrace kprobe: need them",
                    "none needed for evlab (otherwise a kernel with CONFIG_KPROBES=y)")


def check_netem() -> Capability:
    """Kernel-level network faults (tc netem). evlab injects wire faults with its own loopback
    proxy either way; this only says whether kernel-side delay/loss would also be possible."""
    if os.path.isdir("/sys/module/sch_netem"):
        return _ok("netem", "sch_netem is loaded (evlab's wire faults use its own proxy)")
    modules = f"/lib/modules/{platform.release()}"
    found = glob.glob(f"{modules}/**/sch_netem.ko*", recursive=True) if os.path.isdir(
        modules) else []
    if found:
        return _ok("netem", f"{found[0]} can be loaded (evlab's wire faults use its own proxy)")
    return _missing("netem", "no sch_netem in this kernel (not loaded, no module): kernel-side "
                    "delay/loss is unavailable; evlab's wire faults use its loopback proxy "
                    "instead", "none needed for evlab (a kernel with CONFIG_NET_SCH_NETEM)")


def check_fault_injection() -> Capability:
    """Kernel error injection (fail_function / bpf_override_return)."""
    for path in ("/sys/kernel/debug/fail_function", "/sys/kernel/tracing/error_injection"):
        if os.path.exists(path):
            return _ok("fault-injection", f"{path} present (evlab injects faults in user "
                       "space: receiver hooks and its proxy)")
    return _missing("fault-injection", "no kernel error injection (no fail_function, no "
                    "bpf_override_return): syscall failures cannot be injected from the kernel; "
                    "evlab's faults are injected by its receiver and proxy instead",
                    "none needed for evlab (a kernel with CONFIG_FUNCTION_ERROR_INJECTION)")


def check_btf() -> Capability:
    path = "/sys/kernel/btf/vmlinux"
    try:
        size = os.stat(path).st_size
    except OSError as e:
        return _missing("btf", f"{path}: {e.strerror}; only CO-RE/libbpf tools need BTF, "
                        "the BCC collector compiles against kernel headers instead",
                        "boot a kernel with CONFIG_DEBUG_INFO_BTF=y")
    return _ok("btf", f"{path} present ({size} bytes)")


def check_kernel_headers() -> Capability:
    name = "kernel-headers"
    release = platform.release()
    mods = f"/lib/modules/{release}"
    build, source = f"{mods}/build", f"{mods}/source"
    fix = _headers_fix(mods)
    if not os.path.isdir(f"{build}/include"):
        return _missing(name, f"{build}/include not found: BCC fails with "
                        "'Unable to find kernel headers'", fix)
    where = f"build -> {os.path.realpath(build)}"
    # Debian splits headers into -amd64 and -common trees; BCC needs both linked,
    # or its compile fails on ./include/linux/kconfig.h.
    for root in (build, source):
        if os.path.isfile(f"{root}/include/linux/kconfig.h"):
            if root == source:
                where += f", source -> {os.path.realpath(source)}"
            return _ok(name, where)
    return _missing(name, f"{where}, but include/linux/kconfig.h is in neither build/ "
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


# --- user space -------------------------------------------------------------------------

def check_bcc_import() -> Capability:
    name = "bcc-import"
    fix = "apt-get install -y python3-bpfcc libbpfcc && make setup (links it into .venv)"
    try:
        import bcc  # imported here: the import itself is the check
    except Exception as e:
        return _missing(name, f"import bcc failed: {_why(e)}", fix)
    where = os.path.dirname(getattr(bcc, "__file__", "") or "?")
    if not hasattr(bcc, "BPF"):
        # PyPI's "bcc" is an unrelated project that shadows Debian's.
        return _missing(name, f"'bcc' at {where} is not BCC (no bcc.BPF)",
                        f".venv/bin/python -m pip uninstall -y bcc && {fix}")
    try:
        from bcc.version import __version__ as version
    except Exception:
        version = "unknown version"
    return _ok(name, f"bcc {version} from {os.path.realpath(where)}")


_APT = {"strace": "strace", "tcpdump": "tcpdump", "bpftrace": "bpftrace", "tshark": "tshark"}
_TOOL_USE = {
    "strace": "the fallback collector when BPF cannot load",
    "tcpdump": "writes pcaps outside evlab",
    "bpftrace": "ad hoc tracing; not used by evlab's collector",
    "tshark": "reads exported pcaps",
}


def _check_tool(name: str) -> Capability:
    path = shutil.which(name)
    if path:
        return _ok(name, f"{path} ({_TOOL_USE[name]})")
    return _missing(name, f"not on PATH (optional: {_TOOL_USE[name]})",
                    f"apt-get install -y {_APT[name]}")


def check_cgroup() -> Capability:
    """The layout (v2-only or hybrid), where limits come from, and whether evlab may create
    client cgroups."""
    from probes.cgroup import find_layout
    layout = find_layout()
    gap = layout.capability()
    if gap is not None:
        return _missing("cgroup", f"{layout.describe()}: {gap.detail}", gap.fix)
    return _ok("cgroup", layout.describe())


_HOOK_PROBE = "int hook(struct bpf_sock_addr *ctx) { return 1; }"


def check_cgroup_hooks() -> Capability:
    """Can a socket-address program attach to a client cgroup? (what egress is judged from)"""
    from probes.cgroup import ClientCgroup, find_layout
    layout = find_layout()
    if layout.capability() is not None:
        return _missing("cgroup-hooks", "no client cgroup can be made (see 'cgroup')",
                        "fix 'cgroup' first")
    try:
        from bcc import BPF
    except ImportError as e:
        return _missing("cgroup-hooks", f"cannot import bcc: {e}", "make setup")
    cg = ClientCgroup.create(layout, "doctor")
    try:
        bpf = BPF(text=_HOOK_PROBE)
        fn = bpf.load_func("hook", BPF.CGROUP_SOCK_ADDR, attach_type=10)
        fd = os.open(cg.dirs["v2"], os.O_RDONLY | os.O_DIRECTORY)
        try:
            BPF.attach_func(fn, fd, 10)
            BPF.detach_func(fn, fd, 10)
        finally:
            os.close(fd)
            bpf.cleanup()
    except Exception as e:
        return _missing("cgroup-hooks", f"a cgroup socket hook did not attach: {_why(e)}",
                        "a kernel with CONFIG_CGROUP_BPF and BTF; see 'bpf-syscall'")
    finally:
        cg.remove()
    return _ok("cgroup-hooks", "connect/sendmsg (v4, v6) and egress packet hooks attach to "
               "a client cgroup")


def check_sandbox() -> Capability:
    from probes.sandbox import Sandbox
    box, gap = Sandbox.open()
    if box is None:
        return _missing("sandbox", gap.detail, gap.fix)
    return _ok("sandbox", box.settings().describe())


CHECKS: tuple[tuple[str, Callable[[], Capability]], ...] = (
    ("root", check_root),
    ("bpf-syscall", check_bpf_syscall),
    ("tracefs", check_tracefs),
    ("kernel-headers", check_kernel_headers),
    ("bcc-import", check_bcc_import),
    ("btf", check_btf),
    ("tracepoints", check_tracepoints),
    ("uprobes", check_uprobes),
    ("kprobes", check_kprobes),
    ("af-packet", check_af_packet),
    ("cgroup", check_cgroup),
    ("cgroup-hooks", check_cgroup_hooks),
    ("sandbox", check_sandbox),
    ("netem", check_netem),
    ("fault-injection", check_fault_injection),
    *((tool, lambda tool=tool: _check_tool(tool)) for tool in _APT),
)


def check_all() -> list[Capability]:
    """One Capability per check, in CHECKS order. A check that raises becomes unavailable."""
    caps = []
    for name, check in CHECKS:
        try:
            cap = check()
        except Exception as e:
            cap = _missing(name, f"the check itself failed: {_why(e)}",
                           "report this as an evlab bug (python -m probes.doctor --json)")
        caps.append(cap)
    return caps


# --- output -----------------------------------------------------------------------------

def _state(cap: Capability, unicode: bool) -> str:
    if cap.available:
        return "ok " + ("✓" if unicode else "+")
    if needed_for(cap.name):
        return "MISSING " + ("✗" if unicode else "x")
    return "absent " + ("·" if unicode else "-")


def format_text(caps: list[Capability], unicode: bool = True) -> str:
    """An aligned table; each gap is followed by its fix, and a readiness line per observer."""
    rows = [(_state(c, unicode), c.name, ", ".join(needed_for(c.name)) or "optional", c.detail)
            for c in caps]
    head = ("state", "capability", "needed for", "detail")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]

    def line(cells: tuple[str, ...]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells[:3], widths, strict=True)]
        return "  ".join([*padded, cells[3]])

    out = [line(head)]
    indent = " " * (sum(widths) + 2 * 3)
    for cap, row in zip(caps, rows, strict=True):
        out.append(line(row))
        if cap.fix and not cap.available:
            out.append(f"{indent}fix: {cap.fix}")
    out.append("")
    for observer in OBSERVERS:
        gaps = missing_for(caps, observer)
        names = ", ".join(c.name for c in gaps)
        verdict = f"NOT ready, missing {names}" if gaps else "ready"
        out.append(f"{observer}: {verdict}")
    return "\n".join(out) + "\n"


def to_json(caps: list[Capability]) -> str:
    return json.dumps({
        "capabilities": [
            {"name": c.name, "available": c.available, "detail": c.detail, "fix": c.fix,
             "needed_for": list(needed_for(c.name)), "required": bool(needed_for(c.name))}
            for c in caps
        ],
        "ready": {o: not missing_for(caps, o) for o in OBSERVERS},
    }, indent=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m probes.doctor",
        description="Check what evlab's observers need on this machine and print the fixes.",
        epilog="examples:\n  python -m probes.doctor\n  python -m probes.doctor --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    caps = check_all()
    if args.json:
        print(to_json(caps))
    else:
        enc = (sys.stdout.encoding or "").lower().replace("-", "")
        print(format_text(caps, unicode=enc.startswith("utf")), end="")
    return 0  # gaps are findings, not errors


if __name__ == "__main__":
    sys.exit(main())
