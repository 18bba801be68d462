"""Preflight: which observers can work on this machine, and the exact fix for each gap.

Usage:
    python -m probes.doctor.preflight [--json]      # or `evlab doctor`
    caps = check_all()                    # list[Capability], one per check; never raises
    print(format_text(caps)); to_json(caps); missing_for(caps, BCC)

The checks live in doctor_kernel.py (privileges, bpf(2), tracefs and tracepoints, headers,
kernel fault injection) and doctor_userspace.py (BCC's bindings, tools, the client's cgroup,
its socket hooks and the sandbox); which observer needs what in doctor_needs.py (rather than
in Capability, so Capability stays a plain record); the output in doctor_report.py.

Overhead: most of it is `import bcc` (it loads libbcc, ~75 MB RSS, and stays loaded in this
process) and the cgroup-hooks check, which compiles a one-line socket hook and attaches it to
a throw-away client cgroup and detaches it again. The other checks are a few stat() calls, one
bpf() map create/close, one AF_PACKET socket open/close and PATH lookups. Nothing is installed
or mounted: fixes are printed, not run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from probes.capability import Capability
from probes.doctor.kernel import (
    TRACEFS,
    check_af_packet,
    check_bpf_syscall,
    check_btf,
    check_fault_injection,
    check_kernel_headers,
    check_kprobes,
    check_netem,
    check_root,
    check_tracefs,
    check_tracepoints,
    check_uprobes,
)
from probes.doctor.needs import (
    BCC,
    BOUNDARY,
    NEEDED_FOR,
    OBSERVERS,
    PACKETS,
    STRACE,
    missing,
    missing_for,
    needed_for,
    why,
)
from probes.doctor.report import format_text, to_json
from probes.doctor.userspace import (
    TOOLS,
    check_bcc_import,
    check_cgroup,
    check_cgroup_hooks,
    check_lab_network,
    check_sandbox,
    check_tool,
)

# The API callers and tests use, wherever it lives.
__all__ = ["BCC", "BOUNDARY", "CHECKS", "NEEDED_FOR", "OBSERVERS", "PACKETS", "STRACE", "TRACEFS",
           "check_all", "format_text", "main", "missing_for", "needed_for", "to_json"]

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
    ("lab-network", check_lab_network),
    ("netem", check_netem),
    ("fault-injection", check_fault_injection),
    *((tool, lambda tool=tool: check_tool(tool)) for tool in TOOLS),
)


def check_all() -> list[Capability]:
    """One Capability per check, in CHECKS order. A check that raises becomes unavailable."""
    caps = []
    for name, check in CHECKS:
        try:
            cap = check()
        except Exception as e:
            cap = missing(name, f"the check itself failed: {why(e)}",
                          "report this as an evlab bug (python -m probes.doctor.preflight --json)")
        caps.append(cap)
    return caps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m probes.doctor.preflight",
        description="Check what evlab's observers need on this machine and print the fixes.",
        epilog="examples:\n  python -m probes.doctor.preflight\n"
               "  python -m probes.doctor.preflight --json",
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
