"""What each observer needs (NEEDED_FOR), and how a check says what it found: a Capability
that is available, or missing with the fix. Kept apart from Capability, so that stays a plain
record."""

from probes.capability import Capability

BCC = "bcc-collector"
STRACE = "strace-collector"  # the fallback when BCC cannot load
PACKETS = "packet-capture"
BOUNDARY = "client-boundary"   # the client's cgroup, socket hooks, sandbox and lab network
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
    "lab-network": (BOUNDARY,),
    "btf": (BCC,),
    "kprobes": (),
    "strace": (STRACE,),
    "tcpdump": (),
    "bpftrace": (),
    "tshark": (),
    "nginx": (),
    "netem": (),
    "fault-injection": (),
}


def needed_for(name: str) -> tuple[str, ...]:
    return NEEDED_FOR.get(name, ())


def missing_for(caps: list[Capability], observer: str) -> list[Capability]:
    """The unavailable capabilities that `observer` (BCC or PACKETS) cannot do without."""
    return [c for c in caps if not c.available and observer in needed_for(c.name)]


def ok(name: str, detail: str) -> Capability:
    return Capability(name, True, detail)


def missing(name: str, detail: str, fix: str) -> Capability:
    return Capability(name, False, detail, fix)


def why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
