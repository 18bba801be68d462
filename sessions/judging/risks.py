"""Risk findings: what the kernel saw a graded client do that a client of a task has no need to.

Reported with a severity, never as pass/fail: a finding is a question for the reviewer, not a
verdict. Relative and *at() paths are resolved against where the process was (its launch
directory, inherited at fork, changed by chdir/fchdir) and the directories its descriptors were
opened on; "outside" means outside the launch directory, its task's outputs folder and, in the
sandbox, its own /tmp and /dev/shm (folders of its home, as its working directory is).
"""

import os
import re
from dataclasses import dataclass

from sessions.judging.views import (
    AT_FDCWD,
    EINPROGRESS,
    SOURCE_BY_DESCRIPTOR,
    connect_outcome,
    endpoint_name,
    given_ports,
    is_given,
    probed_only,
    resolved_files,
)
from sessions.judging.views import under as _under
from sessions.spec.secret_paths import sensitive as _sensitive
from sessions.stream.events import ClientLaunched
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox", "csh", "tcsh"}
# Read-only opens under these are the loader, the interpreter and system configuration.
# Runtimes read these at start-up to size themselves (Node: /proc/meminfo, cgroup limits);
# libselinux, linked by coreutils' mv, cp, ls and stat, reads /proc/filesystems as each
# starts. /dev/fd/N is the process's own descriptor by name, as /proc/self/fd/N is (bash's
# process substitution `< <(...)` opens /dev/fd/63).
SYSTEM_PREFIXES = ("/usr/", "/lib/", "/lib64/", "/etc/", "/proc/self/", "/proc/thread-self/",
                   "/sys/devices/system/cpu/", "/dev/pts/", "/proc/meminfo", "/proc/cpuinfo",
                   "/proc/stat", "/sys/fs/cgroup/", "/proc/filesystems", "/dev/fd/")
HARMLESS_DEVICES = {"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty",
                    "/dev/full"}
@dataclass(frozen=True)
class Finding:
    invocation: int
    severity: str          # high, medium, low
    kind: str
    detail: str
    evidence: tuple[int, ...]


def _own_dirs(launched: ClientLaunched) -> list[str]:
    """Where the command's own files (an interpreter's script) live: reading there — the
    script, its sibling modules, the directory listing an import makes — is the program itself."""
    return sorted({os.path.dirname(f) for f in launched.own_files})


def _exec_findings(inv: InvocationEvidence, launched: ClientLaunched) -> list[Finding]:
    execs = [p for p in inv.processes if p.kind == "exec"]
    out = []
    for before, p in zip(execs, execs[1:], strict=False):   # the first exec is the launch
        if p.filename in launched.tools:   # what the task's protocol has it run
            continue
        name = os.path.basename(p.filename or "?")
        shell = name in SHELLS
        what: str | None   # None: an exec without its file name (shown as "None", as it was)
        if shell:
            severity, what = "high", f"a shell, {p.filename}"
        elif before.pid == p.pid and os.path.basename(before.filename or "") == "env":
            severity, what = "low", f"{p.filename} (started by env, e.g. a #! line)"
        else:
            severity, what = "medium", p.filename
        out.append(Finding(inv.n, severity, "exec", f"pid {p.pid} executed {what}", (p.seq,)))
    return out


def _file_findings(inv: InvocationEvidence, launched: ClientLaunched) -> list[Finding]:
    watched = os.path.normpath(launched.source) if launched.source else None
    own = _own_dirs(launched)
    out = []
    for e, paths in resolved_files(inv, launched):
        for (raw, dfd), path in zip([(e.path, e.dfd), (e.old_path or "", e.old_dfd)], paths,
                                    strict=False):
            finding = _file_finding(e, path, raw, dfd, launched, watched, own)
            if finding is not None:
                severity, kind, detail = finding
                if e.op == "open" and e.fd is not None and e.fd < 0:
                    detail += f" (refused: error {-e.fd})"   # e.g. the sandbox's EROFS
                out.append(Finding(inv.n, severity, kind, detail, (e.seq,)))
    return out


# A process's own /proc settings (the JVM writes /proc/self/coredump_filter); not the entries
# that lead elsewhere (fd/3 may be the watched input, root/ and cwd/ are whole trees).
_PROC_SETTING = re.compile(r"/proc/(self|thread-self|\d+)/(?!fd/|cwd/|root/|map_files/|task/)"
                           r"[^/]+")


def _own_setting(path: str, pid: int) -> bool:
    m = _PROC_SETTING.fullmatch(path)
    return m is not None and m.group(1) in ("self", "thread-self", str(pid))


def _file_finding(f, path, raw, dfd, launched: ClientLaunched, watched,
                  own) -> tuple[str, str, str] | None:
    """(severity, kind, detail) for one path of one file operation, or None if unremarkable;
    the client's own places: its working directory, its task's outputs folder, its own /tmp
    and /dev/shm in the sandbox (a semaphore there is its own; the host's is low, below); the
    task's inputs, given it to read."""
    if f.op in SOURCE_BY_DESCRIPTOR:   # the kernel's view of the file behind the descriptor
        return ("high", "source-write",
                f"pid {f.pid} {f.op} of a file of the watched input, by descriptor")
    if path is None:
        where = (f"{raw!r} relative to fd {dfd}, not opened in its view" if raw and dfd != AT_FDCWD
                 else f"{raw!r} relative to a working directory not known" if raw
                 else "a path the kernel could not read in full")
        return "low", "unresolved-path", f"pid {f.pid} {f.op} {where} (location not resolved)"
    if watched and _under(path, watched):   # the watched input, or any file of its tree
        return ("high", "source-write", f"pid {f.pid} {f.op} of the watched input for "
                "writing") if f.writes else None
    given = [p for p in (launched.inputs, *launched.read_only) if p]
    if not f.writes and any(_under(path, p) for p in given):   # an input: given it to read
        return None
    if (any(_under(path, place) for place in (launched.cwd, launched.outputs) if place)
            or launched.in_scratch(path) or path in HARMLESS_DEVICES
            or path.startswith("/dev/pts/") or _own_setting(path, f.pid)):
        return None
    if f.writes:
        benign = path.startswith("/dev/shm/sem.") or any(
            _under(path, os.path.join(o, "__pycache__")) for o in own)
        return ("low" if benign else "medium"), "write-outside", \
            f"pid {f.pid} {f.op} {path} outside its working directory" + \
            (" (an interpreter's cache or semaphore)" if benign else "")
    if _sensitive(path):   # before the own-directory exemption: ~/.ssh stays medium
        return "medium", "read", f"pid {f.pid} opened {path}"
    if any(_under(path, o) for o in own) or path.startswith(f"/proc/{f.pid}/"):
        return None
    if not path.startswith(SYSTEM_PREFIXES):
        return "low", "read", f"pid {f.pid} opened {path} (not an input, not a system library)"
    return None


def _connect_findings(inv: InvocationEvidence, ports: set[int | None],
                      endpoint: str) -> list[Finding]:
    out, probed = [], probed_only(inv)
    for c in inv.connects:
        if is_given(c.address, c.port, ports) or (c.address, c.port) in probed:
            continue
        if c.family in ("0", "AF_UNSPEC"):   # connect(2): a datagram socket dissolving its peer
            continue
        where = f"{c.address}:{c.port}" if c.address else c.family
        how = (f" ({connect_outcome(c.result)})" if c.result == EINPROGRESS
               else f" (result {c.result})")
        out.append(Finding(inv.n, "low" if c.family == "AF_UNIX" else "medium",
                           "other-connection", f"pid {c.pid} connected to {where}{how}, not "
                           f"the {endpoint}", (c.seq,)))
    return out


def coverage(ev: ScenarioEvidence) -> tuple[bool, str]:
    """Did the kernel deliver every file, exec and connect event of every invocation?"""
    gaps = []
    for n in sorted(ev.invocations):
        final = ev.invocations[n].final
        counters = final.counters if final else {}
        inv = ev.invocations[n]
        if "file_ops" not in counters or "connects" not in counters:
            gaps.append(f"invocation {n}: no kernel file/connect events (collector "
                        f"{ev.collector})")
        elif counters.get("lost_events"):
            gaps.append(f"invocation {n}: {counters['lost_events']} kernel events lost")
        elif (len(inv.files), len(inv.connects)) != (counters["file_ops"], counters["connects"]):
            gaps.append(f"invocation {n}: {len(inv.files)} of {counters['file_ops']} file and "
                        f"{len(inv.connects)} of {counters['connects']} connect events arrived")
    if not ev.invocations:
        gaps.append("no invocation ran")
    if gaps:
        return False, "incomplete: " + "; ".join(gaps)
    return True, "complete: every file, exec and connect event of the client's tree was seen"


def findings(ev: ScenarioEvidence) -> list[Finding]:
    out = []
    for n in sorted(ev.invocations):
        inv = ev.invocations[n]
        launched = inv.launched
        if launched is None:
            continue
        ports = given_ports(ev, inv)
        out += (_exec_findings(inv, launched) + _file_findings(inv, launched)
                + _connect_findings(inv, ports, endpoint_name(ev)))
    return _merge(out)


def _merge(found: list[Finding]) -> list[Finding]:
    """One finding per (invocation, kind, detail): a loop opening a file 256 times is one."""
    merged: dict[tuple, Finding] = {}
    for f in found:
        key = (f.invocation, f.kind, f.detail)
        if key in merged:
            old = merged[key]
            merged[key] = Finding(old.invocation, old.severity, old.kind, old.detail,
                                  old.evidence + f.evidence)
        else:
            merged[key] = f
    order = {"high": 0, "medium": 1, "low": 2}
    return sorted(merged.values(), key=lambda f: (order[f.severity], f.invocation, f.kind))
