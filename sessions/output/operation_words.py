"""The words for what the kernel saw a client do to processes and files (signals, truncations,
process lifetimes): one phrase each, for the timeline's marks and the event lines alike."""

from sessions.stream.operations import ProcessLife, SignalObserved, TruncateObserved

_RESULTS = {1: "ignored", 2: "already pending", 3: "queue full", 4: "without its info"}


def whom(s: SignalObserved) -> str:
    if s.whose == "server":
        return f"server {s.server}" + (f" ({s.role})" if s.role else "") + f" pid {s.target}"
    if s.whose == "own":
        return f"its own pid {s.target}"
    return f"other pid {s.target} {s.target_comm}".rstrip()


def signal_label(s: SignalObserved) -> str:
    """A signal sent ('SIGHUP → server app (endpoint) pid 12 by kill(12)'), or a call as
    asked ('kill(-1, SIGTERM) → -1 EPERM')."""
    asked = f"{s.syscall}({s.asked}{f', {s.asked_tid}' if s.asked_tid else ''}, {s.name})"
    if s.target is None:
        return asked + (f" → {s.result}" if s.result else "")
    result = _RESULTS.get(s.result, "")
    return f"{s.name} → {whom(s)} by {asked}" + (f" ({result})" if result else "")


def truncate_label(t: TruncateObserved) -> str:
    writers = ("another process had it open for writing" if t.others_writing
               else "no other process had it open for writing" if t.others_writing is False
               else f"writers not known: {t.why}")
    refused = f" refused ({t.result})" if t.result < 0 else ""
    return f"truncated {t.name} by {t.how} to {t.length}{refused}; {writers}"


def life_label(p: ProcessLife) -> str:
    who = f"{p.server} pid {p.pid} {p.comm}" if p.whose == "server" else f"pid {p.pid} {p.comm}"
    if p.kind == "started":
        return f"{who} started (by pid {p.parent})"
    if not p.signal:
        return f"{who} exited {(p.status or 0) >> 8}"
    by = {"own": f"the client's pid {p.sender}", "kernel": "the kernel"}.get(
        p.sender_whose, f"pid {p.sender}" if p.sender is not None else "a sender not seen")
    return f"{who} ended by {p.signal_name} from {by}"
