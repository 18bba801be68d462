"""What the client's tree did to the task's servers, from the kernel's records: which server
process it ended (a signal it sent ended it, or the process exited after the client signalled
it) or stopped. An attempt whose server died by such an act is the client's failure, never the
lab's (grading.py), and the reasons of service-kept name the act."""

from dataclasses import dataclass

from sessions.stream.events import ServerRecord
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence
from sessions.stream.operations import OWN, SERVER, WATCHED, ProcessLife, SignalObserved

STOPS = ("SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU")
DELIVERED = (0, 2)            # SignalObserved.result: delivered, or already pending


@dataclass(frozen=True)
class Act:
    invocation: int
    server: str
    pid: int                  # the server's process it ended or stopped
    line: str                 # what it did, in words
    seq: int                  # the event that shows it


def watched_pids(inv: InvocationEvidence) -> dict[str, int]:
    """The process of each server the lab watched through the invocation (the one it started:
    a master), by name; {} when it watched none (no operations probes, an older archive)."""
    record = watched_record(inv)
    pids = record.fields.get("pids", {}) if record is not None else {}
    return {str(k): int(v) for k, v in pids.items()} if isinstance(pids, dict) else {}


def watched_record(inv: InvocationEvidence) -> ServerRecord | None:
    return next((r for r in inv.harness if r.event == WATCHED), None)


def _signalled(inv: InvocationEvidence, pid: int, before: int) -> SignalObserved | None:
    """The client's last signal that reached this process before `before` (ns)."""
    sent = [s for s in inv.signals if s.target == pid and s.signal and s.t_ns <= before
            and s.result in DELIVERED]
    return sent[-1] if sent else None


def ended_how(life: ProcessLife, inv: InvocationEvidence) -> str:
    """How a server's process ended, in words: by whose signal, or by itself (and whether the
    client had signalled it just before)."""
    if life.signal:
        who = ("the client's pid" if life.sender_whose == OWN
               else "the kernel" if life.sender_whose == "kernel" else "another process, pid")
        sender = "" if life.sender is None or who == "the kernel" else f" {life.sender}"
        return f"was ended by {life.signal_name} from {who}{sender}"
    code = (life.status or 0) >> 8
    before = _signalled(inv, life.pid, life.t_ns)
    after = (f" after the client's pid {before.pid} sent it {before.name}"
             if before is not None else "")
    return f"exited by itself (exit status {code}){after}"


def program_acts(ev: ScenarioEvidence) -> list[Act]:
    """Each server process the client's tree ended or stopped, in invocation order."""
    acts = []
    for n in sorted(ev.invocations):
        inv = ev.invocations[n]
        for life in inv.lives:
            if life.kind != "exited" or life.whose != SERVER:
                continue
            if life.by_client or (not life.signal and _signalled(inv, life.pid, life.t_ns)):
                acts.append(Act(n, life.server, life.pid,
                                f"server {life.server} pid {life.pid} {ended_how(life, inv)}",
                                life.seq))
        for s in inv.signals:
            if s.whose == SERVER and s.name in STOPS and s.result in DELIVERED:
                acts.append(Act(n, s.server, s.target or 0, f"server {s.server} pid {s.target} "
                                f"was stopped by {s.name} from the client's pid {s.pid}", s.seq))
    return acts


def explains(acts: list[Act], n: int, record: ServerRecord) -> Act | None:
    """The client's act behind one of the lab's records of a failure in invocation n: a
    server's restart (by the dead process's pid; an older record names none: by the server),
    or what a server the client had ended or stopped by then made fail (the verifier, the
    proxy's upstream)."""
    if record.event.endswith("_restarted"):
        name, pid = record.event.removesuffix("_restarted"), record.fields.get("pid")
        return next((a for a in acts if a.server == name and (n == 0 or a.invocation <= n)
                     and (pid is None or a.pid == pid)), None)
    return next((a for a in acts if a.invocation <= n), None)
