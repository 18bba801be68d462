"""Clauses about how the client operated the task's servers, judged from the kernel's records of
its operations (sessions/stream/operations.py): service-kept (a server's process evlab started
lives through every invocation), signals-as-allowed (the client's tree signalled only what the
contract's [operations] signals allows; its own processes are its own business) and
no-live-truncate (it truncated no file another process held open for writing).

A seen breach fails whatever else is missing; a pass needs the whole view: the collector's
operations probes (BCC) and no kernel event lost."""

from sessions.judging.judgement import ENVIRONMENT, HARNESS, PASS, Judgement, failed, seqs, unknown
from sessions.judging.server_acts import ended_how, watched_pids, watched_record
from sessions.judging.views import counter, invocations
from sessions.spec.contract import Thresholds
from sessions.stream.evidence import ScenarioEvidence
from sessions.stream.operations import CAPPED, OTHER, OWN, SERVER, WATCHED, SignalObserved

# what says the kernel did not see the client's operations
BLIND = ("operations", "kernel-events")
SHOWN = 3   # breaches a reason names before it counts the rest


def operations_unseen(ev: ScenarioEvidence) -> Judgement | None:
    """Why the kernel's view of the client's operations is incomplete (None: it is whole): no
    operations probes on this machine (the environment's), an invocation without the
    collector's final counters (the harness's), or events lost (the client's flood)."""
    blind = [m for m in ev.missing if m.name in BLIND]
    if blind:
        return unknown(f"no kernel view of signals, truncations or the servers' processes: "
                       f"{blind[0].detail}", seqs(blind), ENVIRONMENT)
    invs = invocations(ev)
    if not invs:
        return unknown("no invocation ran", failure_class=HARNESS)
    for inv in invs:
        capped = [r for r in inv.harness if r.event == CAPPED]
        if capped:
            return unknown(f"invocation {inv.n}: the client's tree made more than "
                           f"{capped[0].fields.get('cap', 0):,} signals, truncations and "
                           "processes' ends: those past them were not kept", seqs(capped))
        lost = counter(inv, "lost_events")
        if lost is None:
            return unknown(f"invocation {inv.n}: no final kernel counters", (),
                           HARNESS)
        if lost:
            return unknown(f"invocation {inv.n}: the kernel lost {lost:,} events: its "
                           "operations records are incomplete", seqs([inv.final]))
    return None


def _targets(ev: ScenarioEvidence, named: tuple[str, ...]) -> list[str]:
    """The task's servers a contract names, by name or by role."""
    roles = ev.started.roles
    return [name for name, role in roles.items() if name in named or role in named]


def service_kept(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    kept = _targets(ev, t.operations.kept)
    if not kept:
        return unknown(f"[operations] kept names {', '.join(t.operations.kept) or 'nothing'}: "
                       "no server of this task", failure_class=HARNESS)
    gap = operations_unseen(ev)
    for inv in invocations(ev):
        pids = watched_pids(inv)
        ended = [life for life in inv.lives if life.kind == "exited" and life.whose == SERVER
                 and life.server in kept and pids.get(life.server) == life.pid]
        if ended:
            life = ended[0]
            return failed(f"invocation {inv.n}: server {life.server} ({life.role}) pid "
                          f"{life.pid} {ended_how(life, inv)}",
                          seqs(ended, [watched_record(inv)]))
        unwatched = [name for name in kept if name not in pids]
        if gap is None and unwatched:
            return unknown(f"invocation {inv.n}: the process of server {unwatched[0]} was not "
                           f"watched (no {WATCHED} record)", (), HARNESS)
    if gap is not None:
        return gap
    lives = [life for inv in invocations(ev) for life in inv.lives]
    return Judgement(PASS, f"the process of {', '.join(kept)} lived through every invocation "
                           "(the kernel saw every end of the servers' processes)",
                     tuple(seqs(lives)))


def _breach(s: SignalObserved, t: Thresholds) -> bool:
    if s.target is None or s.signal == 0 or s.whose == OWN:
        return False   # a call as asked, a probe (nothing sent), or its own tree's business
    return s.whose == OTHER or not t.operations.allows(s.name, s.server, s.role)


def _signal_line(n: int, s: SignalObserved) -> str:
    target = (f"server {s.server} ({s.role}) pid {s.target}" if s.whose == SERVER
              else f"pid {s.target} ({s.target_comm}), not the client's nor a server's")
    return f"invocation {n}: {s.name} to {target} from the client's pid {s.pid} by {s.syscall}"


def signals_as_allowed(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    breaches = [(inv.n, s) for inv in invocations(ev) for s in inv.signals if _breach(s, t)]
    if breaches:
        more = f"; and {len(breaches) - SHOWN} more" if len(breaches) > SHOWN else ""
        return failed("; ".join(_signal_line(n, s) for n, s in breaches[:SHOWN]) + more
                      + f" ({_allowed(t)})", seqs([s for _, s in breaches]))
    gap = operations_unseen(ev)
    if gap is not None:
        return gap
    sent = [s for inv in invocations(ev) for s in inv.signals
            if s.target is not None and s.signal and s.whose == SERVER]
    mine = sum(1 for inv in invocations(ev) for s in inv.signals if s.whose == OWN)
    what = (f"{len(sent)} signal(s) to the servers, each allowed ({_allowed(t)})" if sent
            else "no signal to a server or any other process")
    return Judgement(PASS, what + (f"; {mine} within its own tree" if mine else ""),
                     tuple(seqs(sent)))


def _allowed(t: Thresholds) -> str:
    allowed = t.operations.signals
    return ("allowed: " + ", ".join(f"{name} to {' or '.join(to)}"
                                    for name, to in allowed.items())
            if allowed else "no signal is allowed")


def no_live_truncate(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    done = [(inv.n, c) for inv in invocations(ev) for c in inv.truncations if c.result >= 0]
    live = [(n, c) for n, c in done if c.others_writing]
    if live:
        n, c = live[0]
        return failed(f"invocation {n}: pid {c.pid} truncated {c.name} by {c.how} (to "
                      f"{c.length:,} bytes) while another process had it open for writing "
                      f"({c.writers} writer(s), {c.own} of them its own)"
                      + (f"; and {len(live) - 1} more" if len(live) > 1 else ""),
                      seqs([c for _, c in live]))
    gap = operations_unseen(ev)
    if gap is not None:
        return gap
    untold = [(n, c) for n, c in done if c.others_writing is None]
    if untold:
        n, c = untold[0]
        return unknown(f"invocation {n}: pid {c.pid} truncated {c.name} by {c.how}: whether "
                       f"another process had it open for writing is not known ({c.why})",
                       seqs([c for _, c in untold]))
    return Judgement(PASS, f"{len(done)} truncation(s), none of a file another process had "
                           "open for writing" if done else "no truncation",
                     tuple(seqs([c for _, c in done])))
