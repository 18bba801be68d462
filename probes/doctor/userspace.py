"""Preflight checks of user space: BCC's Python bindings, the optional tools, the client's
cgroup and its socket hooks, and the sandbox."""

import os
import shutil

from probes.capability import Capability
from probes.doctor.needs import missing, ok, why

# --- user space -------------------------------------------------------------------------

def check_bcc_import() -> Capability:
    name = "bcc-import"
    fix = "apt-get install -y python3-bpfcc libbpfcc && make setup (links it into .venv)"
    try:
        import bcc  # imported here: the import itself is the check
    except Exception as e:
        return missing(name, f"import bcc failed: {why(e)}", fix)
    where = os.path.dirname(getattr(bcc, "__file__", "") or "?")
    if not hasattr(bcc, "BPF"):
        # PyPI's "bcc" is an unrelated project that shadows Debian's.
        return missing(name, f"'bcc' at {where} is not BCC (no bcc.BPF)",
                       f".venv/bin/python -m pip uninstall -y bcc && {fix}")
    try:
        from bcc.version import __version__ as version
    except Exception:
        version = "unknown version"
    return ok(name, f"bcc {version} from {os.path.realpath(where)}")


TOOLS = {"strace": "strace", "tcpdump": "tcpdump", "bpftrace": "bpftrace", "tshark": "tshark",
         "nginx": "nginx"}
_TOOL_USE = {
    "strace": "the fallback collector when BPF cannot load",
    "tcpdump": "writes pcaps outside evlab",
    "bpftrace": "ad hoc tracing; not used by evlab's collector",
    "tshark": "reads exported pcaps",
    "nginx": "the fetch task's web server: without it fetch's servers cannot start",
}


def check_tool(name: str) -> Capability:
    # nginx is in /usr/sbin, which a non-root PATH may lack
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path:
        return ok(name, f"{path} ({_TOOL_USE[name]})")
    return missing(name, f"not on PATH (optional: {_TOOL_USE[name]})",
                   f"apt-get install -y {TOOLS[name]}")


def check_cgroup() -> Capability:
    """The layout (v2-only or hybrid), where limits come from, and whether evlab may create
    client cgroups."""
    from probes.boundary.cgroup import find_layout
    layout = find_layout()
    gap = layout.capability()
    if gap is not None:
        return missing("cgroup", f"{layout.describe()}: {gap.detail}", gap.fix)
    return ok("cgroup", layout.describe())


_HOOK_PROBE = "int hook(struct bpf_sock_addr *ctx) { return 1; }"


def check_cgroup_hooks() -> Capability:
    """Can a socket-address program attach to a client cgroup? (what egress is judged from)"""
    from probes.bcc.load import compiled
    from probes.boundary.cgroup import ClientCgroup, find_layout
    layout = find_layout()
    if layout.capability() is not None:
        return missing("cgroup-hooks", "no client cgroup can be made (see 'cgroup')",
                       "fix 'cgroup' first")
    try:
        from bcc import BPF, BPFAttachType
    except ImportError as e:
        return missing("cgroup-hooks", f"cannot import bcc: {e}", "make setup")
    cg = ClientCgroup.create(layout, "doctor")
    try:
        bpf = compiled(lambda: BPF(text=_HOOK_PROBE))   # libbcc's chdir stays in its thread
        connect4 = BPFAttachType.CGROUP_INET4_CONNECT
        fn = bpf.load_func("hook", BPF.CGROUP_SOCK_ADDR, attach_type=connect4)
        fd = os.open(cg.dirs["v2"], os.O_RDONLY | os.O_DIRECTORY)
        try:
            BPF.attach_func(fn, fd, connect4)
            BPF.detach_func(fn, fd, connect4)
        finally:
            os.close(fd)
            bpf.cleanup()
    except Exception as e:
        return missing("cgroup-hooks", f"a cgroup socket hook did not attach: {why(e)}",
                       "a kernel with CONFIG_CGROUP_BPF and BTF; see 'bpf-syscall'")
    finally:
        cg.remove()
    return ok("cgroup-hooks", "connect/sendmsg (v4, v6) and egress packet hooks attach to "
              "a client cgroup")


def check_lab_network() -> Capability:
    from probes.boundary import netns
    gap = netns.capability()
    if gap is not None:
        return missing("lab-network", gap.detail, gap.fix)
    return ok("lab-network", "a network namespace per attempt, loopback only, can be made")


def check_sandbox() -> Capability:
    from probes.boundary.sandbox import Sandbox
    box, gap = Sandbox.open()
    if box is None:
        assert gap is not None  # Sandbox.open() says why when it gives no sandbox
        return missing("sandbox", gap.detail, gap.fix)
    return ok("sandbox", box.settings().describe())
