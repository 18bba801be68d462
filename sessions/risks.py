"""Risk findings: what the kernel saw a graded client do that a backup client has no need to.

Reported with a severity, never as pass/fail: a finding is a question for the reviewer, not a
verdict. Paths are resolved against the invocation's working directory (a client that chdir()s
is resolved as if it had not: the finding names the path as the client passed it).
"""

import os
from dataclasses import dataclass

from sessions.evidence import InvocationEvidence, ScenarioEvidence

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox", "csh", "tcsh"}
# Read-only opens under these are the loader, the interpreter and system configuration.
SYSTEM_PREFIXES = ("/usr/", "/lib/", "/lib64/", "/etc/", "/proc/self/", "/proc/thread-self/",
                   "/sys/devices/system/cpu/", "/dev/pts/")
HARMLESS_DEVICES = {"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty",
                    "/dev/full"}
SENSITIVE = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/root/.ssh/", "/home/")
AT_FDCWD = -100


@dataclass(frozen=True)
class Finding:
    invocation: int
    severity: str          # high, medium, low
    kind: str
    detail: str
    evidence: tuple[int, ...]


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _resolve(path: str, dfd: int, cwd: str) -> str | None:
    if os.path.isabs(path):
        return os.path.normpath(path)
    if dfd != AT_FDCWD:
        return None   # relative to a directory descriptor we did not follow
    return os.path.normpath(os.path.join(cwd, path))


def _own_files(inv: InvocationEvidence) -> list[str]:
    """The command's own files (an interpreter's script and its directory) may be read."""
    own = []
    for arg in inv.launched.argv:
        if os.path.isabs(arg) and arg != inv.launched.source:
            own += [arg, os.path.dirname(arg)]
    return own


def _exec_findings(inv: InvocationEvidence) -> list[Finding]:
    execs = [p for p in inv.processes if p.kind == "exec"]
    out = []
    for p in execs[1:]:   # the first exec is the launch itself
        name = os.path.basename(p.filename or "?")
        shell = name in SHELLS
        out.append(Finding(inv.n, "high" if shell else "medium", "exec",
                           f"pid {p.pid} executed {'a shell, ' if shell else ''}{p.filename}",
                           (p.seq,)))
    return out


def _file_findings(inv: InvocationEvidence) -> list[Finding]:
    cwd, source = inv.launched.cwd, os.path.normpath(inv.launched.source)
    own = _own_files(inv)
    out = []
    for f in inv.files:
        paths = [f.path] + ([f.old_path] if f.old_path else [])
        for raw in paths:
            path = _resolve(raw, f.dfd, cwd)
            where = path or f"{raw} (relative to fd {f.dfd})"
            if path == source:
                if f.writes:
                    out.append(Finding(inv.n, "high", "source-write",
                                       f"pid {f.pid} {f.op} of the source file for writing",
                                       (f.seq,)))
                continue
            if path is not None and _under(path, cwd):
                continue
            if f.writes:
                if path in HARMLESS_DEVICES or (path or "").startswith("/dev/pts/"):
                    continue
                out.append(Finding(inv.n, "medium", "write-outside",
                                   f"pid {f.pid} {f.op} {where} outside its working directory",
                                   (f.seq,)))
            elif path is None or not (path in HARMLESS_DEVICES
                                      or path.startswith(SYSTEM_PREFIXES)
                                      or any(_under(path, o) for o in own)):
                out.append(Finding(inv.n, "medium" if path and path.startswith(SENSITIVE)
                                   else "low", "read",
                                   f"pid {f.pid} opened {where} (not the source, not a system "
                                   "library)", (f.seq,)))
            elif path.startswith(SENSITIVE):
                out.append(Finding(inv.n, "medium", "read", f"pid {f.pid} opened {where}",
                                   (f.seq,)))
    return out


def _connect_findings(inv: InvocationEvidence, ports: set[int]) -> list[Finding]:
    out = []
    for c in inv.connects:
        if c.address == "127.0.0.1" and c.port in ports:
            continue
        where = f"{c.address}:{c.port}" if c.address else c.family
        out.append(Finding(inv.n, "low" if c.family == "AF_UNIX" else "medium",
                           "other-connection", f"pid {c.pid} connected to {where} "
                           f"(result {c.result}), not the receiver", (c.seq,)))
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
        if inv.launched is None:
            continue
        ports = {ev.started.receiver_port} | {r.fields.get("port") for r in inv.proxy
                                              if r.event == "listening"}
        out += _exec_findings(inv) + _file_findings(inv) + _connect_findings(inv, ports)
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
